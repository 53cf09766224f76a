"""ctxkit.simulate and `ctxkit simulate`: scenarios, sizes, determinism, needles, P1, CLI."""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from ctxkit.archive.store import Archive
from ctxkit.cli import cli
from ctxkit.errors import UsageError
from ctxkit.fidelity.truth import needle_retention, pair_problems, read_truth
from ctxkit.formats import read_path, write_transcripts
from ctxkit.model import Transcript
from ctxkit.simulate import (
    SCENARIOS,
    for_output,
    generate,
    save,
)
from ctxkit.structure import check
from ctxkit.tokens import count_transcript

NAMES = sorted(SCENARIOS)
SIZE_TOLERANCE = 0.02  # measured: within 1.2% at 1k-100k tokens


def units_text(t: Transcript) -> str:
    """The transcript in units format, as `ctxkit simulate` writes it."""
    buf = io.StringIO()
    write_transcripts([for_output(t, "units")], buf, "units")
    return buf.getvalue()


@pytest.fixture(scope="module")
def generated() -> dict[str, Transcript]:
    return {name: generate(name, seed=0) for name in NAMES}


def test_at_least_fifteen_scenarios_with_the_required_names() -> None:
    required = {
        "long_chat", "giant_tool_output", "irreducible_turn", "all_p1", "fragmented",
        "parallel_tools", "code_heavy", "log_heavy", "multilingual_emoji", "nearly_full",
        "growing_session", "misclassified", "json_heavy", "needle_early", "deep_reasoning",
        "system_heavy",
    }  # fmt: skip
    assert required <= set(SCENARIOS)
    for s in SCENARIOS.values():
        assert s.description and "\n" not in s.description
        assert s.default_tokens >= 1000 and s.limit > 0


@pytest.mark.parametrize("name", NAMES)
def test_scenario_is_well_formed(name: str, generated: dict[str, Transcript]) -> None:
    t = generated[name]
    truth = t.metadata["ground_truth"]
    scn = SCENARIOS[name]
    # size: counted independently by the real tokenizer
    total = count_transcript(t).total
    assert truth["tokens"] == total
    assert abs(total - scn.default_tokens) <= SIZE_TOLERANCE * scn.default_tokens
    assert truth["limit"] == scn.limit and truth["scenario"] == name and truth["seed"] == 0
    # shape: system first, final user request last, valid tool pairs
    assert t.units[0].role == "system"
    assert t.units[-1].role == "user" and t.units[-1].id == truth["final_request_id"]
    assert t.source_format == "units" and t.id == f"{name}-0"
    assert pair_problems(t) == []
    assert [p for p in check(t) if p.kind != "empty_message"] == []
    assert all(u.type in {"message", "code", "plan_ref", "log", "tool_call", "tool_result",
                          "reasoning"} for u in t.units)  # fmt: skip
    assert all(u.timestamp is not None for u in t.units)
    stamps = [u.timestamp for u in t.units]
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] > 60
    # P1 ids are what the units say
    assert truth["p1_ids"] == [u.id for u in t.units if u.priority == 1]
    todo = [u for u in t.units if u.content.startswith("To Do List")]
    assert len(todo) == 1 and todo[0].type == "plan_ref" and todo[0].priority == 1


@pytest.mark.parametrize("name", NAMES)
def test_needles_are_planted_once_and_needed_later(
    name: str, generated: dict[str, Transcript]
) -> None:
    t = generated[name]
    truth = t.metadata["ground_truth"]
    index = {u.id: i for i, u in enumerate(t.units)}
    assert truth["needles"], "every scenario plants at least one needle"
    for n in truth["needles"]:
        rx = re.compile(n["pattern"])
        holders = [
            u.id
            for u in t.units
            if rx.search(u.content) or any(rx.search(c.arguments) for c in u.tool_calls)
        ]
        assert holders == [n["unit_id"]], n
        assert rx.search(n["fact"])
        needer = t.units[index[n["needed_by_unit_id"]]]
        assert needer.role == "user" and index[n["needed_by_unit_id"]] > index[n["unit_id"]]
        assert not rx.search(needer.content)  # asked for, never restated
    kinds = [n["pattern"] for n in truth["needles"]]
    assert len(set(kinds)) == len(kinds)
    assert needle_retention(t)["retention"] == 1.0


