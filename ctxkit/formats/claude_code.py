"""Claude Code session logs (read only): one record per line, messages among app records."""

from __future__ import annotations

from typing import Any

from ctxkit.classify import classify
from ctxkit.formats.anthropic import assistant_parts, tool_units
from ctxkit.formats.common import Source, blocks_text, link_group_sizes, timestamp_of
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
    stats = src.stats
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            src.bad(i, "expected a Claude Code record object", rec)
            continue
        kind = rec.get("type")
        if kind not in _MESSAGE_KINDS:
            stats.skip(str(kind))
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
        if summary and not rec.get("isSidechain"):
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
        if rest or not content:
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
    return Transcript(
        units=units,
        id=str(session or src.tid),
        source_format=NAME,
        layout=src.layout,
        envelope=dict(src.envelope),
        line=src.line,
        metadata=metadata,
    )


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

