"""ShareGPT conversations: `{"conversations": [{from, value}], "tools", "system"}`.

LLaMA-Factory's layout: `function_call` turns hold `{"name", "arguments"}` as JSON text, each
answered by an `observation` turn; `system` and `tools` (JSON text) sit beside the turns."""

from __future__ import annotations

from typing import Any

import orjson

from ctxkit.formats.base import Format
from ctxkit.formats.checks import openai_problems, per_conversation, validate_type
from ctxkit.formats.common import (
    Source,
    args_object,
    args_text,
    dumps,
    finish,
    is_reasoning_only,
    joins,
    loads,
    raw_groups,
)
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "sharegpt"
MESSAGES_KEY = "conversations"  # the key of the turns in a conversation object

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


def detect(turns: list[Any]) -> bool:
    """ShareGPT turns (the list under `conversations`): each has `from` and `value`."""
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
    tools_text = envelope.pop("tools", None)
    tools = _tools(tools_text)
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
        metadata={"tools_text": tools_text} if tools_text is not None else {},
    )


_FROM = {"user": "human", "assistant": "gpt", "system": "system", "tool": "observation"}


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    """A bare function schema (what ShareGPT's `tools` holds) from any known tool shape."""
    if isinstance(tool.get("function"), dict):
        return dict(tool["function"])
    if "input_schema" in tool:
        fn = {k: v for k, v in tool.items() if k in ("name", "description")}
        fn["parameters"] = tool["input_schema"]
        return fn
    return tool


def _call_turn(c: ToolCall) -> dict[str, Any]:
    return {"from": "function_call", "value": dumps({"name": c.name, "arguments": args_object(c.arguments)})}


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Turns for a transcript, and `system` and `tools` to put beside them.

    System units go to the top-level `system`; a unit marked to join the turn before is
    joined to its value with a blank line; reasoning alone is no turn."""
    same = t.source_format == NAME
    # A `system` turn read from the turns stays one; any other system unit goes on top.
    system = [u for u in t.units if u.role == "system" and not (same and isinstance(u.raw, dict))]
    extras: dict[str, Any] = {}
    if system and any(u.content for u in system):
        extras["system"] = "\n\n".join(u.content for u in system if u.content)
    turns: list[Any] = []
    # Calls of one message after the first, each written after the result of the one before:
    # ShareGPT alternates function_call and observation, one call at a time.
    pending: list[ToolCall] = []
    for raw, run in raw_groups([u for u in t.units if not any(u is s for s in system)]):
        if raw is not None and same and not joins(run[0]) and not pending:
            turns.append(raw)
            continue
        for u in run:
            if is_reasoning_only(u) or (u.role == "assistant" and not (u.content or u.tool_calls)):
                continue
            last = turns[-1] if turns else None
            if joins(u) and isinstance(last, dict) and last.get("from") == _FROM.get(u.role):
                turns[-1] = {**last, "value": f"{last['value']}\n\n{u.content}" if last["value"] else u.content}
                continue
            if u.role == "tool":
                turns.append(u.raw if same and isinstance(u.raw, dict) else {"from": "observation", "value": u.content})
                if pending:
                    turns.append(_call_turn(pending.pop(0)))
                continue
            turns.extend(_call_turn(c) for c in pending)  # calls whose results never came
            pending = []
            if u.content or not u.tool_calls:
                turns.append({"from": _FROM.get(u.role, "human"), "value": u.content})
            if u.tool_calls:
                turns.append(_call_turn(u.tool_calls[0]))
                pending = list(u.tool_calls[1:])
    turns.extend(_call_turn(c) for c in pending)
    text = t.metadata.get("tools_text") if same else None
    if isinstance(text, str) and _tools(text) == t.tools:
        extras["tools"] = text  # the source's own text, also when it lists no tool
    elif t.tools:
        extras["tools"] = dumps([_function(tool) for tool in t.tools])
    return turns, extras


# ---------------------------------------------------------------- validating


_SHAREGPT_FROM = frozenset({"human", "user", "gpt", "assistant", "system", "function_call", "observation", "tool", "function"})


def _problems(conv: dict[str, Any], where: str = "") -> list[str]:
    from ctxkit.formats import read_text, write_transcripts

    turns = conv.get("conversations")
    if not isinstance(turns, list):
        return [f"{where}no conversations list"]
    out: list[str] = []
    prev = None
    for i, turn in enumerate(turns):
        at = f"{where}turn {i + 1}"
        if not isinstance(turn, dict) or turn.get("from") not in _SHAREGPT_FROM or not isinstance(turn.get("value"), str):
            out.append(f"{at}: expected {{from, value}} with a known `from`")
            continue
        kind = turn["from"]
        if kind == "function_call":
            try:
                call = loads(turn["value"])
            except orjson.JSONDecodeError:
                call = None
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                out.append(f"{at}: function_call value is not JSON {{name, arguments}}")
        if kind == "observation" and prev not in ("function_call", "observation"):
            out.append(f"{at}: observation without a function_call before it")
        prev = kind
    tools = conv.get("tools")
    if tools is not None:
        try:
            parsed = loads(tools) if isinstance(tools, str) else tools
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, list):
            out.append(f"{where}tools: not a JSON list of function schemas")
        else:
            for k, fn in enumerate(parsed):
                out.extend(validate_type("openai.function", fn, f"{where}tools[{k}]"))
    if out:
        return out
    import io

    buf = io.StringIO()
    write_transcripts(read_text(orjson.dumps(conv).decode(), "sharegpt"), buf, "openai")
    return [f"{where}as openai: {p}" for p in per_conversation(openai_problems)(buf.getvalue())]



validate = per_conversation(_problems)


FORMAT = Format.of_module(__name__, label="ShareGPT conversations", shape="messages", bare=False)
