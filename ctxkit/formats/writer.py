"""Writing transcripts: each in its own format (or `--to`), in the layout its source had.

A format's `write` gives its records (or its object, or its text); this module lays them out:
one JSON document or one record per line, a conversation object with its envelope, a dataset of
conversations. It names no format: the layout follows the format's shape (see `formats.base`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from itertools import chain
from typing import IO, Any

from ctxkit.atomic import atomic_writer
from ctxkit.errors import InputError, unknown_name
from ctxkit.formats import parquet
from ctxkit.formats.common import dumps
from ctxkit.formats.registry import FORMATS
from ctxkit.model import Transcript

__all__ = [
    "MAX_RECORD_DEPTH",
    "check_depth",
    "dataset_item",
    "json_depth",
    "output_format_for",
    "write_path",
    "write_transcripts",
]

# ---------------------------------------------------------------- writing

# orjson writes at most 254 levels; a record sits inside a conversation object and its list.
MAX_RECORD_DEPTH = 240


def json_depth(obj: Any, stop: int | None = None) -> int:
    """How deeply lists and dicts nest in `obj` (a scalar is 0), counting no further than `stop`.

    Level by level, without recursion, so a record of 100,000 `[` cannot overflow the stack."""
    level = [obj] if isinstance(obj, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if stop is not None and depth >= stop:
            return depth
        nxt: list[Any] = []
        for o in level:
            for v in o.values() if isinstance(o, dict) else o:
                if isinstance(v, dict | list):
                    nxt.append(v)
        level = nxt
    return depth


def check_depth(t: Transcript) -> Transcript:
    """`t`, refused (before anything is archived) when a record nests deeper than a JSON writer
    goes."""
    for u in t.units:
        depth = json_depth(u.raw, MAX_RECORD_DEPTH + 1)
        if depth > MAX_RECORD_DEPTH:
            raise InputError(
                t.path,
                None,
                f"transcript {t.id}, unit {u.id}: JSON nested more than {MAX_RECORD_DEPTH} "
                "levels deep, which cannot be written back; flatten that record",
            )
    return t


def output_format_for(t: Transcript, fmt: str | None) -> str:
    """The format a transcript is written in: `fmt`, else its source format if writable, else units."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise unknown_name("output format", fmt, FORMATS)
        return fmt
    return t.source_format if t.source_format in FORMATS else "units"


def _dump(obj: Any, *, indent: bool = False) -> str:
    return dumps(obj, indent=indent)


def _conversation(t: Transcript, fmt: str, records: list[Any], extras: dict[str, Any]) -> dict[str, Any]:
    """A conversation object: envelope, messages and extras, in the source's key order."""
    own = FORMATS[fmt]
    fields = dict(t.envelope) if t.source_format == fmt or own.shape != "log" else {}
    held = t.metadata.get("records_key") if t.source_format == fmt else None  # reader.RECORDS_KEY
    fields[held if held in own.also_keys else own.key] = records
    fields.update(extras)
    order = t.metadata.get("key_order") if t.source_format == fmt else None
    if not order:
        return fields
    obj = {k: fields.pop(k) for k in order if k in fields}
    obj.update(fields)
    return obj


def _layout(t: Transcript, fmt: str, extras: dict[str, Any]) -> str:
    """How a transcript is laid out in `fmt`: a log is records, one per line (and so is a format
    whose records always are, units); records that are never bare go in a conversation object;
    chat messages keep the source's layout when it had messages, and become a request-shaped
    object when a system prompt or tools must sit beside them."""
    own = FORMATS[fmt]
    if own.shape == "log":
        return "lines"
    layout = t.layout
    if layout == "dataset":
        return layout
    if own.lines:
        return "lines"
    if own.array:
        return "array"
    if not own.bare:
        return "object"
    source = FORMATS.get(t.source_format)
    if source is not None and (source.shape != "messages" or not source.bare):
        return "object"  # the source's records were no messages
    if layout in ("array", "lines") and (extras or t.envelope):
        return "object"
    return layout


def _write_one(t: Transcript, out: IO[str], fmt: str) -> None:
    own = FORMATS[fmt]
    if own.shape == "text":
        out.write(own.write(t))
        return
    if own.shape == "object":
        out.write(_dump(own.write(t), indent=t.layout != "dataset"))
        if not (t.source_format == fmt and t.metadata.get("eof_newline") is False):
            out.write("\n")
        return
    records, extras = own.write(t)
    layout = _layout(t, fmt, extras)
    if layout == "array":
        out.write(_dump(records, indent=True))
        out.write("\n")
    elif layout == "lines":
        for rec in records:
            out.write(_dump(rec))
            out.write("\n")
    else:
        obj = _conversation(t, fmt, records, extras)
        if layout == "dataset":
            out.write(_dump(obj))
        else:
            out.write(_dump(obj, indent=True))
        out.write("\n")


def dataset_item(t: Transcript, fmt: str | None = None) -> Any:
    """One conversation of a dataset in `fmt` (default: its own format, else units), as the
    object a dataset line (or row) holds (a text format: the session's text)."""
    fmt = output_format_for(t, fmt)
    own = FORMATS[fmt]
    if own.write_object is not None:
        return own.write_object(t)
    if own.shape in ("object", "text"):
        return own.write(t)
    return _conversation(t, fmt, *own.write(t))


def write_transcripts(transcripts: Iterable[Transcript], out: IO[str], fmt: str | None = None) -> None:
    """Write transcripts: one in its own layout; several (a dataset) as the dataset was, a JSON
    array of conversations (one per line inside it) or one conversation per line. An app log's
    records are written one per line, one session after the other."""
    it = iter(transcripts)
    first = next(it, None)
    if first is None:
        return
    second = next(it, None)
    if second is None and first.layout != "dataset":
        _write_one(first, out, output_format_for(first, fmt))
        return
    rest = chain([first], [second] if second is not None else [], it)
    if FORMATS[output_format_for(first, fmt)].shape in ("log", "text"):
        for t in rest:
            _write_one(t, out, output_format_for(t, fmt))
        return
    if first.metadata.get("dataset_layout") != "array":
        for t in rest:
            out.write(_dump(dataset_item(t, fmt)))
            out.write("\n")
        return
    # A JSON array, written as it streams: each conversation indented inside the brackets.
    out.write("[")
    sep = "\n"
    for t in rest:
        item = _dump(dataset_item(t, fmt), indent=True)
        out.write(sep)
        out.write("\n".join("  " + line for line in item.split("\n")))
        sep = ",\n"
    out.write("\n]\n")


def write_path(transcripts: Iterable[Transcript], path: str, fmt: str | None = None) -> None:
    """Write to a file atomically (temp file in the same directory, then rename); "-" = stdout.
    A `.parquet` path gets a Parquet dataset, one conversation per row (`formats.parquet`)."""
    if path.endswith(parquet.SUFFIX):
        parquet.write_parquet(transcripts, path, fmt)
        return
    if path == "-":
        write_transcripts(transcripts, sys.stdout, fmt)
        sys.stdout.flush()
        return
    with atomic_writer(path) as out:
        write_transcripts(transcripts, out, fmt)
