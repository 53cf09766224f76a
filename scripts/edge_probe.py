#!/usr/bin/env python3
"""Edge probe: every ctxkit command against hostile inputs, counting what goes wrong.

Endless inputs (/dev/zero, a FIFO of endless records) under a memory cap, closed stdin, stdout
and stderr, device nodes, FIFOs and symlinks as outputs, existing files as archives, damaged
archive rows, a local chat endpoint that echoes the API key, SIGINT early, SIGKILL mid-run,
hostile MCP requests, and file names with a newline. Each check lands in one category:

  traceback    a Python traceback, an "Exception ignored", a crash, or an undocumented exit code
  hung         a run that did not end within its bound (endless input, unbounded work)
  overwritten  a file that was not named as an output changed (a device, a FIFO, a symlink, an
               existing file turned into an archive)
  secret       the API key, or 8 or more of its characters in a row, in any output
  leftover     a failed or killed run left a file behind (temp file, archive, output, directory)
  unanswered   an MCP request without a JSON-RPC answer within its bound
  inexact      `recall` did not give the archived text byte for byte
  wording      an error of more than one line, not naming its file, or not saying what is wrong

Device-node checks need root (they `mknod` their own nodes in the probe's temp directory, never
touching /dev); they are skipped with a reason otherwise.

    .venv/bin/python scripts/edge_probe.py              # table of failures by category
    .venv/bin/python scripts/edge_probe.py --quick      # fewer random signal runs
    .venv/bin/python scripts/edge_probe.py -v           # every failing check, one per line
    .venv/bin/python scripts/edge_probe.py --only mcp   # one group (see --list)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import select
import shlex
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CATEGORIES = (
    "traceback",
    "hung",
    "overwritten",
    "secret",
    "leftover",
    "unanswered",
    "inexact",
    "wording",
)
TRACEBACK_MARKS = ("Traceback (most recent call last)", "Exception ignored", "Fatal Python error")
MEMORY_CAP_KB = 4 * 1024 * 1024  # ulimit -v for the endless-input runs
RUN_BOUND_S = 120.0  # a run that takes longer than this is "hung"
MCP_BOUND_S = 30.0  # an MCP request without an answer in this time is "unanswered"
KEY = "probe-4f1c9a0b7e2d48c6a3b5f9e1d7c2a8b04e6f1d3c"  # deliberately not sk-...


# ---------------------------------------------------------------------------------- runs


@dataclass
class Run:
    argv: list[str]
    code: int | None  # None: killed by the bound
    stdout: bytes
    stderr: bytes
    seconds: float

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def _tracebacks(self) -> list[tuple[str, str]]:
        """(frames, exception line) of every traceback on stderr."""
        # one way to match each line ([ \t] then the rest): `[ \t]+.*` backtracks exponentially
        pattern = r"^([ \t]*)Traceback \(most recent call last\):\n((?:\1[ \t][^\n]*\n)*)\1(\S.*)"
        return [(frames, exc) for _, frames, exc in re.findall(pattern, self.err, re.M)]

    def startup_interrupt(self) -> bool:
        """A Ctrl-C traceback printed before any line of ctxkit ran: the interpreter's own
        start-up (site.py, which prints it for a .pth file and goes on, an editable install's
        finder) or the import machinery loading the package; no program can install a handler
        earlier. Counted apart."""
        blocks = self._tracebacks()
        return bool(blocks) and all(
            exc.strip() == "KeyboardInterrupt"
            and not re.search(r'File "[^"]*/ctxkit/[^"]*\.py"', frames)
            for frames, exc in blocks
        )

    def traceback(self) -> str | None:
        if self.startup_interrupt():
            return None
        for mark in TRACEBACK_MARKS:
            if mark in self.err:
                tail = [line for line in self.err.splitlines() if line.strip()][-1:]
                return f"{mark!r}: {tail[0][:160] if tail else ''}"
        if self.code is not None and self.code < 0 and self.code != -signal.SIGINT:
            return f"died by signal {-self.code}"
        # -2: killed by SIGINT before Python's handler was in place (no traceback: legitimate)
        if self.code is not None and self.code not in (0, 1, 2, 3, 4, 5, 130, 141, -2):
            return f"exit code {self.code}"
        return None

    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


@dataclass
class Finding:
    category: str
    group: str
    case: str
    detail: str


@dataclass
class Probe:
    ctxkit: list[str]
    work: Path
    quick: bool
    verbose: bool
    findings: list[Finding] = field(default_factory=list)
    checks: dict[str, int] = field(default_factory=lambda: {c: 0 for c in CATEGORIES})
    skipped: list[str] = field(default_factory=list)
    startup: list[str] = field(default_factory=list)  # Ctrl-C tracebacks before ctxkit's code
    group: str = ""

    # -- recording

    def check(self, category: str, case: str, ok: bool, detail: str = "") -> bool:
        self.checks[category] += 1
        if not ok:
            self.findings.append(Finding(category, self.group, case, detail))
            if self.verbose:
                print(f"  FAIL {category:11s} {self.group}/{case}: {detail}", file=sys.stderr)
        return ok

    def skip(self, what: str, reason: str) -> None:
        self.skipped.append(f"{self.group}/{what}: {reason}")

    # -- running ctxkit

    def run(
        self,
        args: Sequence[str],
        *,
        case: str,
        cwd: Path | None = None,
        stdin: bytes | str | None = None,
        shell_redirs: str = "",
        prefix: str = "",
        wrap: Sequence[str] = (),
        env: dict[str, str] | None = None,
        timeout: float = RUN_BOUND_S,
        expect: Sequence[int] | None = None,
        names: str | None = None,
        one_line: bool = True,
        stdout_file: Path | None = None,
    ) -> Run:
        """Run ctxkit through `sh -c`, so redirections (`>&-`, `< /dev/zero`) and ulimits apply
        as a user's shell applies them. Checks traceback, hung, and (for a failing run) wording:
        one error line, naming `names` when given."""
        argv = [*wrap, *self.ctxkit, *args]
        script = f'{prefix} exec "$@" {shell_redirs}'
        full_env = {**os.environ, **(env or {})}
        stdin_arg: Any = subprocess.DEVNULL
        stdin_data = None
        if isinstance(stdin, bytes):
            stdin_arg, stdin_data = subprocess.PIPE, stdin
        elif isinstance(stdin, str):
            stdin_arg = open(stdin, "rb")  # noqa: SIM115
        out_target: Any = subprocess.PIPE
        if stdout_file is not None:
            out_target = open(stdout_file, "wb")  # noqa: SIM115
        start = time.monotonic()
        proc = subprocess.Popen(
            ["sh", "-c", script, "sh", *argv],
            cwd=cwd or self.work,
            stdin=stdin_arg,
            stdout=out_target,
            stderr=subprocess.PIPE,
            env=full_env,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(stdin_data, timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            code = None
        finally:
            if not isinstance(stdin_arg, int):
                stdin_arg.close()
            if stdout_file is not None:
                out_target.close()
        r = Run(argv, code, out or b"", err or b"", time.monotonic() - start)
        tb = r.traceback()
        self.check("traceback", case, tb is None, tb or "")
        self.check("hung", case, code is not None, f"no end within {timeout:g} s")
        if expect is not None and code is not None:
            self.check(
                "wording",
                case,
                code in expect,
                f"exit {code}, expected {'/'.join(map(str, expect))}: {_last(r)}",
            )
        if code not in (0, None) and tb is None and one_line:
            lines = r.error_lines()
            errors = [line for line in lines if line.startswith(("Error:", "ctxkit:"))]
            self.check(
                "wording",
                case,
                len(errors) == 1 and len(lines) <= 3,
                f"{len(lines)} stderr lines: {r.err[:200]!r}",
            )
            if names is not None:
                shown = [names, repr(names)[1:-1], names.replace("\n", "\\n")]
                self.check(
                    "wording",
                    case,
                    any(s in r.err for s in shown),
                    f"the error does not name {names!r}: {_last(r)}",
                )
        return r


def _last(r: Run) -> str:
    lines = r.error_lines()
    return lines[-1][:200] if lines else "(no stderr)"


# ---------------------------------------------------------------------------------- fixtures


@dataclass
class Fixtures:
    transcript: Path  # an over-budget single transcript (JSONL units)
    dataset: Path  # several conversations, one per line (openai)
    small: Path  # the compacted transcript
    archive: Path  # its archive
    refs: list[str]  # refs in the archive
    exact_ref: str  # the ref of the unit with ANSI codes and odd bytes
    exact_text: str  # that unit's text as recall shows it
    big: Path  # a transcript that takes a while to compact (SIGKILL runs)


EXACT_TEXT = (
    "\x1b[31mFAILED\x1b[0m tests/test_login.py::test_ok - AssertionError\r\n"
    "\ttab\there   trailing spaces   \n"
    "bell \x07 backspace \x08 form feed \x0c escape \x1b[2J\x1b[H done\n"
    "unicode: caf\u00e9 \u2603 \U0001f600 \u200b zero-width\n"
    "no newline at the end"
)
CATASTROPHIC = "a" * 48 + "!"  # (a+)+$ backtracks 2^48 times over this line with Python's re


def make_fixtures(p: Probe) -> Fixtures:
    d = p.work / "fixtures"
    d.mkdir()
    p.group = "fixtures"
    sim = d / "sim.jsonl"
    p.run(["simulate", "-s", "agent_session", "--tokens", "8000", "-o", str(sim)], case="simulate")
    units = [json.loads(line) for line in sim.read_text().splitlines() if line.strip()]
    # plant a unit with terminal escapes and a catastrophic-backtracking line, early, so the
    # compaction archives it
    odd = dict(units[2])
    odd.update(
        id="odd-1",
        type="log",
        content=EXACT_TEXT,
        priorityTag=None,
    )
    odd.pop("tokenCount", None)
    odd.pop("tool_calls", None)
    odd.pop("tool_call_id", None)
    odd["role"] = "user"
    cat = dict(odd, id="odd-2", content=f"pattern probe\n{CATASTROPHIC}\nend")
    units[2:2] = [odd, cat]
    transcript = d / "t.jsonl"
    transcript.write_text("".join(json.dumps(u) + "\n" for u in units))
    small = d / "small.jsonl"
    archive = d / "small.jsonl.ctx.db"
    r = p.run(
        ["compact", str(transcript), "--limit", "3000", "-o", str(small)], case="compact fixture"
    )
    if r.code != 0:
        raise SystemExit(f"cannot build the fixtures: {r.err}")
    listing = p.run(
        ["recall", "--list", "--format", "jsonl", "--archive", str(archive)], case="list fixture"
    )
    rows = [json.loads(line) for line in listing.stdout.splitlines()]
    refs = [row["ref"] for row in rows]
    exact = next((row["ref"] for row in rows if row["unit_id"] == "odd-1"), "")
    dataset = d / "dataset.jsonl"
    p.run(
        [
            "simulate",
            "-s",
            "long_chat",
            "-s",
            "fragmented",
            "--count",
            "2",
            "--tokens",
            "6000",
            "--format",
            "openai",
            "-o",
            str(dataset),
        ],
        case="simulate dataset",
    )
    big = d / "big.jsonl"
    p.run(
        ["simulate", "-s", "all", "--tokens", "20000", "--format", "openai", "-o", str(big)],
        case="simulate big",
    )
    return Fixtures(transcript, dataset, small, archive, refs, exact, EXACT_TEXT, big)


def _case_dir(p: Probe, name: str) -> Path:
    d = p.work / re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{p.group}-{name}")[:80]
    n = 0
    while d.exists():
        n += 1
        d = d.with_name(f"{d.name}.{n}")
    d.mkdir()
    return d


def _listing(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")} if d.exists() else set()


def _leftovers(before: set[str], d: Path) -> list[str]:
    return sorted(_listing(d) - before)


# ---------------------------------------------------------------------------------- groups


def endless(p: Probe, fx: Fixtures) -> None:
    """Endless inputs under a memory cap: a one-line error in bounded time and memory, nothing
    spooled left in $TMPDIR."""
    cap = f"ulimit -v {MEMORY_CAP_KB};"
    commands: list[tuple[str, list[str]]] = [
        ("count", ["count"]),
        ("guard", ["guard", "--model", "gpt-4o"]),
        ("score-rl", ["score-rl"]),
        ("report", ["report", "--html", "OUT.html"]),
        ("compact", ["compact", "--limit", "3000", "-o", "OUT.jsonl"]),
        ("expand", ["expand", "--archive", str(fx.archive), "-o", "OUT.jsonl"]),
    ]
    for name, args in commands:
        for how in ("path", "stdin"):
            d = _case_dir(p, f"{name}-{how}")
            tmp = d / "tmp"
            tmp.mkdir()
            argv = [a.replace("OUT", str(d / "out")) for a in args]
            if how == "path":
                argv.insert(1, "/dev/zero")
            r = p.run(
                argv,
                case=f"{name} {'/dev/zero' if how == 'path' else '< /dev/zero'}",
                prefix=cap,
                stdin="/dev/zero" if how == "stdin" else None,
                env={"TMPDIR": str(tmp)},
                expect=(1, 2),
            )
            p.check("leftover", f"{name} {how} $TMPDIR", not _listing(tmp), str(_listing(tmp)))
            outs = [x for x in _listing(d) if x != "tmp"]
            p.check("leftover", f"{name} {how} outputs", not outs, str(outs))
            del r
    # endless records of one transcript, from a FIFO (a program that never stops writing)
    for name in ("count", "compact"):
        d = _case_dir(p, f"fifo-{name}")
        fifo = d / "endless.jsonl"
        os.mkfifo(fifo)
        line = b'{"id":"x","role":"user","type":"message","content":"' + b"x" * 4000 + b'"}\n'
        stop = threading.Event()

        def feed(path: Path = fifo, data: bytes = line * 256, ev: threading.Event = stop) -> None:
            try:
                with open(path, "wb") as w:
                    while not ev.is_set():
                        w.write(data)
            except OSError:
                pass

        t = threading.Thread(target=feed, daemon=True)
        t.start()
        argv = [name, str(fifo)] + (
            ["--limit", "3000", "-o", str(d / "out.jsonl")] if name == "compact" else []
        )
        p.run(argv, case=f"{name} endless FIFO", prefix=cap, env={"TMPDIR": str(d)}, expect=(1, 2))
        stop.set()
        try:  # unblock the writer if the reader never opened the FIFO
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
        t.join(timeout=5)
        left = [x for x in _listing(d) if x != "endless.jsonl"]
        p.check("leftover", f"{name} endless FIFO", not left, str(left))


def closed_streams(p: Probe, fx: Fixtures) -> None:
    """stdout, stderr or stdin closed: a one-line error when the data has nowhere to go, the
    normal result otherwise; never a traceback."""
    ref = fx.refs[0]
    a = str(fx.archive)
    to_stdout = [
        ("count", ["count", str(fx.transcript)]),
        ("guard", ["guard", str(fx.transcript), "--model", "gpt-4o", "--format", "json"]),
        ("simulate", ["simulate", "-s", "long_chat", "--tokens", "3000"]),
        ("compact", ["compact", str(fx.transcript), "--limit", "3000", "--archive", "ARCH"]),
        ("expand", ["expand", str(fx.small), "--archive", a]),
        ("recall", ["recall", ref, "--archive", a]),
        ("recall --list", ["recall", "--list", "--archive", a]),
        ("score-rl", ["score-rl", str(fx.transcript), "--action", "offload"]),
        ("models", ["models"]),
        ("config", ["config"]),
        ("--help", ["--help"]),
        ("--version", ["--version"]),
        ("count --help", ["count", "--help"]),
    ]
    for name, args in to_stdout:
        d = _case_dir(p, name)
        argv = [x.replace("ARCH", str(d / "a.ctx.db")) for x in args]
        r = p.run(argv, case=f"{name} >&-", shell_redirs=">&-", cwd=d, expect=(1,))
        p.check(
            "wording",
            f"{name} >&- says stdout",
            "stdout" in r.err,
            f"the error does not say stdout is closed: {_last(r)}",
        )
        left = _listing(d)
        p.check("leftover", f"{name} >&-", not left, str(left))
    # stderr closed: the data still arrives, exit 0
    quiet = [
        ("compact", ["compact", str(fx.transcript), "--limit", "3000", "-o", "OUT"], True),
        ("count", ["count", str(fx.transcript)], False),
        ("expand", ["expand", str(fx.small), "--archive", a, "-o", "OUT"], True),
        ("simulate", ["simulate", "-s", "long_chat", "--tokens", "3000", "-o", "OUT"], True),
    ]
    for name, args, to_file in quiet:
        d = _case_dir(p, f"{name}-2")
        out = d / "out.jsonl"
        argv = [x.replace("OUT", str(out)) for x in args]
        r = p.run(argv, case=f"{name} 2>&-", shell_redirs="2>&-", cwd=d)
        got = out.exists() if to_file else bool(r.stdout)
        p.check(
            "traceback",
            f"{name} 2>&- succeeds",
            r.code == 0 and got,
            f"exit {r.code}, output {got}",
        )
    # stdin closed, and read
    for name, args in (
        ("count", ["count"]),
        ("compact", ["compact", "--limit", "3000", "-o", "OUT"]),
    ):
        d = _case_dir(p, f"{name}-0")
        argv = [x.replace("OUT", str(d / "out.jsonl")) for x in args]
        p.run(argv, case=f"{name} <&-", shell_redirs="<&-", cwd=d, expect=(1, 2))
        left = _listing(d)
        p.check("leftover", f"{name} <&-", not left, str(left))


def _sigint_commands(fx: Fixtures, d: Path) -> list[list[str]]:
    return [
        ["count", str(fx.transcript)],
        ["guard", str(fx.transcript), "--model", "gpt-4o"],
        ["compact", str(fx.transcript), "--limit", "3000", "-o", str(d / "out.jsonl")],
        ["simulate", "-s", "long_chat", "--tokens", "3000", "-o", str(d / "sim.jsonl")],
        ["recall", "--list", "--archive", str(fx.archive)],
        ["expand", str(fx.small), "--archive", str(fx.archive), "-o", str(d / "exp.jsonl")],
    ]


def sigint(p: Probe, fx: Fixtures) -> None:
    """Ctrl-C in the first 0.3 s: exit 130 without a traceback, no temp file left."""
    rng = random.Random(24)
    runs = 12 if p.quick else 36
    for i in range(runs):
        d = _case_dir(p, f"int{i}")
        cmds = _sigint_commands(fx, d)
        argv = [*p.ctxkit, *cmds[i % len(cmds)]]
        delay = rng.uniform(0.0, 0.3)
        proc = subprocess.Popen(
            argv, cwd=d, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=RUN_BOUND_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        r = Run(argv, proc.returncode, b"", err, delay)
        case = f"SIGINT at {delay:.2f}s: {cmds[i % len(cmds)][0]}"
        if r.startup_interrupt():
            p.startup.append(case)
            continue
        tb = r.traceback()
        p.check("traceback", case, tb is None, tb or "")
        p.check(
            "traceback",
            case + " exit",
            proc.returncode in (0, 130, -signal.SIGINT),
            f"exit {proc.returncode}",
        )
        hidden = [x for x in _listing(d) if x.startswith(".")]
        p.check("leftover", case, not hidden, str(hidden))


def sigkill(p: Probe, fx: Fixtures) -> None:
    """SIGKILL mid-run (which nothing can catch): no hidden temp file left beside the outputs."""
    rng = random.Random(29)
    runs = 8 if p.quick else 29
    for i in range(runs):
        d = _case_dir(p, f"kill{i}")
        kind = i % 3
        if kind == 0:
            args = ["compact", str(fx.big), "--limit", "4000", "-o", str(d / "out.jsonl")]
        elif kind == 1:
            args = ["score-rl", str(fx.dataset), "--action", "offload", "-o", str(d / "rl.jsonl")]
        else:
            args = ["simulate", "-s", "all", "--tokens", "20000", "-o", str(d / "sims/")]
        delay = rng.uniform(0.3, 2.5)
        proc = subprocess.Popen(
            [*p.ctxkit, *args],
            cwd=d,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.kill()
        proc.wait()
        hidden = [x for x in _listing(d) if Path(x).name.startswith(".") or x.endswith(".tmp")]
        p.check("leftover", f"SIGKILL at {delay:.2f}s: {args[0]}", not hidden, str(hidden))


def devices(p: Probe, fx: Fixtures) -> None:
    """Device nodes, FIFOs and symlinks named as outputs: written through (and still what they
    were) or refused; never replaced by a regular file."""
    if os.geteuid() != 0:
        p.skip("device nodes", "mknod needs root")
    d = _case_dir(p, "nodes")
    null = d / "null"
    full = d / "full"
    has_nodes = os.geteuid() == 0
    if has_nodes:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))

    def node_ok(path: Path, rdev: int) -> tuple[bool, str]:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return False, "removed"
        if not stat.S_ISCHR(st.st_mode) or st.st_rdev != rdev:
            return False, f"now mode {stat.filemode(st.st_mode)}"
        return True, ""

    t, s, a = str(fx.transcript), str(fx.small), str(fx.archive)
    # (case, argv with NODE for the node, exit codes allowed)
    cases: list[tuple[str, list[str], tuple[int, ...]]] = [
        (
            "simulate -o NODE",
            ["simulate", "-s", "long_chat", "--tokens", "3000", "-o", "NODE"],
            (0, 1, 2),
        ),
        (
            "simulate --truth NODE",
            [
                "simulate",
                "-s",
                "long_chat",
                "--tokens",
                "3000",
                "-o",
                "D/s.jsonl",
                "--truth",
                "NODE",
            ],
            (0, 1, 2),
        ),
        (
            "compact -o NODE",
            ["compact", t, "--limit", "3000", "-o", "NODE", "--archive", "D/a1.db"],
            (0, 1, 2),
        ),
        (
            "compact --report NODE",
            ["compact", t, "--limit", "3000", "-o", "D/o2.jsonl", "--report", "NODE"],
            (0, 1, 2),
        ),
        (
            "compact --html NODE",
            ["compact", t, "--limit", "3000", "-o", "D/o3.jsonl", "--html", "NODE"],
            (0, 1, 2),
        ),
        (
            "compact --events NODE",
            ["compact", t, "--limit", "3000", "-o", "D/o4.jsonl", "--events", "NODE"],
            (0, 1, 2),
        ),
        (
            "compact --archive NODE",
            ["compact", t, "--limit", "3000", "-o", "D/o5.jsonl", "--archive", "NODE"],
            (1, 2),
        ),
        ("expand -o NODE", ["expand", s, "--archive", a, "-o", "NODE"], (0, 1, 2)),
        ("score-rl -o NODE", ["score-rl", t, "--action", "offload", "-o", "NODE"], (0, 1, 2)),
        ("recall --archive NODE", ["recall", "--list", "--archive", "NODE"], (1, 2)),
        ("expand --archive NODE", ["expand", s, "--archive", "NODE", "-o", "D/o6.jsonl"], (1, 2)),
        ("config --init NODE", ["config", "--init", "NODE", "--force"], (0, 1, 2)),
    ]
    if has_nodes:
        for node, rdev in ((null, os.makedev(1, 3)), (full, os.makedev(1, 7))):
            for case, args, allowed in cases:
                argv = [x.replace("NODE", str(node)).replace("D/", f"{d}/") for x in args]
                label = case.replace("NODE", node.name)
                names = str(node) if node == full or allowed == (1, 2) else None
                p.run(argv, case=label, cwd=d, expect=allowed, names=names)
                ok, why = node_ok(node, rdev)
                p.check("overwritten", label, ok, why)
                if not ok:  # put it back for the next case
                    _remove(node)
                    os.mknod(node, 0o666 | stat.S_IFCHR, rdev)
            hidden = [x for x in _listing(d) if Path(x).name.startswith(".")]
            p.check("leftover", f"temp files beside {node.name}", not hidden, str(hidden))
    # FIFOs as outputs, drained by a reader
    fifo_cases = [c for c in cases if c[2] != (1, 2) and "config" not in c[0]]
    for case, args, _ in fifo_cases:
        fd = _case_dir(p, "fifo")
        fifo = fd / "pipe"
        os.mkfifo(fifo)
        got = bytearray()
        stop = threading.Event()

        def drain(path: Path = fifo, buf: bytearray = got, ev: threading.Event = stop) -> None:
            try:
                rfd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                return
            try:
                while not ev.is_set():
                    ready, _, _ = select.select([rfd], [], [], 0.1)
                    if ready:
                        chunk = os.read(rfd, 1 << 16)
                        if chunk:
                            buf.extend(chunk)
            finally:
                os.close(rfd)

        th = threading.Thread(target=drain, daemon=True)
        th.start()
        argv = [x.replace("NODE", str(fifo)).replace("D/", f"{fd}/") for x in args]
        label = case.replace("NODE", "FIFO")
        p.run(argv, case=label, cwd=fd, expect=(0, 1, 2), timeout=60)
        stop.set()
        th.join(timeout=5)
        p.check("overwritten", label, stat.S_ISFIFO(os.lstat(fifo).st_mode), "no longer a FIFO")
    # symlinks as outputs: written through (the link stays, its target changes) or refused
    for case, args, allowed in cases:
        if allowed == (1, 2):
            continue
        sd = _case_dir(p, "link")
        target = sd / "target.txt"
        target.write_text("before\n")
        link = sd / "link"
        link.symlink_to(target)
        argv = [x.replace("NODE", str(link)).replace("D/", f"{sd}/") for x in args]
        label = case.replace("NODE", "LINK")
        r = p.run(argv, case=label, cwd=sd, expect=(0, 1, 2))
        still = link.is_symlink() and os.readlink(link) == str(target)
        p.check("overwritten", label, still, "the symlink was replaced")
        if r.code == 0 and still:
            p.check(
                "overwritten",
                label + " (through)",
                target.read_text() != "before\n",
                "exit 0 but the link's target was not written",
            )
        hidden = [x for x in _listing(sd) if Path(x).name.startswith(".")]
        p.check("leftover", label, not hidden, str(hidden))
    # /dev/stdout-style: a link to /proc/self/fd/1 in our own folder (never the machine's)
    sd = _case_dir(p, "stdout-link")
    link = sd / "stdout"
    link.symlink_to("/proc/self/fd/1")
    sink = sd / "captured.jsonl"
    r = p.run(
        ["compact", t, "--limit", "3000", "-o", str(link), "--archive", str(sd / "a.db")],
        case="compact -o /dev/stdout-style link",
        cwd=sd,
        stdout_file=sink,
        expect=(0,),
    )
    p.check("overwritten", "-o stdout link stays", link.is_symlink(), "the link was replaced")
    p.check(
        "overwritten",
        "-o stdout link writes stdout",
        sink.exists() and sink.stat().st_size > 0,
        "nothing reached stdout",
    )


def existing_archives(p: Probe, fx: Fixtures) -> None:
    """An existing file that is not an archive: refused, never turned into one."""
    for content in (b"", b"x", b"hello\n"):
        d = _case_dir(p, f"x{len(content)}")
        x = d / "X"
        x.write_bytes(content)
        cases = [
            ("recall --list", ["recall", "--list", "--archive", str(x)]),
            ("recall REF", ["recall", fx.refs[0], "--archive", str(x)]),
            ("expand", ["expand", str(fx.small), "--archive", str(x), "-o", str(d / "o.jsonl")]),
            (
                "compact",
                [
                    "compact",
                    str(fx.transcript),
                    "--limit",
                    "3000",
                    "-o",
                    str(d / "c.jsonl"),
                    "--archive",
                    str(x),
                ],
            ),
            ("mcp", ["mcp", "--archive", str(x)]),
        ]
        for name, argv in cases:
            label = f"{name} --archive {len(content)}-byte file"
            before = _listing(d)
            p.run(argv, case=label, cwd=d, expect=(1, 2), names=str(x))
            p.check(
                "overwritten", label, x.read_bytes() == content, f"now {x.stat().st_size} bytes"
            )
            left = _leftovers(before, d)
            p.check("leftover", label, not left, str(left))


def _damaged(p: Probe, fx: Fixtures, name: str, sql: str, params: tuple[Any, ...] = ()) -> Path:
    d = _case_dir(p, name)
    copy = d / "damaged.ctx.db"
    shutil.copyfile(fx.archive, copy)
    conn = sqlite3.connect(copy)
    conn.execute(sql, params)
    conn.commit()
    conn.close()
    return copy


def damaged_archives(p: Probe, fx: Fixtures) -> None:
    """Malformed rows: a one-line error naming the archive, never a traceback."""
    damage = [
        ("unit_json not json", "UPDATE units SET unit_json = 'not json'"),
        ("unit_json a list", "UPDATE units SET unit_json = '[1, 2]'"),
        ("unit_json wrong types", 'UPDATE units SET unit_json = \'{"role": 5, "tool_calls": 7}\''),
        ("content binary", "UPDATE units SET content = CAST(x'00ff10fe' AS BLOB)"),
        ("tokens text", "UPDATE units SET tokens = 'many'"),
        (
            "transcript_json truncated",
            "UPDATE transcripts SET transcript_json = substr(transcript_json, 1, length(transcript_json) / 2)",
        ),
        (
            "transcript_json binary",
            "UPDATE transcripts SET transcript_json = CAST(x'00ff' AS BLOB)",
        ),
        (
            "transcript units mismatch",
            "UPDATE transcripts SET transcript_json = json_set(transcript_json, '$.units', json('[]'))",
        ),
    ]
    ref = fx.refs[0]
    for name, sql in damage:
        try:
            x = _damaged(p, fx, name, sql)
        except sqlite3.Error as exc:
            p.skip(name, f"cannot damage the copy: {exc}")
            continue
        for cmd, argv in (
            ("recall --list", ["recall", "--list", "--archive", str(x)]),
            ("recall --list jsonl", ["recall", "--list", "--format", "jsonl", "--archive", str(x)]),
            ("recall REF", ["recall", ref, "--archive", str(x)]),
            ("recall REF --search", ["recall", ref, "--search", "e", "--archive", str(x)]),
            (
                "expand",
                ["expand", str(fx.small), "--archive", str(x), "-o", str(x.parent / "o.jsonl")],
            ),
        ):
            p.run(argv, case=f"{cmd} ({name})", expect=(0, 1), names=str(x))
        answers = _mcp_session(
            p,
            x,
            [
                {"method": "tools/call", "params": {"name": "search", "arguments": {"query": "e"}}},
                {"method": "tools/call", "params": {"name": "recall", "arguments": {"ref": ref}}},
            ],
            label=f"mcp ({name})",
        )
        del answers


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------------------------- the key


def secrets(p: Probe, fx: Fixtures) -> None:
    """A local endpoint that echoes the key: in a summary, in error bodies cut at any place."""
    sys.path.insert(0, str(REPO / "tests"))
    from chatserver import ChatServer, Reply, completion  # type: ignore[import-not-found]

    def echoed(server: Any, n: int) -> str:
        auth = server.requests[n]["headers"].get("Authorization", "")
        return auth.removeprefix("Bearer ")

    pad = "x" * 283  # the error excerpt is cut at 300 characters: through the key
    variants: dict[str, Callable[[Any, int], Reply]] = {
        "summary echoes the key": lambda s, n: Reply(
            body=completion(
                f"## Goal\nFix it. The key was {echoed(s, n)} (sent as a header).\n## Decisions\nnone"
            )
        ),
        "401 echoes the key": lambda s, n: Reply(
            status=401, body={"error": {"message": f"bad key {echoed(s, n)}", "type": "auth"}}
        ),
        "401 cut through the key": lambda s, n: Reply(
            status=401, body=f'{{"error": "{pad}{echoed(s, n)} is not valid"}}'.encode()
        ),
        "500 echoes the key": lambda s, n: Reply(
            status=500, body=f"upstream failed for {echoed(s, n)}".encode()
        ),
        "200 not JSON, key at 40": lambda s, n: Reply(
            body=f"<html>{'y' * 34}{echoed(s, n)}</html>".encode()
        ),
        "200 no choices, key at 50": lambda s, n: Reply(
            body=f'{{"note": "{"z" * 40}{echoed(s, n)}"}}'.encode()
        ),
    }
    for name, script in variants.items():
        d = _case_dir(p, name)
        holder: dict[str, Any] = {}
        with ChatServer(lambda n, h=holder, f=script: f(h["server"], n)) as server:  # type: ignore[misc]
            holder["server"] = server
            out = d / "out.jsonl"
            r = p.run(
                [
                    "compact",
                    str(fx.transcript),
                    "--limit",
                    "3000",
                    "-o",
                    str(out),
                    "--chain",
                    "summarize_old",
                    "--summarizer",
                    "llm",
                    "--llm-url",
                    server.url,
                    "--report",
                    str(d / "report.json"),
                    "--html",
                    str(d / "page.html"),
                    "--events",
                    str(d / "events.jsonl"),
                    "-v",
                ],
                case=f"compact --summarizer llm: {name}",
                cwd=d,
                env={"CTXKIT_LLM_API_KEY": KEY, "OPENAI_API_KEY": ""},
                expect=(0, 1),
                timeout=240,
            )
            asked = len(server.requests)
        if not asked:
            p.skip(name, "the endpoint was never called (the chain did not summarize)")
        places = {"stdout": r.stdout, "stderr": r.stderr}
        for f in sorted(d.iterdir()):
            places[f.name] = f.read_bytes()
        archive = d / "out.jsonl.ctx.db"
        if archive.exists():
            places["archive (recall)"] = _all_recalled(p, archive)
        for where, data in places.items():
            leak = _fragment(data.decode("utf-8", "replace"), KEY)
            p.check("secret", f"{name}: {where}", leak is None, f"holds {leak!r}")


def _all_recalled(p: Probe, archive: Path) -> bytes:
    listing = subprocess.run(
        [*p.ctxkit, "recall", "--list", "--format", "jsonl", "--archive", str(archive)],
        capture_output=True,
    )
    texts = [listing.stdout]
    for line in listing.stdout.splitlines():
        ref = json.loads(line)["ref"]
        texts.append(
            subprocess.run(
                [*p.ctxkit, "recall", ref, "--archive", str(archive)], capture_output=True
            ).stdout
        )
    conn = sqlite3.connect(archive)
    for (text,) in conn.execute("SELECT transcript_json FROM transcripts"):
        texts.append(text.encode() if isinstance(text, str) else bytes(text))
    conn.close()
    return b"\n".join(texts)


def _fragment(text: str, key: str, width: int = 8) -> str | None:
    """A run of `width` or more characters of `key` found in `text`."""
    for i in range(len(key) - width + 1):
        if key[i : i + width] in text:
            return key[i : i + width]
    return None


# ---------------------------------------------------------------------------------- MCP


def _mcp_session(
    p: Probe,
    archive: Path,
    requests: list[dict[str, Any] | bytes],
    *,
    label: str,
    bound: float = MCP_BOUND_S,
) -> list[Any]:
    """Start `ctxkit mcp`, initialize, send each request (a JSON-RPC body, or raw bytes for a
    line that is not one), and check every one is answered within `bound` seconds."""
    proc = subprocess.Popen(
        [*p.ctxkit, "mcp", "--archive", str(archive)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines: list[bytes] = []
    cond = threading.Condition()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with cond:
                lines.append(line)
                cond.notify_all()

    err_chunks: list[bytes] = []

    def err_reader() -> None:
        assert proc.stderr is not None
        for chunk in proc.stderr:
            err_chunks.append(chunk)

    threading.Thread(target=reader, daemon=True).start()
    threading.Thread(target=err_reader, daemon=True).start()

    def send(raw: bytes) -> bool:
        """Write one line; False when the server does not take it within the bound."""
        done: list[bool] = []

        def write() -> None:
            try:
                assert proc.stdin is not None
                proc.stdin.write(raw + b"\n")
                proc.stdin.flush()
                done.append(True)
            except (BrokenPipeError, OSError, ValueError):
                done.append(False)

        th = threading.Thread(target=write, daemon=True)
        th.start()
        th.join(bound)
        return bool(done and done[0])

    def wait_for(pred: Callable[[Any], bool], timeout: float, seen: int = 0) -> Any:
        deadline = time.monotonic() + timeout
        with cond:
            while True:
                for line in lines[seen:]:
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        continue
                    if pred(msg):
                        return msg
                seen = len(lines)
                left = deadline - time.monotonic()
                if left <= 0 or proc.poll() is not None and seen == len(lines):
                    return None
                cond.wait(min(left, 0.2))

    answers: list[Any] = []
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "edge-probe", "version": "1"},
        },
    }
    send(json.dumps(init).encode())
    if wait_for(lambda m: m.get("id") == 0, bound) is None:
        p.check(
            "unanswered",
            f"{label}: initialize",
            False,
            "no answer: " + b"".join(err_chunks).decode(errors="replace")[-200:],
        )
        proc.kill()
        return answers
    send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    for i, req in enumerate(requests, start=1):
        if isinstance(req, bytes):
            before = len(lines)
            ok = send(req)

            def is_error_reply(m: Any) -> bool:
                # the id of a line that is not a request is unknown (null), or read from its
                # first bytes when the line was only too long to parse
                return isinstance(m, dict) and "error" in m and m.get("id") in (None, 500)

            msg = wait_for(is_error_reply, bound, before) if ok else None
            what = req[:40] + (b"..." if len(req) > 40 else b"")
            p.check(
                "unanswered",
                f"{label}: raw {what!r} ({len(req):,} bytes)",
                msg is not None,
                f"no JSON-RPC error reply within {bound:g} s",
            )
            answers.append(msg)
            continue
        body = {"jsonrpc": "2.0", "id": i, **req}
        ok = send(json.dumps(body).encode())
        msg = wait_for(lambda m, i=i: m.get("id") == i, bound) if ok else None
        shown = json.dumps(req)[:80]
        p.check("unanswered", f"{label}: {shown}", msg is not None, f"no answer within {bound:g} s")
        answers.append(msg)
    # still alive and answering
    last = len(requests) + 1
    send(json.dumps({"jsonrpc": "2.0", "id": last, "method": "tools/list"}).encode())
    msg = wait_for(lambda m: m.get("id") == last, bound)
    p.check(
        "unanswered",
        f"{label}: tools/list afterwards",
        msg is not None,
        "the server stopped answering",
    )
    stuck = msg is None
    if stuck:
        # a writer thread may still block on the full pipe: closing stdin would wait for it
        proc.kill()
    try:
        assert proc.stdin is not None
        proc.stdin.close()
    except (OSError, ValueError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    err = b"".join(err_chunks).decode("utf-8", "replace")
    for mark in TRACEBACK_MARKS:
        p.check("traceback", f"{label}: server stderr", mark not in err, err[-200:])
    return answers


def mcp(p: Probe, fx: Fixtures) -> None:
    """Hostile MCP requests: every one answered (a result or a JSON-RPC error) within a bound."""
    try:
        import mcp as _  # noqa: F401
    except ImportError:
        p.skip("mcp", "the mcp SDK is not installed")
        return
    huge = "a" * (50 * 2**20)
    search = lambda args: {"method": "tools/call", "params": {"name": "search", "arguments": args}}  # noqa: E731
    recall = lambda args: {"method": "tools/call", "params": {"name": "recall", "arguments": args}}  # noqa: E731
    ref = fx.refs[0]
    cat_ref = next((r for r in fx.refs if r != fx.exact_ref), ref)
    requests: list[dict[str, Any] | bytes] = [
        search({"query": "(a+)+$"}),
        recall({"ref": cat_ref, "search": "(a+)+$"}),
        search({"query": "(x+x+)+y"}),
        b'{"jsonrpc": "2.0", "id": 99, "method": ',
        b"not json at all",
        b"[1, 2, 3]",
        b'"a string"',
        search({"query": 12}),
        recall({"ref": 7}),
        {"method": "no/such/method", "params": {}},
        {"method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        search({"query": huge}),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 500,
                "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "x" * (20 * 2**20)}},
            }
        ).encode()[:-2],
        recall({"ref": ref, "max_tokens": 10**12}),
        search({"query": "", "limit": 10**9}),
    ]
    _mcp_session(p, fx.archive, requests, label="mcp")


# ---------------------------------------------------------------------------------- wording


def wording(p: Probe, fx: Fixtures) -> None:
    """Newlines in names, unreadable archives, missing files: one line that names the file."""
    d = _case_dir(p, "names")
    bad = d / "bad\nname.jsonl"
    bad.write_text("not json\n")
    p.run(["count", str(bad)], case="count file with a newline", expect=(1, 2), names=str(bad))
    p.run(
        ["guard", str(bad), "--model", "gpt-4o"],
        case="guard file with a newline",
        expect=(1, 2, 3, 4, 5),
        names=str(bad),
    )
    p.run(
        ["compact", str(fx.transcript), "--limit", "3000", "-o", str(d / "no\ndir" / "o.jsonl")],
        case="compact -o in a missing dir with a newline",
        expect=(1, 2),
    )
    p.run(
        ["recall", "--list", "--archive", str(d / "missing\n.db")],
        case="recall missing archive with a newline",
        expect=(1, 2),
        names=str(d / "missing\n.db"),
    )
    p.run(
        ["count", str(d / "missing.jsonl")],
        case="count missing file",
        expect=(1, 2),
        names=str(d / "missing.jsonl"),
    )
    p.run(
        ["expand", str(fx.small), "--archive", str(d / "missing.db")],
        case="expand missing archive",
        expect=(1, 2),
        names=str(d / "missing.db"),
    )
    p.run(
        ["report", str(d / "missing.json"), "--html", "-"],
        case="report missing file",
        expect=(1, 2),
        names=str(d / "missing.json"),
    )
    p.run(
        ["score-rl", str(d / "missing.jsonl")],
        case="score-rl missing file",
        expect=(1, 2),
        names=str(d / "missing.jsonl"),
    )
    p.run(
        [
            "compact",
            str(fx.transcript),
            "--limit",
            "3000",
            "--config",
            str(d / "missing.yaml"),
            "-o",
            str(d / "o.jsonl"),
        ],
        case="compact missing config",
        expect=(1, 2),
        names=str(d / "missing.yaml"),
    )
    p.run(
        ["guard", str(fx.transcript), "--pending", str(d / "missing.json"), "--model", "gpt-4o"],
        case="guard missing --pending",
        expect=(1, 2),
        names=str(d / "missing.json"),
    )
    p.run(
        ["count", str(fx.transcript), "--system", str(d / "missing.txt")],
        case="count missing --system",
        expect=(1, 2),
        names=str(d / "missing.txt"),
    )
    p.run(
        ["count", str(fx.transcript), "--tools", str(d / "missing.json")],
        case="count missing --tools",
        expect=(1, 2),
        names=str(d / "missing.json"),
    )
    p.run(
        ["score-rl", str(fx.transcript), "--actions", str(d / "missing.yaml")],
        case="score-rl missing --actions",
        expect=(1, 2),
        names=str(d / "missing.yaml"),
    )
    p.run(
        ["score-rl", str(fx.transcript), "--truth", str(d / "missing.jsonl")],
        case="score-rl missing --truth",
        expect=(1, 2),
        names=str(d / "missing.jsonl"),
    )
    # an archive nobody but its owner may read, opened by another user
    if os.geteuid() == 0 and shutil.which("setpriv"):
        ud = _case_dir(p, "perm")
        os.chmod(ud, 0o755)
        locked = ud / "locked.ctx.db"
        shutil.copyfile(fx.archive, locked)
        os.chmod(locked, 0o600)
        for name, argv in (
            ("recall --list", ["recall", "--list", "--archive", str(locked)]),
            ("recall REF", ["recall", fx.refs[0], "--archive", str(locked)]),
            ("expand", ["expand", str(fx.small), "--archive", str(locked)]),
            ("count", ["count", str(locked)]),
        ):
            r = p.run(
                argv,
                case=f"{name} unreadable as another user",
                wrap=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"],
                expect=(1, 2),
                names=str(locked),
                cwd=Path("/tmp"),
            )
            p.check(
                "wording",
                f"{name} unreadable says permission denied",
                "permission denied" in r.err.lower(),
                _last(r),
            )
    else:
        p.skip("unreadable archive", "needs root and setpriv to run as another user")


# ---------------------------------------------------------------------------------- leftovers


def leftovers(p: Probe, fx: Fixtures) -> None:
    """A failed run leaves what was there before, and nothing more."""
    t = str(fx.transcript)
    deep = p.work / "deep.json"
    deep.write_text('[{"role": "user", "content": "hi", "x": ' + "[" * 600 + "]" * 600 + "}]")
    cases = [
        ("deep nesting", ["compact", str(deep), "--limit", "3000", "-o", "D/o.json"]),
        (
            "infeasible, recovery error",
            ["compact", t, "--limit", "1500", "--recovery", "error", "-o", "D/o.jsonl"],
        ),
        ("score-rl bad action", ["score-rl", t, "--action", "nope", "-o", "D/rl.jsonl"]),
    ]
    if os.geteuid() == 0:
        full = p.work / "leftover-full"
        if not full.exists():
            os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        cases += [
            (
                "--report fails",
                ["compact", t, "--limit", "3000", "-o", "D/o.jsonl", "--report", str(full)],
            ),
            (
                "--html fails",
                ["compact", t, "--limit", "3000", "-o", "D/o.jsonl", "--html", str(full)],
            ),
            (
                "--events fails",
                ["compact", t, "--limit", "3000", "-o", "D/o.jsonl", "--events", str(full)],
            ),
            (
                "simulate --truth fails",
                [
                    "simulate",
                    "-s",
                    "long_chat",
                    "--tokens",
                    "3000",
                    "-o",
                    "D/s.jsonl",
                    "--truth",
                    str(full),
                ],
            ),
        ]
    for name, args in cases:
        d = _case_dir(p, name)
        argv = [x.replace("D/", f"{d}/") for x in args]
        r = p.run(argv, case=name, cwd=d, expect=(1, 2))
        left = _listing(d)
        p.check("leftover", name, not (r.code not in (0, None) and left), str(sorted(left)))
    # a dataset of which no conversation can be compacted: exit 3 (documented), each named,
    # and nothing written
    name = "infeasible dataset, recovery error"
    d = _case_dir(p, name)
    args = ["compact", str(fx.dataset), "--limit", "600", "--recovery", "error"]
    r = p.run([*args, "-o", f"{d}/o.jsonl"], case=name, cwd=d, expect=(3,), one_line=False)
    p.check("leftover", name, not _listing(d), str(sorted(_listing(d))))
    last = (r.error_lines() or [""])[-1]
    p.check("wording", name, "nothing is written (exit 3)" in last, last)
    # ENOSPC on a small tmpfs (root, where mounting is allowed)
    if os.geteuid() == 0:
        mnt = p.work / "small-fs"
        mnt.mkdir()
        ok = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
            ).returncode
            == 0
        )
        if ok:
            try:
                r = p.run(
                    ["compact", str(fx.big), "--limit", "3000", "-o", str(mnt / "o.jsonl")],
                    case="ENOSPC",
                    cwd=mnt,
                    expect=(1,),
                )
                left = _listing(mnt)
                p.check("leftover", "ENOSPC", not (r.code and left), str(sorted(left)))
            finally:
                subprocess.run(["umount", str(mnt)], capture_output=True)
        else:
            p.skip("ENOSPC", "cannot mount a tmpfs here")
    # an unreachable Ray cluster
    try:
        import ray  # noqa: F401

        d = _case_dir(p, "ray")
        out = d / "shards"
        r = p.run(
            [
                "compact",
                str(fx.dataset),
                "--limit",
                "3000",
                "--engine",
                "ray",
                "--ray-address",
                "127.0.0.1:9",
                "-o",
                str(out),
            ],
            case="--ray-address unreachable",
            cwd=d,
            expect=(1, 2),
            timeout=180,
        )
        p.check("leftover", "--ray-address unreachable", not out.exists(), str(_listing(d)))
    except ImportError:
        p.skip("ray", "ray is not installed")


def dataset(p: Probe, fx: Fixtures) -> None:
    """One bad conversation of three: the other two written and archived, the bad one named, exit 3."""
    d = _case_dir(p, "dataset")
    rows = [json.loads(line) for line in fx.dataset.read_text().splitlines() if line.strip()][:3]
    system = {"role": "system", "content": "rule " * 4000}  # over any limit below 4,000
    rows[2] = dict(rows[2], messages=[system, *rows[2]["messages"]])
    src = d / "three.jsonl"
    src.write_text("".join(json.dumps(row) + "\n" for row in rows))
    for jobs in ("1", "2"):
        case = f"one of three infeasible, --jobs {jobs}"
        out = d / f"o{jobs}.jsonl"
        r = p.run(
            ["compact", str(src), "--limit", "3000", "--jobs", jobs, "-o", str(out)],
            case=case,
            cwd=d,
            expect=(3,),
            one_line=False,
        )
        written = out.read_text().splitlines() if out.exists() else []
        p.check("leftover", case, len(written) == 2, f"{len(written)} conversations written")
        named = [line for line in r.error_lines() if line.startswith("three#3: left out: ")]
        p.check("wording", case, len(named) == 1, _last(r))
        last = (r.error_lines() or [""])[-1]
        p.check("wording", case, last.endswith("are left out (exit 3)"), last)
        db = Path(f"{out}.ctx.db")
        ids: list[str] = []
        if db.exists():
            with sqlite3.connect(db) as conn:
                ids = sorted(
                    row[0].split("~")[0]
                    for row in conn.execute("SELECT transcript_id FROM transcripts")
                )
        p.check("leftover", case, ids == ["three#1", "three#2"], f"archived: {ids}")


# ---------------------------------------------------------------------------------- recall


def exact(p: Probe, fx: Fixtures) -> None:
    """`recall REF > file` gives the archived text byte for byte (and one newline)."""
    if not fx.exact_ref:
        p.check(
            "inexact",
            "the odd unit was archived",
            False,
            "the fixture's unit odd-1 is not in the archive",
        )
        return
    d = _case_dir(p, "exact")
    out = d / "recalled.txt"
    r = p.run(
        ["recall", fx.exact_ref, "--archive", str(fx.archive)],
        case="recall REF > file",
        stdout_file=out,
    )
    want = fx.exact_text.encode("utf-8") + b"\n"
    got = out.read_bytes() if out.exists() else b""
    p.check(
        "inexact",
        "recall REF > file",
        got == want,
        f"{len(got)} bytes, first difference at {_diff_at(got, want)}",
    )
    r = p.run(
        ["recall", fx.exact_ref, "--archive", str(fx.archive), "--lines", "1-2"],
        case="recall --lines",
    )
    want_lines = "\n".join(fx.exact_text.split("\n")[:2]).encode() + b"\n"
    p.check("inexact", "recall --lines 1-2", r.stdout == want_lines, f"got {r.stdout[:80]!r}")


def _diff_at(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


# ---------------------------------------------------------------------------------- main

GROUPS: dict[str, Callable[[Probe, Fixtures], None]] = {
    "endless": endless,
    "streams": closed_streams,
    "sigint": sigint,
    "sigkill": sigkill,
    "devices": devices,
    "archives": existing_archives,
    "damaged": damaged_archives,
    "secrets": secrets,
    "mcp": mcp,
    "wording": wording,
    "leftovers": leftovers,
    "dataset": dataset,
    "exact": exact,
}


@contextmanager
def _workdir(keep: bool) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="ctxkit-edge-probe-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        if keep:
            print(f"kept {d}", file=sys.stderr)
        else:
            subprocess.run(["umount", str(d / "small-fs")], capture_output=True)
            shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--ctxkit",
        default=str(Path(sys.executable).with_name("ctxkit")),
        help="the ctxkit command (a command line: 'env PYTHONPATH=../main python -m ctxkit')",
    )
    ap.add_argument("--quick", action="store_true", help="fewer random SIGINT/SIGKILL runs")
    ap.add_argument(
        "--only", action="append", choices=sorted(GROUPS), help="run only this group (repeatable)"
    )
    ap.add_argument("--list", action="store_true", help="list the groups")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failing check")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--json", action="store_true", help="findings as JSON lines on stdout")
    args = ap.parse_args()
    if args.list:
        for name, fn in GROUPS.items():
            print(f"{name:10s} {(fn.__doc__ or '').splitlines()[0]}")
        return
    started = time.monotonic()
    with _workdir(args.keep) as work:
        p = Probe(shlex.split(args.ctxkit), work, args.quick, args.verbose)
        fx = make_fixtures(p)
        for name, fn in GROUPS.items():
            if args.only and name not in args.only:
                continue
            p.group = name
            t0 = time.monotonic()
            fn(p, fx)
            if args.verbose:
                print(f"# {name}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    if args.json:
        for f in p.findings:
            print(json.dumps(f.__dict__))
        return
    print(
        f"edge probe: {sum(p.checks.values()):,} checks in {time.monotonic() - started:.0f} s ({'root' if os.geteuid() == 0 else 'not root'})"
    )
    print()
    print(f"| {'category':11s} | checks | failures |")
    print(f"|{'-' * 13}|--------|----------|")
    for c in CATEGORIES:
        failures = sum(1 for f in p.findings if f.category == c)
        print(f"| {c:11s} | {p.checks[c]:6,} | {failures:8,} |")
    if p.findings and not args.verbose:
        print()
        for f in p.findings[:60]:
            print(f"- {f.category}: {f.group}/{f.case}: {f.detail[:160]}")
        if len(p.findings) > 60:
            print(f"- ... {len(p.findings) - 60} more (-v lists all)")
    if p.startup:
        print()
        print(
            f"{len(p.startup)} of the SIGINT runs were interrupted before any ctxkit code ran "
            "(Python's start-up or import machinery printed KeyboardInterrupt); not counted"
        )
    if p.skipped:
        print()
        for s in p.skipped:
            print(f"skipped {s}")
    raise SystemExit(1 if p.findings else 0)


if __name__ == "__main__":
    main()
