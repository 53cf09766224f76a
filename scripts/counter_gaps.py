"""The code points ctxkit's fast counters count unlike tiktoken, written to
ctxkit/data/<counter>_gaps_<enc>.txt: one file per fast counter (toktok, quicktok: those
installed) and ctxkit/data/bpe_gaps_<enc>.txt for the Python BPE of `ctxkit.tokens.bpe`.

    PYTHONPATH=$PWD .venv/bin/python scripts/counter_gaps.py [cl100k_base ...]

toktok's and quicktok's Unicode tables are older than tiktoken's (toktok is a port of quicktok:
their gaps are the same): a character assigned since (CJK Extension H, say) is a letter to
tiktoken and nothing to them, so a text holding one is split, and counted, differently. The
`regex` module that runs tiktoken's split pattern for `tokens.bpe` has newer tables than
tiktoken's Rust regex, so it differs the other way. Each code point is counted by each counter
and by tiktoken in a few contexts (after and between letters, digits, spaces, an apostrophe,
itself; "<c>:A" alone found the same quicktok sets for both encodings); those that differ in any
are written as hex ranges, and `FastTokenizer` hands a text holding any of them to the counter
that gets it right (tiktoken after the fast counter, the fast counter after the Python BPE).
Default: both bundled encodings. Takes a few minutes.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ctxkit.tokens import bpe
from ctxkit.tokens.encodings import tiktoken_encoding
from ctxkit.tokens.fast import FAST_COUNTERS

OUT = Path(__file__).resolve().parents[1] / "ctxkit" / "data"

# where "c" stands for the code point probed
PROBES = ("c:A", "acb", "Aca", " c", "cc", "1c1", "ca", "'c", "\nc\n", "c's", "c  a", "a c\n")

CountMany = Callable[[list[str]], list[int]]


def gaps(count: CountMany, reference: CountMany) -> list[tuple[int, int]]:
    """Ranges of code points some probe of which `count` counts unlike `reference`."""
    points = [cp for cp in range(0, 0x110000) if not 0xD800 <= cp < 0xE000]
    differ: set[int] = set()
    for probe in PROBES:
        texts = [probe.replace("c", chr(cp)) for cp in points]
        for cp, n, want in zip(points, count(texts), reference(texts), strict=True):
            if n != want:
                differ.add(cp)
    ranges: list[tuple[int, int]] = []
    for cp in sorted(differ):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


def _write(kind: str, name: str, found: list[tuple[int, int]]) -> None:
    path = OUT / f"{kind}_gaps_{name}.txt"
    path.write_text("".join(f"{a:x}-{b:x}\n" for a, b in found))
    print(f"{path.name}: {len(found)} ranges, {sum(b - a + 1 for a, b in found)} code points")


def main(names: list[str]) -> None:
    for name in names or ["cl100k_base", "o200k_base"]:
        enc = tiktoken_encoding(name)
        reference = _count_by(lambda text, enc=enc: len(enc.encode_ordinary(text)))
        for counter, load in FAST_COUNTERS.items():
            if importlib.util.find_spec(counter) is not None:
                _write(counter, name, gaps(load(name), reference))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}.ranks"
            bpe.write_table(path, enc._mergeable_ranks, enc._pat_str)
            small = bpe.BPECounter(bpe.RankTable(path))
            _write("bpe", name, gaps(_count_by(small.count), reference))


def _count_by(count: Callable[[str], int]) -> CountMany:
    return lambda texts: [count(t) for t in texts]


if __name__ == "__main__":
    main(sys.argv[1:])
