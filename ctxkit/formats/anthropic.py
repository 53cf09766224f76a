"""Anthropic Messages API: role + content blocks, top-level `system` and `tools`."""

from __future__ import annotations

from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import anthropic_problems, per_conversation
from ctxkit.formats.common import (
    IMAGE_BLOCKS,
    Source,
    args_object,
    args_text,
    block_text,
    blocks_text,
    finish,
    is_reasoning_only,
    joins,
    link_group_sizes,
    raw_groups,
    source_records,
    timestamp_of,
    tools_as,
)
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "anthropic"
EXTENSION = ".json"  # what `simulate` names its files

_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "document", "search_result"}
)


def detect(obj: Any) -> bool:
    """Messages whose content blocks are Anthropic's (tool_use, tool_result, thinking, images
    with a `source`); plain text messages are left to openai."""
    records = obj if isinstance(obj, list) else [obj]
    found = False
    for rec in records[:200]:
        if not isinstance(rec, dict) or rec.get("role") not in ("user", "assistant", "system"):
            return False
        if "tool_calls" in rec or "tool_call_id" in rec:
            return False
        content = rec.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict):
                    kind = block.get("type")
                    if kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block):
                        found = True
                    elif kind in ("image_url", "input_audio"):
                        return False
    return found


def tool_units(
    block: dict[str, Any],
    *,
    uid: str,
    group: int,
    raw: Any,
    names: dict[str, str],
    ts: float | None,
    src: Source | None = None,
) -> Unit:
    """One tool unit from a `tool_result` block (shared with the Claude Code reader)."""
    text, images = blocks_text(block.get("content"), src=src)
    cid = str(block.get("tool_use_id") or "")
    meta: dict[str, Any] = {}
    if block.get("is_error"):
        meta["is_error"] = True
    return Unit(
        id=uid,
        role="tool",
        content=text,
        timestamp=ts,
        tool_call_id=cid,
        name=names.get(cid),
        images=images,
        raw=raw,
        group=group,
        meta=meta,
    )


def assistant_parts(
    content: Any, names: dict[str, str], src: Source | None = None
) -> tuple[list[str], list[str], list[ToolCall], int]:
    """Text parts, thinking parts, tool calls and image count of an assistant content value;
    other blocks (server tool results...) add what the model reads of them to the text parts."""
    if isinstance(content, str):
        return [content], [], [], 0
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    images = 0
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "thinking":
            thinking.append(str(block.get("thinking") or ""))
        elif kind in ("tool_use", "server_tool_use"):
            cid = str(block.get("id") or "")
            name = str(block.get("name") or "")
            names[cid] = name
            calls.append(ToolCall(cid, name, args_text(block.get("input"))))
        elif kind in IMAGE_BLOCKS:
            images += 1
        else:
            text, n = block_text(block, src=src)
            if text:
                texts.append(text)
            images += n
    return texts, thinking, calls, images


def message_usage(usage: dict[str, Any]) -> dict[str, int]:
    """One call's usage as a message records it: the whole input (uncached + cache reads + cache
    writes), its cache reads and writes, and the output."""

    def n(key: str) -> int:
        v = usage.get(key)
        return v if isinstance(v, int) else 0

    read, write = n("cache_read_input_tokens"), n("cache_creation_input_tokens")
    return {
        "input_tokens": n("input_tokens") + read + write,
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "output_tokens": n("output_tokens"),
    }


def add_blocks(unit: Unit, rec: dict[str, Any], texts: list[str], thinking: list[str], tool_calls: list[ToolCall],
               images: int) -> None:
    """Another content block of the response a unit holds, written as a record of its own (an
    app log writes each block of a response so): its parts joined to the unit's."""
    if texts:
        unit.content = "\n".join([unit.content, *texts]) if unit.content else "\n".join(texts)
    if thinking:
        unit.reasoning = "\n".join([unit.reasoning, *thinking]) if unit.reasoning else "\n".join(thinking)
    unit.tool_calls.extend(tool_calls)
    unit.images += images
    unit.source.append(rec)


