"""Claude Code session logs: one record per line, messages among app records.

Read: the main thread's user and assistant records as units (one API response written as
several records merged by message id, tool results one unit each); sub-agent turns (1.0.x
`isSidechain` records, 2.x `agent_progress` records) only with `include_sidechains`. Every other
record (`system` notices and compact boundaries, `summary`, snapshots, progress, attachments,
queue operations, titles...) is kept in place (`formats.kept`), and so is the history before
Claude Code's own last compaction (a `compact_boundary` record with a null `parentUuid`, then
the `isCompactSummary` user record), which the model no longer reads: the model reads the chain
the last message hangs from, and a main-thread record with no parent (or a compact_boundary
one) after others starts a new one. The attachments of that context are no units, but the model
reads them: what each puts into the context is `metadata["attachments"]` (`claude_attachments`).
A tool result a `content-replacement` record replaced (2.1.3xx: over the per-message budget,
saved to a file) is read as the preview the model was sent; its record keeps the whole output.

Written back as a log Claude Code itself can resume from: every kept record in its place,
untouched units as their source records (byte for byte, `parentUuid` too), changed units as
their source record(s) with the content replaced, units made by compaction as new records. A
record whose parent went with compaction hangs from what took its place (or the record before
it), a new record from the record before it; in a log read from Claude Code's last compaction
on, the first record of the units hangs from what its summary did, so the context starts where
it started. A user record holding a ctxkit summary is marked `isCompactSummary`, Claude Code's
own convention for its compaction summaries. Written from
another format, the records form one chain (`parentUuid` of each is the record before it).
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ctxkit.classify import classify
from ctxkit.formats import claude_attachments
from ctxkit.formats.anthropic import (
    add_blocks,
    assistant_blocks,
    assistant_parts,
    tool_result_block,
    tool_units,
)
from ctxkit.formats.base import Format, newest_model
from ctxkit.formats.checks import MAX_PROBLEMS, anthropic_rules, app_records, validate_type
from ctxkit.formats.claude_stream import Stream
from ctxkit.formats.common import (
    Source,
    blocks_text,
    first_context,
    joins,
    link_group_sizes,
    message_model,
    provider_usage,
    raw_groups,
    source_records,
    timestamp_of,
)
from ctxkit.formats.kept import KEY as KEPT
from ctxkit.formats.kept import names, place
from ctxkit.model import Transcript, Unit
from ctxkit.refs import carries_ref_text

NAME = "claude-code"
APP_LABEL = "Claude Code"
OMITS = "the system prompt or tool schemas"  # what the model saw that the log never shows
# The skip kind counting message records a compaction summary replaced.
COMPACTED = "before Claude Code's last compaction"
# The metadata key of what the model's context hangs from when the log was read from Claude
# Code's last compaction on: the summary's `parentUuid` (null, or the compact_boundary record).
ROOT = "claude_code_root"

_MESSAGE_KINDS = ("user", "assistant")
_APP_KEYS = ("sessionId", "parentUuid", "leafUuid", "isSidechain")
# Every record type Claude Code 2.1.328 writes to a session (its transcript loader's table):
# the messages, and the records kept in place (titles, modes, snapshots, links, state)
_APP_KINDS = frozenset({
    "user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation", "attachment", "progress",
    "file-history-delta", "last-prompt", "continued-in", "resume-head-vouch", "content-replacement",
    "data-flow-records", "data-flow-incomplete", "derived-from", "api-request-shape", "api-request-blob",
    "api-request", "api-request-resumed", "fork-context-ref", "frame-link", "custom-title", "ended-by-model",
    "ai-title", "tag", "relocated", "agent-name", "agent-color", "agent-setting", "pr-link",
    "artifact-comment-monitor", "artifact-autoreact-ledger", "bridge-session", "history-suppression",
    "attribution-snapshot", "mode", "permission-mode", "isolation-latch", "session-owner", "dev-mods",
    "memory-mode", "atis-latch", "tools-used", "worktree-state", "cost-state", "observer-ref", "repl-mode",
})


def detect(obj: Any) -> bool:
    """Records with a Claude Code `type` and its session keys (sessionId, parentUuid, leafUuid)."""
    records = obj if isinstance(obj, list) else [obj]
    hits = 0
    for rec in records[:20]:
        if not isinstance(rec, dict):
            return False
        msg = rec.get("message")
        if isinstance(msg, dict) and "parts" in msg and "content" not in msg:
            return False  # Gemini `parts` in Claude Code's envelope: Qwen Code's chat recording
        if rec.get("type") in _APP_KINDS and (any(k in rec for k in _APP_KEYS) or "messageId" in rec):
            hits += 1
    return hits > 0 and hits >= min(len(records), 20) // 2


def _note_replaced(rec: dict[str, Any], replaced: dict[str, str]) -> None:
    """A `content-replacement` record (Claude Code 2.1.3xx's per-message budget for tool
    results): a result over the budget is saved to a file and the model is sent a preview of it
    instead, `{kind: "tool-result", toolUseId, replacement}`; the user record keeps the whole
    output, and a resume sends the preview again. Older records (`kind: "persisted"`, no text)
    say nothing the model read."""
    for r in rec.get("replacements") or []:
        if isinstance(r, dict) and r.get("kind") == "tool-result" and isinstance(r.get("toolUseId"), str) \
                and isinstance(r.get("replacement"), str):
            replaced[r["toolUseId"]] = r["replacement"]


def _message_record(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The user or assistant record a record carries: itself, or (2.x `agent_progress`) the
    sub-agent's record inside it; None for any other record."""
    if rec.get("type") in _MESSAGE_KINDS:
        return rec
    data = rec.get("data")
    if rec.get("type") == "progress" and isinstance(data, dict) and data.get("type") == "agent_progress":
        inner = data.get("message")
        if isinstance(inner, dict) and inner.get("type") in _MESSAGE_KINDS and isinstance(inner.get("message"), dict):
            return inner
    return None


