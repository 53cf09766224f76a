"""Cline and Roo Code task histories (`tasks/<id>/api_conversation_history.json`).

A JSON array of Anthropic-style messages (`role`, `content` blocks) with Cline's own keys
(`modelInfo`, `metrics.tokens`, `ts`). A tool's result does not come back as a `tool_result`
block but as user text, `[read_file for 'src/a.py'] Result:` and the output after it; the call
is a `tool_use` block of the assistant message before (native tool calling) or, in older tasks,
an XML tag in its text (`<read_file><path>...</path></read_file>`).

Read: an assistant message is an assistant unit (text, thinking as reasoning, `tool_use` blocks
or XML tool tags as calls); in a user message each `[tool ...] Result:` text block is a tool unit
paired with the open call of that tool (the oldest first; its `[... ] Result:` line, which the
model reads, as the unit's `framing`, counted with it and kept when its output is compacted),
the other blocks the user's unit
(`<task>`, feedback, `<environment_details>`); `metrics.tokens` is the provider's count of the
call that wrote the message (`prompt` + `cached`).

Written back as a history Cline resumes: untouched messages as they were, a changed result as
its block with the output replaced under the same `[...] Result:` line, a changed message's text
replaced; results of another format's calls as `[name] Result:` blocks.
"""

from __future__ import annotations

import re
from typing import Any

from ctxkit.formats.anthropic import assistant_blocks, assistant_parts, tool_units
from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, conversations
from ctxkit.formats.common import (
    Source,
    blocks_text,
    finish,
    joins,
    link_group_sizes,
    raw_groups,
    timestamp_of,
)
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "cline"
# `[read_file for 'a.py'] Result:`, `[execute_command for 'ls'] Result:`, `[attempt_completion] Result:`
RESULT = re.compile(r"\A\[(?P<tool>[^\[\]\n]+?)(?: for (?P<what>.*?))?\] Result:[ \t]*\n?", re.S)
# Cline's tools, whose XML tags an older task's assistant text holds
TOOLS = frozenset({
    "execute_command", "read_file", "write_to_file", "replace_in_file", "search_files", "list_files",
    "list_code_definition_names", "browser_action", "use_mcp_tool", "access_mcp_resource", "ask_followup_question",
    "attempt_completion", "new_task", "plan_mode_respond", "load_mcp_documentation", "web_fetch", "apply_diff",
    "insert_content", "search_and_replace", "switch_mode", "codebase_search", "fetch_instructions", "new_rule",
    "condense", "report_bug", "summarize_task", "focus_chain", "update_todo_list", "list_files_top_level",
})
_XML_CALL = re.compile(r"<(?P<tool>[a-z_]+)>\s*(?P<body>.*?)</(?P=tool)>", re.S)
_XML_ARG = re.compile(r"<(?P<key>[a-z_]+)>(?P<value>.*?)</(?P=key)>", re.S)


def _texts(msg: dict[str, Any]) -> list[str]:
    content = msg.get("content")
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)] if isinstance(content, list) else []


def detect(records: list[Any]) -> bool:
    """Anthropic-style messages that are a Cline task: a user text `[tool ...] Result:`, a
    `<task>` opening the first request, or Cline's `modelInfo`/`metrics` on a message."""
    head = records[:200]
    if not head or not all(isinstance(m, dict) and m.get("role") in ("user", "assistant") and "content" in m for m in head):
        return False
    if any("modelInfo" in m or ("metrics" in m and "role" in m and m["role"] == "assistant") for m in head):
        return True
    users = [t for m in head if m["role"] == "user" for t in _texts(m)]
    return bool(users) and (users[0].lstrip().startswith("<task>") or any(RESULT.match(t) for t in users))


def _xml_calls(text: str, uid: str) -> list[ToolCall]:
    """The tool calls an older Cline task writes as XML tags in the assistant's text."""
    import json

    calls = []
    for k, m in enumerate(_XML_CALL.finditer(text)):
        if m.group("tool") in TOOLS:
            args = {a.group("key"): a.group("value").strip() for a in _XML_ARG.finditer(m.group("body"))}
            calls.append(ToolCall(f"{uid}#xml{k}", m.group("tool"), json.dumps(args, ensure_ascii=False)))
    return calls


