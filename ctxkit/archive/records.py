"""Units and transcripts as the archive stores them: their records (each unit with its source
record and group), packed (`archive.packing`) or as JSON text (layout 1), and a stored unit's row
read back as an `ArchivedUnit`, checked column by column."""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass, field
from typing import Any

from ctxkit.archive import packing
from ctxkit.errors import ArchiveError
from ctxkit.model import Transcript, Unit
from ctxkit.refs import long_ref


@dataclass(frozen=True)
class Rows:
    """One transcript's rows in an archive, packed (`Archive.rows_of`): its original's (record,
    units, last request, created), its archived units' rows and the texts they name."""

    transcript: tuple[Any, ...]
    units: builtins.list[tuple[Any, ...]]
    texts: builtins.list[tuple[bytes, bytes]]

    def archived(self, original: Transcript) -> builtins.list[tuple[str, Unit, str, int | None]]:
        """(ref, unit, summary, tokens) of each archived unit: the original's own where the
        row names its position, else its record unpacked."""
        texts = dict(self.texts)
        out = []
        for _scope, ref, _uid, _kind, _tool, summary, _digest, position, record, tokens, *_ in self.units:
            if position is not None:
                unit = original.units[position]
            else:
                unit = unit_from_record(
                    packing.unpack(record, lambda key: packing.unpack_text(texts[key]))
                )
            out.append((ref, unit, summary, tokens))
        return out


def unit_record(unit: Unit) -> dict[str, Any]:
    """The unit whole, as a record: its `units` fields plus its source record and group."""
    d = unit.to_dict()
    d["raw"] = unit.raw
    d["group"] = unit.group
    if unit.source is not None and unit.source is not unit.raw and unit.source != unit.raw:
        d["source"] = unit.source
    return d


def unit_to_json(unit: Unit) -> str:
    """The unit whole: its `units` record plus the source record and group, as JSON text."""
    return json.dumps(unit_record(unit), ensure_ascii=False)


def unit_from_json(text: str) -> Unit:
    """Inverse of `unit_to_json`."""
    return unit_from_record(json.loads(text))


def unit_from_record(d: dict[str, Any]) -> Unit:
    """Inverse of `unit_record`."""
    unit = Unit.from_dict(d)
    unit.raw = d.get("raw")
    unit.group = d.get("group")
    unit.source = d.get("source", unit.raw)
    return unit


def transcript_to_json(t: Transcript) -> str:
    """The transcript whole, every unit with its source record, so it can be written back exactly.

    The token cache is left out unless the source is ctxkit's `units` format, whose records
    carry `tokenCount`: elsewhere it is a count made on the way, not part of the original.
    """
    units = []
    for u in t.units:
        d = unit_record(u)
        if t.source_format != "units":
            d["tokenCount"] = None
        units.append(d)
    d = t.to_dict()
    d["units"] = units
    d["path"] = t.path
    d["line"] = t.line
    return json.dumps(d, ensure_ascii=False)


def transcript_from_json(text: str) -> Transcript:
    """Inverse of `transcript_to_json`."""
    d = json.loads(text)
    t = Transcript.from_dict(d)
    for unit, ud in zip(t.units, d.get("units", []), strict=True):
        unit.raw = ud.get("raw")
        unit.group = ud.get("group")
        unit.source = ud.get("source", unit.raw)  # an app-log writer rebuilds from it
    t.path = d.get("path")
    t.line = d.get("line")
    return t


def _transcript_unit_record(t: Transcript, u: Unit) -> dict[str, Any]:
    d = unit_record(u)
    if t.source_format != "units":
        d["tokenCount"] = None  # see transcript_to_json
    return d


def _keyed_record(unit: Unit) -> dict[str, Any]:
    """A unit's stored record as a comparison sees it: the token count left out."""
    return packing.stored({**unit_record(unit), "tokenCount": None})