@dataclass
class _Thread(Stream):
    """What reading a log has gathered so far: a stream's (`claude_stream.Stream`), and what
    only the log holds."""

    boundaries: set[Any] = field(default_factory=set)  # uuids of compact_boundary records
    # 2.1.x: tool name -> left to ToolSearch (sent by name only)
    deferred: dict[str, bool] = field(default_factory=dict)
    # 2.1.x: main-thread attachments, the index of the unit before each
    attached: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    # 2.1.3xx: tool_use id -> the preview the model got instead of its result
    replaced: dict[str, str] = field(default_factory=dict)


def read(records: list[Any], src: Source) -> Transcript:
    """The main thread as units: split assistant records merged by message id, tool results
    one unit each, every other record kept in place (see the module doc) and counted.

    After a compaction Claude Code sends the model only its summary and what follows, so the
    units before the last compaction summary are left out (kept as records, and counted) unless
    `src.include_compacted`."""
    th = _Thread()
    units, keeper = th.units, th.keeper
    compacted_at: int | None = None  # unit index of the last main-thread compaction summary
    root: Any = None  # that summary's parentUuid: null, or Claude Code's compact_boundary record
    taken = 0  # message records read into units so far
    main = 0  # of them, on the main thread
    compacted = 0  # message records before the last compaction summary
    answered_by: str | None = None  # the model of the last main-thread answer, usage or not
    session: str | None = None
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            src.bad(i, "expected a Claude Code record object", rec)
            continue
        kind = rec.get("type")
        inner = _message_record(rec)
        progress = inner is not None and inner is not rec  # a sub-agent's turn, 2.x
        if inner is None:
            _other_record(th, i, rec, src)
            continue
        if (rec.get("isSidechain") or progress) and not src.include_sidechains:
            src.stats.skipped_sidechain += 1
            keeper.keep(i, rec, name=rec.get("uuid"))
            continue
        msg = inner.get("message")
        if not isinstance(msg, dict):
            src.bad(i, f"expected a `message` object in this {kind} record", rec)
            continue
        kind = inner.get("type")
        session = session or rec.get("sessionId")
        taken += 1
        if kind == "assistant" and not (rec.get("isSidechain") or progress):
            model = msg.get("model")
            if isinstance(model, str) and model and model != "<synthetic>":
                answered_by = model
        ts = timestamp_of(inner.get("timestamp") or rec.get("timestamp"))
        uid = str(inner.get("uuid") or rec.get("uuid") or f"u{len(units)}")
        meta: dict[str, Any] = {"sidechain": True} if rec.get("isSidechain") or progress else {}
        if not meta:
            parent = rec.get("parentUuid")
            if main and (parent is None or parent in th.boundaries):
                # A new chain on the main thread: Claude Code sends the model the chain its last
                # message hangs from, so what came before is out of the context. Its compaction
                # summary starts one (no parent, or a compact_boundary record), and so does what
                # ctxkit writes in its place; a summary linked to the messages before it (as
                # ctxkit writes one within a context) cuts nothing.
                compacted_at, compacted, root = len(units), taken - 1, parent
            main += 1
        if kind == "assistant":
            _assistant(th, i, rec, msg, uid, ts, meta, src)
        else:
            _user_record(th, i, rec, inner, msg.get("content"), uid, ts, meta, src)
    for u in units:
        if th.replaced and u.role == "tool" and u.tool_call_id in th.replaced and not u.meta.get("sidechain"):
            # what the model read (and reads again on resume): the record keeps the whole output
            u.meta["replaced_chars"] = len(u.content)
            u.content = th.replaced[u.tool_call_id]
        u.type = classify(u)
    link_group_sizes(units)
    usage_calls = [c for c in th.calls.values() if c["input_tokens"] > 0]
    first_call = first_context(units, usage_calls)
    if compacted_at and not src.include_compacted:
        keeper.hide(units[:compacted_at])
        units, usage_calls = _after_compaction(units, usage_calls, compacted_at, compacted, src)
    metadata: dict[str, Any] = {}
    if usage_calls:
        metadata["provider_usage"] = provider_usage(NAME, usage_calls, first_call)
    models = [c["model"] for c in usage_calls if "model" in c]
    if models:
        metadata["model"] = models[-1]  # the model of the last call: the one to fit
    elif answered_by:
        metadata["model"] = answered_by  # a log without usage still names its model
    if session:
        metadata["session_id"] = session
    if compacted_at and not src.include_compacted:
        metadata[ROOT] = root  # what the context's first record hangs from, for the writer
    if th.deferred:
        metadata["deferred_tools"] = sorted(name for name, on in th.deferred.items() if on)
    # What the attachments of the context add to it (see claude_attachments), for the count.
    start = compacted_at if compacted_at and not src.include_compacted else 0
    attachments = claude_attachments.entries(th.attached, metadata.get("model"), start)
    if attachments:
        metadata[claude_attachments.KEY] = attachments
    metadata[KEPT] = keeper.metadata()
    return Transcript(
        units=units,
        id=str(session or src.tid),
        source_format=NAME,
        layout=src.layout,
        envelope=dict(src.envelope),
        line=src.line,
        metadata=metadata,
    )