def read(records: list[Any], src: Source) -> Transcript:
    """Units from Messages API records; a user record's tool results become one tool unit each."""
    units: list[Unit] = []
    names: dict[str, str] = {}
    envelope = dict(src.envelope)
    tools = envelope.pop("tools", None)
    if "system" in envelope:
        system = envelope.pop("system")
        text, _ = blocks_text(system, src=src)
        units.append(
            finish(Unit(id="system", role="system", content=text, raw=system, meta={"top_level_system": True}))
        )
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or rec.get("role") not in ("user", "assistant", "system"):
            src.bad(i, "expected a message object with role user or assistant", rec)
            continue
        role = rec["role"]
        content = rec.get("content")
        ts = timestamp_of(rec.get("timestamp"))
        base = f"u{len(units)}"
        if role == "assistant":
            texts, thinking, calls, images = assistant_parts(content, names, src)
            units.append(
                finish(
                    Unit(
                        id=base,
                        role="assistant",
                        content="\n".join(texts),
                        timestamp=ts,
                        tool_calls=calls,
                        reasoning="\n".join(thinking),
                        images=images,
                        raw=rec,
                        group=i,
                    )
                )
            )
            continue
        if role == "system" or not isinstance(content, list):
            text, images = blocks_text(content, src=src)
            units.append(finish(Unit(id=base, role=role, content=text, timestamp=ts, images=images, raw=rec, group=i)))
            continue
        rest: list[Any] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                unit = tool_units(block, uid=f"u{len(units)}", group=i, raw=rec, names=names, ts=ts, src=src)
                if unit.tool_call_id not in names:
                    src.warn(i, f"tool result {unit.tool_call_id} has no matching tool_use before it")
                units.append(finish(unit))
            else:
                rest.append(block)
        if rest or len(content) == 0:
            text, images = blocks_text(rest, src=src)
            units.append(finish(Unit(id=f"u{len(units)}", role="user", content=text, timestamp=ts, images=images, raw=rec, group=i)))
    link_group_sizes(units)
    t = Transcript(
        units=units,
        id=src.tid,
        source_format=NAME,
        layout=src.layout,
        tools=tools if isinstance(tools, list) else [],
        envelope=envelope,
        line=src.line,
    )
    if tools is not None and not isinstance(tools, list):
        t.envelope["tools"] = tools
    return t


def content_blocks(rec: dict[str, Any]) -> list[Any]:
    """The content blocks of a Messages API record or of a Claude Code record's `message`."""
    msg = rec.get("message") if isinstance(rec.get("message"), dict) else rec
    content = msg.get("content") if isinstance(msg, dict) else None
    return content if isinstance(content, list) else []


def signed_thinking(u: Unit) -> list[dict[str, Any]]:
    """The unit's thinking blocks as its source had them (the API wants each with its
    `signature`), when the reasoning is unchanged; none otherwise (unsigned thinking is refused)."""
    if not u.reasoning:
        return []
    blocks = [
        b
        for rec in source_records(u)
        for b in content_blocks(rec)
        if isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")
    ]
    text = "\n".join(str(b.get("thinking") or "") for b in blocks if b.get("type") == "thinking")
    if not blocks or text != u.reasoning:
        return []
    if any(b.get("type") == "thinking" and not b.get("signature") for b in blocks):
        return []
    return blocks


def tool_use_block(c: ToolCall, sources: list[dict[str, Any]]) -> dict[str, Any]:
    """A tool_use block for a call: the source's block when its arguments are unchanged."""
    for rec in sources:
        for b in content_blocks(rec):
            if isinstance(b, dict) and b.get("type") in ("tool_use", "server_tool_use") and b.get("id") == c.id:
                if args_text(b.get("input")) == c.arguments:
                    return b
    return {"type": "tool_use", "id": c.id, "name": c.name, "input": args_object(c.arguments)}


def assistant_blocks(u: Unit) -> list[dict[str, Any]]:
    """Content blocks of an assistant unit: signed thinking, text, tool calls."""
    sources = source_records(u)
    blocks: list[dict[str, Any]] = list(signed_thinking(u))
    if u.content:
        blocks.append({"type": "text", "text": u.content})
    blocks.extend(tool_use_block(c, sources) for c in u.tool_calls)
    return blocks


def _assistant(u: Unit) -> dict[str, Any]:
    blocks = assistant_blocks(u)
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        return {"role": "assistant", "content": u.content}
    return {"role": "assistant", "content": blocks}


