"""The fresh start of a log in which the user cleared the conversation (`/clear`): the agent's
own context since then, whole, beside one line naming where the rest went."""

from __future__ import annotations

from collections.abc import Sequence

from ctxkit import structure
from ctxkit.model import Unit
from ctxkit.strategies.base import State, archive_unit, refs_hint


def since_clear(state: State, original: Sequence[Unit], system: list[Unit]) -> State | None:
    """After the user's last `/clear` the agent itself held only what came since: when that
    fits whole beside one line naming where the rest went, it is the context (a handover would
    spend the room telling what the agent had dropped, and cut the last answer to make room)."""
    start = structure.conversation_start(original)
    if not start:
        return None
    commands = [u for u in original[start:] if structure.is_session_command(u)]
    for archived in ([], commands) if commands else ([],):
        # the session commands since (`/add f`, `/drop f`): kept when they fit, else archived
        # with the rest (the agent ran them; the model got none of them)
        ids = {u.id for u in archived}
        gone = [*(u for u in original[:start] if u.role != "system"), *archived]
        kept = [u for u in original[start:] if u.role != "system" and u.id not in ids]
        what = "those before the user cleared the conversation" + (", and the commands since" if archived else "")
        found = _since(state, system, gone, kept, what)
        if found is not None:
            return found
    return None


def _since(state: State, system: list[Unit], before: list[Unit], after: list[Unit], what: str) -> State | None:
    """System units, one line naming where `before` (`what` they are) went, then `after` whole;
    None when it does not fit (nothing archived)."""
    from ctxkit.archive.store import REF_PROBE

    if not before or not after:
        return None

    def built(refs: list[str]) -> State:
        line = Unit(
            id="ctxkit-cleared",
            role="user",
            type="placeholder",
            content=f"[{len(before):,} earlier messages ({what}) {refs_hint(refs, 1)}]",
            meta={"refs": refs, "strategy": "fresh_start", "removed_ids": [u.id for u in before]},
        )
        return State(units=(*system, line, *after), target=state.target, ctx=state.ctx, in_recovery=True)

    if not built([REF_PROBE] * len(before)).fits():
        return None
    return built([archive_unit(state, u) for u in before])
