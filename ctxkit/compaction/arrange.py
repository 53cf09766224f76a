"""The last two passes of a compaction, so what it hands back reads as a conversation.

`give_back`: a strategy works in coarse steps and often lands well under the goal; every token
under the goal is context thrown away. The units the chain changed or removed are restored,
newest first, while the whole stays within the goal.

`arrange`: units the chain made up (summaries, placeholders for removed runs, handovers) get
the role that alternates with their neighbours, so no provider sees two turns of one role in a
row that the input did not have. Where no role alternates (a summary between the first request
and an assistant step), the unit joins the message before it (`meta["join"]`), which writers
put in one message. Tool results count as the user's turn here, as Anthropic's API sees them
(the strictest of the providers).
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxkit.model import Unit
from ctxkit.strategies.base import State


def _changed(before: Unit, after: Unit) -> bool:
    return (
        before.content != after.content
        or before.tool_calls != after.tool_calls
        or before.reasoning != after.reasoning
    )


def give_back(state: State, original: Sequence[Unit]) -> State:
    """`state` with the units it changed or removed restored, newest first, while the whole
    stays within `state.target`; `state` itself when nothing can come back."""
    room = state.target - state.tokens()
    if room <= 0:
        return state
    by_id = {u.id: u for u in original}
    units = list(state.units)
    sizes = state.units_tokens()

    def size(run: Sequence[Unit]) -> int:
        return sum(state.with_units(list(run)).units_tokens())

    restored = False
    for i in range(len(units) - 1, -1, -1):
        u = units[i]
        before = by_id.get(u.id)
        if before is not None and _changed(before, u):
            delta = size([before]) - sizes[i]
            if delta <= room:
                units[i] = before
                room -= delta
                restored = True
        elif u.type == "placeholder" and u.meta.get("removed_ids"):
            ids = [str(x) for x in u.meta["removed_ids"]]
            run = [by_id[x] for x in ids if x in by_id]
            if len(run) == len(ids):
                delta = size(run) - sizes[i]
                if delta <= room:
                    units[i : i + 1] = run
                    room -= delta
                    restored = True
    if not restored:
        return state
    new = state.with_units(units)
    return new if new.tokens() <= state.target else state


def made_up(u: Unit) -> bool:
    """A unit the compaction wrote (summary, placeholder of a removed run, handover): no source
    record, so its role and message are ours to choose."""
    return u.source is None and u.raw is None and u.type in ("summary", "placeholder") and "strategy" in u.meta


def _turn_role(u: Unit | None) -> str | None:
    """The side of the conversation a unit speaks for: user (tool results too) or assistant;
    None for system units and the edges."""
    if u is None or u.role == "system":
        return None
    return "assistant" if u.role == "assistant" else "user"


def _merge_runs(units: Sequence[Unit]) -> list[Unit]:
    """Placeholders of removed runs that ended up next to each other (two strategies removed
    neighbouring blocks) become one: one note, not two turns."""
    out: list[Unit] = []
    for u in units:
        prev = out[-1] if out else None
        if (
            prev is not None
            and made_up(prev)
            and made_up(u)
            and prev.type == u.type == "placeholder"
            and prev.meta.get("removed_ids")
            and u.meta.get("removed_ids")
        ):
            meta = {
                **prev.meta,
                "refs": [*prev.meta.get("refs", ()), *u.meta.get("refs", ())],
                "removed_ids": [*prev.meta["removed_ids"], *u.meta["removed_ids"]],
            }
            out[-1] = prev.replace(content=f"{prev.content} {u.content}", meta=meta)
            continue
        out.append(u)
    return out


def arrange(units: Sequence[Unit]) -> list[Unit]:
    """Roles and joins for the made-up units (see the module docstring); other units unchanged
    except a user turn that must join a made-up user unit opening the conversation."""
    out = _merge_runs(units)
    for i, u in enumerate(out):
        if not made_up(u):
            continue
        prev = _turn_role(out[i - 1]) if i > 0 else None
        nxt = _turn_role(out[i + 1]) if i + 1 < len(out) else None
        meta = {k: v for k, v in u.meta.items() if k != "join"}
        if prev is None:
            # The first turn of the conversation is the user's (Anthropic requires it).
            out[i] = u.replace(role="user", meta=meta)
            # the user turns that follow it join its message, however many the compaction
            # brought together (the first request, then a later one whose answer was summarized)
            j = i + 1
            while j < len(out) and _turn_role(out[j]) == "user" and out[j].role != "tool":
                n = out[j]
                out[j] = n.replace(meta={**n.meta, "join": True}, source=n.source)
                j += 1
            continue
        options = [r for r in (u.role, "assistant" if u.role == "user" else "user") if r not in (prev, nxt)]
        if nxt is None:
            # the context ends on it (what it stands for came after every message kept): an
            # assistant turn there would be read as the answer to continue, so it joins the
            # user's turn before it
            options = [] if prev == "user" else ["user"]
        if options:
            out[i] = u.replace(role=options[0], meta=meta)
        else:
            before = out[i - 1]
            role = before.role if before.role in ("user", "assistant") else "user"
            out[i] = u.replace(role=role, meta={**meta, "join": True})
    return out
