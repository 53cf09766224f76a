"""Fault injection (issue 16): outputs that name inputs, pipes, full disks, hostile input and
flags, interrupts and broken pipes, the network. Every case: the exit code, the exact message,
no traceback, and nothing half written."""

from __future__ import annotations

import errno
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from ctxkit import atomic
from ctxkit.cli import cli
from ctxkit.errors import CtxkitError, UsageError
from ctxkit.fileio import check_paths

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_transcripts" / "tau-bench-airline.json"  # 8,130 tokens, openai
FAST = ["--limit", "3000", "--embedder", "lexical"]


def run(args: list[str], stdin: bytes | None = None) -> Result:
    result = CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)
    assert "Traceback" not in result.output
    assert "Traceback" not in result.stderr
    return result


def files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes: what a failed run must leave unchanged.

    The archives in `db/` are left out: what a failed run leaves there is the archive's matter."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not stat_is_fifo(p) and p.parent.name != "db"
    }


def stat_is_fifo(p: Path) -> bool:
    import stat

    return stat.S_ISFIFO(p.stat().st_mode)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch folder as the working directory, holding the input `a.json` and a config."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    shutil.copy(SAMPLE, tmp_path / "a.json")
    (tmp_path / "cfg.yaml").write_text("context_config:\n  default_limit: 3000\n")
    return tmp_path


# ---------------------------------------------------------------- 1. outputs vs inputs

INPUT_MSG = "{flag} {path} is the input {iflag} {ipath}: writing it would destroy the input; give the output another file"
PAIR_MSG = "{flag1} {path1} and {flag2} {path2} name the same file; give each output its own file"

COMPACT_OUTPUTS = ["-o", "--archive", "--report", "--events"]


def _compact_args(given: dict[str, str]) -> list[str]:
    args = ["compact", given.pop("PATH", "a.json"), *FAST]
    given.setdefault("-o", "out.json")
    for flag, value in given.items():
        args += [flag, value]
    return args


@pytest.mark.parametrize("output", COMPACT_OUTPUTS)
@pytest.mark.parametrize("input_flag", ["PATH", "--config"])
def test_compact_output_naming_an_input_is_refused(work: Path, output: str, input_flag: str) -> None:
    src = "a.json" if input_flag == "PATH" else "cfg.yaml"
    before = files(work)
    given = {output: src}
    if input_flag == "--config":
        given["--config"] = "cfg.yaml"
    result = run(_compact_args(given))
    assert result.exit_code == 2
    msg = INPUT_MSG.format(flag=output, path=src, iflag=input_flag, ipath=src)
    assert f"Error: {msg}\n" in result.stderr
    assert files(work) == before


@pytest.mark.parametrize(
    "first,second",
    [(a, b) for i, a in enumerate(COMPACT_OUTPUTS) for b in COMPACT_OUTPUTS[i + 1 :]],
)
def test_compact_outputs_naming_each_other_are_refused(work: Path, first: str, second: str) -> None:
    before = files(work)
    result = run(_compact_args({first: "x.out", second: "x.out"}))
    assert result.exit_code == 2
    msg = PAIR_MSG.format(flag1=first, path1="x.out", flag2=second, path2="x.out")
    assert f"Error: {msg}\n" in result.stderr
    assert files(work) == before


def test_default_archive_is_checked_too(work: Path) -> None:
    """`-o o.json` puts the archive at o.json.ctx.db: a report there is refused."""
    result = run(_compact_args({"-o": "o.json", "--report": "o.json.ctx.db"}))
    assert result.exit_code == 2
    msg = PAIR_MSG.format(flag1="--archive", path1="o.json.ctx.db", flag2="--report", path2="o.json.ctx.db")
    assert f"Error: {msg}\n" in result.stderr


@pytest.mark.parametrize("link", ["symlink", "hardlink", "dotted"])
def test_same_file_by_inode_not_by_name(work: Path, link: str) -> None:
    name = {"symlink": "s.json", "hardlink": "h.json", "dotted": "./sub/../a.json"}[link]
    (work / "sub").mkdir()
    if link == "symlink":
        os.symlink("a.json", "s.json")
    elif link == "hardlink":
        os.link("a.json", "h.json")
    before = (work / "a.json").read_bytes()
    result = run(_compact_args({"--report": name}))
    assert result.exit_code == 2
    msg = INPUT_MSG.format(flag="--report", path=name, iflag="PATH", ipath="a.json")
    assert f"Error: {msg}\n" in result.stderr
    assert (work / "a.json").read_bytes() == before


