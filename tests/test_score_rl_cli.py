"""`ctxkit score-rl`: actions on files or generated scenarios, rewards and dataset export."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from ctxkit.cli import cli
from ctxkit.simulate import generate, save

SMALL = ["--tokens", "2000"]
# three actions that give three different outputs (the default chain is often summarize_old alone)
ACTIONS = ["--action", "default", "--action", "summarize_old:recent", "--action", "offload"]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["score-rl", *args], catch_exceptions=False)


def lines(text: str) -> list[dict]:  # type: ignore[type-arg]
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def test_scenarios_to_stdout_with_summary_on_stderr() -> None:
    r = run("--scenario", "long_chat", "--scenario", "all_p1", *SMALL, *ACTIONS)
    assert r.exit_code == 0, r.stderr
    rows = lines(r.stdout)
    assert len(rows) == 2 * 3
    assert [row["action"]["name"] for row in rows[:3]] == ["default", "summarize_old:recent", "offload"]
    for row in rows:
        assert set(row) >= {"state_before", "action", "reward", "state_after"}
        assert -2.0 <= row["reward"] <= 2.0
        assert row["outcome"]["needles_total"] is not None
        assert row["state_after"]["tokens"] <= row["state_before"]["limit"]
    header = r.stderr.splitlines()[0].split()
    assert header[:4] == ["action", "n", "reward", "fit"]
    assert "6 rows written to stdout (oneshot, 3 actions)" in r.stderr


def test_parquet_file_matches_the_jsonl_of_the_same_run(tmp_path: Path) -> None:
    import polars as pl

    common = ["--scenario", "fragmented", "--count", "2", *SMALL, *ACTIONS]
    assert run(*common, "-o", str(tmp_path / "rl.jsonl")).exit_code == 0
    r = run(*common, "--format", "parquet", "-o", str(tmp_path / "rl.parquet"))
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    jsonl = lines((tmp_path / "rl.jsonl").read_text())
    frame = pl.read_parquet(tmp_path / "rl.parquet")
    assert frame.height == len(jsonl) == 6
    assert frame.to_dicts() == jsonl


@pytest.mark.parametrize("export", ["rl", "dpo", "sft"])
def test_exports_are_the_same_bytes_however_slow_the_machine(
    export: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loaded machine (here a clock that jumps 10 s at every reading: every step "takes"
    seconds) exports the same bytes as an idle one: no reward term, no field is a duration."""
    import time

    common = ["--scenario", "needle_early", "--scenario", "long_chat", *SMALL, *ACTIONS]
    assert run(*common, "--export", export, "-o", str(tmp_path / "idle.jsonl")).exit_code == 0
    ticks = iter(range(0, 10**9, 10))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(ticks)))
    r = run(*common, "--export", export, "-o", str(tmp_path / "loaded.jsonl"))
    assert r.exit_code == 0, r.stderr
    idle, loaded = (tmp_path / "idle.jsonl").read_bytes(), (tmp_path / "loaded.jsonl").read_bytes()
    assert idle and idle == loaded


def test_replay_mode_records_the_session_cost() -> None:
    r = run("--scenario", "growing_session", "--tokens", "8000", "--mode", "replay", *ACTIONS)
    assert r.exit_code == 0, r.stderr
    for row in lines(r.stdout):
        o = row["outcome"]
        assert o["mode"] == "replay" and o["compactions"] >= 1
        assert o["tokens_sent"] > o["original_tokens"]


def test_export_dpo_and_sft(tmp_path: Path) -> None:
    r = run("--scenario", "long_chat", "--scenario", "code_heavy", *SMALL, "--export", "dpo")
    assert r.exit_code == 0, r.stderr
    pairs = lines(r.stdout)
    assert len(pairs) == 2
    for p in pairs:
        assert list(p) == ["input", "preferred_output", "non_preferred_output"]
        assert [m["role"] for m in p["input"]["messages"]] == ["system", "user"]
        assert p["preferred_output"][0]["role"] == "assistant"
        assert p["non_preferred_output"][0]["role"] == "assistant"
    assert "2 preference pairs written" in r.stderr
    r = run("--scenario", "long_chat", *SMALL, "--export", "dpo", "--dpo-shape", "trl")
    assert r.exit_code == 0, r.stderr
    (p,) = lines(r.stdout)
    assert [m["role"] for m in p["prompt"]] == ["system", "user"]
    assert p["chosen"][0]["role"] == p["rejected"][0]["role"] == "assistant"
    assert p["chosen_reward"] > p["rejected_reward"]
    out = tmp_path / "sft.jsonl"
    r = run("--scenario", "long_chat", *SMALL, "--export", "sft", "-o", str(out))
    assert r.exit_code == 0, r.stderr
    (line,) = lines(out.read_text())
    assert list(line) == ["messages"]
    assert [m["role"] for m in line["messages"]] == ["system", "user", "assistant"]