def _other_record(th: _Thread, i: int, rec: dict[str, Any], src: Source) -> None:
    """A record that is no message: kept in place and counted, and noted when it changes what
    the model reads (a compact boundary, a tool output's replacement, an attachment)."""
    kind = rec.get("type")
    if kind == "system" and rec.get("subtype") == "compact_boundary":
        th.boundaries.add(rec.get("uuid"))
    elif kind == "content-replacement" and not rec.get("agentId"):
        _note_replaced(rec, th.replaced)
    elif kind == "attachment":
        _note_deferred(rec, th.deferred)
        if not rec.get("isSidechain"):
            th.attached.append((len(th.units) - 1, rec))
    src.stats.skip(str(kind))
    th.keeper.keep(i, rec, name=rec.get("uuid"))


def _assistant(th: _Thread, i: int, rec: dict[str, Any], msg: dict[str, Any], uid: str, ts: float | None,
               meta: dict[str, Any], src: Source) -> None:
    """An assistant record: a unit of its own, or another content block of a response already
    read (merged by message id); its usage recorded as the response's provider call."""
    units = th.units
    mid = msg.get("id")
    texts, thinking, tool_calls, images = assistant_parts(msg.get("content"), th.names, src)
    index = th.by_message.get(mid) if isinstance(mid, str) else None
    if index is not None and units[index].meta.get("sidechain") == meta.get("sidechain"):
        unit = units[index]
        add_blocks(unit, rec, texts, thinking, tool_calls, images)
        unit.meta["records"] = unit.meta.get("records", 1) + 1
        th.keeper.also(unit.id, i, rec.get("uuid"))
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
            th.by_message[mid] = index
        units.append(unit)
        th.keeper.unit(uid, [i], rec.get("uuid"))
    th.record_call(mid, msg, index, meta)