@pytest.mark.parametrize("name", NAMES)
def test_generation_is_deterministic(name: str, generated: dict[str, Transcript]) -> None:
    again = generate(name, seed=0)
    assert units_text(again) == units_text(generated[name])
    assert again.metadata == generated[name].metadata
    assert units_text(generate(name, seed=1)) != units_text(again)


def test_deterministic_across_processes() -> None:
    code = (
        "import sys, hashlib; from ctxkit.simulate import generate, for_output;"
        "from ctxkit.formats import write_transcripts; import io;"
        "b = io.StringIO(); write_transcripts([for_output(generate('agent_session', seed=4), 'units')], b, 'units');"
        "print(hashlib.sha256(b.getvalue().encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": str(seed), "PATH": ""},
        ).stdout
        for seed in (1, 2)
    }
    assert len(digests) == 1


@pytest.mark.parametrize(
    ("name", "tokens"),
    [("long_chat", 2_000), ("code_heavy", 3_000), ("json_heavy", 40_000), ("growing_session", 1_500),
     ("fragmented", 12_000), ("irreducible_turn", 20_000), ("multilingual_emoji", 25_000)],
)  # fmt: skip
def test_tokens_scales_size_and_limit(name: str, tokens: int) -> None:
    t = generate(name, seed=3, tokens=tokens)
    truth = t.metadata["ground_truth"]
    assert abs(count_transcript(t).total - tokens) <= SIZE_TOLERANCE * tokens
    scn = SCENARIOS[name]
    assert truth["limit"] == round(scn.limit * tokens / scn.default_tokens)
    assert pair_problems(t) == []


def test_bad_arguments_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="known: .*long_chat"):
        generate("no_such_scenario")
    with pytest.raises(UsageError, match="at least"):
        generate("long_chat", tokens=10)
    with pytest.raises(UsageError, match="between 0 and 1"):
        generate("long_chat", p1_ratio=1.5)


@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.3, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("name", ["agent_session", "parallel_tools", "fragmented"])
def test_p1_ratio_is_honoured_and_keeps_pairs_together(name: str, ratio: float) -> None:
    t = generate(name, seed=2, p1_ratio=ratio)
    p1 = [u for u in t.units if u.priority == 1]
    biggest_group = 1 + max(len(u.tool_calls) for u in t.units)
    assert abs(len(p1) - ratio * len(t.units)) <= biggest_group / 2 + 1
    calls = {c.id: u.priority for u in t.units for c in u.tool_calls}
    for u in t.units:
        if u.tool_call_id is not None:
            assert u.priority == calls[u.tool_call_id]
    if ratio > 0.05:
        assert any(u.content.startswith("To Do List") for u in p1)  # the To Do List comes first


def test_all_p1_marks_every_unit(generated: dict[str, Transcript]) -> None:
    t = generated["all_p1"]
    assert all(u.priority == 1 for u in t.units)


def test_python_file_reads_parse(generated: dict[str, Transcript]) -> None:
    seen = 0
    for name in ("code_heavy", "agent_session", "parallel_tools"):
        for u in generated[name].units:
            if u.meta.get("language") == "python":
                tree = ast.parse(u.content)
                seen += 1
                assert any(isinstance(n, ast.Import | ast.ImportFrom) for n in tree.body)
    assert seen >= 5
    langs = {u.meta.get("language") for u in generated["code_heavy"].units}
    assert {"python", "typescript", "go"} <= langs


def test_tool_results_have_realistic_kinds(generated: dict[str, Transcript]) -> None:
    logs = "\n".join(u.content for u in generated["log_heavy"].units if u.type == "log")
    assert "Traceback (most recent call last):" in logs or "FAILURES" in logs
    assert re.search(r"^(.+\n)\1\1", logs, re.M), "logs repeat lines"
    jsons = [u for u in generated["json_heavy"].units if u.content.startswith('{\n  "data"')]
    assert jsons
    for u in jsons:
        body = json.loads(u.content)
        assert isinstance(body["data"], list) and "pagination" in body
    greps = [u for u in generated["agent_session"].units if u.name == "grep"]
    for u in greps:
        assert all(re.match(r"^[\w./-]+:\d+:", line) for line in u.content.splitlines())


