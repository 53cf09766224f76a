"""What a compaction run reports: its events, steps and result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxkit.errors import CtxkitError
from ctxkit.model import Transcript
from ctxkit.strategies import STRATEGIES

# The phases an observer sees: detection, each strategy as it runs, recovery, the end.
PHASES = ("detection", *STRATEGIES, "hybrid", "recovery", "handover", "success")


@dataclass(frozen=True)
class Event:
    """One phase of a run, as the spec's UI consumes it: `progress` is 0-100, -1 in recovery;
    `priority` is info (normal work), warning (recovery, an undone step) or critical (failure)."""

    phase: str
    progress: int
    message: str
    tokens: int
    limit: int
    priority: str = "info"

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "progress": self.progress,
            "message": self.message,
            "tokens": self.tokens,
            "limit": self.limit,
            "priority": self.priority,
        }


Observer = Callable[[Event], None]


@dataclass
class Step:
    """What one strategy did in one pass of the chain."""

    strategy: str
    iteration: int
    tokens_before: int
    tokens_after: int
    time_ms: float
    applied: bool
    note: str = ""
    refs: list[str] = field(default_factory=list)

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "iteration": self.iteration,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.saved,
            "time_ms": round(self.time_ms, 2),
            "applied": self.applied,
            "note": self.note,
            "refs": self.refs,
        }


@dataclass
class CompactResult:
    """The compacted transcript and everything the report says about how it got there."""

    transcript: Transcript
    changed: bool
    fits: bool
    limit: int
    target: int
    tokens_before: int
    tokens_after: int
    regions_before: dict[str, int]
    regions_after: dict[str, int]
    units_before: int
    units_after: int
    steps: list[Step]
    recovery: str | None
    p1_total: int
    p1_kept: int
    invariants: dict[str, Any]
    time_ms: float
    coherence: float | None = None
    note: str = ""  # what the one line must add (a goal the engine could not aim for)
    # what the HTML page and the per-unit report need (`compaction.trace`): the input, and the
    # tokens of each unit before and after (aligned with the units)
    original: Transcript | None = field(default=None, repr=False, compare=False)
    unit_tokens_before: list[int] = field(default_factory=list, repr=False)
    unit_tokens_after: list[int] = field(default_factory=list, repr=False)
    budget: dict[str, Any] | None = None  # the model's window arithmetic, when there is one

    @property
    def strategies_applied(self) -> list[str]:
        seen: list[str] = []
        for s in self.steps:
            if s.applied and s.saved > 0 and s.strategy not in seen:
                seen.append(s.strategy)
        if self.recovery and f"recovery:{self.recovery}" not in seen:
            seen.append(f"recovery:{self.recovery}")
        return seen

    @property
    def refs(self) -> list[str]:
        out: list[str] = []
        for s in self.steps:
            out.extend(r for r in s.refs if r not in out)
        return out

    def summary_line(self) -> str:
        """The one line for people: "Context reduced 18,432 -> 3,420 / 5,000 tokens (offload)"."""
        tail = f"; {self.note}" if self.note else ""
        if not self.changed:
            return f"Context fits: {self.tokens_before:,} / {self.limit:,} tokens (unchanged){tail}"
        used = ", ".join(self.strategies_applied) or "no strategy"
        return (
            f"Context reduced {self.tokens_before:,} -> {self.tokens_after:,} / "
            f"{self.limit:,} tokens ({used}){tail}"
        )

    def report(self) -> dict[str, Any]:
        """The JSON report: tokens per region, units, steps, refs, P1, invariants."""
        return {
            "transcript": self.transcript.id,
            "changed": self.changed,
            "fits": self.fits,
            "limit": self.limit,
            "target": self.target,
            "tokens": {
                "before": self.tokens_before,
                "after": self.tokens_after,
                "regions_before": self.regions_before,
                "regions_after": self.regions_after,
            },
            "units": {"before": self.units_before, "after": self.units_after},
            "steps": [s.to_dict() for s in self.steps],
            "strategies": self.strategies_applied,
            "recovery": self.recovery,
            "refs": self.refs,
            "p1": {"total": self.p1_total, "kept": self.p1_kept},
            "invariants": self.invariants,
            "coherence": self.coherence,
            "time_ms": round(self.time_ms, 2),
        }


@dataclass(frozen=True)
class Failure:
    """A transcript a dataset run could not compact (left out of the output, its archive rows
    undone): its id, the error's one line and the exit code that error has on its own."""

    transcript_id: str
    message: str
    exit_code: int = 1
    label: str = ""  # the file (and line) the message may start with

    @classmethod
    def of(cls, transcript_id: str, error: CtxkitError, label: str = "") -> Failure:
        return cls(transcript_id, str(error), error.exit_code, label)

    def error(self) -> CtxkitError:
        """The error again, with its exit code (raised where the run cannot go on)."""
        exc = CtxkitError(self.message)
        exc.exit_code = self.exit_code
        return exc

    def to_dict(self) -> dict[str, Any]:
        return {
            "transcript": self.transcript_id, "error": self.message, "exit_code": self.exit_code,
            "label": self.label,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Failure:
        return cls(d["transcript"], d["error"], int(d["exit_code"]), str(d.get("label") or ""))
