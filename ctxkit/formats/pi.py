"""Pi coding agent sessions (`~/.pi/agent/sessions/--<cwd>--/<timestamp>_<uuid>.jsonl`).

Pi (badlogic/pi-mono, `packages/coding-agent`; its `docs/session.md` and `session-manager.ts`)
writes one JSON entry per line: a header `{type: "session", version, id, timestamp, cwd}`, then
entries `{type, id, parentId, timestamp, ...}` that form a tree (a branch starts from an earlier
entry). `message` entries hold an `AgentMessage`: `user` (`content`: text, or text and image
blocks), `assistant` (`text`, `thinking` and `toolCall {id, name, arguments}` blocks, `usage`,
`model`), `toolResult` (`toolCallId`, `toolName`, `content`, `isError`), and Pi's own
`bashExecution` (a `!command` the user ran; `excludeFromContext` for `!!`), `custom`,
`branchSummary` and `compactionSummary`. Other entries: `compaction` (`summary`,
`firstKeptEntryId`), `branch_summary`, `custom_message` (an extension's text the model reads),
and `custom`, `label`, `session_info`, `model_change`, `thinking_level_change` (state only).

Read as Pi builds the model's context (`buildSessionContext`): the path from the last entry to
the root; on it, messages as units (`toolResult` a tool unit paired by `toolCallId`, thinking
as reasoning, `usage` as recorded usage), the summaries and extension messages as user units
(a compaction's summary as a summary unit), and what precedes the last compaction's
`firstKeptEntryId` left out (counted) unless `include_compacted`. Entries off the path (an
abandoned branch), state entries and `!!` commands are kept in place (`formats.kept`), not
counted. The units stay in file order (Pi sends a compaction's summary before the messages it
kept; the count is the same).

Written back as a session Pi opens: untouched entries as they were, a changed message with its
text replaced, units compaction made as new `message` entries; an entry whose parent went with
compaction hangs from the entry before it.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime, timezone
from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, app_records
from ctxkit.formats.common import Source, args_object, args_text, finish, joins, timestamp_of
from ctxkit.formats.kept import KEY as KEPT
from ctxkit.formats.kept import Keeper, place, relinked
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "pi"
COMPACTED = "before Pi's last compaction"
_NAMESPACE = uuidlib.UUID("0c9e4a61-3f2b-5d7e-9a18-6b4c2e8f1d35")
# every entry type Pi writes after its header (session-manager.ts)
_ENTRIES = frozenset({"message", "compaction", "branch_summary", "custom", "custom_message", "label",
                      "session_info", "model_change", "thinking_level_change"})
_ROLES = frozenset({"user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary",
                    "compactionSummary", "hookMessage"})


def _header(rec: Any) -> bool:
    return isinstance(rec, dict) and rec.get("type") == "session" and "cwd" in rec and "id" in rec


def _entry(rec: Any) -> bool:
    return (isinstance(rec, dict) and rec.get("type") in _ENTRIES and "id" in rec and "parentId" in rec
            and (rec["type"] != "message" or (isinstance(rec.get("message"), dict)
                                              and rec["message"].get("role") in _ROLES)))


def detect(records: list[Any]) -> bool:
    """A Pi session: its header first, then entries of Pi's types with `id` and `parentId`."""
    head = records[:20]
    return bool(head) and _header(head[0]) and all(_entry(r) for r in head[1:])


# ---------------------------------------------------------------- reading


def _text(content: Any) -> tuple[str, int]:
    """The text and image count of Pi content: a string, or text and image blocks."""
    if isinstance(content, str):
        return content, 0
    texts: list[str] = []
    images = 0
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block, dict) and block.get("type") == "image":
            images += 1
    return "\n".join(texts), images


