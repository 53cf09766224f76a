"""`ctxkit guard` end to end: golden files, exit codes, bad flags, debug trace, lazy imports.

Golden cases live in tests/data/guard/cases.json (input, flags, expected exit code); each has
`<case>.out.json` (the --format json line, pretty-printed) and `<case>.out.txt` (the table).
Regenerate them on purpose only: `pytest tests/test_guard_cli.py --regen-goldens`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxkit.cli import cli

DATA = Path(__file__).parent / "data" / "guard"
SAMPLES = Path(__file__).parents[1] / "sample_transcripts"
CASES = json.loads((DATA / "cases.json").read_text())


def run(args: list[str], cwd: Path = DATA, env: dict[str, str] | None = None) -> object:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner(env=env).invoke(cli, args, catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str, golden) -> None:
    spec = CASES[case]
    args = ["guard", spec["input"], *spec["args"]]
    as_json = run([*args, "--format", "json"])
    as_table = run(args)
    assert as_json.exit_code == spec["exit"], as_json.stderr
    assert as_table.exit_code == spec["exit"], as_table.stderr
    got = json.loads(as_json.stdout)
    assert got["exit_code"] == spec["exit"]
    golden(DATA / f"{case}.out.json", json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    golden(DATA / f"{case}.out.txt", as_table.stdout)


def test_golden_cases_cover_every_status_and_feature() -> None:
    statuses = set()
    for case in CASES:
        statuses.add(json.loads((DATA / f"{case}.out.json").read_text())["targets"][0]["status"])
    assert statuses == {"ok", "warn", "compact", "block", "overflow"}
    both = {
        json.loads((DATA / f"{c}.out.json").read_text())["targets"][0]["bound_by"] for c in CASES
    }
    assert both == {"model", "policy"}


def test_worked_example_limit() -> None:
    got = json.loads((DATA / "worked_example.out.json").read_text())
    assert got["targets"][0]["limit"] == 103424


def test_several_targets_choose_first_that_fits() -> None:
    got = json.loads((DATA / "several_targets.out.json").read_text())
    assert [t["decision"] for t in got["targets"]] == ["does not fit", "chosen", "skipped"]
    assert got["chosen"] == "claude-3-5-haiku" and got["verdict"] == "fits"
    assert got["targets"][1]["tokenizer"] == "claude (estimate)"
    assert "an estimate: o200k_base x 1.20" in (DATA / "several_targets.out.txt").read_text()


def test_none_fits_is_final() -> None:
    got = json.loads((DATA / "none_fits.out.json").read_text())
    assert got["verdict"] == "final" and got["chosen"] is None and got["exit_code"] == 5


def test_floor_and_p1_rules_are_named() -> None:
    floor = json.loads((DATA / "policy_floor.out.json").read_text())["targets"][0]
    assert (
        floor["limit"] == 3500 and floor["rule"] == "policy: agent tiny 2000, raised to min_limit"
    )
    p1 = json.loads((DATA / "policy_p1_agent.out.json").read_text())["targets"][0]
    assert p1["limit"] == 4800 and p1["rule"] == "policy: agent lead (P1 +20%)"


def test_schemas_only_case_is_treated_as_fitting() -> None:
    got = json.loads((DATA / "schemas_only.out.json").read_text())["targets"][0]
    assert got["used"] > got["limit"]
    assert got["schemas_only_overflow"] is True and got["status"] == "block"
    assert got["decision"] == "chosen"
    assert got["used"] - got["regions"]["tools"] <= got["limit"]


def test_pending_plan_offloads_the_big_log() -> None:
    got = json.loads((DATA / "pending_overflow.out.json").read_text())["targets"][0]["pending"]
    assert got["fits_as_is"] is False and got["fits_after_plan"] is True
    assert [i["action"] for i in got["items"]] == ["keep", "offload", "keep"]


def test_replay_reports_first_crossings_and_trigger() -> None:
    got = json.loads((DATA / "replay.out.json").read_text())["targets"][0]["replay"]
    first = got["first"]
    assert first["warn"]["message"] <= first["compact"]["message"] <= first["overflow"]["message"]
    assert got["over_hits"] >= 3 and got["trigger"] is not None
    assert got["trigger"]["over_hits_in_hour"] == 3


def test_check_reports_unit_ids() -> None:
    got = json.loads((DATA / "check.out.json").read_text())
    kinds = {(p["kind"], p["unit_id"]) for p in got["problems"]}
    assert ("orphan_result", "m3") in kinds and ("missing_result", "m2") in kinds
    assert ("duplicate_id", "m4") in kinds and ("empty_message", "m4") in kinds


# --- bad flags and bad config: one clear line each ------------------------------------------


BAD = [
    (["--model", "gpt-9"], 2, "unknown model 'gpt-9'; did you mean "),
    (
        ["--agent", "nobody"],
        2,
        "unknown agent 'nobody'; known: coding, verification (add it under context_config.agents)",
    ),
    (
        ["--llm", "unknown"],
        2,
        "unknown LLM type 'unknown'; known: (none configured) (add it under context_config.per_llm)",
    ),
    (
        ["--warn-threshold", "1.5"],
        2,
        "--warn-threshold: 1.5 is out of range; allowed: a number above 0 and up to 1",
    ),
    (
        ["--warn-threshold", "0.99"],
        2,
        "--warn-threshold: 0.99 is above --compact-threshold 0.95; allowed:",
    ),
    (
        ["--window", "8192", "--buffer", "8192", "--max-output", "8192"],
        2,
        "custom: effective limit 8192 - 8192 (buffer) - 8192 (max output) = -8192, no room for input;",
    ),
    (["--config", "missing.yaml"], 2, "missing.yaml: no such config file"),
    (["--tools", "session.in.jsonl"], 1, "session.in.jsonl:2: not valid JSON"),
    (["--tools", "floor.yaml"], 1, "floor.yaml:1: not valid JSON"),
    (["--pending", "tools.json"], 1, "pending output #1: expected a string or"),
    (["--pending", "nope.json"], 1, "nope.json: no such file"),
]


@pytest.mark.parametrize(("flags", "code", "message"), BAD)
def test_bad_flags_one_clear_line(flags: list[str], code: int, message: str) -> None:
    result = run(["guard", "session.in.jsonl", *flags])
    assert result.exit_code == code
    assert result.stdout == ""
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ")
    assert message in last
    assert "Traceback" not in result.stderr


def test_bad_config_file_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "context_config:\n  breaking_strategy:\n    summarize_old:\n      old_threshold: 1.5\n"
    )
    (tmp_path / "t.jsonl").write_text((DATA / "session.in.jsonl").read_text())
    result = run(["guard", "t.jsonl", "--config", "bad.yaml"], cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: bad.yaml: context_config.breaking_strategy.summarize_old.old_threshold: "
        "1.5 is out of range; allowed: a number from 0 to 1"
    )


def test_unknown_fail_on_is_a_usage_error() -> None:
    result = run(["guard", "session.in.jsonl", "--fail-on", "panic"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--fail-on': 'panic' is not one of "
        "'warn', 'compact', 'block', 'overflow'."
    )


def test_explicit_tokenizer_that_cannot_load_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache: p50k_base absent
    result = run(["guard", "session.in.jsonl", "--tokenizer", "p50k_base"])
    assert result.exit_code == 2
    assert "cannot load tiktoken encoding 'p50k_base'" in result.stderr


def test_gpt4o_counts_with_the_bundled_o200k() -> None:
    result = run(["guard", "session.in.jsonl", "--model", "gpt-4o", "--format", "json"])
    target = json.loads(result.stdout)["targets"][0]
    assert target["tokenizer"] == "o200k_base" and "warning" not in result.stderr


def test_debug_traces_the_arithmetic() -> None:
    result = run(["guard", "session.in.jsonl", "--model", "gpt-4-turbo", "--debug"])
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("debug: ")]
    assert (
        "debug: target gpt-4-turbo: effective 128000 - 8192 (buffer) - 4096 (max output) = 115712 "
        "[context_window from models.toml, max_output_tokens from models.toml, "
        "buffer_tokens from default, tokenizer from models.toml]"
    ) in lines
    regions = json.loads(run(["guard", "session.in.jsonl", "--format", "json"]).stdout)["targets"][
        0
    ]["regions"]
    used = sum(regions.values())
    assert (
        f"debug: target gpt-4-turbo: used {used} = {regions['system']} (system) + 0 (tools) + "
        f"0 (summary) + {regions['history']} (history) -> ok"
    ) in lines
    assert lines[-1] == "debug: decision: fits -> gpt-4-turbo (ok), exit 0 (fail-on compact)"
    assert "debug:" not in result.stdout


def test_debug_from_environment() -> None:
    result = run(["guard", "session.in.jsonl"], env={"CTXKIT_DEBUG": "1"})
    assert "debug: decision: fits -> default (ok)" in result.stderr


def test_stdin_and_several_files_combine_exit_codes(tmp_path: Path) -> None:
    text = (DATA / "session.in.jsonl").read_text()
    result = CliRunner().invoke(
        cli, ["guard", "-", "--window", "4050", "--max-output", "0", "--buffer", "0"], input=text
    )
    assert result.exit_code == 4
    small = DATA / "check.in.jsonl"
    both = run(
        [
            "guard",
            str(small),
            "session.in.jsonl",
            "--window",
            "4050",
            "--max-output",
            "0",
            "--buffer",
            "0",
            "--format",
            "json",
        ]
    )
    rows = [json.loads(line) for line in both.stdout.splitlines()]
    assert [r["status"] for r in rows] == ["ok", "block"]
    assert both.exit_code == 4
    table = run(
        [
            *(["guard", str(small), "session.in.jsonl"]),
            "--window",
            "4050",
            "--max-output",
            "0",
            "--buffer",
            "0",
        ]
    )
    lines = table.stdout.splitlines()
    assert lines[0] == "2 transcripts: ok 1, block 1; exit 4"  # the summary first
    assert lines[1] == "1 do not pass (fail-on compact):"
    assert lines[4].split() == ["-", "fits", "custom", "block", "3,981", "4,050", "4", "session.in.jsonl"]
    assert lines[-1] == "(--details: each transcript's full verdict)"
    detailed = run(["guard", str(small), "session.in.jsonl", "--window", "4050", "--max-output",
                    "0", "--buffer", "0", "--details"])
    assert detailed.stdout.startswith("\n".join(lines[:-1]) + "\n\n")
    assert detailed.stdout.count("verdict: ") == 2 and detailed.exit_code == 4


def test_help_documents_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["guard", "--help"])
    for text in ("0  fits (ok or warn)", "3  compaction needed", "4  blocked", "5  overflow"):
        assert text in result.stdout


# --- lazy imports -----------------------------------------------------------------------------


def test_guard_does_not_import_heavy_modules(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    with path.open("w") as fh:
        for i in range(200):
            role = "user" if i % 2 == 0 else "assistant"
            fh.write(
                json.dumps({"id": f"u{i}", "role": role, "content": f"message {i} " * 20}) + "\n"
            )
    code = (
        "import sys\n"
        "from ctxkit.cli import cli\n"
        "try:\n"
        f"    cli(['guard', {str(path)!r}, '--model', 'gpt-4', '--model', 'gpt-4-turbo', '--replay', '--check'])\n"
        "except SystemExit as exc:\n"
        "    heavy = [m for m in ('torch', 'sentence_transformers', 'polars', 'ray') if m in sys.modules]\n"
        "    print('HEAVY', heavy, 'EXIT', exc.code, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "verdict: fits gpt-4-turbo (ok), exit 0" in proc.stdout
    assert "HEAVY [] EXIT 0" in proc.stderr


REAL = [
    "claude-code/conneroisu__templar__logs-chat-json@a46211b7__session-b9712494.jsonl",
    "codex/AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl",
    "mini-swe-agent/SWE-agent__mini-swe-agent__PR-814__sqlfluff__sqlfluff-1763.traj.json",
    "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx003_task3_trial0_reward0.json",
]


@pytest.mark.parametrize("name", REAL)
def test_real_transcripts(realdata: Path, name: str) -> None:
    path = realdata / name
    if not path.exists():
        pytest.skip(f"{name} not in realdata")
    result = run(
        [
            "guard",
            str(path),
            "--model",
            "claude-sonnet-4",
            "--model",
            "gemini-2.5-pro",
            "--replay",
            "--check",
            "--format",
            "json",
        ]
    )
    got = json.loads(result.stdout)
    assert got["verdict"] == "fits"
    for target in got["targets"]:
        assert target["used"] == sum(target["regions"].values())
        assert target["used"] > 1000
        assert target["replay"]["checks"] == got["units"]
        # the replay ends where the whole transcript is
        last = target["replay"]["first"]
        assert all(v is None or v["tokens"] <= target["used"] for v in last.values())
    first = got["targets"][0]
    assert first["decision"] == ("chosen" if first["status"] != "overflow" else "does not fit")


def _logs_with_usage(realdata: Path) -> list[Path]:
    return sorted(
        p
        for folder in ("claude-code", "codex", "mini-swe-agent")
        for p in (realdata / folder).iterdir()
        if p.is_file()
    )


def test_guard_never_says_ok_where_the_provider_saw_more(realdata: Path) -> None:
    """On every real log that records usage, a limit between the local count and what the
    provider recorded is an overflow, not `ok`; `--no-usage` is the local count alone. The
    figure is the provider's count at the last call, plus what came after at the fitted ratio."""
    from ctxkit.counting import measure, recorded_usage
    from ctxkit.formats import read_path
    from ctxkit.tokens import count_transcript, get_tokenizer

    tok = get_tokenizer()
    checked = 0
    for path in _logs_with_usage(realdata):
        (t,) = read_path(str(path))
        usage = recorded_usage(t, tok)
        assert usage is not None, path.name
        local = count_transcript(t, tok).total
        if usage.fit.last_recorded <= local:
            continue
        limit = (local + usage.fit.last_recorded) // 2  # the local count fits, the provider's does not
        r = run(["guard", str(path), "--limit", str(limit), "--format", "json"], cwd=path.parent)
        (res,) = json.loads(r.stdout)["targets"]
        assert r.exit_code == 5 and res["status"] == "overflow", path.name
        assert res["basis"] == "recorded usage"
        assert res["used"] == measure(t, tok).total >= usage.fit.last_recorded
        assert res["regions"]["unlogged"] == usage.fit.fixed <= usage.fit.first_recorded
        r = run(["guard", str(path), "--limit", str(limit), "--no-usage", "--format", "json"])
        (res,) = json.loads(r.stdout)["targets"]
        assert res["used"] == local and res["basis"] == "local count"
        checked += 1
    assert checked >= 9  # every Claude Code log and the Codex rollout


