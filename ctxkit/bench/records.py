"""The bench's records: a measured figure against its target, one suite's result, a run's
report and options, and the one line a run ends with."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REALDATA = Path(__file__).resolve().parents[2].parent / "shared" / "realdata"

Progress = Callable[[str], None]

# A table of a suite for people: (caption or None, column heads, rows)
Table = tuple[str | None, Sequence[str], list[Sequence[Any]]]


@dataclass
class Figure:
    """One measured number, with its target when the spec sets one."""

    name: str
    value: float
    unit: str
    target: float | None = None
    better: str = "lower"  # lower | higher: which side of the target passes
    note: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool | None:
        """True/False against the target, None when there is none."""
        if self.target is None:
            return None
        return self.value < self.target if self.better == "lower" else self.value >= self.target

    def status(self) -> str:
        """pass, MISS, or - when there is no target."""
        ok = self.passed
        return "-" if ok is None else ("pass" if ok else "MISS")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": _round(self.value),
            "unit": self.unit,
            "target": self.target,
            "better": self.better,
            "passed": self.passed,
            "note": self.note,
            "detail": self.detail,
        }


@dataclass
class SuiteResult:
    """What one suite measured: headline figures, and table rows where it has them."""

    name: str
    figures: list[Figure] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    time_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "figures": [f.to_dict() for f in self.figures],
            "summary": self.summary,
            "rows": self.rows,
            "skipped": self.skipped,
            "time_s": round(self.time_s, 3),
        }


@dataclass
class BenchReport:
    """Machine notes plus one SuiteResult per suite run."""

    machine: dict[str, Any]
    options: dict[str, Any]
    suites: dict[str, SuiteResult]

    def to_dict(self) -> dict[str, Any]:
        total, missed = targets(self)
        return {
            "machine": self.machine,
            "options": self.options,
            "suites": {name: s.to_dict() for name, s in self.suites.items()},
            "targets": {
                "total": total,
                "met": total - len(missed),
                "missed": [{"suite": suite, "figure": f.name} for suite, f in missed],
                "summary": summary_line(self),
            },
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BenchReport:
        """A report read back from `bench --json` (to chart it again without rerunning it)."""
        suites = {}
        for name, s in (d.get("suites") or {}).items():
            figures = [
                Figure(
                    f["name"],
                    f["value"],
                    f["unit"],
                    f.get("target"),
                    f.get("better", "lower"),
                    f.get("note", ""),
                    f.get("detail") or {},
                )
                for f in s.get("figures") or ()
            ]
            suites[name] = SuiteResult(
                name,
                figures,
                list(s.get("rows") or ()),
                list(s.get("summary") or ()),
                list(s.get("skipped") or ()),
                float(s.get("time_s") or 0.0),
            )
        return cls(dict(d.get("machine") or {}), dict(d.get("options") or {}), suites)


MISSED_EXIT = 3  # `bench`: the run finished and some figure missed its target


def targets(report: BenchReport) -> tuple[int, list[tuple[str, Figure]]]:
    """(figures that have a target, those that missed it as (suite, figure)), in report order."""
    total = 0
    missed: list[tuple[str, Figure]] = []
    for name, suite in report.suites.items():
        for f in suite.figures:
            if f.passed is None:
                continue
            total += 1
            if not f.passed:
                missed.append((name, f))
    return total, missed


def fmt_value(x: Any) -> str:
    """A figure as the tables show it: thousands separators, three significant figures when small."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if x == 0:
            return "0"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        if abs(x) >= 10:
            return f"{x:.1f}"
        if abs(x) >= 0.1:
            return f"{x:.2f}"
        return f"{x:.3g}"
    return str(x)


def summary_line(report: BenchReport) -> str:
    """The one line a run ends with: how many targets were met, which were missed (suite,
    figure, value against target), and the suites a quick run left out."""
    from ctxkit.english import counted

    total, missed = targets(report)
    met = total - len(missed)
    line = f"bench: {met:,} of {counted(total, 'target')} met"
    if missed:
        shown = "; ".join(
            f"{suite}: {f.name} {fmt_value(f.value)} {f.unit} (target {_sign(f)} {fmt_value(f.target)})"
            for suite, f in missed
        )
        line += f"; missed: {shown}"
    left_out = report.options.get("left_out") or {}
    if left_out:
        line += "; left out by --quick: " + "; ".join(f"{n} ({why})" for n, why in left_out.items())
    return line


def _sign(f: Figure) -> str:
    return "<" if f.better == "lower" else ">="


@dataclass(frozen=True)
class BenchOptions:
    """How much to run: `quick` trims every suite to seconds; the rest are for tests."""

    quick: bool = False
    realdata: Path | None = REALDATA
    repeat: int | None = None
    scenarios: tuple[str, ...] | None = None  # quality: simulated scenarios (default: all)
    sizes: tuple[int, ...] | None = None  # scale: token sizes
    scale_scenarios: tuple[str, ...] | None = None
    coherence_minilm: bool | None = None  # default: on unless quick
    dataset_mb: float | None = None  # archive: the dataset's size (default 200 MB, quick 4 MB)

    def repeats(self, full: int) -> int:
        """Repetitions of a timed run: `repeat` when set, else 3 when quick, else `full`."""
        return self.repeat or (3 if self.quick else full)


def _round(x: float) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    digits = max(3, 4 - int(math.floor(math.log10(abs(x)))))
    return round(x, digits)
