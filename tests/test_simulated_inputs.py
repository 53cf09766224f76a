"""A folder `ctxkit simulate -o DIR/` writes is a valid input (issue 36, point 6): its ground
truth (`truth.jsonl`, `<stem>.truth.jsonl`) is recognised and skipped with a note, and a
scenario is compacted to the limit it records when no --limit is given, which is said.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxkit.cli import cli

SCENARIOS = {"long_chat": 5000, "code_heavy": 8000}  # each one's own limit (simulate --list)


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def sim(tmp_path: Path) -> Path:
    args = [a for name in SCENARIOS for a in ("-s", name)]
    made = run("simulate", *args, "-o", f"{tmp_path / 'sim'}/")
    assert made.exit_code == 0, made.stderr
    assert sorted(p.name for p in (tmp_path / "sim").iterdir()) == sorted(
        [*(f"{n}-0.jsonl" for n in SCENARIOS), "truth.jsonl"]
    )
    return tmp_path / "sim"


def test_a_simulated_folder_compacts_each_scenario_to_its_own_limit(sim: Path, tmp_path: Path) -> None:
    truth = [json.loads(x) for x in (sim / "truth.jsonl").read_text().splitlines()]
    assert {r["ground_truth"]["scenario"]: r["ground_truth"]["limit"] for r in truth} == SCENARIOS
    out = tmp_path / "out"
    result = run("compact", str(sim), "-o", f"{out}/")
    assert result.exit_code == 0, result.stderr
    assert f"skipped {sim}/truth.jsonl (simulate's ground truth, not a transcript)" in result.stderr
    assert "2 simulated conversations compacted to their scenarios' own limits" in result.stderr
    assert "2 conversations from 3 files: 2 compacted, 0 unchanged;" in result.stderr
    assert not (out / "truth.jsonl").exists()
    for name, limit in SCENARIOS.items():  # as `--limit <its own>` compacts it
        alone = tmp_path / f"{name}.jsonl"
        given = run("compact", str(sim / f"{name}-0.jsonl"), "--limit", str(limit), "-o", str(alone))
        assert given.exit_code == 0, given.stderr
        assert "own limit" not in given.stderr  # a limit given is the limit
        assert (out / f"{name}-0.jsonl").read_bytes() == alone.read_bytes()
    # and the other commands read the folder too
    counted = run("count", str(sim), "--format", "jsonl")
    assert counted.exit_code == 0, counted.stderr
    assert json.loads(counted.stdout.splitlines()[-1])["transcript"] == "total (2 conversations)"
    assert "simulate's ground truth, not a transcript" in counted.stderr


def test_one_scenario_file_uses_its_own_limit_and_says_so(sim: Path, tmp_path: Path) -> None:
    result = run("compact", str(sim / "long_chat-0.jsonl"), "-o", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("ctxkit: 1 simulated conversation compacted to its scenario's own limit")
    assert " / 5,000 tokens " in lines[1]
    wider = run("compact", str(sim / "long_chat-0.jsonl"), "--limit", "7000", "-o", str(tmp_path / "w.jsonl"))
    assert " / 7,000 tokens " in wider.stderr and "own limit" not in wider.stderr


def test_a_simulated_dataset_beside_its_stem_truth(tmp_path: Path) -> None:
    """`simulate -o sims.jsonl`: one conversation a line, `sims.truth.jsonl` beside it (its
    records name lines, not files)."""
    made = run("simulate", "-s", "long_chat", "-s", "code_heavy", "--format", "openai",
               "-o", str(tmp_path / "sims.jsonl"))
    assert made.exit_code == 0, made.stderr
    result = run("compact", str(tmp_path / "sims.jsonl"), "-o", str(tmp_path / "o.jsonl"), "-v")
    assert result.exit_code == 0, result.stderr
    assert "2 simulated conversations compacted to their scenarios' own limits" in result.stderr
    assert "sims#1: Context reduced" in result.stderr and " / 5,000 tokens" in result.stderr
    assert "sims#2: Context reduced" in result.stderr and " / 8,000 tokens" in result.stderr


def test_a_truth_file_named_alone_is_no_transcript(sim: Path) -> None:
    result = CliRunner().invoke(cli, ["compact", str(sim / "truth.jsonl"), "-o", "-"])
    assert result.exit_code == 2
    assert "simulate's ground truth, not a transcript" in result.stderr
    assert "no transcript to compact" in result.stderr


@pytest.mark.slow
def test_on_ray_a_simulated_folder_is_compacted_as_here(sim: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    here, there = tmp_path / "here", tmp_path / "there"
    assert run("compact", str(sim), "-o", f"{here}/").exit_code == 0
    result = run("compact", str(sim), "--engine", "ray", "--ray-workers", "1", "-o", f"{there}/")
    assert result.exit_code == 0, result.stderr
    assert "2 simulated conversations compacted to their scenarios' own limits" in result.stderr
    names = sorted(p.name for p in here.iterdir())
    assert names == sorted(p.name for p in there.iterdir())
    for name in names:
        if name.endswith(".jsonl"):
            assert (here / name).read_bytes() == (there / name).read_bytes()


def test_the_truth_of_one_scenario_is_skipped_too(tmp_path: Path) -> None:
    """One scenario's ground truth is a single JSON line: read as a document, not as lines."""
    made = run("simulate", "-s", "long_chat", "-o", f"{tmp_path / 'one'}/")
    assert made.exit_code == 0, made.stderr
    result = run("compact", str(tmp_path / "one"), "-o", f"{tmp_path / 'out'}/")
    assert result.exit_code == 0, result.stderr
    assert "skipped " in result.stderr and "truth.jsonl (simulate's ground truth" in result.stderr
    assert "1 conversation from 2 files: 1 compacted, 0 unchanged;" in result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "ctxkit-index.sqlite", "long_chat-0.jsonl", "long_chat-0.jsonl.ctx.db"
    ]
