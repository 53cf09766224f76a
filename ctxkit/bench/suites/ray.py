"""The ray suite: `compact --engine ray` against `compact --jobs` on this machine, per core
(issue 23: within 10%), the CPU each spends, each worker's peak memory, and whether both wrote
the same bytes.

Both run as a user runs them, each in a process of its own with this machine's CPUs (N):
`compact DATASET --jobs N -o FILE` and `compact DATASET --engine ray --ray-workers N -o DIR`,
Ray's start-up and shutdown included. With the same N cores on both sides, the ratio of wall
times is the ratio of throughput per core. The machine may be shared (other jobs' load makes
wall times swing by half), so the runs alternate, N-first and Ray-first in turn, each round
gives one ratio and the figure is their median; the CPU of each whole process tree (Ray's
daemons included) and the load average go beside it.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from pathlib import Path

from ctxkit.bench.processes import (
    DATASET_LIMIT,
    TreeRun,
    local_cpus,
    run_ctxkit,
    run_tree,
    simulated_dataset,
)
from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult

NAME = "ray"
RAY_TARGET = 0.9  # Ray's throughput per core at least 90% of --jobs'
RAY_MB, QUICK_RAY_MB = 40.0, 2.0
ROUNDS = 3  # jobs and Ray runs each (--repeat)
SHARD_TASK = "ray::ctxkit-shard"  # a Ray worker's process title while it runs a shard


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """`compact --engine ray --ray-workers N` against `compact --jobs N` (N this machine's
    CPUs) and `--jobs 1`, in alternating rounds on one dataset: throughput per core with and
    without Ray's start-up, CPU, each worker's peak memory, and whether all wrote the same
    bytes."""
    res = SuiteResult("ray")
    try:
        import ray  # noqa: F401
    except ImportError:
        res.skipped.append("ray: not installed (pip install 'ctxkit[ray]')")
        return res
    mb = QUICK_RAY_MB if opts.quick else RAY_MB
    cores = local_cpus()
    rounds = opts.repeats(ROUNDS)
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as tmp:
        work = Path(tmp)
        data = work / "dataset.jsonl"
        say(f"ray: simulating {mb:g} MB")
        n = simulated_dataset(data, mb)
        one = work / "one.jsonl"
        one.write_bytes(data.read_bytes().split(b"\n", 1)[0] + b"\n")
        limit = ["compact", str(data), "--limit", str(DATASET_LIMIT)]
        runs: dict[str, list[TreeRun]] = {"jobs": [], "ray": [], "one": []}
        startups: list[float] = []
        same = True
        for r in range(rounds):
            say(f"ray: round {r + 1} of {rounds}: start-up, --jobs {cores}, --engine ray, --jobs 1")
            startups.append(
                run_ctxkit("count", str(one), "--engine", "ray")[0] - run_ctxkit("count", str(one))[0]
            )
            local, shards = work / "local.jsonl", work / "ray"
            pair = [
                ("jobs", [*limit, "--jobs", str(cores), "-o", str(local)]),
                ("ray", [*limit, "--engine", "ray", "--ray-workers", str(cores), "-o", str(shards)]),
            ]
            for key, args in pair if r % 2 == 0 else pair[::-1]:  # who goes first, in turn
                runs[key].append(run_tree(*args))
            if cores > 1:
                runs["one"].append(run_tree(*limit, "--jobs", "1", "-o", str(work / "one-job.jsonl")))
            outputs = sorted(shards.glob("*.jsonl"))
            same = same and b"".join(p.read_bytes() for p in outputs) == local.read_bytes()
            load.append(os.getloadavg()[0])
            for leftover in (local, Path(f"{local}.ctx.db"), work / "one-job.jsonl",
                             work / "one-job.jsonl.ctx.db"):
                leftover.unlink(missing_ok=True)
            shutil.rmtree(shards, ignore_errors=True)
    res.figures += _figures(runs, startups, same, n=n, mb=mb, cores=cores, shards=len(outputs), load=load)
    return res


def _figures(
    runs: dict[str, list[TreeRun]], startups: list[float], same: bool, *, n: int, mb: float,
    cores: int, shards: int, load: list[float],
) -> list[Figure]:
    """The suite's figures from its rounds (a ratio per round, their median)."""
    med = statistics.median
    jobs, ray_, one = runs["jobs"], runs["ray"], runs["one"]
    wall = {k: med(r.wall_s for r in v) for k, v in runs.items() if v}
    cpu = {k: med(r.cpu_s for r in v) for k, v in runs.items() if v}
    ratio = med(j.wall_s / r.wall_s for j, r in zip(jobs, ray_, strict=True))
    startup = med(startups)
    past = med(j.wall_s / max(1e-9, r.wall_s - s) for j, r, s in zip(jobs, ray_, startups, strict=True))
    workers = [p for r in ray_ for p in r.peaks_mb(named=SHARD_TASK)]
    forked = [p for r in jobs for p in r.peaks_mb()]
    loads = f"load average {min(load):.1f} to {max(load):.1f} on {cores} cores"
    figures = [
        Figure(
            "ray throughput per core / --jobs",
            ratio,
            "ratio",
            RAY_TARGET,
            better="higher",
            note=f"{n:,} conversations, {mb:g} MB, {len(ray_)} rounds (median of each round's "
            f"ratio), {loads}: --jobs {cores} {wall['jobs']:.1f} s, --engine ray --ray-workers "
            f"{cores} {wall['ray']:.1f} s ({shards} shards), start-up and shutdown included; "
            f"same output: {same}",
            detail={
                "jobs_s": [r.wall_s for r in jobs], "ray_s": [r.wall_s for r in ray_],
                "jobs_cpu_s": [r.cpu_s for r in jobs], "ray_cpu_s": [r.cpu_s for r in ray_],
                "startup_s": startups, "load_average": load, "identical": same,
            },
        ),
        Figure(
            "ray throughput per core / --jobs, past Ray's start-up",
            past,
            "ratio",
            better="higher",
            note=f"less Ray's start-up and shutdown ({startup:.1f} s, `count` of a one-line file "
            "on Ray less on the local engine): what a running cluster (--ray-address) pays",
        ),
        Figure(
            "ray CPU / --jobs CPU",
            cpu["ray"] / cpu["jobs"],
            "ratio",
            note=f"CPU of each whole process tree (Ray's daemons and workers; --jobs' forked "
            f"workers): --jobs {cores} {cpu['jobs']:.1f} s, Ray {cpu['ray']:.1f} s"
            + (f", --jobs 1 {cpu['one']:.1f} s" if one else ""),
        ),
    ]
    if one:
        figures.append(
            Figure(
                "ray throughput per core / --jobs 1",
                med(o.wall_s / (cores * r.wall_s) for o, r in zip(one, ray_, strict=True)),
                "ratio",
                better="higher",
                note=f"against one process's throughput, {cores} times (1.0: Ray scales "
                f"perfectly); --jobs 1 {wall['one']:.1f} s",
            )
        )
    if workers:
        figures.append(
            Figure(
                "ray worker peak memory",
                max(workers),
                "MB",
                note=f"peak RSS of each Ray worker that ran a shard, every round "
                f"({', '.join(f'{p:.0f}' for p in workers)}); --jobs {cores}'s workers "
                f"{', '.join(f'{p:.0f}' for p in forked)} (each compacts about 1/{cores} of "
                "the dataset either way)",
            )
        )
    return figures
