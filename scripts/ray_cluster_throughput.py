"""Throughput of `--engine ray --ray-address` on a 2-node Ray cluster on this machine, against
`--jobs` (issue 37).

    .venv/bin/python scripts/ray_cluster_throughput.py [--count 4] [--tokens 8000] [--rounds 3]

1. A dataset folder of simulated conversations (`ctxkit simulate -s all --count N --tokens T
   --format openai`, split into 4 JSONL files).
2. A cluster as a user starts one (`tests/ray_cluster.py`: `ray start --head` and `ray start
   --address=HEAD`, one CPU a node, every node on 127.0.0.1), started once and left running, as
   a cluster is: its start-up is not in the figures.
3. Rounds, each in a new order: `compact DIR --limit T/2 -o OUT/` with `--jobs 1`, `--jobs 2`, and
   on the cluster (`--engine ray --ray-address`, `--shard-mb` so that every node gets shards);
   `count DIR` on the local engine and on the cluster. Each is the CLI as a user runs it, timed
   whole (Python start-up, connecting to the cluster, reading, writing). The cluster's output is
   checked to be the local output, file for file.

Prints a Markdown table (the wall times, conversations per second, and per node: the cluster's
rate over its 2 nodes) and the ratios: the cluster's rate per node against `--jobs 1`, and the
cluster against `--jobs 2` (the same 2 cores). The machine's load average is printed with it:
the cores are shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from ray_cluster import RayCluster  # noqa: E402


def run(env: dict[str, str], *args: str) -> float:
    """`ctxkit ARGS`; its wall time in seconds."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ctxkit", *args], env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"ctxkit {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return took


def same_outputs(one: Path, other: Path) -> bool:
    names = sorted(n for n in os.listdir(one) if not n.endswith((".ctx.db", ".sqlite")))
    if names != sorted(n for n in os.listdir(other) if not n.endswith((".ctx.db", ".sqlite"))):
        return False
    return all((one / n).read_bytes() == (other / n).read_bytes() for n in names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=4, help="seeds of each scenario (17 scenarios)")
    ap.add_argument("--tokens", type=int, default=8000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ctxrc-"))
    cluster = RayCluster(work, workers=1, num_cpus=1)
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        data = work / "data"
        data.mkdir()
        whole = work / "all.jsonl"
        run(env, "simulate", "-s", "all", "--count", str(args.count), "--tokens", str(args.tokens),
            "--format", "openai", "-o", str(whole))
        lines = [x for x in whole.read_bytes().splitlines() if x.strip()]
        for part in range(4):
            (data / f"part-{part}.jsonl").write_bytes(b"\n".join(lines[part::4]) + b"\n")
        one = work / "one.jsonl"
        one.write_bytes(lines[0] + b"\n")
        size_mb = sum(f.stat().st_size for f in data.iterdir()) / 2**20
        shard_mb = f"{max(size_mb / 16, 0.05):.3f}"  # 16 shards or so: every node gets several
        limit = str(args.tokens // 2)
        started = time.perf_counter()
        cluster.start()
        startup = time.perf_counter() - started
        runs = {
            "compact --jobs 1": (env, ["compact", str(data), "--limit", limit, "--jobs", "1", "-o"]),
            "compact --jobs 2": (env, ["compact", str(data), "--limit", limit, "--jobs", "2", "-o"]),
            "compact on the cluster": (cluster.env, [
                "compact", str(data), "--limit", limit, "--engine", "ray", "--ray-address",
                cluster.address, "--shard-mb", shard_mb, "-o"]),
            "count, local engine": (env, ["count", str(data), "--format", "jsonl"]),
            "count on the cluster": (cluster.env, [
                "count", str(data), "--format", "jsonl", "--engine", "ray", "--ray-address",
                cluster.address, "--shard-mb", shard_mb]),
            # the fixed cost of a command: one conversation
            "count one conversation, local": (env, ["count", str(one)]),
            "count one conversation, cluster": (cluster.env, [
                "count", str(one), "--engine", "ray", "--ray-address", cluster.address]),
        }
        times: dict[str, list[float]] = {name: [] for name in runs}
        names = list(runs)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                renv, argv = runs[name]
                if argv[-1] == "-o":
                    out = work / f"out-{name.replace(' ', '_')}"
                    shutil.rmtree(out, ignore_errors=True)
                    argv = [*argv, f"{out}/"]
                times[name].append(run(renv, *argv))
        # the cluster wrote what one machine writes (its shards, concatenated, are the files)
        local_out, ray_out = work / "out-compact_--jobs_1", work / "out-compact_on_the_cluster"
        joined = work / "joined"
        joined.mkdir()
        for f in sorted(local_out.glob("*.jsonl")):
            stem = f.stem
            parts = sorted(p for p in ray_out.glob("*.jsonl") if stem in p.name)
            (joined / f.name).write_bytes(b"".join(p.read_bytes() for p in parts))
        same = same_outputs(local_out, joined)
        load = os.getloadavg()
    finally:
        cluster.stop()
    conversations = len(lines)
    print(f"{conversations} conversations of {args.tokens:,} tokens ({size_mb:.1f} MB, 4 files), "
          f"`--limit {limit}`; cluster: 2 nodes of 1 CPU on 127.0.0.1 (started in {startup:.1f} s, "
          f"not counted), `--shard-mb {shard_mb}`; {args.rounds} rounds; load average after: "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; cluster output = local output: {same}\n")
    print("| run | wall s, each round | median | conversations/s | per node or worker |")
    print("|---|---|---:|---:|---:|")
    rate = {}
    for name in names:
        med = statistics.median(times[name])
        rate[name] = conversations / med
        per = 2 if ("cluster" in name or "--jobs 2" in name) else 1
        print(f"| {name} | {', '.join(f'{t:.1f}' for t in times[name])} | {med:.1f} | "
              f"{rate[name]:.2f} | {rate[name] / per:.2f} |")
    c = rate["compact on the cluster"]
    med = {name: statistics.median(t) for name, t in times.items()}
    fixed = med["count one conversation, cluster"] - med["count one conversation, local"]
    past = conversations / max(med["compact on the cluster"] - fixed, 1e-9)
    print(f"\ncompact: the cluster per node / `--jobs 1`: {c / 2 / rate['compact --jobs 1']:.2f}; "
          f"the cluster / `--jobs 2`: {c / rate['compact --jobs 2']:.2f}; "
          f"count: the cluster / the local engine: "
          f"{rate['count on the cluster'] / rate['count, local engine']:.2f}")
    print(f"a command on the cluster costs {fixed:.1f} s more than on one machine (one conversation "
          f"counted; Ray starts a worker a node for each new driver); past it, the cluster per node "
          f"/ `--jobs 1`: {past / 2 / rate['compact --jobs 1']:.2f}, the cluster / `--jobs 2`: "
          f"{past / rate['compact --jobs 2']:.2f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
