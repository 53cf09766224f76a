"""Qwen Code chat recordings (`~/.qwen/projects/<cwd>/chats/<sessionId>.jsonl`, 0.24).

Qwen Code (QwenLM/qwen-code, `packages/core/src/services/chatRecordingService.ts`) appends a
record per line in Claude Code's envelope around Gemini API content: `{uuid, parentUuid,
sessionId, timestamp, type, cwd, version, ...}` with `type` one of `user`, `assistant`,
`tool_result` and `system`, and `message` a Gemini `Content` (`{role: user|model, parts}`):

- `user`: the prompt (`provenance: real_user`), or with a `subtype` a prompt the app made
  (`notification`, `cron`, `mid_turn_user_message`, `goal_runtime`), `systemPayload` its display
  text;
- `assistant`: one response, `model`, `usageMetadata` (the provider's count of the call:
  `promptTokenCount` cached included, `cachedContentTokenCount`, `candidatesTokenCount`,
  `thoughtsTokenCount`) and `contextWindowSize`; parts `text` (`thought: true` for reasoning)
  and `functionCall {id, name, args}`;
- `tool_result`: `functionResponse {id, name, response: {output} | {error}}` parts, and
  `toolCallResult` (status, the display the UI shows);
- `system`: app events in `systemPayload` by `subtype` (`ui_telemetry`, `attribution_snapshot`,
  `slash_command`, `custom_title`, `rewind`, `session_model`, `file_history_snapshot`...), and
  `chat_compression`: `{info, compressedHistory: Content[], completedToolCallIds}`.

Qwen Code loads a session as `reconstructHistory` (prepareTranscriptRecords,
`utils/transcript-records.ts`) and `buildSessionHistoryFromConversation`
(`services/session-api-history.ts`) make it: records of one uuid are fragments of one record
(parts joined); the chain is walked from the last conversation record by `parentUuid` (a
`/rewind` leaves the records after its target off it); along the chain a `chat_compression`
with a `compressedHistory` list replaces the history with that list, a record with a `message`
joins it (a `mid_turn_user_message` joins the user turn before it, a `realtime_message` never),
and a `slash_command` result not sent to the model takes back the user record of that command.

Read: that history as units. A user Content is a user unit for its text and a tool unit per
`functionResponse`; a model Content an assistant unit (thoughts as reasoning, function calls as
tool calls). Each assistant record's `usageMetadata` is the provider's count of its call. The
history before Qwen Code's last compression is left out (`include_compacted` reads it, and
keeps the compression record); the Contents of its `compressedHistory` are units of that
record, its first (Qwen Code's state snapshot) a summary. Every record that is no unit (system events, records off the chain) is kept in place
(`formats.kept`), not counted.

Written back: untouched records byte for byte; a changed unit as its record with the parts
replaced (a changed result without the display of the old one); a unit compaction made as a
record of its own; a compression record with its list rebuilt from its units when they changed.
Every record whose parent went with compaction, and every new one, hangs from the record on the
chain before it, so the chain from the last record holds every record kept. Written from
another format, the records form one chain; Qwen Code stores no system prompt: none is written.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime, timezone
from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, app_records
from ctxkit.formats.common import (
    Source,
    args_object,
    args_text,
    dumps,
    finish,
    first_context,
    joins,
    link_group_sizes,
    provider_usage,
    raw_groups,
    session_facts,
    source_records,
    timestamp_of,
)
from ctxkit.formats.gemini import _problems as gemini_problems
from ctxkit.formats.gemini_cli import function_responses, parts_text, response_text
from ctxkit.formats.kept import KEY as KEPT
from ctxkit.formats.kept import Keeper, names, place
from ctxkit.formats.kept import records as kept_records
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "qwen-code"
APP_LABEL = "Qwen Code chat"
OMITS = "the system prompt or tool schemas"
COMPACTED = "before Qwen Code's last compression"
# The metadata keys, for the writer, of the uuids of records off the chain (a rewind's dead
# branch) and of the compression record the units start from.
OFF_CHAIN = "qwen_code_off_chain"
COMPRESSION = "qwen_code_compression"

_TYPES = frozenset({"user", "assistant", "tool_result", "system"})
# system records Qwen Code never walks the chain through (transcript-records.ts)
_NOT_CONVERSATION = frozenset({"session_sources_snapshot", "session_artifact_event", "session_artifact_snapshot",
                               "managed_session_header_v1", "managed_session_event_v1", "managed_session_commit_v1"})
_NAMESPACE = uuidlib.UUID("5a3c9e21-7d4b-5f08-b6e2-1c8d4a7f9e30")


# ---------------------------------------------------------------- records


def _valid(rec: Any) -> bool:
    """A record Qwen Code reads (validateTranscriptRecord): its identity fields and a known type."""
    return (isinstance(rec, dict) and isinstance(rec.get("uuid"), str) and bool(rec["uuid"])
            and (rec.get("parentUuid") is None or isinstance(rec.get("parentUuid"), str)) and "parentUuid" in rec
            and isinstance(rec.get("sessionId"), str) and bool(rec["sessionId"]) and rec.get("type") in _TYPES)


def _conversation(rec: dict[str, Any]) -> bool:
    return not (rec.get("type") == "system" and rec.get("subtype") in _NOT_CONVERSATION)


def _parts(rec: dict[str, Any]) -> list[Any] | None:
    msg = rec.get("message")
    parts = msg.get("parts") if isinstance(msg, dict) else None
    return parts if isinstance(parts, list) else None


def _mine(rec: Any) -> bool:
    """A record only Qwen Code writes: a Gemini `parts` message, a `tool_result` record, or a
    `systemPayload` (Claude Code's records hold Anthropic `content` and none of these)."""
    if not _valid(rec):
        return False
    msg = rec.get("message")
    if isinstance(msg, dict) and "content" in msg:
        return False
    return _parts(rec) is not None or rec["type"] == "tool_result" or "systemPayload" in rec


def detect(records: list[Any]) -> bool:
    """Qwen Code records: Claude Code's envelope (uuid, parentUuid, sessionId) around Gemini
    `parts`, `tool_result` records or a `systemPayload`, and no Anthropic `content` message."""
    head = records[:20]
    if not head or not all(isinstance(r, dict) for r in head):
        return False
    if any(isinstance(r.get("message"), dict) and "content" in r["message"] for r in head):
        return False
    hits = sum(1 for r in head if _mine(r))
    return hits > 0 and hits >= len(head) // 2


def _usage(rec: dict[str, Any], after: int) -> dict[str, Any] | None:
    """The provider's count of one call from an assistant record's `usageMetadata`."""
    meta = rec.get("usageMetadata")
    if not isinstance(meta, dict):
        return None

    def n(key: str) -> int:
        v = meta.get(key)
        return v if isinstance(v, int) else 0

    if n("promptTokenCount") <= 0:
        return None
    call: dict[str, Any] = {"after_unit": after, "input_tokens": n("promptTokenCount"),
                            "cache_read_tokens": n("cachedContentTokenCount"),
                            "output_tokens": n("candidatesTokenCount") + n("thoughtsTokenCount")}
    if isinstance(rec.get("model"), str) and rec["model"]:
        call["model"] = rec["model"]
    return call


# ---------------------------------------------------------------- reading


def _chain(records: list[Any]) -> tuple[list[int], dict[str, list[int]]]:
    """The indexes of the records on the chain Qwen Code resumes (the first fragment of each
    uuid, root first) and every uuid's fragments (indexes, in file order)."""
    fragments: dict[str, list[int]] = {}
    leaf: str | None = None
    for i, rec in enumerate(records):
        if _valid(rec) and _conversation(rec):
            fragments.setdefault(rec["uuid"], []).append(i)
            leaf = rec["uuid"]
    chain: list[int] = []
    seen: set[str] = set()
    at = leaf
    while at is not None and at in fragments and at not in seen:
        seen.add(at)
        first = fragments[at][0]
        chain.append(first)
        at = records[first].get("parentUuid")
    chain.reverse()
    return chain, fragments


def _joined(records: list[Any], indexes: list[int]) -> dict[str, Any]:
    """A record's fragments as one (aggregateTranscriptRecordFragments): the first, with the
    parts of all, the last usage, the first result and model."""
    base = dict(records[indexes[0]])
    parts = list(_parts(base) or [])
    for i in indexes[1:]:
        rec = records[i]
        parts.extend(_parts(rec) or [])
        for key in ("usageMetadata",):
            if key in rec:
                base[key] = rec[key]
        for key in ("toolCallResult", "model"):
            if key in rec and not base.get(key):
                base[key] = rec[key]
    if isinstance(base.get("message"), dict):
        base["message"] = {**base["message"], "parts": parts}
    return base


class _Reader:
    """Units of Contents, in order, with the calls they open (to pair results without an id)."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.units: list[Unit] = []
        self.open: list[tuple[str, str]] = []  # (id, name) of calls not answered yet

    def content(self, content: Any, uid: str, ts: float | None, raw: Any, group: int,
                meta: dict[str, Any] | None = None) -> list[Unit]:
        """The units of one Gemini Content (see the module doc)."""
        made: list[Unit] = []
        if not isinstance(content, dict):
            return made
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        if content.get("role") == "model":
            texts = [p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought")]
            thoughts = [p["text"] for p in parts if isinstance(p.get("text"), str) and p.get("thought")]
            calls = []
            images = 0
            for k, p in enumerate(parts):
                fc = p.get("functionCall")
                if isinstance(fc, dict):
                    cid = str(fc.get("id") or f"call_{group}_{k}")
                    calls.append(ToolCall(cid, str(fc.get("name") or ""), args_text(fc.get("args"))))
                    self.open.append((cid, calls[-1].name))
                elif "inlineData" in p or "fileData" in p:
                    images += 1
                elif not isinstance(p.get("text"), str) and "thoughtSignature" not in p:
                    texts.append(dumps(p))  # executable code and the like: what the model wrote
            made.append(Unit(id=uid, role="assistant", content="\n".join(texts), reasoning="\n".join(thoughts),
                             tool_calls=calls, images=images, timestamp=ts, raw=raw, group=group,
                             meta=dict(meta or {})))
        else:
            responses, rest = function_responses(parts)
            for k, fr in enumerate(responses):
                name = str(fr.get("name") or "")
                cid = str(fr["id"]) if fr.get("id") else next((c for c, n in self.open if n == name), f"call_{group}_{k}")
                self.open = [(c, n) for c, n in self.open if c != cid]
                failed = isinstance(fr.get("response"), dict) and "error" in fr["response"]
                made.append(Unit(id=uid if k == 0 else f"{uid}#{k}", role="tool", content=response_text(fr),
                                 tool_call_id=cid, name=name or None, timestamp=ts, raw=raw, group=group,
                                 meta={"is_error": True} if failed else {}))
            k = len(responses)  # the user's own parts follow the results
            if rest or not parts:
                text, images = parts_text(rest, self.src)
                made.append(Unit(id=uid if k == 0 else f"{uid}#{k}", role="user", content=text, images=images,
                                 timestamp=ts, raw=raw, group=group, meta=dict(meta or {})))
        for u in made:
            finish(u)
            self.units.append(u)
        return made


def _takes_back(rec: dict[str, Any], previous: dict[str, Any] | None) -> bool:
    """A `slash_command` result Qwen Code did not send the model, after the user record of that
    command: resuming, it takes that record back out of the history."""
    payload = rec.get("systemPayload")
    if not isinstance(payload, dict) or payload.get("phase") != "result" or payload.get("sentToModel") is True:
        return False
    items = payload.get("outputHistoryItems")
    if not (isinstance(items, list) and items and all(isinstance(x, dict) and x.get("type") == "assistant"
                                                        for x in items)):
        return False
    if previous is None or previous.get("type") != "user" or previous.get("subtype") is not None:
        return False
    parts = _parts(previous) or []
    return (len(parts) == 1 and isinstance(parts[0], dict) and list(parts[0]) == ["text"]
            and parts[0]["text"] == payload.get("rawCommand"))


def _taken_back(records: list[Any], chain: list[int]) -> set[int]:
    """The user records on the chain a later `slash_command` result takes back (Qwen Code's
    `lastMaterialRecord`: the last record that gave the history a message; a compression or a
    slash command clears it)."""
    taken: set[int] = set()
    previous: int | None = None
    for i in chain:
        rec = records[i]
        if rec["type"] == "system":
            if rec.get("subtype") == "slash_command":
                if previous is not None and _takes_back(rec, records[previous]):
                    taken.add(previous)
                if previous is not None and records[previous].get("type") == "user":
                    previous = None
            elif rec.get("subtype") == "chat_compression" and isinstance(rec.get("systemPayload"), dict) \
                    and rec["systemPayload"].get("compressedHistory"):
                previous = None
        elif isinstance(rec.get("message"), dict) and rec.get("subtype") != "realtime_message":
            previous = i
    return taken


def _compression_history(reader: _Reader, keeper: Keeper, i: int, rec: dict[str, Any], history: list[Any],
                 ts: float | None) -> dict[str, Any]:
    """A chat_compression record read as the history Qwen Code keeps (its state snapshot first,
    a summary); returned, what the writer needs of the record when compaction takes its units."""
    name = rec.get("uuid") if isinstance(rec.get("uuid"), str) else None
    payload = rec.get("systemPayload")
    # the record without its history, for the writer when compaction takes all its units
    bare = {**rec, "systemPayload": {**(payload or {}), "compressedHistory": []}}
    made = [u for k, content in enumerate(history)
            for u in reader.content(content, f"{name}.{k}", ts, rec, i, {"item": k})]
    if made and made[0].role == "user" and made[0].meta.get("item") == 0:
        made[0].type = "summary"  # Qwen Code's state snapshot opens the history it keeps
    for u in made:
        keeper.unit(u.id, [i], name if u is made[0] else None)
    if not made:
        keeper.keep(i, rec, name=name)
    return {"index": i, "uuid": name, "record": bare}


def _cut(units: list[Unit], calls: list[dict[str, Any]], cut: int, cut_calls: int, keeper: Keeper,
         src: Source) -> list[dict[str, Any]]:
    """Leave out the units before Qwen Code's last compression (kept as records, and counted);
    the calls made after it, counted from the units left."""
    hidden = units[:cut]
    keeper.hide(hidden)
    del units[:cut]
    if hidden:
        src.left_out(COMPACTED, len(hidden))
    return [{**c, "after_unit": c["after_unit"] - cut} for c in calls[cut_calls:]]


def read(records: list[Any], src: Source) -> Transcript:
    """The history Qwen Code resumes, as units (see the module doc)."""
    chain, fragments = _chain(records)
    on_chain = set(chain)
    first_of = {idx[0]: uid for uid, idx in fragments.items()}
    later = {i: uid for uid, idx in fragments.items() for i in idx[1:]}
    keeper = Keeper()
    reader = _Reader(src)
    units = reader.units
    unit_of: dict[str, str] = {}  # record uuid -> the id of its first unit
    calls: list[dict[str, Any]] = []
    model: str | None = None
    window: int | None = None
    session: str | None = None
    cut: int | None = None  # units before Qwen Code's last compression (left out)
    cut_calls = 0
    taken_back = _taken_back(records, chain)
    metadata: dict[str, Any] = {}
    stats = src.stats
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            src.bad(i, "expected a Qwen Code record object", rec)
            continue
        name = rec.get("uuid") if isinstance(rec.get("uuid"), str) else None
        if i in later and later[i] in unit_of:
            keeper.also(unit_of[later[i]], i, name)  # another fragment of a record read
            continue
        if i not in on_chain:
            stats.skip(f"{NAME}:{rec.get('type')}" if _valid(rec) and rec.get("type") != "system"
                       else f"{NAME}:{rec.get('subtype') or rec.get('type') or 'record'}")
            keeper.keep(i, rec, name=name)
            continue
        session = session or rec["sessionId"]
        whole = _joined(records, fragments[first_of[i]]) if len(fragments[first_of[i]]) > 1 else rec
        kind = rec["type"]
        ts = timestamp_of(rec.get("timestamp"))
        payload = rec.get("systemPayload")
        if kind == "system":
            history = payload.get("compressedHistory") if isinstance(payload, dict) else None
            if rec.get("subtype") == "chat_compression" and isinstance(history, list) and not src.include_compacted:
                cut, cut_calls = len(units), len(calls)
                metadata[COMPRESSION] = _compression_history(reader, keeper, i, rec, history, ts)
                stats.skip(f"{NAME}:chat_compression")
                continue
            stats.skip(f"{NAME}:{rec.get('subtype') or 'system'}")
            keeper.keep(i, rec, name=name)
            continue
        msg = whole.get("message")
        if i in taken_back:
            stats.skip(f"{NAME}:slash command")
            keeper.keep(i, rec, name=name)
            continue
        if not isinstance(msg, dict) or rec.get("subtype") == "realtime_message":
            stats.skip(f"{NAME}:{rec.get('subtype') or kind}")
            keeper.keep(i, rec, name=name)
            continue
        meta: dict[str, Any] = {}
        if rec.get("subtype"):
            meta["subtype"] = rec["subtype"]
        if rec.get("subtype") == "mid_turn_user_message" and units and units[-1].role in ("user", "tool"):
            meta["join"] = True  # Qwen Code sends it in the user turn before it
        made = reader.content(msg, name or f"r{i}", ts, rec if whole is rec else [records[j] for j in
                              fragments[first_of[i]]], i, meta)
        if whole is not rec:
            for u in made:
                u.raw = records[i]
                u.source = [records[j] for j in fragments[first_of[i]]]
        if not made:
            keeper.keep(i, rec, name=name)
            continue
        unit_of[rec["uuid"]] = made[0].id
        for k, u in enumerate(made):
            keeper.unit(u.id, [i], name if k == 0 else None)
        if kind == "assistant":
            if isinstance(whole.get("model"), str) and whole["model"]:
                model = whole["model"]
            if isinstance(whole.get("contextWindowSize"), int):
                window = whole["contextWindowSize"]
            call = _usage(whole, len(units) - len(made) - 1)
            if call is not None:
                calls.append(call)
    link_group_sizes(units)
    first_call = first_context(units, calls)
    if cut is not None:
        calls = _cut(units, calls, cut, cut_calls, keeper, src)
    if calls:
        metadata["provider_usage"] = provider_usage(NAME, calls, first_call)
    metadata.update(session_facts(model, window, session))
    off = sorted({rec["uuid"] for i, rec in enumerate(records) if _valid(rec) and i not in on_chain
                  and i not in later})
    if off:
        metadata[OFF_CHAIN] = off
    metadata[KEPT] = keeper.metadata()
    return src.transcript(units, NAME, session, metadata)


# ---------------------------------------------------------------- writing

_CONTEXT_KEYS = ("sessionId", "cwd", "version", "gitBranch")


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _source_parts(u: Unit) -> list[dict[str, Any]]:
    """The parts of the Content a unit was read from (its record's, or its compression item's)."""
    item = u.meta.get("item")
    for rec in source_records(u):
        payload = rec.get("systemPayload")
        if isinstance(item, int) and isinstance(payload, dict):
            history = payload.get("compressedHistory")
            if isinstance(history, list) and item < len(history) and isinstance(history[item], dict):
                return [p for p in history[item].get("parts") or [] if isinstance(p, dict)]
            return []
        parts = _parts(rec)
        if parts is not None:
            return [p for p in parts if isinstance(p, dict)]
    return []


def _unit_parts(u: Unit) -> list[dict[str, Any]]:
    """The Gemini parts of a unit: the source's where they still say the same, new ones else."""
    old = _source_parts(u)
    if u.role == "tool":
        found = next((p for p in old if isinstance(p.get("functionResponse"), dict)
                      and p["functionResponse"].get("id") == u.tool_call_id), None)
        if found is not None and response_text(found["functionResponse"]) == u.content:
            return [found]
        key = "error" if u.meta.get("is_error") else "output"
        response: dict[str, Any] = {"name": u.name or "", "response": {key: u.content}}
        if u.tool_call_id:
            response = {"id": u.tool_call_id, **response}
        return [{"functionResponse": response}]
    if u.role != "assistant":
        texts = [p for p in old if not isinstance(p.get("functionResponse"), dict)]
        text, _ = parts_text(texts)
        return texts if texts and text == u.content else [{"text": u.content}]
    parts: list[dict[str, Any]] = []
    thoughts = [p for p in old if p.get("thought") and isinstance(p.get("text"), str)]
    if u.reasoning and "\n".join(p["text"] for p in thoughts) == u.reasoning:
        parts.extend(thoughts)
    elif u.reasoning:
        parts.append({"text": u.reasoning, "thought": True})
    if u.content:
        parts.append({"text": u.content})
    for c in u.tool_calls:
        same = next((p for p in old if isinstance(p.get("functionCall"), dict) and p["functionCall"].get("id") == c.id
                     and args_text(p["functionCall"].get("args")) == c.arguments), None)
        parts.append(same or {"functionCall": {"id": c.id, "name": c.name, "args": args_object(c.arguments)}})
    return parts


def _role(u: Unit) -> str:
    return "model" if u.role == "assistant" else "user"


def _kind(u: Unit) -> str:
    return {"assistant": "assistant", "tool": "tool_result"}.get(u.role, "user")




def _new_record(u: Unit, t: Transcript, context: dict[str, Any]) -> dict[str, Any]:
    """A record of its own for a unit compaction made (or one of another format)."""
    rec: dict[str, Any] = {"uuid": str(uuidlib.uuid5(_NAMESPACE, f"{t.id}/{u.id}")), "parentUuid": None}
    for key in _CONTEXT_KEYS:
        if key in context:
            rec[key] = context[key]
    rec.setdefault("sessionId", str(uuidlib.uuid5(_NAMESPACE, t.id)))
    rec["timestamp"] = _iso(u.timestamp) or context.get("timestamp") or _iso(0.0)
    rec["type"] = _kind(u)
    rec["message"] = {"role": _role(u), "parts": _unit_parts(u)}
    return rec


def _rebuilt(run: list[Unit], template: dict[str, Any]) -> dict[str, Any]:
    """The units left of one record, some changed: the record with their parts (a changed
    result's record without the display of the old result)."""
    parts = [p for u in run for p in _unit_parts(u)]
    rec = {k: v for k, v in template.items()
           if not (k == "toolCallResult" and any(u.role == "tool" and u.raw is None for u in run))}
    rec["message"] = {**(template.get("message") or {}), "parts": parts}
    return rec


def _compression(t: Transcript, index: int) -> tuple[list[Unit], dict[str, Any] | None]:
    """The units read from the compression record at file index `index`, and that record."""
    units = [u for u in t.units if u.group == index and isinstance(u.meta.get("item"), int)]
    return units, next((rec for u in units for rec in source_records(u)), None)


def _compressed(t: Transcript, info: dict[str, Any]) -> tuple[dict[str, Any] | None, set[str]]:
    """The compression record the units start from, its history rebuilt from its units when
    they changed (an empty list when all went: Qwen Code then starts from nothing, never from
    the history before it), and the ids of its units."""
    index = info.get("index")
    if not isinstance(index, int):
        return None, set()
    units, record = _compression(t, index)
    ids = {u.id for u in units}
    if record is None:
        bare = info.get("record")
        return (bare if isinstance(bare, dict) else None), ids
    payload: dict[str, Any] = record["systemPayload"] if isinstance(record.get("systemPayload"), dict) else {}
    history: list[Any] = payload["compressedHistory"] if isinstance(payload.get("compressedHistory"), list) else []
    if len(units) == len(_items_units(history)) and all(u.raw is not None for u in units):
        return record, ids
    contents: list[dict[str, Any]] = []
    last_item: Any = object()
    for u in units:
        parts = _unit_parts(u)
        if contents and u.meta.get("item") == last_item and contents[-1]["role"] == _role(u):
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": _role(u), "parts": parts})
        last_item = u.meta.get("item")
    return {**record, "systemPayload": {**payload, "compressedHistory": contents}}, ids


def _items_units(history: list[Any]) -> list[int]:
    """How many units each Content of a compressed history reads as (as `_Reader.content`)."""
    counts = []
    for content in history:
        if not isinstance(content, dict):
            continue
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        if content.get("role") == "model":
            counts.append(1)
            continue
        responses = sum(1 for p in parts if isinstance(p.get("functionResponse"), dict))
        counts.extend([1] * (responses + (1 if len(parts) > responses or not parts else 0)))
    return counts


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Qwen Code records for a transcript (see the module doc)."""
    same = t.source_format == NAME
    produced: list[tuple[Unit | None, Any]] = []
    at: dict[int, int] = {}
    made: set[str] = set()
    skip: set[str] = set()
    # what a new record copies its session fields from: the record before it, or the log's first
    context: dict[str, Any] = next((r for r in kept_records(t) if _valid(r)), {}) if same else {}
    info = t.metadata.get(COMPRESSION) if same else None
    if isinstance(info, dict):
        record, skip = _compressed(t, info)
        if record is not None:
            at[len(produced)] = int(info["index"])
            produced.append((None, record))
            context = record
    for raw, run in raw_groups([u for u in t.units if u.id not in skip]):
        if same and not context:
            context = next((r for u in run for r in source_records(u)), context)
        sources = [r for r in source_records(run[0])] if same else []
        # a unit read from a record goes back in its record (a mid-turn message too); only a
        # unit compaction made joins the record before it
        if raw is not None and same and sources:
            for rec in sources:
                produced.append((run[0], rec))
            context = sources[0]
            continue
        if same and sources and run[0].group is not None and run[0].role != "system":
            rec = _rebuilt(run, sources[0])
            produced.append((run[0], rec))
            context = rec
            continue
        for u in run:
            if u.role == "system" or (u.role == "assistant" and not (u.content or u.tool_calls or u.reasoning)):
                continue  # Qwen Code stores no system prompt; an empty response is no Content
            last = produced[-1][1] if produced else None
            # a unit compaction made that joins the one before, or (another format's) a call of
            # the same response: one Content with the record before (Qwen Code writes a
            # response's calls in one Content, each result in a record of its own)
            together = joins(u) or (u.role == "assistant" and isinstance(last, dict) and last.get("uuid") in made
                                    and _ends_in_call(last))
            if together and isinstance(last, dict) and isinstance(last.get("message"), dict) \
                    and last["message"].get("role") == _role(u) and u.role != "tool":
                msg = last["message"]
                produced[-1] = (produced[-1][0], {**last, "message": {**msg, "parts": [*msg.get("parts", []),
                                                                                       *_unit_parts(u)]}})
                continue
            rec = _new_record(u, t, context)
            made.add(rec["uuid"])
            produced.append((u, rec))
            context = rec
    if not same:
        return _chained([rec for _, rec in produced]), {}
    placed = place(t, produced, at)
    off = set(t.metadata.get(OFF_CHAIN) or [])
    return _linked(placed, made, names(t) - {r.get("uuid") for r in placed if isinstance(r, dict)}, off), {}


def _ends_in_call(rec: dict[str, Any]) -> bool:
    """Whether a record's Content ends in a function call (its response is still being written)."""
    parts = _parts(rec) or []
    return bool(parts) and isinstance(parts[-1], dict) and "functionCall" in parts[-1]


def _chained(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records of another format's transcript as one chain."""
    parent: Any = None
    out = []
    for rec in records:
        out.append({**rec, "parentUuid": parent})
        parent = rec["uuid"]
    return out


def _linked(records: list[Any], made: set[str], gone: set[str], off: set[str]) -> list[Any]:
    """Each record's `parentUuid` as it was where its parent is still written; a made-up record,
    or one whose parent compaction removed, hangs from the record on the chain before it (the
    records of a rewound branch are no such record, and keep their own links)."""
    out = []
    before: Any = None
    linked: dict[str, Any] = {}  # uuid -> the parent its first fragment was given
    for rec in records:
        if not _valid(rec):
            out.append(rec)
            continue
        parent = rec.get("parentUuid")
        if rec["uuid"] in linked:
            parent = linked[rec["uuid"]]  # another fragment of a record written: the same parent
        elif rec["uuid"] in made or (parent is not None and parent in gone):
            parent = before
        if parent != rec.get("parentUuid"):
            rec = {**rec, "parentUuid": parent}
        linked.setdefault(rec["uuid"], parent)
        out.append(rec)
        if rec["uuid"] not in off and _conversation(rec):
            before = rec["uuid"]
    return out


# ---------------------------------------------------------------- validating


def _history(records: list[Any]) -> list[Any]:
    """The Contents Qwen Code sends on resuming (see the module doc), fragments joined."""
    chain, fragments = _chain(records)
    taken = _taken_back(records, chain)
    history: list[Any] = []
    for i in chain:
        rec = records[i]
        whole = _joined(records, fragments[rec["uuid"]])
        if rec["type"] == "system":
            payload = rec.get("systemPayload")
            if rec.get("subtype") == "chat_compression" and isinstance(payload, dict) \
                    and isinstance(payload.get("compressedHistory"), list):
                history = list(payload["compressedHistory"])
            continue
        msg = whole.get("message")
        if i in taken or not isinstance(msg, dict) or rec.get("subtype") == "realtime_message":
            continue
        if rec.get("subtype") == "mid_turn_user_message" and history and isinstance(history[-1], dict) \
                and history[-1].get("role") == "user":
            history[-1] = {**history[-1], "parts": [*(history[-1].get("parts") or []), *(msg.get("parts") or [])]}
            continue
        history.append(msg)
    return history


def validate(data: Any) -> list[str]:
    """What Qwen Code needs to resume a session: every record with its identity fields and a
    known type, each `parentUuid` null or an earlier record's, and the history it rebuilds
    from the chain under the Gemini API's rules."""
    records = app_records(data)
    out: list[str] = []
    seen: set[str] = set()
    for i, rec in enumerate(records):
        at = f"record {i + 1}"
        if not _valid(rec):
            out.append(f"{at}: not a Qwen Code record {{uuid, parentUuid, sessionId, type}}")
            continue
        if rec["parentUuid"] is not None and rec["parentUuid"] not in seen:
            out.append(f"{at}: parentUuid {rec['parentUuid']!r} is no earlier record")
        seen.add(rec["uuid"])
        msg = rec.get("message")
        if rec["type"] != "system" and msg is not None and not (
                isinstance(msg, dict) and msg.get("role") in ("user", "model") and isinstance(msg.get("parts"), list)):
            out.append(f"{at}: message is no Gemini Content {{role: user|model, parts}}")
    if not out:
        # Qwen Code records each call's result on its own: the user Contents in a row are one
        # turn (as its coalesceAdjacentUserHistory joins them)
        history: list[Any] = []
        for content in _history(records):
            if history and isinstance(content, dict) and content.get("role") == "user" and isinstance(
                    history[-1], dict) and history[-1].get("role") == "user":
                history[-1] = {**history[-1], "parts": [*(history[-1].get("parts") or []), *(content.get("parts") or [])]}
            else:
                history.append(content)
        out.extend(gemini_problems(history, ""))
    return out[:MAX_PROBLEMS]


FORMAT = Format.of_module(__name__, shape="log", agent="Qwen Code", strict=True, holds_tools=False,
                          compaction=True)
