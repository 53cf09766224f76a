"""The fast exact counters of cl100k_base and o200k_base (toktok-rs, else quicktok-v1), which
one counts here, and the tokenizer that counts with it: the Python BPE for a process's first
small texts, tiktoken for a character newer than the counter's Unicode tables."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ctxkit.errors import TokenizerError
from ctxkit.tokens.base import CachedCounter
from ctxkit.tokens.encodings import encoding_kwargs

# Characters of text a tokenizer counts with the Python BPE (`tokens.bpe`, ready in
# milliseconds) before it loads its fast counter: about 25 ms of Python counting, against 170 ms
# (cl100k_base) to 500 ms (o200k_base) of CPU for toktok's or quicktok's load.
SMALL_WORK_CHARS = 100_000


class FastTokenizer(CachedCounter):
    """cl100k_base or o200k_base counted by a fast exact counter (`FAST_COUNTERS`): toktok-rs,
    else quicktok-v1. Both give tiktoken's counts on every real text measured
    (scripts/eval_tokenizers.py), toktok at 12-16x tiktoken's speed, quicktok at 4-7x, offline.
    A text holding a character newer than the counter's Unicode tables (`_Gaps`) is counted by
    tiktoken. The first SMALL_WORK_CHARS characters of a process are counted by `tokens.bpe`
    instead, which needs no load (a count of a small file never waits for the counter).
    `encoding` is tiktoken's, for code that needs ids."""

    exact = True

    def __init__(self, name: str, counter: str, load_encoding: Callable[[], Any]):
        super().__init__()
        self.name = name
        self.counter_name = counter
        self._counter: Callable[[list[str]], list[int]] | None = None
        self._load_encoding = load_encoding
        self._encoding: Any = None
        self._small: Any = None  # tokens.bpe.BPECounter, or False when there is none
        self._small_chars = 0

    @property
    def counter(self) -> Callable[[list[str]], list[int]]:
        """The fast counter (texts -> counts), loaded on first use."""
        if self._counter is None:
            self._counter = FAST_COUNTERS[self.counter_name](self.name)
        return self._counter

    @property
    def encoding(self) -> Any:
        """tiktoken's encoding of the same name, loaded on first use (counting never needs it)."""
        if self._encoding is None:
            self._encoding = self._load_encoding()
        return self._encoding

    def _count_batch(self, texts: list[str]) -> list[int]:
        if self._counter is None:
            small = self._count_small(texts)
            if small is not None:
                return small
        try:
            counts = self.counter(texts)
        except (UnicodeEncodeError, TypeError):
            # a lone surrogate (JSON may escape one) is no UTF-8: tiktoken replaces it by U+FFFD
            texts = [t if t.isascii() else _without_surrogates(t) for t in texts]
            counts = self.counter(texts)
        gaps = _gaps(self.counter_name, self.name)
        if gaps is not None:
            held = gaps.held_by
            for i, text in enumerate(texts):
                if not text.isascii() and held(text):
                    # a character newer than the counter's Unicode tables: tiktoken counts it
                    counts[i] = len(self.encoding.encode_ordinary(text))
        return counts

    def _count_small(self, texts: list[str]) -> list[int] | None:
        """Counts by the Python BPE while the process has counted little; None past that, or
        when a text holds a character its split pattern reads unlike tiktoken's."""
        chars = self._small_chars + sum(map(len, texts))
        if chars > SMALL_WORK_CHARS:
            return None
        if self._small is None:
            self._small = _bpe_counter(self.name) or False
        gaps = _gaps("bpe", self.name)
        if not self._small or (gaps is not None and any(map(gaps.held_by, texts))):
            return None
        self._small_chars = chars
        count = self._small.count
        try:
            return [count(t) for t in texts]
        except UnicodeEncodeError:  # a lone surrogate, as above
            return [count(_without_surrogates(t)) for t in texts]


