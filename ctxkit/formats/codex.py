"""Codex CLI rollout JSONL: `{timestamp, type, payload}` per line.

Written back as a rollout Codex can resume from: the records that are no units (session_meta,
turn_context, event_msg, encrypted reasoning) kept in `Transcript.metadata["codex_records"]` and
put back where they were, untouched response items as they were, changed ones with their
payload's output or content replaced, and a ctxkit summary as Codex's own `compacted` record
(on resume Codex rebuilds the history as its initial context, the user messages so far and
that summary).

A rollout with Codex's own `compacted` records is read, by default, as Codex rebuilds it on
resume (`src.include_compacted` reads every record instead): at each compaction the history
becomes the initial context (developer messages, AGENTS.md and environment context), the user
messages so far (newest first within 20,000 approximate tokens, the oldest one kept cut in the
middle) and the summary, or the record's `replacement_history` when it has one; what it replaced
is counted, not read.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime, timezone
from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, app_records, validate_type
from ctxkit.formats.common import (
    ReadStats,
    Source,
    args_text,
    blocks_text,
    dumps,
    finish,
    is_reasoning_only,
    joins,
    timestamp_of,
)
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "codex"
APP_LABEL = "Codex rollout"

_KINDS = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_TEXT_BLOCKS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")

COMPACTED = "before Codex's last compaction"
# Codex keeps this many approximate tokens (4 bytes each) of user messages across a compaction.
USER_MESSAGE_MAX_TOKENS = 20_000
# Messages of the initial context Codex sends again at every turn (it never counts them as the
# user's: `is_session_prefix`).
_SESSION_PREFIXES = ("<environment_context>", "<user_instructions>", "# agents.md instructions for")


def detect(obj: Any) -> bool:
    """Records shaped `{type: session_meta|response_item|event_msg|turn_context, payload}`."""
    records = obj if isinstance(obj, list) else [obj]
    hits = 0
    for rec in records[:20]:
        if not isinstance(rec, dict):
            return False
        if rec.get("type") in _KINDS and isinstance(rec.get("payload"), dict):
            hits += 1
    return hits > 0 and hits >= min(len(records), 20) // 2


def read(records: list[Any], src: Source) -> Transcript:
    """Response items as units; event_msg duplicates, turn context and snapshots skipped and
    counted; token_count events become provider usage."""
    units: list[Unit] = []
    made = 0  # units made so far (ids stay unique when a compaction rebuilds `units`)
    names: dict[str, str] = {}
    usage_calls: list[dict[str, Any]] = []
    last_total: Any = None
    session: str | None = None
    model: str | None = None
    stats = src.stats

    # Records that are no units, kept for the writer: before the first unit (head), after the
    # unit they follow (event_msg, turn_context), or before the unit they precede (response
    # items that are not read, such as encrypted reasoning, which must precede its item).
    head: list[Any] = []
    after: dict[str, list[Any]] = {}
    before: dict[str, list[Any]] = {}
    waiting: list[Any] = []

    def add(unit: Unit) -> None:
        nonlocal made
        made += 1
        if waiting:
            before[unit.id] = waiting.copy()
            waiting.clear()
        units.append(finish(unit))

    def keep(rec: Any, precedes: bool) -> None:
        if precedes or waiting:
            waiting.append(rec)  # goes with the item it precedes (and what came between)
        elif not units:
            head.append(rec)
        else:
            after.setdefault(units[-1].id, []).append(rec)

    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or not isinstance(rec.get("payload"), dict):
            src.bad(i, "expected a Codex rollout record {timestamp, type, payload}", rec)
            continue
        kind = rec.get("type")
        payload = rec["payload"]
        ptype = payload.get("type")
        ts = timestamp_of(rec.get("timestamp"))
        uid = f"u{made}"
        if kind == "session_meta":
            session = session or (str(payload["id"]) if payload.get("id") else None)
            stats.skip("session_meta")
            keep(rec, False)
            continue
        if kind == "turn_context":
            model = payload.get("model") if isinstance(payload.get("model"), str) else model
            stats.skip("turn_context")
            keep(rec, False)
            continue
        if kind == "event_msg":
            stats.skip(f"event_msg:{ptype}")
            keep(rec, False)
            info = payload.get("info")
            if ptype == "token_count" and isinstance(info, dict):
                total = info.get("total_token_usage")
                last = info.get("last_token_usage")
                # Codex repeats the same count after each tool output; a new total is a new call.
                if isinstance(last, dict) and total != last_total:
                    last_total = total
                    usage_calls.append(
                        {
                            "after_unit": len(units) - 1,
                            # input_tokens already includes cached_input_tokens.
                            "input_tokens": int(last.get("input_tokens") or 0),
                            "cache_read_tokens": int(last.get("cached_input_tokens") or 0),
                            "output_tokens": int(last.get("output_tokens") or 0),
                        }
                    )
            continue
        if kind == "compacted":
            text = payload.get("message")
            replacement = payload.get("replacement_history")
            if not src.include_compacted and (isinstance(text, str) or isinstance(replacement, list)):
                old = list(units)
                if isinstance(replacement, list):
                    units[:] = _replacement_units(replacement, rec, uid, src)
                else:
                    units[:] = _rebuilt(units)
                survivors = {id(u) for u in units}
                dropped = sum(id(u) not in survivors for u in old)
                if dropped:
                    stats.skip(COMPACTED, dropped)
                    stats.warnings.append(
                        f"{src.path}:{src.line_of(i) or '-'}: {dropped:,} messages before Codex's compaction "
                        "left out (the model no longer sees them)"
                    )
                usage_calls.clear()  # calls before a compaction saw another history
                if isinstance(replacement, list):
                    made += len(units)
                    stats.skip("compacted")
                    keep(rec, False)
                    continue
            if isinstance(text, str):
                add(Unit(id=uid, role="user", type="summary", content=text, timestamp=ts, raw=rec, group=i))
            else:
                stats.skip("compacted")
                keep(rec, False)
            continue
        if kind != "response_item":
            stats.skip(str(kind))
            keep(rec, False)
            continue
        if ptype == "message":
            role = payload.get("role")
            meta: dict[str, Any] = {}
            if role not in ("user", "assistant", "system"):
                meta["source_role"] = role
                role = "system" if role == "developer" else "user"
            text, images = blocks_text(payload.get("content"), _TEXT_BLOCKS, src)
            add(Unit(id=uid, role=str(role), content=text, timestamp=ts, images=images, raw=rec, group=i, meta=meta))
        elif ptype in _CALLS:
            cid = str(payload.get("call_id") or payload.get("id") or f"call_{i}")
            name = str(payload.get("name") or ("local_shell" if ptype == "local_shell_call" else ""))
            args = payload.get("arguments", payload.get("input", payload.get("action")))
            names[cid] = name
            add(Unit(id=uid, role="assistant", content="", timestamp=ts,
                     tool_calls=[ToolCall(cid, name, args_text(args))], raw=rec, group=i))
        elif ptype in _OUTPUTS:
            cid = str(payload.get("call_id") or "")
            output = payload.get("output")
            if not isinstance(output, str):
                text, _ = blocks_text(output.get("content") if isinstance(output, dict) else output, _TEXT_BLOCKS, src)
                output = text or (dumps(output) if output is not None else "")
            if cid not in names:
                src.warn(i, f"tool output {cid} has no matching call before it")
            add(Unit(id=uid, role="tool", content=output, timestamp=ts, tool_call_id=cid, name=names.get(cid),
                     raw=rec, group=i))
        elif ptype == "reasoning":
            text, _ = blocks_text(payload.get("summary"), _TEXT_BLOCKS, src)
            body, _ = blocks_text(payload.get("content"), _TEXT_BLOCKS, src)
            text = "\n".join(p for p in (text, body) if p)
            if text:
                add(Unit(id=uid, role="assistant", type="reasoning", content="", reasoning=text, timestamp=ts,
                         raw=rec, group=i))
            else:
                # Only encrypted content: nothing readable to count.
                stats.skip("response_item:reasoning")
                keep(rec, True)
        else:
            stats.skip(f"response_item:{ptype}")
            keep(rec, True)
    metadata: dict[str, Any] = {}
    if head or after or before or waiting:
        metadata["codex_records"] = {"head": head, "after": after, "before": before, "tail": waiting}
    if usage_calls:
        metadata["provider_usage"] = {"source": NAME, "calls": usage_calls}
    if session:
        metadata["session_id"] = session
    if model:
        metadata["model"] = model
    return Transcript(
        units=units,
        id=session or src.tid,
        source_format=NAME,
        layout=src.layout,
        envelope=dict(src.envelope),
        line=src.line,
        metadata=metadata,
    )


def _text_of(u: Unit) -> str:
    return u.content.strip().lower()


def _session_prefix(u: Unit) -> bool:
    """A message of the initial context Codex resends at every turn (developer instructions,
    AGENTS.md, environment context), which it never takes for the user's."""
    if u.role == "system":
        return True
    return u.role == "user" and not u.tool_calls and _text_of(u).startswith(_SESSION_PREFIXES)


