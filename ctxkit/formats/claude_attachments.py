"""Claude Code attachments: the text an `attachment` record puts into the model's context.

Claude Code 2.1.x logs carry `attachment` records between the messages: context the agent
injects (hook output, edited or re-read files, deferred tool, agent, skill and MCP listings,
task reminders, messages queued while it worked, the environment, the date, the model...). They
are no messages, so the reader keeps them as records, but the model reads them: Claude Code
2.1.328 renders every attachment of the chain it resumes into the request, in place, and the
text stays in the history from then on (sent on every later call, not only the next one).

How it renders one, measured by resuming real and doctored logs in Claude Code 2.1.328 (and
read from its bundled source where a measurement could not reach):

- A record that carries `rendered` (2.1.3xx writes it) is sent as exactly that text, with its
  `renderedRole`. An older record (2.1.2xx has no `rendered`) is rendered again from its fields,
  as `RENDERERS` here does for the types the real logs hold.
- With a current model the text goes into a `role: "system"` message without its
  `<system-reminder>` wrapper; the attachments between two messages share one system message,
  joined by a blank line. `renderedRole: "user"` (the commit attribution) goes into the user
  message as a `<system-reminder>` block. With the older models Claude Code still offers its
  task tools to (`TASK_TOOL_MODELS`) there are no system turns: every attachment is a
  `<system-reminder>` block of a user message, and one after a tool result is folded into it.
- Some are never sent (`NOT_SENT`: permission grants, UI-only hook notices, snapshots of the
  prompt), some only when their content says something (an empty hook context, a hook success
  of an event other than session start or prompt submit), and task reminders only with the
  models that have task tools.

Each attachment sent is one entry of `Transcript.metadata["attachments"]`, in log order:
`{"after_unit": index of the last unit before it (-1: none), "kind": its type, "text": what is
sent, "rendered": True when the log carried the text, False when ctxkit rendered it, "role":
"system" or "user"}`. The reader lists the attachments of the context it reads (the main
thread, from Claude Code's last compaction on), as it does the units.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

KEY = "attachments"

_OPEN = "<system-reminder>"
_CLOSE = "</system-reminder>"
# Appended to notes that retract something, so the model does not announce them.
_AMBIENT = (
    "This is ambient context \u2014 do not narrate it to the user unless they ask or it is "
    "directly relevant to their request."
)
# Claude Code keeps its task tools, and their reminders, for these models only (2.1.328's
# list); the same models get no system turns, so attachments ride in user messages (measured
# with claude-opus-4-6, claude-sonnet-4-5 and claude-haiku-4-5 against claude-opus-5 and 5-5).
TASK_TOOL_MODELS = frozenset({
    "claude-3-opus", "claude-3-sonnet", "claude-3-haiku", "claude-3-5-sonnet", "claude-3-5-haiku",
    "claude-3-7-sonnet", "claude-opus-4-0", "claude-opus-4-1", "claude-opus-4-5", "claude-opus-4-6",
    "claude-opus-4-7", "claude-sonnet-4-0", "claude-sonnet-4-5", "claude-sonnet-4-6",
    "claude-haiku-4-5",
})
# Types Claude Code 2.1.328 renders to nothing: shown in its UI or kept for its own book-keeping.
NOT_SENT = frozenset({
    "command_permissions", "already_read_file", "async_hook_response_batch", "attention_budget",
    "batching_reminder_sent", "secondary_reminder_sent", "prompt_as_file", "edited_image_file",
    "hook_cancelled", "hook_error_during_execution", "hook_non_blocking_error",
    "hook_system_message", "hook_permission_decision", "hook_deferred_tool", "goal_status",
    "goals", "session_cron_carry", "projects_thread_ask", "structured_output", "max_turns_reached",
    "teammate_shutdown_batch", "withheld_memory", "whole_texts_withdrawn", "prompt_snapshot",
    "prompt_render_point", "thinking_stripped", "advisor_stripped", "thinking_drop",
    "tool_results_cut", "credential_org", "tool_offer_record", "deferred_tools_record",
    "context_efficiency",
})
# Hook events whose success output reaches the model.
_HOOK_SUCCESS_EVENTS = ("SessionStart", "UserPromptSubmit", "UserPromptExpansion")
_NEW_MESSAGE = (
    "\n\nThis is how Claude Code surfaces messages the user sends mid-turn \u2014 within the "
    "running turn, often alongside the next tool result, rather than as a separate conversation "
    "turn. Address the message above as you continue this turn."
)
_TASKS = (
    "The task tools haven't been used recently. If you're working on tasks that would benefit "
    "from tracking progress, consider using TaskCreate to add new tasks and TaskUpdate to update "
    "task status (set to in_progress when starting, completed when done). Also consider cleaning "
    "up the task list if it has become stale. Only use these if relevant to the current work. "
    "This is just a gentle reminder - ignore if not applicable.\n"
)
_DEFERRED = (
    "The following deferred tools are now available via ToolSearch. Their schemas are NOT loaded "
    "\u2014 calling them directly will fail with InputValidationError. Use ToolSearch with query "
    '"select:<name>[,<name>...]" to load tool schemas before calling them:'
)
_NO_MATCH = "Do not search for them \u2014 ToolSearch will return no match"
_MCP_LIST_MAX = 30  # above this many tools of MCP servers, Claude Code names them by server


def entries(found: list[tuple[int, dict[str, Any]]], model: str | None, start: int = 0) -> list[dict[str, Any]]:
    """The entries of the attachments a reader found (each with the index of the unit before
    it) from the unit at `start` on, where its context starts, with their indexes moved to
    match; `model` is the model the log was last run with.

    >>> rec = {"type": "attachment", "attachment": {"type": "date", "date": "2026-07-28"}}
    >>> entries([(3, rec)], "claude-opus-5", start=2)
    [{'after_unit': 1, 'kind': 'date', 'text': "Today's date is 2026-07-28.", 'rendered': False, 'role': 'system'}]
    """
    out = []
    for after_unit, rec in found:
        if start > 0 and after_unit < start:
            continue  # before the context's first unit: out of the context, as those units are
        item = entry(rec, after_unit - start, model)
        if item is not None:
            out.append(item)
    return out


def entry(rec: dict[str, Any], after_unit: int, model: str | None) -> dict[str, Any] | None:
    """The metadata entry of one attachment record: what Claude Code sends for it, or None when
    it sends nothing."""
    att = rec.get("attachment")
    if not isinstance(att, dict) or not isinstance(att.get("type"), str):
        return None
    kind = att["type"]
    old = _canonical(model) in TASK_TOOL_MODELS
    texts = _rendered(rec) if kind not in NOT_SENT else None
    logged = texts is not None
    if texts is None:
        texts = render(att, model)
    if not texts:
        return None
    role = rec.get("renderedRole") if logged and rec.get("renderedRole") in ("system", "user") else "system"
    if old:
        role = "user"
    if role == "system":
        text = "\n".join(_unwrapped(t) for t in texts)  # one system message's text
    else:
        # each message its own reminder block (folded into a tool result: a blank line apart)
        text = "\n\n".join(t if t.startswith(_OPEN) else _wrapped(t) for t in texts)
    if not text.strip():
        return None
    return {"after_unit": after_unit, "kind": kind, "text": text, "rendered": logged, "role": role}


def render(att: dict[str, Any], model: str | None = None) -> list[str]:
    """The messages Claude Code 2.1.328 renders an attachment to (their text, without the
    `<system-reminder>` wrapper); none for one it does not send."""
    kind = att.get("type")
    if not isinstance(kind, str) or kind in NOT_SENT:
        return []
    if kind == "task_reminder" and _canonical(model) not in TASK_TOOL_MODELS:
        return []  # Claude Code offers no task tools to this model, so it does not remind of them
    renderer = RENDERERS.get(kind)
    if renderer is None:
        # A type ctxkit has not measured: its own text fields, an estimate of what Claude Code
        # makes of them.
        text = _main_text(att)
        return [text] if text else []
    return [t for t in renderer(att) if t]


def _rendered(rec: dict[str, Any]) -> list[str] | None:
    """The texts of a record's `rendered` field, when it carries a valid one (as Claude Code
    checks it: a non-empty list of non-empty strings or text blocks)."""
    rendered = rec.get("rendered")
    if not isinstance(rendered, list) or not rendered:
        return None
    out: list[str] = []
    for item in rendered:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str) and content:
            out.append(content)
        elif isinstance(content, list) and content:
            texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
            if len(texts) != len(content) or not all(isinstance(t, str) and t for t in texts):
                return None
            out.append("\n".join(t for t in texts if isinstance(t, str)))
        else:
            return None
    return out


def _canonical(model: str | None) -> str:
    """A model id as Claude Code compares it: no provider prefix, date or context suffix."""
    if not model:
        return ""
    name = model.split("/")[-1].lower()
    name = re.sub(r"^(?:[a-z]{2}\.)?anthropic\.", "", name)
    name = re.sub(r"\[[^\]]*\]$", "", name)
    name = re.sub(r"(?:-v\d+(?::\d+)?|@\d{8}|-\d{8})$", "", name)
    return name


def _wrapped(text: str) -> str:
    return f"{_OPEN}\n{text}\n{_CLOSE}"


def _unwrapped(text: str) -> str:
    """A text without its `<system-reminder>` wrapper, as a system message carries it."""
    if not (text.startswith(_OPEN) and text.endswith(_CLOSE)):
        return text
    start, end = len(_OPEN), len(text) - len(_CLOSE)
    if text[start:start + 1] == "\n":
        start += 1
    if end > start and text[end - 1] == "\n":
        end -= 1
    return text[start:end]


def _escaped(text: str) -> str:
    """A closing reminder tag inside quoted text made harmless, as Claude Code does."""
    return re.sub(r"<(?=\s*/\s*system-reminder\b)", "&lt;", text, flags=re.IGNORECASE)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _main_text(att: dict[str, Any]) -> str:
    """The text fields of an attachment (content, prompt, text, snippet...), nested ones too."""
    parts: list[str] = []

    def walk(value: Any, depth: int) -> None:
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):
            for v in value:
                walk(v, depth + 1)
        elif isinstance(value, dict) and depth < 4:
            for key in ("content", "text", "prompt", "snippet", "message", "summary", "subject"):
                if key in value:
                    walk(value[key], depth + 1)

    for key in ("content", "text", "prompt", "snippet", "message", "summary", "addedLines", "addedBlocks"):
        if key in att:
            walk(att[key], 0)
    return "\n".join(p for p in parts if p.strip())


# ---------------------------------------------------------------- one renderer per type


def _file(att: dict[str, Any]) -> list[str]:
    """A file Claude Code re-read for the model (after a compaction, or an @-mention): shown as
    a call of its Read tool and the call's result."""
    path = str(att.get("filename") or "")
    content = _object(att.get("content"))
    call = "Called the Read tool with the following input: " + _escaped(
        json.dumps({"file_path": path}, ensure_ascii=False, separators=(",", ":"))
    )
    file = _object(content.get("file"))
    if content.get("type") != "text" or not isinstance(file.get("content"), str):
        # images, notebooks and PDFs: their text fields, an estimate
        return [call + "\n" + "Result of calling the Read tool:\n" + _main_text(file)]
    start = file["startLine"] if isinstance(file.get("startLine"), int) else 1
    lines = str(file["content"]).split("\n")
    numbered = "\n".join(f"{start + n}\t{line}" for n, line in enumerate(lines))
    out = [call, "Result of calling the Read tool:\n" + _escaped(numbered)]
    if att.get("truncated"):
        out.append(
            f"Note: The file {path} was too large and has been truncated to the first "
            f"{len(lines)} lines. No need to mention the truncation. Use Read to read more of "
            "the file if you need."
        )
    return out