def test_count_reports_recorded_usage_and_the_unlogged_region() -> None:
    r = run(["count", "claude-code-session.jsonl", "--format", "json"], cwd=SAMPLES)
    (row,) = json.loads(r.stdout)
    # 15,178 stay fixed (the first call's 15,553 less its content at the fitted ratio); the
    # total is the provider's count at the last call plus what came after it
    assert (row["history"], row["unlogged"], row["total"], row["recorded"]) == (
        1682,
        15178,
        17509,
        17437,
    )
    assert row["unseen"] + row["excess"] == row["total"] - row["history"] - row["unlogged"]
    r = run(["count", "claude-code-session.jsonl", "--format", "json", "--no-usage"], cwd=SAMPLES)
    (row,) = json.loads(r.stdout)
    assert "unlogged" not in row and row["total"] == 1682


def test_the_model_a_log_records_is_its_default_target() -> None:
    """With no model, window or limit, a log is checked against the model it records under its
    agent's own budget (Claude Code on claude-sonnet-4: it compacts at 167,000 and sends up to
    197,000; the guard says compact one call's growth, 2,000 tokens, before it)."""
    r = run(["guard", "claude-code-session.jsonl", "--format", "json"], cwd=SAMPLES)
    (target,) = json.loads(r.stdout)["targets"]
    budget = target["budget"]
    assert (target["target"], target["limit"], budget["agent"]) == ("claude-sonnet-4", 197_000, "claude-code")
    assert budget["thresholds"]["compact"] * 197_000 == pytest.approx(165_000, abs=20)
    # what it reserves for the summary it writes (20,000), and no negative buffer: Claude Code's
    # own rule (W - 3k) sets the limit, not window - buffer - output
    assert (budget["max_output_tokens"], budget["buffer_tokens"]) == (20_000, 0)
    assert r.exit_code == 0


