"""The code points ctxkit's fast counters count unlike tiktoken, written to
ctxkit/data/quicktok_gaps_<enc>.txt (quicktok) and ctxkit/data/bpe_gaps_<enc>.txt (the Python BPE
of `ctxkit.tokens.bpe`).

    PYTHONPATH=$PWD .venv/bin/python scripts/quicktok_gaps.py [cl100k_base ...]

quicktok's Unicode tables are older than tiktoken's: a character assigned since (CJK Extension H,
say) is a letter to tiktoken and nothing to quicktok, so a text holding one is split, and
counted, differently. The `regex` module that runs tiktoken's split pattern for `tokens.bpe` has
newer tables than tiktoken's Rust regex, so it differs the other way. Each code point is counted
by each counter and by tiktoken in a few contexts (after and between letters, digits, spaces, an
apostrophe, itself; "<c>:A" alone found the same quicktok sets for both encodings); those that
differ in any are written as hex ranges, and `QuicktokTokenizer` hands a text holding any of them
to the counter that gets it right (tiktoken after quicktok, quicktok after the Python BPE).
Default: both bundled encodings. Takes a few minutes.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxkit.tokens import bpe
from ctxkit.tokens.loaders import _quicktok, _tiktoken_encoding

OUT = Path(__file__).resolve().parents[1] / "ctxkit" / "data"

# where "c" stands for the code point probed
PROBES = ("c:A", "acb", "Aca", " c", "cc", "1c1", "ca", "'c", "\nc\n", "c's", "c  a", "a c\n")


def gaps(count: Callable[[str], int], reference: Callable[[str], int]) -> list[tuple[int, int]]:
    """Ranges of code points some probe of which `count` counts unlike `reference`."""
    ranges: list[tuple[int, int]] = []
    for cp in range(0, 0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        probes = (p.replace("c", c) for p in PROBES)
        if any(count(x) != reference(x) for x in probes):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return ranges


def _counter_of(enc: Any) -> Callable[[str], int]:
    return lambda text: len(enc.encode_ordinary(text))


def _write(kind: str, name: str, found: list[tuple[int, int]]) -> None:
    path = OUT / f"{kind}_gaps_{name}.txt"
    path.write_text("".join(f"{a:x}-{b:x}\n" for a, b in found))
    print(f"{path.name}: {len(found)} ranges, {sum(b - a + 1 for a, b in found)} code points")


def main(names: list[str]) -> None:
    for name in names or ["cl100k_base", "o200k_base"]:
        enc = _tiktoken_encoding(name)
        reference = _counter_of(enc)
        _write("quicktok", name, gaps(_quicktok(name).count, reference))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}.ranks"
            bpe.write_table(path, enc._mergeable_ranks, enc._pat_str)
            _write("bpe", name, gaps(bpe.BPECounter(bpe.RankTable(path)).count, reference))


if __name__ == "__main__":
    main(sys.argv[1:])
