"""The code points quicktok counts unlike tiktoken, written to ctxkit/data/quicktok_gaps_<enc>.txt.

    PYTHONPATH=$PWD .venv/bin/python scripts/quicktok_gaps.py [cl100k_base ...]

quicktok's Unicode tables are older than tiktoken's: a character assigned since (CJK Extension H,
say) is a letter to tiktoken and nothing to quicktok, so a text holding one is split, and
counted, differently. Each code point is counted by both in a few contexts (after and between
letters, digits, spaces, an apostrophe, itself; "<c>:A" alone found the same sets for both
encodings); those that differ in any are written as hex ranges, and `QuicktokTokenizer` hands a
text holding any of them to tiktoken. Default: both bundled encodings.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ctxkit.tokens.loaders import _quicktok, _tiktoken_encoding

OUT = Path(__file__).resolve().parents[1] / "ctxkit" / "data"

# where "c" stands for the code point probed
PROBES = ("c:A", "acb", "Aca", " c", "cc", "1c1", "ca", "'c", "\nc\n", "c's")


def gaps(name: str) -> list[tuple[int, int]]:
    counter, enc = _quicktok(name), _tiktoken_encoding(name)
    ranges: list[tuple[int, int]] = []
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        probes = (p.replace("c", c) for p in PROBES)
        if any(counter.count(x) != len(enc.encode_ordinary(x)) for x in probes):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return ranges


def main(names: list[str]) -> None:
    for name in names or ["cl100k_base", "o200k_base"]:
        found = gaps(name)
        path = OUT / f"quicktok_gaps_{name}.txt"
        path.write_text("".join(f"{a:x}-{b:x}\n" for a, b in found))
        print(f"{path.name}: {len(found)} ranges, {sum(b - a + 1 for a, b in found)} code points")


if __name__ == "__main__":
    main(sys.argv[1:])