def tool_result_block(u: Unit, original: Any = None) -> dict[str, Any]:
    """A tool unit's `tool_result` block: the source's (`original`), its content replaced when
    the unit changed, or a new one."""
    if isinstance(original, dict):
        return original if u.raw is not None else {**original, "content": u.content}
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": u.tool_call_id or "", "content": u.content}
    if u.meta.get("is_error"):
        block["is_error"] = True
    return block


def _append_text(rec: dict[str, Any], text: str) -> None:
    """Another text block at the end of a record built by the writer."""
    content = rec["content"]
    blocks = ([{"type": "text", "text": content}] if content else []) if isinstance(content, str) else list(content)
    rec["content"] = [*blocks, {"type": "text", "text": text}]  # a new list: never the source's


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Messages API records, plus the top-level `system` (lifted from system units) and `tools`.

    Results of one turn's calls share one user message, and a user text that follows them (or a
    unit marked to join the message before) goes in that message too: the API reads consecutive
    messages of one role as one turn, and wants tool results first in theirs. A unit that holds
    only reasoning is no message of its own; thinking is kept only with its signature.
    """
    same = t.source_format == NAME
    system_units = [u for u in t.units if u.role == "system"]
    extras: dict[str, Any] = {}
    if system_units:
        only = system_units[0]
        if same and len(system_units) == 1 and only.raw is not None and only.meta.get("top_level_system"):
            extras["system"] = only.raw
        else:
            extras["system"] = "\n\n".join(u.content for u in system_units)
    records: list[Any] = []
    # The last record when the writer built it (so more blocks may go in), else None.
    open_rec: dict[str, Any] | None = None
    for raw, run in raw_groups([u for u in t.units if u.role != "system"]):
        if raw is not None and same and not joins(run[0]):
            records.append(raw)
            open_rec = None
            continue
        for u in run:
            role = "assistant" if u.role == "assistant" else "user"
            if u.role == "assistant" and (is_reasoning_only(u) or not (u.content or u.tool_calls)):
                continue
            last = records[-1] if records else None
            if joins(u) and isinstance(last, dict) and last.get("role") == role and u.role != "tool":
                if open_rec is not last:
                    open_rec = {**last, "content": last.get("content")}
                    records[-1] = open_rec
                _append_text(open_rec, u.content)
                continue
            if u.role == "assistant":
                open_rec = _assistant(u)
                records.append(open_rec)
            elif u.role == "tool":
                if open_rec is None or open_rec.get("role") != "user" or not _only_results(open_rec):
                    open_rec = {"role": "user", "content": []}
                    records.append(open_rec)
                open_rec["content"].append(tool_result_block(u))
            elif open_rec is not None and open_rec.get("role") == "user" and _only_results(open_rec):
                _append_text(open_rec, u.content)
            else:
                open_rec = {"role": "user", "content": u.content}
                records.append(open_rec)
    if t.tools:
        extras["tools"] = tools_as(FORMAT.tool_shape, t.tools)
    return records, extras


def _only_results(rec: dict[str, Any]) -> bool:
    """A user record holding tool results and nothing else yet."""
    content = rec.get("content")
    return isinstance(content, list) and bool(content) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def detect_object(obj: dict[str, Any]) -> bool:
    """A Messages API request: `messages` beside a top-level `system` (and no system-role
    message), or beside tools with an `input_schema`; its messages are Anthropic's or plain."""
    from ctxkit.formats import openai

    msgs = obj.get("messages")
    if not isinstance(msgs, list):
        return False
    tools = obj.get("tools")
    if "system" in obj:
        if any(isinstance(m, dict) and m.get("role") == "system" for m in msgs[:50]):
            return False
    elif not (msgs and isinstance(tools, list) and tools and isinstance(tools[0], dict) and "input_schema" in tools[0]):
        return False
    return not msgs or detect(msgs) or openai.detect(msgs)


# ---------------------------------------------------------------- validating

# `messages.create` request messages, system and tools (the SDK's types) and the API's rules.
validate = per_conversation(anthropic_problems)


FORMAT = Format.of_module(__name__, label="Anthropic messages", shape="messages",
                          tool_shape="anthropic")
