"""Writing an OpenHands event stream: each unit back as its source event (its text replaced
when compaction changed it), a made-up unit as an event OpenHands loads (see `openhands`).
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

from ctxkit.formats.common import args_text, joins, tools_as
from ctxkit.formats.openhands_events import (
    META_KEY,
    NAME,
    TOOL_ACTIONS,
    TOOL_SHAPE,
    as_dict,
    event_args,
    forgotten_ids,
    hidden_ids,
    is_event,
    response_of,
    with_args,
)
from ctxkit.model import ToolCall, Transcript, Unit


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).replace(tzinfo=None).isoformat()


def _message(role: str, text: str) -> dict[str, Any]:
    return {"source": "user" if role == "user" else "agent", "message": text, "action": "message",
            "args": {"content": text, "image_urls": None, "wait_for_response": False}}


def _condense(text: str) -> dict[str, Any]:
    return {"source": "environment", "message": text, "observation": "condense", "content": text, "extras": {}}


def _metadata(u: Unit, call: ToolCall, k: int, rid: str) -> dict[str, Any]:
    """A `tool_call_metadata` holding the model's response with all the unit's calls."""
    return {
        "function_name": call.name,
        "tool_call_id": call.id,
        "model_response": {
            "id": rid,
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant",
                "content": u.content or None,
                "tool_calls": [{"index": n, "id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments}}
                               for n, c in enumerate(u.tool_calls)],
            }}],
        },
        "total_calls_in_response": len(u.tool_calls),
    }


def _arguments(text: str) -> Any:
    from ctxkit.formats.common import args_object

    return args_object(text)


class _Writer:
    """Emits events in order, giving ids and mapping `cause` links as it goes."""

    def __init__(self, renumber: bool, flat: bool = False, source_ids: set[Any] | None = None) -> None:
        self.out: list[dict[str, Any]] = []
        self.renumber = renumber
        self.source_ids = source_ids or set()  # ids of the source's events (written or not)
        self.flat = flat  # an early stream: events without ids, arguments at the top
        self.ids: dict[int, int] = {}  # source id -> written id
        self.last = -1
        self.clock: str | None = None
        self.calls: dict[str, dict[str, Any]] = {}  # tool call id -> written action event

    def emit(self, ev: dict[str, Any], made: bool = False) -> dict[str, Any]:
        if self.renumber and (made or isinstance(ev.get("id"), int)):  # an event with no id keeps none
            orig = ev.get("id")
            new = max(self.last + 1, orig) if isinstance(orig, int) and not made else self.last + 1
            if isinstance(orig, int) and not made:
                self.ids.setdefault(orig, new)
            if new != orig:
                ev = {"id": new, **{k: v for k, v in ev.items() if k != "id"}}
            self.last = new
            cause = ev.get("cause")
            if isinstance(cause, int) and not made:
                mapped = self.ids.get(cause)  # an earlier event: known by now, or no longer written
                if mapped is None and cause in self.source_ids:
                    ev = {k: v for k, v in ev.items() if k != "cause"}
                elif mapped is not None and mapped != cause:
                    ev = {**ev, "cause": mapped}
            if ev.get("action") == "condensation" and isinstance(ev.get("args"), dict):
                ev = self._condensation(ev)
        if isinstance(ev.get("timestamp"), str):
            self.clock = ev["timestamp"]
        meta = ev.get("tool_call_metadata")
        if "action" in ev and isinstance(meta, dict) and meta.get("tool_call_id") is not None:
            self.calls[str(meta["tool_call_id"])] = ev
        self.out.append(ev)
        return ev

    def new_id(self, orig: Any) -> Any:
        """The id an event of the source is written with (None: not written)."""
        return self.ids.get(orig) if self.renumber else orig

    def _condensation(self, ev: dict[str, Any]) -> dict[str, Any]:
        """The forgotten ids of a condensation, as written (events no longer written dropped)."""
        args = dict(ev["args"])
        ids = args.get("forgotten_event_ids")
        if isinstance(ids, list):
            mapped = [self.ids[i] for i in ids if isinstance(i, int) and i in self.ids]
            if mapped != ids:
                args["forgotten_event_ids"] = mapped
        else:
            forgotten = forgotten_ids(args)
            mapped = [self.ids[i] for i in forgotten if i in self.ids]
            start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
            if mapped and (mapped[0], mapped[-1]) != (start, end):
                args["forgotten_events_start_id"], args["forgotten_events_end_id"] = mapped[0], mapped[-1]
            elif not mapped and forgotten:
                args["forgotten_events_start_id"] = args["forgotten_events_end_id"] = None
                args["forgotten_event_ids"] = []
        return ev if args == ev["args"] else {**ev, "args": args}

    def made(self, ev: dict[str, Any], ts: float | None) -> dict[str, Any]:
        if self.flat:  # in the stream's own shape: no id, time or cause; results follow their actions
            args = ev.get("args") if "action" in ev else {}
            return self.emit({**{k: v for k, v in ev.items() if k not in ("args", "cause", "source", "message")},
                              **(args or {})})
        stamp = _iso(ts) or self.clock or _iso(0.0)
        return self.emit({"id": None, "timestamp": stamp, **ev}, made=True)


def _changed(u: Unit, ev: dict[str, Any], texts: dict[str, str]) -> dict[str, Any] | None:
    """The source event with the unit's text replaced; None when it cannot hold the change."""
    kind = ev.get("action")
    args = dict(event_args(ev))
    if kind is None:
        if ev.get("observation") == "recall":
            return None  # OpenHands renders its own text from the extras
        return {**ev, "content": u.content}
    if kind in ("message", "system"):
        args["content"] = u.content
        return _said(ev, args, u.content)
    if kind == "finish":
        args["thought"] = u.content
        rid, _ = response_of(ev)
        if rid is not None:
            texts[rid] = u.content  # else OpenHands appends the response's old text
        return _said(ev, args, u.content)
    if kind in TOOL_ACTIONS and u.tool_calls:
        rid, msg = response_of(ev)
        if (u.meta.get(META_KEY) or {}).get("says") or msg is None:
            if "thought" in args or msg is None:
                args["thought"] = u.content
            if rid is not None:
                texts[rid] = u.content
        out = with_args(ev, args)
        if msg is not None:
            new_args = {c.id: c.arguments for c in u.tool_calls}
            old = {str(c.get("id")): args_text((c.get("function") or {}).get("arguments"))
                   for c in msg.get("tool_calls") or [] if isinstance(c, dict)}
            if any(old.get(k) != v for k, v in new_args.items() if k in old):
                out["tool_call_metadata"] = _patched_response(ev["tool_call_metadata"], None, new_args)
        return out
    return None


