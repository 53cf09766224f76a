"""The OpenHands event vocabulary that reading and writing share: what an event is, its
arguments, the model response behind an action, and the ids a condensation hides."""

from __future__ import annotations

from typing import Any

from ctxkit.formats.base import ToolShape

NAME = "openhands"
TOOL_SHAPE: ToolShape = "openai"  # the system action's tools

TOOL_ACTIONS = frozenset(
    {"run", "run_ipython", "read", "write", "edit", "browse", "browse_interactive", "call_tool_mcp", "delegate",
     "think", "task_tracking"}
)
CONDENSATIONS = ("condensation", "condensation_request")
META_KEY = "openhands"

# Top-level keys of an event; in the flat events of early (OpenDevin) outputs every other key
# is an argument of the action (no `args`) or an extra of the observation.
TOP_KEYS = frozenset({"id", "timestamp", "source", "message", "cause", "action", "tool_call_metadata", "llm_metrics",
                       "timeout"})


def is_event(rec: Any) -> bool:
    """One action or one observation (a SWE-agent message has a role, a SWE-agent trajectory
    step both an action and an observation)."""
    return (isinstance(rec, dict) and "role" not in rec
            and isinstance(rec.get("action"), str) != isinstance(rec.get("observation"), str))


def event_args(ev: dict[str, Any]) -> dict[str, Any]:
    """An action's arguments: `args`, or the other keys of a flat early event."""
    if "args" in ev or "observation" in ev:
        return as_dict(ev.get("args"))
    return {k: v for k, v in ev.items() if k not in TOP_KEYS}


def with_args(ev: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """`ev` with its arguments replaced (in `args`, or at the top of a flat early event)."""
    if "args" in ev or "observation" in ev:
        return {**ev, "args": args}
    return {**{k: v for k, v in ev.items() if k in TOP_KEYS}, **args}


def as_dict(value: Any) -> dict[str, Any]:
    """A value that should be an object (an event's `args`, `extras`...), else {}."""
    return value if isinstance(value, dict) else {}


def forgotten_ids(args: dict[str, Any]) -> list[int]:
    """The event ids a condensation action forgets: a list, or a range start..end."""
    ids = args.get("forgotten_event_ids")
    if isinstance(ids, list):
        return [i for i in ids if isinstance(i, int)]
    start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
    if isinstance(start, int) and isinstance(end, int):
        return list(range(start, end + 1))
    return []


def hidden_ids(events: Any) -> set[Any]:
    """Ids OpenHands leaves out of the model's view: what condensations forget, and themselves."""
    out: set[Any] = set()
    for ev in events:
        if ev.get("action") in CONDENSATIONS and "id" in ev:
            out.add(ev["id"])
            if ev["action"] == "condensation" and isinstance(ev.get("args"), dict):
                out.update(forgotten_ids(ev["args"]))
    return out


def response_of(ev: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """The id and assistant message of the model response behind an action, when logged."""
    meta = ev.get("tool_call_metadata")
    resp = meta.get("model_response") if isinstance(meta, dict) else None
    if not isinstance(resp, dict):
        return None, None
    choices = resp.get("choices")
    msg = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    rid = resp.get("id")
    return (str(rid) if rid is not None else None), (msg if isinstance(msg, dict) else None)
