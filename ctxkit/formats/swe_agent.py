"""SWE-agent trajectories (`.traj`): `{history, trajectory, info, environment, replay_config}`.

`history` is what the model saw, one `{role, content, agent, message_type, ...}` per message:
the system prompt, the demonstrations (`is_demo`), the issue, then the model's steps and their
observations. It is the transcript. Everything else (`trajectory`: each step's action,
observation, response, state and query; `info`: exit status, submission, model stats;
`attempts` of a retry loop; `replay_config`) is kept as it is, and written back beside it.

Steps come in two shapes. With function calling (SWE-agent 1.x) the assistant message holds
`tool_calls` and the observation is a `tool` message naming its call in `tool_call_ids`: a tool
call and its result. In the classic shape the action is text inside the assistant message
(`thought` and `action` repeat it) and the observation is the next `user` message: read as a
user message of type `tool_result` (what the model saw is kept as it was, and compaction treats
the observation as the tool output it is, not as a new request).

Written back, an untouched message is its record; a changed one is its record with `content`
replaced (and the calls' arguments); a made-up one gets SWE-agent's own keys (`agent`,
`message_type`). `trajectory` stays whole: it is the run's log, not the model's view, and
replaying or inspecting a run reads it; only `history` is compacted.
"""

from __future__ import annotations

from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, agent_log
from ctxkit.formats.common import Source, args_text, blocks_text, canonical_role, finish, joins
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "swe-agent"
MESSAGES_KEY = "history"
_ALIASES = {"ai": "assistant", "model": "assistant"}  # other roles than ctxkit's: user

_TRAJ_KEYS = ("trajectory", "info", "replay_config", "environment", "attempts")
_SWE_KEYS = ("agent", "message_type", "is_demo")
MESSAGE_TYPES = frozenset(
    {"system_prompt", "demonstration", "observation", "action", "thought", "user", "assistant"}
)


def detect(obj: Any) -> bool:
    """Never a bare list of records (a .traj is an object with `history`)."""
    return False


def detect_conversation(obj: Any) -> bool:
    """A .traj object: a `history` of role/content messages beside `trajectory` or `info`, or
    messages carrying SWE-agent's own keys (agent, message_type, is_demo)."""
    if not isinstance(obj, dict) or "messages" in obj or not isinstance(obj.get("history"), list):
        return False
    head = obj["history"][:20]
    if any(k in obj for k in ("trajectory", "replay_config")):
        # a .traj whatever its messages hold (a broken one is reported message by message)
        return not any(isinstance(m, dict) and ("action" in m and "id" in m or "observation" in m) for m in head)
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in head):
        return False
    return bool(head) and any(k in m for m in head for k in _SWE_KEYS)


def _reasoning(rec: dict[str, Any]) -> str:
    blocks = rec.get("thinking_blocks")
    if not isinstance(blocks, list):
        return ""
    return "\n".join(b["thinking"] for b in blocks if isinstance(b, dict) and isinstance(b.get("thinking"), str))


def read(records: list[Any], src: Source) -> Transcript:
    """Units of the history (see the module doc)."""
    units: list[Unit] = []
    names: dict[str, str] = {}
    previous: str | None = None  # role of the record before
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or not isinstance(rec.get("role"), str):
            src.bad(i, "expected a SWE-agent history message {role, content, ...}", rec)
            continue
        role, meta = canonical_role(rec["role"], _ALIASES)
        if rec.get("is_demo"):
            meta["demo"] = True
        content, images = blocks_text(rec.get("content"), ("text",), src)
        unit = Unit(id=f"u{len(units)}", role=role, content=content, images=images, raw=rec, group=i, meta=meta)
        typed = False
        if role == "assistant":
            for k, c in enumerate(rec.get("tool_calls") or []):
                if not isinstance(c, dict):
                    continue
                fn = c["function"] if isinstance(c.get("function"), dict) else c
                cid = str(c.get("id") or f"call_{i}_{k}")
                names[cid] = str(fn.get("name") or "")
                unit.tool_calls.append(ToolCall(cid, names[cid], args_text(fn.get("arguments"))))
            unit.reasoning = _reasoning(rec)
        elif role == "tool":
            ids = rec.get("tool_call_ids")
            answers = ids[0] if isinstance(ids, list) and ids else rec.get("tool_call_id")
            if answers is not None and str(answers) in names:
                unit.tool_call_id, unit.name = str(answers), names[str(answers)]
            else:
                src.warn(i, f"tool message {answers} answers no call before it")
                unit.role, meta["source_role"] = "user", "tool"
                unit.type, typed = "tool_result", True
        elif role == "user" and previous == "assistant":
            # A classic step's observation: the output of the action the message before wrote.
            unit.type, typed = "tool_result", True
        units.append(finish(unit, typed))
        previous = rec["role"]
    envelope = dict(src.envelope)
    metadata: dict[str, Any] = {}
    totals = _model_stats(envelope)
    if totals:
        metadata["provider_usage"] = {"source": NAME, "calls": [], **totals}
    return Transcript(
        units=units,
        id=src.tid,
        source_format=NAME,
        layout=src.layout,
        envelope=envelope,
        line=src.line,
        metadata=metadata,
    )