def read(records: list[Any], src: Source) -> Transcript:
    """A task's messages as units (see the module doc)."""
    units: list[Unit] = []
    names: dict[str, str] = {}
    open_calls: list[ToolCall] = []
    usage: list[dict[str, Any]] = []
    for i, msg in enumerate(records):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            src.bad(i, "expected a Cline message {role: user|assistant, content}", msg)
            continue
        uid = f"m{i}"
        ts = timestamp_of(msg.get("ts"))
        content = msg.get("content")
        if msg["role"] == "assistant":
            texts, thinking, calls, images = assistant_parts(content, names, src)
            text = "\n".join(texts)
            if not calls:
                calls = _xml_calls(text, uid)
            for c in calls:
                names[c.id] = c.name
            open_calls = list(calls)
            tokens = (msg.get("metrics") or {}).get("tokens") if isinstance(msg.get("metrics"), dict) else None
            if isinstance(tokens, dict) and isinstance(tokens.get("prompt"), int):
                usage.append({"after_unit": len(units) - 1, "input_tokens": tokens["prompt"] + int(tokens.get("cached") or 0),
                              "cache_read_tokens": int(tokens.get("cached") or 0),
                              "output_tokens": int(tokens.get("completion") or 0)})
            units.append(finish(Unit(id=uid, role="assistant", content=text, reasoning="\n".join(thinking),
                                     tool_calls=calls, images=images, timestamp=ts, raw=msg, group=i)))
            continue
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        rest: list[Any] = []
        k = 0
        for block in blocks:
            said = block.get("text") if isinstance(block, dict) and block.get("type") == "text" else None
            found = RESULT.match(said) if isinstance(said, str) else None
            if isinstance(block, dict) and block.get("type") == "tool_result":
                unit = tool_units(block, uid=uid if k == 0 else f"{uid}#{k}", group=i, raw=msg, names=names, ts=ts, src=src)
                open_calls = [c for c in open_calls if c.id != unit.tool_call_id]
            elif found is not None and isinstance(said, str) and open_calls:
                # a result answers the open call of its tool (the oldest), else the oldest open one
                tool = found.group("tool")
                call = next((c for c in open_calls if c.name == tool), open_calls[0])
                open_calls.remove(call)
                unit = Unit(id=uid if k == 0 else f"{uid}#{k}", role="tool", content=said[found.end():],
                            timestamp=ts, tool_call_id=call.id, name=tool, raw=msg, group=i,
                            meta={"framing": said[: found.end()]})
            else:
                rest.append(block)
                continue
            units.append(finish(unit))
            k += 1
        if rest or not blocks:
            text, images = blocks_text(rest, src=src)
            units.append(finish(Unit(id=uid if k == 0 else f"{uid}#{k}", role="user", content=text, images=images,
                                     timestamp=ts, raw=msg, group=i)))
    link_group_sizes(units)
    metadata: dict[str, Any] = {"provider_usage": {"source": NAME, "calls": usage}} if usage else {}
    return Transcript(units=units, id=src.tid, source_format=NAME, layout=src.layout, envelope=dict(src.envelope),
                      line=src.line, metadata=metadata)


# ---------------------------------------------------------------- writing