def _compact_file_reference(att: dict[str, Any]) -> list[str]:
    return [
        f"Note: {att.get('filename') or ''} was read before the last conversation was summarized, "
        "but the contents are too large to include. Use Read tool if you need to access it."
    ]


def _edited_text_file(att: dict[str, Any]) -> list[str]:
    lead = (
        f"Note: {att.get('filename') or ''} changed on disk since you last read it. That's usually "
        "deliberate, so take it as the current state rather than reverting it; if the change looks "
        "wrong, say so rather than undoing it yourself \u2014 otherwise no need to call it out."
    )
    snippet = att.get("snippet") if isinstance(att.get("snippet"), str) else ""
    if not snippet:
        return [f"{lead} The changes are not shown here; use Read if you need the current content."]
    return [f"{lead} Here are the relevant changes (shown with line numbers):\n{_escaped(snippet)}"]


def _nested_memory(att: dict[str, Any]) -> list[str]:
    memory = _object(att.get("content"))
    return [f"Contents of {memory.get('path') or att.get('path') or ''}:\n\n{memory.get('content') or ''}"]


def _hook_success(att: dict[str, Any]) -> list[str]:
    content = att.get("content")
    if att.get("hookEvent") not in _HOOK_SUCCESS_EVENTS or not isinstance(content, str) or not content:
        return []
    return [_escaped(f"{att.get('hookName')} hook success: {content}")]


