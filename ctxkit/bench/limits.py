"""The suites that run ctxkit as a user runs it, in processes of its own: `startup` (a count of
a small file against `import tiktoken`), `archive` (a dataset's archive against the dataset's
size) and `ray` (`--engine ray` against `--jobs` on this machine).

Each measures both sides in the same run, interleaved where repeated, and reports ratios.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxkit.bench.harness import BenchOptions, Figure, Progress, SuiteResult

STARTUP_TARGET = 2.0  # a count of a two-message file within 2x `python -c "import tiktoken"`
ARCHIVE_TARGET = 1.0  # an archive no bigger than its input
RAY_TARGET = 0.9  # Ray's throughput per core at least 90% of --jobs'
ARCHIVE_MB, QUICK_ARCHIVE_MB = 200.0, 4.0
RAY_MB, QUICK_RAY_MB = 40.0, 2.0
DATASET_TOKENS, DATASET_LIMIT = 16_000, 8_000  # each simulated conversation, and compact --limit

TWO_MESSAGES = (
    '[{"role": "user", "content": "What does the build script do?"},'
    ' {"role": "assistant", "content": "It compiles the sources and runs the tests."}]\n'
)


def _ctxkit(*args: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run `python -m ctxkit ARGS`: (wall, CPU of it and the children it waited for) seconds."""
    return _run([sys.executable, "-m", "ctxkit", *args], env)


def _run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
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


def suite_startup(opts: BenchOptions, say: Progress) -> SuiteResult:
    """`ctxkit count` of a two-message file, whole process, against `python -c "import
    tiktoken"`: medians of interleaved runs, bytecode compiled first (as `pip install` does),
    the tokenizer's rank table written by a first run (as any later run finds it)."""
    import ctxkit

    res = SuiteResult("startup")
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(ctxkit.__file__).parent)], check=False
    )
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as tmp:
        chat = Path(tmp) / "two.json"
        chat.write_text(TWO_MESSAGES)
        env = {**os.environ, "CTXKIT_CACHE_DIR": str(Path(tmp) / "cache")}
        commands = {
            "import tiktoken": [sys.executable, "-c", "import tiktoken"],
            "cl100k_base": [sys.executable, "-m", "ctxkit", "count", str(chat)],
            "o200k_base": [
                sys.executable, "-m", "ctxkit", "count", str(chat), "--tokenizer", "o200k_base"
            ],
        }
        for cmd in commands.values():  # warm: files in the page cache, rank tables written
            _run(cmd, env)
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
        n = opts.repeats(11)
        say(f"startup: {n} rounds")
        for _ in range(n):
            for key, cmd in commands.items():
                runs[key].append(_run(cmd, env))
    wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    base = "import tiktoken"
    for name in ("cl100k_base", "o200k_base"):
        res.figures.append(
            Figure(
                f"`ctxkit count` of a 2-message file / `import tiktoken` ({name})",
                wall[name] / wall[base],
                "x",
                STARTUP_TARGET,
                note=f"whole process, median of {n}: {wall[name] * 1000:.0f} ms against "
                f"{wall[base] * 1000:.0f} ms; CPU {cpu[name] * 1000:.0f} against "
                f"{cpu[base] * 1000:.0f} ms ({cpu[name] / cpu[base]:.2f}x)",
                detail={"wall_s": wall, "cpu_s": cpu, "runs": n},
            )
        )
    return res


