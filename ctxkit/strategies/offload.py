"""`offload`: tool results larger than `threshold_bytes` go to the archive, leaving a stub.

The stub names the tool and the size, carries the ref that `recall` resolves and shows the first
`preview_chars` characters:

    [bash output, 6,073 bytes, archived as ref-123456789012345678; it begins:]
    <preview>
    [... 5,880 more bytes]

The call stays, and the stub keeps the call id, so the pair is intact. A stub is never longer
than the output it replaces (a small threshold can make it so: that output then stays).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxkit.archive.store import REF_PROBE
from ctxkit.fields import integer, plain, setting
from ctxkit.strategies._common import (
    failure_note,
    is_compacted,
    is_tool_output,
    tool_name,
    tool_names,
)
from ctxkit.strategies.base import (
    State,
    archive_unit,
    archived_as,
    fmt_int,
    merged,
    placeholder,
    protected,
    smaller_than,
)

NAME = "offload"
LABEL = "Offloading large tool outputs"  # what a progress event says while it runs


@dataclass(frozen=True)
class Params:
    """Tool results above `threshold_bytes` go to the archive behind a preview stub."""

    threshold_bytes: int = setting(4096, integer(1), "tool results above this go to the archive")
    preview_chars: int = setting(200, integer(0))


DEFAULTS: dict[str, Any] = plain(Params())


def stub_text(tool: str, size_bytes: int, preview: str, ref: str, failure: str = "") -> str:
    """The text that replaces an offloaded tool result; a failed one names what failed (its
    exit code and error line) when the preview does not show it."""
    what = f", {failure}" if failure and failure.split(": ", 1)[-1] not in preview else ""
    head = f"[{tool} output, {fmt_int(size_bytes)} bytes{what}, {archived_as([ref])}"
    if not preview:
        return head + "]"
    more = fmt_int(size_bytes - len(preview.encode()))
    return f"{head}; it begins:]\n{preview}\n[... {more} more bytes]"


def preview_of(text: str, chars: int) -> str:
    """The first `chars` characters, ended on a line or word boundary when one is close."""
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
    tok = state.ctx.tokenizer
    out = list(state.units)
    changed = False
    for i, unit in enumerate(state.units):
        if i in keep or not is_tool_output(unit) or is_compacted(unit):
            continue
        size = len(unit.content.encode())
        if size <= threshold:
            continue
        tool = tool_name(unit, names)
        preview = preview_of(unit.content, preview_chars)
        failure = failure_note(unit)
        if not smaller_than(stub_text(tool, size, preview, REF_PROBE, failure), [unit], tok):
            continue
        ref = archive_unit(state, unit)
        text = stub_text(tool, size, preview, ref, failure)
        out[i] = placeholder(unit, ref, text, NAME)
        changed = True
    return state.with_units(out) if changed else None