def _result_block(u: Unit) -> dict[str, Any]:
    line = u.meta.get("framing", u.meta.get("result_line"))  # result_line: archived before the rename
    return {"type": "text", "text": (line if isinstance(line, str) else f"[{u.name or 'tool'}] Result:\n") + u.content}


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Messages for a transcript (see the module doc)."""
    same = t.source_format == NAME
    out: list[dict[str, Any]] = []
    last_unit: Unit | None = None  # the unit the last user message was written for
    for raw, run in raw_groups([u for u in t.units if u.role != "system"]):
        if same and raw is not None and not any(joins(u) for u in run):
            out.append(raw)
            continue
        for u in run:
            template = u.source if same and isinstance(u.source, dict) else None
            if u.role == "assistant":
                if not (u.content or u.tool_calls):
                    continue
                if template is not None and not any(isinstance(b, dict) and b.get("type") == "tool_use"
                                                    for b in template.get("content") or []) and u.tool_calls:
                    # an older task's calls are XML in the text: the text says it all
                    blocks: list[Any] = [{"type": "text", "text": u.content}]
                else:
                    blocks = assistant_blocks(u)
                last = out[-1] if out else None
                if last is not None and last["role"] == "assistant" and template is None:
                    out[-1] = {**last, "content": [*last["content"], *blocks]}  # one message per turn
                else:
                    out.append({**(template or {}), "role": "assistant", "content": blocks})
                continue
            block = _result_block(u) if u.role == "tool" else {"type": "text", "text": u.content}
            last = out[-1] if out else None
            # results with the message before, a joining unit too, and the units of one source
            # message together (consecutive user messages the API merges anyway)
            together = u.role == "tool" or joins(u) or (
                template is not None and last_unit is not None and u.group is not None and u.group == last_unit.group)
            if last is not None and last["role"] == "user" and together:
                out[-1] = {**last, "content": [*last["content"], block]}
            else:
                base = {k: v for k, v in (template or {}).items() if k not in ("content",)}
                out.append({**base, "role": "user", "content": [block]})
            last_unit = u
    return out, {}


# ---------------------------------------------------------------- validating


def _problems(conv: dict[str, Any], where: str = "") -> list[str]:
    """What Cline resumes: user and assistant messages (consecutive ones of a role are one turn,
    as the Messages API merges them), the first the user's, no empty content, each call of an assistant message answered in the next user message (a result
    block of that tool, or a `tool_result`)."""
    messages = conv.get("messages")
    if not isinstance(messages, list):
        return [f"{where}no messages"]
    out: list[str] = []
    waiting: list[str] = []
    for i, m in enumerate(messages):
        at = f"{where}message {i + 1}"
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            out.append(f"{at}: expected {{role: user|assistant, content}}")
            continue
        if i == 0 and m["role"] != "user":
            out.append(f"{at}: the first message must be the user's")
        content = m.get("content")
        if not content:
            out.append(f"{at}: empty content")
        if m["role"] == "user":
            answered = [found.group("tool") for t in _texts(m) if (found := RESULT.match(t))]
            answered += ["*"] * sum(1 for b in content or [] if isinstance(b, dict) and b.get("type") == "tool_result")
            for name in waiting:
                if name in answered:
                    answered.remove(name)
                elif "*" in answered:
                    answered.remove("*")
                else:
                    out.append(f"{at}: the {name} call before has no result here")
            waiting = []
        else:
            waiting = [str(b.get("name")) for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] \
                if isinstance(content, list) else []
    return out[:MAX_PROBLEMS]


def validate(data: Any) -> list[str]:
    """Cline's rules on a written task history (or a dataset of them)."""
    convs = conversations(data)
    out: list[str] = []
    for n, conv in enumerate(convs):
        out.extend(_problems(conv, f"conversation {n + 1}: " if len(convs) > 1 else ""))
    return out[:MAX_PROBLEMS]


def hint(found: Any) -> str | None:
    """Cline's (and Roo Code's) `ui_messages.json` beside the history: the task as its panel
    shows it (`{ts, type: say|ask, say|ask, text}`), not what the model was sent."""
    if isinstance(found, dict) and found.get("type") in ("say", "ask") and isinstance(found.get("ts"), int | float):
        return ("Cline's ui_messages.json, the task as its panel shows it, not what the model read: "
                "read api_conversation_history.json beside it (--from cline)")
    return None


FORMAT = Format.of_module(__name__, label="Cline task history", shape="messages", array=True,
                          agent="Cline", holds_tools=False,
                          omits="the system prompt or tool schemas")