def simulated_dataset(path: Path, mb: float) -> int:
    """A JSONL dataset of at least `mb` MB: every simulated scenario at DATASET_TOKENS tokens,
    seeds 0, 1, ... (no two conversations alike); the number of conversations."""
    probe = path.with_suffix(".probe.jsonl")
    _ctxkit(
        "simulate", "-s", "all", "--tokens", str(DATASET_TOKENS), "--format", "openai",
        "-o", str(probe),
    )
    per_count = probe.stat().st_size / 2**20
    for leftover in (probe, probe.with_name(probe.stem + ".truth.jsonl")):
        leftover.unlink(missing_ok=True)
    count = max(1, -(-int(mb * 1000) // max(1, int(per_count * 1000))))
    _ctxkit(
        "simulate", "-s", "all", "--count", str(count), "--tokens", str(DATASET_TOKENS),
        "--format", "openai", "-o", str(path),
    )
    path.with_name(path.stem + ".truth.jsonl").unlink(missing_ok=True)
    return sum(1 for line in path.read_bytes().splitlines() if line.strip())


def _jobs() -> int:
    from ctxkit.compaction.parallel import usable_cpus

    return usable_cpus()


def suite_archive(opts: BenchOptions, say: Progress) -> SuiteResult:
    """`ctxkit compact` of a dataset of simulated conversations (`--dataset-mb`, default 200
    MB): the archive's size against the dataset's, and the run's throughput."""
    res = SuiteResult("archive")
    mb = opts.dataset_mb or (QUICK_ARCHIVE_MB if opts.quick else ARCHIVE_MB)
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as tmp:
        data = Path(tmp) / "dataset.jsonl"
        say(f"archive: simulating {mb:g} MB")
        n = simulated_dataset(data, mb)
        size = data.stat().st_size
        jobs = _jobs()
        say(f"archive: compacting {n:,} conversations, --jobs {jobs}")
        out, db = Path(tmp) / "small.jsonl", Path(tmp) / "small.jsonl.ctx.db"
        wall, cpu = _ctxkit(
            "compact", str(data), "--limit", str(DATASET_LIMIT), "--jobs", str(jobs),
            "-o", str(out), "--archive", str(db),
        )
        stored = db.stat().st_size
        res.figures.append(
            Figure(
                "archive size / input size",
                stored / size,
                "ratio",
                ARCHIVE_TARGET,
                note=f"{stored / 2**20:,.1f} MB archive for a {size / 2**20:,.1f} MB dataset of "
                f"{n:,} conversations (every original whole and every unit compaction took out; "
                f"output {out.stat().st_size / 2**20:,.1f} MB)",
                detail={"archive_bytes": stored, "input_bytes": size, "conversations": n},
            )
        )
        res.figures.append(
            Figure(
                "compaction throughput, with the archive",
                size / 2**20 / wall,
                "MB/s",
                note=f"compact --limit {DATASET_LIMIT:,} --jobs {jobs}: {wall:,.1f} s wall, "
                f"{cpu:,.1f} s CPU",
            )
        )
    return res


def suite_ray(opts: BenchOptions, say: Progress) -> SuiteResult:
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
    jobs = _jobs()
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as tmp:
        work = Path(tmp)
        data = work / "dataset.jsonl"
        say(f"ray: simulating {mb:g} MB")
        n = simulated_dataset(data, mb)
        one = work / "one.jsonl"
        one.write_bytes(data.read_bytes().split(b"\n", 1)[0] + b"\n")
        limit = ["--limit", str(DATASET_LIMIT)]
        say("ray: start-up on a one-line dataset")
        startup = _ctxkit("count", str(one), "--engine", "ray")[0] - _ctxkit("count", str(one))[0]
        say(f"ray: compact --jobs {jobs}")
        local, _ = _ctxkit("compact", str(data), *limit, "--jobs", str(jobs), "-o", str(work / "local.jsonl"))
        say(f"ray: compact --engine ray --ray-workers {jobs}")
        on_ray, _ = _ctxkit(
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
    from ctxkit.engines.ray import CompactJob, RayOptions, compact_dataset
    from ctxkit.engines.shards import plan_shards

    opts = RayOptions(workers=workers)
    shards = plan_shards([str(data)], workers=opts.parallelism)
    job = CompactJob(str(work / "peaks"), {"limit": int(limit[1])})
    peaks: dict[int, float] = {}
    for tally in compact_dataset(shards, job, opts):
        w: dict[str, Any] = tally.get("worker") or {}
        if "pid" in w:
            peaks[w["pid"]] = max(peaks.get(w["pid"], 0.0), float(w["peak_rss_mb"]))
    return sorted(peaks.values())