def test_stdout_and_dev_null_never_conflict(work: Path) -> None:
    result = run(
        ["compact", "a.json", *FAST, "-o", "/dev/null", "--report", "/dev/null", "--events", "-",
         "--archive", "arch.db"]
    )
    assert result.exit_code == 0, result.stderr
    assert "Context reduced 8,130 -> " in result.stderr


@pytest.mark.parametrize(
    "args,msg",
    [
        (["expand", "c.json", "--archive", "c.db", "-o", "c.json"],
         INPUT_MSG.format(flag="-o", path="c.json", iflag="COMPACTED", ipath="c.json")),
        (["expand", "c.json", "--archive", "c.db", "-o", "c.db"],
         INPUT_MSG.format(flag="-o", path="c.db", iflag="--archive", ipath="c.db")),
        (["score-rl", "a.json", "-o", "a.json"],
         INPUT_MSG.format(flag="-o", path="a.json", iflag="PATH", ipath="a.json")),
        (["score-rl", "a.json", "--config", "cfg.yaml", "-o", "cfg.yaml"],
         INPUT_MSG.format(flag="-o", path="cfg.yaml", iflag="--config", ipath="cfg.yaml")),
        (["score-rl", "a.json", "--truth", "t.jsonl", "-o", "t.jsonl"],
         INPUT_MSG.format(flag="-o", path="t.jsonl", iflag="--truth", ipath="t.jsonl")),
        (["score-rl", "a.json", "--actions", "act.yaml", "-o", "act.yaml"],
         INPUT_MSG.format(flag="-o", path="act.yaml", iflag="--actions", ipath="act.yaml")),
        (["simulate", "-s", "long_chat", "-o", "s.jsonl", "--truth", "s.jsonl"],
         PAIR_MSG.format(flag1="-o", path1="s.jsonl", flag2="--truth", path2="s.jsonl")),
        (["simulate", "-s", "long_chat", "-o", "s.truth.jsonl"],
         PAIR_MSG.format(flag1="-o", path1="s.truth.jsonl", flag2="its ground truth", path2="s.truth.jsonl")),
        (["bench", "--suite", "scale", "-o", "b.png", "--plot", "b.png"],
         PAIR_MSG.format(flag1="-o", path1="b.png", flag2="--plot", path2="b.png")),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_other_commands_refuse_an_output_that_names_an_input(work: Path, args: list[str], msg: str) -> None:
    shutil.copy("a.json", "c.json")
    Path("c.db").write_bytes(b"")
    Path("t.jsonl").write_text("")
    Path("act.yaml").write_text("- name: a\n  chain: [offload]\n")
    before = files(work)
    result = run(args)
    assert result.exit_code == 2
    assert f"Error: {msg}\n" in result.stderr
    assert files(work) == before


def test_check_paths_engine() -> None:
    check_paths({"PATH": ["-", None]}, {"-o": "-", "--report": "-", "--events": None})
    with pytest.raises(UsageError, match="^-o x and --archive x name the same file"):
        check_paths({}, {"-o": "x", "--archive": "x"})


# ---------------------------------------------------------------- 3. pipes


def _fifo_with_writer(path: Path, data: bytes) -> threading.Thread:
    os.mkfifo(path)

    def write() -> None:
        with open(path, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def _pipe_fd_path(data: bytes) -> tuple[str, threading.Thread, int]:
    r, w = os.pipe()

    def write() -> None:
        with os.fdopen(w, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return f"/dev/fd/{r}", writer, r


@pytest.mark.parametrize("kind", ["fifo", "dev-fd"])
@pytest.mark.parametrize("fits", [True, False], ids=["fits", "compacts"])
def test_compact_reads_a_pipe_once(work: Path, kind: str, fits: bool) -> None:
    data = SAMPLE.read_bytes()
    if kind == "fifo":
        source, writer, fd = "in.fifo", _fifo_with_writer(work / "in.fifo", data), None
    else:
        source, writer, fd = _pipe_fd_path(data)
    try:
        limit = ["--limit", "20000"] if fits else ["--limit", "3000"]
        result = run(["compact", source, *limit, "--embedder", "lexical", "-o", "p.json"])
    finally:
        writer.join(timeout=10)
        if fd is not None:
            os.close(fd)
    assert result.exit_code == 0, result.stderr
    out = (work / "p.json").read_bytes()
    if fits:
        assert out == data
        assert "(unchanged)" in result.stderr
    else:
        assert result.stderr.startswith("Context reduced ")
        restored = run(["expand", "p.json", "-o", "r.json"])
        assert restored.exit_code == 0, restored.stderr
        assert orjson.loads((work / "r.json").read_bytes()) == orjson.loads(data)


def test_expand_reads_a_pipe_once(work: Path) -> None:
    assert run(["compact", "a.json", *FAST, "-o", "c.json"]).exit_code == 0
    writer = _fifo_with_writer(work / "c.fifo", (work / "c.json").read_bytes())
    result = run(["expand", "c.fifo", "--archive", "c.json.ctx.db", "-o", "r.json"])
    writer.join(timeout=10)
    assert result.exit_code == 0, result.stderr
    assert orjson.loads((work / "r.json").read_bytes()) == orjson.loads(SAMPLE.read_bytes())


# ---------------------------------------------------------------- 5. full disk


class _FullFile:
    """A file whose writes fail with ENOSPC once `room` bytes are written (the rest pass through)."""

    def __init__(self, real: Any, room: int) -> None:
        self._real = real
        self._room = room

    def write(self, data: Any) -> int:
        if len(data) > self._room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return int(self._real.write(data))

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._real.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """`full_disk(room)`: from now on every file ctxkit writes fails after `room` bytes."""

    def fill(room: int = 0) -> None:
        real = os.fdopen
        monkeypatch.setattr(atomic, "_fdopen", lambda fd, *a, **kw: _FullFile(real(fd, *a, **kw), room))

    return fill


ENOSPC_TEXT = os.strerror(errno.ENOSPC)

FULL_DISK_CASES = {
    "compact -o": (["compact", "a.json", *FAST, "-o", "out.json", "--archive", "db/a.db"], "out.json"),
    "compact --report": (
        ["compact", "a.json", *FAST, "-o", "-", "--report", "r.json", "--archive", "db/a.db"],
        "r.json",
    ),
    "compact --events": (
        ["compact", "a.json", *FAST, "-o", "-", "--events", "ev.jsonl", "--archive", "db/a.db"],
        "ev.jsonl",
    ),
    "compact unchanged -o": (
        ["compact", "a.json", "--limit", "20000", "-o", "out.json", "--archive", "db/a.db"],
        "out.json",
    ),
    "config --init": (["config", "--init", "c.yaml"], "c.yaml"),
    "simulate -o": (["simulate", "-s", "long_chat", "-o", "s.jsonl"], "s.jsonl"),
    "simulate -o dir": (["simulate", "-s", "long_chat", "-s", "fragmented", "-o", "sims/"], "sims/long_chat-0.jsonl"),
    "score-rl -o": (["score-rl", "-s", "long_chat", "--tokens", "3000", "--action", "offload", "-o", "rl.jsonl"], "rl.jsonl"),
}


@pytest.mark.parametrize("case", sorted(FULL_DISK_CASES))
@pytest.mark.parametrize("room", [0, 100])
def test_full_disk_is_one_line_and_leaves_nothing(
    work: Path, full_disk: Callable[[int], None], case: str, room: int
) -> None:
    args, target = FULL_DISK_CASES[case]
    (work / "sims").mkdir()
    (work / "db").mkdir()
    before = files(work)
    full_disk(room)
    result = run(args)
    assert result.exit_code == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: cannot write {target}: {ENOSPC_TEXT}"]
    assert files(work) == before  # no partial file, no temp file, no half set


@pytest.mark.parametrize("room", [0, 100])
def test_full_disk_on_expand(work: Path, full_disk: Callable[[int], None], room: int) -> None:
    assert run(["compact", "a.json", *FAST, "-o", "c.json"]).exit_code == 0
    before = files(work)
    full_disk(room)
    result = run(["expand", "c.json", "-o", "r.json"])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: cannot write r.json: {ENOSPC_TEXT}"
    assert files(work) == before


def test_full_disk_while_spooling_stdin(work: Path, full_disk: Callable[[int], None]) -> None:
    full_disk(10)
    result = run(["compact", "-", *FAST, "-o", "out.json"], stdin=SAMPLE.read_bytes())
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == f"Error: cannot spool stdin to a temp file: {ENOSPC_TEXT}"
    assert not (work / "out.json").exists()


def test_simulate_set_is_all_or_nothing(work: Path, full_disk: Callable[[int], None], monkeypatch: pytest.MonkeyPatch) -> None:
    """Transcripts are written, then the sidecar fails: no transcript is left without its truth."""
    real = os.fdopen
    opened: list[int] = []

    def second_fails(fd: int, *a: Any, **kw: Any) -> Any:
        opened.append(fd)
        return _FullFile(real(fd, *a, **kw), 10**9 if len(opened) < 3 else 0)

    monkeypatch.setattr(atomic, "_fdopen", second_fails)
    (work / "sims").mkdir()
    result = run(["simulate", "-s", "long_chat", "-s", "fragmented", "-o", "sims/"])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: cannot write sims/truth.jsonl: {ENOSPC_TEXT}"
    assert list((work / "sims").iterdir()) == []


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB tmpfs (needs root and mount); skipped where it cannot be mounted."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if not shutil.which("mount"):
        pytest.skip("no mount command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.slow
def test_real_full_tmpfs(work: Path, tiny_tmpfs: Path) -> None:
    big = orjson.loads(SAMPLE.read_bytes()) * 12  # ~100 KB: more than the tmpfs holds
    (work / "big.json").write_bytes(orjson.dumps(big))
    out = tiny_tmpfs / "out.json"
    result = run(["compact", "big.json", "--limit", "10000000", "-o", str(out), "--archive", "a.db"])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: cannot write {out}: {ENOSPC_TEXT}"
    assert list(tiny_tmpfs.iterdir()) == []


# ---------------------------------------------------------------- 6. hostile input and flags


def _nested(depth: int) -> bytes:
    """A JSON value `depth` lists deep (written by hand: no JSON library writes that deep)."""
    return b"[" * depth + b'"deep"' + b"]" * depth


def _with_deep_message(depth: int) -> bytes:
    msgs = orjson.loads(SAMPLE.read_bytes())
    msgs[3]["content"] = "@DEEP@"
    return orjson.dumps(msgs).replace(b'"@DEEP@"', _nested(depth))


@pytest.mark.parametrize("depth", [255, 600, 1000])
def test_deep_nesting_is_refused_before_anything_is_archived(work: Path, depth: int) -> None:
    (work / "deep.json").write_bytes(_with_deep_message(depth))
    result = run(["compact", "deep.json", *FAST, "-o", "out.json"])
    assert result.exit_code == 1
    assert "JSON nested more than 240 levels deep, which cannot be written back; flatten that record" in result.stderr
    assert not (work / "out.json").exists()
    assert not (work / "out.json.ctx.db").exists()


def test_count_reads_deep_nesting(work: Path) -> None:
    (work / "deep.json").write_bytes(_with_deep_message(1000))
    result = run(["count", "deep.json", "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize(
    "args,msg",
    [
        (["guard", "a.json", "--warn-threshold", "nan"], "Invalid value for '--warn-threshold': 'nan' is not a finite number."),
        (["guard", "a.json", "--block-threshold", "inf"], "Invalid value for '--block-threshold': 'inf' is not a finite number."),
        (["count", "a.json", "--tool-schema-scale", "nan"], "Invalid value for '--tool-schema-scale': 'nan' is not a finite number."),
        (["compact", "a.json", "--tool-schema-scale", "nan"], "Invalid value for '--tool-schema-scale': 'nan' is not a finite number."),
        (["simulate", "-s", "long_chat", "--p1-ratio", "nan"], "Invalid value for '--p1-ratio': 'nan' is not a finite number."),
        (["guard", "a.json", "--config", "deep.yaml"], "deep.yaml: not valid YAML: nested too deeply"),
        (["guard", "a.json", "--config", "nan.yaml"], "nan.yaml: context_config.warning_threshold: nan is not a finite number; allowed: a number above 0 and up to 1"),
        (["compact", "a.json", *FAST, "--chain", ""], "--chain is empty; give strategy names separated by commas"),
        (["compact", "a.json", *FAST, "--chain", " , "], "--chain is empty; give strategy names separated by commas"),
        (["bench", "--realdata", "MISSING"], "Invalid value for '--realdata': Directory 'MISSING' does not exist."),
        (["simulate", "-s", "long_chat", "--tokens", "10000000000"], "Invalid value for '--tokens': 10000000000 is not in the range 1000<=x<=2000000."),
        (["score-rl", "-s", "long_chat", "--tokens", "10000000000"], "Invalid value for '--tokens': 10000000000 is not in the range 1000<=x<=2000000."),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_bad_flags_and_configs_exit_2(work: Path, args: list[str], msg: str) -> None:
    (work / "deep.yaml").write_text("[" * 5000 + "\n")
    (work / "nan.yaml").write_text("context_config:\n  warning_threshold: .nan\n")
    result = run(args)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == f"Error: {msg}"


def test_unknown_strategy_exits_2_in_actions_file_and_config(work: Path) -> None:
    known = "content_type_chunking, discard_low_rel, hybrid, mask_observations, offload, prioritize_recent, summarize_old"
    (work / "act.yaml").write_text("- name: x\n  chain: [bogus]\n")
    result = run(["score-rl", "-s", "long_chat", "--actions", "act.yaml"])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: act.yaml: action 1: unknown strategy 'bogus' in chain; known: {known}"
    (work / "bad.yaml").write_text("context_config:\n  breaking_strategy:\n    chain_order: [bogus]\n")
    result = run(["compact", "a.json", "--config", "bad.yaml", "-o", "o.json"])
    assert result.exit_code == 2
    assert "Error: bad.yaml: context_config.breaking_strategy.chain_order[0]: 'bogus' is not a strategy" in result.stderr


@pytest.mark.parametrize("target", ["nod/sub/x.jsonl", "nod/sub/"])
def test_simulate_creates_no_folders(work: Path, target: str) -> None:
    result = run(["simulate", "-s", "long_chat", "-o", target])
    assert result.exit_code == 1
    missing = work / "nod" / ("sub" if target.endswith(".jsonl") else "")
    assert result.stderr.strip() == f"Error: cannot write output {target}: the directory {str(missing).rstrip('/')} does not exist"
    assert not (work / "nod").exists()


def test_events_into_a_missing_folder(work: Path) -> None:
    result = run(["compact", "a.json", *FAST, "-o", "o.json", "--events", "nodir/ev.jsonl"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: cannot write events nodir/ev.jsonl: the directory {work / 'nodir'} does not exist"
    )
    assert sorted(p.name for p in work.iterdir()) == ["a.json", "cfg.yaml"]


@pytest.mark.parametrize(
    "text,where",
    [
        ('[{"role":"user","content":"hi"},\n{"role":"assistant","content":"yo"},\n{"role":5,"content":"x"}]\n', "b.json: record 3"),
        ('{"role":"user","content":"hi"}\n{"role":"assistant","content":"yo"}\n{"role":null,"content":"x"}\n', "b.json:3"),
    ],
    ids=["array", "jsonl"],
)
def test_a_broken_role_is_reported_on_its_record(work: Path, text: str, where: str) -> None:
    (work / "b.json").write_text(text)
    result = run(["count", "b.json"])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(f"Error: {where}: expected a chat message object with a string `role`")


def test_permission_denied_is_not_no_such_file(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxkit.errors import InputError
    from ctxkit.formats import expand_paths

    def denied(path: Any, *a: Any, **kw: Any) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(os.path, "exists", lambda p: False)
    monkeypatch.setattr(os, "stat", denied)
    with pytest.raises(InputError, match="locked/a.json: permission denied"):
        expand_paths(["locked/a.json"])


# ---------------------------------------------------------------- 6. interrupts and pipes


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_an_interrupt_python_wrapped_in_a_class_definition_is_quiet(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a command imports a module that defines a dataclass: Python 3.11 raises
    `RuntimeError: Error calling __set_name__ on 'Field' instance` from the KeyboardInterrupt,
    and the run printed that traceback. It is an interrupt: exit 130, nothing on stderr."""
    import ctxkit.cli.count as count_cli

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance 'min_limit'") from exc

    monkeypatch.setattr(count_cli, "read_with_context", interrupted)
    r = CliRunner().invoke(cli, ["count", "a.json"])
    assert r.exit_code == 130 and "Traceback" not in r.stderr and not r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0.05, 0.2, 0.4, 0.7, 1.0, 1.5])
def test_sigint_during_start_up_is_quiet(work: Path, delay_s: float) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxkit", "compact", "a.json", *FAST, "-o", "o.json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # faulthandler: a crash says where it happened
        env={**_env(), "PYTHONFAULTHANDLER": "1"},
        # a shell's background job ignores SIGINT, and a child would inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    if b"Fatal Python error: init_import_site" in err:
        return  # the interpreter's own start-up (site.py), before any ctxkit code runs
    if proc.returncode not in (0, 130, -signal.SIGINT) and b"ctxkit" not in err:
        # CPython itself crashing on a signal in its start-up (seen once: SIGSEGV, in a fresh
        # clone at 0.05 s): no frame of ctxkit on the stack faulthandler printed, if any
        return
    if err.rstrip().endswith(b"KeyboardInterrupt") and b"ctxkit/cli" not in err and b"ctxkit/__main__" not in err:
        return  # runpy still importing the package (a fresh clone compiles it): no handler can exist yet
    assert b"Traceback" not in err, err.decode()
    # a signal may find the run already done (a fast machine finishes within the delay): a
    # clean exit is as good as a quiet interrupt, and no wall-clock threshold decides it
    finished = proc.returncode == 0
    assert finished or proc.returncode in (130, -signal.SIGINT), err.decode()
    leftovers = [p.name for p in work.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


@pytest.mark.slow
def test_output_into_head_exits_quietly(work: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxkit", "simulate", "-s", "all", "--format", "openai"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does after its line
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert err == b""
    assert proc.returncode == 141


def test_broken_pipe_in_process_is_quiet(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import click

    def broken(*a: Any, **kw: Any) -> None:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(click, "echo", broken)
    monkeypatch.setattr("ctxkit.cli.guard.click.echo", broken)
    result = run(["guard", "a.json"])
    assert result.exit_code == 141
    assert result.stderr == ""


# ---------------------------------------------------------------- engine seams


def test_atomic_set_renames_all_or_none(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), atomic.atomic_set() as fs:
        with fs.open(tmp_path / "a") as f:
            f.write("a")
        raise RuntimeError("the second file failed")
    assert list(tmp_path.iterdir()) == []
    with atomic.atomic_set() as fs:
        for name in "ab":
            with fs.open(tmp_path / name) as f:
                f.write(name)
    assert sorted(p.read_text() for p in tmp_path.iterdir()) == ["a", "b"]


def test_spooled_input_of_a_regular_file_is_the_file(tmp_path: Path) -> None:
    with atomic.spooled_input(str(SAMPLE)) as path:
        assert path == str(SAMPLE)


def test_full_disk_at_the_writer_boundary(tmp_path: Path, full_disk: Callable[[int], None]) -> None:
    full_disk(3)
    with pytest.raises(CtxkitError, match=f"^cannot write {tmp_path / 'x'}: {ENOSPC_TEXT}$"):
        atomic.write_bytes_atomic(tmp_path / "x", b"more than three")
    assert list(tmp_path.iterdir()) == []
    _ = io  # io and socket are used by the network tests below
    _ = socket


# ---------------------------------------------------------------- 10. no network


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every DNS lookup and socket connect raises (and is recorded)."""
    attempts: list[str] = []

    def refuse(*a: Any, **kw: Any) -> Any:
        attempts.append(repr(a[:2]))
        raise OSError(errno.ENETUNREACH, "network disabled by the test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def test_guard_gpt4o_never_touches_the_network(
    work: Path, no_network: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = work / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    from ctxkit.tokens import loaders

    monkeypatch.setattr(loaders, "_TOKENIZERS", {})  # load afresh, under this cache
    result = run(["guard", "a.json", "--model", "gpt-4o", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert no_network == []
    assert result.stderr.strip() == ""  # o200k_base is bundled: exact, no proxy, no warning
    verdict = orjson.loads(result.stdout)
    assert verdict["targets"][0]["tokenizer"] == "o200k_base"
    # a tokenizer that is not bundled, chosen in the config: a clear error, never a silent switch
    (work / "c.yaml").write_text(
        "context_config:\n  models:\n    old-davinci:\n      context_window: 4097\n"
        "      tokenizer: p50k_base\n"
    )
    result = run(["guard", "a.json", "--model", "old-davinci", "--config", "c.yaml", "--format", "json"])
    assert no_network == []
    assert result.exit_code == 2
    assert "cannot load tiktoken encoding 'p50k_base'" in result.stderr
    assert "ctxkit never downloads" in result.stderr


def test_explicit_encoding_not_bundled_is_a_clear_error(work: Path, no_network: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    from ctxkit.tokens import loaders

    monkeypatch.setattr(loaders, "_TOKENIZERS", {})
    result = run(["count", "a.json", "--tokenizer", "p50k_base"])
    assert result.exit_code == 2
    assert no_network == []
    assert "could not be loaded offline (tiktoken's cache is turned off; ctxkit never downloads)" in result.stderr


# ---------------------------------------------------------------- 7. --jobs


@pytest.mark.parametrize(
    "jobs,transcripts,cpus,expected",
    [(100000, 1, 8, 1), (100000, 3, 8, 3), (100000, 5, 2, 2), (2, 5, 8, 2), (1, 5, 8, 1)],
)
def test_jobs_are_capped_at_the_work_and_the_cores(
    monkeypatch: pytest.MonkeyPatch, jobs: int, transcripts: int, cpus: int, expected: int
) -> None:
    from ctxkit.compaction import parallel

    monkeypatch.setattr(parallel, "usable_cpus", lambda: cpus)
    pulled: list[int] = []

    def lazy() -> Iterator[Any]:
        for i in range(transcripts):
            pulled.append(i)
            yield f"t{i}"

    workers, head = parallel.plan_workers(jobs, lazy())
    assert workers == expected
    assert len(pulled) == len(head) == expected  # read ahead no further than the workers


def test_one_transcript_forks_no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    from ctxkit.compaction import CompactSettings, parallel
    from ctxkit.formats import read_path

    def no_fork(*a: Any, **kw: Any) -> Any:
        raise AssertionError("a pool was made for one transcript")

    monkeypatch.setattr(multiprocessing, "get_context", no_fork)
    (t,) = read_path(str(SAMPLE))
    (result,) = parallel.compact_many([t], CompactSettings(limit=3000), jobs=100000)
    assert result.changed


@pytest.mark.slow
def test_workers_of_a_killed_parent_die_quietly(work: Path) -> None:
    """SIGKILL the parent of `--jobs 2`: its workers must not print BrokenPipeError tracebacks."""
    line = orjson.dumps({"messages": orjson.loads(SAMPLE.read_bytes())}) + b"\n"
    # ten times what the two workers get through in the second before the kill, on a fast machine
    (work / "ds.jsonl").write_bytes(line * 2000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxkit", "compact", "ds.jsonl", "--jobs", "2", "--limit", "3000",
         "--embedder", "lexical", "-o", "out.jsonl", "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the workers are busy
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        if len(children) >= 2:
            break
        time.sleep(0.05)
    else:
        pytest.fail("no workers started")
    time.sleep(1.0)
    proc.kill()
    assert proc.stderr is not None
    err = proc.stderr.read()  # EOF once every worker has exited
    proc.wait(timeout=60)
    assert b"Traceback" not in err, err.decode()
    assert b"BrokenPipeError" not in err
    assert not (work / "out.jsonl").exists()


def test_ctrl_c_during_a_subcommand_import_is_raised_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGINT while a subcommand's modules load waits for the import to finish (a
    KeyboardInterrupt inside a C extension's initialisation crashed the interpreter)."""
    import importlib

    import click

    from ctxkit.cli import cli

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's default handler here")
    imported: list[str] = []
    real = importlib.import_module

    def import_interrupted(name: str, *a: Any, **kw: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)  # arrives mid-import
        module = real(name, *a, **kw)
        imported.append(name)  # the import went on to its end
        return module

    monkeypatch.setattr(importlib, "import_module", import_interrupted)
    with pytest.raises(KeyboardInterrupt):
        cli.get_command(click.Context(cli), "count")
    assert imported == ["ctxkit.cli.count"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
