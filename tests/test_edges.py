"""Nothing lost at the edges (issue 24): endless inputs, closed streams, device files and
symlinks as outputs, existing files as archives, damaged archive rows, unbounded searches, and
error lines that stay one line. `scripts/edge_probe.py` runs the same hostile inputs against
every command; these tests pin each behaviour down."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ctxkit import atomic
from ctxkit.archive.patterns import MAX_PATTERN_CHARS, Pattern
from ctxkit.archive.store import Archive
from ctxkit.cli import cli, one_line
from ctxkit.errors import ArchiveError, CtxkitError, InputError
from ctxkit.model import Unit

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_transcripts" / "tau-bench-airline.json"  # 8,130 tokens, openai
FAST = ["--limit", "3000", "--embedder", "lexical"]
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def run(args: list[str], stdin: bytes | None = None) -> Result:
    result = CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)
    assert "Traceback" not in result.stderr
    return result


def shell(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    """`ctxkit` run by sh, so `>&-` closes a descriptor as a user's shell does."""
    command = f"{sys.executable} -m ctxkit"
    return subprocess.run(
        ["sh", "-c", script.replace("ctxkit", command, 1)],
        cwd=cwd,
        capture_output=True,
        env={**os.environ, **env},
        timeout=120,
    )


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    shutil.copy(SAMPLE, tmp_path / "a.json")
    return tmp_path


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """a.json compacted to small.json, with its archive small.json.ctx.db."""
    d = tmp_path_factory.mktemp("compacted")
    shutil.copy(SAMPLE, d / "a.json")
    r = CliRunner().invoke(
        cli,
        ["compact", str(d / "a.json"), *FAST, "-o", str(d / "small.json")],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.stderr
    return d


def error_line(result: Result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("Error: "), result.stderr
    return lines[-1]


# ---------------------------------------------------------------- endless and huge inputs


@pytest.mark.parametrize(
    "args",
    [
        ["count", "/dev/zero"],
        ["guard", "/dev/zero", "--model", "gpt-4o"],
        ["score-rl", "/dev/zero", "--action", "offload"],
        ["compact", "/dev/zero", *FAST, "-o", "out.json"],
    ],
)
def test_dev_zero_is_refused_before_it_is_read(work: Path, args: list[str]) -> None:
    result = run(args)
    assert result.exit_code == 1
    assert error_line(result) == "Error: /dev/zero:1: binary data, not a JSON transcript"
    assert sorted(p.name for p in work.iterdir()) == ["a.json"]


def test_a_line_over_the_input_limit_is_one_error(work: Path) -> None:
    (work / "long.jsonl").write_bytes(b'{"role": "user", "content": "' + b"x" * (3 << 20) + b'"}\n')
    result = run(["count", "long.jsonl", "--max-input-mb", "2"])
    assert result.exit_code == 1
    assert error_line(result) == (
        "Error: long.jsonl:1: line larger than the 2 MB input limit; raise --max-input-mb or "
        "CTXKIT_MAX_INPUT_MB if it really is one transcript"
    )
    assert run(["count", "long.jsonl", "--max-input-mb", "4"]).exit_code == 0


def test_the_lines_of_one_transcript_count_together(work: Path) -> None:
    line = b'{"role": "user", "content": "' + b"y" * 100_000 + b'"}\n'
    (work / "many.jsonl").write_bytes(line * 30)  # 3 MB in lines of 100 kB
    result = run(["count", "many.jsonl", "--max-input-mb", "2"])
    assert result.exit_code == 1
    assert "many.jsonl:21: transcript larger than the 2 MB input limit" in error_line(result)
    # a dataset holds one conversation at a time: its size is not limited, its lines are
    conv = b'{"messages": [{"role": "user", "content": "' + b"z" * 100_000 + b'"}]}\n'
    (work / "data.jsonl").write_bytes(conv * 30)
    assert run(["count", "data.jsonl", "--max-input-mb", "2", "--format", "json"]).exit_code == 0


def test_a_json_document_over_the_limit_and_the_environment_variable(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = json.dumps([{"role": "user", "content": "w" * (3 << 20)}]).encode()
    (work / "doc.json").write_bytes(b"[\n" + doc[1:])
    monkeypatch.setenv("CTXKIT_MAX_INPUT_MB", "2")
    result = run(["count", "doc.json"])
    assert "doc.json:1: document larger than the 2 MB input limit" in error_line(result)
    monkeypatch.setenv("CTXKIT_MAX_INPUT_MB", "lots")
    result = run(["count", "doc.json"])
    assert result.exit_code == 2
    assert "CTXKIT_MAX_INPUT_MB must be a positive number of megabytes, got 'lots'" in result.stderr


def test_a_pipe_is_spooled_up_to_the_limit_and_the_spool_is_gone(work: Path) -> None:
    data = b'{"role": "user", "content": "' + b"v" * (3 << 20) + b'"}\n'
    result = run(["compact", *FAST, "-o", "out.json", "--max-input-mb", "1"], stdin=data)
    assert result.exit_code == 1
    assert error_line(result) == (
        "Error: <stdin>: input larger than the 1 MB input limit; raise --max-input-mb or "
        "CTXKIT_MAX_INPUT_MB if it really is one transcript (a pipe is copied to $TMPDIR first)"
    )
    assert sorted(p.name for p in work.iterdir()) == ["a.json"]  # $TMPDIR is `work`


def test_side_files_are_bounded_too(work: Path) -> None:
    result = run(["count", "a.json", "--system", "/dev/zero"])
    assert result.exit_code == 1
    assert "/dev/zero: line larger than" not in result.stderr
    assert "Error: /dev/zero: input larger than the 1,024 MB input limit" in error_line(result)


def test_a_truth_sidecar_is_bounded(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXKIT_MAX_INPUT_MB", "1")
    result = run(["score-rl", "a.json", "--truth", "/dev/zero", "--action", "offload"])
    assert result.exit_code == 1
    assert error_line(result).startswith("Error: /dev/zero:1: sidecar larger than the 1 MB")


def test_report_reads_at_most_the_limit(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXKIT_MAX_INPUT_MB", "1")
    result = run(["report", "/dev/zero", "--html", "page.html"])
    assert result.exit_code == 1
    assert error_line(result).startswith("Error: /dev/zero: input larger than the 1 MB")
    assert not (work / "page.html").exists()


# ---------------------------------------------------------------- closed standard streams


@pytest.mark.parametrize(
    "script",
    [
        "ctxkit count a.json >&-",
        "ctxkit compact a.json --limit 3000 >&-",
        "ctxkit simulate -s long_chat --tokens 3000 >&-",
        "ctxkit models >&-",
        "ctxkit --help >&-",
        "ctxkit --version >&-",
    ],
)
def test_a_closed_stdout_is_one_error_line_and_nothing_is_left(work: Path, script: str) -> None:
    proc = shell(script, work)
    assert proc.returncode == 1
    assert proc.stderr.decode().splitlines()[-1] == (
        "Error: cannot write to stdout: it is closed; redirect it (> FILE or > /dev/null) or "
        "give an output file"
    )
    assert sorted(p.name for p in work.iterdir()) == ["a.json"]


def test_a_closed_stderr_does_not_stop_the_work(work: Path) -> None:
    proc = shell("ctxkit compact a.json --limit 3000 -o out.json 2>&-", work)
    assert proc.returncode == 0
    assert (work / "out.json").stat().st_size > 0
    proc = shell("ctxkit count a.json --format json 2>&-", work)
    assert proc.returncode == 0 and json.loads(proc.stdout)[0]["total"] == 8130


def test_a_closed_stdin_reads_as_empty(work: Path) -> None:
    proc = shell("ctxkit count <&-", work)
    assert proc.returncode == 1
    assert proc.stderr.decode().splitlines()[-1] == (
        "Error: <stdin>: empty file: expected a JSON or JSONL transcript"
    )


def test_recall_to_a_closed_stdout(compacted: Path) -> None:
    ref = _refs(compacted / "small.json.ctx.db")[0]
    proc = shell(f"ctxkit recall {ref} --archive small.json.ctx.db >&-", compacted)
    assert proc.returncode == 1 and b"cannot write to stdout: it is closed" in proc.stderr


# ---------------------------------------------------------------- outputs that are not files


def test_a_symlink_output_is_written_through(work: Path) -> None:
    (work / "target.json").write_text("old\n")
    (work / "link.json").symlink_to("target.json")
    result = run(["compact", "a.json", *FAST, "-o", "link.json"])
    assert result.exit_code == 0, result.stderr
    assert os.readlink(work / "link.json") == "target.json"
    assert json.loads((work / "target.json").read_text())  # the compacted transcript
    assert not [p for p in work.iterdir() if p.name.startswith(".")]


def test_a_dangling_symlink_output_creates_its_target(work: Path) -> None:
    (work / "link.json").symlink_to("made.json")
    atomic.write_bytes_atomic(work / "link.json", b"[]\n")
    assert (work / "made.json").read_bytes() == b"[]\n" and (work / "link.json").is_symlink()


def test_a_dev_stdout_style_path_writes_to_stdout(work: Path) -> None:
    (work / "stdout").symlink_to("/proc/self/fd/1")
    with open(work / "captured.json", "wb") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "ctxkit", "compact", "a.json", "--limit", "3000", "-o",
             "stdout"],
            cwd=work,
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    assert (work / "stdout").is_symlink()
    assert json.loads((work / "captured.json").read_text())


@pytest.mark.skipif(not atomic._ANONYMOUS, reason="needs O_TMPFILE and /proc")
def test_an_output_has_no_name_until_it_is_whole(tmp_path: Path) -> None:
    # a run killed by SIGKILL mid-write leaves nothing: the temp file has no name yet
    with atomic.atomic_writer(tmp_path / "out.json") as out:
        out.write("half")
        assert list(tmp_path.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_an_atomic_set_writes_a_fifo_at_its_commit(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    with atomic.atomic_set() as files:
        with files.open(tmp_path / "a.txt") as f:
            f.write("a")
        with files.open(fifo) as f:
            f.write("through the pipe\n")
    reader.join(timeout=10)
    assert got == [b"through the pipe\n"] and stat.S_ISFIFO(fifo.stat().st_mode)
    assert (tmp_path / "a.txt").read_text() == "a"


@pytest.mark.skipif(not ROOT, reason="mknod needs root")
def test_device_nodes_stay_devices(work: Path) -> None:
    null = work / "null"
    full = work / "full"
    disk = work / "disk"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    os.mknod(disk, 0o600 | stat.S_IFBLK, os.makedev(7, 200))  # a loop device nobody attached
    cases = [
        ["simulate", "-s", "long_chat", "--tokens", "3000", "-o", "s.jsonl", "--truth", "NODE"],
        ["simulate", "-s", "long_chat", "--tokens", "3000", "-o", "NODE"],
        ["compact", "a.json", *FAST, "-o", "NODE", "--archive", "x.db"],
        ["compact", "a.json", *FAST, "-o", "o.json", "--report", "NODE"],
    ]
    for args in cases:
        result = run([a.replace("NODE", str(null)) for a in args])
        assert result.exit_code == 0, result.stderr
        result = run([a.replace("NODE", str(full)) for a in args])
        assert result.exit_code == 1
        assert error_line(result) == f"Error: cannot write {full}: No space left on device"
        result = run([a.replace("NODE", str(disk)) for a in args])
        assert result.exit_code == 1
        assert f"{disk}: it is a block device, not a file" in error_line(result)
    for node, kind in ((null, stat.S_ISCHR), (full, stat.S_ISCHR), (disk, stat.S_ISBLK)):
        assert kind(node.lstat().st_mode), node
    result = run(["compact", "a.json", *FAST, "-o", "o2.json", "--archive", str(null)])
    assert result.exit_code == 1
    assert error_line(result) == (
        f"Error: {null} is not a ctxkit archive (it is a device or a pipe, not a file)"
    )


# ---------------------------------------------------------------- archives


@pytest.mark.parametrize("content", [b"", b"x", b"notes\n"])
def test_an_existing_file_is_never_made_an_archive(work: Path, content: bytes) -> None:
    (work / "X").write_bytes(content)
    what = "it is empty" if not content else f"its {len(content):,} bytes are not one"
    message = (
        f"Error: X is not a ctxkit archive ({what}); give the path of an archive, or a new path "
        "for compact to create"
    )
    if content == b"notes\n":
        message = "Error: X is not a ctxkit archive (not an SQLite file)"
    for args in (
        ["recall", "--list", "--archive", "X"],
        ["compact", "a.json", *FAST, "-o", "o.json", "--archive", "X"],
    ):
        result = run(args)
        assert result.exit_code == 1
        assert error_line(result) == message
        assert (work / "X").read_bytes() == content
    assert sorted(p.name for p in work.iterdir()) == ["X", "a.json"]


@pytest.mark.skipif(not atomic._ANONYMOUS, reason="needs O_TMPFILE and /proc")
def test_a_new_archive_has_no_name_until_it_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a SIGKILL while an archive is made left `.X.ctx.db.*.tmp` and its journal beside it
    seen: list[list[str]] = []
    write_all = atomic._write_all

    def spy(fd: int, data: bytes) -> None:
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        write_all(fd, data)

    monkeypatch.setattr(atomic, "_write_all", spy)
    path = tmp_path / "a.ctx.db"
    with Archive(str(path)) as a:
        assert a.transcript_ids() == []
    assert seen == [[]]
    assert [p.name for p in tmp_path.iterdir()] == ["a.ctx.db"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_create_whole_never_replaces_a_file(tmp_path: Path) -> None:
    path = tmp_path / "x"
    assert atomic.create_whole(str(path), b"first") is True
    assert atomic.create_whole(str(path), b"second") is False
    assert path.read_bytes() == b"first" and [p.name for p in tmp_path.iterdir()] == ["x"]


def test_a_failed_run_removes_the_archive_it_created(work: Path) -> None:
    result = run(["compact", "a.json", "--limit", "1500", "--recovery", "error", "-o", "o.json"])
    assert result.exit_code == 1 and "BREAKER_FAILED" in result.stderr
    assert sorted(p.name for p in work.iterdir()) == ["a.json"]


def test_a_failed_run_keeps_an_archive_that_was_there(work: Path) -> None:
    assert run(["compact", "a.json", *FAST, "-o", "o.json"]).exit_code == 0
    before = (work / "o.json.ctx.db").read_bytes()
    result = run(["compact", "a.json", "--limit", "1500", "--recovery", "error", "-o", "o.json"])
    assert result.exit_code == 1
    assert (work / "o.json.ctx.db").read_bytes() == before


def test_archive_abort_removes_only_what_it_created_and_left_empty(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    a = Archive(str(path))
    assert a.created
    a.put("t0", Unit("u1", "tool", "log", "ok"))
    a.abort()  # rolled back: empty again, and ours
    assert not path.exists()
    with Archive(str(path)) as a:
        a.put("t0", Unit("u1", "tool", "log", "ok"))
    b = Archive(str(path))
    assert not b.created
    b.abort()
    assert path.exists()


DAMAGE = {  # an archive's rows (layout 2: the record packed, or its position in the original)
    "record not packed": (
        "UPDATE units SET record = x'ff00'",
        "archived unit {ref} is damaged: unknown record tag b'\\xff'",
    ),
    "record not json": (
        "UPDATE units SET record = CAST('jnot json' AS BLOB)",
        "archived unit {ref} is damaged: ",
    ),
    "record a list": (
        "UPDATE units SET record = CAST('j[1]' AS BLOB)",
        "archived unit {ref} is damaged: a list, not a record",
    ),
    "summary binary": (
        "UPDATE units SET summary = CAST(x'00ff' AS BLOB)",
        "archived unit {ref} is damaged: its summary is binary data, not text",
    ),
    "tokens text": (
        "UPDATE units SET tokens = 'many'",
        "archived unit {ref} is damaged: its tokens is str, not an integer or NULL",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_row_is_one_error_naming_the_archive(
    compacted: Path, tmp_path: Path, case: str
) -> None:
    sql, message = DAMAGE[case]
    db = tmp_path / "damaged.ctx.db"
    shutil.copyfile(compacted / "small.json.ctx.db", db)
    ref = _refs(db)[0]
    conn = sqlite3.connect(db)
    conn.execute(sql + " WHERE ref = ?", (ref,))
    conn.commit()
    conn.close()
    expected = f"Error: {db}: " + message.format(ref=ref)
    result = run(["recall", ref, "--archive", str(db)])
    assert result.exit_code == 1 and error_line(result).startswith(expected)
    if "summary" in case or "tokens" in case:  # the row's columns: --list reads them all
        result = run(["recall", "--list", "--archive", str(db)])
        assert result.exit_code == 1 and error_line(result).startswith(expected)
    from ctxkit.archive.mcp_server import call_tool

    with Archive(str(db), readonly=True) as archive:
        text, is_error = call_tool(archive, "recall", {"ref": ref})
        assert is_error and text.startswith(expected.removeprefix("Error: "))


def test_a_damaged_original_is_one_error_naming_the_archive(
    compacted: Path, tmp_path: Path
) -> None:
    db = tmp_path / "damaged.ctx.db"
    shutil.copyfile(compacted / "small.json.ctx.db", db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE transcripts SET record = substr(record, 1, 100)")
    conn.commit()
    conn.close()
    result = run(["expand", str(compacted / "small.json"), "--archive", str(db)])
    assert result.exit_code == 1
    line = error_line(result)
    # expand reads the archived units first: those stored as a position in the original say so
    assert line.startswith(f"Error: {db}: ")
    assert "is damaged: " in line and "(was the archive changed outside ctxkit?)" in line


@pytest.mark.skipif(not ROOT or not shutil.which("setpriv"), reason="runs as another user")
def test_an_unreadable_archive_says_permission_denied(compacted: Path, tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    db = tmp_path / "locked.ctx.db"
    shutil.copyfile(compacted / "small.json.ctx.db", db)
    os.chmod(db, 0o600)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if subprocess.run([*nobody, "-c", "import ctxkit"], capture_output=True, cwd="/", env=env,
                      timeout=120).returncode != 0:
        pytest.skip("the other user cannot read this checkout (it sits in a private directory)")
    proc = subprocess.run(
        [*nobody, "-m", "ctxkit", "recall", "--list", "--archive", str(db)],
        capture_output=True,
        cwd="/",
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.decode().splitlines()[-1] == (
        f"Error: cannot read archive {db}: permission denied"
    )


# ---------------------------------------------------------------- recall, byte for byte

ODD_TEXT = (
    "\x1b[31mFAILED\x1b[0m test_x\r\n\ttab\there   trailing   \n"
    "bell \x07 escape \x1b[2J done\ncaf\u00e9 \U0001f600 no newline at the end"
)


def test_recall_gives_the_archived_text_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with Archive(str(path)) as a:
        ref = a.put("t0", Unit("u1", "tool", "log", ODD_TEXT))
    result = run(["recall", ref, "--archive", str(path)])
    assert result.exit_code == 0
    assert result.stdout_bytes == ODD_TEXT.encode("utf-8") + b"\n"
    result = run(["recall", f"{ref}:L1-2", "--archive", str(path)])
    assert result.stdout_bytes == "\n".join(ODD_TEXT.split("\n")[:2]).encode() + b"\n"


# ---------------------------------------------------------------- bounded searches


def test_a_catastrophic_pattern_is_stopped_at_its_deadline() -> None:
    p = Pattern("(a|aa)+$", timeout_s=0.2)
    with pytest.raises(ArchiveError, match=r"took more than 0\.2 s and was stopped"):
        p.search("a" * 60 + "!")


def test_search_and_recall_patterns_are_bounded(tmp_path: Path) -> None:
    from ctxkit.archive.recall_tool import serve_recall, serve_search

    with Archive(str(tmp_path / "a.db")) as a:
        ref = a.put("t0", Unit("u1", "tool", "log", "start\n" + "a" * 60 + "!\nend"))
        with pytest.raises(ArchiveError, match="took more than 0.2 s"):
            serve_search(a, {"query": "(a|aa)+$"}, timeout_s=0.2)
        with pytest.raises(ArchiveError, match="took more than 0.2 s"):
            serve_recall(a, {"ref": ref, "search": "(a|aa)+$"}, timeout_s=0.2)
        with pytest.raises(CtxkitError, match="argument 'query' has 10,001 characters"):
            serve_search(a, {"query": "x" * (MAX_PATTERN_CHARS + 1)})
        assert "line 2" in serve_search(a, {"query": "a{60}!"})


def test_mcp_answers_malformed_and_oversized_lines(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    path = tmp_path / "a.db"
    with Archive(str(path)) as a:
        a.put("t0", Unit("u1", "tool", "log", "ok"))
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    lines = [
        json.dumps(init).encode(),
        b'{"jsonrpc": "2.0", "id": 1, "method": ',
        b"[1, 2]",
        b'{"jsonrpc": "2.0", "id": 2, "method": 7}',
        b"x" * (1 << 21),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).encode(),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "q" * (1 << 21)}},
            }
        ).encode(),
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "ctxkit", "mcp", "--archive", str(path)],
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        timeout=120,
    )
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert sorted(str(r.get("id")) for r in replies) == ["0", "2", "3", "4", "None", "None", "None"]
    # too large to parse, yet its id is in its first bytes: the client can match the refusal
    big = next(r for r in replies if r.get("id") == 4)["error"]
    assert big["code"] == -32600 and big["message"].startswith("request of 2,097,")
    # a line the server cannot read is answered at once, before what queues behind it
    errors = [r["error"] for r in replies if r.get("id") in (None, 2)]
    assert [e["code"] for e in errors] == [-32700, -32600, -32600, -32600]
    assert errors[0]["message"].startswith("Parse error: not JSON")
    assert errors[1]["message"] == "Invalid Request: expected a JSON-RPC object, got a JSON list"
    assert errors[2]["message"].startswith("Invalid Request: JSONRPCRequest.method")
    assert errors[3]["message"] == "request of 2,097,153 bytes refused: at most 1,048,576"
    tools = next(r for r in replies if r.get("id") == 3)["result"]["tools"]
    assert [t["name"] for t in tools] == ["recall", "search"]
    assert b"Traceback" not in proc.stderr


# ---------------------------------------------------------------- one-line errors


def test_control_characters_in_an_error_are_escaped() -> None:
    assert one_line("bad\nname.json:\x1b[31m") == "bad\\nname.json:\\x1b[31m"
    assert one_line("tab\tstays") == "tab\tstays"


def test_a_newline_in_a_file_name_keeps_the_error_on_one_line(work: Path) -> None:
    (work / "bad\nname.jsonl").write_text("not json\n")
    result = run(["count", "bad\nname.jsonl"])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("Error: bad\\nname.jsonl:1: ")


def test_ctrl_c_while_the_command_starts_is_quiet(tmp_path: Path) -> None:
    # a real SIGINT arrives while `ctxkit.cli` loads: click's decorators import locale (a shim
    # sends the signal, then loads the real locale in its place); the command ends as 130,
    # without the traceback through click and gettext it printed
    (tmp_path / "locale.py").write_text(
        "import importlib, os, signal, sys\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        f"sys.path.remove({str(tmp_path)!r})\n"
        "del sys.modules['locale']\n"
        "sys.modules['locale'] = importlib.import_module('locale')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", "from ctxkit.cli import main; main()", "count", "--help"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"},
        timeout=60,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, b"", b"")


# ---------------------------------------------------------------- failed runs leave nothing


@pytest.mark.skipif(not ROOT, reason="mknod needs root")
@pytest.mark.parametrize("flag", ["--report", "--html", "--events"])
def test_a_failed_side_output_leaves_no_output(work: Path, flag: str) -> None:
    full = work / "full"
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    result = run(["compact", "a.json", *FAST, "-o", "o.json", flag, str(full)])
    assert result.exit_code == 1
    assert error_line(result) == f"Error: cannot write {full}: No space left on device"
    assert sorted(p.name for p in work.iterdir()) == ["a.json", "full"]


def _dataset(work: Path, doomed: set[int]) -> Path:
    """Three copies of a.json as one JSONL dataset; those in `doomed` with a system prompt
    that no strategy can bring under --limit 3000."""
    from ctxkit.formats import read_path, write_path

    t = next(iter(read_path(str(work / "a.json"))))
    rows = []
    for n in range(3):
        units = list(t.units)
        if n in doomed:
            units[0] = units[0].replace(content="rule " * 4000)
        rows.append(t.replace(id=f"c{n}", units=units))
    write_path(rows, str(work / "ds.jsonl"), "openai")
    return work / "ds.jsonl"


def test_a_dataset_writes_what_it_can_and_exits_3(work: Path) -> None:
    from ctxkit.formats import read_path

    _dataset(work, {2})
    result = run(["compact", "ds.jsonl", *FAST, "-o", "o.jsonl"])
    assert result.exit_code == 3
    # the file and line, as every error names them
    assert "ds.jsonl:3: left out: limit 3,000 is below the least a compaction can leave" in result.stderr
    lines = result.stderr.splitlines()
    assert lines[-1] == "1 of 3 conversations could not be compacted and are left out (exit 3)"
    assert len(list(read_path("o.jsonl"))) == 2
    with Archive("o.jsonl.ctx.db", readonly=True) as a:
        assert sorted(a.transcript_ids()) == ["ds#1", "ds#2"]


def test_a_dataset_with_nothing_to_write_leaves_nothing(work: Path) -> None:
    _dataset(work, {0, 1, 2})
    result = run(["compact", "ds.jsonl", *FAST, "-o", "o.jsonl", "--report", "r.json"])
    assert result.exit_code == 3
    assert result.stderr.count(": left out: ") == 3
    lines = result.stderr.splitlines()
    assert lines[-1] == "3 of 3 conversations could not be compacted and nothing is written (exit 3)"
    assert sorted(p.name for p in work.iterdir()) == ["a.json", "ds.jsonl"]


def test_a_full_archive_stops_a_dataset_run(tmp_path: Path) -> None:
    # SQLite undoes the whole transaction on a full disk (here its page limit, the same
    # SQLITE_FULL): the savepoint is gone with it, and the run stops with the archive's one line
    # (it was `no such savepoint: conversation`, a traceback, on a small tmpfs)
    from ctxkit.compaction import CompactSettings
    from ctxkit.compaction.parallel import compact_many
    from ctxkit.simulate import generate

    archive = Archive(str(tmp_path / "a.db"))
    archive.begin()
    pages = archive._conn.execute("PRAGMA page_count").fetchone()[0]
    archive._conn.execute(f"PRAGMA max_page_count = {pages + 3}")
    dataset = [generate("long_chat", seed=n, tokens=5000).replace(id=f"c{n}") for n in range(3)]
    with pytest.raises(ArchiveError, match="database or disk is full"):
        list(compact_many(dataset, CompactSettings(limit=3000), archive=archive, keep_going=True))
    archive.abort()


def test_output_directory_is_removed_when_the_run_fails(tmp_path: Path) -> None:
    target = tmp_path / "shards"
    with pytest.raises(InputError), atomic.output_directory(str(target)):
        (target / "part-0.jsonl").write_text("{}\n")
        raise InputError("x", None, "failed")
    assert not target.exists()
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(InputError), atomic.output_directory(str(target)):
        raise InputError("x", None, "failed")
    assert (target / "keep.txt").read_text() == "mine"


def _refs(db: Path) -> list[str]:
    with Archive(str(db), readonly=True) as a:
        return [item.ref for item in a.list()]