def _without_surrogates(text: str) -> str:
    """`text` as tiktoken encodes it: each lone surrogate replaced by U+FFFD."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class _Gaps:
    """The characters a fast counter counts unlike tiktoken, found fast: an ASCII text holds
    none (a flag Python keeps); any other is encoded to UTF-8 once and searched for the lead
    bytes of the gap characters, a memchr each (four for toktok's and quicktok's gaps, which
    most non-ASCII text, punctuation, CJK and Latin letters, never holds); a text holding one
    is searched for that lead followed by a gap's second byte (one regex pass: emoji share the
    lead byte of CJK Extension H, not its second bytes); only a text holding such a pair is
    searched with the exact character class (26 ranges checked per character, 30x slower).
    The regexes are built for the first text that needs them."""

    def __init__(self, ranges: Sequence[tuple[int, int]]):
        self._ranges = ranges
        seconds: dict[bytes, set[int]] = {}
        for a, b in ranges:
            cp = a
            while cp <= b:
                data = chr(cp).encode("utf-8")
                seconds.setdefault(data[:1], set()).add(data[1])
                # the code points that share these two bytes: the whole character below
                # U+0800, a block of 64 below U+10000, of 4,096 above
                block = 1 if cp < 0x800 else 64 if cp < 0x10000 else 4096
                cp = (cp // block + 1) * block
        self._seconds = {lead: bytes(sorted(xs)) for lead, xs in sorted(seconds.items())}
        self._pairs: dict[bytes, Callable[[bytes], Any]] = {}  # lead -> search for its pairs

    @functools.cached_property
    def _exact(self) -> re.Pattern[str]:
        return re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in self._ranges) + "]")

    def _pair_search(self, lead: bytes) -> Callable[[bytes], Any]:
        search = self._pairs.get(lead)
        if search is None:
            second = b"".join(re.escape(bytes([x])) for x in self._seconds[lead])
            search = self._pairs[lead] = re.compile(re.escape(lead) + b"[" + second + b"]").search
        return search

    def held_by(self, text: str) -> bool:
        """True when `text` holds a gap character."""
        if text.isascii():
            return False
        data = text.encode("utf-8", "surrogatepass")
        for lead in self._seconds:
            if lead in data and self._pair_search(lead)(data) is not None:
                return self._exact.search(text) is not None
        return False


@functools.cache
def _gaps(counter: str, name: str) -> _Gaps | None:
    """The characters `counter` (a name of FAST_COUNTERS, or "bpe" for `tokens.bpe`) counts
    unlike tiktoken in encoding `name`: toktok's and quicktok's Unicode tables are older than
    tiktoken's, the `regex` module's newer (measured by scripts/counter_gaps.py); None when not
    measured."""
    path = Path(__file__).resolve().parent.parent / "data" / f"{counter}_gaps_{name}.txt"
    try:
        lines = path.read_text().split()
    except OSError:
        return None
    ranges = [(int(a, 16), int(b, 16)) for a, b in (line.split("-") for line in lines)]
    return _Gaps(ranges) if ranges else None


def _bpe_counter(name: str) -> Any:
    """`tokens.bpe`'s counter for `name` (its rank table written on first use), or None."""
    from ctxkit.tokens import bpe

    counter = bpe.load_counter(name)
    if counter is None and sys.byteorder == "little":
        try:
            kwargs = encoding_kwargs(name)
            bpe.write_table(bpe.table_path(name), kwargs["mergeable_ranks"], kwargs["pat_str"])
        except (OSError, TokenizerError):
            return None  # no writable cache: the fast counter counts everything
        counter = bpe.load_counter(name)
    return counter


def _toktok(name: str) -> Callable[[list[str]], list[int]]:
    """toktok-rs's count of many texts in `name` (its vocabulary is compiled into the module),
    one text at a time: its batch call costs 28 us a call even on one thread, more than the
    texts of a small transcript take to count. `_encoding` is the tokenizer behind toktok's
    `batch_count`, which its README points to for the full API."""
    import toktok

    count = toktok._encoding(name).count
    return lambda texts: [count(t) for t in texts]


def _quicktok_counter(name: str) -> Callable[[list[str]], list[int]]:
    """quicktok-v1's count of many texts in `name`, one at a time: its count holds the GIL, so
    threads only add waiting, and its batch call returns numpy arrays (a 55 ms import)."""
    import quicktok

    count = quicktok.get_encoding(name).count
    return lambda texts: [count(t) for t in texts]


# Fast exact counters by name, the first installed is used: a loader gives a function from texts
# to their counts. toktok-rs is a Rust port of quicktok (same Unicode tables, so the same gaps),
# 2x its speed on the real transcripts; quicktok-v1 serves Python 3.10, where toktok has no wheel.
FAST_COUNTERS: dict[str, Callable[[str], Callable[[list[str]], list[int]]]] = {
    "toktok": _toktok,
    "quicktok": _quicktok_counter,
}


# Encodings the fast counters count, ids checked equal to tiktoken's.
FAST_ENCODINGS = ("cl100k_base", "o200k_base")


# Which counter counts: a name of FAST_COUNTERS, or "tiktoken" (none of them); unset, the first
# installed. Benchmarks and tests compare the counters with it.
COUNTER_ENV = "CTXKIT_COUNTER"


def fast_counter_name(name: str) -> str | None:
    """The fast counter that counts encoding `name` here, or None (tiktoken counts it)."""
    import importlib.util

    if name not in FAST_ENCODINGS:
        return None
    chosen = os.environ.get(COUNTER_ENV, "").strip()
    if chosen == "tiktoken":
        return None
    if chosen and chosen not in FAST_COUNTERS:
        known = ", ".join([*FAST_COUNTERS, "tiktoken"])
        raise TokenizerError(f"{COUNTER_ENV}={chosen!r} is no counter; known: {known}")
    for counter in [chosen] if chosen else FAST_COUNTERS:
        if importlib.util.find_spec(counter) is not None:
            return counter
    if chosen:
        raise TokenizerError(f"{COUNTER_ENV}={chosen}: the {chosen} package is not installed")
    return None
