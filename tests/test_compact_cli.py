"""`ctxkit compact` end to end: golden files, reports, errors, nothing written on failure."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from ctxkit.budget import compaction_goal
from ctxkit.cli import cli

DATA = Path(__file__).parent / "data" / "compact"


def _run(args: list[str], stdin: bytes | None = None):
    return CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)


def _input(case: str) -> Path:
    return next(DATA.glob(f"{case}.in.*"))


@pytest.mark.parametrize("case", ["anthropic", "tau-bench", "units-build"])
def test_expand_restores_the_original(case: str, tmp_path: Path) -> None:
    """The goldens (tests/test_golden_cli.py) fix the output; the archive brings the input back."""
    src = _input(case)
    out = tmp_path / ("out" + src.suffix)
    result = _run(["compact", str(src), "-o", str(out), "--archive", str(tmp_path / "a.db"), "--limit", "3000"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("Context reduced ")
    restored = tmp_path / ("restored" + src.suffix)
    r = _run(["expand", str(out), "--archive", str(tmp_path / "a.db"), "-o", str(restored)])
    assert r.exit_code == 0, r.stderr
    assert _records(restored) == _records(src)


def _records(path: Path) -> list[object]:
    if path.suffix == ".json":
        return [orjson.loads(path.read_bytes())]
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_fitting_input_is_copied_byte_for_byte(tmp_path: Path) -> None:
    src = _input("tau-bench")
    result = _run(["compact", str(src), "--limit", "20000", "--archive", str(tmp_path / "a.db")])
    assert result.exit_code == 0
    assert result.stdout_bytes == src.read_bytes()
    assert "Context fits: 8,130 / 20,000 tokens (unchanged)" in result.stderr
    assert not (tmp_path / "a.db").exists()  # nothing archived: no empty archive left behind
    out = tmp_path / "o.json"
    result = _run(["compact", str(src), "--limit", "20000", "-o", str(out)])
    assert result.exit_code == 0 and out.read_bytes() == src.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.json"]
    back = tmp_path / "back.json"
    expanded = _run(["expand", str(out), "-o", str(back)])  # nothing to restore: as read
    assert expanded.exit_code == 0, expanded.stderr
    assert back.read_bytes() == src.read_bytes() and "none was compacted" in expanded.stderr
    back.unlink()
    # an archive that was there stays as it was
    kept = tmp_path / "kept.db"
    assert _run(["compact", str(src), "--limit", "4000", "-o", str(out), "--archive", str(kept)]).exit_code == 0
    before = kept.read_bytes()
    assert _run(["compact", str(src), "--limit", "20000", "-o", str(out), "--archive", str(kept)]).exit_code == 0
    assert kept.read_bytes() == before


# the default embedder (MiniLM when it loads) only in the slow run; lexical keeps the fast run torch-free
EMBEDDERS = ["lexical", pytest.param("auto", marks=pytest.mark.slow)]


@pytest.mark.parametrize("embedder", EMBEDDERS)
def test_stdin_to_stdout_and_report(embedder: str, tmp_path: Path) -> None:
    src = _input("units-build")
    report = tmp_path / "r.json"
    result = _run(
        [
            "compact",
            "-",
            "--limit",
            "700",
            "--archive",
            str(tmp_path / "a.db"),
            "--report",
            str(report),
            "--embedder",
            embedder,
        ],
        stdin=src.read_bytes(),
    )
    assert result.exit_code == 0, result.stderr
    lines = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert (
        lines[0]["id"] == "s" and lines[-1]["content"] == "Add -lz to the release target and rerun."
    )
    assert any(u["id"] == "p1" and u["priorityTag"] == "P1" for u in lines)
    data = orjson.loads(report.read_bytes())
    assert data["tokens"]["before"] > data["tokens"]["after"] and data["fits"]
    assert data["p1"] == {"total": 1, "kept": 1}
    assert data["invariants"] == {"ok": True, "violations": []}
    assert data["refs"] and all(r.startswith("ref-") for r in data["refs"])
    assert set(data["tokens"]["regions_before"]) == {"system", "tools", "summary", "history"}
    assert {"strategy", "tokens_saved", "time_ms"} <= set(data["steps"][0])


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    out, db = tmp_path / "out.json", tmp_path / "a.db"
    result = _run(
        [
            "compact",
            str(_input("tau-bench")),
            "--limit",
            "4000",
            "-o",
            str(out),
            "--archive",
            str(db),
            "--dry-run",
            "--embedder",
            "lexical",
        ]
    )
    assert result.exit_code == 0
    assert not out.exists() and not db.exists()
    assert "Dry run: nothing written." in result.stderr


def test_explain_says_what_each_step_did(tmp_path: Path) -> None:
    result = _run(
        [
            "compact",
            str(_input("units-build")),
            "--limit",
            "700",
            "--archive",
            str(tmp_path / "a.db"),
            "--explain",
            "--embedder",
            "lexical",
        ]
    )
    assert result.exit_code == 0
    assert "saved" in result.stderr and "pass 1" in result.stderr


def test_dataset_compacted_line_by_line(tmp_path: Path) -> None:
    src = _input("tau-bench")
    messages = orjson.loads(src.read_bytes())
    dataset = tmp_path / "ds.jsonl"
    dataset.write_bytes(
        b"".join(orjson.dumps({"messages": m}) + b"\n" for m in (messages, messages[:6], messages))
    )
    out = tmp_path / "out.jsonl"
    result = _run(
        [
            "compact",
            str(dataset),
            "--limit",
            "4000",
            "-o",
            str(out),
            "--archive",
            str(tmp_path / "a.db"),
            "--embedder",
            "lexical",
        ]
    )
    assert result.exit_code == 0, result.stderr
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(rows) == 3
    assert rows[1] == {"messages": messages[:6]}  # the one that fit is untouched
    assert len(rows[0]["messages"]) < len(messages)
    # a dataset is one line by default (issue 36: 300 conversations printed 300 lines)
    assert result.stderr.splitlines()[0].startswith("3 conversations: 2 compacted, 1 unchanged; ")
    assert "Context" not in result.stderr and len(result.stderr.splitlines()) == 2  # and the archive
    verbose = _run(["compact", str(dataset), "--limit", "4000", "-o", str(tmp_path / "v.jsonl"),
                    "--embedder", "lexical", "-v"])
    assert verbose.exit_code == 0, verbose.stderr
    assert verbose.stderr.count("#1: Context reduced") == 1 and f"{dataset.stem}#2: Context fits" in verbose.stderr
    assert f"{dataset.stem}#3: Context reduced" in verbose.stderr


def test_impossible_limit_is_one_clear_line(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = _run(
        [
            "compact",
            str(_input("tau-bench")),
            "--limit",
            "500",
            "-o",
            str(out),
            "--archive",
            str(tmp_path / "a.db"),
        ]
    )
    assert result.exit_code == 2
    # the file, the numbers and what to do
    assert result.stderr == (
        f"Error: {_input('tau-bench')}: limit 500 is below the least a compaction can leave, "
        "1,297 tokens (the system prompt and tool schemas alone take 1,259 tokens, and 38 for "
        "the last request at its shortest and a line naming the archive of the rest): give "
        "--limit 1,297 or more (nothing smaller can hold it)\n"
    )
    assert not out.exists()
    # and the limit it names is one compaction meets
    ok = _run(["compact", str(_input("tau-bench")), "--limit", "1297", "-o", str(out)])
    assert ok.exit_code == 0, ok.stderr
    assert _run(["guard", str(out), "--limit", "1297"]).exit_code in (3, 4)  # fits, at its edge


def test_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "cont')
    out = tmp_path / "out.jsonl"
    result = _run(["compact", str(bad), "--limit", "500", "-o", str(out)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {bad}:2:")
    assert not out.exists()


def test_archive_in_missing_directory_fails_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    db = tmp_path / "nope" / "a.db"
    result = _run(
        [
            "compact",
            str(_input("tau-bench")),
            "--limit",
            "4000",
            "-o",
            str(out),
            "--archive",
            str(db),
        ]
    )
    assert result.exit_code == 1
    assert str(db) in result.stderr
    assert not out.exists()


def test_archive_path_that_is_a_directory_fails(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = _run(
        [
            "compact",
            str(_input("tau-bench")),
            "--limit",
            "4000",
            "-o",
            str(out),
            "--archive",
            str(tmp_path),
        ]
    )
    assert result.exit_code == 1
    assert not out.exists()


def test_recovery_error_exits_1_with_breaker_failed(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = _run(
        [
            "compact",
            str(_input("tau-bench")),
            "--limit",
            "2000",
            "--chain",
            "offload",
            "--recovery",
            "error",
            "-o",
            str(out),
            "--archive",
            str(tmp_path / "a.db"),
        ]
    )
    assert result.exit_code == 1
    assert "BREAKER_FAILED" in result.stderr
    assert not out.exists()


def test_unknown_strategy_is_a_usage_error() -> None:
    result = _run(["compact", str(_input("tau-bench")), "--limit", "4000", "--chain", "squash"])
    assert result.exit_code == 2
    from ctxkit.strategies import STRATEGIES

    known = ", ".join(sorted([*STRATEGIES, "hybrid"]))
    assert result.stderr == f"Error: unknown strategy 'squash'; known: {known}\n"


def test_model_budget_matches_guard(tmp_path: Path) -> None:
    """What `compact --model gpt-4` produces, `guard --model gpt-4` passes."""
    out = tmp_path / "out.json"
    big = tmp_path / "big.json"
    messages = orjson.loads(_input("tau-bench").read_bytes())
    big.write_bytes(orjson.dumps(messages + messages[1:] + messages[1:]))
    r = _run(
        [
            "compact",
            str(big),
            "--model",
            "gpt-4",
            "-o",
            str(out),
            "--archive",
            str(tmp_path / "a.db"),
            "--embedder",
            "lexical",
        ]
    )
    assert r.exit_code == 0, r.stderr
    g = _run(["guard", str(out), "--model", "gpt-4", "--format", "json"])
    assert g.exit_code == 0, g.stdout + g.stderr


def test_same_named_inputs_share_an_archive_without_mixing(tmp_path: Path, realdata: Path) -> None:
    """Two files called session.json compacted into one archive expand to their own originals."""
    db = tmp_path / "shared.ctx.db"
    pairs = []
    for name, source in (("a", "idx003_task3"), ("b", "idx033_task33")):
        (tmp_path / name).mkdir()
        src = tmp_path / name / "session.json"
        src.write_bytes(next((realdata / "openai-chat").glob(f"*{source}*")).read_bytes())
        out = tmp_path / f"{name}.out.json"
        r = _run(
            [
                "compact",
                str(src),
                "--limit",
                "4000",
                "--embedder",
                "lexical",
                "-o",
                str(out),
                "--archive",
                str(db),
            ]
        )
        assert r.exit_code == 0, r.stderr
        pairs.append((src, out))
    for src, out in pairs:
        back = out.with_suffix(".x.json")
        r = _run(["expand", str(out), "--archive", str(db), "-o", str(back)])
        assert r.exit_code == 0, r.stderr
        assert orjson.loads(back.read_bytes()) == orjson.loads(src.read_bytes())


def test_compacting_a_compacted_file_still_expands_to_the_first_original(tmp_path: Path) -> None:
    src = tmp_path / "s.json"
    src.write_bytes(_input("tau-bench").read_bytes())
    # An output never overwrites its input (issue 16): the second pass writes a new file into
    # the same archive.
    db, first, out = tmp_path / "a.db", tmp_path / "first.json", tmp_path / "out.json"
    for source, target, limit in ((src, first, "5000"), (first, out, "2500")):
        r = _run(
            ["compact", str(source), "--limit", limit, "--embedder", "lexical", "-o", str(target),
             "--archive", str(db)]
        )
        assert r.exit_code == 0, r.stderr
    back = tmp_path / "x.json"
    r = _run(["expand", str(out), "--archive", str(db), "-o", str(back)])
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(back.read_bytes()) == orjson.loads(src.read_bytes())


@pytest.mark.parametrize("where", ["output", "report"])
def test_unwritable_output_fails_before_any_work(where: str, tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    out = tmp_path / "out.json"
    args = ["compact", str(_input("tau-bench")), "--limit", "4000", "--archive", str(db)]
    args += (
        ["-o", str(tmp_path / "no" / "out.json")]
        if where == "output"
        else ["-o", str(out), "--report", str(tmp_path / "no" / "r.json")]
    )
    result = _run(args)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: cannot write ")
    assert "Traceback" not in result.stderr
    assert not db.exists() and not out.exists()


def test_skip_invalid_says_what_it_skipped(tmp_path: Path) -> None:
    lines = _input("units-build").read_bytes().splitlines(keepends=True)
    bad = tmp_path / "mid.jsonl"
    bad.write_bytes(b"".join([*lines[:3], b"garbage{\n", *lines[3:]]))
    result = _run(
        [
            "compact",
            str(bad),
            "--skip-invalid",
            "--limit",
            "700",
            "--embedder",
            "lexical",
            "-o",
            str(tmp_path / "o.jsonl"),
            "--archive",
            str(tmp_path / "a.db"),
        ]
    )
    assert result.exit_code == 0
    assert "skipped 1 invalid line (--skip-invalid)" in result.stderr
    g = _run(["guard", str(bad), "--skip-invalid"])
    assert "skipped 1 invalid line (--skip-invalid)" in g.stderr


def test_limit_that_holds_the_system_prompt_but_not_the_target(tmp_path: Path) -> None:
    """tau-bench's system prompt takes 1,259 tokens: at a 1,500 limit a --target of 1,200 cannot
    hold it, so compact aims for the most the guard passes at that limit (1,424, under its
    compact threshold), and the guard passes what it wrote."""
    result = _run(
        [
            "compact",
            str(_input("tau-bench")),
            "--limit",
            "1500",
            "--target",
            "1200",
            "--embedder",
            "lexical",
            "-o",
            str(tmp_path / "o.json"),
            "--report",
            "-",
        ]
    )
    assert result.exit_code == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert report["target"] == 1424 and report["tokens"]["after"] <= 1424
    guarded = _run(["guard", str(tmp_path / "o.json"), "--limit", "1500"])
    assert guarded.exit_code == 0, guarded.stderr


def test_limit_whose_compact_threshold_the_system_prompt_reaches_fits_under_the_limit(
    tmp_path: Path,
) -> None:
    """At a limit of 1,320 the system prompt (1,259 tokens) fits but reaches the guard's compact
    threshold (1,254): compact writes what fits under the limit and says what the guard will say
    of it (it refuses only when nothing fits). At 1,330 the least it can leave (1,297) is below
    the guard's block threshold (1,304): it aims under that, and the guard asks for compaction
    again, not a block."""
    out = tmp_path / "o.json"
    result = _run(["compact", str(_input("tau-bench")), "--limit", "1320", "-o", str(out)])
    assert result.exit_code == 0
    assert result.stderr.splitlines()[0] == (
        "Context reduced 8,130 -> 1,293 / 1,320 tokens (summarize_old, recovery:fresh_start); "
        "what no strategy may touch (the system prompt and tool schemas alone take 1,259 tokens, "
        "and 38 for the last request at its shortest and a line naming the archive of the rest) "
        "is at or above the guard's compact threshold 1,254 of the limit 1,320: compacted within "
        "1,320, and the guard will ask for compaction again (compact, exit 3); raise the limit "
        "(to 1,366 or more) to stop that"
    )
    guard = _run(["guard", str(out), "--limit", "1320"])
    assert guard.exit_code == 3  # fits the limit, at the compact threshold
    for limit in (1330, 1360):
        result = _run(["compact", str(_input("tau-bench")), "--limit", str(limit), "-o", str(out)])
        assert result.exit_code == 0, result.stderr
        assert "the guard will ask for compaction again (compact, exit 3)" in result.stderr
        assert _run(["guard", str(out), "--limit", str(limit)]).exit_code == 3
    block = _run(["compact", str(_input("tau-bench")), "--limit", "1300", "-o", str(out)])
    assert "(block, exit 4)" in block.stderr  # the least it can leave is past the block bound
    assert _run(["guard", str(out), "--limit", "1300"]).exit_code == 4


def test_report_to_stdout_needs_an_output_file() -> None:
    result = _run(["compact", str(_input("tau-bench")), "--limit", "4000", "--report", "-"])
    assert result.exit_code == 2
    assert result.stderr == "Error: --report - needs -o FILE: stdout already carries the transcript\n"


def test_a_glob_names_the_one_input(tmp_path: Path) -> None:
    result = _run(
        [
            "compact",
            str(DATA / "tau-bench.in.*"),
            "--limit",
            "4000",
            "--embedder",
            "lexical",
            "-o",
            str(tmp_path / "o.json"),
            "--archive",
            str(tmp_path / "a.db"),
        ]
    )
    assert result.exit_code == 0, result.stderr
    many = _run(["compact", str(DATA / "*.in.*"), "--limit", "4000"])
    assert many.exit_code == 2 and "are compacted into a directory" in many.stderr
    assert many.stderr.rstrip().endswith("give -o DIR")


def test_stdin_gives_the_same_bytes_every_run(tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        r = _run(
            [
                "compact",
                "-",
                "--limit",
                "4000",
                "--embedder",
                "lexical",
                "--archive",
                str(tmp_path / f"{i}.db"),
                "--report",
                str(tmp_path / f"{i}.json"),
                "-o",
                str(tmp_path / f"{i}.out"),
            ],
            stdin=_input("tau-bench").read_bytes(),
        )
        assert r.exit_code == 0, r.stderr
        outs.append((tmp_path / f"{i}.out").read_bytes())
        assert orjson.loads((tmp_path / f"{i}.json").read_bytes())["transcript"] == "stdin"
    assert outs[0] == outs[1]


SAMPLES = Path(__file__).parents[1] / "sample_transcripts"


@pytest.mark.parametrize("limit", [3000, 4000])
def test_library_and_cli_give_the_same_output(limit: int, tmp_path: Path) -> None:
    """`compact(t, limit=L)` and `ctxkit compact --limit L` aim at one goal, byte for byte."""
    from ctxkit.archive.store import Archive
    from ctxkit.compaction import compact
    from ctxkit.formats import read_path, write_path

    src = SAMPLES / "tau-bench-airline.json"
    cli_out = tmp_path / "cli.json"
    r = _run(["compact", str(src), "--limit", str(limit), "-o", str(cli_out)])
    assert r.exit_code == 0, r.stderr
    (t,) = read_path(str(src))
    with Archive(str(tmp_path / "lib.ctx.db")) as archive:
        result = compact(t, limit=limit, archive=archive)
    lib_out = tmp_path / "lib.json"
    write_path([result.transcript], str(lib_out))
    assert result.target == compaction_goal(limit)
    assert lib_out.read_bytes() == cli_out.read_bytes()


def test_an_app_log_with_its_own_compaction_that_fits_expands_as_it_is(tmp_path: Path) -> None:
    """A Codex rollout carrying Codex's own `compacted` record (an app's summary, not ours):
    compact leaves it as it is and stores nothing; expand gives it back instead of calling it
    compacted-without-refs."""

    def item(role: str, text: str) -> dict:
        kind = "output_text" if role == "assistant" else "input_text"
        return {"timestamp": "2025-01-01T00:00:09Z", "type": "response_item",
                "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}}

    records = [
        {"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "rollout-1", "cwd": "/x"}},
        item("user", "fix the parser"), item("assistant", "looking"),
        {"timestamp": "2025-01-01T00:00:10Z", "type": "compacted",
         "payload": {"message": "Summary: the parser fails on tuples."}},
        item("user", "and now?"), item("assistant", "done"),
    ]
    src = tmp_path / "rollout.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    out, back = tmp_path / "out.jsonl", tmp_path / "back.jsonl"
    r = _run(["compact", str(src), "--limit", "50000", "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    r = _run(["expand", str(out), "-o", str(back)])
    assert r.exit_code == 0, r.stderr
    assert back.read_bytes() == src.read_bytes()
    from ctxkit.archive.originals import PREAMBLE
    from ctxkit.strategies.summarize_old import preamble

    assert preamble(2, 10, ["ref-1"]).startswith(PREAMBLE)  # how a summary of ours is told apart


def _repeated_id_chat(path: Path) -> Path:
    """A chat log whose messages carry ids that repeat (the chat APIs allow it)."""
    lines = []
    for i in range(40):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"step {i}: edit src/mod{i}.py and rerun the tests " * 25
        lines.append(orjson.dumps({"id": f"m{i % 2}", "role": role, "content": text}))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_repeated_chat_ids_compact_like_any_other(tmp_path: Path) -> None:
    """Repeated message ids must not make every strategy fail its checks (they name units by
    id) and fall back to a fresh start; the file's own ids come back on expand."""
    src = _repeated_id_chat(tmp_path / "chat.jsonl")
    out = tmp_path / "out.jsonl"
    result = _run(["compact", str(src), "-o", str(out), "--limit", "2000"])
    assert result.exit_code == 0, result.stderr
    assert "invariant" not in result.stderr
    assert "fresh_start" not in result.stderr
    assert "summarize_old" in result.stderr
    r = _run(["expand", str(out), "-o", str(tmp_path / "back.jsonl")])
    assert r.exit_code == 0, r.stderr
    assert _records(tmp_path / "back.jsonl") == _records(src)


def test_repeated_unit_ids_are_refused_with_their_lines(tmp_path: Path) -> None:
    src = tmp_path / "units.jsonl"
    rows = [
        {"id": "a", "type": "message", "role": "user", "content": "fix the bug"},
        {"id": "b", "type": "message", "role": "assistant", "content": "looking"},
        {"id": "a", "type": "message", "role": "user", "content": "and the docs"},
    ]
    src.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(cli, ["compact", str(src), "-o", str(out), "--limit", "10"])
    assert result.exit_code in (1, 2)
    assert result.stderr.count("\n") == 1
    assert f"{src}:3:" in result.stderr
    assert "unit id 'a' is already used by line 1" in result.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["units.jsonl"]
    skipped = CliRunner().invoke(cli, ["count", str(src), "--skip-invalid"])
    assert skipped.exit_code == 0, skipped.stderr
    assert orjson.loads(skipped.stdout.splitlines()[0])["units"] == 2
    assert "skipped 1 invalid" in skipped.stderr
