"""`ctxkit recall` and `ctxkit expand` through the CLI, and expand(compact(x)) == x per strategy."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxkit.archive.store import Archive
from ctxkit.cli import cli
from ctxkit.formats import read_path, write_path
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.strategies import STRATEGIES

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_transcripts"
LOG = "\n".join(
    f"line {i} FAILED test_{i}" if i % 25 == 0 else f"line {i} passed" for i in range(1, 101)
)


def run(*args: str, input: str | None = None) -> object:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def archived(tmp_path: Path) -> tuple[str, str]:
    """An archive with one 100-line tool output; (archive path, its ref)."""
    path = str(tmp_path / "a.ctx.db")
    unit = Unit(
        id="r7", role="tool", type="log", content=LOG, tool_call_id="c7", name="Bash", tokens=612
    )
    with Archive(path) as a:
        ref = a.put("session-1", unit, summary="pytest output")
        a.put(
            "session-2", Unit(id="x", role="tool", content="other", tool_call_id="c1", name="Read")
        )
    return path, ref


# -- recall ----------------------------------------------------------------------------------


def test_recall_prints_the_unit(archived: tuple[str, str]) -> None:
    path, ref = archived
    r = run("recall", ref, "--archive", path)
    assert r.exit_code == 0 and r.stdout == LOG + "\n" and r.stderr == ""
    r = run("recall", "ctx://session-1/r7", "--archive", path)
    assert r.stdout == LOG + "\n"


def test_recall_lines_search_and_max_tokens(archived: tuple[str, str]) -> None:
    path, ref = archived
    r = run("recall", ref, "--lines", "24-26", "--archive", path)
    assert r.stdout == "line 24 passed\nline 25 FAILED test_25\nline 26 passed\n"
    assert run("recall", f"{ref}:L100", "--archive", path).stdout == "line 100 FAILED test_100\n"
    r = run("recall", ref, "--search", "FAILED", "--archive", path)
    assert (
        r.stdout.split("\n--\n")[0]
        == "23-line 23 passed\n24-line 24 passed\n25:line 25 FAILED test_25\n26-line 26 passed\n27-line 27 passed"
    )
    assert r.stdout.count("\n--\n") == 3
    r = run("recall", f"{ref}:match-4", "--search", "FAILED", "--archive", path)
    assert r.stdout == "98-line 98 passed\n99-line 99 passed\n100:line 100 FAILED test_100\n"
    r = run("recall", ref, "--max-tokens", "40", "--archive", path)
    assert r.exit_code == 0
    assert r.stdout.startswith("line 1 passed\n") and "for more]" in r.stdout
    from ctxkit.tokens import get_tokenizer

    assert get_tokenizer("cl100k_base").count(r.stdout.rstrip("\n")) <= 40


def test_recall_no_match_exits_1(archived: tuple[str, str]) -> None:
    path, ref = archived
    r = run("recall", ref, "--search", "Traceback", "--archive", path)
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr == f"ctxkit: no line of {ref} matches 'Traceback'\n"


def test_recall_unknown_ref(archived: tuple[str, str]) -> None:
    path, _ = archived
    r = run("recall", "ref-deadbeef", "--archive", path)
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr == (
        f"Error: unknown ref ref-deadbeef in {path}; "
        f"`ctxkit recall --list --archive {path}` lists the refs\n"
    )


def test_recall_missing_archive_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nope.ctx.db"
    r = run("recall", "ref-deadbeef", "--archive", str(path))
    assert r.exit_code == 1
    assert (
        r.stderr == f"Error: no archive at {path}: `ctxkit compact --archive {path}` writes one\n"
    )
    assert not path.exists()
    r = run("recall", "--list", "--archive", str(path))
    assert r.exit_code == 1 and not path.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a REF to recall, or --list to see the refs"),
        (
            ("ref-00000000", "--lines", "9-3"),
            "--lines 9-3: lines count from 1 and A must not exceed B",
        ),
        (("ref-00000000", "--lines", "ten"), "--lines 'ten': expected A-B or A"),
        (("--list", "ref-00000000"), "--list takes no REF"),
        (("ref-00000000", "--transcript", "t"), "--transcript goes with --list"),
    ],
)
def test_recall_usage_errors(
    archived: tuple[str, str], args: tuple[str, ...], message: str
) -> None:
    path, _ = archived
    r = run("recall", *args, "--archive", path)
    assert r.exit_code == 2 and message in r.stderr


def test_recall_list_table_and_jsonl(archived: tuple[str, str]) -> None:
    path, ref = archived
    run("recall", ref, "--lines", "1", "--archive", path)
    r = run("recall", "--list", "--archive", path)
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == [
        "REF",
        "TRANSCRIPT",
        "UNIT",
        "TYPE",
        "TOOL",
        "TOKENS",
        "LINES",
        "READ",
        "PREVIEW",
    ]
    assert lines[1].split()[:8] == [ref, "session-1", "r7", "log", "Bash", "612", "100", "1"]
    assert lines[1].endswith("pytest output")
    assert len(lines) == 3
    assert r.stderr == f"2 archived units from 2 transcripts in {path}\n"
    r = run("recall", "--list", "--transcript", "session-2", "--format", "jsonl", "--archive", path)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["transcript_id"], x["unit_id"], x["tool_name"], x["chars"]) for x in rows] == [
        ("session-2", "x", "Read", 5)
    ]
    assert rows[0]["long_ref"] == "ctx://session-2/x" and rows[0]["access_count"] == 0
    r = run("recall", "--list", "--transcript", "nope", "--archive", path)
    assert (
        r.exit_code == 0
        and r.stdout == ""
        and "holds no archived units for transcript 'nope'" in r.stderr
    )


def test_recall_read_only_archive_still_reads(archived: tuple[str, str]) -> None:
    path, ref = archived
    os.chmod(path, 0o444)
    try:
        r = run("recall", ref, "--lines", "1", "--archive", path)
        assert r.exit_code == 0 and r.stdout == "line 1 passed\n"
    finally:
        os.chmod(path, 0o644)


def test_recall_not_an_archive(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n')
    r = run("recall", "--list", "--archive", str(path))
    assert r.exit_code == 1
    assert r.stderr == f"Error: {path} is not a ctxkit archive (not an SQLite file)\n"


# -- expand ----------------------------------------------------------------------------------


def _conversation(tag: str) -> Transcript:
    units = [
        Unit(id="s", role="system", content="You are a build agent."),
        Unit(id="u", role="user", content=f"Run the tests for {tag}."),
        Unit(
            id="a",
            role="assistant",
            content="",
            tool_calls=[ToolCall(f"call_{tag}", "bash", '{"cmd": "pytest"}')],
        ),
        Unit(id="r", role="tool", content=LOG, tool_call_id=f"call_{tag}", name="bash"),
        Unit(id="z", role="assistant", content=f"4 tests failed in {tag}."),
    ]
    return Transcript(units=units, id=tag, source_format="openai", layout="array")


def _compact_by_hand(path: Path, archive: str, out: Path) -> None:
    """Offload the tool output of the first conversation, leave the others untouched."""
    ts = list(read_path(str(path)))
    with Archive(archive) as a:
        first = ts[0]
        a.put_transcript(first)
        r = first.units[3]
        ref = a.put(first.id, r)
        stub = r.replace(content=f"[bash output, 100 lines, archived as {ref}]", meta={"ref": ref})
        ts[0] = first.replace(units=[*first.units[:3], stub, first.units[4]])
    write_path(ts, str(out))


def test_expand_restores_a_single_transcript(tmp_path: Path) -> None:
    original = tmp_path / "chat.json"
    write_path([_conversation("alpha")], str(original))
    small = tmp_path / "small.json"
    _compact_by_hand(original, str(tmp_path / "small.json.ctx.db"), small)
    assert "archived as ref-" in small.read_text() and LOG not in small.read_text()
    back = tmp_path / "back.json"
    r = run("expand", str(small), "-o", str(back))  # archive found beside the input
    assert r.exit_code == 0 and r.stdout == ""
    assert r.stderr == f"Expanded 1 transcript from {small}.ctx.db\n"
    assert back.read_bytes() == original.read_bytes()
    # to stdout, from stdin, another format
    r = run("expand", "-", "--archive", f"{small}.ctx.db", "--to", "units", input=small.read_text())
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["role"] for x in records] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ] and records[3]["content"] == LOG


def test_expand_dataset_with_untouched_lines(tmp_path: Path) -> None:
    original = tmp_path / "runs.jsonl"
    ts = [_conversation(tag) for tag in ("alpha", "beta", "gamma")]
    for t in ts:
        t.layout = "dataset"
    write_path(ts, str(original))
    small = tmp_path / "small.jsonl"
    archive = str(tmp_path / "a.ctx.db")
    _compact_by_hand(original, archive, small)
    back = tmp_path / "back.jsonl"
    r = run("expand", str(small), "--archive", archive, "-o", str(back))
    assert r.exit_code == 0
    assert (
        r.stderr
        == f"Expanded 3 transcripts from {archive} (2 had nothing archived and are written as read)\n"
    )
    assert back.read_bytes() == original.read_bytes()


def test_expand_untouched_file_is_copied_byte_for_byte(tmp_path: Path) -> None:
    src = tmp_path / "tau.json"
    src.write_bytes((SAMPLES / "tau-bench-airline.json").read_bytes())
    archive = str(tmp_path / "empty.ctx.db")
    Archive(archive).close()
    back = tmp_path / "back.json"
    r = run("expand", str(src), "--archive", archive, "-o", str(back))
    assert r.exit_code == 0 and back.read_bytes() == src.read_bytes()


def test_expand_errors_write_nothing(tmp_path: Path) -> None:
    original = tmp_path / "chat.json"
    write_path([_conversation("alpha")], str(original))
    small = tmp_path / "small.json"
    _compact_by_hand(original, str(tmp_path / "right.ctx.db"), small)
    back = tmp_path / "back.json"
    r = run("expand", str(small), "--archive", str(tmp_path / "missing.ctx.db"), "-o", str(back))
    assert r.exit_code == 1 and "no archive at" in r.stderr
    wrong = str(tmp_path / "wrong.ctx.db")
    Archive(wrong).close()
    r = run("expand", str(small), "--archive", wrong, "-o", str(back))
    assert r.exit_code == 1
    assert (
        "1 ref of transcript 'small' is not in" in r.stderr and "another --archive" in r.stderr
    )
    assert not back.exists() and not (tmp_path / "missing.ctx.db").exists()


# -- expand(compact(x)) == x, through the real CLI, for every strategy ---------------------------


def _canonical(path: Path, out: Path) -> bytes:
    """What the formats layer writes for the file as read: expand can do no better than this."""
    write_path(list(read_path(str(path))), str(out))
    return out.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize(
    "sample", ["tau-bench-airline.json", "anthropic-messages.json", "codex-rollout.jsonl"]
)
def test_expand_undoes_compact(tmp_path: Path, strategy: str, sample: str) -> None:
    src = SAMPLES / sample
    small = tmp_path / f"small-{sample}"
    r = run("compact", str(src), "--chain", strategy, "--limit", "2500", "--no-usage", "-o", str(small))
    assert r.exit_code == 0, r.stderr
    assert small.read_bytes() != src.read_bytes()  # it did compact
    back = tmp_path / f"back-{sample}"
    r = run("expand", str(small), "-o", str(back))
    assert r.exit_code == 0, r.stderr
    assert back.read_bytes() == _canonical(src, tmp_path / "canon")


@st.composite
def sessions(draw: st.DrawFn) -> Transcript:
    """Random agent sessions: requests, parallel calls, outputs of very different sizes."""
    units = [Unit(id="sys", role="system", content="You are an agent.")]
    n = 0
    for turn in range(draw(st.integers(1, 6))):
        units.append(
            Unit(
                id=f"q{turn}",
                role="user",
                content=draw(st.sampled_from(["fix it", "go on", "why?"])) + f" ({turn})",
            )
        )
        for step in range(draw(st.integers(0, 3))):
            k = draw(st.integers(1, 3))
            calls = [ToolCall(f"c{n + j}", "bash", f'{{"i": {n + j}}}') for j in range(k)]
            units.append(
                Unit(id=f"a{n}", role="assistant", content=f"step {step}", tool_calls=calls)
            )
            for c in calls:
                size = draw(st.sampled_from([1, 30, 400]))
                units.append(
                    Unit(
                        id=f"r{c.id}",
                        role="tool",
                        content="\n".join(f"{c.id} out {i}" for i in range(size)),
                        tool_call_id=c.id,
                        name="bash",
                    )
                )
            n += k
        units.append(Unit(id=f"m{turn}", role="assistant", content=f"done with {turn}"))
    return Transcript(units=units, id="t", source_format="openai", layout="array")


@pytest.mark.slow
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sessions(), st.sampled_from(sorted(STRATEGIES)), st.integers(300, 3000))
def test_expand_compact_property(tmp_path: Path, t: Transcript, strategy: str, limit: int) -> None:
    src = tmp_path / "in.json"
    write_path([t], str(src))
    small = tmp_path / "small.json"
    archive = tmp_path / "small.json.ctx.db"
    for p in (small, archive):
        if p.exists():
            p.unlink()
    r = run(
        "compact",
        str(src),
        "--chain",
        strategy,
        "--limit",
        str(limit),
        "--recovery",
        "truncate",
        "-o",
        str(small),
    )
    if r.exit_code != 0:
        assert "BREAKER_FAILED" in r.stderr or "below" in r.stderr, r.stderr
        return
    back = tmp_path / "back.json"
    r = run("expand", str(small), "-o", str(back))
    assert r.exit_code == 0, r.stderr
    assert back.read_bytes() == src.read_bytes()
