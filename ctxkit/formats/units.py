"""ctxkit's own JSONL: one `Unit.to_dict()` per line (the seed spec's ContextUnit fields)."""

from __future__ import annotations

from typing import Any

from ctxkit.formats.common import Source
from ctxkit.model import Transcript, Unit

NAME = "units"
EXTENSION = ".jsonl"  # what `simulate` names its files

# Keys only ctxkit unit records carry; `type`+`content`+`id` alone also identify one.
_MARKERS = ("priorityTag", "tokenCount", "relevanceScore")
_INTERNAL_META = ("group_size",)


def detect(obj: Any) -> bool:
    """Records with `priorityTag`/`tokenCount`, or with `id`, `type` and `content`."""
    records = obj if isinstance(obj, list) else [obj]
    seen = 0
    for rec in records[:50]:
        if not isinstance(rec, dict):
            return False
        if any(k in rec for k in _MARKERS) or (
            "id" in rec and "type" in rec and "content" in rec and "message" not in rec and "payload" not in rec
        ):
            seen += 1
        else:
            return False
    return seen > 0


def _unit(rec: Any, index: int, src: Source) -> Unit | None:
    if not isinstance(rec, dict) or "id" not in rec:
        src.bad(index, "expected a ctxkit unit object with an `id`", rec)
        return None
    try:
        unit = Unit.from_dict(rec)
    except (TypeError, ValueError) as exc:
        src.bad(index, f"not a valid unit: {exc}", rec)
        return None
    for key in _INTERNAL_META:
        unit.meta.pop(key, None)
    unit.raw = rec
    unit.group = index
    return unit


def read(records: list[Any], src: Source) -> Transcript:
    """Units as written by ctxkit; the stated `type` is kept (no classification)."""
    units = [u for i, rec in enumerate(records) if (u := _unit(rec, i, src)) is not None]
    return Transcript(units=units, id=src.tid, source_format=NAME, layout="lines", line=src.line)


def read_transcript(obj: dict[str, Any], src: Source) -> Transcript:
    """One dataset line written by `transcript_record` (several transcripts in units format)."""
    records = obj.get("units") or []
    units = [u for i, rec in enumerate(records) if (u := _unit(rec, i, src)) is not None]
    return Transcript(
        units=units,
        id=str(obj.get("id") or src.tid),
        source_format=NAME,
        layout="dataset",
        tools=list(obj.get("tools") or []),
        envelope=dict(obj.get("envelope") or {}),
        line=src.line,
        metadata=dict(obj.get("metadata") or {}),
    )


def _record(u: Unit, same: bool) -> dict[str, Any]:
    if same and isinstance(u.raw, dict):
        return u.raw
    d = u.to_dict()
    meta = d.get("meta")
    if meta and any(k in meta for k in _INTERNAL_META):
        meta = {k: v for k, v in meta.items() if k not in _INTERNAL_META}
        if meta:
            d["meta"] = meta
        else:
            del d["meta"]
    return d


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """One unit record per unit (raw when the unit came untouched from a units file)."""
    same = t.source_format == NAME
    return [_record(u, same) for u in t.units], {}


def transcript_record(t: Transcript) -> dict[str, Any]:
    """A whole transcript as one line, for writing several transcripts in units format."""
    return {
        "id": t.id,
        "source_format": t.source_format,
        "layout": "dataset",
        "tools": t.tools,
        "envelope": t.envelope,
        "metadata": t.metadata,
        "units": write(t)[0],
    }
