"""`guard`'s verdicts for people: one verdict as a table with the why, the decision and its
notes (`render_verdict`), and a dataset's summary (`dataset_summary`)."""

from __future__ import annotations

import math
from typing import Any

from ctxkit.english import counted
from ctxkit.gates.exits import combine_exit_codes
from ctxkit.report.tables import render_table

SHOWN_FAILING = 20  # transcripts listed under a dataset's summary (all with --details)


def failing_row(verdict: Any, code: int) -> dict[str, Any]:
    """A row of the dataset summary's table: a transcript that does not pass."""
    t = verdict.transcript
    r = verdict.chosen or verdict.results[0]
    return {
        "line": t.line if t.line is not None else "-",
        "verdict": "fits" if verdict.chosen is not None else "final",
        "target": r.target.name,
        "status": r.status,
        "used": r.used,
        "limit": r.limit,
        "exit": code,
        "file": t.path or "<stdin>",  # last: a long path is cut, not the figures
    }


def dataset_summary(
    codes: list[int], tally: dict[str, int], failing: list[dict[str, Any]], fail_on: str, details: bool
) -> str:
    """A dataset's summary: the total, then the transcripts that do not pass (the first few)."""
    counts = ", ".join(
        f"{name} {tally[name]}"
        for name in ("ok", "warn", "compact", "block", "overflow", "final")
        if name in tally
    )
    lines = [f"{counted(len(codes), 'transcript')}: {counts}; exit {combine_exit_codes(codes)}"]
    if failing:
        lines.append(f"{len(failing):,} do not pass (fail-on {fail_on}):")
        lines.append(render_table(failing[:SHOWN_FAILING]))
        if len(failing) > SHOWN_FAILING:
            lines.append(f"... and {len(failing) - SHOWN_FAILING:,} more")
    if not details:
        lines.append("(--details: each transcript's full verdict)")
    return "\n".join(lines) + "\n"



def _pct(frac: float) -> float | None:
    return round(frac * 100, 1) if math.isfinite(frac) else None


def _render_agents(verdict: Any) -> list[str]:
    out = []
    for r in verdict.results:
        for a in r.agents:
            line = (
                f"as {a.agent} on {r.target.name}: compacts at {a.trigger:,} ({a.formula}); "
                f"at {a.used:,} it {'would compact now' if a.compacts_now else 'would not yet'}"
            )
            if a.compactions is not None:
                units = verdict.transcript.units
                if a.first_at is None:
                    line += "; over the transcript: never"
                else:
                    line += (
                        f"; over the transcript: first at message {a.first_at + 1} "
                        f"({units[a.first_at].id}), {a.compactions} time"
                        + ("s" if a.compactions != 1 else "")
                    )
            out.append(line)
    return out


def _render_usage(verdict: Any) -> list[str]:
    """What the provider recorded beside the local count, once per distinct figure."""
    out: list[str] = []
    seen: set[tuple[int, int]] = set()
    for r in verdict.results:
        u = r.usage
        if u is None or (u.fit.last_recorded, u.fit.last_counted) in seen:
            continue
        seen.add((u.fit.last_recorded, u.fit.last_counted))
        which = f"its original (in {u.origin})" if u.origin else "the log"
        line = (
            f"usage: {which} records {u.fit.last_recorded:,} input tokens at its last call; ctxkit counts "
            f"{u.fit.last_counted:,} for that context ({r.tokenizer}); {u.explain()} (--no-usage "
            "decides on the local count)"
        )
        out.append(line)
    from ctxkit.formats import FORMATS

    fmt = FORMATS.get(verdict.transcript.source_format)
    if not out and fmt is not None and fmt.omits:
        from ctxkit.budget.agents import agent_of_format, measured_for

        agent = agent_of_format(fmt.name)
        known = measured_for(agent, "interactive") if agent else None
        sends = (
            f" ({known.agent} {known.version} sends {known.per_call:,} tokens of them per call "
            f"with no user configuration: measured, `ctxkit agent probe {known.agent}`)"
            if known is not None
            else ""
        )
        out.append(
            f"note: this {fmt.label} log records no usage and never logs {fmt.omits}{sends}; the "
            "count leaves them out (give --system/--tools)"
        )
    recorded = verdict.recorded_model
    from ctxkit.budget.models import find_model

    named = {find_model(r.target.name)[1] or r.target.name for r in verdict.results}
    if recorded is not None and recorded["matched"] not in named and recorded["name"] not in named:
        if recorded["matched"]:
            out.append(
                f"model: the log records {recorded['name']} ({recorded['matched']} in "
                f"models.toml, window {recorded['context_window']:,}); --model "
                f"{recorded['matched']} checks against its window and tokenizer"
            )
        else:
            close = recorded["suggestions"]
            hint = f" (nearest: {', '.join(close)})" if close else ""
            out.append(
                f"model: the log records {recorded['name']}, which models.toml does not list"
                f"{hint}; give --window and --max-output to check against it"
            )
    return out


