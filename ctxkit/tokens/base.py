"""What a tokenizer is (the `Tokenizer` protocol), and the count cache every exact tokenizer
shares: texts looked up, the misses counted in one batch, the counts remembered."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

CACHE_MAX_ENTRIES = 200_000


# Texts longer than this are cached by (length, hash), so the cache never pins large strings.
# Python caches a string's hash on the object, so counting the same text again (a compaction
# counts each unit once per step) costs a lookup, not a pass over the text; the hash is SipHash
# with a per-process key, 64 bits: two different texts of one length share a key with odds
# about 2**-64 per pair (under 1e-9 for a full cache).
_KEY_BY_TEXT_MAX_CHARS = 256


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens in text. `exact` is False for estimates (approx, max)."""

    name: str
    exact: bool

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


_Key = str | tuple[int, int]


def _cache_key(text: str) -> _Key:
    return text if len(text) <= _KEY_BY_TEXT_MAX_CHARS else (len(text), hash(text))


class CachedCounter:
    """Shared cache logic: look texts up, count the misses in one batch, remember them."""

    name: str
    exact: bool

    def __init__(self) -> None:
        self._cache: dict[_Key, int] = {}
        self._lock = threading.Lock()

    def _count_batch(self, texts: list[str]) -> list[int]:
        raise NotImplementedError

    def clear_cache(self) -> None:
        """Forget every cached count (benchmarks use it to time cold counting)."""
        with self._lock:
            self._cache.clear()

    def count(self, text: str) -> int:
        """Tokens in one text."""
        hit = self._cache.get(_cache_key(text))
        return hit if hit is not None else self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each text, encoding only the texts not seen before, in one batch."""
        get = self._cache.get
        limit = _KEY_BY_TEXT_MAX_CHARS
        out: list[int] = [0] * len(texts)
        # A miss is a position and the index of its text in miss_texts (a text repeated in the
        # batch, a role say, is counted once): flat lists, no list per miss, since a cold count
        # of a large log misses on most of its texts.
        slot: dict[_Key, int] = {}  # key -> index in miss_texts
        miss_texts: list[str] = []
        pending: list[int] = []  # position, index in miss_texts, position, index...
        for i, text in enumerate(texts):
            if not text:
                continue
            key = text if len(text) <= limit else (len(text), hash(text))
            hit = get(key)
            if hit is not None:
                out[i] = hit
                continue
            j = slot.setdefault(key, len(miss_texts))
            if j == len(miss_texts):
                miss_texts.append(text)
            pending += (i, j)
        if not miss_texts:
            return out
        counted = self._count_batch(miss_texts)
        for n in range(0, len(pending), 2):
            out[pending[n]] = counted[pending[n + 1]]
        with self._lock:
            cache = self._cache
            if len(cache) + len(slot) > CACHE_MAX_ENTRIES and not _room(len(cache) + len(slot)):
                cache.clear()
            cache.update(zip(slot, counted, strict=True))
        return out


def _room(entries: int) -> bool:
    """Whether the count cache may hold `entries`: a few texts a unit of the largest transcript
    compacted here (`ctxkit.memo`), so a compaction never clears it halfway and counts its
    units again."""
    from ctxkit.memo import capacity

    return entries <= 3 * capacity()
