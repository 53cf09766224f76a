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
from dataclasses import dataclass
from typing import Any

from ctxkit.model import Unit
from ctxkit.schema import integer, number, plain, setting
from ctxkit.strategies._common import fmt_refs
from ctxkit.strategies.base import State, archive_unit, fmt_int, merged, protected

NAME = "summarize_old"
LABEL = "Summarizing old context"  # what a progress event says while it runs


@dataclass(frozen=True)
class Params:
    """The oldest `old_threshold` of the history becomes one summary of `summary_length` tokens."""

    old_threshold: float = setting(0.6, number(0.0, 1.0), "oldest share of history summarized")
    summary_length: int = setting(300, integer(1), "tokens")
    min_coherence: float = setting(0.7, number(0.0, 1.0), "undo the step below this coherence")


DEFAULTS: dict[str, Any] = plain(Params())


def _cut(state: State, first: int, share: int, tokens: list[int]) -> int:
    """The furthest turn boundary whose span from `first` fits `share`; a safe cut point inside
    a turn when no turn boundary covers at least half the share (one long turn)."""
    from ctxkit.structure import safe_cut_points, turns

    units = list(state.units)
    safe = sorted(set(safe_cut_points(units)))
    starts = {t.start for t in turns(units)} | {len(units)}

    def furthest(candidates: list[int]) -> tuple[int, int]:
        best, covered, running, prev = first, 0, 0, first
        for cut in candidates:
            if cut <= first:
                continue
            running += sum(tokens[prev:cut])
            prev = cut
            if running > share:
                break
            best, covered = cut, running
        return best, covered

    by_turn, turn_covered = furthest([c for c in safe if c in starts])
    if turn_covered >= share / 2:
        return by_turn
    by_block, block_covered = furthest(safe)
    return by_block if block_covered > turn_covered else by_turn


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
