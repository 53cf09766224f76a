"""`--engine ray` against the local engine: throughput, and memory on a dataset too big to load.

    .venv/bin/python scripts/bench_ray.py [--count 6] [--tokens 8000] [--sizes-mb 100 400]

1. Throughput. One dataset of simulated conversations (`ctxkit simulate -s all --count N
   --tokens T --format openai`, one per line), run through the CLI as a user runs it:
   `compact --limit T/2` with `--jobs 1`, `--jobs 2`, `--engine ray --ray-workers 1` and
   `--ray-workers 2`, and `count` on the local engine and on Ray with 1 and 2 workers.
   Conversations/s and tokens/s (input tokens, as `count` counts them) over the wall time of
   the whole command, Ray's start-up included (measured apart, on a one-line dataset).
2. Memory. That dataset repeated (each copy's first user message marked, so no two lines are
   the same) to each size in --sizes-mb, counted by `ctxkit.engines.ray.count_dataset` on a local Ray
   with 2 CPUs and a 100 MB object store. Each task reports its worker's peak RSS; the driver's
   own peak is measured too. Loading the dataset whole is estimated from the RSS that reading a
   sample into a list takes, scaled to the size.

Prints a Markdown report (the BENCHMARKS.md section) on stdout.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def ctxkit(*args: str) -> float:
    """Run `ctxkit ARGS`; its wall time in seconds."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ctxkit", *args], env=_env(),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"ctxkit {' '.join(args)} failed:\n{done.stderr.decode()[-3000:]}")
    return took


def tokens_of(path: Path) -> int:
    out = subprocess.run([sys.executable, "-m", "ctxkit", "count", str(path), "--format", "jsonl"],
                         env=_env(), check=True, capture_output=True).stdout.splitlines()
    return int(orjson.loads(out[-1])["total"])


