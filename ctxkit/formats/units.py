"""ctxkit's own JSONL: one `Unit.to_dict()` per line (the seed spec's ContextUnit fields)."""

from __future__ import annotations

from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, parsed
from ctxkit.formats.common import Source
from ctxkit.model import ROLES, TYPES, Transcript, Unit

NAME = "units"
EXTENSION = ".jsonl"  # what `simulate` names its files

# Keys only ctxkit unit records carry; `type`+`content`+`id` alone also identify one.
_MARKERS = ("priorityTag", "tokenCount", "relevanceScore")
_INTERNAL_META = ("group_size",)


def is_unit(rec: Any) -> bool:
    """A units record: the seed spec's `priorityTag`/`tokenCount`/`relevanceScore`, or an `id`, a
    unit `type` and text `content` (and a unit `role` when it has one)."""
    if not isinstance(rec, dict):
        return False
    if any(k in rec for k in _MARKERS):
        return True
    return (
        "id" in rec
        and rec.get("type") in TYPES
        and isinstance(rec.get("content"), str)
        and rec.get("role", "user") in ROLES
        and "message" not in rec
        and "payload" not in rec
    )


def detect(records: list[Any]) -> bool:
    """Every one of the first 50 records is a units record (see `is_unit`)."""
    return bool(records) and all(is_unit(rec) for rec in records[:50])


def detect_object(obj: dict[str, Any]) -> bool:
    """A dataset line written by `transcript_record`: `units` beside `source_format`."""
    return isinstance(obj.get("units"), list) and "source_format" in obj and "messages" not in obj


def _unit(rec: Any, index: int, src: Source) -> Unit | None:
    if not isinstance(rec, dict) or "id" not in rec:
        src.bad(index, "expected a ctxkit unit object with an `id`", rec)
        return None
    if not is_unit(rec):
        found = f"type {rec.get('type')!r}" if rec.get("type") not in TYPES else f"role {rec.get('role')!r}"
        if not isinstance(rec.get("content"), str):
            found = "no text `content`"
        src.bad(index, f"not a ctxkit unit: {found} (a unit has an `id`, a `type` of {', '.join(TYPES)}, "
                "text `content` and a `role` of " + ", ".join(ROLES) + ")", rec)
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


def _units(records: list[Any], src: Source) -> list[Unit]:
    """The records' units. An id is a unit's name for recall, expand and every check, so a
    repeated id is refused (or the repeat skipped with --skip-invalid), not read ambiguously."""
    units: list[Unit] = []
    first: dict[str, int] = {}
    for i, rec in enumerate(records):
        unit = _unit(rec, i, src)
        if unit is None:
            continue
        at = first.setdefault(unit.id, i)
        if at != i:
            where = src.line_of(at) if src.lines is not None else None
            earlier = f"line {where}" if where else f"record {at + 1}"
            src.bad(i, f"unit id {unit.id!r} is already used by {earlier}; "
                    "ids must be unique within a transcript", rec)
            continue
        units.append(unit)
    return units


def read(records: list[Any], src: Source) -> Transcript:
    """Units as written by ctxkit; the stated `type` is kept (no classification)."""
    units = _units(records, src)
    return Transcript(units=units, id=src.tid, source_format=NAME, layout="lines", line=src.line)


def read_transcript(obj: dict[str, Any], src: Source) -> Transcript:
    """One dataset line written by `transcript_record` (several transcripts in units format)."""
    units = _units(obj.get("units") or [], src)
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


# ---------------------------------------------------------------- validating


def validate(data: Any) -> list[str]:
    """Every record a unit (`is_unit`) that ctxkit reads back, every tool result answering a
    call made before it; each transcript of a dataset (`transcript_record` lines) likewise."""
    found = parsed(data)
    items = found if isinstance(found, list) else [found]
    if items and all(isinstance(x, dict) and detect_object(x) for x in items):
        transcripts = [(f"transcript {n + 1}: " if len(items) > 1 else "", x["units"]) for n, x in enumerate(items)]
    else:
        transcripts = [("", items)]
    out: list[str] = []
    for where, records in transcripts:
        calls: set[str] = set()
        for i, rec in enumerate(records):
            at = f"{where}unit {i + 1}"
            if not is_unit(rec):
                out.append(f"{at}: not a units record")
                continue
            try:
                unit = Unit.from_dict(rec)
            except (TypeError, ValueError, KeyError) as exc:
                out.append(f"{at}: {exc}")
                continue
            calls.update(c.id for c in unit.tool_calls)
            if unit.role == "tool" and unit.tool_call_id is not None and unit.tool_call_id not in calls:
                out.append(f"{at}: tool result {unit.tool_call_id} answers no call before it")
    return out[:MAX_PROBLEMS]


FORMAT = Format.of_module(__name__, label="ctxkit units", shape="messages",
                          read_object=read_transcript, write_object=transcript_record,
                          item_key="units", lines=True, strict=True)
