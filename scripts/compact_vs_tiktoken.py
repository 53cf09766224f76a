"""A default compaction against one raw tiktoken pass, per real transcript, in one process.

    .venv/bin/python scripts/compact_vs_tiktoken.py [--share 3] [--checkout OLD_TREE] [FILES...]

Each transcript of ../shared/realdata of at least 3,000 tokens (datasets of many chats aside) is
compacted to 1/share of its own tokens with default settings and an in-memory archive (best of
2, caches cleared first), and its texts are encoded once by tiktoken (`encode_ordinary`, best of
3). The ratio of the two is printed per transcript, then the median. `--checkout DIR` runs the
code of another work tree of ctxkit (`git worktree add /tmp/old <commit>`) instead of this one:
two runs, one per tree, compare code before and after a change on the same transcripts.

`--processes` times whole processes instead, as issue 23 measured (and `ctxkit bench --suite
scale` from 10k tokens): `ctxkit compact FILE --limit L -o OUT` against one tiktoken pass over
the same file (`bench.suites.scale._process_pair`), per real log of one transcript; L is the
log's unlogged region (what its recorded usage says it never shows) plus 1/share of what it holds.
A log's file holds more than its messages (ids, timestamps, usage, tool results twice in some
formats), all of which the tiktoken pass encodes: the ratio is per file as users hand it over.
"""

from __future__ import annotations

import argparse
import gc
import glob
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--share", type=int, default=3, help="budget: 1/share of each transcript")
    ap.add_argument("--checkout", help="run the ctxkit of this work tree instead")
    ap.add_argument("--processes", action="store_true", help="whole processes over the files")
    args = ap.parse_args()
    if args.checkout:
        # the editable install's finder would import this tree's package: leave it out
        sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
        sys.path.insert(0, args.checkout)

    from ctxkit.archive.store import Archive
    from ctxkit.bench.harness import raw_encoding
    from ctxkit.compaction import CompactSettings, compact
    from ctxkit.errors import CtxkitError
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
    if args.processes:
        processes(files, args.share)
        return
    ratios: list[float] = []
    for path, found in readable(files, at_most=3):
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


def readable(files: list[str], at_most: int) -> Iterator[tuple[str, list[Any]]]:
    """(path, its transcripts) of each file ctxkit reads that holds 1 to `at_most` of them."""
    from ctxkit.errors import CtxkitError
    from ctxkit.formats import read_path

    for path in files:
        try:
            found = list(read_path(path))
        except CtxkitError:
            continue
        if 1 <= len(found) <= at_most:
            yield path, found


def processes(files: list[str], share: int) -> None:
    """`--processes`: per log of one transcript and at least 3,000 tokens, the whole-process
    ratio, then the median."""
    import tempfile

    from ctxkit.bench.suites.scale import _process_pair
    from ctxkit.counting import measure
    from ctxkit.tokens import get_tokenizer

    ratios: list[float] = []
    for path, found in readable(files, at_most=1):
        m = measure(found[0], get_tokenizer())
        held = m.total - m.unlogged
        if held < 3000:
            continue
        limit = m.unlogged + held // share
        with tempfile.TemporaryDirectory(prefix="ctxkit-vs-tiktoken-") as work:
            try:
                got = _process_pair(path, limit, work)
            except RuntimeError as exc:
                print(f"skip {Path(path).name[:50]}: {str(exc).splitlines()[0][-100:]}", file=sys.stderr)
                continue
        ratio = got["process_over_tiktoken_cpu"]
        ratios.append(ratio)
        print(
            f"{Path(path).parent.name[:14]:14} {Path(path).name[:40]:40} {held:>8} tokens "
            f"{got['file_bytes']:>10,} bytes  {got['process_compact_cpu_s']:.3f} s / "
            f"{got['process_tiktoken_cpu_s']:.3f} s = {ratio:.2f}x",
            flush=True,
        )
    if ratios:
        print(f"median {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x over {len(ratios)} logs")


if __name__ == "__main__":
    main()