def _hook_additional_context(att: dict[str, Any]) -> list[str]:
    lines = _strings(att.get("content"))
    if not lines:
        return []
    return [_escaped(f"{att.get('hookName')} hook additional context: " + "\n".join(lines))]


def _queued_command(att: dict[str, Any]) -> list[str]:
    prompt = att.get("prompt")
    if isinstance(prompt, list):
        prompt = "\n".join(
            str(b.get("text") or "") for b in prompt if isinstance(b, dict) and b.get("type") == "text"
        )
    if not isinstance(prompt, str) or not prompt.strip():
        return []
    if att.get("commandMode", "prompt") != "prompt":
        return [prompt]  # task notifications and the like: the prompt, an estimate of its framing
    return [f"The user sent a new message while you were working:\n{prompt}{_NEW_MESSAGE}"]


def _task_reminder(att: dict[str, Any]) -> list[str]:
    tasks = [
        f"#{t.get('id')}. [{t.get('status')}] {t.get('subject')}"
        for t in att.get("content") or [] if isinstance(t, dict)
    ]
    return [_TASKS + ("\n\nHere are the existing tasks:\n\n" + "\n".join(tasks) if tasks else "")]


def _skill_listing(att: dict[str, Any]) -> list[str]:
    content = att.get("content")
    if not isinstance(content, str) or not content:
        return []
    also, rest = ("also ", ". This list adds to the skills listed earlier in this conversation "
                  "and is not the full list") if att.get("addsToEarlier") else ("", "")
    if att.get("shortened"):
        content += (
            "\n\nThis list is shortened to save room: a description that ends in \u2026 is cut "
            "there. The skills themselves are not cut. When a request fits a skill's name or the "
            "shown part of its description, use the skill."
        )
    return [f"The following skills are {also}available for use with the Skill tool{rest}:\n\n{content}"]


