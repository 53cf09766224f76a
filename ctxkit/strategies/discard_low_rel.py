"""`discard_low_rel`: drop the least relevant `discard_percent` of the unprotected blocks,
one placeholder per dropped run.

`placeholder_detail` "brief" says how many messages went and names up to 8 refs (then
"+N more (ctxkit recall --list)"); "linked" lists every ref. Either way the placeholder text
carries what `ctxkit recall` resolves; all refs are in its meta too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxkit.errors import ConfigError
from ctxkit.schema import choice, number, plain, setting
from ctxkit.strategies._common import fmt_refs
from ctxkit.strategies._runs import removable_blocks, remove_runs
from ctxkit.strategies.base import State, merged, protected, refs_hint
from ctxkit.strategies.prioritize_recent import block_scores

NAME = "discard_low_rel"
LABEL = "Discarding low-relevance units"  # what a progress event says while it runs
DETAILS = ("brief", "linked")


@dataclass(frozen=True)
class Params:
    """Drop the least relevant `discard_percent` of units behind placeholders."""

    discard_percent: float = setting(0.3, number(0.0, 1.0), "least relevant share dropped")
    placeholder_detail: str = setting(
        "brief", choice(lambda: DETAILS), "brief | linked (with archive refs)"
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
        for s, e in removable_blocks(state, protected(state))
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

    def text(n: int, tokens: int, refs: list[str]) -> str:
        head = f"[ctxkit: {n} low-relevance message{'s' if n != 1 else ''} removed"
        if detail == "linked":
            return f"{head}; recall: {fmt_refs(refs, limit=len(refs))}]"
        return f"{head}; {refs_hint(refs)}]"

    return remove_runs(state, remove, NAME, text)
