"""GitHub Copilot CLI session events (`~/.copilot/session-state/<id>/events.jsonl`).

One event per line, `{type, data, id, timestamp, parentId}`, each chained to the one before by
`parentId`. Read: `system.message` is the system prompt (Copilot logs it whole),
`user.message` a user unit (its `transformedContent`, what the model read), `assistant.message`
an assistant unit (`content`, `toolRequests` as tool calls, `reasoningText` as reasoning) and
`tool.execution_complete` the result of the call its `toolCallId` names (`result.content`, or
`error.message`). Events of a sub-agent (`agentId`, or `parentToolCallId` on a message) are its
own conversation: kept, and read only with `include_sidechains`. Every other event (session,
turn, hook, permission, notification, usage...) is kept in place (`formats.kept`); an
`assistant.usage` event, when the log has one, is the provider's count of that call. An
`assistant.message` that says nothing (no `content`, no `toolRequests`, no `reasoningText`:
1.0.7x logs one per reasoning step of an OpenAI model, its reasoning only in the encrypted
`reasoningOpaque`/`encryptedContent`) is no message either: kept with the unit it precedes, as
Codex's encrypted reasoning is, never an empty assistant unit.

Copilot's own compaction, `session.compaction_complete` with a `summaryContent`, replaces what
came before its `session.compaction_start` with that summary: the events before it are kept in
the file and left out of the units (counted) unless `include_compacted`.

Written back as events Copilot loads: untouched events as they were, a changed one with its
text replaced, units compaction made as `user.message` or `assistant.message` events; an event
whose parent went with compaction follows the event before it, as Copilot chains them.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime, timezone
from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, app_records, openai_pairs
from ctxkit.formats.common import (
    Source,
    args_object,
    args_text,
    finish,
    joins,
    timestamp_of,
)
from ctxkit.formats.kept import KEY as KEPT
from ctxkit.formats.kept import Keeper, place, relinked
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "copilot-cli"
COMPACTED = "before Copilot's last compaction"
_NAMESPACE = uuidlib.UUID("5a2e9c41-7b3d-5f08-a1c6-2d8e4f0b9a73")
_MESSAGE_EVENTS = ("system.message", "user.message", "assistant.message", "tool.execution_complete")


def _is_event(rec: Any) -> bool:
    return (isinstance(rec, dict) and isinstance(rec.get("type"), str) and "." in rec["type"]
            and isinstance(rec.get("data"), dict) and "id" in rec and "parentId" in rec)


def detect(records: list[Any]) -> bool:
    """Events shaped `{type: "<area>.<event>", data, id, parentId, timestamp}`."""
    head = records[:20]
    return bool(head) and all(_is_event(r) for r in head)


def _sub_agent(rec: dict[str, Any]) -> bool:
    data = rec["data"]
    return bool(rec.get("agentId")) or (rec["type"] != "tool.execution_complete" and bool(data.get("parentToolCallId")))


def _says_nothing(data: dict[str, Any]) -> bool:
    """An assistant message with no text, no call and no readable reasoning (its reasoning, if
    any, encrypted): nothing a model reads, and an empty message to every chat API."""
    return not data.get("content") and not data.get("toolRequests") and not data.get("reasoningText")


def _message_unit(i: int, rec: dict[str, Any], eid: str, ts: float | None, names_of: dict[str, str],
                  src: Source) -> Unit:
    """The unit of a message event: the system prompt, a user message, an assistant message with
    its tool requests (their names noted in `names_of`), or a tool's result."""
    kind, data = rec["type"], rec["data"]
    meta: dict[str, Any] = {"sidechain": True} if _sub_agent(rec) else {}
    if kind == "system.message":
        return Unit(id=eid, role="system", content=str(data.get("content") or ""), timestamp=ts, raw=rec, group=i)
    if kind == "user.message":
        text = data.get("transformedContent") if isinstance(data.get("transformedContent"), str) else data.get("content")
        return Unit(id=eid, role="user", content=str(text or ""), timestamp=ts, raw=rec, group=i, meta=meta)
    if kind == "assistant.message":
        tool_calls: list[ToolCall] = []
        for req in data.get("toolRequests") or []:
            if isinstance(req, dict):
                cid = str(req.get("toolCallId") or f"{eid}#{len(tool_calls)}")
                names_of[cid] = str(req.get("name") or "")
                tool_calls.append(ToolCall(cid, names_of[cid], args_text(req.get("arguments"))))
        return Unit(id=eid, role="assistant", content=str(data.get("content") or ""), timestamp=ts,
                    tool_calls=tool_calls, reasoning=str(data.get("reasoningText") or ""), raw=rec, group=i,
                    meta=meta)
    cid = str(data.get("toolCallId") or "")
    result = data.get("result") if isinstance(data.get("result"), dict) else {}
    error = data.get("error") if isinstance(data.get("error"), dict) else {}
    text = result.get("content") if isinstance(result.get("content"), str) else error.get("message")
    if data.get("success") is False:
        meta["is_error"] = True
    if cid not in names_of:
        src.warn(i, f"tool result {cid} has no matching tool request before it")
    return Unit(id=eid, role="tool", content=str(text or ""), timestamp=ts, tool_call_id=cid,
                name=names_of.get(cid), raw=rec, group=i, meta=meta)