def _model_stats(envelope: dict[str, Any]) -> dict[str, int]:
    """Run totals from `info.model_stats` (tokens_sent / tokens_received, summed over calls)."""
    info = envelope.get("info")
    stats = info.get("model_stats") if isinstance(info, dict) else None
    if not isinstance(stats, dict):
        return {}
    out: dict[str, int] = {}
    for key, name in (("tokens_sent", "total_input_tokens"), ("tokens_received", "total_output_tokens")):
        value = stats.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = value
    return out


# ---------------------------------------------------------------- writing


def _agent(t: Transcript) -> str:
    for u in t.units:
        if isinstance(u.source, dict) and isinstance(u.source.get("agent"), str):
            return str(u.source["agent"])
    return "main"  # SWE-agent 1.x's default agent name


def _calls(u: Unit) -> list[dict[str, Any]]:
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in u.tool_calls]


def _built(u: Unit, agent: str) -> dict[str, Any]:
    """A history message for a unit with no usable source record."""
    if u.role == "system":
        return {"role": "system", "content": u.content, "agent": agent, "message_type": "system_prompt"}
    if u.role == "assistant":
        rec: dict[str, Any] = {"role": "assistant", "content": u.content, "agent": agent,
                               "message_type": "action" if u.tool_calls else "assistant"}
        if u.tool_calls:
            rec["tool_calls"] = _calls(u)
        return rec
    if u.role == "tool" and u.tool_call_id is not None:
        return {"role": "tool", "content": u.content, "agent": agent, "message_type": "observation",
                "tool_call_ids": [u.tool_call_id]}
    kind = "observation" if u.type == "tool_result" else "user"
    return {"role": "user", "content": u.content, "agent": agent, "message_type": kind}


def _changed(u: Unit, rec: dict[str, Any]) -> dict[str, Any]:
    """The source record with the unit's content (and its calls' arguments) replaced."""
    out = dict(rec)
    out["content"] = [{"type": "text", "text": u.content}] if isinstance(rec.get("content"), list) else u.content
    if isinstance(rec.get("tool_calls"), list) and u.tool_calls:
        args = {c.id: c.arguments for c in u.tool_calls}
        calls = []
        for c in rec["tool_calls"]:
            if isinstance(c, dict) and isinstance(c.get("function"), dict) and str(c.get("id")) in args:
                c = {**c, "function": {**c["function"], "arguments": args[str(c["id"])]}}
            calls.append(c)
        out["tool_calls"] = calls
    return out


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """History messages for a transcript, and (for another format's) an empty trajectory and info."""
    same = t.source_format == NAME
    agent = _agent(t)
    records: list[dict[str, Any]] = []
    for u in t.units:
        rec = u.source if same and isinstance(u.source, dict) and isinstance(u.source.get("role"), str) else None
        if rec is not None and u.raw is not None and not joins(u):
            records.append(u.raw)
            continue
        if rec is not None:
            records.append(_changed(u, rec))
            continue
        last = records[-1] if records else None
        if joins(u) and u.role != "tool" and last is not None and last.get("role") == u.role \
                and isinstance(last.get("content"), str):
            records[-1] = {**last, "content": f"{last['content']}\n\n{u.content}"}
            continue
        if u.role == "assistant" and not (u.content or u.tool_calls or u.images):
            continue  # reasoning only: no message of its own
        records.append(_built(u, agent))
    extras: dict[str, Any] = {}
    if not same:
        extras = {k: v for k, v in (("trajectory", []), ("info", {})) if k not in t.envelope}
    return records, extras


# ---------------------------------------------------------------- validating


_SWE_ROLES = frozenset({"system", "user", "assistant", "tool"})


def _problems(history: Any, where: str) -> list[str]:
    """A .traj `history`: messages of known roles with text content, SWE-agent's message
    types, and every tool message answering a call an assistant message made before it."""
    if not isinstance(history, list):
        return [f"{where}history: not a list"]
    out: list[str] = []
    calls: set[str] = set()
    for i, msg in enumerate(history):
        at = f"{where}message {i + 1}"
        if not isinstance(msg, dict) or msg.get("role") not in _SWE_ROLES:
            out.append(f"{at}: not a history message with a known role")
            continue
        content = msg.get("content")
        if not isinstance(content, (str, list)):
            out.append(f"{at}: content is neither text nor a list of parts")
        if "message_type" in msg and msg["message_type"] not in MESSAGE_TYPES:
            out.append(f"{at}: unknown message_type {msg['message_type']!r}")
        for c in msg.get("tool_calls") or []:
            if not isinstance(c, dict) or not isinstance(c.get("function"), dict) or not c.get("id"):
                out.append(f"{at}: tool call without id and function")
                continue
            calls.add(str(c["id"]))
        if msg["role"] == "tool":
            ids = msg.get("tool_call_ids")
            if not isinstance(ids, list) or not ids or any(str(x) not in calls for x in ids):
                out.append(f"{at}: tool message answers no call made before it")
    return out[:MAX_PROBLEMS]



validate = agent_log(_problems, MESSAGES_KEY)


FORMAT = Format.of_module(__name__, label="SWE-agent trajectory", shape="messages",
                          agent="SWE-agent", detect_object=detect_conversation, bare=False,
                          suffixes=(".json", ".jsonl", ".traj"))
