"""The ray suite: `compact --engine ray` against `compact --jobs` on this machine, per core
(issue 23: within 10%), each worker's peak memory, and whether both wrote the same bytes."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from ctxkit.bench.harness import BenchOptions, Figure, Progress, SuiteResult
from ctxkit.bench.processes import DATASET_LIMIT, local_cpus, run_ctxkit, simulated_dataset

NAME = "ray"
RAY_TARGET = 0.9  # Ray's throughput per core at least 90% of --jobs'
RAY_MB, QUICK_RAY_MB = 40.0, 2.0


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """`compact --engine ray --ray-workers N` against `compact --jobs N` on this machine (N its
    CPUs), one dataset: throughput per core with and without Ray's start-up, each worker's peak
    memory, and whether both wrote the same bytes."""
    res = SuiteResult("ray")
    try:
        import ray  # noqa: F401
    except ImportError:
        res.skipped.append("ray: not installed (pip install 'ctxkit[ray]')")
        return res
    mb = QUICK_RAY_MB if opts.quick else RAY_MB
    jobs = local_cpus()
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as tmp:
        work = Path(tmp)
        data = work / "dataset.jsonl"
        say(f"ray: simulating {mb:g} MB")
        n = simulated_dataset(data, mb)
        one = work / "one.jsonl"
        one.write_bytes(data.read_bytes().split(b"\n", 1)[0] + b"\n")
        limit = ["--limit", str(DATASET_LIMIT)]
        say("ray: start-up on a one-line dataset")
        startup = run_ctxkit("count", str(one), "--engine", "ray")[0] - run_ctxkit("count", str(one))[0]
        say(f"ray: compact --jobs {jobs}")
        local, _ = run_ctxkit("compact", str(data), *limit, "--jobs", str(jobs), "-o", str(work / "local.jsonl"))
        say(f"ray: compact --engine ray --ray-workers {jobs}")
        on_ray, _ = run_ctxkit(
            "compact", str(data), *limit, "--engine", "ray", "--ray-workers", str(jobs),
            "-o", str(work / "ray"),
        )
        shards = sorted((work / "ray").glob("*.jsonl"))
        same = b"".join(p.read_bytes() for p in shards) == (work / "local.jsonl").read_bytes()
        # each worker's peak memory, from the tasks' own reports, on a quarter of the data
        part = work / "part.jsonl"
        lines = data.read_bytes().splitlines(keepends=True)
        part.write_bytes(b"".join(lines[: max(1, len(lines) // 4)]))
        say("ray: worker memory")
        peaks = _worker_peaks(part, limit, jobs, work)
        shutil.rmtree(work / "ray", ignore_errors=True)
    res.figures.append(
        Figure(
            "ray throughput per core / --jobs",
            local / on_ray,
            "ratio",
            RAY_TARGET,
            better="higher",
            note=f"{n:,} conversations, {mb:g} MB, {jobs} cores: --jobs {jobs} {local:.1f} s, "
            f"--engine ray {on_ray:.1f} s ({len(shards)} shards) whose start-up and shutdown take "
            f"{startup:.1f} s; same output: {same}",
            detail={"jobs_s": local, "ray_s": on_ray, "startup_s": startup, "identical": same},
        )
    )
    res.figures.append(
        Figure(
            "ray throughput per core / --jobs, past Ray's start-up",
            local / max(1e-9, on_ray - startup),
            "ratio",
            note="what a running cluster (--ray-address) pays: the start-up is paid once, not per run",
        )
    )
    if peaks:
        res.figures.append(
            Figure(
                "ray worker peak memory",
                max(peaks),
                "MB",
                note=f"each worker's peak RSS ({', '.join(f'{p:.0f}' for p in peaks)}): a worker "
                "streams its shard, one conversation at a time",
            )
        )
    return res


def _worker_peaks(data: Path, limit: list[str], workers: int, work: Path) -> list[float]:
    """Each Ray worker's peak RSS (MB) over a compaction of `data`, from the tasks' tallies."""
    from ctxkit.config.settings import SettingsSpec
    from ctxkit.engines.dataset import CompactJob
    from ctxkit.engines.ray import RayOptions, compact_dataset
    from ctxkit.engines.shards import plan_shards

    opts = RayOptions(workers=workers)
    shards = plan_shards([str(data)], workers=opts.parallelism)
    job = CompactJob(str(work / "peaks"), SettingsSpec(limit=int(limit[1])))
    peaks: dict[int, float] = {}
    for tally in compact_dataset(shards, job, opts):
        w: dict[str, Any] = tally.get("worker") or {}
        if "pid" in w:
            peaks[w["pid"]] = max(peaks.get(w["pid"], 0.0), float(w["peak_rss_mb"]))
    return sorted(peaks.values())