def same_record(a: Unit, b: Unit) -> bool:
    """True when the two units store as the same record, their token counts aside."""
    return a is b or packing.unit_json(_keyed_record(a))[0] == packing.unit_json(_keyed_record(b))[0]


def pack_transcript(t: Transcript) -> tuple[bytes, dict[bytes, str]]:
    """The transcript whole as the archive stores it (`archive.packing`) and the long texts its
    record names by digest: what `transcript_to_json` holds, packed."""
    header = {
        "id": t.id,
        "source_format": t.source_format,
        "layout": t.layout,
        "tools": t.tools,
        "envelope": t.envelope,
        "metadata": t.metadata,
        "path": t.path,
        "line": t.line,
    }
    moved: dict[bytes, str] = {}
    tools = packing.dumps(t.tools)[0] if t.tools else b""
    if len(tools) >= packing.SHARED_MIN_CHARS and not packing.holds_nul_string(tools):
        # the same schemas in every conversation of a dataset: stored once, apart
        text = tools.decode("utf-8", "surrogatepass")
        header["tools"] = "\x00" + packing.digest(text).hex()
        moved[packing.digest(text)] = text
    head = packing.dumps(header)[0]
    records = [packing.stored(_transcript_unit_record(t, u)) for u in t.units]
    units: bytes | None = None
    # a marker must be the only kind of string that starts with NUL anywhere in the record
    if head.count(b'"\\u0000') == len(moved):  # no string but the tools' marker starts with NUL
        units, used = packing.records_json(records)
        if units is not None:
            moved.update(used)
    if units is None:
        header["tools"] = t.tools
        head = packing.dumps(header)[0]
        units = b"[" + b",".join(packing.dumps(record)[0] for record in records) + b"]"
        moved = {}
    body = b'{"t":' + head + b',"u":' + units + b"}"
    return packing.pack(body, marked=bool(moved)), moved


def unpack_transcript(blob: bytes, text_of: Any) -> Transcript:
    """Inverse of `pack_transcript` (`text_of(digest)` gives a stored text)."""
    d = packing.unpack(blob, text_of)
    head = d["t"]
    if isinstance(head.get("tools"), str):  # stored apart, as JSON text
        head["tools"] = packing.loads(head["tools"].encode("utf-8", "surrogatepass"))
    t = Transcript.from_dict({**head, "units": []})
    t.units = [unit_from_record(r) for r in d["u"]]
    t.path = head.get("path")
    t.line = head.get("line")
    return t


def unit_text(unit: Unit) -> str:
    """What `recall` shows of a unit: its content, then one line per tool call it makes."""
    parts = [unit.content] if unit.content else []
    for call in unit.tool_calls:
        parts.append(f"[tool call {call.id}: {call.name} {call.arguments}]".rstrip())
    return "\n".join(parts)


@dataclass
class ArchivedUnit:
    """One row of the archive: a unit stored whole, with what recall needs to find and show it."""

    ref: str
    transcript_id: str
    unit_id: str
    type: str
    tool_name: str | None
    summary: str
    content: str
    tokens: int | None
    created: str
    last_accessed: str | None
    access_count: int
    unit_json: str = field(default="", repr=False)  # layout 1: the record, less its content
    record: dict[str, Any] | None = field(default=None, repr=False)  # layout 2: the record
    source: str = field(default="", repr=False, compare=False)  # the archive file, for errors

    @property
    def long_ref(self) -> str:
        return long_ref(self.transcript_id, self.unit_id)

    def unit(self) -> Unit:
        """The archived unit, with its source record restored; a row that does not make one
        (changed outside ctxkit) is an `ArchiveError` naming the archive and the ref."""
        try:
            d = dict(self.record) if self.record is not None else json.loads(self.unit_json)
            if not isinstance(d, dict):
                raise TypeError(f"a JSON {type(d).__name__}, not an object")
            d.setdefault("content", self.content)  # layout 1 stored it once, in its own column
            return unit_from_record(d)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise damaged_row(self.source, f"archived unit {self.ref}", exc) from None

    def text(self) -> str:
        """The unit's content and tool calls, as recall shows them."""
        return unit_text(self.unit())

    def info(self) -> dict[str, Any]:
        """What `recall --list --format jsonl` and the search tool say of the unit, without it."""
        return {
            "ref": self.ref,
            "long_ref": self.long_ref,
            "transcript_id": self.transcript_id,
            "unit_id": self.unit_id,
            "type": self.type,
            "tool_name": self.tool_name,
            "summary": self.summary,
            "tokens": self.tokens,
            "chars": len(self.content),
            "lines": self.content.count("\n") + 1 if self.content else 0,
            "created": self.created,
            "last_accessed": self.last_accessed,
            "access_count": self.access_count,
        }


