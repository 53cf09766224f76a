"""What stays fixed and what grows: a log's recorded usage fitted as

    recorded(call) = fixed + ratio x counted(call) + steps before the call

`counted` is ctxkit's count of the context the model had at the call; `ratio` is the provider's
tokens per counted token (its tokenizer against ours, and content the log holds only in part);
`fixed` is what every call carries and the log never shows (the system prompt, tool schemas,
MCP servers, instructions), anchored at the first recorded call: it can be no larger than that
call's whole context. `steps` are changes the two terms cannot explain, each at the call where it
appeared (an @-mentioned file the log does not hold, old tool results the agent cleared): said,
never folded into the fixed part.

The ratio is the weighted median of the increments (recorded growth over counted growth between
consecutive calls, each weighted by its counted growth), so a call with an unseen attachment
moves it little; when the counted growth is under a tenth of the last call's context there is
too little to measure, and it is the caller's prior (1 unless one is given: `recorded_usage`
gives none, so such a log is fitted as counted one for one).

    >>> calls = [(10_000, 1_000, 0), (12_400, 3_000, 2), (16_000, 6_000, 4)]
    >>> f = fit_usage(calls)
    >>> f.fixed, round(f.ratio, 2), f.explained()
    (8800, 1.2, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

TOLERANCE = 0.05  # a call is explained when the fit is within 5% of what was recorded
_MIN_GROWTH = 0.1  # counted growth below a tenth of the last call's context measures no ratio
_RATIO_BOUNDS = (0.5, 4.0)


@dataclass(frozen=True)
class Step:
    """A change in the recorded usage that the fixed part and the ratio do not explain."""

    call: int  # index of the first call that shows it
    after_unit: int  # the last unit that call saw
    tokens: int  # positive: content the log does not show; negative: content the agent dropped

    def to_dict(self) -> dict[str, Any]:
        return {"call": self.call, "after_unit": self.after_unit, "tokens": self.tokens}


@dataclass(frozen=True)
class UsageFit:
    """A log's recorded calls fitted (see the module doc); `calls` the (recorded, counted,
    after_unit) triples it was fitted on."""

    fixed: int
    ratio: float
    ratio_source: str  # "fitted" or "prior"
    calls: tuple[tuple[int, int, int], ...]
    steps: tuple[Step, ...] = ()
    residuals: tuple[float, ...] = field(default=())  # per call, after steps: (recorded - fit) / recorded

    @property
    def first_recorded(self) -> int:
        return self.calls[0][0]

    @property
    def last_recorded(self) -> int:
        return self.calls[-1][0]

    @property
    def last_counted(self) -> int:
        return self.calls[-1][1]

    @property
    def after_unit(self) -> int:
        return self.calls[-1][2]

    @property
    def unseen(self) -> int:
        """What the steps add up to at the last call: content the log does not hold."""
        return sum(s.tokens for s in self.steps)

    def unseen_at(self) -> dict[int, int]:
        """Where what the log does not hold arrived, by unit index: a step that grew the context
        goes with the last unit its call saw (the content came with that turn); a step that
        shrank it is left out (the log holds that content: the agent dropped it)."""
        out: dict[int, int] = {}
        for s in self.steps:
            if s.tokens > 0:
                out[s.after_unit] = out.get(s.after_unit, 0) + s.tokens
        return out

    def predicted(self, counted: int, steps_from: int | None = None) -> int:
        """The fit's figure for a context of `counted` tokens (with the steps up to the call
        `steps_from`, none when None)."""
        extra = sum(s.tokens for s in self.steps if steps_from is not None and s.call <= steps_from)
        return self.fixed + math.ceil(self.ratio * counted - 1e-9) + extra

    def unexplained(self) -> list[int]:
        """The calls the fit (steps included) misses by more than TOLERANCE."""
        return [i for i, r in enumerate(self.residuals) if abs(r) > TOLERANCE]

    def explained(self) -> bool:
        return not self.unexplained()

    @property
    def worst(self) -> float:
        return max((abs(r) for r in self.residuals), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fixed": self.fixed,
            "ratio": round(self.ratio, 4),
            "ratio_source": self.ratio_source,
            "calls": len(self.calls),
            "first_recorded": self.first_recorded,
            "last_recorded": self.last_recorded,
            "last_counted": self.last_counted,
            "steps": [s.to_dict() for s in self.steps],
            "unseen": self.unseen,
            "worst_residual": round(self.worst, 4),
            "unexplained_calls": self.unexplained(),
        }


def _weighted_median(pairs: Sequence[tuple[float, float]]) -> float:
    ordered = sorted(pairs)
    half = sum(w for _, w in ordered) / 2
    acc = 0.0
    for value, weight in ordered:
        acc += weight
        if acc >= half:
            return value
    return ordered[-1][0]


def fit_ratio(calls: Sequence[tuple[int, int, int]], prior: float = 1.0) -> tuple[float, str]:
    """The provider's tokens per counted token, from the calls' growth; `prior` when the log
    grew too little to tell."""
    pairs: list[tuple[float, float]] = []
    for (r0, c0, _), (r1, c1, _) in zip(calls, calls[1:], strict=False):
        grown = c1 - c0
        if grown <= 0:
            continue
        pairs.append(((r1 - r0) / grown, float(grown)))
    if not pairs or sum(w for _, w in pairs) < _MIN_GROWTH * max(calls[-1][0], 1):
        return prior, "prior"
    low, high = _RATIO_BOUNDS
    return min(high, max(low, _weighted_median(pairs))), "fitted"


def fit_usage(
    calls: Sequence[tuple[int, int, int]], prior: float = 1.0, first: tuple[int, int] | None = None
) -> UsageFit:
    """Fit `calls` (recorded, counted, after_unit), in call order; see the module doc.

    `first` is the log's own first call (recorded, counted) when `calls` start later (after the
    agent's compaction): the fixed part is no more than what that call carried beyond its
    content, and what the first of `calls` carries beyond that is a step (the compaction's
    summary and the files the agent read back, which the log does not show)."""
    if not calls:
        raise ValueError("no recorded calls to fit")
    calls = tuple((int(r), int(c), int(a)) for r, c, a in calls)
    ratio, source = fit_ratio(calls, prior)
    levels = [r - ratio * c for r, c, _ in calls]
    # anchored at the first call: what it carried beyond its counted content, no more than its
    # whole context and no less than nothing
    fixed = int(round(min(max(levels[0], 0.0), calls[0][0])))
    steps: list[Step] = []
    if first is not None:
        cap = int(round(min(max(first[0] - ratio * first[1], 0.0), first[0])))
        if fixed > cap:
            steps.append(Step(0, calls[0][2], fixed - cap))
            fixed = cap
    steps += _steps(calls, levels, fixed + sum(s.tokens for s in steps))
    residuals = []
    for i, (r, c, _) in enumerate(calls):
        fit = fixed + ratio * c + sum(s.tokens for s in steps if s.call <= i)
        residuals.append((r - fit) / r if r else 0.0)
    return UsageFit(fixed, ratio, source, calls, tuple(steps), tuple(residuals))


def _steps(calls: Sequence[tuple[int, int, int]], levels: Sequence[float], start: int) -> list[Step]:
    """Level changes that hold: the level moves by more than the tolerance of a call and stays
    there at the next call (or it is the last call)."""
    steps: list[Step] = []
    level = float(start)
    n = len(calls)
    for i in range(1, n):
        r = calls[i][0]
        tol = max(500.0, 0.02 * r)
        moved = levels[i] - level
        if abs(moved) <= tol:
            continue
        holds = i == n - 1 or abs(levels[i + 1] - levels[i]) <= max(500.0, 0.02 * calls[i + 1][0])
        if not holds:
            continue
        steps.append(Step(i, calls[i][2], int(round(moved))))
        level = levels[i]
    return steps
