"""A message too large for the room it gets: its head and tail around a note naming the ref of
the whole, which the archive keeps (the last request of a fresh start, the last action's
messages, an answer since a `/clear`)."""

from __future__ import annotations

from ctxkit.model import Unit
from ctxkit.strategies.base import State, archive_unit, archived_as

MIN_CUT_NOTE_TOKENS = 48  # about what the note of a shortened message costs


def fit_text(state: State, request: Unit, room: int, what: str = "request") -> Unit:
    """The last request verbatim, or, when it alone cannot fit, offloaded: the archive keeps it
    whole and the context keeps as much of its head and tail as fits, with the ref. (`what`
    names it in the note: the last action's message is cut the same way.)"""
    tok = state.ctx.tokenizer
    if tok.count(request.content) <= room or tok.count(request.content) <= 2 * MIN_CUT_NOTE_TOKENS:
        return request  # fits, or too short for a note and a useful part of it to beat it
    ref = archive_unit(state, request)
    text = request.content

    def shortened(keep_chars: int) -> str:
        return cut_text(text, keep_chars, what, ref)

    low, high = 0, len(text)
    while low < high:  # the longest head + tail that fits the room
        mid = (low + high + 1) // 2
        if tok.count(shortened(mid)) <= room:
            low = mid
        else:
            high = mid - 1
    return request.replace(
        content=shortened(low),
        meta={**request.meta, "ref": ref, "strategy": "recovery", "offloaded_request": True},
    )


def cut_text(text: str, keep_chars: int, what: str, ref: str) -> str:
    """`text`'s head and tail, `keep_chars` in all, around a note naming the ref of the whole."""
    head, tail = text[: keep_chars * 2 // 3], text[len(text) - keep_chars // 3 :]
    note = (
        f"[this {what} is larger than the context allows: {len(text) - keep_chars:,} of its "
        f"{len(text):,} characters are left out here, the whole {what} {archived_as([ref])}]"
    )
    return f"{head}\n{note}\n{tail}" if tail else f"{head}\n{note}"