def _path(records: list[Any]) -> set[int]:
    """Indexes of the entries on the path from the last entry to the root (Pi's leaf is the
    entry appended last)."""
    by_id = {rec.get("id"): i for i, rec in enumerate(records) if _entry(rec)}
    on: set[int] = set()
    at = next((i for i in range(len(records) - 1, -1, -1) if _entry(records[i])), None)
    while at is not None and at not in on:
        on.add(at)
        at = by_id.get(records[at].get("parentId"))
    return on


def _unit(rec: dict[str, Any], uid: str, i: int, src: Source) -> Unit | None:
    """The unit of an entry on the path; None for one the model does not read."""
    ts = timestamp_of(rec.get("timestamp"))
    kind = rec.get("type")
    if kind == "compaction":
        return Unit(id=uid, role="user", type="summary", content=str(rec.get("summary") or ""), timestamp=ts,
                    raw=rec, group=i)
    if kind == "branch_summary":
        return Unit(id=uid, role="user", content=str(rec.get("summary") or ""), timestamp=ts, raw=rec, group=i,
                    meta={"pi": "branch_summary"})
    if kind == "custom_message":
        text, images = _text(rec.get("content"))
        return Unit(id=uid, role="user", content=text, images=images, timestamp=ts, raw=rec, group=i,
                    meta={"pi": "custom_message"})
    if kind != "message":
        return None
    msg = rec["message"]
    role = msg.get("role")
    if role == "assistant":
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        for block in msg.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
                thinking.append(block["thinking"])
            elif block.get("type") == "toolCall":
                calls.append(ToolCall(str(block.get("id") or f"{uid}.c{len(calls)}"), str(block.get("name") or ""),
                                      args_text(block.get("arguments"))))
        meta = {"model": msg["model"]} if isinstance(msg.get("model"), str) else {}
        return Unit(id=uid, role="assistant", content="\n".join(texts), reasoning="\n".join(thinking),
                    tool_calls=calls, timestamp=ts, raw=rec, group=i, meta=meta)
    if role == "toolResult":
        text, images = _text(msg.get("content"))
        return Unit(id=uid, role="tool", content=text, images=images, timestamp=ts, raw=rec, group=i,
                    tool_call_id=str(msg.get("toolCallId") or ""), name=str(msg.get("toolName") or "") or None,
                    meta={"is_error": True} if msg.get("isError") else {})
    if role == "bashExecution":
        if msg.get("excludeFromContext"):
            return None
        # what Pi sends for a `!command` the user ran: the command and its output
        text = f"Ran `{msg.get('command') or ''}`\n```\n{msg.get('output') or ''}\n```"
        return Unit(id=uid, role="user", content=text, timestamp=ts, raw=rec, group=i, meta={"pi": "bashExecution"})
    if role in ("branchSummary", "compactionSummary"):
        summary = Unit(id=uid, role="user", content=str(msg.get("summary") or ""), timestamp=ts, raw=rec, group=i,
                       meta={"pi": role})
        if role == "compactionSummary":
            summary.type = "summary"
        return summary
    text, images = _text(msg.get("content"))
    return Unit(id=uid, role="user", content=text, images=images, timestamp=ts, raw=rec, group=i,
                meta={} if role == "user" else {"pi": role})