def test_the_model_a_log_records_is_named_with_the_flag_that_checks_it() -> None:
    r = run(["guard", "claude-code-session.jsonl", "--limit", "60000"], cwd=SAMPLES)
    assert (
        "model: the log records claude-sonnet-4-20250514 (claude-sonnet-4 in models.toml, window "
        "200,000); --model claude-sonnet-4 checks against its window and tokenizer"
    ) in r.stdout.splitlines()
    r = run(["guard", "claude-code-session.jsonl", "--limit", "60000", "--format", "json"], cwd=SAMPLES)
    assert json.loads(r.stdout)["recorded_model"] == {
        "name": "claude-sonnet-4-20250514",
        "matched": "claude-sonnet-4",
        "context_window": 200000,
        "suggestions": [],
    }
    # named as the target (in any spelling the table matches), it is not repeated
    r = run(["guard", "claude-code-session.jsonl", "--model", "claude-sonnet-4-20250514"], cwd=SAMPLES)
    assert "model: the log records" not in r.stdout


def test_guard_says_compact_where_claude_code_compacted(realdata: Path, tmp_path: Path) -> None:
    """Each real Claude Code log cut just before one of Claude Code's own compactions (its
    `compact_boundary` record): with no flags, the guard says compact there, and not before
    (the whole session before it ran: no status above warn at any earlier cut)."""
    checked = 0
    for path in sorted((realdata / "claude-code").glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        cuts = [i for i, line in enumerate(lines) if '"compact_boundary"' in line]
        for cut in cuts:
            head = lines[:cut]
            pre = json.loads(lines[cut]).get("compactMetadata", {}).get("preTokens", 0)
            if pre > 300_000:
                continue  # a 1M-token window: the log holds no cut near it to check before
            prefix = tmp_path / f"{path.stem}-{cut}.jsonl"
            prefix.write_text("".join(head), encoding="utf-8")
            r = run(["guard", str(prefix), "--format", "json"])
            (target,) = json.loads(r.stdout)["targets"]
            assert target["status"] in ("compact", "block"), (path.name, cut, target["used"])
            assert r.exit_code in (3, 4)
            early = tmp_path / f"{path.stem}-{cut}-early.jsonl"
            early.write_text("".join(head[: int(len(head) * 0.8)]), encoding="utf-8")
            r = run(["guard", str(early), "--format", "json"])
            assert r.exit_code == 0, (path.name, cut, r.stdout[:300])
            checked += 1
    assert checked >= 3  # FSM1 twice, PackmindHub once
