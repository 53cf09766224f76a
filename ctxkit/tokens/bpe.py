"""An exact BPE counter that is ready in milliseconds, for the first texts of a process.

quicktok counts fast but takes 0.2 s (cl100k_base) to 0.5 s (o200k_base) to load, and tiktoken
more: most of `ctxkit count` on a small file, or of a guard hook's check. This counts the way
tiktoken does (its split pattern, then its byte-pair merge, `_byte_pair_merge` in tiktoken's
src/lib.rs) in Python, over a rank table read from a file by memory map: a lookup costs one
crc32 and a probe, and nothing is built at load. It is slower per text than quicktok, so a
tokenizer uses it only until its texts add up to enough to pay for quicktok's load
(`fast.FastTokenizer`).

The table is written once per encoding from tiktoken's own ranks, into the user cache
(`<cache>/bpe/<encoding>.ranks`, 2 MB for cl100k_base, 4 MB for o200k_base), and checked by
its header; `scripts/bpe_gaps.py` lists the characters the split pattern treats unlike
tiktoken's Rust regex (none are known), and tests compare counts with tiktoken's on every real
text.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

MAGIC = b"ctxkit-bpe-ranks\x01"
_HEADER = struct.Struct("<17sIII")  # magic, tokens, slots, pattern bytes
_EMPTY = 0  # a free slot; a used one holds rank + 1


def table_path(name: str) -> Path:
    """Where the rank table of encoding `name` is kept: `bpe/` in the user cache
    ($CTXKIT_CACHE_DIR, else $XDG_CACHE_HOME/ctxkit, else ~/.cache/ctxkit, the rule of
    `embedders.cache.cache_dir`, whose package a count does not import)."""
    base = os.environ.get("CTXKIT_CACHE_DIR")
    if base:
        root = Path(base).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = Path(base).expanduser() / "ctxkit"
    return root / "bpe" / f"{name}.ranks"


class RankTable:
    """tiktoken's mergeable ranks of one encoding, looked up in a memory-mapped file."""

    def __init__(self, path: Path):
        with open(path, "rb") as fh:
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        size = len(self._map)
        if size < _HEADER.size:
            raise ValueError(f"{path}: not a ctxkit rank table")
        magic, n, slots, pattern_len = _HEADER.unpack_from(self._map, 0)
        if magic != MAGIC or slots & (slots - 1):
            raise ValueError(f"{path}: not a ctxkit rank table")
        at = _HEADER.size
        self.pattern = self._map[at : at + pattern_len].decode()
        at += pattern_len
        at += -at % 4
        if size < at + 4 * (n + 1 + slots):
            raise ValueError(f"{path}: truncated rank table")
        view = memoryview(self._map)
        self._offsets = view[at : at + 4 * (n + 1)].cast("I")
        at += 4 * (n + 1)
        self._slots = view[at : at + 4 * slots].cast("I")
        at += 4 * slots
        self._blob = self._map[at:]
        if len(self._blob) != self._offsets[n]:
            raise ValueError(f"{path}: truncated rank table")
        self._mask = slots - 1

    def rank(self, token: bytes) -> int | None:
        """The rank of `token`, or None when it is no token."""
        slots, offsets, blob = self._slots, self._offsets, self._blob
        at = zlib.crc32(token) & self._mask
        while True:
            held = slots[at]
            if held == _EMPTY:
                return None
            r = held - 1
            if blob[offsets[r] : offsets[r + 1]] == token:
                return r
            at = (at + 1) & self._mask


def write_table(path: Path, ranks: dict[bytes, int], pattern: str) -> None:
    """Write `ranks` (token bytes -> rank 0..n-1, every rank once) and the split pattern to
    `path`, atomically."""
    import tempfile

    n = len(ranks)
    by_rank: list[bytes] = [b""] * n
    for token, r in ranks.items():
        by_rank[r] = token
    slots = 1 << max(4, (2 * n - 1).bit_length())  # at most half full: short probe runs
    table = [_EMPTY] * slots
    mask = slots - 1
    for r, token in enumerate(by_rank):
        at = zlib.crc32(token) & mask
        while table[at] != _EMPTY:
            at = (at + 1) & mask
        table[at] = r + 1
    offsets = [0]
    for token in by_rank:
        offsets.append(offsets[-1] + len(token))
    pattern_bytes = pattern.encode()
    head = _HEADER.pack(MAGIC, n, slots, len(pattern_bytes)) + pattern_bytes
    head += b"\0" * (-len(head) % 4)
    body = struct.pack(f"<{n + 1}I", *offsets) + struct.pack(f"<{slots}I", *table)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(head + body + b"".join(by_rank))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


