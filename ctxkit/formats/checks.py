"""What validators share: parsing written output, the providers' SDK types (pydantic), and the
rules of the two chat APIs that other formats' checks build on.

Each format's own `validate` lives in its module and uses these; `sdk.problems` is the entry.
The `openai` and `anthropic` packages are development dependencies, imported only here and only
when a check runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import orjson

from ctxkit.formats.common import loads

# At most this many problems per check, so one broken file does not flood a report.
MAX_PROBLEMS = 20
# Keys chat-completions refuses on input that writers have been known to emit.
_REFUSED_OPENAI_KEYS = frozenset({"reasoning_content"})

Check = Callable[[Any], list[str]]


# ---------------------------------------------------------------- parsing


def parsed(data: Any) -> Any:
    """Parsed JSON from text: one document, or the list of its JSONL lines."""
    if not isinstance(data, (str, bytes)):
        return data
    try:
        return loads(data)
    except orjson.JSONDecodeError:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return [loads(line) for line in text.splitlines() if line.strip()]


def app_records(data: Any) -> list[Any]:
    """An app log's records (a one-line log parses as one object)."""
    found = parsed(data)
    return found if isinstance(found, list) else [found]


def is_conversation(obj: Any) -> bool:
    """A chat conversation object: {"messages": [...]} or ShareGPT's {"conversations": [...]}."""
    return isinstance(obj, dict) and (isinstance(obj.get("messages"), list) or isinstance(obj.get("conversations"), list))


def conversations(data: Any) -> list[dict[str, Any]]:
    """Conversation objects ({"messages": [...], ...}) in a written chat file or dataset."""
    found = parsed(data)
    if is_conversation(found):
        return [found]
    if isinstance(found, list) and found and all(is_conversation(x) for x in found):
        return list(found)
    if isinstance(found, list):
        return [{"messages": found}]
    return [{"messages": [found]}]


# ---------------------------------------------------------------- pydantic


@cache
def adapter(name: str) -> Any:
    """The TypeAdapter for one SDK type (built once: building one takes a while)."""
    from pydantic import TypeAdapter

    if name == "openai.messages":
        from openai.types.chat import ChatCompletionMessageParam

        return TypeAdapter(list[ChatCompletionMessageParam])
    if name == "openai.tools":
        from openai.types.chat import ChatCompletionToolUnionParam

        return TypeAdapter(list[ChatCompletionToolUnionParam])
    if name == "openai.function":
        from openai.types.shared_params import FunctionDefinition

        return TypeAdapter(FunctionDefinition)
    if name == "anthropic.messages":
        from anthropic.types import MessageParam

        return TypeAdapter(list[MessageParam])
    if name == "anthropic.system":
        from anthropic.types import TextBlockParam

        return TypeAdapter(str | list[TextBlockParam])
    if name == "anthropic.tools":
        from anthropic.types import ToolUnionParam

        return TypeAdapter(list[ToolUnionParam])
    if name == "responses.item":
        from openai.types.responses import ResponseInputItemParam

        return TypeAdapter(ResponseInputItemParam)
    raise KeyError(name)