def test_files_with_their_simulate_sidecar(tmp_path: Path) -> None:
    ts = [generate("log_heavy", seed=s, tokens=2000) for s in (1, 2)]
    save(ts, str(tmp_path / "sims") + "/")
    r = run(str(tmp_path / "sims"), "--limit", "1200", *ACTIONS)
    assert r.exit_code == 0, r.stderr
    rows = lines(r.stdout)
    assert {row["transcript"] for row in rows} == {"log_heavy-1", "log_heavy-2"}
    for row in rows:
        assert row["state_before"]["limit"] == 1200
        assert row["outcome"]["needles_total"] == 2


def test_actions_file(tmp_path: Path) -> None:
    f = tmp_path / "actions.yaml"
    f.write_text("- name: mine\n  chain: [mask_observations, summarize_old]\n")
    r = run("--scenario", "long_chat", *SMALL, "--actions", str(f))
    assert r.exit_code == 0, r.stderr
    (row,) = lines(r.stdout)
    assert row["action"] == {
        "name": "mine",
        "chain": ["mask_observations", "summarize_old"],
        "params": "{}",
        "recovery_mode": "fresh_start",
    }


def test_list_actions() -> None:
    r = run("--list-actions")
    assert r.exit_code == 0
    names = [line.split("\t")[0] for line in r.stdout.splitlines()]
    assert "default" in names and "mask_observations" in names and len(names) >= 8


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "give transcript files, or --scenario NAME / --scenarios all"),
        (["--scenario", "nope"], 2, "unknown scenario 'nope'; known: {scenarios}"),
        (
            ["--scenarios", "long_chat", "--format", "parquet"],
            2,
            "--format parquet needs -o FILE (Parquet is not written to stdout)",
        ),
        (["--scenarios", "long_chat", "--action", "nope"], 2, "unknown action 'nope'; known: {actions}"),
        (["/nonexistent/x.jsonl"], 1, "/nonexistent/x.jsonl: no such file or directory"),
    ],
)
def test_usage_errors(args: list[str], code: int, message: str) -> None:
    from ctxkit.rl import builtin_actions
    from ctxkit.simulate import SCENARIOS

    r = run(*args)
    assert r.exit_code == code
    names = {
        "scenarios": ", ".join([*sorted(SCENARIOS), "all"]),
        "actions": ", ".join(sorted(a.name for a in builtin_actions())),
    }
    assert r.stderr == f"Error: {message.format(**names)}\n"


def test_bad_actions_file_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    f.write_text("- {chain: [nope]}\n")
    r = run("--scenario", "long_chat", "--actions", str(f))
    assert r.exit_code == 2  # a bad settings file, like a bad config (issue 16)
    assert f"{f}: action 1: unknown strategy 'nope' in chain" in r.stderr


def test_failed_run_leaves_no_output(tmp_path: Path) -> None:
    out = tmp_path / "rl.jsonl"
    f = tmp_path / "a.yaml"
    f.write_text("- {chain: [nope]}\n")
    run("--scenario", "long_chat", "--actions", str(f), "-o", str(out))
    assert not out.exists() and list(tmp_path.iterdir()) == [f]


@pytest.mark.parametrize("where", ["dir", "missing"])
def test_unwritable_output_is_one_line_and_writes_nothing(tmp_path: Path, where: str) -> None:
    out = tmp_path if where == "dir" else tmp_path / "nodir" / "x.jsonl"
    r = run("--scenario", "long_chat", *SMALL, "--action", "default", "-o", str(out))
    assert r.exit_code == 1
    assert "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "cannot write" in line and str(out) in line
    assert list(tmp_path.iterdir()) == []


def test_output_file_gets_normal_permissions(tmp_path: Path) -> None:
    import os

    out = tmp_path / "rl.jsonl"
    mask = os.umask(0o022)
    try:
        r = run("--scenario", "long_chat", *SMALL, "--action", "default", "-o", str(out))
    finally:
        os.umask(mask)
    assert r.exit_code == 0, r.stderr
    assert out.stat().st_mode & 0o777 == 0o644


