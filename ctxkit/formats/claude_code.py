"""Claude Code session logs: one record per line, messages among app records.

Written back as a log Claude Code itself can resume from: untouched units as their source records,
changed units as their source record(s) with the content replaced, units made by compaction as
new records, and the message records relinked into one chain (`parentUuid` of each is the record
before it). A user record holding a ctxkit summary is marked `isCompactSummary`, Claude Code's
own convention for its compaction summaries.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime, timezone
from typing import Any

from ctxkit.classify import classify
from ctxkit.formats.anthropic import assistant_blocks, assistant_parts, tool_units
from ctxkit.formats.common import (
    Source,
    blocks_text,
    joins,
    link_group_sizes,
    raw_groups,
    source_records,
    timestamp_of,
)
from ctxkit.model import Transcript, Unit

NAME = "claude-code"
APP_LABEL = "Claude Code"
OMITS = "the system prompt or tool schemas"  # what the model saw that the log never shows
# The skip kind counting message records a compaction summary replaced.
COMPACTED = "before Claude Code's last compaction"

_MESSAGE_KINDS = ("user", "assistant")
_APP_KEYS = ("sessionId", "parentUuid", "leafUuid", "isSidechain")
_APP_KINDS = frozenset(
    {"user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation", "attachment", "progress"}
)


def detect(obj: Any) -> bool:
    """Records with a Claude Code `type` and its session keys (sessionId, parentUuid, leafUuid)."""
    records = obj if isinstance(obj, list) else [obj]
    hits = 0
    for rec in records[:20]:
        if not isinstance(rec, dict):
            return False
        if rec.get("type") in _APP_KINDS and (any(k in rec for k in _APP_KEYS) or "messageId" in rec):
            hits += 1
    return hits > 0 and hits >= min(len(records), 20) // 2


def _usage(usage: dict[str, Any]) -> dict[str, int]:
    """One call's usage: the whole input (uncached + cache reads + cache writes), its cache
    reads and writes, and the output."""

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


def read(records: list[Any], src: Source) -> Transcript:
    """The main thread as units: split assistant records merged by message id, tool results
    one unit each, app records skipped and counted.

    After a compaction Claude Code sends the model only its summary and what follows, so the
    units before the last compaction summary are left out (and counted) unless
    `src.include_compacted`."""
    units: list[Unit] = []
    compacted_at: int | None = None  # unit index of the last main-thread compaction summary
    taken = 0  # message records read into units so far
    compacted = 0  # message records before the last compaction summary
    names: dict[str, str] = {}
    by_message: dict[str, int] = {}  # message id -> unit index
    calls: dict[str, dict[str, Any]] = {}
    session: str | None = None
    message_uuids: set[Any] = set()  # uuids of the message records read so far
    deferred: dict[str, bool] = {}  # 2.1.x: tool name -> left to ToolSearch (sent by name only)
    stats = src.stats
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            src.bad(i, "expected a Claude Code record object", rec)
            continue
        kind = rec.get("type")
        if kind not in _MESSAGE_KINDS:
            stats.skip(str(kind))
            if kind == "attachment":
                _note_deferred(rec, deferred)
            continue
        if rec.get("isSidechain") and not src.include_sidechains:
            stats.skipped_sidechain += 1
            continue
        msg = rec.get("message")
        if not isinstance(msg, dict):
            src.bad(i, f"expected a `message` object in this {kind} record", rec)
            continue
        session = session or rec.get("sessionId")
        taken += 1
        if isinstance(rec.get("uuid"), str):
            message_uuids.add(rec["uuid"])
        ts = timestamp_of(rec.get("timestamp"))
        uid = str(rec.get("uuid") or f"u{len(units)}")
        meta: dict[str, Any] = {"sidechain": True} if rec.get("isSidechain") else {}
        content = msg.get("content")
        if kind == "assistant":
            mid = msg.get("id")
            texts, thinking, tool_calls, images = assistant_parts(content, names, src)
            index = by_message.get(mid) if isinstance(mid, str) else None
            if index is not None:
                unit = units[index]
                # Another content block of the same API response, written as its own record.
                if texts:
                    unit.content = "\n".join([unit.content, *texts]) if unit.content else "\n".join(texts)
                if thinking:
                    unit.reasoning = "\n".join([unit.reasoning, *thinking]) if unit.reasoning else "\n".join(thinking)
                unit.tool_calls.extend(tool_calls)
                unit.images += images
                unit.meta["records"] = unit.meta.get("records", 1) + 1
                unit.source.append(rec)
            else:
                unit = Unit(
                    id=uid,
                    role="assistant",
                    content="\n".join(texts),
                    timestamp=ts,
                    tool_calls=tool_calls,
                    reasoning="\n".join(thinking),
                    images=images,
                    raw=rec,
                    source=[rec],  # every record of the response, for the writer
                    group=i,
                    meta=meta,
                )
                index = len(units)
                if isinstance(mid, str):
                    by_message[mid] = index
                units.append(unit)
            usage = msg.get("usage")
            if isinstance(mid, str) and isinstance(usage, dict):
                got = _usage(usage)
                call = calls.get(mid)
                if call is None:
                    # The model had seen everything before the first record of its response.
                    calls[mid] = {"after_unit": index - 1, **got}
                else:
                    # Usage repeats on every record of a response; the last one is final.
                    for key, value in got.items():
                        call[key] = max(call[key], value)
            continue
        summary = bool(rec.get("isCompactSummary"))
        if rec.get("isMeta"):
            meta["is_meta"] = True
        if summary and not rec.get("isSidechain") and rec.get("parentUuid") not in message_uuids:
            # Claude Code's summary starts a new chain (no parent, or a compact_boundary record):
            # a summary linked to the messages before it (as ctxkit writes one) cuts nothing.
            compacted_at, compacted = len(units), taken - 1
        if not isinstance(content, list):
            text, images = blocks_text(content, src=src)
            units.append(_user(uid, text, images, ts, rec, i, meta, summary))
            continue
        rest: list[Any] = []
        k = 0
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                unit = tool_units(
                    block, uid=uid if k == 0 else f"{uid}#{k}", group=i, raw=rec, names=names, ts=ts, src=src
                )
                if meta:
                    unit.meta.update(meta)
                if unit.tool_call_id not in names:
                    src.warn(i, f"tool result {unit.tool_call_id} has no matching tool_use before it")
                units.append(unit)
                k += 1
            else:
                rest.append(block)
        text_blocks = [b for b in rest if isinstance(b, dict) and b.get("type") == "text"]
        if summary and k == 0 and len(text_blocks) == len(rest) >= 2:
            # A request and the summary joined to it in one record (as ctxkit writes them): the
            # request stays a request, the last block is the summary.
            head, _ = blocks_text(rest[:-1], src=src)
            tail, images = blocks_text(rest[-1:], src=src)
            units.append(_user(uid, head, 0, ts, rec, i, meta, False))
            units.append(_user(f"{uid}#1", tail, images, ts, rec, i, meta, True))
        elif rest or not content:
            text, images = blocks_text(rest, src=src)
            units.append(_user(uid if k == 0 else f"{uid}#{k}", text, images, ts, rec, i, meta, summary))
    for u in units:
        u.type = classify(u)
    link_group_sizes(units)
    usage_calls = [c for c in calls.values() if c["input_tokens"] > 0]
    if compacted_at and not src.include_compacted:
        units, usage_calls = _after_compaction(units, usage_calls, compacted_at, compacted, src)
    metadata: dict[str, Any] = {}
    if usage_calls:
        metadata["provider_usage"] = {"source": NAME, "calls": usage_calls}
    if session:
        metadata["session_id"] = session
    if deferred:
        metadata["deferred_tools"] = sorted(name for name, on in deferred.items() if on)
    return Transcript(
        units=units,
        id=str(session or src.tid),
        source_format=NAME,
        layout=src.layout,
        envelope=dict(src.envelope),
        line=src.line,
        metadata=metadata,
    )


def _note_deferred(rec: dict[str, Any], deferred: dict[str, bool]) -> None:
    """Apply a `deferred_tools_delta` attachment (Claude Code 2.1.x tool search: which tools it
    sends by name only, for ToolSearch to load) to the tools deferred so far."""
    att = rec.get("attachment")
    if not isinstance(att, dict) or att.get("type") != "deferred_tools_delta":
        return
    for key, on in (("removedNames", False), ("addedNames", True), ("readdedNames", True)):
        names = att.get(key)
        if isinstance(names, list):
            for name in names:
                if isinstance(name, str):
                    deferred[name] = on


def _after_compaction(
    units: list[Unit], calls: list[dict[str, Any]], start: int, dropped: int, src: Source
) -> tuple[list[Unit], list[dict[str, Any]]]:
    """The units from the compaction summary at `start` on, and the provider calls made after
    it with their unit indexes moved to match; the `dropped` records left out are counted."""
    src.stats.skip(COMPACTED, dropped)
    src.stats.warnings.append(
        f"{src.path}: {dropped:,} records before Claude Code's last compaction summary left out "
        "(the model no longer sees them)"
    )
    kept = [{**c, "after_unit": c["after_unit"] - start} for c in calls if c["after_unit"] >= start]
    return units[start:], kept


def _user(
    uid: str, text: str, images: int, ts: float | None, rec: Any, group: int, meta: dict[str, Any], summary: bool
) -> Unit:
    return Unit(
        id=uid,
        role="user",
        type="summary" if summary else "message",
        content=text,
        timestamp=ts,
        images=images,
        raw=rec,
        group=group,
        meta=dict(meta),
    )



# ---------------------------------------------------------------- writing

# uuids of records ctxkit makes up: uuid5 of the transcript and unit ids, so a run is repeatable.
_NAMESPACE = uuidlib.UUID("6f0c4c8e-2b1a-5d8e-9a57-c7a1e5f0d3b2")
# Fields a new record copies from its neighbour, so it sits in the same session.
_CONTEXT_KEYS = ("userType", "cwd", "sessionId", "version", "gitBranch")


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _bucket(u: Unit) -> str:
    """The role of the record a unit goes in (tool results ride in user records)."""
    return "assistant" if u.role == "assistant" else "user"


def _with_text(rec: dict[str, Any], text: str) -> dict[str, Any]:
    """A copy of `rec` with another text block at the end of its message."""
    msg = dict(rec["message"])
    content = msg.get("content")
    blocks = ([{"type": "text", "text": content}] if content else []) if isinstance(content, str) else list(content or [])
    msg["content"] = [*blocks, {"type": "text", "text": text}]
    return {**rec, "message": msg}


class _Writer:
    """Builds the records of one transcript in order; `context` is the record new ones copy
    their session fields from (the one before, or the first source record)."""

    def __init__(self, t: Transcript) -> None:
        self.t = t
        self.same = t.source_format == NAME
        self.out: list[dict[str, Any]] = []
        self.context: dict[str, Any] = {}
        self.made: set[str] = set()  # uuids of the records made up here
        if self.same:
            for u in t.units:
                recs = source_records(u)
                if recs:
                    self.context = recs[0]
                    break

    def emit(self, rec: dict[str, Any]) -> None:
        self.out.append(rec)
        if rec.get("type") in _MESSAGE_KINDS:
            self.context = rec

    def new_record(self, u: Unit, kind: str, message: dict[str, Any]) -> dict[str, Any]:
        ctx = self.context
        rec: dict[str, Any] = {"parentUuid": None, "isSidechain": False}
        for key in _CONTEXT_KEYS:
            if key in ctx:
                rec[key] = ctx[key]
        rec.setdefault("userType", "external")
        rec.setdefault("cwd", "")
        rec.setdefault("sessionId", str(uuidlib.uuid5(_NAMESPACE, self.t.id)))
        rec["type"] = kind
        rec["message"] = message
        if kind == "user" and u.type == "summary":
            rec["isCompactSummary"] = True
        if u.meta.get("is_meta"):
            rec["isMeta"] = True
        rec["uuid"] = str(uuidlib.uuid5(_NAMESPACE, f"{self.t.id}/{u.id}"))
        rec["timestamp"] = _iso(u.timestamp) or ctx.get("timestamp") or _iso(0.0)
        self.made.add(rec["uuid"])
        return rec

    def unit(self, u: Unit) -> None:
        """A changed or made-up unit (or any unit of another format)."""
        if u.role == "system":
            return  # Claude Code logs never hold the system prompt
        if u.role == "assistant" and not (u.content or u.tool_calls):
            return  # reasoning alone is no message
        last = self.out[-1] if self.out else None
        if joins(u) and u.role != "tool" and last is not None and last.get("message", {}).get("role") == _bucket(u):
            rec = _with_text(last, u.content)
            if u.type == "summary" and _bucket(u) == "user":
                rec["isCompactSummary"] = True
            self.out[-1] = rec
            return
        sources = source_records(u) if self.same else []
        template = sources[0] if sources and isinstance(sources[0].get("message"), dict) else None
        if u.role == "assistant":
            blocks = assistant_blocks(u)
            if template is not None:
                self.emit({**template, "message": {**template["message"], "content": blocks}})
            else:
                mid = "msg_ctxkit_" + uuidlib.uuid5(_NAMESPACE, f"{self.t.id}/{u.id}").hex[:24]
                message = {"id": mid, "type": "message", "role": "assistant", "model": "<synthetic>",
                           "content": blocks, "stop_reason": None, "stop_sequence": None}
                self.emit(self.new_record(u, "assistant", message))
            return
        if u.role == "tool":
            block = _result_block(u, template)
            if last is not None and template is None and _only_results(last) and last.get("uuid") in self.made:
                self.out[-1] = {**last, "message": {**last["message"], "content": [*last["message"]["content"], block]}}
                return
            if template is not None:
                rec = {k: v for k, v in template.items() if k != "toolUseResult"}
                rec["message"] = {**template["message"], "content": [block]}
                self.emit(rec)
            else:
                self.emit(self.new_record(u, "user", {"role": "user", "content": [block]}))
            return
        if template is not None:
            content = template["message"].get("content")
            new: Any = u.content if not isinstance(content, list) else [{"type": "text", "text": u.content}]
            self.emit({**template, "message": {**template["message"], "content": new}})
        else:
            self.emit(self.new_record(u, "user", {"role": "user", "content": u.content}))

    def group(self, run: list[Unit]) -> None:
        """Units that share one source user record, some changed or gone: the record with the
        blocks of the units left, each changed one's content replaced."""
        template = source_records(run[0])[0]
        content = template["message"].get("content")
        if not isinstance(content, list) or any(joins(u) for u in run):
            for u in run:
                self.unit(u)
            return
        results = {b.get("tool_use_id"): b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"}
        rest = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
        blocks: list[Any] = []
        changed = False
        for u in run:
            if u.role == "tool":
                blocks.append(_result_block(u, template, results.get(u.tool_call_id)))
                changed = changed or u.raw is None
            elif u.raw is not None:
                blocks.extend(rest)
            else:
                blocks.append({"type": "text", "text": u.content})
        rec = {k: v for k, v in template.items() if not (changed and k == "toolUseResult")}
        rec["message"] = {**template["message"], "content": blocks}
        self.emit(rec)


def _result_block(u: Unit, template: dict[str, Any] | None, original: Any = None) -> dict[str, Any]:
    """A tool_result block: the source's, with the content replaced when the unit changed."""
    if original is None and template is not None:
        original = next(
            (b for b in template["message"].get("content") or []
             if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") == u.tool_call_id),
            None,
        )
    if isinstance(original, dict):
        return original if u.raw is not None else {**original, "content": u.content}
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": u.tool_call_id or "", "content": u.content}
    if u.meta.get("is_error"):
        block["is_error"] = True
    return block


def _only_results(rec: dict[str, Any]) -> bool:
    content = rec.get("message", {}).get("content")
    return isinstance(content, list) and bool(content) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Claude Code records for a transcript, one chain of message records (see the module doc)."""
    w = _Writer(t)
    for raw, run in raw_groups(t.units):
        if raw is not None and w.same and not any(joins(u) for u in run):
            for rec in source_records(run[0]):
                w.emit(rec)
            continue
        if w.same and len(run) > 1 and run[0].group is not None and source_records(run[0]) and run[0].role != "assistant":
            w.group(run)
            continue
        for u in run:
            w.unit(u)
    out: list[Any] = []
    parent: Any = None
    seen: set[Any] = set()
    for rec in w.out:
        if rec.get("type") in _MESSAGE_KINDS:
            rec = {**rec, "parentUuid": parent}
            uid = rec.get("uuid")
            n = 0
            while uid in seen:  # one source record written twice (its units split apart)
                n += 1
                uid = str(uuidlib.uuid5(_NAMESPACE, f"{rec.get('uuid')}/{n}"))
            rec["uuid"] = parent = uid
            seen.add(uid)
        out.append(rec)
    return out, {}
