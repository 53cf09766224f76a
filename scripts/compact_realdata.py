"""Compact every real transcript in ../shared/realdata and print tokens before/after and time.

    .venv/bin/python scripts/compact_realdata.py [--fraction 0.33] [--embedder lexical]

The limit for each transcript is `fraction` of its own size (at least 3,000 tokens), the default
chain and recovery, the target the guard's warn threshold. Each run is checked: under the target,
invariants held, and the archive restores the original records.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

from ctxkit.archive.store import Archive
from ctxkit.compaction import CompactSettings, compact
from ctxkit.config.file import Config
from ctxkit.config.settings import build_embedder
from ctxkit.embedders import EMBEDDERS
from ctxkit.formats import read_path
from ctxkit.tokens import count_transcript, get_tokenizer

FOLDERS = (
    "claude-code",
    "codex",
    "mini-swe-agent",
    "openai-chat",
    "anthropic-messages",
    "sharegpt",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--realdata",
        default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "realdata"),
    )
    parser.add_argument("--fraction", type=float, default=0.33)
    parser.add_argument("--embedder", default="lexical", choices=sorted(EMBEDDERS))
    args = parser.parse_args()
    tok = get_tokenizer("cl100k_base")
    embedder = build_embedder(Config(), args.embedder)
    rows = []
    for folder in FOLDERS:
        for path in sorted(glob.glob(os.path.join(args.realdata, folder, "*"))):
            for t in read_path(path):
                before = count_transcript(t, tok).total
                limit = max(int(before * args.fraction), 3000)
                settings = CompactSettings(limit=limit, tokenizer=tok, embedder=embedder)
                if before <= settings.goal:
                    continue
                archive = Archive(":memory:")
                t0 = time.perf_counter()
                r = compact(t, settings, archive=archive)
                seconds = time.perf_counter() - t0
                restored = archive.restore(r.transcript)
                lossless = [u.content for u in restored.units] == [u.content for u in t.units]
                rows.append(
                    (
                        folder,
                        os.path.basename(path)[:44],
                        t.id[-18:],
                        before,
                        limit,
                        r.tokens_after,
                        r.fits,
                        r.invariants["ok"],
                        lossless,
                        r.recovery or "-",
                        r.coherence,
                        seconds,
                        ",".join(r.strategies_applied),
                    )
                )
    print(
        f"{'format':<18} {'file':<44} {'before':>8} {'limit':>7} {'after':>7} {'fits':>5} {'inv':>4} {'lossless':>8} {'recovery':>11} {'coher':>6} {'time s':>7}  strategies"
    )
    for (
        folder,
        name,
        _tid,
        before,
        limit,
        after,
        fits,
        inv,
        lossless,
        rec,
        coh,
        secs,
        strategies,
    ) in rows:
        print(
            f"{folder:<18} {name:<44} {before:>8,} {limit:>7,} {after:>7,} {str(fits):>5} {str(inv):>4} {str(lossless):>8} {rec:>11} {coh:>6.3f} {secs:>7.3f}  {strategies}"
        )
    total = sum(r[11] for r in rows)
    print(
        f"{len(rows)} transcripts; all fit: {all(r[6] for r in rows)}; invariants: {all(r[7] for r in rows)}; "
        f"lossless: {all(r[8] for r in rows)}; recoveries: {sum(r[9] != '-' for r in rows)}; total time {total:.2f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