def test_actions_file_params_are_checked_like_the_config(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    f.write_text("- {name: tiny, chain: [offload], params: {offload: {threshold_bytes: -5}}}\n")
    r = run("--scenario", "long_chat", *SMALL, "--actions", str(f), "-o", str(tmp_path / "o"))
    assert r.exit_code == 2  # as the config's own check exits
    assert "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.endswith(
        f"{f}: action 1 (tiny): params.offload.threshold_bytes: -5 is out of range; "
        "allowed: an integer >= 1"
    )
    assert list(tmp_path.iterdir()) == [f]


def _rows_by_transcript(text: str) -> dict[str, dict]:  # type: ignore[type-arg]
    return {row["transcript"]: row for row in lines(text)}


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("explicit", [False, True])
def test_single_file_of_several_gets_its_ground_truth(
    tmp_path: Path, fmt: str, explicit: bool
) -> None:
    ts = [generate("long_chat", seed=0, tokens=2000), generate("fragmented", seed=0, tokens=2000)]
    out = tmp_path / "x.jsonl"
    save(ts, str(out), fmt)
    truth = ["--truth", str(tmp_path / "x.truth.jsonl")] if explicit else []
    r = run(str(out), *truth, "--action", "default")
    assert r.exit_code == 0, r.stderr
    assert "warning" not in r.stderr
    rows = _rows_by_transcript(r.stdout)
    assert list(rows) == ["x#1", "x#2"]
    for row, t in zip(rows.values(), ts, strict=True):
        gt = t.metadata["ground_truth"]
        assert row["state_before"]["limit"] == gt["limit"]
        assert row["state_before"]["p1"] == len(gt["p1_ids"])
        assert row["outcome"]["compactions"] == 1
        assert row["outcome"]["needles_total"] == len(gt["needles"])
    r = run(str(out), *truth, *ACTIONS, "--export", "dpo")
    assert r.exit_code == 0, r.stderr
    assert len(lines(r.stdout)) == 2


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_p1_units_count_in_formats_without_priorities(tmp_path: Path, fmt: str) -> None:
    t = generate("all_p1", seed=3, tokens=2000)
    save([t], str(tmp_path / "units") + "/")
    save([t], str(tmp_path / fmt) + "/", fmt)
    got = {}
    for kind, ext in (("units", "jsonl"), (fmt, "json")):
        r = run(str(tmp_path / kind / f"all_p1-3.{ext}"), "--action", "default")
        assert r.exit_code == 0, r.stderr
        (row,) = lines(r.stdout)
        got[kind] = row
    assert got[fmt]["state_before"]["p1"] == got["units"]["state_before"]["p1"] > 0
    priority = [got[k]["outcome"]["priority_preserved"] for k in ("units", fmt)]
    assert priority[0] == priority[1] < 1.0
    assert got[fmt]["reward"] == pytest.approx(got["units"]["reward"], abs=0.01)


def test_warns_once_when_a_transcript_matches_no_record(tmp_path: Path) -> None:
    ts = [generate("long_chat", seed=s, tokens=2000) for s in (0, 1)]
    out = tmp_path / "x.jsonl"
    save(ts, str(out), "openai")
    other = tmp_path / "other.truth.jsonl"
    rec = {"id": "zzz", "file": "elsewhere.json", "line": None, "ground_truth": {"limit": 900}}
    other.write_bytes(orjson.dumps(rec) + b"\n")
    r = run(str(out), "--truth", str(other), "--action", "default")
    assert r.exit_code == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning")]
    assert len(warnings) == 1
    assert str(other) in warnings[0] and "x#1" in warnings[0]
    assert all(row["outcome"]["needles_total"] is None for row in lines(r.stdout))


DMUX = "claude-code/applab-nl__dmux__logs-chat-json@eef6c282__session-a9185eb7.jsonl"
AIDER_SMALL = "aider/Aider-AI__aider__chat-history__session0013_2024-08-06T085514.md"
CODEX = "codex/AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
FEW = ["--action", "default", "--action", "summarize_old", "--action", "prioritize_recent"]


def _own_limit_and_tokens(path: Path) -> tuple[int, int]:
    """The log's own target's limit and the figure `count` gives it, as score-rl must say them."""
    from ctxkit.config.settings import compact_settings
    from ctxkit.counting import measure
    from ctxkit.formats import read_path

    (t,) = read_path(str(path))
    settings = compact_settings().for_transcript(t)
    return settings.limit, measure(t, settings.tok).total


