"""ShareGPT conversations (read only): `{"conversations": [{from, value}], "tools", "system"}`."""

from __future__ import annotations

from typing import Any

import orjson

from ctxkit.formats.common import Source, args_text, finish, loads
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "sharegpt"
RECORDS = False  # detected per conversation, never as a list of message records

ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "function_call": "assistant",
    "observation": "tool",
    "tool": "tool",
    "function": "tool",
}


def detect(obj: Any) -> bool:
    """An object whose `conversations` turns have `from` and `value`."""
    if isinstance(obj, list):
        return bool(obj) and all(detect(o) for o in obj[:5])
    if not isinstance(obj, dict) or not isinstance(obj.get("conversations"), list):
        return False
    turns = obj["conversations"]
    return all(isinstance(t, dict) and "from" in t and "value" in t for t in turns[:20])


def _tools(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str) and value.strip():
        try:
            value = loads(value)
        except orjson.JSONDecodeError:
            return []
    if isinstance(value, dict):
        value = [value]
    return [t for t in value if isinstance(t, dict)] if isinstance(value, list) else []


def read(turns: list[Any], src: Source) -> Transcript:
    """Units from ShareGPT turns; function_call/observation pairs get synthesized call ids."""
    units: list[Unit] = []
    pending: list[ToolCall] = []
    envelope = dict(src.envelope)
    tools = _tools(envelope.pop("tools", None))
    system = envelope.pop("system", None)
    if isinstance(system, str) and system:
        units.append(finish(Unit(id="system", role="system", content=system, raw=system,
                                 meta={"top_level_system": True})))
    n = 0
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str) or turn.get("from") not in ROLES:
            src.bad(i, "expected a ShareGPT turn {from: human|gpt|system|function_call|observation, value}", turn)
            continue
        source = turn["from"]
        role = ROLES[source]
        value = turn["value"]
        uid = f"u{len(units)}"
        meta: dict[str, Any] = {"source_role": source} if source not in ("human", "gpt", "system") else {}
        if source == "function_call":
            try:
                call = loads(value)
            except orjson.JSONDecodeError:
                call = {"name": "", "arguments": value}
            if not isinstance(call, dict):
                call = {"name": "", "arguments": call}
            tc = ToolCall(f"call_{n}", str(call.get("name") or ""), args_text(call.get("arguments")))
            n += 1
            pending.append(tc)
            units.append(finish(Unit(id=uid, role="assistant", tool_calls=[tc], raw=turn, group=i, meta=meta)))
        elif role == "tool":
            tc_or_none = pending.pop(0) if pending else None
            if tc_or_none is None:
                src.warn(i, "observation without a function_call before it")
            units.append(finish(Unit(id=uid, role="tool", content=value,
                                     tool_call_id=tc_or_none.id if tc_or_none else None,
                                     name=tc_or_none.name if tc_or_none else None, raw=turn, group=i, meta=meta)))
        else:
            units.append(finish(Unit(id=uid, role=role, content=value, raw=turn, group=i, meta=meta)))
    return Transcript(
        units=units,
        id=src.tid,
        source_format=NAME,
        layout=src.layout,
        tools=tools,
        envelope=envelope,
        line=src.line,
    )