def _said(ev: dict[str, Any], args: dict[str, Any], text: str) -> dict[str, Any]:
    """A message or finish action with new text: its arguments, and its `message` when it has one."""
    out = with_args(ev, args)
    return {**out, "message": text} if "message" in ev else out


def _patched_response(meta: dict[str, Any], text: str | None, arguments: dict[str, str] | None) -> dict[str, Any]:
    meta = copy.deepcopy(meta)
    msg = meta["model_response"]["choices"][0]["message"]
    if text is not None:
        msg["content"] = text
    for c in msg.get("tool_calls") or []:
        if isinstance(c, dict) and arguments and str(c.get("id")) in arguments and isinstance(c.get("function"), dict):
            c["function"]["arguments"] = arguments[str(c["id"])]
    return meta


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Events for a transcript (see the module doc)."""
    same = t.source_format == NAME
    kept = (t.metadata.get(META_KEY) or {}).get("events") if same else None
    others = sorted((x for x in kept or [] if isinstance(x, list) and len(x) == 2), key=lambda x: x[0])

    def sourced(u: Unit) -> dict[str, Any] | None:
        return u.source if same and is_event(u.source) and u.group is not None else None

    def at(u: Unit) -> int:
        info = u.meta.get(META_KEY) if u.meta else None
        if isinstance(info, dict) and isinstance(info.get("summary_at"), int):
            return info["summary_at"]
        return u.group  # type: ignore[return-value]

    verbatim = same and all(u.raw is not None and not joins(u) for u in t.units)
    # A response's text goes with its first action; with that one gone, its other actions
    # (which repeat the whole response) must not bring the text back.
    saying = {response_of(u.source)[0] for u in t.units if sourced(u) is not None
              and (u.meta.get(META_KEY) or {}).get("says")}
    events = [ev for ev in map(sourced, t.units) if ev is not None]
    flat = bool(events) and not any("id" in ev for ev in events)
    # Ids stay as they are unless an event comes in between (or a cause is no longer written).
    w = _Writer(renumber=not flat, flat=flat,
                source_ids={ev.get("id") for ev in events} | {ev.get("id") for _, ev in others})
    texts: dict[str, str] = {}  # model response id -> its new text
    summary_cond: dict[int, dict[str, Any]] = {}  # condensation index -> what to set
    read_summary = (t.metadata.get(META_KEY) or {}).get("summary_of") if same else None
    nexts: list[int | None] = [None] * (len(t.units) + 1)
    for k in range(len(t.units) - 1, -1, -1):
        u = t.units[k]
        nexts[k] = at(u) if sourced(u) is not None else nexts[k + 1]
    pos = 0

    def flush(upto: int | None) -> None:
        nonlocal pos
        while pos < len(others) and (upto is None or others[pos][0] < upto):
            i, ev = others[pos]
            if i in summary_cond and ev.get("action") == "condensation":
                ev = {**ev, "args": {**ev["args"], **summary_cond[i]}}
            w.emit(ev)
            pos += 1

    if isinstance(read_summary, int) and not any(
            (sourced(u) or {}).get("action") == "condensation" for u in t.units):
        summary_cond[read_summary] = {"summary": None, "summary_offset": None}  # ctxkit dropped it
    for k, u in enumerate(t.units):
        ev = sourced(u)
        flush(nexts[k])
        if ev is not None and ev.get("action") == "condensation":
            # OpenHands' own summary: its condensation event carries it (written in its place)
            if verbatim:
                continue
            view = _view_length(w, others[pos:])
            change: dict[str, Any] = {}
            if u.content != ev["args"].get("summary"):
                change["summary"] = u.content
            if view != ev["args"].get("summary_offset"):
                change["summary_offset"] = view
            if change:
                summary_cond[u.group] = change  # type: ignore[index]
            continue
        if ev is not None and u.raw is not None and not joins(u):
            rid = response_of(ev)[0] if u.tool_calls else None
            if rid is not None and rid not in saying:
                texts.setdefault(rid, "")
            w.emit(u.raw)
            continue
        if ev is not None:
            changed = _changed(u, ev, texts)
            if changed is not None:
                w.emit(changed)
                continue
        _made(w, u, t)
    flush(None)
    out = w.out
    if texts:
        out = [_with_text(ev, texts) for ev in out]
    if same and (t.metadata.get(META_KEY) or {}).get("pairs"):
        return _pairs(out), {}
    return out, {}


# What an early evaluation output puts beside an action that had no observation, and the reverse.
_NO_OBSERVATION = {"message": "No observation", "observation": "null", "content": "", "extras": {}}
_NO_ACTION = {"message": "No action", "action": "null", "args": {}}


def _pairs(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Events as [action, observation] pairs again (a lone event gets a null partner)."""
    out: list[list[dict[str, Any]]] = []
    k = 0
    while k < len(events):
        ev = events[k]
        nxt = events[k + 1] if k + 1 < len(events) else None
        if "action" in ev and nxt is not None and "observation" in nxt:
            out.append([ev, nxt])
            k += 2
            continue
        out.append([ev, dict(_NO_OBSERVATION)] if "action" in ev else [dict(_NO_ACTION), ev])
        k += 1
    return out