def read(records: list[Any], src: Source) -> Transcript:
    """The path Pi sends as units (see the module doc)."""
    units: list[Unit] = []
    keeper = Keeper()
    stats = src.stats
    on_path = _path(records)
    usage: list[dict[str, Any]] = []
    compaction: tuple[int, Any] | None = None  # (unit index of the last compaction on the path, first kept id)
    index_of: dict[Any, int] = {}  # entry id -> unit index
    model: str | None = None
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            src.bad(i, "expected a Pi session entry object", rec)
            continue
        if i not in on_path:
            stats.skip(str(rec.get("type")) if _header(rec) or rec.get("type") != "message" else "off the path")
            keeper.keep(i, rec, name=rec.get("id") if _entry(rec) else None)
            continue
        unit = _unit(rec, f"e{i}", i, src)
        if unit is None:
            role = rec["message"].get("role") if rec.get("type") == "message" else None
            stats.skip(f"{role} out of the context" if role else str(rec.get("type")))
            keeper.keep(i, rec, name=rec.get("id"))
            continue
        if unit.role == "assistant":
            msg = rec["message"]
            model = unit.meta.get("model") or model
            got = msg.get("usage")
            if isinstance(got, dict) and isinstance(got.get("input"), int):
                read_ = int(got.get("cacheRead") or 0)
                usage.append({"after_unit": len(units) - 1,
                              "input_tokens": got["input"] + read_ + int(got.get("cacheWrite") or 0),
                              "cache_read_tokens": read_, "output_tokens": int(got.get("output") or 0)})
        if rec.get("type") == "compaction":
            compaction = (len(units), rec.get("firstKeptEntryId"))
        index_of[rec.get("id")] = len(units)
        units.append(finish(unit, typed=unit.type == "summary"))
        keeper.unit(unit.id, [i], rec.get("id"))
    if compaction is not None and not src.include_compacted:
        at, first_kept = compaction
        keep_from = index_of.get(first_kept, at)
        gone = [u for k, u in enumerate(units) if k < min(keep_from, at)]
        if gone:
            keeper.hide(gone)
            stats.skip(COMPACTED, len(gone))
            gone_ids = {u.id for u in gone}
            shift = len(gone)
            units = [u for u in units if u.id not in gone_ids]
            usage = [{**c, "after_unit": c["after_unit"] - shift} for c in usage if c["after_unit"] >= shift]
    metadata: dict[str, Any] = {KEPT: keeper.metadata()}
    if usage:
        metadata["provider_usage"] = {"source": NAME, "calls": usage}
    if model:
        metadata["model"] = model
    header = records[0] if records and _header(records[0]) else None
    return Transcript(units=units, id=str(header.get("id")) if header else src.tid, source_format=NAME,
                      layout=src.layout, line=src.line, metadata=metadata)


# ---------------------------------------------------------------- writing


def _iso(ts: float | None) -> str:
    value = datetime.fromtimestamp(ts or 0.0, timezone.utc)
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ms(ts: float | None) -> int:
    return int((ts or 0.0) * 1000)


def _message(u: Unit) -> dict[str, Any]:
    """A Pi message for a unit from its fields."""
    if u.role == "assistant":
        content: list[dict[str, Any]] = []
        if u.reasoning:
            content.append({"type": "thinking", "thinking": u.reasoning})
        if u.content:
            content.append({"type": "text", "text": u.content})
        content.extend({"type": "toolCall", "id": c.id, "name": c.name, "arguments": args_object(c.arguments)}
                       for c in u.tool_calls)
        return {"role": "assistant", "content": content, "stopReason": "toolUse" if u.tool_calls else "stop",
                "timestamp": _ms(u.timestamp)}
    if u.role == "tool":
        return {"role": "toolResult", "toolCallId": u.tool_call_id or "", "toolName": u.name or "",
                "content": [{"type": "text", "text": u.content}], "isError": bool(u.meta.get("is_error")),
                "timestamp": _ms(u.timestamp)}
    return {"role": "user", "content": [{"type": "text", "text": u.content}], "timestamp": _ms(u.timestamp)}


def _changed(u: Unit, rec: dict[str, Any]) -> dict[str, Any]:
    """The unit's entry with its text replaced."""
    kind = rec.get("type")
    if kind in ("compaction", "branch_summary"):
        return {**rec, "summary": u.content}
    if kind == "custom_message":
        return {**rec, "content": u.content}
    msg = dict(rec["message"])
    role = msg.get("role")
    if role in ("branchSummary", "compactionSummary"):
        msg["summary"] = u.content
    elif role == "bashExecution":
        return {**rec, "message": {**_message(u), "timestamp": msg.get("timestamp")}}
    elif role == "assistant":
        fresh = _message(u)
        msg["content"] = fresh["content"]
    else:
        msg["content"] = u.content if isinstance(msg.get("content"), str) else [{"type": "text", "text": u.content}]
    return {**rec, "message": msg}


