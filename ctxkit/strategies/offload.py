"""`offload`: tool results larger than `threshold_bytes` go to the archive, leaving a stub.

The stub names the tool, the size, shows the first `preview_chars` characters and the ref that
`ctxkit recall` resolves. The call stays, and the stub keeps the call id, so the pair is intact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxkit.schema import integer, plain, setting
from ctxkit.strategies._common import is_compacted, is_tool_output, tool_name, tool_names
from ctxkit.strategies.base import State, archive_unit, fmt_int, merged, placeholder, protected

NAME = "offload"
LABEL = "Offloading large tool outputs"  # what a progress event says while it runs


@dataclass(frozen=True)
class Params:
    """Tool results above `threshold_bytes` go to the archive behind a preview stub."""

    threshold_bytes: int = setting(4096, integer(1), "tool results above this go to the archive")
    preview_chars: int = setting(200, integer(0))


DEFAULTS: dict[str, Any] = plain(Params())


def stub_text(tool: str, size_bytes: int, tokens: int, preview: str, ref: str) -> str:
    """The text that replaces an offloaded tool result."""
    head = (
        f"[ctxkit: {tool} output offloaded ({fmt_int(size_bytes)} bytes, {fmt_int(tokens)} tokens);"
        f" full text: ctxkit recall {ref}]"
    )
    if not preview:
        return head
    return f"{head}\n{preview}\n[... {fmt_int(size_bytes - len(preview.encode()))} more bytes]"


def _preview(text: str, chars: int) -> str:
    if chars <= 0:
        return ""
    cut = text[:chars]
    # end on a line or word boundary when one is close, so the preview reads cleanly
    for sep in ("\n", " "):
        at = cut.rfind(sep)
        if at >= chars * 0.6:
            return cut[:at].rstrip()
    return cut.rstrip()


def offload(state: State, params: Mapping[str, Any]) -> State | None:
    """Move tool results over `threshold_bytes` to the archive; None when there are none."""
    p = merged(DEFAULTS, params)
    threshold = int(p["threshold_bytes"])
    preview_chars = int(p["preview_chars"])
    keep = protected(state)
    names = tool_names(state.units)
    tokens = state.units_tokens()
    out = list(state.units)
    changed = False
    for i, unit in enumerate(state.units):
        if i in keep or not is_tool_output(unit) or is_compacted(unit):
            continue
        size = len(unit.content.encode())
        if size <= threshold:
            continue
        ref = archive_unit(state, unit)
        text = stub_text(tool_name(unit, names), size, tokens[i], _preview(unit.content, preview_chars), ref)
        out[i] = placeholder(unit, ref, text, NAME)
        changed = True
    return state.with_units(out) if changed else None
