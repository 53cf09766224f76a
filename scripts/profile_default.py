"""Where a default `ctxkit compact` spends its time: imports by package, then cProfile phases.

    .venv/bin/python scripts/profile_default.py [--runs 7] [--input sample_transcripts/tau-bench-airline.json]
                                                [--limit 4000] [-- extra compact flags]

Part 1 runs `python -X importtime -m ctxkit compact INPUT --limit N` `--runs` times (new process
each, bytecode compiled first, as after `pip install`) and prints the median self time of the
imports, summed by top-level package. Part 2 profiles one in-process run with cProfile and
prints the cumulative time of the phases that matter (tokenizer load, reading, the chain, each
strategy, coherence, writing). docs/performance.md holds the figures.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (label, function name as pstats prints it: "file:line(name)" ends with "(name)")
PHASES = [
    ("tokenizer load (tiktoken cl100k_base)", "tokens/loaders.py", "_load_tiktoken"),
    ("read the transcript", "formats/__init__.py", "read_path"),
    ("compaction engine (all of compact())", "compaction/chain.py", "compact"),
    ("  summarize_old", "strategies/summarize_old.py", "summarize_old"),
    ("  mask_observations", "strategies/mask_observations.py", "mask_observations"),
    ("  content_type_chunking", "strategies/content_type_chunking.py", "content_type_chunking"),
    ("  prioritize_recent", "strategies/prioritize_recent.py", "prioritize_recent"),
    ("  discard_low_rel", "strategies/discard_low_rel.py", "discard_low_rel"),
    ("  offload", "strategies/offload.py", "offload"),
    ("  coherence (gate + final figure)", "compaction/chain.py", "coherence"),
    ("    static table load (numpy + .npz)", "embedders/static.py", "load_table"),
    ("  counting tokens", "tokens/accounting.py", "count_transcript"),
    ("archive writes (SQLite)", "archive/store.py", "put_transcript"),
    ("write the output", "atomic.py", "write_output"),
]


def import_times(cmd: list[str], runs: int) -> dict[str, float]:
    """Median self import time (ms) per top-level package over `runs` processes."""
    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", *cmd], capture_output=True, text=True
        ).stderr
        per: dict[str, float] = defaultdict(float)
        for line in err.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            self_us, _cumulative, name = (x.strip() for x in line[12:].split("|"))
            top = name.split(".")[0]
            per[top] += float(self_us) / 1000
        for top in set(per) | set(samples):
            samples[top].append(per.get(top, 0.0))
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--input", default=str(ROOT / "sample_transcripts" / "tau-bench-airline.json"))
    ap.add_argument("--limit", type=int, default=4000)
    ap.add_argument("extra", nargs="*", help="more compact flags, after --")
    args = ap.parse_args()
    import ctxkit

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(ctxkit.__file__).parent)])
    work = Path(tempfile.mkdtemp(prefix="ctxkit-profile-"))
    os.environ["CTXKIT_CACHE_DIR"] = str(work / "cache")
    flags = ["compact", args.input, "--limit", str(args.limit), "-o", str(work / "out.json"), *args.extra]
    times = import_times(["-m", "ctxkit", *flags], args.runs)
    total = sum(times.values())
    print(f"imports, median of {args.runs} processes (self time summed by package): {total:.0f} ms")
    for name, ms in sorted(times.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {name:28} {ms:7.1f} ms")

    from ctxkit.cli import cli

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        cli([*flags[:-1], str(work / "out2.json")], prog_name="ctxkit")
    except SystemExit:
        pass
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    total_s = max(v[3] for v in stats.stats.values())  # type: ignore[attr-defined]
    print(f"\ncProfile of one in-process run (imports above excluded when warm): {total_s * 1000:.0f} ms")
    for label, file, func in PHASES:
        cum = sum(
            v[3]
            for (f, _, name), v in stats.stats.items()  # type: ignore[attr-defined]
            if name == func and f.endswith(file)
        )
        if cum:
            print(f"  {label:42} {cum * 1000:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