def test_no_pair_says_why_per_transcript_writes_nothing_and_exits_3(
    realdata: Path, tmp_path: Path
) -> None:
    """Real logs that fit their own target (no --limit): each is named with its tokens, its
    limit and where that came from, and the --limit that makes it compact (or why none does);
    no dataset is written (an old one stays as it was) and the exit is 3."""
    import re

    out = tmp_path / "pairs.jsonl"
    out.write_text("an older dataset\n")
    dmux, aider = realdata / DMUX, realdata / AIDER_SMALL
    r = run(str(dmux), str(aider), *FEW, "--export", "dpo", "-o", str(out))
    assert r.exit_code == 3, r.stderr
    assert out.read_text() == "an older dataset\n"
    assert [p.name for p in tmp_path.iterdir()] == ["pairs.jsonl"]  # no temporary left
    limit, tokens = _own_limit_and_tokens(dmux)
    lines_ = r.stderr.splitlines()
    said = next(line for line in lines_ if line.startswith(f"{dmux}: no preference pair: "))
    assert f"fits its limit {limit:,} (its log's own target, claude-sonnet-4-5 under claude-code)" in said
    assert f": {tokens:,} tokens, nothing to compact; give --limit " in said
    suggested = int(re.search(r"give --limit ([\d,]+) ", said).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert suggested < tokens
    small = next(line for line in lines_ if line.startswith(f"{aider}: no preference pair: "))
    assert "and no --limit makes it compact: " in small
    assert "of its tokens are what no compaction removes" in small
    assert lines_[-1] == (
        "no preference pair to write (2 transcripts scored, none gave one; oneshot, 3 actions): "
        f"nothing written to {out} (exit 3)"
    )
    # to stdout: nothing, and the same exit
    r = run(str(aider), *FEW, "--export", "sft")
    assert r.exit_code == 3 and r.stdout == ""
    assert r.stderr.splitlines()[-1].startswith("no fine-tuning line to write (1 transcript scored")
    # the limit it named makes pairs of that log
    r = run(str(dmux), *FEW, "--export", "dpo", "--limit", str(suggested), "-o", str(out))
    assert r.exit_code == 0, r.stderr
    assert len(lines(out.read_text())) == 1
    assert r.stderr.splitlines()[-1] == f"1 preference pair written to {out} (oneshot, 3 actions)"


def test_no_parquet_dataset_either(realdata: Path, tmp_path: Path) -> None:
    pytest.importorskip("polars")
    out = tmp_path / "pairs.parquet"
    r = run(str(realdata / AIDER_SMALL), *FEW, "--export", "dpo", "-o", str(out))
    assert r.exit_code == 3, r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_log_that_outgrows_its_own_target_gives_pairs_without_a_limit(
    realdata: Path, tmp_path: Path
) -> None:
    """The log's own target holds when no limit is given (config semantics of ca8de89): a real
    Codex rollout, as Codex writes it on a model with a 48,000-token window (the rollout
    records the window; here rewritten from 258,400), outgrows it and is compacted to it."""
    text = (realdata / CODEX).read_text(encoding="utf-8")
    assert text.count('"model_context_window":258400') > 1
    log = tmp_path / "rollout.jsonl"
    log.write_text(text.replace('"model_context_window":258400', '"model_context_window":48000'))
    limit, tokens = _own_limit_and_tokens(log)
    assert tokens > limit  # it outgrows the limit Codex itself works to
    out = tmp_path / "pairs.jsonl"
    r = run(str(log), "--export", "dpo", "--dpo-shape", "trl", "-o", str(out))
    assert r.exit_code == 0, r.stderr
    (pair,) = lines(out.read_text())
    assert pair["chosen"] != pair["rejected"]
    assert pair["chosen_reward"] > pair["rejected_reward"]
    # the budget the pair teaches is the log's own, against the figure the compaction decided on
    prompt = pair["prompt"][1]["content"]
    assert prompt.startswith(f"Budget: {limit:,} tokens; the transcript takes {tokens:,}.")
    r = run(str(log), *FEW[:2], "-o", str(tmp_path / "rl.jsonl"))
    for row in lines((tmp_path / "rl.jsonl").read_text()):
        assert row["state_before"]["limit"] == row["outcome"]["limit"] == limit
        assert row["state_before"]["tokens"] == row["outcome"]["original_tokens"] == tokens
        assert row["state_after"]["tokens"] == row["outcome"]["final_tokens"] < limit
