"""A default compaction against one raw tiktoken pass, per real transcript, in one process.

    .venv/bin/python scripts/compact_vs_tiktoken.py [--share 3] [--checkout OLD_TREE] [FILES...]

Each transcript of ../shared/realdata of at least 3,000 tokens (datasets of many chats aside) is
compacted to 1/share of its own tokens with default settings and an in-memory archive (best of
2, caches cleared first), and its texts are encoded once by tiktoken (`encode_ordinary`, best of
3). The ratio of the two is printed per transcript, then the median. `--checkout DIR` runs the
code of another work tree of ctxkit (`git worktree add /tmp/old <commit>`) instead of this one:
two runs, one per tree, compare code before and after a change on the same transcripts.
"""

from __future__ import annotations

import argparse
import gc
import glob
import statistics
import sys
import time
from pathlib import Path

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--share", type=int, default=3, help="budget: 1/share of each transcript")
    ap.add_argument("--checkout", help="run the ctxkit of this work tree instead")
    args = ap.parse_args()
    if args.checkout:
        # the editable install's finder would import this tree's package: leave it out
        sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
        sys.path.insert(0, args.checkout)

    from ctxkit.archive.store import Archive
    from ctxkit.bench.harness import raw_encoding
    from ctxkit.compaction import CompactSettings, compact
    from ctxkit.errors import CtxkitError
    from ctxkit.formats import read_path
    from ctxkit.tokens import clear_caches, count_transcript, get_tokenizer

    def settings(limit: int) -> CompactSettings:
        # the budget is on what the log holds (a tree from before the unlogged region was a
        # fixed region knows no use_usage)
        try:
            return CompactSettings(limit=limit, use_usage=False)
        except TypeError:
            return CompactSettings(limit=limit)

    enc = raw_encoding()
    files = args.files or sorted(
        f for f in glob.glob(str(REALDATA / "*" / "*")) if not f.endswith(("README.md", "SOURCES.json"))
    )
    ratios: list[float] = []
    for path in files:
        try:
            found = list(read_path(path))
        except CtxkitError:
            continue
        if len(found) > 3:
            continue
        for t in found:
            n = count_transcript(t, get_tokenizer()).total
            if n < 3000:
                continue
            texts = [x for u in t.units for x in (u.content, u.reasoning, *(c.arguments for c in u.tool_calls)) if x]
            raw = []
            for _ in range(3):
                start = time.perf_counter()
                for x in texts:
                    enc.encode_ordinary(x)
                raw.append(time.perf_counter() - start)
            runs = []
            try:
                for _ in range(2):
                    clear_caches()
                    gc.collect()
                    start = time.perf_counter()
                    with Archive(":memory:") as archive:
                        compact(t, settings(n // args.share), archive=archive)
                    runs.append(time.perf_counter() - start)
            except CtxkitError as exc:  # below the system prompt: no compaction to time
                print(f"skip {Path(path).name[:50]}: {str(exc).splitlines()[0][:80]}", file=sys.stderr)
                continue
            ratio = min(runs) / min(raw)
            ratios.append(ratio)
            print(f"{Path(path).name[:50]:50} {n:>8} {ratio:6.1f}")
    if ratios:
        print(f"median ratio {statistics.median(ratios):.1f} over {len(ratios)} transcripts")


if __name__ == "__main__":
    main()
