"""`summarize_old`: the oldest `old_threshold` of the history, by tokens, becomes one summary.

The span starts after the system units and ends at a turn boundary (a safe cut point inside
the first turn when that turn alone is larger than the share). Its units go to the archive;
one summary unit (role user, type summary) of about `summary_length` tokens takes their place,
with every ref in its meta. Protected units in the span (first request, P1) stay verbatim,
right after the summary. A previous ctxkit summary in the span is rolled into the new one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ctxkit.model import Unit
from ctxkit.strategies._common import fmt_refs
from ctxkit.strategies.base import State, archive_unit, fmt_int, merged, protected

NAME = "summarize_old"
DEFAULTS: dict[str, Any] = {"old_threshold": 0.6, "summary_length": 300}


def _cut(state: State, first: int, share: int, tokens: list[int]) -> int:
    """The furthest turn boundary (else safe cut point) whose span from `first` fits `share`."""
    from ctxkit.structure import safe_cut_points, turns

    units = list(state.units)
    safe = set(safe_cut_points(units))
    by_turn = sorted({t.start for t in turns(units)} | {len(units)})
    for candidates in (by_turn, sorted(safe)):
        best = first
        running = 0
        prev = first
        for cut in candidates:
            if cut <= first or cut not in safe:
                continue
            running += sum(tokens[prev:cut])
            prev = cut
            if running > share:
                break
            best = cut
        if best > first:
            return best
    return first


def summarize_old(state: State, params: Mapping[str, Any]) -> State | None:
    """Replace the oldest share of the history by one summary; None when it would not help."""
    p = merged(DEFAULTS, params)
    threshold = float(p["old_threshold"])
    length = int(p["summary_length"])
    units = state.units
    tokens = state.units_tokens()
    first = 0
    while first < len(units) and units[first].role == "system":
        first += 1
    history = sum(tokens[first:])
    cut = _cut(state, first, int(history * threshold), tokens)
    if cut <= first:
        return None
    keep = protected(state)
    span = range(first, cut)
    gone = [i for i in span if i not in keep]
    if len(gone) < 2:
        return None
    previous = [units[i] for i in gone if units[i].type == "summary"]
    previous_text = "\n\n".join(u.content for u in previous) or None
    body = [units[i] for i in gone if units[i].type != "summary"]
    summarizer = state.ctx.summarizer
    if summarizer is None:
        from ctxkit.summarize import summarize_extractive

        text = summarize_extractive(body, length, previous_text, state.ctx.tokenizer)
    else:
        text = summarizer(body, length, previous_text)
    refs = [archive_unit(state, units[i]) for i in gone]
    carried = [str(r) for u in previous for r in u.meta.get("refs", ())]
    all_refs = list(dict.fromkeys(refs + carried))
    gone_tokens = sum(tokens[i] for i in gone)
    header = (
        f"[ctxkit: summary of {len(gone)} earlier messages ({fmt_int(gone_tokens)} tokens);"
        f" originals: ctxkit recall {fmt_refs(refs)}]"
    )
    digest = hashlib.sha1("\x1f".join(units[i].id for i in gone).encode()).hexdigest()[:8]
    summary = Unit(
        id=f"ctxkit-summary-{digest}",
        role="user",
        type="summary",
        content=f"{header}\n{text}",
        timestamp=units[gone[0]].timestamp,
        meta={"refs": all_refs, "strategy": NAME, "summarized_ids": [units[i].id for i in gone]},
    )
    kept_in_span = [units[i] for i in span if i in keep]
    new = state.with_units([*units[:first], summary, *kept_in_span, *units[cut:]])
    return new if new.tokens() < state.tokens() else None
