"""What the suites that run ctxkit as a user runs it share: `python -m ctxkit ARGS` in a process
of its own, timed (wall and CPU), and a simulated JSONL dataset of a given size."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
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
