"""Simple compactions ctxkit must beat: drop the oldest messages, mask old tool outputs, clear all
but the newest tool results, LangChain's `trim_messages`.

Each is a function `(transcript, budget_tokens, fit) -> transcript` that returns a transcript
within `budget_tokens` (system prompt and tool schemas included) whenever one exists, and never
splits a tool call from its result: when its own step is not enough it drops the oldest
messages, as a harness would on the next overflow. `fit` is a `Fit`: the tokenizer and counting
options the budget is judged with, and cached unit costs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

from ctxkit.counting import Fit
from ctxkit.model import Transcript, Unit
from ctxkit.structure import blocks

MASKED = "[Old tool output omitted]"  # JetBrains' observation masking placeholder, in words
CLEARED = "[Old tool result content cleared]"  # Anthropic's clear_tool_uses placeholder


Recipe = Callable[[Transcript, int, Fit], Transcript]


def is_result(u: Unit) -> bool:
    """A tool's output (a tool message, or a result block in a user record)."""
    return u.tool_call_id is not None or u.role == "tool"


def drop_oldest(
    t: Transcript, budget: int, fit: Fit, units: Sequence[Unit] | None = None
) -> Transcript:
    """Drop the oldest messages (a call with its results as one block), system units kept,
    until the rest fits."""
    units = list(t.units if units is None else units)
    total: float = fit.total(t, units)
    keep = [True] * len(units)
    for start, end in blocks(units):
        if total <= budget:
            break
        if any(units[i].role == "system" for i in range(start, end)):
            continue
        for i in range(start, end):
            keep[i] = False
            total -= fit.unit(units[i])
    return t.replace(units=[u for u, k in zip(units, keep, strict=True) if k])


def _replaced(u: Unit, text: str) -> Unit:
    return u.replace(content=text, meta={**u.meta, "peer": "masked"})


def mask_observations(t: Transcript, budget: int, fit: Fit) -> Transcript:
    """Observation masking (Lindenbauer et al., "The Complexity Trap", 2025): replace the oldest
    tool outputs with a short placeholder, newest kept, until the transcript fits; then drop the
    oldest messages if it still does not."""
    units = list(t.units)
    total: float = fit.total(t, units)
    for i, u in enumerate(units):
        if total <= budget:
            break
        if not is_result(u) or u.content == MASKED:
            continue
        new = _replaced(u, MASKED)
        saved = fit.unit(u) - fit.unit(new)
        if saved > 0:
            units[i] = new
            total -= saved
    return drop_oldest(t, budget, fit, units)


def clear_tool_uses(t: Transcript, budget: int, fit: Fit, keep: int = 3) -> Transcript:
    """Anthropic's `clear_tool_uses` context edit (Claude Code's microcompact keeps 5): every
    tool result but the newest `keep` is cleared once the context is over budget; then the
    oldest messages are dropped if it still does not fit."""
    if fit.total(t) <= budget:
        return t
    results = [i for i, u in enumerate(t.units) if is_result(u)]
    clear = set(results[: max(0, len(results) - keep)])
    units = [_replaced(u, CLEARED) if i in clear else u for i, u in enumerate(t.units)]
    return drop_oldest(t, budget, fit, units)


def langchain_trim(t: Transcript, budget: int, fit: Fit) -> Transcript:
    """LangChain's `trim_messages(strategy="last", start_on="human", include_system=True)`, its
    token counter ctxkit's own (so both judge the same budget), mapped back to our units."""
    from langchain_core.messages import (
        AIMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        trim_messages,
    )

    by_id: dict[str, Unit] = {}
    messages: list[Any] = []
    for k, u in enumerate(t.units):
        mid = f"{k}:{u.id}"
        by_id[mid] = u
        if u.role == "system":
            messages.append(SystemMessage(content=u.content, id=mid))
        elif is_result(u):
            messages.append(
                ToolMessage(content=u.content, tool_call_id=u.tool_call_id or "", id=mid)
            )
        elif u.role == "assistant":
            calls = [{"name": c.name, "args": _args(c.arguments), "id": c.id} for c in u.tool_calls]
            messages.append(AIMessage(content=u.content, tool_calls=calls, id=mid))
        else:
            messages.append(HumanMessage(content=u.content, id=mid))
    fixed = fit.fixed(t)

    def counter(msgs: list[Any]) -> int:
        return round(sum(fit.unit(by_id[str(m.id)]) for m in msgs))

    kept = trim_messages(
        messages,
        max_tokens=round(budget - fixed),
        token_counter=counter,
        strategy="last",
        include_system=True,
        start_on="human",
        allow_partial=False,
    )
    return t.replace(units=[by_id[str(m.id)] for m in kept])


def _args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


def with_meta(t: Transcript, **meta: Any) -> Transcript:
    """`t` with `meta` merged into its metadata (what a recipe says about its own run)."""
    return dataclasses.replace(t, metadata={**t.metadata, **meta})
