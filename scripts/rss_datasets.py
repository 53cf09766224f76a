"""Peak memory of `ctxkit compact --jobs 2` on datasets of growing size (issue 16, item 8).

    .venv/bin/python scripts/rss_datasets.py [--sizes-mb 50 200] [--jobs 2] [--keep DIR]

Builds one-conversation-per-line OpenAI JSONL datasets in a temp folder: simulated scenarios
(`ctxkit simulate`), repeated with a distinct marker in each copy's first message until the file
reaches the size, then runs `ctxkit compact DATASET --jobs N -o OUT --limit 4000 --embedder lexical`
(every conversation is over the limit, so each one is compacted and archived) and reports:

- peak RSS of the largest single process (the parent or a worker; getrusage RUSAGE_CHILDREN,
  measured in a fresh helper process per run), and
- peak RSS of the whole process tree (parent + workers, sampled from /proc every 50 ms).

Memory is bounded when the largest size's peak is within 1.2x of the smallest's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = ["agent_session", "long_chat", "giant_tool_output", "code_heavy", "log_heavy",
             "json_heavy", "parallel_tools", "multilingual_emoji", "deep_reasoning", "fragmented"]
MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
sys.stderr.write(done.stderr.decode()[-2000:])
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def build(path: Path, size_mb: float, seed: int) -> int:
    """A dataset of about `size_mb` MB at `path`; returns its number of conversations."""
    base = subprocess.run(
        [sys.executable, "-m", "ctxkit", "simulate", "--format", "openai", "--seed", str(seed),
         *[a for s in SCENARIOS for a in ("-s", s)]],
        check=True, capture_output=True, env=_env(),
    ).stdout.splitlines()
    target = int(size_mb * 1024 * 1024)
    written = n = 0
    with open(path, "wb") as out:
        while written < target:
            line = base[n % len(base)]
            conv = orjson.loads(line)
            for m in conv["messages"]:
                if m.get("role") == "user" and isinstance(m.get("content"), str):
                    m["content"] += f" [copy {n}]"  # each copy archives as its own content
                    break
            data = orjson.dumps(conv) + b"\n"
            out.write(data)
            written += len(data)
            n += 1
    return n


def _tree_rss_kb(pid: int) -> int:
    """RSS of `pid` and all its descendants, from /proc."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return total


def measure(dataset: Path, out: Path, jobs: int, extra: list[str]) -> tuple[int, int, float]:
    """(peak RSS of one process in KB, peak RSS of the tree in KB, seconds) of one compact run."""
    cmd = [sys.executable, "-m", "ctxkit", "compact", str(dataset), "--jobs", str(jobs),
           "-o", str(out), "--no-progress", *extra]
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", MEASURE, *cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env())
    tree_peak = 0
    while proc.poll() is None:
        tree_peak = max(tree_peak, _tree_rss_kb(proc.pid))
        time.sleep(0.05)
    seconds = time.monotonic() - start
    stdout, stderr = proc.communicate()
    code, single = stdout.split()
    if int(code) != 0:
        raise SystemExit(f"compact failed ({code}): {stderr.decode()[-2000:]}")
    return int(single), tree_peak, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[50, 200])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", default=None, help="Build the datasets here and keep them.")
    parser.add_argument("compact_args", nargs="*", help="More compact flags, after --.")
    args = parser.parse_args()
    extra = args.compact_args or ["--limit", "4000", "--embedder", "lexical"]
    with tempfile.TemporaryDirectory(prefix="ctxkit-rss-") as scratch:
        folder = Path(args.keep or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        rows = []
        for size in args.sizes_mb:
            dataset = folder / f"dataset-{size:g}mb.jsonl"
            n = build(dataset, size, args.seed)
            mb = dataset.stat().st_size / 1024 / 1024
            single, tree, seconds = measure(dataset, folder / f"out-{size:g}mb.jsonl", args.jobs, extra)
            rows.append((size, mb, n, single, tree, seconds))
            print(f"{mb:7.1f} MB  {n:6,} conversations  peak RSS {single / 1024:7.1f} MB (largest "
                  f"process)  {tree / 1024:7.1f} MB (parent + workers)  {seconds:6.0f} s", flush=True)
            (folder / f"out-{size:g}mb.jsonl").unlink(missing_ok=True)
            for db in folder.glob(f"out-{size:g}mb.jsonl.ctx.db*"):
                db.unlink()
            if not args.keep:
                dataset.unlink()
        if len(rows) > 1:
            first, last = rows[0], rows[-1]
            print(f"ratio {last[1] / first[1]:.1f}x the data: {last[3] / first[3]:.2f}x the largest "
                  f"process, {last[4] / first[4]:.2f}x the tree (bounded when <= 1.2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
