"""Wall time and peak RSS of a default `ctxkit compact`, cold process, beside `import tiktoken`.

    .venv/bin/python scripts/bench_default.py [--runs 5] [--embedders default,static,lexical]
                                              [--scenario code_heavy] [--tokens 10000]

The input is `ctxkit simulate -s code_heavy --tokens 10000` (58 units, 10k cl100k tokens),
compacted to `--limit` half its size. Every run is a new process (`python -m ctxkit compact`)
with a fresh output file, archive and embedding cache, so nothing is warm but the OS page cache.
Each configuration runs `--runs` times, interleaved with `python -c "import tiktoken"`; the
medians are printed with the ratio to tiktoken's, which makes machines (and loads) comparable.
Peak RSS is the child's own `ru_maxrss` (os.wait4).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in MB, exit code) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    # ru_maxrss is in kilobytes on Linux (bytes on macOS)
    scale = 1 / 1024 if sys.platform != "darwin" else 1 / (1024 * 1024)
    cpu = usage.ru_utime + usage.ru_stime  # steadier than wall time on a shared machine
    return wall, cpu, usage.ru_maxrss * scale, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--scenario", default="code_heavy")
    ap.add_argument("--tokens", type=int, default=10_000)
    ap.add_argument("--limit", type=int, default=5_000)
    ap.add_argument(
        "--embedders",
        default="default,static,lexical",
        help="comma-separated; `default` passes no --embedder (add minilm to time it cold)",
    )
    ap.add_argument("--json", dest="json_path", type=Path, default=None)
    args = ap.parse_args()
    py = sys.executable
    # as pip does on install: with PYTHONDONTWRITEBYTECODE set (as in some shells and CI) a
    # source checkout would otherwise recompile every module in every run (~0.15 s here)
    import ctxkit

    subprocess.run([py, "-m", "compileall", "-q", str(Path(ctxkit.__file__).parent)], check=True)
    work = Path(tempfile.mkdtemp(prefix="ctxkit-bench-default-"))
    env = {**os.environ, "CTXKIT_CACHE_DIR": str(work / "cache")}
    source = work / "in.jsonl"
    subprocess.run(
        [py, "-m", "ctxkit", "simulate", "-s", args.scenario, "--tokens", str(args.tokens),
         "-o", str(source)],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    from ctxkit.formats import read_path
    from ctxkit.tokens import count_transcript, get_tokenizer

    t = next(iter(read_path(str(source))))
    tokens = count_transcript(t, get_tokenizer()).total
    print(
        f"input: {args.scenario}, {len(t.units)} units, {tokens:,} tokens -> --limit {args.limit:,};"
        f" {args.runs} cold runs each; load average {os.getloadavg()[0]:.1f}"
    )
    names = [n.strip() for n in args.embedders.split(",") if n.strip()]
    results: dict[str, list[tuple[float, float, float]]] = {
        n: [] for n in ["import tiktoken", *names]
    }
    for i in range(args.runs):
        wall, cpu, rss, code = run([py, "-c", "import tiktoken"], env)
        results["import tiktoken"].append((wall, cpu, rss))
        for name in names:
            out = work / f"out-{name}-{i}.jsonl"
            cmd = [py, "-m", "ctxkit", "compact", str(source), "--limit", str(args.limit),
                   "-o", str(out)]  # fmt: skip
            if name != "default":
                cmd += ["--embedder", name]
            run_env = {**env, "CTXKIT_CACHE_DIR": str(work / f"cache-{name}-{i}")}
            wall, cpu, rss, code = run(cmd, run_env)
            if code != 0:
                print(f"{name}: exit {code}", file=sys.stderr)
            results[name].append((wall, cpu, rss))
    base_wall = statistics.median(s[0] for s in results["import tiktoken"])
    base_cpu = statistics.median(s[1] for s in results["import tiktoken"])
    print(
        f"{'command':24} {'wall s':>7} {'x tiktoken':>10} {'CPU s':>6} {'x tiktoken':>10} "
        f"{'peak RSS MB':>11}  wall of each run (s)"
    )
    rows = []
    for name, samples in results.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        rss = statistics.median(s[2] for s in samples)
        label = name if name == "import tiktoken" else f"compact ({name})"
        print(
            f"{label:24} {wall:>7.3f} {wall / base_wall:>10.1f} {cpu:>6.3f} {cpu / base_cpu:>10.1f} "
            f"{rss:>11.0f}  " + " ".join(f"{s[0]:.2f}" for s in samples)
        )
        rows.append(
            {"command": label, "wall_s": wall, "wall_ratio": wall / base_wall, "cpu_s": cpu,
             "cpu_ratio": cpu / base_cpu, "rss_mb": rss}
        )  # fmt: skip
    if args.json_path:
        args.json_path.write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