def _new(u: Unit, t: Transcript) -> dict[str, Any]:
    return {"type": "message", "id": uuidlib.uuid5(_NAMESPACE, f"{t.id}/{u.id}").hex[:8], "parentId": None,
            "timestamp": _iso(u.timestamp), "message": _message(u)}


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Pi entries for a transcript (see the module doc)."""
    same = t.source_format == NAME
    produced: list[tuple[Unit | None, Any]] = []
    made: set[str] = set()
    if not same:
        first = next((u.timestamp for u in t.units if u.timestamp is not None), None)
        produced.append((None, {"type": "session", "version": 3, "id": str(uuidlib.uuid5(_NAMESPACE, t.id)),
                                "timestamp": _iso(first), "cwd": "."}))
    for u in t.units:
        src = u.source if same and isinstance(u.source, dict) and _entry(u.source) else None
        if u.role == "system" or (src is None and u.role == "assistant" and not u.content and not u.tool_calls):
            continue  # a Pi session holds no system prompt; an empty answer is no message
        last = produced[-1][1] if produced else None
        if joins(u) and last is not None and last.get("type") == "message" and u.role in ("user", "assistant") \
                and last["message"].get("role") == u.role:
            # a unit that joins the message before it (of its role) is a block of that message
            msg = dict(last["message"])
            blocks = msg.get("content")
            blocks = [{"type": "text", "text": blocks}] if isinstance(blocks, str) else list(blocks or [])
            msg["content"] = [*blocks, {"type": "text", "text": u.content}]
            produced[-1] = (produced[-1][0], {**last, "message": msg})
        elif src is not None and u.raw is not None and not joins(u):
            produced.append((u, u.raw))
        elif src is not None:
            produced.append((u, _changed(u, src)))
        else:
            rec = _new(u, t)
            made.add(rec["id"])
            produced.append((u, rec))
    entries = place(t, produced) if same else [rec for _, rec in produced]
    return relinked(t, entries, made, fixed=_header), {}


# ---------------------------------------------------------------- validating


def validate(data: Any) -> list[str]:
    """What Pi would not load: a first line that is no session header, entries without their
    `type`, `id` or `parentId`, a parent that is not an entry before, a tool result answering no
    call before it."""
    records = app_records(data)
    out: list[str] = []
    if not records or not _header(records[0]):
        out.append("line 1: expected the session header {type: session, version, id, cwd}")
    seen: set[Any] = set()
    calls: set[str] = set()
    for n, rec in enumerate(records[1:], 2):
        if _header(rec):  # the next session of a file written with several, one after the other
            seen, calls = set(), set()
            continue
        if not _entry(rec):
            out.append(f"line {n}: expected a Pi entry {{type, id, parentId}} of a known type")
            continue
        if rec["parentId"] is not None and rec["parentId"] not in seen:
            out.append(f"line {n}: parentId {rec['parentId']!r} is no entry before it")
        seen.add(rec["id"])
        msg = rec.get("message") if rec["type"] == "message" else None
        if isinstance(msg, dict) and msg.get("role") == "assistant":
            calls.update(str(b.get("id")) for b in msg.get("content") or []
                         if isinstance(b, dict) and b.get("type") == "toolCall")
        elif isinstance(msg, dict) and msg.get("role") == "toolResult" and str(msg.get("toolCallId")) not in calls:
            out.append(f"line {n}: tool result {msg.get('toolCallId')} answers no call before it")
    return out[:MAX_PROBLEMS]


FORMAT = Format.of_module(__name__, label="Pi session", shape="log", agent="Pi", strict=True,
                          holds_tools=False, omits="the system prompt or tool schemas",
                          compaction=True)
