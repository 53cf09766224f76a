"""The per-unit caches: read once per unit, by identity, bounded by the largest transcript."""

from __future__ import annotations

import pytest

from ctxkit import memo
from ctxkit.model import Unit


def test_a_unit_is_read_once_and_an_equal_one_again(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    lengths = memo.UnitMemo(lambda u: reads.append(u.id) or len(u.content))
    a = Unit("a", "user", content="hello")
    assert (lengths(a), lengths(a)) == (5, 5)
    twin = Unit("a", "user", content="hello")  # equal, not the same unit
    assert lengths(twin) == 5
    assert reads == ["a", "a"]


def test_the_oldest_go_first_and_a_large_transcript_makes_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memo, "_capacity", [3])
    reads: list[str] = []
    ids = memo.UnitMemo(lambda u: reads.append(u.id) or u.id)
    units = [Unit(f"u{i}", "user", content=str(i)) for i in range(5)]
    for u in units:
        ids(u)
    assert len(ids) == 3
    ids(units[0])  # forgotten: read again
    assert reads == ["u0", "u1", "u2", "u3", "u4", "u0"]
    memo.reserve(5)  # a transcript of 5 units: room for each, twice over
    assert memo.capacity() == 10
    for u in units:
        ids(u)
    assert len(ids) == 5
    memo.reserve(2)  # a smaller one takes no room back
    assert memo.capacity() == 10
