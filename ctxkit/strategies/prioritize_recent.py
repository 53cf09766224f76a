"""`prioritize_recent`: keep the most recent `recent_bias` of the units, plus every block whose
relevance to the task is at least `rel_threshold` (P1 boosted by `priority_boost`), plus the
protected units; the rest go to the archive, one placeholder per removed run
(`[3 earlier messages (1,234 tokens) archived as ref-a ref-b ref-c]`).

Recency is counted in units, at block granularity (a call and its results count together).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxkit.fields import number, plain, setting
from ctxkit.strategies._common import block_text
from ctxkit.strategies._runs import removable_blocks, remove_runs, run_text
from ctxkit.strategies.base import State, merged, untouchable, where_work_stands

NAME = "prioritize_recent"
LABEL = "Prioritizing recent and relevant units"  # what a progress event says while it runs


@dataclass(frozen=True)
class Params:
    """Keep the last `recent_bias` of units plus units at least `rel_threshold` relevant."""

    recent_bias: float = setting(0.2, number(0.0, 1.0), "newest share always kept")
    rel_threshold: float = setting(0.5, number(0.0, 1.0), "keep older units at least this relevant")
    priority_boost: float = setting(1.5, number(0.0, None), "P1 relevance multiplier")


DEFAULTS: dict[str, Any] = plain(Params())


def block_scores(state: State, spans: list[tuple[int, int]], priority_boost: float) -> list[float]:
    """Relevance of each block to the task query; blocks holding a P1 unit are boosted."""
    from ctxkit.embedders.relevance import relevance_scores

    texts = [block_text(state.units, s, e) for s, e in spans]
    scores = relevance_scores(texts, state.ctx.query, state.ctx.embedder) if texts else []
    out = []
    for (s, e), score in zip(spans, scores, strict=True):
        if any(state.units[i].is_p1 for i in range(s, e)):
            score *= priority_boost
        out.append(float(score))
    return out


def prioritize_recent(state: State, params: Mapping[str, Any]) -> State | None:
    """Archive old blocks that are neither recent, relevant nor protected; None if there are none."""
    from ctxkit.structure import blocks

    p = merged(DEFAULTS, params)
    recent_bias = float(p["recent_bias"])
    rel_threshold = float(p["rel_threshold"])
    units = state.units
    # the recent tail: whole blocks from the end until recent_bias of the units are covered
    want = math.ceil(recent_bias * len(units))
    recent_from = len(units)
    for start, _end in reversed(blocks(units)):
        if len(units) - recent_from >= want:
            break
        recent_from = start
    candidates = [
        (s, e)
        for s, e in removable_blocks(state, untouchable(state) | where_work_stands(state))
        if s < recent_from
    ]
    if not candidates:
        return None
    scores = block_scores(state, candidates, float(p["priority_boost"]))
    remove = {
        i
        for (s, e), score in zip(candidates, scores, strict=True)
        if score < rel_threshold
        for i in range(s, e)
    }
    return remove_runs(state, remove, NAME, run_text)