def _drain(value: Any) -> None:
    """Consume the lazy iterators pydantic returns for `Iterable` fields (the SDKs type content
    block lists so): their items are only validated when iterated."""
    if isinstance(value, dict):
        for v in value.values():
            _drain(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _drain(v)
    elif isinstance(value, Iterator):
        for v in value:
            _drain(v)


def validate_type(name: str, value: Any, where: str) -> list[str]:
    """Problems of `value` as the SDK type `name`, one line per pydantic error."""
    from pydantic import ValidationError

    try:
        _drain(adapter(name).validate_python(value))
    except ValidationError as exc:
        out = []
        for err in exc.errors()[:MAX_PROBLEMS]:
            loc = ".".join(str(x) for x in err["loc"])
            out.append(f"{where}: {err['msg']} at {loc}" if loc else f"{where}: {err['msg']}")
        # A union reports one error per member; the shortest few say it.
        return sorted(set(out), key=len)[:3]
    return []


# ---------------------------------------------------------------- openai


def openai_problems(conv: dict[str, Any], where: str = "") -> list[str]:
    messages = conv.get("messages")
    if not isinstance(messages, list):
        return [f"{where}no messages list"]
    out: list[str] = []
    for i, msg in enumerate(messages):
        at = f"{where}message {i + 1}"
        out.extend(validate_type("openai.messages", [msg], at))
        if not isinstance(msg, dict):
            continue
        for key in sorted(_REFUSED_OPENAI_KEYS & set(msg)):
            out.append(f"{at}: key `{key}` is not accepted in a request")
        if msg.get("role") == "assistant" and msg.get("content") == "" and not msg.get("tool_calls"):
            out.append(f"{at}: empty assistant message")
    out.extend(openai_pairs(messages, where))
    tools = conv.get("tools")
    if tools is not None:
        out.extend(validate_type("openai.tools", tools, f"{where}tools"))
    return out[:MAX_PROBLEMS]


def openai_pairs(messages: list[Any], where: str) -> list[str]:
    """Each tool message answers a call of the assistant message before its run of results,
    and each call is answered before the next other message."""
    out: list[str] = []
    waiting: dict[str, int] = {}
    open_calls: set[str] = set()
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role == "tool":
            cid = msg.get("tool_call_id")
            if cid not in open_calls:
                out.append(f"{where}message {i + 1}: tool result {cid} answers no call of the assistant message before")
            waiting.pop(str(cid), None)
            continue
        for cid, at in waiting.items():
            out.append(f"{where}message {at}: tool call {cid} has no result")
        waiting = {}
        open_calls = set()
        if role == "assistant":
            for call in msg.get("tool_calls") or []:
                if isinstance(call, dict):
                    waiting[str(call.get("id"))] = i + 1
                    open_calls.add(str(call.get("id")))
    for cid, at in waiting.items():
        out.append(f"{where}message {at}: tool call {cid} has no result")
    return out


# ---------------------------------------------------------------- anthropic


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


def _merged(messages: list[tuple[str, str, Any]]) -> list[tuple[str, str, list[Any]]]:
    """Consecutive messages of one role as the one turn the API reads them as."""
    turns: list[tuple[str, str, list[Any]]] = []
    for at, role, content in messages:
        if turns and turns[-1][1] == role:
            turns[-1][2].extend(_blocks(content))
        else:
            turns.append((at, role, _blocks(content)))
    return turns


def anthropic_rules(messages: list[tuple[str, str, Any]], where: str) -> list[str]:
    """What the Messages API enforces beyond the types, on (where, role, content) messages."""
    out: list[str] = []
    turns = _merged(messages)
    if turns and turns[0][1] != "user":
        out.append(f"{where}{turns[0][0]}: the first message must be the user's")
    for k, (at, role, blocks) in enumerate(turns):
        final = k == len(turns) - 1
        if not blocks and not (final and role == "assistant"):
            out.append(f"{where}{at}: empty content")
        for b in blocks:
            if isinstance(b, dict) and b.get("type") == "text" and not b.get("text") and not (final and role == "assistant"):
                out.append(f"{where}{at}: empty text block")
                break
        if role == "user":
            seen_other = False
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    if seen_other:
                        out.append(f"{where}{at}: a tool_result block after other content (results come first)")
                        break
                else:
                    seen_other = True
        calls = [b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        if calls:
            nxt = turns[k + 1] if k + 1 < len(turns) else None
            answered = {b.get("tool_use_id") for b in nxt[2] if isinstance(b, dict) and b.get("type") == "tool_result"} if nxt else set()
            for cid in calls:
                if cid not in answered and nxt is not None:
                    out.append(f"{where}{at}: tool_use {cid} has no tool_result in the next message")
        results = [b.get("tool_use_id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            prev = turns[k - 1] if k > 0 else None
            called = {b.get("id") for b in prev[2] if isinstance(b, dict) and b.get("type") == "tool_use"} if prev else set()
            for cid in results:
                if cid not in called:
                    out.append(f"{where}{at}: tool_result {cid} answers no tool_use of the message before")
    return out


def anthropic_problems(conv: dict[str, Any], where: str = "") -> list[str]:
    messages = conv.get("messages")
    if not isinstance(messages, list):
        return [f"{where}no messages list"]
    out: list[str] = []
    for i, msg in enumerate(messages):
        out.extend(validate_type("anthropic.messages", [msg], f"{where}message {i + 1}"))
    out.extend(anthropic_rules(
        [(f"message {i + 1}", str(m.get("role")), m.get("content")) for i, m in enumerate(messages) if isinstance(m, dict)],
        where))
    if "system" in conv:
        out.extend(validate_type("anthropic.system", conv["system"], f"{where}system"))
    if "tools" in conv:
        out.extend(validate_type("anthropic.tools", conv["tools"], f"{where}tools"))
    return out[:MAX_PROBLEMS]


# ---------------------------------------------------------------- agent trajectories


def streams(data: Any, key: str) -> list[tuple[str, Any]]:
    """(where, records) of each conversation in written agent output: an object holding its
    records under `key`, a dataset of such objects, or (OpenHands) a bare event stream."""
    found = parsed(data)
    items = found if isinstance(found, list) else [found]
    if items and all(isinstance(x, dict) and key in x for x in items):
        many = len(items) > 1
        return [(f"conversation {n + 1}: " if many else "", x[key]) for n, x in enumerate(items)]
    return [("", items)]


def agent_log(check: Callable[[Any, str], list[str]], key: str) -> Check:
    """A check of every conversation of written agent output (see `streams`)."""

    def run(data: Any) -> list[str]:
        return [p for where, records in streams(data, key) for p in check(records, where)]

    return run


def per_conversation(check: Callable[[dict[str, Any], str], list[str]]) -> Check:
    """A check of every conversation object in written chat output (see `conversations`)."""

    def run(data: Any) -> list[str]:
        convs = conversations(data)
        out: list[str] = []
        for n, conv in enumerate(convs):
            out.extend(check(conv, f"conversation {n + 1}: " if len(convs) > 1 else ""))
        return out

    return run

