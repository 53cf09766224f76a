"""What the suites that run ctxkit as a user runs it share: `python -m ctxkit ARGS` in a process
of its own, timed (wall and CPU; with `run_tree`, the CPU and peak memory of every process it
starts), and a simulated JSONL dataset of a given size."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ctxkit.formats.openai import NAME as OPENAI

DATASET_TOKENS, DATASET_LIMIT = 16_000, 8_000  # each simulated conversation, and compact --limit


def run_ctxkit(*args: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run `python -m ctxkit ARGS`: (wall, CPU of it and the children it waited for) seconds."""
    return run_timed([sys.executable, "-m", "ctxkit", *args], env)


def run_timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd[2:])} failed: {' / '.join(tail)}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


@dataclass
class TreeRun:
    """A command's run: wall seconds, CPU seconds of its whole process tree, and each process's
    peak resident memory (MB) under every command line it showed (Ray renames its workers)."""

    wall_s: float
    cpu_s: float
    processes: list[tuple[frozenset[str], float]] = field(default_factory=list)

    def peaks_mb(self, *, named: str = "", root: bool = False) -> list[float]:
        """The peaks of the processes that showed a command line containing `named` (the
        first process, the command itself, only with `root`), largest first."""
        chosen = self.processes if root else self.processes[1:]
        return sorted((mb for names, mb in chosen if any(named in n for n in names)), reverse=True)


POLL_S = 0.05  # /proc is read this often: a process's CPU of its last 50 ms is not counted


def run_tree(*args: str, env: dict[str, str] | None = None) -> TreeRun:
    """Run `python -m ctxkit ARGS` with `run_command_tree`."""
    cmd = [sys.executable, "-m", "ctxkit", *args]
    return run_command_tree(cmd, env, name=f"ctxkit {' '.join(args)}")


def run_command_tree(cmd: list[str], env: dict[str, str] | None = None, *, name: str = "") -> TreeRun:
    """Run `cmd`, reading /proc while it runs: the CPU (user and system) and peak RSS of every
    process it starts and of theirs. Ray's daemons and workers are not always reaped by the
    command (a killed raylet's workers go to init), so getrusage's RUSAGE_CHILDREN would miss
    them; /proc misses what a process spent after it was last read. The CPU is the larger of
    the two. A process that lived less than one reading apart may not be listed. Without /proc
    (not Linux): `run_timed`'s figures. A failed command raises, named `name`."""
    if not os.path.isdir("/proc/self"):
        wall, cpu = run_timed(cmd, env)
        return TreeRun(wall, cpu)
    tick = os.sysconf("SC_CLK_TCK")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tree: dict[int, tuple[float, float, set[str]]] = {}  # pid -> (CPU s, peak MB, names)
    err: list[bytes] = []
    # stderr read aside: a chatty command must not block on a full pipe while we poll
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else b""))
    reader.start()
    while proc.poll() is None:
        for pid, ppid, cpu, mb, line in _processes(tick):
            if pid == proc.pid or ppid in tree or pid in tree:
                was = tree.get(pid, (0.0, 0.0, set()))
                tree[pid] = (max(was[0], cpu), max(was[1], mb), was[2] | {line})
        time.sleep(POLL_S)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reader.join()
    if proc.returncode != 0:
        tail = b"".join(err).decode("utf-8", "replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{name or ' '.join(cmd)} failed: {' / '.join(tail)}")
    waited = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    order = sorted(tree, key=lambda pid: pid != proc.pid)  # the command first
    return TreeRun(
        wall,
        max(waited, sum(tree[pid][0] for pid in tree)),
        [(frozenset(tree[pid][2]), tree[pid][1]) for pid in order],
    )


def _processes(tick: int) -> list[tuple[int, int, float, float, str]]:
    """(pid, parent pid, CPU s, peak RSS MB, command line) of every process /proc shows."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                name = f.read().replace(b"\0", b" ").strip().decode("utf-8", "replace")
            with open(f"/proc/{entry}/status", "rb") as f:
                peak = next((line for line in f if line.startswith(b"VmHWM:")), b"VmHWM: 0 kB")
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(b")") + 2 :].split()  # after the name, which may hold spaces
        cpu = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        out.append((int(entry), int(fields[1]), cpu, int(peak.split()[1]) / 1024, name))
    return out


def simulated_dataset(path: Path, mb: float) -> int:
    """A JSONL dataset of at least `mb` MB: every simulated scenario at DATASET_TOKENS tokens,
    seeds 0, 1, ... (no two conversations alike); the number of conversations."""
    probe = path.with_suffix(".probe.jsonl")
    run_ctxkit(
        "simulate", "-s", "all", "--tokens", str(DATASET_TOKENS), "--format", OPENAI,
        "-o", str(probe),
    )
    per_count = probe.stat().st_size / 2**20
    for leftover in (probe, probe.with_name(probe.stem + ".truth.jsonl")):
        leftover.unlink(missing_ok=True)
    count = max(1, -(-int(mb * 1000) // max(1, int(per_count * 1000))))
    run_ctxkit(
        "simulate", "-s", "all", "--count", str(count), "--tokens", str(DATASET_TOKENS),
        "--format", OPENAI, "-o", str(path),
    )
    path.with_name(path.stem + ".truth.jsonl").unlink(missing_ok=True)
    return sum(1 for line in path.read_bytes().splitlines() if line.strip())


def local_cpus() -> int:
    from ctxkit.compaction.parallel import usable_cpus

    return usable_cpus()
