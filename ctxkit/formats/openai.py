"""OpenAI chat-completions messages (also mini-swe-agent trajectories and fine-tuning datasets)."""

from __future__ import annotations

from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import openai_problems, per_conversation
from ctxkit.formats.common import (
    Source,
    args_text,
    blocks_text,
    canonical_role,
    finish,
    is_reasoning_only,
    joins,
    link_group_sizes,
    raw_groups,
    timestamp_of,
    tools_as,
)
from ctxkit.model import ROLES, ToolCall, Transcript, Unit

NAME = "openai"
EXTENSION = ".json"  # what `simulate` names its files

# Roles outside the four canonical ones, mapped to the closest; the source role is kept in meta.
ROLE_MAP = {
    "developer": "system",
    "function": "tool",
    "ipython": "tool",
    "exit": "assistant",  # mini-swe-agent's final submission (the last call's result when one is open)
    "model": "assistant",
    "ai": "assistant",
    "bot": "assistant",
    "human": "user",
}


def detect(obj: Any) -> bool:
    """A list of {role, content|tool_calls} objects (the fallback for plain chat messages)."""
    records = obj if isinstance(obj, list) else [obj]
    seen = 0
    for rec in records[:50]:
        if not isinstance(rec, dict) or not isinstance(rec.get("role"), str):
            return False
        if not ("content" in rec or "tool_calls" in rec or "function_call" in rec):
            return False
        seen += 1
    return seen > 0


def _fresh_id(stated: Any, index: int, taken: set[str]) -> str:
    """A message's own id, or `u<index>` when it has none; made unique (`<id>~2`...) when the
    file repeats it: the chat APIs do not require unique ids, but ctxkit names units by them
    (the file's id stays in `meta["stated_id"]`, which `structure.check` reports)."""
    base = stated if isinstance(stated, str) else f"u{index}"
    uid, k = base, 1
    while uid in taken:
        k += 1
        uid = f"{base}~{k}"
    taken.add(uid)
    return uid


