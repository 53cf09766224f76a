"""Small helpers shared by the strategy modules (not part of the public API)."""

from __future__ import annotations

from ctxkit.model import Unit


def is_tool_output(unit: Unit) -> bool:
    """A tool result: role tool, type tool_result, or a unit answering a call id."""
    return unit.role == "tool" or unit.type == "tool_result" or (
        unit.tool_call_id is not None and not unit.tool_calls
    )


def tool_names(units: tuple[Unit, ...] | list[Unit]) -> dict[str, str]:
    """call id -> tool name, from the calls assistants made."""
    return {c.id: c.name for u in units for c in u.tool_calls}


def tool_name(unit: Unit, names: dict[str, str]) -> str:
    """The tool that produced this result, or 'tool' when unknown."""
    if unit.name:
        return unit.name
    if unit.tool_call_id and unit.tool_call_id in names:
        return names[unit.tool_call_id] or "tool"
    return "tool"


def is_compacted(unit: Unit) -> bool:
    """Already a placeholder or summary made by ctxkit: never compacted again by the same rule."""
    return unit.type in ("placeholder", "summary") or "ref" in unit.meta or "refs" in unit.meta


def block_text(units: tuple[Unit, ...] | list[Unit], start: int, end: int) -> str:
    """The text relevance is measured on: contents, reasoning and call names/arguments."""
    parts: list[str] = []
    for u in units[start:end]:
        if u.content:
            parts.append(u.content)
        if u.reasoning:
            parts.append(u.reasoning)
        parts.extend(f"{c.name} {c.arguments}" for c in u.tool_calls)
    return "\n".join(parts)


def fmt_refs(refs: list[str], limit: int | None = 8) -> str:
    """`ref-a ref-b`: the first `limit` refs, space-separated, then "and N more" (the rest are
    in meta); `limit=None` names every ref."""
    if limit is None or len(refs) <= limit:
        return " ".join(refs)
    return " ".join(refs[:limit]) + f" and {len(refs) - limit} more"


def describe(unit: Unit, names: dict[str, str]) -> str:
    """What a unit is, in a few words a model understands: 'bash output', 'user message',
    'assistant call to bash', 'assistant reasoning'."""
    if is_tool_output(unit):
        return f"{tool_name(unit, names)} output"
    if unit.tool_calls:
        called = ", ".join(dict.fromkeys(c.name or "tool" for c in unit.tool_calls))
        return f"{unit.role} call to {called}"
    if unit.type == "reasoning" or (unit.reasoning and not unit.content):
        return f"{unit.role} reasoning"
    return f"{unit.role} message"


def failure_note(unit: Unit) -> str:
    """`exit 1: <error line>` (or `error: <line>`) when the log says this tool output failed,
    "" otherwise: what a placeholder keeps of a failure (`facts.outcome`)."""
    from ctxkit.log_events import outcome

    result = outcome(unit)
    return result.label if result.failed else ""