def _by_server(names: list[str]) -> str:
    """`mcp__server__* (n)` for the tools of each MCP server, other names as they are."""
    counts: dict[str, int] = {}
    for name in names:
        key = "__".join(name.split("__", 2)[:2]) + "__*" if name.startswith("mcp__") else name
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} ({n})" if n > 1 else k for k, n in sorted(counts.items()))


def _deferred_tools_delta(att: dict[str, Any]) -> list[str]:
    """Tools left to ToolSearch (sent by name only): the ones added, back again, or gone."""
    parts: list[str] = []
    added, lines = _strings(att.get("addedNames")), _strings(att.get("addedLines"))
    if added and lines:
        parts.append(_DEFERRED + "\n" + "\n".join(lines))
    back = _strings(att.get("readdedNames"))
    mcp = [n for n in back if n.startswith("mcp__")]
    other = [n for n in back if not n.startswith("mcp__")]
    if mcp:
        parts.append(
            f"{len(mcp)} deferred tool{'s are' if len(mcp) != 1 else ' is'} available again (MCP "
            f"server reconnected \u2014 names announced earlier in this conversation): "
            f"{_by_server(mcp)}. Load via ToolSearch as before."
        )
    if other:
        parts.append(
            f"{len(other)} deferred tool{'s are' if len(other) != 1 else ' is'} available again in "
            f"this session (announced earlier in this conversation): {', '.join(other)}. Load via "
            "ToolSearch as before."
        )
    removed = _strings(att.get("removedNames"))
    gone_mcp = [n for n in removed if n.startswith("mcp__")]
    gone_other = [n for n in removed if not n.startswith("mcp__")]
    if gone_mcp:
        parts.append(
            f"{len(gone_mcp)} deferred tools are no longer available (MCP server disconnected): "
            f"{_by_server(gone_mcp)}. {_NO_MATCH}."
            if len(gone_mcp) > _MCP_LIST_MAX else
            "The following deferred tools are no longer available (their MCP server "
            f"disconnected). {_NO_MATCH}:\n" + "\n".join(gone_mcp)
        )
    if gone_other:
        parts.append(
            f"The following deferred tools are no longer available in this session. {_NO_MATCH}:\n"
            + "\n".join(gone_other)
        )
    if removed:
        parts.append(_AMBIENT)
    pending = _strings(att.get("pendingMcpServers"))
    if pending:
        parts.append(
            "The following MCP servers are still connecting \u2014 their tools (typically named "
            "mcp__<server>__*) are not yet available but will appear shortly:\n"
            + "\n".join(pending)
            + "\n\nIf the user's request might be served by one of these servers (even if they "
            "didn't name it explicitly), call ToolSearch with a relevant keyword \u2014 ToolSearch "
            "will wait for connecting servers and search their tools once available. Do not report "
            "a capability as unavailable without first searching."
        )
    return ["\n\n".join(parts)] if parts else []


