"""What is read once per unit: a cache keyed by the unit itself.

A compaction reads the same units again at every step: their facts, their prose, their
normalised text, the text an embedder sees. A unit is never changed in place (`Unit.replace`
makes a new one), so what was read of it holds for as long as the unit lives: each cache here
keys by identity, holds the unit (so its id is not reused) and checks its content too.

The caches are bounded, oldest first out, but never below twice the units of the largest
transcript this process compacts (`reserve`): a cache smaller than the run's units throws away,
at every step, what the next step reads again (a 200,000-message log read its units' facts
over and over). A dataset's conversations share no unit, so a run over many of them empties
every cache after each one (`forget`): a worker's memory then follows its largest
conversation, not the number it did (it grew 0.8 MB a conversation, to 1.8 GB).

    >>> from ctxkit.model import Unit
    >>> lengths = UnitMemo(lambda u: len(u.content))
    >>> u = Unit("a", "user", content="hello")
    >>> lengths(u), lengths(u)
    (5, 5)
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ctxkit.model import Unit

T = TypeVar("T")

FLOOR = 100_000  # entries each cache keeps at least
_capacity = [FLOOR]  # the bound of every cache: FLOOR, or twice the largest transcript


def reserve(units: int) -> None:
    """Make room in every cache for a transcript of `units` units (called by `compact`)."""
    _capacity[0] = max(_capacity[0], 2 * units)


def capacity() -> int:
    """How many entries each cache keeps now."""
    return _capacity[0]


def forget() -> None:
    """Empty every cache (a conversation of a dataset is done: no later one shares its units)."""
    for memo in list(_MEMOS):
        memo.clear()


class UnitMemo(Generic[T]):
    """`read(unit)`, read once per unit (by identity and content), the oldest forgotten first."""

    def __init__(self, read: Callable[[Unit], T]) -> None:
        self._read = read
        self._memo: OrderedDict[int, tuple[Unit, str, T]] = OrderedDict()
        _MEMOS.add(self)

    def __call__(self, unit: Unit) -> T:
        hit = self._memo.get(id(unit))
        if hit is not None and hit[0] is unit and hit[1] is unit.content:
            return hit[2]
        value = self._read(unit)
        self._memo[id(unit)] = (unit, unit.content, value)
        if len(self._memo) > _capacity[0]:
            self._memo.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget everything (benchmarks time cold runs with it)."""
        self._memo.clear()

    def __len__(self) -> int:
        return len(self._memo)


_MEMOS: weakref.WeakSet[UnitMemo[Any]] = weakref.WeakSet()  # every cache, for `forget`
