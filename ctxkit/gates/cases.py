"""The checks of a CI run as records: one `Case` per transcript x target, per baseline entry and
per structural check. The renderers in `report.ci` (GitHub annotations, JUnit XML, a Markdown
summary) all read these records, so every format says the same thing as the table."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OUTCOMES = ("passed", "failed", "skipped")
LEVELS = ("error", "warning", "notice")


@dataclass(frozen=True)
class Case:
    """One check: what was checked (`classname` the file, `name` the target or the gate), its
    outcome, a one-line message, where to point (`file`, `line`), the annotation `level` (error,
    warning, notice, or "" for none), more lines and table rows for the long formats."""

    classname: str
    name: str
    outcome: str
    message: str
    file: str | None = None
    line: int | None = None
    level: str = ""
    kind: str = ""  # what failed, for JUnit's failure type: a status, regression, structure
    details: tuple[str, ...] = ()
    rows: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "classname": self.classname,
            "name": self.name,
            "outcome": self.outcome,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "level": self.level or None,
            "kind": self.kind or None,
            "details": list(self.details),
            "rows": list(self.rows),
        }


def _where(t: Any) -> tuple[str, str | None, int]:
    """A transcript's label, file and line (1 when it has no line of its own)."""
    from ctxkit.gates.baseline import entry_key

    key = entry_key(t)
    path = t.path if t.path not in (None, "-", "<stdin>") else None
    if path is not None:
        path = key.rsplit(":", 1)[0] if t.layout == "dataset" and t.line is not None else key
    line = t.line if t.layout == "dataset" and t.line is not None else 1
    return key, path, line


def _pct(used: int, limit: int) -> str:
    return f"{100 * used / limit:.1f}%" if limit > 0 and math.isfinite(used / limit) else "n/a"


def verdict_cases(
    verdict: Any, fail_on: str, tool_threshold: float | None = None
) -> list[Case]:
    """A case per target of one guard verdict (a structural-check case with `--check`).

    The chosen target passes or fails by its status against `fail_on`; targets after it are
    skipped, and so are targets before it that did not fit (a preference, not a failure): the
    cases fail exactly when the guard's exit code does.
    """
    from ctxkit.budget.tools import schemas_over
    from ctxkit.gates.exits import exit_code_for

    key, path, line = _where(verdict.transcript)
    chosen = verdict.chosen
    cases = []
    for r in verdict.results:
        used = f"{r.used:,} of {r.limit:,} tokens ({_pct(r.used, r.limit)}, bound by {r.target.bound_by})"
        over = (
            schemas_over(r.regions.get("tools", 0), r.target.effective_limit, tool_threshold)
            if tool_threshold is not None
            else None
        )
        notes = tuple(f"note: {n}" for n in r.notes if n != over)
        level = "warning" if over else ""
        if over:
            notes = (f"warning: {over}", *notes)
        if r.decision == "chosen" or chosen is None:
            code = exit_code_for(r.status, fail_on)
            failed = code != 0
            message = f"{r.target.name}: {r.status}, {used}" + (f", exit {code}" if failed else "")
            cases.append(
                Case(
                    key, r.target.name, "failed" if failed else "passed",
                    message if not over or failed else f"{message}; {over}",
                    path, line, "error" if failed else level, r.status if failed else "",
                    notes,
                )
            )
        else:
            why = (
                f"skipped: {chosen.target.name} was chosen"
                if r.decision == "skipped"
                else f"does not fit ({r.status}, {used}); {chosen.target.name} was chosen"
            )
            cases.append(Case(key, r.target.name, "skipped", why, path, line, level, "", notes))
    if verdict.checked:
        errors = verdict.structural_errors()
        lines = tuple(
            f"{getattr(p, 'severity', 'error')}: {p.kind} [{p.unit_id}]: {p.message}"
            for p in verdict.problems
        )
        if errors:
            message = f"--check: {len(errors)} structural error" + ("s" if len(errors) != 1 else "")
            message += f" ({errors[0].kind} [{errors[0].unit_id}]: {errors[0].message})"
            cases.append(Case(key, "check", "failed", message, path, line, "error", "structure", lines))
        else:
            cases.append(Case(key, "check", "passed", "no structural errors", path, line, "", "", lines))
    return cases


def baseline_cases(diffs: Sequence[Any], tokenizer: str) -> list[Case]:
    """A case per baseline entry: failed when a region grew beyond its allowance, pointed at the
    section of a prompt file that grew most."""
    from ctxkit.gates.baseline import diff_rows

    name = f"baseline ({tokenizer})"
    out = []
    for d in diffs:
        rows = tuple(diff_rows([d], changed_only=True))
        file = d.path if d.key != "<stdin>" else None
        if d.status == "over":
            details = tuple(
                f"section {s.name!r} (line {s.line}): "
                + (
                    f"{s.before:,} -> {s.after:,} ({s.delta:+,})"
                    if s.before is not None and s.after is not None
                    else ("added, " if s.before is None else "removed, ") + f"{abs(s.delta):,} tokens"
                )
                for s in d.sections
                if s.delta
            )
            out.append(
                Case(d.key, name, "failed", d.summary(), file, d.at_line, "error", "regression",
                     details, rows)
            )
        elif d.status == "missing":
            out.append(Case(d.key, name, "skipped", d.summary(), None, None, "", "", (), rows))
        elif d.status == "new":
            out.append(Case(d.key, name, "passed", d.summary(), file, d.at_line, "warning", "", (), rows))
        else:
            out.append(Case(d.key, name, "passed", d.summary(), file, d.at_line, "", "", (), rows))
    return out


def tally(cases: Sequence[Case]) -> Mapping[str, int]:
    """Cases per outcome."""
    out = dict.fromkeys(OUTCOMES, 0)
    for c in cases:
        out[c.outcome] += 1
    return out