def _agent_listing_delta(att: dict[str, Any]) -> list[str]:
    parts: list[str] = []
    lines, added, removed = (
        _strings(att.get("addedLines")), _strings(att.get("addedTypes")), _strings(att.get("removedTypes"))
    )
    if lines and added:
        head = ("Available agent types for the Agent tool:" if att.get("isInitial")
                else "New agent types are now available for the Agent tool:")
        parts.append(head + "\n" + "\n".join(lines))
    if removed:
        parts.append("The following agent types are no longer available:\n"
                     + "\n".join(f"- {t}" for t in removed))
        parts.append(_AMBIENT)
    if lines and added and att.get("isInitial") and att.get("showConcurrencyNote"):
        parts.append("When you launch multiple agents for independent work, send them in a single "
                     "message with multiple tool uses so they run concurrently.")
    return ["\n\n".join(parts)] if parts else []


def _mcp_instructions_delta(att: dict[str, Any]) -> list[str]:
    parts: list[str] = []
    blocks, added, removed = (
        _strings(att.get("addedBlocks")), _strings(att.get("addedNames")), _strings(att.get("removedNames"))
    )
    if blocks and added:
        cut = ". To save room, some are cut, and [cut short] marks where a server's text stops" if att.get(
            "shortened") else ""
        parts.append(
            "# MCP Server Instructions\n\nThe following MCP servers have provided instructions for "
            f"how to use their tools and resources{cut}:\n\n" + "\n\n".join(blocks)
        )
    if removed:
        parts.append("The following MCP servers have disconnected. Their instructions above no "
                     "longer apply:\n" + "\n".join(removed))
        parts.append(_AMBIENT)
    return ["\n\n".join(parts)] if parts else []


def _date(att: dict[str, Any]) -> list[str]:
    return [f"Today's date is {att['date']}."] if isinstance(att.get("date"), str) else []


def _model(att: dict[str, Any]) -> list[str]:
    return [att["text"]] if isinstance(att.get("text"), str) else []


# What Claude Code 2.1.328 renders each attachment type to when the record carries no `rendered`
# text (a 2.1.2xx log); 2.1.3xx types without a renderer here carry their text.
RENDERERS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "file": _file,
    "compact_file_reference": _compact_file_reference,
    "edited_text_file": _edited_text_file,
    "nested_memory": _nested_memory,
    "hook_success": _hook_success,
    "hook_additional_context": _hook_additional_context,
    "queued_command": _queued_command,
    "task_reminder": _task_reminder,
    "skill_listing": _skill_listing,
    "deferred_tools_delta": _deferred_tools_delta,
    "agent_listing_delta": _agent_listing_delta,
    "mcp_instructions_delta": _mcp_instructions_delta,
    "date": _date,
    "model": _model,
    # an empty session context renders to nothing (2.1.328 writes no `rendered` for it)
    "session_context": lambda att: [_main_text(_object(att.get("context")))] if att.get("context") else [],
}
