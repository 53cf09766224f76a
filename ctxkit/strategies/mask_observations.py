"""`mask_observations`: tool outputs older than the last `keep_last_turns` turns become a
one-line placeholder naming the tool, the size and the ref:
`[bash output, 6,073 bytes, archived as ref-123456789012345678]`. An output not larger than
its placeholder stays as it is.

"The Complexity Trap" (Lindenbauer et al., 2025) found this as good as LLM summaries at half
the cost: the agent's own reasoning and calls stay, only stale observations go.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxkit.fields import integer, plain, setting
from ctxkit.model import Unit
from ctxkit.strategies._common import failure_note
from ctxkit.strategies.base import (
    State,
    archived_as,
    fmt_int,
    last_action,
    merged,
    protected,
    replace_tool_outputs,
)

NAME = "mask_observations"
LABEL = "Masking old observations"  # what a progress event says while it runs


@dataclass(frozen=True)
class Params:
    """Tool outputs older than the last `keep_last_turns` turns become placeholders."""

    keep_last_turns: int = setting(3, integer(0))


DEFAULTS: dict[str, Any] = plain(Params())
# With no more user turns than keep_last_turns (one long agent run), the window is the last
# STEP_WINDOW agent steps (assistant calls), the M = 10 of "The Complexity Trap"; a
# `keep_last_steps` parameter overrides it.
STEP_WINDOW = 10


def mask_text(tool: str, size_bytes: int, ref: str, failure: str = "") -> str:
    """The one line that replaces a masked tool output; a failed one keeps what failed (its
    exit code and error line), so the next step still has its reason."""
    what = f", {failure}" if failure else ""
    return f"[{tool} output, {fmt_int(size_bytes)} bytes{what}, {archived_as([ref])}]"


def mask_observations(state: State, params: Mapping[str, Any]) -> State | None:
    """Mask tool outputs before the last N turns; None when nothing would get smaller."""
    from ctxkit.structure import turns

    p = merged(DEFAULTS, params)
    keep_last = max(0, int(p["keep_last_turns"]))
    all_turns = [t for t in turns(state.units) if not t.is_preamble]
    if keep_last == 0:
        cutoff = len(state.units)
    elif len(all_turns) > keep_last:
        cutoff = all_turns[-keep_last].start
    else:
        # one long agent run (a single request, many steps): count agent steps instead
        keep_steps = max(1, int(p.get("keep_last_steps") or STEP_WINDOW))
        steps = [i for i, u in enumerate(state.units) if u.role == "assistant" and u.tool_calls]
        if len(steps) <= keep_steps:
            return None
        cutoff = steps[-keep_steps]
    keep = protected(state) | last_action(state)

    def stub(unit: Unit, tool: str, ref: str) -> str:
        # a masked line costs ~20 tokens; an output not larger than that is left alone
        return mask_text(tool, len(unit.content.encode()), ref, failure_note(unit))

    return replace_tool_outputs(state, stub, NAME, keep=keep, end=cutoff)
