"""Counting throughput against raw tiktoken on the real transcripts, both bundled encodings, with
where ctxkit's time goes.

Reads every transcript under ../shared/realdata once, then, per encoding, times interleaved
runs (fresh count cache before each) of:

- tiktoken, its faster way: one `encode_ordinary` per text, and `encode_ordinary_batch` per
  transcript on every core (the figure is the faster of the two);
- ctxkit: `count_transcript(t, tok)` for every transcript (what `ctxkit count` does);
- the fast counter alone on every text, repeats included (no cache, no accounting): how much of
  ctxkit's lead is the counter and how much is counting each distinct text once.

Checks that ctxkit's totals, less its per-message constants, are tiktoken's token count, and
prints best-of-N wall and CPU seconds and the ratios (issue 23's target: 5x, exact).

Usage:
    .venv/bin/python scripts/bench_count.py [--repeat 7] [--realdata ../shared/realdata]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ctxkit.bench.harness import raw_encoding, real_transcripts
from ctxkit.tokens import (
    CountOptions,
    clear_caches,
    count_transcript,
    get_tokenizer,
    speaker_name,
    unit_texts,
)

ROOT = Path(__file__).resolve().parents[1]


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall s, CPU s of this process) of one call, the count cache cleared first."""
    clear_caches()
    cpu, start = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realdata", type=Path, default=ROOT.parent / "shared" / "realdata")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    if not args.realdata.is_dir():
        print(f"no real transcripts at {args.realdata}", file=sys.stderr)
        return 1
    transcripts = real_transcripts(args.realdata)
    batches = [[x for x in unit_texts(t.units)[0] if x] for t in transcripts]
    texts = [x for b in batches for x in b]
    distinct = set(texts)
    print(f"{len(transcripts)} transcripts, {len(texts):,} texts, {sum(map(len, texts)):,} chars "
          f"({sum(map(len, distinct)):,} in {len(distinct):,} distinct texts)")
    opts = CountOptions()
    threads = os.cpu_count() or 1
    for name in ("cl100k_base", "o200k_base"):
        enc = raw_encoding(name)
        tok = get_tokenizer(name)
        raw_tokens = sum(len(enc.encode_ordinary(x)) for x in texts)
        counted = 0
        for t in transcripts:
            result = count_transcript(t, tok, opts)
            counted += sum(uc.total - uc.images for uc in result.units)
            counted -= opts.tokens_per_message * len(t.units)
            counted -= opts.tokens_per_name * sum(1 for u in t.units if speaker_name(u))
        counter = getattr(tok, "counter", None)  # the fast counter (loaded by the counts above)
        sides: dict[str, Callable[[], object]] = {
            "tiktoken loop": lambda enc=enc: [enc.encode_ordinary(x) for x in texts],
            "tiktoken batch": lambda enc=enc: [
                enc.encode_ordinary_batch(b, num_threads=threads) for b in batches
            ],
            "ctxkit": lambda tok=tok: [count_transcript(t, tok, opts) for t in transcripts],
        }
        if counter is not None:
            sides[f"{tok.counter_name} alone"] = lambda counter=counter: counter(texts)
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
        for _ in range(args.repeat):  # interleaved: every side sees the same load
            for key, fn in sides.items():
                runs[key].append(timed(fn))
        wall = {k: min(w for w, _ in v) for k, v in runs.items()}
        cpu = {k: min(c for _, c in v) for k, v in runs.items()}
        raw_wall = min(wall["tiktoken loop"], wall["tiktoken batch"])
        raw_cpu = min(cpu["tiktoken loop"], cpu["tiktoken batch"])
        exact = "exact" if counted == raw_tokens else f"MISMATCH {counted} vs {raw_tokens}"
        print(f"\n{name}: {raw_tokens:,} tokens, counts {exact}; best of {args.repeat}, "
              f"load average {os.getloadavg()[0]:.1f}")
        for key in sides:
            print(f"  {key:16s} wall {wall[key]:.3f} s  CPU {cpu[key]:.3f} s  "
                  f"x tiktoken: wall {raw_wall / wall[key]:5.2f}  CPU {raw_cpu / cpu[key]:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
