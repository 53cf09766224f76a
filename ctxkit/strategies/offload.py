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

from ctxkit.fields import integer, plain, setting
from ctxkit.model import Unit
from ctxkit.strategies._common import failure_note
from ctxkit.strategies.base import (
    State,
    archived_as,
    fmt_int,
    merged,
    protected,
    replace_tool_outputs,
)

NAME = "offload"
LABEL = "Offloading large tool outputs"  # what a progress event says while it runs
DEPTH = 0  # it moves outputs whole to the archive (`strategies.DEPTHS`)


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
    # an output not over the threshold stays where it is
    small = {i for i, u in enumerate(state.units) if len(u.content.encode()) <= threshold}

    def stub(unit: Unit, tool: str, ref: str) -> str:
        preview = preview_of(unit.content, preview_chars)
        return stub_text(tool, len(unit.content.encode()), preview, ref, failure_note(unit))

    return replace_tool_outputs(state, stub, NAME, keep=protected(state) | small)
