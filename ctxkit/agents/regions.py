"""What one request holds, region by region: the system prompt, the built-in tool schemas, MCP
tool schemas by server, deferred tools (sent by name, loaded on demand), skills, reminders and
attachments, and the messages; with the model and the output the request asks for.

The messages are read by ctxkit's own readers (Anthropic Messages, Chat Completions, Gemini
`Content[]`, and Responses items through the Codex reader) and counted by the same accounting
as `ctxkit count`, so a log's count and the count of the request that resumes it are one figure.

What is a reminder: text the agent adds to the conversation that the user did not type and the
model did not write: Claude Code's `<system-reminder>` blocks and system-role messages, Codex's
`<environment_context>`, `<permissions instructions>`, AGENTS.md and skills messages, Gemini
CLI's `<session_context>`. Skills are the part of those that lists skills.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ctxkit.formats.anthropic import NAME as ANTHROPIC
from ctxkit.formats.codex import NAME as CODEX
from ctxkit.formats.gemini import NAME as GEMINI
from ctxkit.formats.openai import NAME as OPENAI
from ctxkit.model import Transcript
from ctxkit.tokens import CountOptions, Tokenizer, count_tool_schemas, count_transcript

REGIONS = ("system", "tools", "mcp", "skills", "reminders", "messages")

# Claude Code, Codex and Gemini CLI name an MCP tool `mcp__<server>__<tool>`
_MCP = re.compile(r"^mcp__(?P<server>[^_].*?)__(?P<tool>.+)$")
_REMINDER_START = (
    "<system-reminder>",
    "<environment_context>",
    "<permissions instructions>",
    "<user_instructions>",
    "<skills_instructions>",
    "<apps_instructions>",
    "<collaboration_mode>",
    "<session_context>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
)
_SKILLS = re.compile(
    r"(The following skills are available[^\n]*\n|<skills_instructions>|## Skills\n)"
)


@dataclass
class RequestCount:
    """One request, counted: tokens per region, the tools, the messages as ctxkit reads them."""

    api: str
    model: str
    max_tokens: int | None
    regions: dict[str, int]
    mcp_servers: dict[str, int] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)  # name, tokens, kind
    deferred: list[str] = field(default_factory=list)  # tools sent with defer_loading
    deferred_tokens: int = 0  # their schemas: sent, not loaded into the context
    messages: int = 0  # history items
    transcript: Transcript | None = None

    @property
    def total(self) -> int:
        """Everything in the context (deferred tool schemas are not)."""
        return sum(self.regions.values())

    @property
    def fixed(self) -> int:
        """What the agent sends whatever the conversation: system prompt, tools, MCP, skills."""
        return sum(self.regions.get(k, 0) for k in ("system", "tools", "mcp", "skills"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "api": self.api,
            "model": self.model,
            "max_tokens": self.max_tokens,
            "regions": dict(self.regions),
            "total": self.total,
            "fixed": self.fixed,
            "mcp_servers": dict(self.mcp_servers),
            "tools": list(self.tools),
            "deferred": list(self.deferred),
            "deferred_tokens": self.deferred_tokens,
            "messages": self.messages,
        }


def is_reminder(text: str) -> bool:
    """Whether a text block is one the agent adds (a reminder or an attachment)."""
    head = text.lstrip()[:64]
    return head.startswith(_REMINDER_START)


def _skills_part(text: str) -> str:
    """The part of a reminder that lists skills (to the next paragraph that is not a list item)."""
    m = _SKILLS.search(text)
    if not m:
        return ""
    rest = text[m.start():]
    end = re.search(r"\n\n(?![-*\s])", rest[len(m.group(0)) + 1:])
    return rest if end is None else rest[: len(m.group(0)) + 1 + end.start()]


class _Tally:
    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self.reminders = 0
        self.skills = 0

    def reminder(self, text: str) -> None:
        skills = _skills_part(text)
        n_skills = self.tok.count(skills) if skills else 0
        self.skills += n_skills
        self.reminders += self.tok.count(text) - n_skills


def _tool_name(tool: dict[str, Any]) -> str:
    if isinstance(tool.get("function"), dict):
        return str(tool["function"].get("name") or "")
    return str(tool.get("name") or tool.get("type") or "")


def _split_tools(
    tools: Iterable[dict[str, Any]], tok: Tokenizer, opts: CountOptions, rc: RequestCount
) -> list[dict[str, Any]]:
    """Count each tool schema into tools, mcp (by server) or deferred; the schemas in context."""
    kept: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        name = _tool_name(tool)
        tokens = count_tool_schemas([tool], tok, opts)
        m = _MCP.match(name)
        if tool.get("defer_loading"):
            rc.deferred.append(name)
            rc.deferred_tokens += tokens
            rc.tools.append({"name": name, "tokens": tokens, "kind": "deferred"})
            continue
        if m:
            server = m.group("server")
            rc.mcp_servers[server] = rc.mcp_servers.get(server, 0) + tokens
            rc.regions["mcp"] += tokens
            rc.tools.append({"name": name, "tokens": tokens, "kind": f"mcp:{server}"})
        else:
            rc.regions["tools"] += tokens
            rc.tools.append({"name": name, "tokens": tokens, "kind": "built-in"})
        kept.append(tool)
    return kept


def _history(t: Transcript, tok: Tokenizer, opts: CountOptions) -> int:
    counted = count_transcript(t, tok, opts)
    return counted.total - counted.regions.get("system", 0) - counted.regions.get("tools", 0)


def count_request(api: str, body: Any, tok: Tokenizer, opts: CountOptions = CountOptions()) -> RequestCount:
    """Count one request body of `api` (anthropic, responses, chat, gemini) region by region."""
    if not isinstance(body, dict):
        body = {}
    counter = _COUNTERS.get(api)
    if counter is None:
        raise ValueError(f"no request counter for the {api!r} API")
    rc = RequestCount(
        api=api,
        model=str(body.get("model") or ""),
        max_tokens=None,
        regions=dict.fromkeys(REGIONS, 0),
    )
    counter(body, tok, opts, rc)
    return rc


def _messages(body: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Any]]:
    """Each message object of a request body (Messages, Chat Completions), with its content."""
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            yield m, m.get("content")


def _conversation(
    rc: RequestCount, tally: _Tally, n_messages: int, records: Any, fmt: str, opts: CountOptions
) -> None:
    """What a request's conversation costs once its reminders and skills are taken out: those
    two regions, its messages read as `fmt` (the transcript kept) and counted."""
    rc.regions["reminders"] += tally.reminders
    rc.regions["skills"] += tally.skills
    rc.messages = n_messages
    if n_messages:
        t = _read(records, fmt)
        rc.transcript = t
        rc.regions["messages"] += _history(t, tally.tok, opts)


def _read(records: Any, fmt: str) -> Transcript:
    from ctxkit.formats import ReadOptions, read_text

    (t,) = read_text(json.dumps(records), ReadOptions(format=fmt))
    return t


# --- Anthropic Messages ----------------------------------------------------------------------


def _anthropic(body: dict[str, Any], tok: Tokenizer, opts: CountOptions, rc: RequestCount) -> None:
    rc.max_tokens = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else None
    system = body.get("system")
    if isinstance(system, str):
        rc.regions["system"] += tok.count(system)
    elif isinstance(system, list):
        rc.regions["system"] += sum(
            tok.count(b.get("text") or "") for b in system if isinstance(b, dict)
        )
    _split_tools(body.get("tools") or [], tok, opts, rc)
    tally = _Tally(tok)
    messages: list[dict[str, Any]] = []
    for m, content in _messages(body):
        if m.get("role") == "system":  # Claude Code's mid-conversation system messages
            for block in content if isinstance(content, list) else [{"text": content}]:
                if isinstance(block, dict):
                    tally.reminder(str(block.get("text") or ""))
            continue
        if isinstance(content, str):
            if is_reminder(content):
                tally.reminder(content)
                continue
            messages.append(m)
            continue
        blocks = []
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "text" and is_reminder(str(block.get("text") or "")):
                tally.reminder(str(block["text"]))
            else:
                blocks.append(block)
        if blocks:
            messages.append({**m, "content": blocks})
    _conversation(rc, tally, len(messages), {"messages": messages}, ANTHROPIC, opts)


# --- OpenAI Responses (Codex) -------------------------------------------------------------------


def _responses(body: dict[str, Any], tok: Tokenizer, opts: CountOptions, rc: RequestCount) -> None:
    value = body.get("max_output_tokens")
    rc.max_tokens = value if isinstance(value, int) else None
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        rc.regions["system"] += tok.count(instructions)
    tools: list[dict[str, Any]] = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            tools.extend(t for t in tool["tools"] if isinstance(t, dict))
        elif isinstance(tool, dict):
            tools.append(tool)
    _split_tools(tools, tok, opts, rc)
    tally = _Tally(tok)
    items: list[dict[str, Any]] = []
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type", "message") == "message":
            texts = [
                str(c.get("text") or "")
                for c in item.get("content") or []
                if isinstance(c, dict) and c.get("type") in ("input_text", "output_text", "text")
            ]
            if item.get("role") == "developer":
                # the harness's instructions: the first is Codex's own system prompt
                if not rc.regions["system"] and texts and not is_reminder(texts[0]):
                    rc.regions["system"] += tok.count("\n".join(texts))
                else:
                    for text in texts:
                        tally.reminder(text)
                continue
            if texts and all(is_reminder(x) for x in texts):
                for text in texts:
                    tally.reminder(text)
                continue
        items.append(item)
    records = [{"timestamp": "", "type": "response_item", "payload": i} for i in items]
    _conversation(rc, tally, len(items), records, CODEX, opts)


# --- Chat Completions ---------------------------------------------------------------------------


def _text_parts(content: Any) -> str:
    """The text of a Chat Completions content list (its text parts, joined)."""
    if not isinstance(content, list):
        return ""
    return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")


def _chat(body: dict[str, Any], tok: Tokenizer, opts: CountOptions, rc: RequestCount) -> None:
    for key in ("max_completion_tokens", "max_tokens"):
        if isinstance(body.get(key), int):
            rc.max_tokens = body[key]
            break
    _split_tools(body.get("tools") or [], tok, opts, rc)
    tally = _Tally(tok)
    messages: list[dict[str, Any]] = []
    for m, content in _messages(body):
        text = content if isinstance(content, str) else ""
        if m.get("role") in ("system", "developer") and not messages and not rc.regions["system"]:
            rc.regions["system"] += tok.count(text or _text_parts(content))
            continue
        if text and is_reminder(text):
            tally.reminder(text)
            continue
        if isinstance(content, list):
            # Qwen Code sends its reminders as text parts before the prompt, in one message
            parts = []
            for part in content:
                value = part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
                if isinstance(value, str) and is_reminder(value):
                    tally.reminder(value)
                else:
                    parts.append(part)
            if not parts:
                continue
            m = {**m, "content": parts}
        messages.append(m)
    _conversation(rc, tally, len(messages), messages, OPENAI, opts)


# --- Gemini generateContent ---------------------------------------------------------------------


def _gemini(body: dict[str, Any], tok: Tokenizer, opts: CountOptions, rc: RequestCount) -> None:
    config = body.get("generationConfig") or {}
    value = config.get("maxOutputTokens") if isinstance(config, dict) else None
    rc.max_tokens = value if isinstance(value, int) else None
    system = body.get("systemInstruction")
    parts = system.get("parts") if isinstance(system, dict) else None
    if isinstance(parts, list):
        rc.regions["system"] += sum(tok.count(str(p.get("text") or "")) for p in parts if isinstance(p, dict))
    decls: list[dict[str, Any]] = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            decls.extend(
                {"type": "function", "function": d}
                for d in tool.get("functionDeclarations") or []
                if isinstance(d, dict)
            )
    _split_tools(decls, tok, opts, rc)
    tally = _Tally(tok)
    contents = []
    for c in body.get("contents") or []:
        if not isinstance(c, dict):
            continue
        parts = [p for p in c.get("parts") or [] if isinstance(p, dict)]
        kept = []
        for p in parts:
            text = p.get("text")
            if isinstance(text, str) and is_reminder(text):
                tally.reminder(text)
            else:
                kept.append(p)
        if kept:
            contents.append({**c, "parts": kept})
    _conversation(rc, tally, len(contents), {"contents": contents}, GEMINI, opts)


_COUNTERS = {"anthropic": _anthropic, "responses": _responses, "chat": _chat, "gemini": _gemini}