def _user_record(th: _Thread, i: int, rec: dict[str, Any], inner: dict[str, Any], content: Any, uid: str,
                 ts: float | None, meta: dict[str, Any], src: Source) -> None:
    """A user record: its tool results one unit each, then its text (a request, or a
    compaction summary, or both joined in one record)."""
    units, keeper = th.units, th.keeper
    summary = bool(inner.get("isCompactSummary"))
    if inner.get("isMeta"):
        meta["is_meta"] = True
    if not isinstance(content, list):
        text, images = blocks_text(content, src=src)
        units.append(_user(uid, text, images, ts, rec, i, meta, summary))
        keeper.unit(uid, [i], rec.get("uuid"))
        return
    rest: list[Any] = []
    k = 0
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            unit = tool_units(
                block, uid=uid if k == 0 else f"{uid}#{k}", group=i, raw=rec, names=th.names, ts=ts, src=src
            )
            if meta:
                unit.meta.update(meta)
            if unit.tool_call_id not in th.names:
                src.warn(i, f"tool result {unit.tool_call_id} has no matching tool_use before it")
            units.append(unit)
            keeper.unit(unit.id, [i], rec.get("uuid"))
            k += 1
        else:
            rest.append(block)
    text_blocks = [b for b in rest if isinstance(b, dict) and b.get("type") == "text"]
    if summary and k == 0 and len(text_blocks) == len(rest) >= 2:
        _summary_and_requests(th, i, rec, rest, uid, ts, meta, src)
    elif rest or not content:
        text, images = blocks_text(rest, src=src)
        units.append(_user(uid if k == 0 else f"{uid}#{k}", text, images, ts, rec, i, meta, summary))
        keeper.unit(units[-1].id, [i], rec.get("uuid"))


def _summary_and_requests(th: _Thread, i: int, rec: dict[str, Any], blocks: list[Any], uid: str,
                          ts: float | None, meta: dict[str, Any], src: Source) -> None:
    """A summary and the request joined to it in one record (as ctxkit writes them, in either
    order): the block that names ctxkit's archive is the summary, the others stay requests;
    with none named, the last block is the summary."""
    read_blocks = [blocks_text([b], src=src) for b in blocks]
    named = [carries_ref_text(text) for text, _ in read_blocks]
    if not any(named) or all(named):
        named = [j == len(read_blocks) - 1 for j in range(len(read_blocks))]
    runs: list[tuple[bool, list[int]]] = []
    for j, is_summary in enumerate(named):
        if runs and runs[-1][0] == is_summary:
            runs[-1][1].append(j)
        else:
            runs.append((is_summary, [j]))
    for n, (is_summary, js) in enumerate(runs):
        text = "\n".join(read_blocks[j][0] for j in js)
        images = sum(read_blocks[j][1] for j in js)
        unit_id = uid if n == 0 else f"{uid}#{n}"
        th.units.append(_user(unit_id, text, images, ts, rec, i, meta, is_summary))
        if n == 0:
            th.keeper.unit(unit_id, [i], rec.get("uuid"))
        else:
            th.keeper.unit(unit_id, [i])


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