class BPECounter:
    """Counts tokens as tiktoken's `encode_ordinary` would, from a `RankTable`.

    ASCII text is split by the stdlib's `re` with the pattern narrowed to ASCII
    (`ascii_pattern`), any other by the `regex` module with tiktoken's own pattern: a count of
    ASCII texts never imports `regex` (7 ms of a start-up that counts a small file)."""

    def __init__(self, table: RankTable):
        self.table = table
        self._ascii_split = _compiled_ascii(table.pattern)
        self._unicode_split: Any = None
        self._pieces: dict[str, int] = {}  # tokens per split piece: words recur

    def _split(self, text: str) -> list[str]:
        if self._ascii_split is not None and text.isascii():
            return self._ascii_split(text)  # type: ignore[no-any-return]
        if self._unicode_split is None:
            import regex

            self._unicode_split = regex.compile(self.table.pattern).findall
        return self._unicode_split(text)  # type: ignore[no-any-return]

    def count(self, text: str) -> int:
        """Tokens in `text`."""
        pieces = self._pieces
        total = 0
        for piece in self._split(text):
            n = pieces.get(piece)
            if n is None:
                n = pieces[piece] = self._count_piece(piece.encode("utf-8"))
            total += n
        return total

    def _count_piece(self, piece: bytes) -> int:
        rank = self.table.rank
        if len(piece) == 1 or rank(piece) is not None:
            return 1
        # tiktoken's merge: `parts` are start offsets with the rank of the pair that starts
        # there; the lowest rank merges first (the leftmost on ties) until none is a token.
        big = sys.maxsize
        starts = list(range(len(piece) + 1))
        ranks = [_or(rank(piece[i : i + 2]), big) for i in range(len(piece) - 1)] + [big, big]
        while True:
            low = min(ranks[:-1])
            if low == big:
                break
            i = ranks.index(low)
            del starts[i + 1]
            del ranks[i + 1]
            ranks[i] = _pair_rank(rank, piece, starts, i, big)
            if i > 0:
                ranks[i - 1] = _pair_rank(rank, piece, starts, i - 1, big)
        return len(starts) - 1


# What tiktoken's classes hold of ASCII: Unicode's White_Space (not \x1c-\x1f, which Python's
# `re` counts as space), letters by case, digits; titlecase, modifier and other letters and marks
# have no ASCII member.
_ASCII_SPACE = "\\t\\n\\x0b\\x0c\\r "
_ASCII_PROPERTIES = {
    "L": "A-Za-z",
    "Lu": "A-Z",
    "Ll": "a-z",
    "Lt": "",
    "Lm": "",
    "Lo": "",
    "M": "",
    "N": "0-9",
}
_PROPERTY = re.compile(r"\\p\{(\w+)\}")


def ascii_pattern(pattern: str) -> str | None:
    """tiktoken's split `pattern` as the stdlib's `re` reads it on ASCII text (the same pieces
    there): `\\p{..}` and `\\s` as their ASCII members, `$` as the end of the text only (Rust's
    `$`; Python's also matches before a final newline). None for a construct it does not know."""
    out: list[str] = []
    in_class = False
    at = members_at = 0
    while at < len(pattern):
        c = pattern[at]
        if c == "\\":
            nxt = pattern[at + 1 : at + 2]
            if nxt == "p":
                found = _PROPERTY.match(pattern, at)
                members = _ASCII_PROPERTIES.get(found.group(1)) if found else None
                if found is None or members is None or not (in_class or members):
                    return None
                out.append(members if in_class else f"[{members}]")
                at = found.end()
                continue
            if nxt == "s":
                out.append(_ASCII_SPACE if in_class else f"[{_ASCII_SPACE}]")
            elif nxt == "S" and not in_class:
                out.append(f"[^{_ASCII_SPACE}]")
            elif nxt in ("r", "n", "t"):
                out.append(c + nxt)
            else:
                return None
            at += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            opening = "[^" if pattern.startswith("[^", at) else "["
            out.append(opening)
            members_at = len(out)
            at += len(opening)
            continue
        if c == "]" and in_class:
            if not "".join(out[members_at:]):  # no member has an ASCII character
                return None
            in_class = False
        out.append("\\Z" if c == "$" and not in_class else c)
        at += 1
    return None if in_class else "".join(out)


def _compiled_ascii(pattern: str) -> Any:
    """`findall` of `ascii_pattern(pattern)` by `re`, or None (not narrowed, or a Python before
    3.11, whose `re` has no possessive quantifiers)."""
    narrowed = ascii_pattern(pattern)
    if narrowed is None:
        return None
    try:
        return re.compile(narrowed).findall
    except re.error:
        return None


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _pair_rank(rank: Any, piece: bytes, starts: list[int], i: int, big: int) -> int:
    """The rank of the part at `i` merged with the next, or `big` when that is no token."""
    if i + 2 >= len(starts):
        return big
    return _or(rank(piece[starts[i] : starts[i + 2]]), big)


def load_counter(name: str) -> BPECounter | None:
    """A counter for `name` from its table in the user cache, or None when there is none yet
    (or it cannot be read, or this machine is big-endian: the table is little-endian)."""
    if sys.byteorder != "little":
        return None
    path = table_path(name)
    try:
        return BPECounter(RankTable(path))
    except (OSError, ValueError):
        return None