def render_verdict(verdict: Any, fail_on: str) -> str:
    """The human report of one verdict: a row per target, then the why, the decision and notes."""
    t = verdict.transcript
    where = t.path or "<stdin>"
    if t.line is not None:
        where += f":{t.line}"
    lines = [f"{where}: {len(t.units)} units"]
    rows = []
    for r in verdict.results:
        rows.append(
            {
                "target": r.target.name,
                "status": r.status,
                "decision": r.decision,
                "used": r.used,
                "limit": r.limit,
                "bound by": r.target.bound_by,
                "remaining": r.remaining,
                "used %": _pct(r.used_fraction),
                **{k: v for k, v in r.regions.items()},
                "tokenizer": r.tokenizer,
            }
        )
    lines.append(render_table(rows))
    for r in verdict.results:
        tg = r.target
        if tg.bound_by == "agent":
            bounds = tg.thresholds.bounds(tg.limit)
            why = (
                f"limit {tg.name}: {tg.limit:,}, the most {tg.agent} sends on a window of "
                f"{tg.context_window:,} (the log's own model and agent); compact from "
                f"{bounds['compact']:,}"
            )
        else:
            why = (
                f"limit {tg.name}: {tg.limit:,} bound by {tg.bound_by}; model {tg.effective_limit:,} = "
                f"window {tg.context_window:,} - buffer {tg.buffer_tokens:,} - max output {tg.max_output_tokens:,}"
            )
        if tg.policy_limit is not None:
            why += f"; policy {tg.policy_limit:,} ({tg.policy_rule})"
        lines.append(why)
    code = verdict.exit_code(fail_on)
    if verdict.chosen is not None:
        lines.append(f"verdict: fits {verdict.chosen.target.name} ({verdict.status}), exit {code}")
    else:
        lines.append(f"verdict: final, no target fits, exit {code}")
    errors = verdict.structural_errors() if verdict.checked else []
    if errors:
        lines[-1] += f"; --check found {len(errors)} structural errors"
    lines.extend(_render_usage(verdict))
    lines.extend(_render_agents(verdict))
    for r in verdict.results:
        for note in r.notes:
            lines.append(f"note {r.target.name}: {note}")
    for r in verdict.results:
        if r.pending is not None:
            lines.extend(_render_pending(r))
    for r in verdict.results:
        if r.replay is not None:
            lines.extend(_render_replay(r, fail_on))
    if verdict.checked:
        if not verdict.problems:
            lines.append("check: no structural problems")
        for p in verdict.problems:
            sev = getattr(p, "severity", "error")
            lines.append(f"check {sev}: {p.kind} [{p.unit_id}]: {p.message}")
    return "\n".join(lines) + "\n"


def _render_pending(r: Any) -> list[str]:
    plan = r.pending
    head = (
        f"pending {r.target.name}: {plan.tokens:,} tokens in {len(plan.items)} outputs, room {plan.room:,}: "
        + ("fits as is" if plan.fits_raw else f"would overflow by {plan.tokens - plan.room:,}")
    )
    lines = [head]
    if not plan.fits_raw:
        rows = [
            {
                "#": i.index + 1,
                "name": i.name,
                "bytes": i.bytes,
                "tokens": i.tokens,
                "action": i.action,
                "after": i.tokens_after,
            }
            for i in plan.items
        ]
        lines.append(render_table(rows))
        lines.append(
            f"pending {r.target.name}: after the plan {plan.tokens_after:,} tokens, "
            + (f"status {plan.status_after}" if plan.fits_after else "still over: compact first")
        )
    return lines


def _render_replay(r: Any, fail_on: str) -> list[str]:
    rp = r.replay
    parts = []
    for status in ("warn", "compact", "block", "overflow"):
        f = rp.first[status]
        if f is None:
            parts.append(f"{status} never")
        else:
            parts.append(
                f"{status} at message {f['message']} ({f['unit_id']}, {f['tokens']:,} tokens)"
            )
    crossed = any(rp.first[s] is not None for s in ("warn", "compact", "block", "overflow"))
    summary = "first " + ", ".join(parts) if crossed else "no threshold crossed"
    lines = [f"replay {r.target.name}: {rp.checks} checks; {summary}"]
    lines.append(
        f"replay {r.target.name}: the guard would fire {rp.fires} times (fail-on {fail_on}); "
        f"{rp.over_hits} over-hits"
        + (
            f", at most {rp.max_over_hits_per_hour} in one hour"
            if rp.max_over_hits_per_hour is not None
            else ", no timestamps to place them in time"
        )
        + (
            f"; more than 2 in 1 hour first at message {rp.trigger['message']} ({rp.trigger['unit_id']})"
            if rp.trigger
            else ""
        )
    )
    return lines