def read(records: list[Any], src: Source) -> Transcript:
    """Units from chat messages: one unit per message, tool results paired by tool_call_id."""
    units: list[Unit] = []
    taken: set[str] = set()  # unit ids given so far
    names: dict[str, str] = {}
    legacy_calls: list[str] = []  # synthesized ids of legacy `function_call`s awaiting a result
    open_calls: list[str] = []  # calls of the last assistant message not answered yet
    usage_calls: list[dict[str, Any]] = []
    envelope = dict(src.envelope)
    tools = envelope.pop("tools", None)
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or not isinstance(rec.get("role"), str):
            src.bad(i, "expected a chat message object with a string `role`", rec)
            continue
        role, meta = canonical_role(rec["role"], ROLE_MAP)
        content, images = blocks_text(rec.get("content"), ("text", "input_text", "output_text"), src)
        calls: list[ToolCall] = []
        raw_calls = rec.get("tool_calls")
        if isinstance(raw_calls, list):
            for k, c in enumerate(raw_calls):
                if not isinstance(c, dict):
                    continue
                fn: dict[str, Any] = c["function"] if isinstance(c.get("function"), dict) else c
                cid = str(c.get("id") or f"call_{i}_{k}")
                fn_name = str(fn.get("name") or "")
                calls.append(ToolCall(cid, fn_name, args_text(fn.get("arguments"))))
                names[cid] = fn_name
        fc = rec.get("function_call")
        if isinstance(fc, dict):
            cid = f"call_{i}"
            fc_name = str(fc.get("name") or "")
            calls.append(ToolCall(cid, fc_name, args_text(fc.get("arguments"))))
            names[cid] = fc_name
            legacy_calls.append(cid)
        tool_call_id = rec.get("tool_call_id")
        name: str | None = rec["name"] if isinstance(rec.get("name"), str) else None
        if meta.get("source_role") == "exit" and open_calls:
            # mini-swe-agent ends a run when the output of the last command says so, and logs
            # that output (the submission) as `exit`: the result of the call it answers.
            role, tool_call_id = "tool", open_calls[-1]
        if role == "tool":
            if tool_call_id is None and meta.get("source_role") == "function" and legacy_calls:
                tool_call_id = legacy_calls.pop(0)
            if name is None and tool_call_id is not None:
                name = names.get(str(tool_call_id))
            if tool_call_id is not None and str(tool_call_id) not in names:
                src.warn(i, f"tool result {tool_call_id} has no matching tool call before it")
        if role == "tool" and tool_call_id is not None and str(tool_call_id) in open_calls:
            open_calls.remove(str(tool_call_id))
        elif role != "tool":
            open_calls = [c.id for c in calls]
        reasoning = rec.get("reasoning_content") or rec.get("reasoning") or ""
        if role == "assistant":
            usage = _usage_of(rec)
            if usage is not None:
                usage["after_unit"] = len(units) - 1
                usage_calls.append(usage)
        unit = Unit(
            id=_fresh_id(rec.get("id"), len(units), taken),
            role=role,
            content=content,
            timestamp=timestamp_of(rec.get("timestamp")),
            tool_calls=calls,
            tool_call_id=str(tool_call_id) if tool_call_id is not None else None,
            name=name,
            reasoning=reasoning if isinstance(reasoning, str) else "",
            images=images,
            raw=rec,
            group=i,
            meta=meta,
        )
        if unit.id != rec.get("id") and isinstance(rec.get("id"), str):
            unit.meta["stated_id"] = rec["id"]  # a repeated id, kept for `guard --check`
        units.append(finish(unit))
    link_group_sizes(units)
    metadata: dict[str, Any] = {}
    source = "mini-swe-agent" if "trajectory_format" in envelope else "openai"
    totals = _model_stats_tokens(envelope)
    if usage_calls or totals:
        metadata["provider_usage"] = {"source": source, "calls": usage_calls, **totals}
    models = [c["model"] for c in usage_calls if "model" in c]
    if models:
        metadata["model"] = models[-1]
    t = Transcript(
        units=units,
        id=_id_of(envelope, src.tid),
        source_format=NAME,
        layout=src.layout,
        tools=tools if isinstance(tools, list) else [],
        envelope=envelope,
        line=src.line,
        metadata=metadata,
    )
    if tools is not None and not isinstance(tools, list):
        t.envelope["tools"] = tools
    return t


def _id_of(envelope: dict[str, Any], default: str) -> str:
    for key in ("instance_id", "id", "session_id"):
        value = envelope.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    return default


def _model_stats_tokens(envelope: dict[str, Any]) -> dict[str, int]:
    """Run totals from mini-swe-agent's `info.model_stats`, when it counts tokens (most runs
    only log cost and api_calls; then the per-call usage above is all there is)."""
    info = envelope.get("info")
    stats = info.get("model_stats") if isinstance(info, dict) else None
    if not isinstance(stats, dict):
        return {}
    out: dict[str, int] = {}
    for key, name in (("input_tokens", "total_input_tokens"), ("prompt_tokens", "total_input_tokens"),
                      ("tokens_sent", "total_input_tokens"), ("output_tokens", "total_output_tokens"),
                      ("completion_tokens", "total_output_tokens"), ("tokens_received", "total_output_tokens")):
        value = stats.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and name not in out:
            out[name] = value
    return out


def _usage_of(rec: dict[str, Any]) -> dict[str, Any] | None:
    """Token usage the provider reported for the call that produced this message, when logged
    (mini-swe-agent keeps the whole response under `extra.response`)."""
    usage = rec.get("usage")
    model = rec.get("model")
    extra = rec.get("extra")
    if not isinstance(usage, dict) and isinstance(extra, dict):
        response = extra.get("response")
        if isinstance(response, dict):
            usage = response.get("usage")
            model = response.get("model")
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    if not isinstance(prompt, int):
        return None
    call: dict[str, Any] = {"after_unit": -1, "input_tokens": prompt, "output_tokens": completion if isinstance(completion, int) else 0}
    if isinstance(model, str) and model:
        call["model"] = model
    return call