def _message_of(rec: dict[str, Any]) -> dict[str, Any]:
    """The API message a written record holds (inside an `agent_progress` record's data)."""
    inner = _message_record(rec)
    msg = inner.get("message") if inner is not None else None
    return msg if isinstance(msg, dict) else {}


def _with_message(rec: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    """A copy of `rec` holding `message` where it held its own."""
    inner = _message_record(rec)
    if inner is not None and inner is not rec:
        return {**rec, "data": {**rec["data"], "message": {**inner, "message": message}}}
    return {**rec, "message": message}


def _with_text(rec: dict[str, Any], text: str) -> dict[str, Any]:
    """A copy of `rec` with another text block at the end of its message."""
    msg = dict(_message_of(rec))
    content = msg.get("content")
    blocks = ([{"type": "text", "text": content}] if content else []) if isinstance(content, str) else list(content or [])
    msg["content"] = [*blocks, {"type": "text", "text": text}]
    return _with_message(rec, msg)


class _Writer:
    """Builds the records of one transcript's units in order, each with the unit it came from;
    `context` is the record new ones copy their session fields from (the one before, or the
    first source record)."""

    def __init__(self, t: Transcript) -> None:
        self.t = t
        self.same = t.source_format == NAME
        self.out: list[tuple[Unit | None, dict[str, Any]]] = []
        self.context: dict[str, Any] = {}
        self.made: set[str] = set()  # uuids of the records made up here
        if self.same:
            for u in t.units:
                recs = source_records(u)
                if recs:
                    self.context = recs[0]
                    break

    def emit(self, rec: dict[str, Any], u: Unit | None) -> None:
        self.out.append((u, rec))
        if rec.get("type") in _MESSAGE_KINDS:
            self.context = rec

    def last(self) -> dict[str, Any] | None:
        return self.out[-1][1] if self.out else None

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
        last = self.last()
        if joins(u) and u.role != "tool" and last is not None and _message_of(last).get("role") == _bucket(u):
            rec = _with_text(last, u.content)
            if u.type == "summary" and _bucket(u) == "user":
                rec["isCompactSummary"] = True
            self.out[-1] = (self.out[-1][0], rec)
            return
        sources = source_records(u) if self.same else []
        template = sources[0] if sources and _message_of(sources[0]) else None
        if u.role == "assistant":
            blocks = assistant_blocks(u)
            if template is not None:
                self.emit(_with_message(template, {**_message_of(template), "content": blocks}), u)
            else:
                mid = "msg_ctxkit_" + uuidlib.uuid5(_NAMESPACE, f"{self.t.id}/{u.id}").hex[:24]
                message = {"id": mid, "type": "message", "role": "assistant", "model": "<synthetic>",
                           "content": blocks, "stop_reason": None, "stop_sequence": None}
                self.emit(self.new_record(u, "assistant", message), u)
            return
        if u.role == "tool":
            block = _result_block(u, template)
            if last is not None and template is None and _only_results(last) and last.get("uuid") in self.made:
                msg = _message_of(last)
                self.out[-1] = (self.out[-1][0], _with_message(last, {**msg, "content": [*msg["content"], block]}))
                return
            if template is not None:
                rec = {k: v for k, v in template.items() if k != "toolUseResult"}
                self.emit(_with_message(rec, {**_message_of(template), "content": [block]}), u)
            else:
                self.emit(self.new_record(u, "user", {"role": "user", "content": [block]}), u)
            return
        if template is not None:
            content = _message_of(template).get("content")
            new: Any = u.content if not isinstance(content, list) else [{"type": "text", "text": u.content}]
            self.emit(_with_message(template, {**_message_of(template), "content": new}), u)
        else:
            self.emit(self.new_record(u, "user", {"role": "user", "content": u.content}), u)

    def group(self, run: list[Unit]) -> None:
        """Units that share one source user record, some changed or gone: the record with the
        blocks of the units left, each changed one's content replaced."""
        template = source_records(run[0])[0]
        content = _message_of(template).get("content")
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
        self.emit(_with_message(rec, {**_message_of(template), "content": blocks}), run[0])


def _result_block(u: Unit, template: dict[str, Any] | None, original: Any = None) -> dict[str, Any]:
    """A tool_result block: the source's, with the content replaced when the unit changed."""
    if original is None and template is not None:
        original = next(
            (b for b in _message_of(template).get("content") or []
             if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") == u.tool_call_id),
            None,
        )
    return tool_result_block(u, original)


def _only_results(rec: dict[str, Any]) -> bool:
    content = _message_of(rec).get("content")
    return isinstance(content, list) and bool(content) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Claude Code records for a transcript (see the module doc)."""
    w = _Writer(t)
    for raw, run in raw_groups(t.units):
        if raw is not None and w.same and not any(joins(u) for u in run):
            for rec in source_records(run[0]):
                w.emit(rec, run[0])
            continue
        if w.same and len(run) > 1 and run[0].group is not None and source_records(run[0]) and run[0].role != "assistant":
            w.group(run)
            continue
        for u in run:
            w.unit(u)
    if not w.same:
        return _chained([rec for _, rec in w.out]), {}
    placed = place(t, w.out)
    gone = names(t) - {rec.get("uuid") for rec in placed}
    linked = _linked(placed, w.made, gone)  # record for record, in order
    if ROOT in t.metadata:
        ours = {id(rec) for _, rec in w.out}
        _cut_at(linked, [n for n, rec in enumerate(placed) if id(rec) in ours], t.metadata[ROOT])
    return linked, {}


def _cut_at(records: list[dict[str, Any]], produced: list[int], root: Any) -> None:
    """Keep Claude Code's compaction cut in a log read from it: the first main-thread record
    written for the units (Claude Code's summary, or ctxkit's in its place) hangs from `root`
    as that summary did (null, or the compact_boundary record), not from the history before it,
    so the log reads back from there and the model's context is what it was."""
    for n in produced:
        rec = records[n]
        if rec.get("type") not in _MESSAGE_KINDS or rec.get("isSidechain"):
            continue
        if rec.get("parentUuid") != root:
            records[n] = {**rec, "parentUuid": root}
        return


def _unique(rec: dict[str, Any], seen: set[Any]) -> dict[str, Any]:
    """`rec` with a uuid of its own: a source record written twice (its units split apart by a
    made-up one) gets a second, derived uuid."""
    uid = rec.get("uuid")
    if uid is None:
        return rec
    n = 0
    while uid in seen:
        n += 1
        uid = str(uuidlib.uuid5(_NAMESPACE, f"{rec.get('uuid')}/{n}"))
    if uid != rec.get("uuid"):
        rec = {**rec, "uuid": uid}
    seen.add(uid)
    return rec


def _chained(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Message records of another format's transcript as one chain (each the child of the one
    before)."""
    out: list[Any] = []
    parent: Any = None
    seen: set[Any] = set()
    for rec in records:
        if rec.get("type") in _MESSAGE_KINDS:
            rec = _unique({**rec, "parentUuid": parent}, seen)
            parent = rec.get("uuid")
        out.append(rec)
    return out


def _linked(records: list[dict[str, Any]], made: set[str], gone: set[str]) -> list[dict[str, Any]]:
    """A log's records with their own links wherever these still hold: a made-up record hangs
    from the record before it, and so does a record whose parent compaction removed (Claude
    Code resumes the chain the last record hangs from: a record hung from what took its parent's
    place, when a kept message lies between the two, would leave that message off the chain, and
    the agent would never send it); every other `parentUuid` is left as it was. "The record
    before" is the last one of the main thread: a sub-agent's records are not in the chain."""
    out: list[Any] = []
    seen: set[Any] = set()
    before: Any = None  # uuid of the last main-thread record written that has one
    for rec in records:
        uid = rec.get("uuid")
        if uid is None:
            out.append(rec)
            continue
        parent = rec.get("parentUuid")
        if uid in made or (parent is not None and parent in gone):
            parent = before
        if parent != rec.get("parentUuid") or "parentUuid" not in rec:
            rec = {**rec, "parentUuid": parent}
        rec = _unique(rec, seen)
        if not rec.get("isSidechain"):
            before = rec["uuid"]
        out.append(rec)
    return out


# ---------------------------------------------------------------- validating


def validate(data: Any) -> list[str]:
    """What Claude Code needs to resume a log: each message record's `message` an Anthropic
    `MessageParam` of the record's role, a uuid of its own, a `parentUuid` that is null (a chain
    starts: the first record, a new session, the summary after a compact boundary) or an earlier
    record's; and the messages of each main-thread chain (consecutive records of one role merged)
    under the Messages API rules."""
    records = app_records(data)
    out: list[str] = []
    messages: list[tuple[str, str, Any]] = []
    mids: dict[int, str] = {}  # message index -> its response's message id
    uuids: set[Any] = set()  # of message records
    earlier: set[Any] = set()  # of every record so far
    boundaries: set[Any] = set()
    for i, rec in enumerate(records):
        at = f"record {i + 1}"
        if not isinstance(rec, dict):
            out.append(f"{at}: not an object")
            continue
        if rec.get("type") not in _MESSAGE_KINDS:
            if rec.get("type") == "system" and rec.get("subtype") == "compact_boundary":
                boundaries.add(rec.get("uuid"))
            if rec.get("uuid") is not None:
                earlier.add(rec["uuid"])
            continue
        msg = rec.get("message")
        if not isinstance(msg, dict):
            out.append(f"{at}: no message object")
            continue
        api = {k: v for k, v in msg.items() if k in ("role", "content")}
        out.extend(validate_type("anthropic.messages", [api], at))
        if msg.get("role") != rec.get("type"):
            out.append(f"{at}: message role {msg.get('role')!r} in a {rec.get('type')} record")
        parent = rec.get("parentUuid")
        if parent is not None and parent not in earlier:
            out.append(f"{at}: parentUuid {parent!r} is no earlier record")
        if not rec.get("uuid") or rec.get("uuid") in uuids:
            out.append(f"{at}: missing or repeated uuid")
        uuids.add(rec.get("uuid"))
        earlier.add(rec.get("uuid"))
        if rec.get("isSidechain"):
            continue  # a sub-agent's conversation, not the main thread's
        if parent is None or parent in boundaries:
            out.extend(anthropic_rules(messages, ""))  # another chain starts here
            messages, mids = [], {}
        _sent(messages, mids, at, msg)
    out.extend(anthropic_rules(messages, ""))
    return out[:MAX_PROBLEMS]


def _sent(messages: list[tuple[str, str, Any]], mids: dict[int, str], at: str, msg: dict[str, Any]) -> None:
    """Add a record's message to the messages Claude Code sends: the records of one response
    (one message id) are one assistant message even with tool results written between them,
    and those results one user message after it."""
    role = str(msg.get("role"))
    content = msg.get("content")
    blocks: list[Any] = list(content) if isinstance(content, list) else [{"type": "text", "text": content}]
    mid = msg.get("id")
    if role == "assistant" and isinstance(mid, str):
        for k in range(len(messages) - 1, max(len(messages) - 3, -1), -1):
            if mids.get(k) == mid:
                w, r, c = messages[k]
                messages[k] = (w, r, [*c, *blocks])
                return
        mids[len(messages)] = mid
    if _results_only(blocks) and messages and messages[-1][1] == "user" and _results_only(messages[-1][2]):
        w, r, c = messages[-1]
        messages[-1] = (w, r, [*c, *blocks])
        return
    messages.append((at, role, blocks if isinstance(content, list) else content))


def _results_only(blocks: Any) -> bool:
    return isinstance(blocks, list) and bool(blocks) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)


def named_model(t: Transcript) -> str | None:
    """The model the log names: its reader's, else the newest assistant message's."""
    return newest_model(t, (u.raw for u in t.units), message_model)


FORMAT = Format.of_module(__name__, shape="log", agent="Claude Code", strict=True,
                          holds_tools=False, sidechains=True, compaction=True)