COLUMNS = (
    "ref, transcript_id, unit_id, type, tool_name, summary, content, tokens, created, "
    "last_accessed, access_count, unit_json"
)


# what each column of `COLUMNS` must hold: a row is checked where it becomes an ArchivedUnit
_COLUMN_TYPES: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("ref", (str,)),
    ("transcript_id", (str,)),
    ("unit_id", (str,)),
    ("type", (str,)),
    ("tool_name", (str, type(None))),
    ("summary", (str,)),
    ("content", (str,)),
    ("tokens", (int, type(None))),
    ("created", (str,)),
    ("last_accessed", (str, type(None))),
    ("access_count", (int,)),
    ("unit_json", (str,)),
)


# the same for a row of layout 2 (`COLUMNS_2`): the record packed, or named by its position
COLUMN_TYPES_2: tuple[tuple[str, tuple[type, ...]], ...] = (
    *_COLUMN_TYPES[:6],
    ("content_digest", (bytes,)),
    ("position", (int, type(None))),
    ("record", (bytes, type(None))),
    *_COLUMN_TYPES[7:11],
)


def archived_unit(row: tuple[Any, ...], source: str) -> ArchivedUnit:
    """A row of `units` as an ArchivedUnit, or an `ArchiveError` that names the damaged column."""
    check_columns(row, _COLUMN_TYPES, source)
    item = ArchivedUnit(*row)
    item.source = source
    return item


def check_columns(row: tuple[Any, ...], types: tuple[tuple[str, tuple[type, ...]], ...], source: str) -> None:
    """An `ArchiveError` naming the first column of `row` that does not hold what `types` says."""
    ref = row[0] if isinstance(row[0], str) else "(a row without a text ref)"
    for (name, kinds), value in zip(types, row, strict=True):
        if bytes in kinds and isinstance(value, bytes):
            continue
        if not isinstance(value, kinds) or isinstance(value, bool):
            what = "binary data" if isinstance(value, bytes) else type(value).__name__
            raise ArchiveError(
                f"{source}: archived unit {ref} is damaged: its {name} is {what}, not "
                f"{' or '.join('NULL' if k is type(None) else _SQL_TYPES[k] for k in kinds)} "
                "(was the archive changed outside ctxkit?)"
            )


_SQL_TYPES = {str: "text", int: "an integer", bytes: "a blob"}


def damaged_row(source: str, what: str, exc: BaseException) -> ArchiveError:
    """The error for a stored record that does not read back: names the archive and the record."""
    reason = str(exc).split("\n", 1)[0][:120] or type(exc).__name__
    if isinstance(exc, json.JSONDecodeError):
        reason = f"not valid JSON ({exc.msg} at character {exc.pos})"
    return ArchiveError(
        f"{source or 'archive'}: {what} is damaged: {reason} (was the archive changed outside "
        "ctxkit?)"
    )


COLUMNS_2 = (
    "ref, transcript_id, unit_id, type, tool_name, summary, content_digest, position, record, "
    "tokens, created, last_accessed, access_count"
)