def read(records: list[Any], src: Source) -> Transcript:
    """The session's messages as units (see the module doc)."""
    units: list[Unit] = []
    keeper = Keeper()
    calls: list[dict[str, Any]] = []
    names_of: dict[str, str] = {}
    session: str | None = None
    model: str | None = None
    compacted_at: int | None = None  # units before the last compaction's start
    started: int | None = None
    for i, rec in enumerate(records):
        if not _is_event(rec):
            src.bad(i, "expected a Copilot CLI event {type, data, id, timestamp, parentId}", rec)
            continue
        kind, data = rec["type"], rec["data"]
        eid = str(rec.get("id") or f"e{i}")
        ts = timestamp_of(rec.get("timestamp"))
        if kind == "session.start":
            session = session or (str(data["sessionId"]) if data.get("sessionId") else None)
        elif kind == "session.model_change" and isinstance(data.get("newModel"), str):
            model = data["newModel"]
        elif kind == "session.compaction_start":
            started = len(units)
        elif kind == "session.compaction_complete" and data.get("success") is not False and isinstance(
                data.get("summaryContent"), str) and data["summaryContent"]:
            at = started if started is not None else len(units)
            units.insert(at, Unit(id=eid, role="user", type="summary", content=data["summaryContent"],
                                  timestamp=ts, raw=rec, group=i))
            keeper.unit(eid, [i], eid)
            compacted_at, started = at, None
            src.stats.skip("session.compaction_complete")
            continue
        # 1.0.7x events kept as they are: `session.warning` (an MCP server that failed to
        # start...), `session.plan_changed` (the plan file created or updated),
        # `session.usage_checkpoint` (the session's billing so far: `totalNanoAiu`,
        # `totalPremiumRequests`, and each model's prompt-cache expiry in `modelCacheState`; no
        # token counts of any call, so no recorded usage) and `session.context_changed` (the
        # working directory, git branch and commit the session now runs in, not the model's
        # context).
        elif kind == "assistant.usage" and isinstance(data.get("inputTokens"), int) and not rec.get("agentId"):
            calls.append({"after_unit": len(units) - 2, "input_tokens": data["inputTokens"],
                          "cache_read_tokens": int(data.get("cacheReadTokens") or 0),
                          "cache_write_tokens": int(data.get("cacheWriteTokens") or 0),
                          "output_tokens": int(data.get("outputTokens") or 0)})
        if kind not in _MESSAGE_EVENTS:
            src.stats.skip(kind)
            keeper.keep(i, rec, name=eid)
            continue
        if _sub_agent(rec) and not src.include_sidechains:
            src.stats.skipped_sidechain += 1
            keeper.keep(i, rec, name=eid)
            continue
        if kind == "assistant.message" and _says_nothing(data):
            model = data.get("model") if isinstance(data.get("model"), str) else model
            opaque = data.get("reasoningOpaque") or data.get("encryptedContent")
            src.stats.skip("assistant.message:reasoningOpaque" if opaque else "assistant.message:empty")
            keeper.keep(i, rec, precedes=True, name=eid)
            continue
        if kind == "assistant.message":
            model = data.get("model") if isinstance(data.get("model"), str) else model
        unit = _message_unit(i, rec, eid, ts, names_of, src)
        units.append(finish(unit))
        keeper.unit(eid, [i], eid)
    if compacted_at and not src.include_compacted:
        hidden = [u for u in units[:compacted_at] if u.role != "system"]
        keeper.hide(hidden)
        src.left_out(COMPACTED, len(hidden))
        units = [u for u in units[:compacted_at] if u.role == "system"] + units[compacted_at:]
        calls = []
    metadata: dict[str, Any] = {KEPT: keeper.metadata()}
    if calls:
        metadata["provider_usage"] = {"source": NAME, "calls": [c for c in calls if c["after_unit"] >= -1]}
    if session:
        metadata["session_id"] = session
    if model:
        metadata["model"] = model
    return src.transcript(units, NAME, session, metadata)