def test_scenario_specifics(generated: dict[str, Transcript]) -> None:
    g = generated
    # parallel tool calls, each answered right after its assistant unit
    assert max(len(u.tool_calls) for u in g["parallel_tools"].units) >= 3
    # one tool result dominates
    giant = g["giant_tool_output"]
    assert max(u.tokens or 0 for u in giant.units) >= 0.5 * count_transcript(giant).total
    # the final request alone exceeds the limit
    irr = g["irreducible_turn"]
    assert (irr.units[-1].tokens or 0) > irr.metadata["ground_truth"]["limit"]
    # 99% of the limit
    nf = g["nearly_full"].metadata["ground_truth"]
    assert 0.97 <= nf["tokens"] / nf["limit"] <= 1.0
    # many short units
    frag = g["fragmented"]
    assert len(frag.units) >= 200
    assert sorted(u.tokens or 0 for u in frag.units)[len(frag.units) // 2] <= 30
    # scripts and emoji
    text = "".join(u.content for u in g["multilingual_emoji"].units)
    for script in (r"[\u3040-\u30ff\u4e00-\u9fff]", r"[\u0400-\u04ff]", r"[\u0600-\u06ff]"):
        assert re.search(script, text)
    assert re.search(r"[\U0001F300-\U0001FAFF]", text)
    # reasoning units
    assert sum(1 for u in g["deep_reasoning"].units if u.type == "reasoning" and u.reasoning) >= 3
    # the system region is big
    sysh = count_transcript(g["system_heavy"])
    assert sysh.regions["system"] >= 0.3 * sysh.total
    # needles needed in the middle of a growing session
    grow = g["growing_session"].metadata["ground_truth"]
    needers = {n["needed_by_unit_id"] for n in grow["needles"]}
    assert len(needers) >= 3 and len(grow["needles"]) >= 5
    # planted early
    early = g["needle_early"]
    ids = [u.id for u in early.units]
    assert all(ids.index(n["unit_id"]) < 10 for n in early.metadata["ground_truth"]["needles"])


def test_misclassified_records_the_true_type(generated: dict[str, Transcript]) -> None:
    t = generated["misclassified"]
    wrong = t.metadata["ground_truth"]["misclassified"]
    units = {u.id: u for u in t.units}
    assert {w["actual"] for w in wrong} >= {"code", "log"}
    pasted = [units[w["unit_id"]] for w in wrong if units[w["unit_id"]].role == "user"]
    assert len(pasted) == 1 and pasted[0].type == "message"
    for w in wrong:
        assert units[w["unit_id"]].type == w["labelled"] != w["actual"]
        if w["actual"] == "code" and units[w["unit_id"]].meta.get("language") == "python":
            ast.parse(units[w["unit_id"]].content)
    assert all(not generated[n].metadata["ground_truth"]["misclassified"] for n in NAMES
               if n != "misclassified")  # fmt: skip


def test_needle_retention_sees_losses_and_recalls_from_the_archive(
    tmp_path: Path, generated: dict[str, Transcript]
) -> None:
    t = generated["needle_early"]
    truth = t.metadata["ground_truth"]
    planted = {n["unit_id"] for n in truth["needles"]}
    cut = t.replace(units=[u for u in t.units if u.id not in planted])
    lost = needle_retention(cut, truth)
    assert lost["present"] == 0 and lost["lost"] == lost["total"] == len(truth["needles"])
    assert lost["retention"] == 0.0
    with Archive(str(tmp_path / "a.ctx.db")) as archive:
        for u in t.units:
            if u.id in planted:
                archive.put(t.id, u)
        back = needle_retention(cut, truth, archive)
    assert back["recallable"] == back["total"] and back["retention_with_recall"] == 1.0


def test_library_does_not_import_click() -> None:
    code = "import ctxkit.simulate, sys; assert 'click' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------------------- CLI


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["simulate", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_cli_list() -> None:
    code, out, _ = run("--list")
    assert code == 0
    rows = out.splitlines()
    assert [r.split()[0] for r in rows] == list(SCENARIOS)
    assert "10,000" in next(r for r in rows if r.startswith("long_chat"))


def test_cli_stdout_units_matches_the_library(tmp_path: Path) -> None:
    truth = tmp_path / "t.jsonl"
    code, out, err = run("-s", "long_chat", "--seed", "7", "--truth", str(truth))
    assert code == 0
    assert out == units_text(generate("long_chat", seed=7))
    assert "ground_truth" not in out  # the sidecar carries it, not the units
    assert "long_chat-7" in err
    assert read_truth(truth) == {
        "long_chat-7": generate("long_chat", seed=7).metadata["ground_truth"]
    }


def test_cli_directory_output_openai_round_trip(tmp_path: Path) -> None:
    out_dir = tmp_path / "sims"
    code, out, _ = run(
        "-s", "parallel_tools", "-s", "log_heavy", "--count", "2", "--seed", "10",
        "--tokens", "4000", "--format", "openai", "-o", f"{out_dir}/",
    )  # fmt: skip
    assert code == 0 and out == ""
    files = sorted(p.name for p in out_dir.iterdir())
    assert files == sorted(
        ["log_heavy-10.json", "log_heavy-11.json", "parallel_tools-10.json",
         "parallel_tools-11.json", "truth.jsonl"]
    )  # fmt: skip
    truths = read_truth(out_dir / "truth.jsonl")
    assert set(truths) == {"log_heavy-10", "log_heavy-11", "parallel_tools-10", "parallel_tools-11"}
    for tid, truth in truths.items():
        (back,) = read_path(str(out_dir / f"{tid}.json"))
        assert back.source_format == "openai"
        assert count_transcript(back).total == truth["tokens"]
        assert abs(truth["tokens"] - 4000) <= SIZE_TOLERANCE * 4000
        assert needle_retention(back, truth)["retention"] == 1.0
        assert back.units[-1].id == truth["final_request_id"]
        assert pair_problems(back) == []


@pytest.mark.parametrize("fmt", ["units", "anthropic"])
def test_cli_file_output_holds_every_transcript(tmp_path: Path, fmt: str) -> None:
    target = tmp_path / "batch.jsonl"
    code, _, _ = run("-s", "fragmented", "-s", "nearly_full", "--format", fmt, "-o", str(target))
    assert code == 0
    back = list(read_path(str(target)))
    assert all("ground_truth" not in t.metadata for t in back)
    records = [orjson.loads(x) for x in (tmp_path / "batch.truth.jsonl").read_bytes().splitlines()]
    assert [(r["id"], r["line"]) for r in records] == [("fragmented-0", 1), ("nearly_full-0", 2)]
    if fmt == "units":  # the units dataset keeps transcript ids; the others are matched by line
        assert [t.id for t in back] == ["fragmented-0", "nearly_full-0"]
    for t, rec in zip(back, records, strict=True):
        assert count_transcript(t).total == rec["ground_truth"]["tokens"]
        assert needle_retention(t, rec["ground_truth"])["retention"] == 1.0


def test_cli_usage_errors() -> None:
    code, _, err = run()
    assert code == 2 and "--scenario" in err
    code, _, err = run("-s", "nope")
    assert code == 2 and "nope" in err
    code, _, err = run("-s", "long_chat", "--tokens", "5")
    assert code == 2
    code, _, err = run("-s", "long_chat", "--p1-ratio", "2")
    assert code == 2


def test_save_rejects_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        save([generate("long_chat")], str(tmp_path / "x.jsonl"), "gemini")


def test_sidecar_lines_are_compact_json(tmp_path: Path) -> None:
    t = generate("system_heavy", seed=1)
    paths = save([t], str(tmp_path) + "/", "units")
    lines = paths[-1].read_bytes().splitlines()
    assert len(lines) == 1
    rec = orjson.loads(lines[0])
    assert rec == {
        "id": "system_heavy-1",
        "file": "system_heavy-1.jsonl",
        "line": None,
        "ground_truth": t.metadata["ground_truth"],
    }


@pytest.mark.parametrize("embedder", ["lexical", pytest.param("auto", marks=pytest.mark.slow)])
def test_compacted_scenario_loses_no_needle_for_good(embedder: str, tmp_path: Path) -> None:
    """Through the real compact command and archive: every needle is kept or recallable."""
    code, _, _ = run("-s", "needle_early", "--tokens", "8000", "-o", f"{tmp_path}/")
    assert code == 0
    truth = read_truth(tmp_path / "truth.jsonl")["needle_early-0"]
    out, db = tmp_path / "small.jsonl", tmp_path / "small.ctx.db"
    result = CliRunner().invoke(
        cli,
        ["compact", str(tmp_path / "needle_early-0.jsonl"), "--limit", str(truth["limit"]),
         "-o", str(out), "--archive", str(db), "--embedder", embedder],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (small,) = read_path(str(out))
    assert count_transcript(small).total <= truth["limit"]
    without = needle_retention(small, truth)
    with Archive(str(db), readonly=True) as archive:
        report = needle_retention(small, truth, archive, transcript_id="needle_early-0")
    assert report["present"] == without["present"]
    assert report["lost"] == 0 and report["retention_with_recall"] == 1.0