def _view_length(w: _Writer, rest: list[list[Any]]) -> int:
    """How many events written so far OpenHands keeps in its view (a summary's offset)."""
    hidden = hidden_ids(w.out)
    for _, ev in rest:  # condensations still to come forget events written already
        if ev.get("action") == "condensation" and isinstance(ev.get("args"), dict):
            hidden.update(w.new_id(i) for i in forgotten_ids(ev["args"]))
    return sum(1 for ev in w.out if ev.get("id") not in hidden)


def _with_text(ev: dict[str, Any], texts: dict[str, str]) -> dict[str, Any]:
    """An action whose model response got a new text (every action of that response holds it)."""
    if "action" not in ev:
        return ev
    rid, msg = response_of(ev)
    if rid is None or rid not in texts or msg is None or msg.get("content") == texts[rid]:
        return ev
    return {**ev, "tool_call_metadata": _patched_response(ev["tool_call_metadata"], texts[rid], None)}


def _made(w: _Writer, u: Unit, t: Transcript) -> None:
    """Events for a unit that has no source event (made up by compaction, or another format's)."""
    last = w.out[-1] if w.out else None
    # A summary or placeholder is a `condense` observation even when it joins the message before:
    # OpenHands shows it right after that message (consecutive user messages are its own way,
    # as with recalls), and the user's own message stays as it was.
    if joins(u) and last is not None and u.role != "tool" and u.type not in ("summary", "placeholder"):
        if last.get("action") == "message" and (last.get("source") == "user") == (u.role == "user"):
            text = f"{last['args'].get('content') or ''}\n\n{u.content}"
            w.out[-1] = {**last, "message": text, "args": {**last["args"], "content": text}}
            return
        if last.get("observation") == "condense" and u.role == "user":
            text = f"{last.get('content') or ''}\n\n{u.content}"
            w.out[-1] = {**last, "message": text, "content": text}
            return
    if u.role == "system":
        args: dict[str, Any] = {"content": u.content}
        if t.tools:
            args["tools"] = tools_as(TOOL_SHAPE, t.tools)
        w.made({"source": "agent", "message": u.content, "action": "system", "args": args}, u.timestamp)
    elif u.role == "tool":
        action = w.calls.get(u.tool_call_id or "")
        if action is None:
            w.made(_message("user", u.content), u.timestamp)
            return
        meta = action["tool_call_metadata"]
        kind = action.get("action")
        obs = {"think": "think", "call_tool_mcp": "mcp"}.get(str(kind), "mcp")
        extras: dict[str, Any] = {}
        if obs == "mcp":
            call = next((c for c in (response_of(action)[1] or {}).get("tool_calls") or []
                         if isinstance(c, dict) and str(c.get("id")) == u.tool_call_id), {})
            fn = as_dict(call.get("function"))
            extras = {"name": str(fn.get("name") or meta.get("function_name") or ""),
                      "arguments": _arguments(args_text(fn.get("arguments")))}
        w.made({"source": "agent", "message": u.content, "cause": action.get("id"), "observation": obs,
                "tool_call_metadata": meta, "content": u.content, "extras": extras}, u.timestamp)
    elif u.role == "assistant" and u.tool_calls:
        rid = f"ctxkit-{u.id}"
        for k, c in enumerate(u.tool_calls):
            w.made({"source": "agent", "message": c.name, "action": "call_tool_mcp",
                    "tool_call_metadata": _metadata(u, c, k, rid),
                    "args": {"name": c.name, "arguments": _arguments(c.arguments), "thought": u.content if k == 0 else ""}},
                   u.timestamp)
    elif u.role == "assistant":
        if u.content or u.images:
            w.made(_message("assistant", u.content), u.timestamp)
    elif u.type in ("summary", "placeholder"):
        w.made(_condense(u.content), u.timestamp)
    else:
        w.made(_message("user", u.content), u.timestamp)


