"""`discard_low_rel`: drop the least relevant `discard_percent` of the unprotected blocks,
one placeholder per dropped run.

`placeholder_detail` "brief" says how many messages went, their tokens and every ref
(`[3 earlier messages (1,234 tokens) archived as ref-a ref-b ref-c]`); "linked" also says what
each message was (`[2 earlier messages archived: user message (40 tokens) as ref-a; bash output
(1,194 tokens) as ref-b]`). Either way the text carries every ref `recall` resolves, and meta
too; a run not larger than its placeholder stays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxkit.errors import ConfigError
from ctxkit.fields import choice, number, plain, setting
from ctxkit.strategies._runs import linked_text, removable_blocks, remove_runs, run_text
from ctxkit.strategies.base import State, merged, untouchable, where_work_stands
from ctxkit.strategies.prioritize_recent import block_scores

NAME = "discard_low_rel"
LABEL = "Discarding low-relevance units"  # what a progress event says while it runs
DETAILS = ("brief", "linked")


@dataclass(frozen=True)
class Params:
    """Drop the least relevant `discard_percent` of units behind placeholders."""

    discard_percent: float = setting(0.3, number(0.0, 1.0), "least relevant share dropped")
    placeholder_detail: str = setting(
        "brief", choice(lambda: DETAILS), "brief | linked (what each archived message was)"
    )
    min_coherence: float = setting(0.6, number(0.0, 1.0), "undo the step below this coherence")


DEFAULTS: dict[str, Any] = plain(Params())
MIN_BLOCK_TOKENS = 40


def discard_low_rel(state: State, params: Mapping[str, Any]) -> State | None:
    """Archive the bottom `discard_percent` of removable blocks by relevance; None if none."""
    p = merged(DEFAULTS, params)
    detail = str(p["placeholder_detail"])
    if detail not in DETAILS:
        raise ConfigError(f"breaking_strategy.discard_low_rel.placeholder_detail {detail!r}: expected one of {', '.join(DETAILS)}")
    tokens = state.units_tokens()
    # a block smaller than its placeholder would cost more than it saves
    candidates = [
        (s, e)
        for s, e in removable_blocks(state, untouchable(state) | where_work_stands(state))
        if sum(tokens[s:e]) >= MIN_BLOCK_TOKENS
    ]
    count = math.ceil(float(p["discard_percent"]) * len(candidates))
    if not candidates or count <= 0:
        return None
    # P1 is protected outside recovery; in recovery it is boosted like prioritize_recent does
    scores = block_scores(state, candidates, float(p.get("priority_boost", 1.5)))
    # least relevant first; among equals the oldest goes first
    order = sorted(range(len(candidates)), key=lambda k: (scores[k], candidates[k][0]))
    remove = {i for k in order[:count] for i in range(*candidates[k])}
    return remove_runs(state, remove, NAME, linked_text if detail == "linked" else run_text)