def _approx_tokens(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4


def _cut_middle(u: Unit, budget: int) -> Unit:
    """A user message cut to `budget` approximate tokens around a marker, as Codex cuts one."""
    data = u.content.encode("utf-8")
    keep = max(budget, 0) * 4
    head = data[: keep // 2].decode("utf-8", "ignore")
    tail = data[len(data) - keep // 2 :].decode("utf-8", "ignore") if keep // 2 else ""
    cut = _approx_tokens(u.content) - budget
    return u.replace(content=f"{head}\u2026{cut} tokens truncated\u2026{tail}")


def _rebuilt(units: list[Unit]) -> list[Unit]:
    """The history Codex rebuilds at a compaction without a replacement: the initial context,
    then the user's messages (summaries excluded) newest first within its token allowance."""
    prefix = [u for u in units if _session_prefix(u)]
    users = [u for u in units if u.role == "user" and u.type != "summary" and not _session_prefix(u)]
    chosen: list[Unit] = []
    left = USER_MESSAGE_MAX_TOKENS
    for u in reversed(users):
        if left <= 0:
            break
        n = _approx_tokens(u.content)
        if n <= left:
            chosen.append(u)
            left -= n
        else:
            chosen.append(_cut_middle(u, left))
            break
    chosen.reverse()
    return prefix + chosen


def _replacement_units(items: list[Any], rec: dict[str, Any], uid: str, src: Source) -> list[Unit]:
    """A compaction's `replacement_history` read as the items it holds (each one written back as
    a response item of its own, which Codex resumes to the same history)."""
    records = [{"timestamp": rec.get("timestamp"), "type": "response_item", "payload": item}
               for item in items if isinstance(item, dict)]
    sub = Source(path=src.path, layout=src.layout, lines=None, line=src.line, tid=src.tid,
                 skip_invalid=src.skip_invalid, stats=ReadStats(), seen_blocks=src.seen_blocks)
    got = read(records, sub).units
    for k, u in enumerate(got):
        u.id = f"{uid}.{k}"
    return got


# ---------------------------------------------------------------- writing

_NAMESPACE = uuidlib.UUID("0b8f6d3e-4c2a-5e71-8d90-3a6b2c1f7e45")


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text_block(role: str, text: str) -> dict[str, Any]:
    return {"type": "output_text" if role == "assistant" else "input_text", "text": text}


def _items(u: Unit) -> list[dict[str, Any]]:
    """Response items for a unit from its fields (a unit of another format, or made up)."""
    if u.role == "tool":
        return [{"type": "function_call_output", "call_id": u.tool_call_id or "", "output": u.content}]
    role = {"system": "developer", "tool": "user"}.get(u.role, u.role)
    items: list[dict[str, Any]] = []
    if u.content or not u.tool_calls:
        items.append({"type": "message", "role": role, "content": [_text_block(role, u.content)]})
    for c in u.tool_calls:
        items.append({"type": "function_call", "name": c.name, "arguments": c.arguments, "call_id": c.id})
    return items


def _changed(u: Unit, rec: dict[str, Any]) -> dict[str, Any] | None:
    """The unit's source record with what changed replaced; None when it is better left out."""
    payload = dict(rec["payload"])
    ptype = payload.get("type")
    if ptype == "message":
        role = str(payload.get("role") or "user")
        payload["content"] = [_text_block(role, u.content)]
    elif ptype in _OUTPUTS:
        payload["output"] = u.content
    elif ptype in _CALLS:
        if len(u.tool_calls) != 1:
            return None
        c = u.tool_calls[0]
        if ptype == "function_call":
            payload["arguments"] = c.arguments
        elif ptype == "custom_tool_call":
            payload["input"] = c.arguments
        else:
            return None if args_text(payload.get("action")) != c.arguments else rec
    else:
        return None  # changed reasoning no longer matches its encrypted content
    return {**rec, "payload": payload}


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Rollout records for a transcript (see the module doc)."""
    same = t.source_format == NAME
    kept = t.metadata.get("codex_records") if same else None
    if not isinstance(kept, dict):
        kept = {}
    out: list[dict[str, Any]] = list(kept.get("head") or [])
    clock = next((u.timestamp for u in t.units if u.timestamp is not None), None)
    if not out:
        out.append({"timestamp": _iso(clock or 0.0), "type": "session_meta", "payload": {
            "id": str(uuidlib.uuid5(_NAMESPACE, t.id)), "timestamp": _iso(clock or 0.0), "cwd": "",
            "originator": "ctxkit", "cli_version": "0.0.0", "instructions": None}})
    before = kept.get("before") or {}
    after = kept.get("after") or {}

    def stamp(u: Unit) -> str:
        return _iso(u.timestamp) or str(out[-1].get("timestamp") or _iso(0.0))

    resumable = True  # only the initial context and user messages so far: Codex keeps them all
    for u in t.units:
        rec = u.source if same and isinstance(u.source, dict) and isinstance(u.source.get("payload"), dict) else None
        if rec is not None:
            out.extend(before.get(u.id, ()))
        if u.raw is not None and rec is not None and not joins(u):
            out.append(u.raw)
        elif u.type == "summary" and rec is None and resumable:
            out.append({"timestamp": stamp(u), "type": "compacted", "payload": {"message": u.content}})
        elif u.type == "summary" and rec is not None and rec.get("type") == "compacted":
            out.append({**rec, "payload": {**rec["payload"], "message": u.content}})
        elif is_reasoning_only(u) and rec is None:
            pass
        elif joins(u) and u.role != "tool" and _joinable(out, u):
            last = out[-1]
            payload = dict(last["payload"])
            payload["content"] = [*payload.get("content", []), _text_block(str(payload.get("role")), u.content)]
            out[-1] = {**last, "payload": payload}
        elif rec is not None and rec.get("type") == "response_item":
            changed = _changed(u, rec)
            if changed is not None:
                out.append(changed)
        else:
            out.extend({"timestamp": stamp(u), "type": "response_item", "payload": item} for item in _items(u))
        if rec is not None:
            out.extend(after.get(u.id, ()))
        # On resume Codex keeps, from before a compacted record, only the user's messages and
        # its initial context: a summary after anything else is written as a plain message.
        resumable = resumable and u.role in ("user", "system") and not u.tool_calls
    out.extend(kept.get("tail") or [])
    return out, {}


def _joinable(out: list[dict[str, Any]], u: Unit) -> bool:
    """Whether the last record is a message item of the unit's role, to add a block to."""
    if not out or out[-1].get("type") != "response_item":
        return False
    payload = out[-1].get("payload") or {}
    role = {"system": "developer"}.get(u.role, u.role)
    return payload.get("type") == "message" and payload.get("role") in (role, u.role) and isinstance(
        payload.get("content"), list
    )


# ---------------------------------------------------------------- validating


_CODEX_INTERNAL_ITEMS = frozenset({"ghost_snapshot"})
_CODEX_KINDS = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})


def _codex_item(payload: dict[str, Any]) -> dict[str, Any]:
    """A rollout's response item as the SDK types it: Codex's own serialization leaves out the
    id of a reasoning item (and writes its `content` as null) and the id and status of an
    assistant message, which the SDK's output-item types require."""
    if payload.get("type") == "reasoning":
        item = {k: v for k, v in payload.items() if not (k == "content" and v is None)}
        item.setdefault("id", "rs_rollout")
        return item
    if payload.get("type") == "message" and payload.get("role") == "assistant":
        content = payload.get("content")
        if isinstance(content, list):
            content = [
                {"annotations": [], **b} if isinstance(b, dict) and b.get("type") == "output_text" else b
                for b in content
            ]
        return {"id": "msg_rollout", "status": "completed", **payload, "content": content}
    return payload


def validate(data: Any) -> list[str]:
    """Each response item as `openai.types.responses.ResponseInputItemParam`, every output
    answering a call before it, every call answered, compacted records with their summary."""
    records = app_records(data)
    out: list[str] = []
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, rec in enumerate(records):
        at = f"record {i + 1}"
        if not isinstance(rec, dict) or rec.get("type") not in _CODEX_KINDS or not isinstance(rec.get("payload"), dict):
            out.append(f"{at}: not a rollout record {{timestamp, type, payload}}")
            continue
        payload = rec["payload"]
        if rec["type"] == "compacted":
            if not isinstance(payload.get("message"), str) or not payload["message"]:
                out.append(f"{at}: compacted record without its summary message")
            continue
        if rec["type"] != "response_item" or payload.get("type") in _CODEX_INTERNAL_ITEMS:
            continue
        out.extend(validate_type("responses.item", _codex_item(payload), at))
        ptype = payload.get("type")
        cid = payload.get("call_id")
        if ptype in ("function_call", "custom_tool_call", "local_shell_call") and isinstance(cid, str):
            calls[cid] = i + 1
        elif ptype in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            if cid not in calls:
                out.append(f"{at}: output {cid} answers no call before it")
            answered.add(str(cid))
        elif ptype == "message" and not payload.get("content"):
            out.append(f"{at}: message without content")
    for cid, n in calls.items():
        if cid not in answered:
            out.append(f"record {n}: call {cid} has no output")
    return out[:MAX_PROBLEMS]


FORMAT = Format(
    name=NAME,
    label=APP_LABEL,
    shape="log",
    detect=detect,
    read=read,
    write=write,
    validate=validate,
    agent="Codex",
    strict=True,
    holds_tools=False,
    compaction=True,
)
