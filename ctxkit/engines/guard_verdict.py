"""What `guard` decides of a transcript: one `TargetResult` per target and the `Verdict` over
them (the chosen target, structural problems, the exit code), with their JSON fields."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ctxkit.budget import Target, used_fraction
from ctxkit.budget.triggers import AgentForecast
from ctxkit.counting import RecordedUsage
from ctxkit.engines.guard_history import ThresholdHistory
from ctxkit.engines.guard_pending import PendingPlan
from ctxkit.gates.exits import EXIT_PROBLEMS, exit_code_for
from ctxkit.model import Transcript


@dataclass
class TargetResult:
    """One target's evaluation."""

    target: Target
    status: str
    used: int
    regions: dict[str, int]
    tokenizer: str
    decision: str = ""  # chosen, skipped, does not fit
    schemas_only: bool = False
    notes: list[str] = field(default_factory=list)
    pending: PendingPlan | None = None
    replay: ThresholdHistory | None = None
    usage: RecordedUsage | None = None  # what the provider recorded, when the log says
    basis: str = "local count"  # or "recorded usage": what `used` rests on
    agents: list[AgentForecast] = field(default_factory=list)  # guard --as AGENT
    # in an agent loop: the one loop policy's trigger and goal for this log (`budget.policy`)
    loop: dict[str, Any] | None = None

    @property
    def limit(self) -> int:
        """The target's limit in force, kept here because docs/guard.md reads `verdict.chosen.limit`."""
        return self.target.limit

    @property
    def remaining(self) -> int:
        """Tokens left under the limit in force (negative when over)."""
        return self.target.limit - self.used

    @property
    def used_fraction(self) -> float:
        return used_fraction(self.used, self.target.limit)

    @property
    def fits(self) -> bool:
        return self.status != "overflow"

    def to_dict(self) -> dict[str, Any]:
        """Plain fields for JSON output."""
        frac = self.used_fraction
        d: dict[str, Any] = {
            "target": self.target.name,
            "status": self.status,
            "decision": self.decision,
            "used": self.used,
            "limit": self.limit,
            "bound_by": self.target.bound_by,
            "rule": self.target.rule,
            "remaining": self.remaining,
            "used_fraction": round(frac, 4) if math.isfinite(frac) else None,
            "regions": dict(self.regions),
            "schemas_only_overflow": self.schemas_only,
            "tokenizer": self.tokenizer,
            "tokenizer_note": self.target.tokenizer_note or None,
            "notes": list(self.notes),
            "budget": self.target.to_dict(),
            "basis": self.basis,
            "recorded_usage": self.usage.to_dict() if self.usage is not None else None,
        }
        if self.agents:
            d["agents"] = [a.to_dict() for a in self.agents]
        if self.pending is not None:
            d["pending"] = self.pending.to_dict()
        if self.replay is not None:
            d["replay"] = self.replay.to_dict()
        if self.loop is not None:
            d["loop"] = dict(self.loop)
        return d


@dataclass
class Verdict:
    """The evaluation of one transcript against its targets."""

    transcript: Transcript
    results: list[TargetResult]
    chosen_index: int | None
    problems: list[Any] = field(default_factory=list)
    checked: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> TargetResult | None:
        return None if self.chosen_index is None else self.results[self.chosen_index]

    @property
    def verdict(self) -> str:
        """`fits` (a target was chosen) or `final` (none fits: the turn cannot go ahead)."""
        return "fits" if self.chosen is not None else "final"

    @property
    def status(self) -> str:
        """The chosen target's status, or overflow when none fits."""
        return self.chosen.status if self.chosen is not None else "overflow"

    def structural_errors(self) -> list[Any]:
        """Problems of severity error found by `check`."""
        return [p for p in self.problems if getattr(p, "severity", "error") == "error"]

    def exit_code(self, fail_on: str = "compact") -> int:
        """0 fits, 3 compaction needed, 4 blocked, 5 overflow or none fits; 6 structural errors."""
        code = exit_code_for(self.status, fail_on)
        if code == 0 and self.checked and self.structural_errors():
            return EXIT_PROBLEMS
        return code

    @property
    def recorded_model(self) -> dict[str, Any] | None:
        """The model the log records (`metadata["model"]`) and the models.toml row it resolves
        to, or the nearest names when it resolves to none; None when the log names no model."""
        return recorded_model(self.transcript)

    def to_dict(self, fail_on: str = "compact") -> dict[str, Any]:
        """Plain fields for JSON output."""
        t = self.transcript
        d: dict[str, Any] = {
            "path": t.path,
            "transcript": t.id,
            "line": t.line,
            "units": len(t.units),
            "verdict": self.verdict,
            "chosen": self.chosen.target.name if self.chosen else None,
            "status": self.status,
            "exit_code": self.exit_code(fail_on),
            "targets": [r.to_dict() for r in self.results],
            "recorded_model": self.recorded_model,
        }
        if self.checked:
            d["problems"] = [
                {
                    "kind": p.kind,
                    "unit_id": p.unit_id,
                    "message": p.message,
                    "severity": getattr(p, "severity", "error"),
                }
                for p in self.problems
            ]
        return d



def recorded_model(t: Transcript) -> dict[str, Any] | None:
    """The model a log records and what it resolves to in models.toml: `name`, `matched` (the
    row, or None) and `suggestions` (the nearest names when there is no row).

    The guard does not take it as the target by itself: `--model` names the budget, so the same
    command checks every file against the same limit and `count`'s figure (its tokenizer) is the
    guard's; the verdict says which model the log ran on and how to check against it.
    """
    from ctxkit.budget.models import find_model, model_suggestions

    name = t.metadata.get("model")
    if not isinstance(name, str) or not name.strip():
        return None
    info, matched = find_model(name)
    return {
        "name": name,
        "matched": matched or None,
        "context_window": info.context_window if info is not None else None,
        "suggestions": [] if info is not None else model_suggestions(name),
    }