# ---------------------------------------------------------------- writing


def _iso(ts: float | None) -> str:
    return datetime.fromtimestamp(ts or 0.0, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _changed(u: Unit, rec: dict[str, Any]) -> dict[str, Any]:
    """The unit's source event with what changed replaced."""
    data = dict(rec["data"])
    kind = rec["type"]
    if kind in ("system.message", "user.message"):
        data["content"] = u.content
        if "transformedContent" in data:
            data["transformedContent"] = u.content
    elif kind == "assistant.message":
        data["content"] = u.content
        requests = {str(r.get("toolCallId")): r for r in data.get("toolRequests") or [] if isinstance(r, dict)}
        data["toolRequests"] = [
            {**requests[c.id], "arguments": args_object(c.arguments)} if c.id in requests
            and args_text(requests[c.id].get("arguments")) != c.arguments else requests.get(c.id) or
            {"toolCallId": c.id, "name": c.name, "arguments": args_object(c.arguments), "type": "function"}
            for c in u.tool_calls
        ]
    elif kind == "tool.execution_complete":
        if u.meta.get("is_error") and isinstance(data.get("error"), dict):
            data["error"] = {**data["error"], "message": u.content}
        else:
            data["result"] = {"content": u.content}
    elif kind == "session.compaction_complete":
        data["summaryContent"] = u.content
    return {**rec, "data": data}


def _new(u: Unit, t: Transcript) -> dict[str, Any]:
    """A new event for a unit compaction made (or one of another format)."""
    eid = str(uuidlib.uuid5(_NAMESPACE, f"{t.id}/{u.id}"))
    rec: dict[str, Any]
    if u.role == "assistant":
        data: dict[str, Any] = {"messageId": eid, "content": u.content, "toolRequests": [
            {"toolCallId": c.id, "name": c.name, "arguments": args_object(c.arguments), "type": "function"}
            for c in u.tool_calls]}
        rec = {"type": "assistant.message", "data": data}
    elif u.role == "tool":
        ok = not u.meta.get("is_error")
        rec = {"type": "tool.execution_complete", "data": {
            "toolCallId": u.tool_call_id or "", "success": ok,
            **({"result": {"content": u.content}} if ok else {"error": {"message": u.content}})}}
    elif u.role == "system":
        rec = {"type": "system.message", "data": {"role": "system", "content": u.content}}
    else:
        rec = {"type": "user.message", "data": {"content": u.content}}
    return {**rec, "id": eid, "timestamp": _iso(u.timestamp), "parentId": None}


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Copilot events for a transcript (see the module doc)."""
    same = t.source_format == NAME
    produced: list[tuple[Unit | None, Any]] = []
    made: set[str] = set()
    if not same:
        start = {"type": "session.start", "data": {"sessionId": str(uuidlib.uuid5(_NAMESPACE, t.id)), "version": 1,
                                                     "producer": "ctxkit"}, "id": str(uuidlib.uuid5(_NAMESPACE, t.id + "/start")),
                 "timestamp": _iso(next((u.timestamp for u in t.units if u.timestamp is not None), None)), "parentId": None}
        produced.append((None, start))
    for u in t.units:
        src = u.source if same and isinstance(u.source, dict) and _is_event(u.source) else None
        if src is not None and u.raw is not None and not joins(u):
            produced.append((u, u.raw))
        elif joins(u) and produced and produced[-1][1].get("type") in ("user.message", "assistant.message") and (
                (produced[-1][1]["type"] == "assistant.message") == (u.role == "assistant")) and u.role != "tool":
            last = produced[-1][1]
            data = dict(last["data"])
            for key in ("content", "transformedContent"):
                if key in data or key == "content":
                    text = str(data.get(key) or "")
                    data[key] = f"{text}\n\n{u.content}" if text else u.content
            produced[-1] = (produced[-1][0], {**last, "data": data})
        elif src is not None:
            produced.append((u, _changed(u, src)))
        elif not (u.role == "assistant" and not u.content and not u.tool_calls):
            rec = _new(u, t)
            made.add(rec["id"])
            produced.append((u, rec))
    events = place(t, produced) if same else [rec for _, rec in produced]
    return relinked(t, events, made), {}


# ---------------------------------------------------------------- validating


def validate(data: Any) -> list[str]:
    """What Copilot needs to load a session: every event `{type, data, id, timestamp,
    parentId}`, ids unique, each `parentId` null or an earlier event's; each tool result
    answering a request made before it, and every request answered."""
    records = app_records(data)
    out: list[str] = []
    seen: set[Any] = set()
    messages: list[dict[str, Any]] = []
    for i, ev in enumerate(records):
        at = f"event {i + 1}"
        if not _is_event(ev):
            out.append(f"{at}: not an event {{type, data, id, timestamp, parentId}}")
            continue
        if ev["id"] in seen:
            out.append(f"{at}: repeated id {ev['id']!r}")
        if ev["parentId"] is not None and ev["parentId"] not in seen:
            out.append(f"{at}: parentId {ev['parentId']!r} is no earlier event")
        seen.add(ev["id"])
        if _sub_agent(ev):
            continue
        d = ev["data"]
        if ev["type"] == "assistant.message":
            messages.append({"role": "assistant", "tool_calls": [
                {"id": str(r.get("toolCallId"))} for r in d.get("toolRequests") or [] if isinstance(r, dict)]})
        elif ev["type"] == "tool.execution_complete":
            messages.append({"role": "tool", "tool_call_id": str(d.get("toolCallId"))})
        elif ev["type"] == "user.message":
            messages.append({"role": "user"})
    # Copilot runs a response's calls before the next message: results follow their request
    out.extend(p.replace("message ", "message #") for p in openai_pairs(_grouped(messages), ""))
    return out[:MAX_PROBLEMS]


def _grouped(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Results moved right after the request that made them (Copilot may log another assistant
    message of the same turn between a request and its result)."""
    out: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}
    for m in messages:
        if m["role"] == "tool" and m["tool_call_id"] in pending:
            owner = pending.pop(m["tool_call_id"])
            owner["results"].append(m)
            continue
        if m["role"] == "assistant":
            m = {**m, "results": []}
            for c in m["tool_calls"]:
                pending[c["id"]] = m
        out.append(m)
    flat: list[dict[str, Any]] = []
    for m in out:
        flat.append({k: v for k, v in m.items() if k != "results"})
        flat.extend(m.get("results", []))
    return flat


FORMAT = Format.of_module(__name__, label="Copilot CLI session", shape="log", agent="Copilot CLI",
                          strict=True, holds_tools=False, omits="the tool schemas", sidechains=True,
                          compaction=True)