def throughput(work: Path, count: int, tokens: int) -> list[str]:
    data = work / "dataset.jsonl"
    ctxkit("simulate", "-s", "all", "--count", str(count), "--tokens", str(tokens),
           "--format", "openai", "-o", str(data))
    n = sum(1 for line in data.read_bytes().splitlines() if line.strip())
    total = tokens_of(data)
    tiny = work / "tiny.jsonl"
    tiny.write_bytes(data.read_bytes().splitlines()[0] + b"\n")
    startup = ctxkit("count", str(tiny), "--engine", "ray") - ctxkit("count", str(tiny))
    limit = str(tokens // 2)
    runs = [
        ("count", "local (one process)", ["count", str(data), "--format", "jsonl"]),
        ("count", "ray, 1 worker", ["count", str(data), "--format", "jsonl", "--engine", "ray",
                                    "--ray-workers", "1", "--shard-mb", "0.5"]),
        ("count", "ray, 2 workers", ["count", str(data), "--format", "jsonl", "--engine", "ray",
                                     "--ray-workers", "2", "--shard-mb", "0.5"]),
        ("compact", "local --jobs 1", ["compact", str(data), "--limit", limit, "--jobs", "1",
                                       "-o", str(work / "j1.jsonl")]),
        ("compact", "local --jobs 2", ["compact", str(data), "--limit", limit, "--jobs", "2",
                                       "-o", str(work / "j2.jsonl")]),
        ("compact", "ray, 1 worker", ["compact", str(data), "--limit", limit, "--engine", "ray",
                                      "--ray-workers", "1", "--shard-mb", "0.5", "-o", str(work / "r1")]),
        ("compact", "ray, 2 workers", ["compact", str(data), "--limit", limit, "--engine", "ray",
                                       "--ray-workers", "2", "--shard-mb", "0.5", "-o", str(work / "r2")]),
    ]
    size_mb = data.stat().st_size / 2**20
    out = [
        f"Dataset: {n} simulated conversations (17 scenarios x {count} seeds, {tokens:,} tokens "
        f"each, OpenAI format), {size_mb:.1f} MB, {total:,} tokens; shards of 0.5 MB "
        f"(~{max(1, round(size_mb / 0.5))} Ray tasks). compact --limit {limit}. Wall time of the "
        "whole command; Ray's start-up and shutdown (measured on a one-line dataset: "
        f"{startup:.1f} s) included.",
        "",
        "| command | engine | wall s | conversations/s | tokens/s |",
        "|---|---|---:|---:|---:|",
    ]
    for cmd, label, args in runs:
        took = ctxkit(*args)
        out.append(f"| {cmd} | {label} | {took:.1f} | {n / took:.1f} | {total / took:,.0f} |")
    a = b"".join(p.read_bytes() for p in sorted((work / "r2").glob("*.jsonl")))
    same = a == (work / "j1.jsonl").read_bytes() == (work / "j2.jsonl").read_bytes()
    out += ["", f"Outputs of the four compact runs identical: {same}."]
    return out


def build(base: list[bytes], path: Path, size_mb: float) -> int:
    """`base` lines repeated to about `size_mb` MB, each copy marked; the number of lines."""
    target = int(size_mb * 2**20)
    written = n = 0
    with open(path, "wb") as out:
        while written < target:
            conv = orjson.loads(base[n % len(base)])
            for m in conv["messages"]:
                if m.get("role") == "user" and isinstance(m.get("content"), str):
                    m["content"] += f" [copy {n}]"
                    break
            line = orjson.dumps(conv) + b"\n"
            out.write(line)
            written += len(line)
            n += 1
    return n


def load_whole_mb_per_mb(sample: Path) -> float:
    """RSS (MB) that holding a dataset's transcripts in a list takes, per MB of file."""
    from ctxkit.formats import read_path

    def rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    gc.collect()
    before = rss_mb()
    held = list(read_path(str(sample)))
    after = rss_mb()
    del held
    return (after - before) / (sample.stat().st_size / 2**20)


def memory(work: Path, sizes_mb: list[float]) -> list[str]:
    from ctxkit.engines.ray import CountJob, RayOptions, count_dataset
    from ctxkit.engines.shards import plan_shards

    base = [x for x in (work / "dataset.jsonl").read_bytes().splitlines() if x.strip()]
    table = []
    opts = RayOptions(num_cpus=2, object_store_mb=100)
    for size in sizes_mb:
        path = work / f"big-{size:g}.jsonl"
        n = build(base, path, size)
        shards = plan_shards([str(path)])
        start = time.perf_counter()
        peaks: dict[int, float] = {}
        rows = 0
        for result in count_dataset(shards, CountJob(), opts):
            rows += len(result["rows"])
            w = result["worker"]
            peaks[w["pid"]] = max(peaks.get(w["pid"], 0.0), w["peak_rss_mb"])
        took = time.perf_counter() - start
        assert rows == n, (rows, n)
        driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        table.append((path.stat().st_size / 2**20, n, len(shards), took, sorted(peaks.values()), driver))
        path.unlink()
    factor = load_whole_mb_per_mb(work / "dataset.jsonl")  # after: it raises this process's peak
    out = [
        "",
        "Memory: `count` on `--engine ray` (2 CPUs, object store capped at 100 MB, 32 MB "
        "shards) over the dataset above repeated to each size (each copy's first user message "
        "marked). Peak RSS of each Ray worker (getrusage in the task) and of the driver; "
        "\"whole\" is what holding every transcript in memory would take (read_path into a list: "
        f"{factor:.1f} MB per MB of JSONL, measured on the dataset above).",
        "",
        "| dataset MB | conversations | tasks | wall s | worker peak RSS MB (each) | driver peak RSS MB | whole MB (est.) |",
        "|---:|---:|---:|---:|---|---:|---:|",
    ]
    for mb, n, tasks, took, peaks_mb, driver in table:
        each = ", ".join(f"{v:.0f}" for v in peaks_mb)
        out.append(f"| {mb:.0f} | {n:,} | {tasks} | {took:.0f} | {each} | {driver:.0f} | "
                   f"{factor * mb:,.0f} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=6, help="seeds per scenario (17 scenarios)")
    ap.add_argument("--tokens", type=int, default=8000, help="tokens per conversation")
    ap.add_argument("--sizes-mb", type=float, nargs="*", default=[100.0, 400.0])
    ap.add_argument("--keep", default=None, help="work in this directory (default: a temp dir)")
    ap.add_argument("--memory-only", action="store_true",
                    help="only the memory table, on the dataset a previous run left in --keep")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="ctxkit-bench-ray-"))
    work.mkdir(parents=True, exist_ok=True)
    report = [] if args.memory_only else throughput(work, args.count, args.tokens)
    if args.sizes_mb:
        report += memory(work, args.sizes_mb)
    print("\n".join(report))


if __name__ == "__main__":
    main()