def build(u: Unit) -> dict[str, Any]:
    """A chat message from a unit's fields (for units without a usable raw record).

    Reasoning is not written: chat-completions takes no reasoning on input (`reasoning_content`
    is one provider's output field), and an assistant message that only calls tools has
    `content: null`, not an empty string."""
    if u.role == "assistant":
        rec: dict[str, Any] = {"role": "assistant", "content": u.content if (u.content or not u.tool_calls) else None}
        if u.tool_calls:
            rec["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in u.tool_calls
            ]
        if u.name:
            rec["name"] = u.name
        return rec
    if u.role == "tool":
        rec = {"role": "tool", "tool_call_id": u.tool_call_id or "", "content": u.content}
        if u.name:
            rec["name"] = u.name  # tau-bench's logs carry it; the API accepts it
        return rec
    rec = {"role": u.role if u.role in ("system", "user") else "user", "content": u.content}
    if u.name:
        rec["name"] = u.name
    return rec


# The roles chat-completions takes; a record with another role (mini-swe-agent's `exit`) is
# written with the role it was read as (an `exit` that answers the last call: its tool result).
API_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def _joined(last: dict[str, Any], u: Unit) -> dict[str, Any]:
    """`last` with the unit's text added: a second content part for a user or system message,
    the text joined for an assistant (whose content parts are text or refusal only)."""
    content = last.get("content")
    if last.get("role") in ("user", "system", "developer"):
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        return {**last, "content": [*parts, {"type": "text", "text": u.content}]}
    if isinstance(content, list):
        return {**last, "content": [*content, {"type": "text", "text": u.content}]}
    return {**last, "content": f"{content}\n\n{u.content}" if content else u.content}


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Chat messages for a transcript, and the top-level fields to put beside them (tools).

    A unit marked to join the message before goes in that message; a unit that holds only
    reasoning is no chat message."""
    same = t.source_format == NAME
    # A transcript read and not changed (one that fit, or one `expand` restored) is written
    # back record for record, roles the API does not take included; a changed one goes to a
    # model, so every record gets a role the API takes.
    verbatim = same and all(u.raw is not None for u in t.units)
    records: list[Any] = []
    built: list[dict[str, Any]] = []  # the records built here (not a source's)
    for raw, run in raw_groups(t.units):
        if raw is not None and same:
            if isinstance(raw, dict) and raw.get("role") not in API_ROLES and not verbatim:
                raw = {**raw, "role": run[0].role}
                if run[0].role == "tool":
                    raw["tool_call_id"] = run[0].tool_call_id
            records.append(raw)
            continue
        for u in run:
            if is_reasoning_only(u):
                continue
            last = records[-1] if records else None
            role = u.role if u.role in ROLES else "user"
            if joins(u) and isinstance(last, dict) and last.get("role") == role and role != "tool":
                records[-1] = _joined(last, u)
                continue
            rec = build(u)
            if (u.tool_calls and not u.content and isinstance(last, dict) and last.get("role") == "assistant"
                    and last.get("tool_calls") and built and last is built[-1]):
                # Parallel calls read as one unit each (Codex writes one item per call): one
                # assistant message, since its results must follow it before any other message.
                records[-1] = built[-1] = {**last, "tool_calls": [*last["tool_calls"], *rec["tool_calls"]]}
                continue
            records.append(rec)
            built.append(rec)
    extras: dict[str, Any] = {"tools": tools_as(FORMAT.tool_shape, t.tools)} if t.tools else {}
    return records, extras


def detect_object(obj: dict[str, Any]) -> bool:
    """An empty conversation ({"messages": []}): any chat format reads it, this one does."""
    return obj.get("messages") == []


# ---------------------------------------------------------------- validating

# `chat.completions` request messages and tools (the SDK's types) and the pairing rules.
validate = per_conversation(openai_problems)


FORMAT = Format.of_module(__name__, label="OpenAI chat messages", shape="messages",
                          tool_shape="openai")
