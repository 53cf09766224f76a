"""The archive: everything compaction removes or shortens, stored whole in one SQLite file.

Each archived unit gets a short ref, `ref-` and 18 decimal digits of a SHA-256 over the
transcript's content, the unit id and the unit's content (so the same input always gives the same
ref, whatever file it was read from), and a long form
`ctx://<transcript>/<unit>`. Either may end with a location: `:L50-100` (lines 50 to 100),
`:L7` (one line) or `:match-3` (the third match of a search pattern). Placeholders left in a
compacted transcript carry the ref; `ctxkit recall REF` reads the unit back.

The archive also keeps each original transcript whole (units with their source records,
layout, envelope, tool schemas), which is what `ctxkit expand` restores.

Records are stored packed (`archive.packing`): compact JSON, compressed, and each long text
once, in the `texts` table, named by its digest wherever it occurs (an archived unit and the
original it came from share it). That is layout 3 (`SCHEMA_VERSION`): layout 2's tables,
Zstandard where layout 2 used zlib. A layout-2 archive is read as it is, and takes zstd rows
beside its zlib ones from its first write (only its version changes). An archive of layout 1
(plain JSON text, before ctxkit 0.2) is read as it is, and rewritten in place, in one
transaction, at its first write; one of a later layout is refused.

Example (":memory:" here; a path such as "small.json.ctx.db" for a file):
    >>> from ctxkit.archive.store import Archive
    >>> from ctxkit.model import Unit
    >>> log = "\\n".join(f"line {i}" for i in range(1, 41))
    >>> unit = Unit("r1", "tool", "log", log, tool_call_id="c1", name="bash")
    >>> with Archive(":memory:") as archive:
    ...     ref = archive.put("t0", unit)
    ...     print(ref.startswith("ref-"), archive.recall(ref, lines=(2, 3)).splitlines())
    True ['line 2', 'line 3']

The journal is SQLite's default rollback journal (not WAL), so an archive is one file that can
be copied or moved. Writes gather in one transaction that `commit()` or `close()` ends, so a
compaction's units are stored together or not at all. A run that fails rolls its writes back
(`abort()`, or leaving the `with` block on an exception): the archive stays as it was before.
A new archive file is created 0600 (it holds whole transcripts). Writers take the lock when
they first write (BEGIN IMMEDIATE) and wait up to `BUSY_TIMEOUT_S` for another writer instead of
failing with "database is locked". `created`, `last_accessed` and
`access_count` live only in the database: they never reach compacted output, which stays
byte-identical for the same input.
"""

from __future__ import annotations

import builtins
import copy
import functools
import hashlib
import json
import os
import re
import sqlite3
import stat
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from ctxkit.archive import packing
from ctxkit.archive.patterns import SEARCH_TIMEOUT_S, Pattern
from ctxkit.archive.refs import (  # noqa: F401 - re-exported: their home before refs.py
    DEFAULT_STDOUT_ARCHIVE,
    REFS_IN_TEXT,
    default_archive_path,
    first_compacted,
)
from ctxkit.errors import ArchiveError
from ctxkit.model import Transcript, Unit
from ctxkit.report.tables import counted

if TYPE_CHECKING:
    from ctxkit.tokens import Tokenizer

SCHEMA_VERSION = "3"
FORMAT_NAME = "ctxkit-archive"
SEARCH_CONTEXT_LINES = 2
SNIPPET_CHARS = 160  # a search hit's line, around the match
# Decimal digits, not hex: tokenizers split digit runs into fixed groups of three, so every ref
# costs the same number of tokens and a placeholder's size never depends on the digest (hex
# refs cost 4 to 10 tokens each, so the output changed with the input's file name).
REF_DIGITS = 18  # ~60 bits: one clash in ~10^9 units at 71k units a dataset; clashes extend
REF_DIGITS_MAX = 72
REF_PROBE = "ref-" + "0" * REF_DIGITS  # sizes a placeholder before its ref is known
BUSY_TIMEOUT_S = 600.0  # another writer holds the archive: wait (a run commits once, at its end)
ACCESS_TIMEOUT_S = 1.0  # but a recall does not wait that long just to count an access

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ctxkit_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS texts (
    digest BLOB PRIMARY KEY,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS units (
    ref TEXT PRIMARY KEY,
    scope TEXT,
    transcript_id TEXT NOT NULL,
    unit_id TEXT NOT NULL,
    type TEXT NOT NULL,
    tool_name TEXT,
    summary TEXT NOT NULL DEFAULT '',
    content_digest BLOB NOT NULL,
    position INTEGER,
    record BLOB,
    tokens INTEGER,
    created TEXT NOT NULL,
    last_accessed TEXT,
    access_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS units_by_transcript ON units (transcript_id, unit_id);
CREATE TABLE IF NOT EXISTS transcripts (
    transcript_id TEXT PRIMARY KEY,
    record BLOB NOT NULL,
    units INTEGER NOT NULL,
    last_request TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS transcripts_by_last_request ON transcripts (last_request);
"""


# 8 hex digits in archives written before refs became decimal; 18 or more decimal digits since
SHORT_REF = re.compile(r"ref-[0-9a-f]{8,80}")
_LOCATION = re.compile(r":(?:L(?P<a>\d+)(?:-(?P<b>\d+))?|match-(?P<m>\d+))$")
_LONG_PREFIX = "ctx://"
_REFS_IN_TEXT = REFS_IN_TEXT  # public: datasets number refs for training text


def make_ref(scope: str, unit_id: str, content: str, digits: int = REF_DIGITS) -> str:
    """The short ref of a unit: `ref-` and `digits` decimal digits of a SHA-256 over its scope
    (see `ref_scope`), id and content.

    Example: `make_ref(ref_scope(t), "m3", "ls -la")` gives `ref-` and 18 digits. A longer
    `digits` gives a ref that ends with the shorter one: the archive extends a ref that clashes.
    """
    return f"ref-{_ref_number(scope, unit_id, content) % 10**digits:0{digits}d}"


@functools.lru_cache(maxsize=1 << 16)
def _ref_number(scope: str, unit_id: str, content: str) -> int:
    # a compaction asks for the ref of the same unit once per step (and its summary's binary
    # search once per probe): the digest is made once
    digest = hashlib.sha256("\x1f".join((scope, unit_id, content)).encode("utf-8", "surrogatepass"))
    return int.from_bytes(digest.digest(), "big")  # the hex digits' number, read faster


def ref_scope(t: Transcript) -> str:
    """What a transcript's refs are made from: a digest of its content, not of its name.

    The id comes from the file name (`t.json` -> `t`), so a ref made from it would make the
    output depend on the name. Two transcripts alike in everything (messages, source records,
    envelope, tools) but their names share refs, and the archived units too.
    """
    doc = t.replace(units=[]).to_dict()  # the units' records are made below
    doc.pop("id", None)
    for u in t.units:
        d = _unit_record(u)
        d["tokenCount"] = None  # a count made on the way, not part of the message
        doc["units"].append(d)
    # orjson's sorted JSON (`packing.canonical`): the standard library's took a third of a
    # compaction of a real log, whose source records are four times its text
    return hashlib.sha256(packing.canonical(doc)).hexdigest()[:32]


def long_ref(transcript_id: str, unit_id: str) -> str:
    """The long ref `ctx://<transcript>/<unit>` (each part percent-encoded when it holds / or :)."""
    return f"{_LONG_PREFIX}{quote(transcript_id, safe='')}/{quote(unit_id, safe='')}"


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
                unit = _unit_from_record(
                    packing.unpack(record, lambda key: packing.unpack_text(texts[key]))
                )
            out.append((ref, unit, summary, tokens))
        return out


@dataclass(frozen=True)
class Location:
    """Where inside a unit a ref points: a line range or the Nth search match."""

    lines: tuple[int, int] | None = None
    match: int | None = None


def parse_ref(ref: str) -> tuple[str, Location]:
    """Split `ref-123456789012345678:L5-9` or `ctx://t/u:match-2` into the bare ref and its location."""
    text = ref.strip()
    m = _LOCATION.search(text)
    if m is None:
        return text, Location()
    bare = text[: m.start()]
    if m.group("m") is not None:
        return bare, Location(match=int(m.group("m")))
    a = int(m.group("a"))
    b = int(m.group("b")) if m.group("b") is not None else a
    return bare, Location(lines=(a, b))


def _unit_record(unit: Unit) -> dict[str, Any]:
    d = unit.to_dict()
    d["raw"] = unit.raw
    d["group"] = unit.group
    if unit.source is not None and unit.source is not unit.raw and unit.source != unit.raw:
        d["source"] = unit.source
    return d


def unit_to_json(unit: Unit) -> str:
    """The unit whole: its `units` record plus the source record and group, as JSON text."""
    return json.dumps(_unit_record(unit), ensure_ascii=False)


def unit_from_json(text: str) -> Unit:
    """Inverse of `unit_to_json`."""
    return _unit_from_record(json.loads(text))


def _unit_from_record(d: dict[str, Any]) -> Unit:
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
        d = _unit_record(u)
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
    d = _unit_record(u)
    if t.source_format != "units":
        d["tokenCount"] = None  # see transcript_to_json
    return d


def _keyed_record(unit: Unit) -> dict[str, Any]:
    """A unit's stored record as a comparison sees it: the token count left out."""
    return packing.stored({**_unit_record(unit), "tokenCount": None})


def _same_record(a: Unit, b: Unit) -> bool:
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
    t = Transcript(
        units=[_unit_from_record(r) for r in d["u"]],
        id=str(head.get("id", "t0")),
        source_format=str(head.get("source_format", "units")),
        layout=str(head.get("layout", "lines")),
        tools=list(head.get("tools") or []),
        envelope=dict(head.get("envelope") or {}),
        metadata=dict(head.get("metadata") or {}),
    )
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
            return _unit_from_record(d)
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


_COLUMNS = (
    "ref, transcript_id, unit_id, type, tool_name, summary, content, tokens, created, "
    "last_accessed, access_count, unit_json"
)


# what each column of `_COLUMNS` must hold: a row is checked where it becomes an ArchivedUnit
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


# the same for a row of layout 2 (`_COLUMNS_2`): the record packed, or named by its position
_COLUMN_TYPES_2: tuple[tuple[str, tuple[type, ...]], ...] = (
    *_COLUMN_TYPES[:6],
    ("content_digest", (bytes,)),
    ("position", (int, type(None))),
    ("record", (bytes, type(None))),
    *_COLUMN_TYPES[7:11],
)


def _row(row: tuple[Any, ...], source: str) -> ArchivedUnit:
    """A row of `units` as an ArchivedUnit, or an `ArchiveError` that names the damaged column."""
    _check_columns(row, _COLUMN_TYPES, source)
    item = ArchivedUnit(*row)
    item.source = source
    return item


def _check_columns(row: tuple[Any, ...], types: tuple[tuple[str, tuple[type, ...]], ...], source: str) -> None:
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


_COLUMNS_2 = (
    "ref, transcript_id, unit_id, type, tool_name, summary, content_digest, position, record, "
    "tokens, created, last_accessed, access_count"
)


_CLOCK: list[Any] = [None, ""]  # (the second, its ISO text): a run stores many rows in one


_INSERT_TRANSCRIPT = (
    "INSERT INTO transcripts (transcript_id, record, units, last_request, created) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (transcript_id) DO UPDATE SET "
    "record = excluded.record, units = excluded.units, "
    "last_request = excluded.last_request, created = excluded.created"
)
_INSERT_UNIT = (
    f"INSERT INTO units (scope, {_COLUMNS_2}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _now() -> str:
    second = int(time.time())
    if second != _CLOCK[0]:
        _CLOCK[:] = [second, datetime.fromtimestamp(second, timezone.utc).isoformat(timespec="seconds")]
    return str(_CLOCK[1])


class Archive:
    """An SQLite archive of removed units and original transcripts; a context manager."""

    def __init__(self, path: str, *, readonly: bool = False, create: bool = True) -> None:
        self.path = path
        self.readonly = readonly
        # This object made the file: a run that fails before storing anything removes it again.
        self.created = False
        self.layout = int(SCHEMA_VERSION)  # of the file: 1 for an old archive read as it is
        self._stored_texts: set[bytes] = set()  # digests known to be in `texts`
        # unit id -> (position, unit) of each original stored by this Archive, by key: an
        # archived unit equal to its original's is stored as a position in it
        self._originals: dict[str, dict[str, tuple[int, Unit]]] = {}
        self._decoded: dict[str, builtins.list[dict[str, Any]]] = {}  # the last originals read
        self._refs: dict[str, tuple[Any, ...]] = {}  # ref -> (scope, unit id, content key) seen
        # (scope, unit id, content) -> its ref, for units found stored: a chain checks every
        # removed unit after every step, and a stored unit stays stored
        self._stored: dict[tuple[str, str, str], str] = {}
        # unit rows not yet in the database: they go in together, in one statement, before
        # anything reads it (`_conn`); a compaction archives hundreds of units, one at a time
        self._pending: builtins.list[tuple[Any, ...]] = []
        # every row of `units` is one this object wrote and remembers (`_refs`), so a ref it
        # does not know is free without asking: a private archive, or a new one under our lock
        self._rows_known = False
        self._db = self._open(path, readonly=readonly, create=create and not readonly)
        try:
            self._prepare()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise _db_error(path, exc) from None
        except BaseException:
            self._db.close()
            raise
        self._rows_known = path == ":memory:"  # made here, empty, and no one else's

    @property
    def _conn(self) -> sqlite3.Connection:
        """The database, with every unit row written so far in it."""
        if self._pending:
            self._flush()
        return self._db

    def _flush(self) -> None:
        rows, self._pending = self._pending, []
        try:
            self._db.executemany(_INSERT_UNIT, rows)
        except sqlite3.DatabaseError as exc:
            raise _db_error(self.path, exc) from None

    def _open(self, path: str, *, readonly: bool, create: bool) -> sqlite3.Connection:
        if path == ":memory:":
            return sqlite3.connect(path)  # a dry run: nothing touches the disk
        try:
            st: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            st = None
        except PermissionError:  # a folder on the way that this user may not enter
            raise ArchiveError(f"cannot read archive {path}: permission denied") from None
        except OSError as exc:
            raise ArchiveError(f"cannot open archive {path}: {_lower(exc)}") from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise ArchiveError(
                f"archive path {path} is a directory; give a file path (--archive PATH)"
            )
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise ArchiveError(
                f"{path} is not a ctxkit archive (it is a device or a pipe, not a file)"
            )
        if st is None:
            if not create:
                raise ArchiveError(
                    f"no archive at {path}: `ctxkit compact --archive {path}` writes one"
                )
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise ArchiveError(
                    f"cannot create archive {path}: the directory {parent} does not exist"
                )
            if not os.access(parent, os.W_OK):
                raise ArchiveError(
                    f"cannot create archive {path}: the directory {parent} is not writable"
                )
            try:
                self.created = _create_archive_file(path)
            except (OSError, sqlite3.Error) as exc:
                why = _lower(exc) if isinstance(exc, OSError) else str(exc)
                raise ArchiveError(f"cannot open archive {path}: {why}") from None
        elif not os.access(path, os.R_OK):
            raise ArchiveError(f"cannot read archive {path}: permission denied")
        elif not readonly and not os.access(path, os.W_OK):
            raise ArchiveError(
                f"archive {path} is read-only; choose a writable --archive PATH "
                "(recall reads it as it is)"
            )
        # never "rwc": a file that is gone by now is not made again, empty, by SQLite
        uri = f"file:{quote(os.path.abspath(path))}?mode={'ro' if readonly else 'rw'}"
        try:
            # IMMEDIATE: a writer takes the lock at its first write, so two writers queue up
            # (busy timeout) instead of deadlocking when both upgrade a read lock
            conn = sqlite3.connect(
                uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level="IMMEDIATE"
            )
        except sqlite3.Error as exc:
            raise ArchiveError(f"cannot open archive {path}: {_open_failure(path, exc)}") from None
        return conn

    def _prepare(self) -> None:
        conn = self._conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "ctxkit_meta" not in tables:
            raise ArchiveError(
                f"{self.path} is an SQLite database but not a ctxkit archive "
                f"(it has tables {', '.join(sorted(tables))}); choose another --archive PATH"
            )
        if not tables:
            if self.readonly or self.path != ":memory:":
                # An existing file is never made into an archive: it may be anything of the
                # user's (a new archive is created whole, by `_create_archive_file`).
                size = os.path.getsize(self.path) if self.path != ":memory:" else 0
                what = "it is empty" if size == 0 else f"its {size:,} bytes are not one"
                raise ArchiveError(
                    f"{self.path} is not a ctxkit archive ({what}); give the path of an "
                    "archive, or a new path for compact to create"
                )
            _write_schema(conn)
        elif not self.readonly and self._version() != 1 and not self._complete():
            # a file another writer is still making, or one without its meta rows: complete it
            # under the write lock (a layout-1 archive is rewritten at its first write instead)
            _write_schema(conn)
        fmt = conn.execute("SELECT value FROM ctxkit_meta WHERE key = 'format'").fetchone()
        if fmt is None or fmt[0] != FORMAT_NAME:
            raise ArchiveError(f"{self.path} is not a ctxkit archive")
        self.layout = self._version()
        if self.layout > int(SCHEMA_VERSION):
            raise ArchiveError(
                f"{self.path} was written by a newer ctxkit (archive layout {self.layout}; this "
                f"one reads layouts 1 to {SCHEMA_VERSION}): upgrade ctxkit to read it"
            )

    def _version(self) -> int:
        """The layout of the file: its schema_version, 1 for an archive from before it had one
        in this form, 0 for a new file."""
        conn = self._conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "ctxkit_meta" not in tables:
            return 0
        row = conn.execute("SELECT value FROM ctxkit_meta WHERE key = 'schema_version'").fetchone()
        try:
            return int(row[0]) if row is not None else 1
        except ValueError:
            raise ArchiveError(
                f"{self.path}: unknown archive schema version {row[0]!r}"
            ) from None

    def _has_scope_column(self) -> bool:
        return _has_scope_column(self._conn)
    def _complete(self) -> bool:
        """Whether the file is a whole archive of this layout (tables and meta rows)."""
        conn = self._conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"ctxkit_meta", "texts", "units", "transcripts"} <= tables:
            return False
        return self._version() >= 2  # layouts 2 and 3 have the same tables

    def _writable_layout(self) -> None:
        """Before a write: a layout-1 archive is rewritten in this layout (`_upgrade`), a
        layout-2 one marked as this layout (its zlib rows stay as they are), in the write
        transaction, under the lock (another writer may have done it meanwhile)."""
        if self.layout == int(SCHEMA_VERSION):
            return
        if self.readonly:
            raise ArchiveError(f"archive {self.path} was opened read-only")
        self.begin()
        try:
            if self._version() == 1:
                self._upgrade()
            elif self._version() == 2:
                self._conn.execute(
                    "UPDATE ctxkit_meta SET value = ? WHERE key = 'schema_version'",
                    (SCHEMA_VERSION,),
                )
        except sqlite3.DatabaseError as exc:
            raise _db_error(self.path, exc) from None
        self.layout = self._version()
        self._refs.clear()  # rows seen in layout 1 held the content, not its key
        self._stored.clear()

    def _upgrade(self) -> None:
        """Rewrite a layout-1 archive in this layout, inside the caller's write transaction: the
        same refs, units, originals and access counts, each text stored once, compressed."""
        conn = self._conn
        scoped = any(r[1] == "scope" for r in conn.execute("PRAGMA table_info(units)"))
        units = conn.execute(
            f"SELECT {'scope' if scoped else 'NULL'}, {_COLUMNS} FROM units ORDER BY rowid"
        ).fetchall()
        originals = conn.execute(
            "SELECT transcript_id, transcript_json, units, last_request, created FROM transcripts "
            "ORDER BY rowid"
        ).fetchall()
        conn.execute("DROP TABLE units")
        conn.execute("DROP TABLE transcripts")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        self.layout = int(SCHEMA_VERSION)
        for tid, text, count, last, created in originals:
            self._insert_transcript(transcript_from_json(text), tid, count, last, created)
        for scope, *row in units:
            item = ArchivedUnit(*row)
            self._insert_unit(
                item.ref,
                scope,
                item.transcript_id,
                item.unit(),
                item.tool_name,
                item.summary,
                item.tokens,
                item.created,
                item.last_accessed,
                item.access_count,
            )
        conn.execute(
            "INSERT OR REPLACE INTO ctxkit_meta (key, value) VALUES (?, ?), (?, ?)",
            ("format", FORMAT_NAME, "schema_version", SCHEMA_VERSION),
        )

    # -- context manager ----------------------------------------------------------------------

    def close(self) -> None:
        """Commit the open transaction and close the database."""
        try:
            self.commit()
        finally:
            self._conn.close()

    def abort(self) -> None:
        """Roll back every write since the last commit and close: the archive is as it was.

        An archive this object created is removed when it still holds nothing, checked under
        the write lock: a failed run leaves no empty archive behind. One that another run wrote
        to meanwhile stays.
        """
        self._pending.clear()  # never written
        try:
            if self._conn.in_transaction:
                self._conn.rollback()
            if self.created:
                self._remove_if_empty()
        except sqlite3.DatabaseError:
            pass  # closing without commit rolls back too
        finally:
            self._conn.close()

    def _remove_if_empty(self) -> None:
        conn = self._conn
        conn.execute("PRAGMA busy_timeout = 0")  # another writer at work: it is not ours alone
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return
        try:
            tables = [
                r[0]
                for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                if r[0] != "ctxkit_meta"
            ]
            if not any(conn.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone() for t in tables):
                os.unlink(self.path)
                self.created = False
        except OSError:
            pass
        finally:
            conn.rollback()

    def __enter__(self) -> Archive:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()  # a run that fails leaves no half of itself behind

    # -- writing ------------------------------------------------------------------------------

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        # Writes join one open transaction, committed by `commit` or `close`: a compaction's
        # units land together, with one sync to disk instead of one per unit.
        if self.readonly:
            raise ArchiveError(f"archive {self.path} was opened read-only")
        try:
            self._conn.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise _db_error(self.path, exc) from None

    def begin(self) -> None:
        """Take the write lock now (waiting for another writer), so what is read next holds
        until the commit: two runs that pick the same key or ref cannot both take it."""
        if self.readonly or self.path == ":memory:" or self._conn.in_transaction:
            return
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            # no row yet, and no one else writes until our commit: every row will be ours
            self._rows_known = self._conn.execute("SELECT 1 FROM units LIMIT 1").fetchone() is None
        except sqlite3.DatabaseError as exc:
            raise _db_error(self.path, exc) from None

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Writes inside are undone together when it raises, the enclosing transaction going
        on: a conversation that fails in a dataset run leaves none of its rows."""
        if self.readonly:
            yield
            return
        self._conn.execute("SAVEPOINT conversation")
        try:
            yield
            if self._pending:
                self._flush()  # a row that fails to go in fails the conversation
        except BaseException:
            self._pending.clear()  # its rows, never written
            # A full disk or an I/O error makes SQLite undo the whole transaction itself: no
            # savepoint is left to roll back to, and the error goes on (it stops the run)
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK TO conversation")
                self._conn.execute("RELEASE conversation")
            # what was seen stored may be undone now: read it from the file again
            self._refs.clear()
            self._stored.clear()
            self._rows_known = False
            raise
        self._conn.execute("RELEASE conversation")

    def commit(self) -> None:
        """Make the writes so far durable (close does it too)."""
        if self.readonly or not self._conn.in_transaction:
            return
        try:
            self._conn.commit()
        except sqlite3.DatabaseError as exc:
            raise _db_error(self.path, exc) from None
        # others may write once the lock is gone (a file; no one else sees a private archive)
        self._rows_known = self._rows_known and self.path == ":memory:"

    def ref_for(self, scope: str, unit: Unit) -> tuple[str, bool]:
        """(the ref this unit has or gets in this archive, True when it is stored already).

        The ref is `make_ref(scope, ...)`; when another unit holds it (a clash of the digits),
        the ref grows by 6 digits until it is free. Same archive and input, same ref; a unit
        stored once keeps its ref.
        """
        known = self._stored.get((scope, unit.id, unit.content))
        if known is not None:
            return known, True
        if self.layout == 1:
            own: tuple[Any, ...] = (scope, unit.id, unit.content)
            scoped = any(r[1] == "scope" for r in self._conn.execute("PRAGMA table_info(units)"))
            # a row from before refs had a scope matches no scope: its ref is taken
            sql = f"SELECT {'scope' if scoped else 'NULL'}, unit_id, content FROM units WHERE ref = ?"
        else:
            own = ()  # (scope, id, content digest): made when a row holds the ref, not before
            sql = "SELECT scope, unit_id, content_digest FROM units WHERE ref = ?"
        for digits in range(REF_DIGITS, REF_DIGITS_MAX + 1, 6):
            ref = make_ref(scope, unit.id, unit.content, digits)
            row = self._refs.get(ref)  # rows are never taken back: what was seen holds
            if row is None:
                if self._rows_known:
                    return ref, False
                row = self._conn.execute(sql, (ref,)).fetchone()
                if row is None:
                    return ref, False
                row = self._refs[ref] = tuple(row)
            if not own:
                own = (scope, unit.id, packing.digest(unit.content))
            if row == own:
                self._stored[(scope, unit.id, unit.content)] = ref
                return ref, True
        raise ArchiveError(f"no free ref for unit {unit.id!r} in {self.path}")  # 2^-200

    def put(
        self,
        transcript_id: str,
        unit: Unit,
        *,
        summary: str = "",
        tokens: int | None = None,
        scope: str | None = None,
    ) -> str:
        """Store the unit whole and return its short ref; storing it again changes nothing.

        `scope` (default the transcript id) is what the ref is made from: `compact` passes
        `ref_scope(transcript)`, so refs do not depend on the file name.
        """
        scope = transcript_id if scope is None else scope
        ref, stored = self.ref_for(scope, unit)
        if stored:
            return ref
        self._writable_layout()
        tool_name = unit.name if unit.tool_call_id is not None else None
        if tool_name is None and unit.tool_calls:
            tool_name = unit.tool_calls[0].name
        count = tokens if tokens is not None else unit.tokens
        self._insert_unit(ref, scope, transcript_id, unit, tool_name, summary, count, _now())
        return ref

    def _insert_unit(
        self,
        ref: str,
        scope: str | None,
        transcript_id: str,
        unit: Unit,
        tool_name: str | None,
        summary: str,
        tokens: int | None,
        created: str,
        last_accessed: str | None = None,
        access_count: int = 0,
    ) -> None:
        original = self._originals.get(transcript_id, {}).get(unit.id)
        position: int | None = None
        packed: bytes | None = None
        # the original's unit itself (units are never changed in place), or one equal to it,
        # its cached count too (read back from the position, the unit is the original's); the
        # count given is the row's own
        if (
            original is not None
            and unit.tokens == original[1].tokens
            and _same_record(original[1], unit)
        ):
            position = original[0]  # the original's unit: named, not stored again
        else:
            data, moved = packing.unit_json(packing.stored(_unit_record(unit)))
            packed = packing.pack(data, marked=bool(moved))
            self._put_texts(moved or {})
        key = packing.digest(unit.content)
        if self.readonly:
            raise ArchiveError(f"archive {self.path} was opened read-only")
        self._pending.append(
            (
                scope,
                ref,
                transcript_id,
                unit.id,
                unit.type,
                tool_name,
                summary,
                key,
                position,
                packed,
                tokens,
                created,
                last_accessed,
                access_count,
            )
        )
        self._refs[ref] = (scope, unit.id, key)

    def _put_texts(self, texts: dict[bytes, str]) -> None:
        """Store each long text once (the original transcript and its archived units name the
        same digests)."""
        new = [(k, t) for k, t in texts.items() if k not in self._stored_texts]
        if not new:
            return
        if self.readonly:
            raise ArchiveError(f"archive {self.path} was opened read-only")
        try:
            absent = [(k, t) for k, t in new if not self._has_text(k)]
            self._conn.executemany(
                "INSERT INTO texts (digest, body) VALUES (?, ?)",
                [(k, packing.pack_text(t)) for k, t in absent],
            )
        except sqlite3.DatabaseError as exc:
            raise _db_error(self.path, exc) from None
        self._stored_texts.update(k for k, _ in new)

    def _has_text(self, key: bytes) -> bool:
        row = self._conn.execute("SELECT 1 FROM texts WHERE digest = ?", (key,)).fetchone()
        return row is not None

    def _text(self, key: bytes) -> str:
        """A stored text by digest."""
        row = self._conn.execute("SELECT body FROM texts WHERE digest = ?", (key,)).fetchone()
        if row is None:
            raise ArchiveError(f"{self.path} is damaged: text {key.hex()} is missing")
        return packing.unpack_text(row[0])

    def key_for(self, t: Transcript) -> str:
        """The id to archive `t` under: its own, unless another transcript with that id (two
        files named session.json, say) is already stored; then the id plus a content digest.
        Same input, same key, so refs stay deterministic. Choosing a key takes the write lock
        (`begin`): what is read from here holds until the commit."""
        self.begin()
        stored = self.original(t.id)
        if stored is None or _same_units(stored, t):
            return t.id
        digest = hashlib.sha256(transcript_to_json(t.replace(id="")).encode("utf-8")).hexdigest()
        return f"{t.id}~{digest[:8]}"

    def put_transcript(self, t: Transcript, key: str | None = None) -> None:
        """Store the original transcript whole under `key` (default its id); storing the same
        key again replaces it."""
        key = key or t.id
        self._writable_layout()
        if self._conn.execute(
            "SELECT 1 FROM units WHERE transcript_id = ? AND record IS NULL LIMIT 1", (key,)
        ).fetchone():
            self._unlink(key)
        self._insert_transcript(t, key, len(t.units), last_request_digest(t.units), _now())

    def rows_of(self, transcript_id: str) -> Rows:
        """A transcript's rows as this archive holds them, packed: what `take` stores in another
        archive without unpacking or packing anything (a `--jobs` worker's scratch archive
        hands its conversation to the one the parent writes)."""
        conn = self._conn
        head = conn.execute(
            "SELECT record, units, last_request, created FROM transcripts WHERE transcript_id = ?",
            (transcript_id,),
        ).fetchone()
        if head is None:
            raise ArchiveError(f"{self.path}: no transcript {transcript_id!r}")
        units = conn.execute(
            "SELECT scope, ref, unit_id, type, tool_name, summary, content_digest, position, "
            "record, tokens, created, last_accessed, access_count FROM units "
            "WHERE transcript_id = ? ORDER BY rowid",
            (transcript_id,),
        ).fetchall()
        texts = conn.execute("SELECT digest, body FROM texts").fetchall()
        return Rows(tuple(head), [tuple(r) for r in units], [tuple(r) for r in texts])

    def take(self, t: Transcript, key: str, rows: Rows) -> bool:
        """Store `t` under `key` with its archived units, as `rows` (another archive's
        `rows_of` it) hold them, packed; False, storing nothing, when a ref of theirs is already
        in this archive (held by this unit or another: the caller stores them the careful way)."""
        self._writable_layout()
        for _scope, ref, *_ in rows.units:
            if self._refs.get(ref) is not None:
                return False
            if not self._rows_known:
                sql = "SELECT 1 FROM units WHERE ref = ?"
                if self._conn.execute(sql, (ref,)).fetchone() is not None:
                    return False
        if self._conn.execute(
            "SELECT 1 FROM units WHERE transcript_id = ? AND record IS NULL LIMIT 1", (key,)
        ).fetchone():
            self._unlink(key)
        self._put_packed_texts(rows.texts)
        record, units, last_request, created = rows.transcript
        self._write(_INSERT_TRANSCRIPT, (key, record, units, last_request, created))
        self._decoded.pop(key, None)
        self._originals[key] = {u.id: (i, u) for i, u in enumerate(t.units)}
        for scope, ref, unit_id, kind, tool, summary, digest, position, record, tokens, *rest in rows.units:
            self._pending.append(
                (scope, ref, key, unit_id, kind, tool, summary, digest, position, record, tokens, *rest)
            )
            self._refs[ref] = (scope, unit_id, digest)
        return True

    def _put_packed_texts(self, rows: Sequence[tuple[bytes, bytes]]) -> None:
        """Texts as another archive stored them (digest, packed body), each once."""
        new = [(k, body) for k, body in rows if k not in self._stored_texts]
        if not new:
            return
        try:
            absent = [(k, body) for k, body in new if not self._has_text(k)]
            self._conn.executemany("INSERT INTO texts (digest, body) VALUES (?, ?)", absent)
        except sqlite3.DatabaseError as exc:
            raise _db_error(self.path, exc) from None
        self._stored_texts.update(k for k, _ in new)

    def _insert_transcript(
        self, t: Transcript, key: str, units: int, last_request: str, created: str
    ) -> None:
        packed, moved = pack_transcript(t)
        self._put_texts(moved)
        self._write(_INSERT_TRANSCRIPT, (key, packed, units, last_request, created))
        self._decoded.pop(key, None)
        self._originals[key] = {u.id: (i, u) for i, u in enumerate(t.units)}

    def _unlink(self, key: str) -> None:
        """Store whole the archived units that name a position in the original stored under
        `key`, which is about to be replaced."""
        for item in self._units("WHERE transcript_id = ? AND record IS NULL", (key,)):
            record = packing.stored(_unit_record(item.unit()))
            data, moved = packing.unit_json(record)
            self._put_texts(moved or {})
            self._write(
                "UPDATE units SET record = ?, position = NULL WHERE ref = ?",
                (packing.pack(data, marked=bool(moved)), item.ref),
            )

    # -- reading ------------------------------------------------------------------------------

    def _lookup(self, bare: str) -> ArchivedUnit | None:
        if SHORT_REF.fullmatch(bare):
            found = self._units("WHERE ref = ?", (bare,))
            return found[0] if found else None
        if bare.startswith(_LONG_PREFIX):
            body = bare[len(_LONG_PREFIX) :]
            # Prefer the percent-encoded split; then try every `/` for ids typed by hand.
            candidates = []
            if body.count("/") == 1:
                t, u = body.split("/")
                candidates.append((unquote(t), unquote(u)))
            candidates += [(body[:i], body[i + 1 :]) for i, ch in enumerate(body) if ch == "/"]
            for tid, uid in candidates:
                found = self._units(
                    "WHERE transcript_id = ? AND unit_id = ? ORDER BY rowid LIMIT 1", (tid, uid)
                )
                if found:
                    return found[0]
        return None

    def _units(self, where: str, params: tuple[Any, ...]) -> builtins.list[ArchivedUnit]:
        """The archived units of `SELECT ... FROM units <where>`, in either layout."""
        if self.layout == 1:
            rows = self._conn.execute(f"SELECT {_COLUMNS} FROM units {where}", params)
            return [_row(row, self.path) for row in rows]
        out = []
        for row in self._conn.execute(f"SELECT {_COLUMNS_2} FROM units {where}", params).fetchall():
            _check_columns(row, _COLUMN_TYPES_2, self.path)
            ref, tid, uid, kind, tool, summary, key, position, packed, tokens, *when = row
            created, accessed, count = when
            try:
                if packed is not None:
                    record = packing.unpack(packed, self._text)
                else:
                    record = self._original_unit(tid, position, key)
                if not isinstance(record, dict):
                    raise TypeError(f"a {type(record).__name__}, not a record")
            except (ValueError, TypeError, KeyError, AttributeError, zlib.error) as exc:
                raise damaged_row(self.path, f"archived unit {ref}", exc) from None
            record["tokenCount"] = tokens
            content = str(record.get("content") or "")
            out.append(
                ArchivedUnit(
                    ref, tid, uid, kind, tool, summary, content, tokens, created, accessed, count,
                    record=record, source=self.path,
                )
            )
        return out

    def _original_unit(self, transcript_id: str, position: int, key: bytes) -> dict[str, Any]:
        """The record of unit `position` of the original stored under `transcript_id`, which an
        archived unit names instead of holding it (its content digest `key` checked)."""
        records = self._decoded.get(transcript_id)
        if records is None:
            row = self._conn.execute(
                "SELECT record FROM transcripts WHERE transcript_id = ?", (transcript_id,)
            ).fetchone()
            records = packing.unpack(row[0], self._text)["u"] if row else []
            if len(self._decoded) >= 2:
                self._decoded.pop(next(iter(self._decoded)))
            self._decoded[transcript_id] = records
        if not 0 <= position < len(records) or packing.digest(
            str(records[position].get("content") or "")
        ) != key:
            raise ArchiveError(
                f"{self.path} is damaged: unit {position} of transcript {transcript_id!r} is "
                "missing or not the one archived"
            )
        return copy.deepcopy(records[position])

    def has(self, ref: str) -> bool:
        """True when the ref (any form) names an archived unit; does not count as an access."""
        bare, _ = parse_ref(ref)
        return self._lookup(bare) is not None

    def get(self, ref: str, *, count: bool = True) -> ArchivedUnit:
        """The archived unit a ref names (short or long form, location ignored); counts the
        access unless `count` is False."""
        bare, _ = parse_ref(ref)
        if not (SHORT_REF.fullmatch(bare) or bare.startswith(_LONG_PREFIX)):
            raise ArchiveError(
                f"{ref!r} is not a ref: use ref-<18 digits> or ctx://<transcript>/<unit>, "
                "optionally with :L50-100 or :match-3"
            )
        found = self._lookup(bare)
        if found is None:
            raise ArchiveError(
                f"unknown ref {ref} in {self.path}; "
                f"`ctxkit recall --list --archive {self.path}` lists the refs"
            )
        if count:
            self._count_access(found)
        return found

    def _count_access(self, found: ArchivedUnit) -> None:
        if self.readonly:
            return
        now = _now()
        # Access counts are advisory: while a compaction holds the write lock, a recall shows
        # the unit at once and leaves it uncounted rather than wait for the run to end.
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {int(ACCESS_TIMEOUT_S * 1000)}")
        try:
            conn.execute(
                "UPDATE units SET last_accessed = ?, access_count = access_count + 1 WHERE ref = ?",
                (now, found.ref),
            )
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise _db_error(self.path, exc) from None
            return
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        found.last_accessed = now
        found.access_count += 1

    def recall(
        self,
        ref: str,
        *,
        lines: tuple[int, int] | None = None,
        search: str | None = None,
        max_tokens: int | None = None,
        tokenizer: Tokenizer | None = None,
        timeout_s: float = SEARCH_TIMEOUT_S,
    ) -> str:
        """The unit's text, or a line range, or the matches of a pattern; cut to `max_tokens`.

        A location in the ref (`:L5-9`, `:match-2`) applies unless `lines` is given. With a
        pattern (a regular expression; text that does not compile is searched literally) each
        match comes with two lines of context, numbered like `grep -n`; `:match-N` keeps the Nth.
        An empty string means no line matched. A search that takes more than `timeout_s` is
        stopped with an `ArchiveError` (see `patterns.Pattern`).
        """
        _, where = parse_ref(ref)
        item = self.get(ref, count=False)  # counted once the recall succeeds
        text = item.text()
        if lines is None:
            lines = where.lines
        if where.match is not None and search is None:
            raise ArchiveError(f"{ref} names a match: give the pattern with --search PATTERN")
        if lines is not None:
            text = _line_range(text, lines, item.ref)
        if search is not None:
            rx = Pattern(search, timeout_s=timeout_s)
            text = _search(text, rx, where.match, item.ref, first_line=lines[0] if lines else 1)
        if max_tokens is not None:
            # after a search the lines are no longer the unit's, so the note cannot name them
            first = None if search is not None else (lines[0] if lines else 1)
            text = _cut(text, max_tokens, tokenizer, first_line=first)
        self._count_access(item)
        return text

    def list(self, transcript_id: str | None = None) -> builtins.list[ArchivedUnit]:
        """Archived units in the order they were stored, of one transcript or all.

        A transcript's units include those archived under its digest keys (`id~1a2b3c4d`), which
        it gets when it is compacted again with other content (an agent loop, a replay).
        """
        where = ""
        params: tuple[Any, ...] = ()
        if transcript_id is not None:
            where = "WHERE transcript_id = ? OR (transcript_id > ? AND transcript_id < ?)"
            # '~' + 8 hex digits sort between id + '~' and id + '~~': an index range, no LIKE escaping
            params = (transcript_id, transcript_id + "~", transcript_id + "~~")
        return self._units(where + " ORDER BY rowid", params)

    def search(
        self,
        pattern: str,
        *,
        transcript_id: str | None = None,
        limit: int | None = None,
        timeout_s: float = SEARCH_TIMEOUT_S,
    ) -> builtins.list[dict[str, Any]]:
        """Archived units whose text, tool name or summary match `pattern`, in stored order.

        The pattern is a case-insensitive regular expression (text that does not compile is
        matched literally); "" matches every unit. Each hit is `ArchivedUnit.info()`, with
        `chars` and `lines` of the text recall shows (tool calls too), plus `matches` (matching
        lines), `line` (the first one's number, None when only the tool
        name or summary matched) and `snippet` (that line, or a preview, around the match).
        Reading does not count as an access. A search that takes more than `timeout_s` is
        stopped with an `ArchiveError`.
        """
        rx = Pattern(pattern, ignore_case=True, timeout_s=timeout_s)
        hits: builtins.list[dict[str, Any]] = []
        for item in self.list(transcript_id):
            if limit is not None and len(hits) >= limit:
                break
            rx.check()
            text = item.text()  # what recall shows: content and tool calls
            lines = text.split("\n")
            found = [i for i, line in enumerate(lines) if rx.search(line)]
            if found:
                line: int | None = found[0] + 1
                snippet = _snippet(lines[found[0]], rx)
            elif rx.search(item.tool_name or "") or rx.search(item.summary):
                line, snippet = None, _snippet(item.summary or item.content, rx)
            else:
                continue
            hits.append(
                {
                    **item.info(),
                    "chars": len(text),
                    "lines": len(lines) if text else 0,
                    "matches": len(found),
                    "line": line,
                    "snippet": snippet,
                }
            )
        return hits

    def transcript_ids(self) -> builtins.list[str]:
        """Ids of the original transcripts stored, in the order they were stored."""
        rows = self._conn.execute("SELECT transcript_id FROM transcripts ORDER BY rowid")
        return [r[0] for r in rows]

    def original(self, transcript_id: str) -> Transcript | None:
        """The original transcript stored under this id, or None."""
        column = "transcript_json" if self.layout == 1 else "record"
        row = self._conn.execute(
            f"SELECT {column} FROM transcripts WHERE transcript_id = ?", (transcript_id,)
        ).fetchone()
        if row is None:
            return None
        try:
            if self.layout == 1:
                if not isinstance(row[0], str):
                    raise TypeError("binary data, not text" if isinstance(row[0], bytes) else "not text")
                return transcript_from_json(row[0])
            if not isinstance(row[0], bytes):
                raise TypeError("not a packed record")
            return unpack_transcript(row[0], self._text)
        except (ValueError, TypeError, KeyError, AttributeError, zlib.error) as exc:
            raise damaged_row(self.path, f"the original of transcript {transcript_id!r}", exc) from None

    def _latest(self, owners: set[str]) -> str:
        """Of these transcript ids, the one whose original was stored last."""
        marks = ",".join("?" for _ in owners)
        row = self._conn.execute(
            f"SELECT transcript_id FROM transcripts WHERE transcript_id IN ({marks}) "
            "ORDER BY rowid DESC LIMIT 1",
            tuple(sorted(owners)),
        ).fetchone()
        return str(row[0]) if row else sorted(owners)[-1]

    def restore(self, compacted: Transcript, _depth: int = 0) -> Transcript:
        """The original of a compacted transcript, found through the refs it carries.

        Refs in placeholder and summary units (and in `meta`) must all resolve. Refs in other
        units' text are used too, since a round trip through a chat format drops unit types and
        meta, but one that does not resolve there may be ordinary text and is ignored, unless no
        ref resolves at all. A transcript without refs that was stored under its own id comes
        back from the store; one that shows no sign of compaction is returned as it is (compact
        leaves a transcript that already fits untouched and stores nothing for it).
        """
        strict, loose = _refs_by_trust(compacted)
        owners: set[str] = set()
        unknown: builtins.list[str] = []
        unknown_loose: builtins.list[str] = []
        for ref in sorted(strict | loose):
            found = self._lookup(parse_ref(ref)[0])
            if found is not None:
                owners.add(found.transcript_id)
            elif ref in strict:
                unknown.append(ref)
            else:
                unknown_loose.append(ref)
        if unknown or (unknown_loose and not owners):
            missing = unknown or unknown_loose
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise ArchiveError(
                f"{counted(len(missing), 'ref')} of transcript {compacted.id!r} "
                f"{'is' if len(missing) == 1 else 'are'} not in {self.path}: "
                f"{shown}; was it compacted with another --archive?"
            )
        # Several owners: a compacted transcript compacted again keeps the first run's refs;
        # its own original is the one stored last, which expands in turn to the first original.
        # Every owner then has its original stored; refs into others are a mix-up.
        if len(owners) > 1 and any(self.original(o) is None for o in owners):
            raise ArchiveError(
                f"the refs of transcript {compacted.id!r} point to several transcripts in "
                f"{self.path} ({', '.join(sorted(owners))}); cannot tell which is its original"
            )
        tid = self._latest(owners) if owners else compacted.id
        original = self.original(tid)
        if original is not None:
            if _depth < 16 and refs_in(original) and original.units != compacted.units:
                try:
                    return self.restore(original, _depth=_depth + 1)
                except ArchiveError:
                    return original
            return original
        if owners:
            raise ArchiveError(
                f"the refs of transcript {compacted.id!r} point to transcript {tid!r}, whose "
                f"original is not stored in {self.path}"
            )
        matched = self._by_key(compacted)
        if matched is not None:
            return matched
        marked = any(_made_by_compaction(u) for u in compacted.units)
        if not marked and _key_of(compacted.id) is not None:
            # One conversation of a file of many, with no sign of compaction and no original
            # under its key: compact left it as it was (another conversation that happens to
            # share its requests is not its original).
            return compacted
        matched = self._by_invariants(compacted)
        if matched is not None:
            return matched
        if marked:
            raise ArchiveError(
                f"transcript {compacted.id!r} was compacted but carries no ref into {self.path} "
                "and its original is not stored there"
            )
        return compacted

    def _by_key(self, compacted: Transcript) -> Transcript | None:
        """The stored original of the same conversation of a file of many (its id after the
        file's name: the line of a dataset, an aider session's start), when only one is, read
        back under another file's name."""
        key = _key_of(compacted.id)
        if key is None:
            return None
        pattern = "%#" + key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._conn.execute(
            "SELECT transcript_id FROM transcripts WHERE transcript_id LIKE ? ESCAPE '\\' "
            "OR transcript_id LIKE ? ESCAPE '\\' ORDER BY rowid",
            (pattern, pattern + "~%"),
        ).fetchall()
        found = [t for (tid,) in rows if (t := self.original(tid)) is not None and _could_come_from(t, compacted)]
        return found[0] if len(found) == 1 else None

    def _by_invariants(self, compacted: Transcript) -> Transcript | None:
        """The stored original that the compaction invariants point to, when only one does.

        Compaction keeps the system units and the last user request verbatim, so a transcript
        read back under another id (the output file's name) and without refs (a placeholder
        whose ref lived in metadata the output format dropped) still matches its original.
        Read back from a chat format, a placeholder may itself look like a user request, so
        every request is tried, the latest first.
        """
        from ctxkit.structure import is_user_request

        system = [u.content for u in compacted.units if u.role == "system"]
        tried: set[str] = set()
        for u in reversed(compacted.units):
            if not (is_user_request(u) and u.content):
                continue
            digest = _digest(u.content)
            if digest in tried:
                continue
            tried.add(digest)
            rows = self._conn.execute(
                "SELECT transcript_id FROM transcripts WHERE last_request = ? ORDER BY rowid",
                (digest,),
            ).fetchall()
            matches = []
            for (tid,) in rows:
                candidate = self.original(tid)
                if (
                    candidate is not None
                    and [c.content for c in candidate.system_units] == system
                    and _could_come_from(candidate, compacted)
                ):
                    matches.append(candidate)
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                same = [m for m in matches if _same_text(m, compacted)]
                if len(same) == 1:
                    return same[0]
                raise ArchiveError(
                    f"transcript {compacted.id!r} carries no ref and matches several originals "
                    f"in {self.path} ({', '.join(m.id for m in matches[:5])}); cannot tell which"
                )
        return None


def _has_scope_column(conn: sqlite3.Connection) -> bool:
    return any(r[1] == "scope" for r in conn.execute("PRAGMA table_info(units)"))


def _write_schema(conn: sqlite3.Connection) -> None:
    """The tables and meta rows, in one write transaction, checked again under the lock."""
    conn.execute("PRAGMA journal_mode = DELETE")
    with conn:
        if not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")  # the write lock, or wait for it
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT OR IGNORE INTO ctxkit_meta (key, value) VALUES (?, ?), (?, ?)",
            ("format", FORMAT_NAME, "schema_version", SCHEMA_VERSION),
        )
        if not _has_scope_column(conn):  # an archive from before refs had a scope
            conn.execute("ALTER TABLE units ADD COLUMN scope TEXT")


def _create_archive_file(path: str) -> bool:
    """Make a new, whole archive at `path`: its schema built in memory and the file linked into
    place in one step (`fileio.create_whole`: 0600, since it will hold whole transcripts), so
    no one ever sees it half made, an existing file is never taken over, and a process killed
    meanwhile leaves nothing. False when another writer made it first (then that one is used)."""
    from ctxkit.fileio import create_whole

    conn = sqlite3.connect(":memory:")
    try:
        _write_schema(conn)
        image = conn.serialize()
    finally:
        conn.close()
    return create_whole(path, image)


def _lower(exc: OSError) -> str:
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]


def _open_failure(path: str, exc: sqlite3.Error) -> str:
    """Why SQLite could not open `path`, in the system's words when it has some ("unable to
    open database file" says nothing of a permission)."""
    try:
        with open(path, "rb"):
            pass
    except OSError as os_exc:
        return _lower(os_exc)
    return str(exc)


def _key_of(transcript_id: str) -> str | None:
    """The part of a transcript id that names it within its file (`data#12` -> `12`); None for
    the id of a file's only transcript."""
    stem, sep, key = transcript_id.rpartition("#")
    return key.split("~")[0] if sep and stem and key else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def last_request_digest(units: Sequence[Unit]) -> str:
    """16 hex of a SHA-256 over the last user request's text ("" when there is none)."""
    from ctxkit.structure import is_user_request

    return _digest(next((u.content for u in reversed(units) if is_user_request(u)), ""))


def _could_come_from(original: Transcript, compacted: Transcript) -> bool:
    """Whether compaction could have made `compacted` from `original`: its units that carry no
    sign of compaction (no ref, not made up) are units of the original, in the same order. Two
    conversations that share a request (a dataset's) are told apart this way."""
    texts = iter(u.content for u in original.units)
    for u in compacted.units:
        if _made_by_compaction(u) or _REFS_IN_TEXT.search(u.content):
            continue
        if not any(u.content == t for t in texts):
            return False
    return True


def _same_text(a: Transcript, b: Transcript) -> bool:
    return [(u.role, u.content) for u in a.units] == [(u.role, u.content) for u in b.units]


def _same_units(a: Transcript, b: Transcript) -> bool:
    """Same messages (ids, roles, content, pairing, source records), whatever the transcript ids."""

    def key(u: Unit) -> tuple[Any, ...]:
        return (u.id, u.role, u.content, [c.to_dict() for c in u.tool_calls], u.tool_call_id, u.raw)

    return [key(u) for u in a.units] == [key(u) for u in b.units]


def _made_by_compaction(u: Unit) -> bool:
    """Made by ctxkit's compaction. An agent's own summary read from its log (a Codex
    `compacted` record, Claude Code's compact summary, an OpenHands condensation) is a summary
    too, but it is the log's own text: it has its record and none of our marks."""
    if u.type == "placeholder" or u.id.startswith("ctxkit-"):
        return True
    if u.type != "summary":
        return False
    return u.raw is None or bool(_REFS_IN_TEXT.search(u.content)) or u.content.startswith(_PREAMBLE)


_PREAMBLE = "[This session continues from earlier work that was compacted"  # strategies.summarize_old.preamble


def _refs_by_trust(t: Transcript) -> tuple[set[str], set[str]]:
    """(refs that must resolve, refs that are probably ours) of a transcript."""
    strict: set[str] = set()
    loose: set[str] = set()
    for u in t.units:
        ref = u.meta.get("ref")
        if isinstance(ref, str):
            strict.add(ref)
        strict.update(r for r in u.meta.get("refs") or [] if isinstance(r, str))
        found = _REFS_IN_TEXT.findall(u.content)
        (strict if _made_by_compaction(u) else loose).update(found)
    return strict, loose - strict


def refs_in(t: Transcript) -> builtins.list[str]:
    """Every ref a transcript carries (meta and text), sorted."""
    strict, loose = _refs_by_trust(t)
    return sorted(strict | loose)


def _db_error(path: str, exc: sqlite3.DatabaseError) -> ArchiveError:
    text = str(exc)
    if "unable to open database file" in text:
        directory = os.path.dirname(os.path.abspath(path))
        if not os.access(directory, os.W_OK):
            return ArchiveError(
                f"cannot write archive {path}: permission denied (SQLite keeps its journal in "
                f"{directory}, which is not writable)"
            )
        return ArchiveError(f"cannot open archive {path}: {_open_failure(path, exc)}")
    if "not a database" in text or "file is encrypted" in text:
        return ArchiveError(f"{path} is not a ctxkit archive (not an SQLite file)")
    if "readonly" in text or "read-only" in text:
        return ArchiveError(f"archive {path} is read-only; choose a writable --archive PATH")
    if "locked" in text or "busy" in text:
        return ArchiveError(
            f"archive {path} is busy: another run has held it for {BUSY_TIMEOUT_S:g} s; "
            "try again when it ends, or choose another --archive PATH"
        )
    return ArchiveError(f"archive {path}: {text}")


def _snippet(text: str, rx: Pattern, width: int = SNIPPET_CHARS) -> str:
    """One line of `text` around the first match of `rx`, whitespace collapsed, `width` chars."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    m = rx.search(flat)
    start = max(0, min(m.start() - width // 4, len(flat) - width)) if m else 0
    cut = flat[start : start + width]
    return ("…" if start else "") + cut + ("…" if start + width < len(flat) else "")


def _line_range(text: str, lines: tuple[int, int], ref: str) -> str:
    a, b = lines
    all_lines = text.split("\n")
    if a < 1 or b < a:
        raise ArchiveError(f"bad line range {a}-{b}: lines count from 1 and A <= B")
    if a > len(all_lines):
        raise ArchiveError(f"{ref} has {len(all_lines)} lines; line {a} is past the end")
    return "\n".join(all_lines[a - 1 : b])


def _search(text: str, rx: Pattern, nth: int | None, ref: str, *, first_line: int) -> str:
    pattern = rx.pattern
    all_lines = text.split("\n")
    hits = [i for i, line in enumerate(all_lines) if rx.search(line)]
    if nth is not None:
        if nth < 1 or nth > len(hits):
            raise ArchiveError(
                f"{ref} has {len(hits)} match(es) for {pattern!r}; match-{nth} is not one"
            )
        hits = [hits[nth - 1]]
    groups: list[str] = []
    shown_until = -1
    for i in hits:
        lo = max(0, i - SEARCH_CONTEXT_LINES)
        hi = min(len(all_lines), i + SEARCH_CONTEXT_LINES + 1)
        block = []
        for j in range(max(lo, shown_until), hi):
            mark = ":" if rx.search(all_lines[j]) else "-"
            block.append(f"{j + first_line}{mark}{all_lines[j]}")
        if lo < shown_until and groups:
            groups[-1] += "\n" + "\n".join(block)  # overlapping context: one group, like grep
        else:
            groups.append("\n".join(block))
        shown_until = hi
    return "\n--\n".join(groups)


def _cut(text: str, max_tokens: int, tokenizer: Tokenizer | None, *, first_line: int | None) -> str:
    """Cut text to at most `max_tokens`, note included, on a line boundary when one fits.

    `first_line` is the unit's number of the text's first line (None when the lines are not the
    unit's own, as after a search), so the note can say which `--lines` bring the rest.
    """
    if tokenizer is None:
        from ctxkit.tokens import get_tokenizer

        tokenizer = get_tokenizer(None)
    total = tokenizer.count(text)
    if total <= max_tokens:
        return text
    all_lines = text.split("\n")

    def note(shown_lines: int, shown_tokens: int) -> str:
        head = f"\n[cut: {shown_tokens:,} of {total:,} tokens"
        if first_line is None:
            return f"{head}; narrow the pattern, pick one with :match-N, or raise --max-tokens]"
        last = first_line + len(all_lines) - 1
        if shown_lines == 0:
            shown = f"part of line {first_line}"
        else:
            end_line = first_line + shown_lines - 1
            shown = f"line {first_line}" if shown_lines == 1 else f"lines {first_line}-{end_line}"
        rest = (
            f"--lines {first_line + shown_lines}-{last} for more"
            if 0 < shown_lines < len(all_lines)
            else "raise --max-tokens for more"
        )
        return f"{head}, {shown} of {first_line}-{last}; {rest}]"

    budget = max_tokens - tokenizer.count(note(len(all_lines), total))
    if budget <= 0:
        # too small for the full note: a short one still says the text was cut
        short = "\n[cut: raise --max-tokens]"
        room = max_tokens - tokenizer.count(short)
        if room <= 0:
            return _prefix_within(text, max_tokens, tokenizer)
        return _prefix_within(text, room, tokenizer) + short
    # the longest run of whole lines within budget (binary search on the line count)
    lo, hi = 0, len(all_lines)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokenizer.count("\n".join(all_lines[:mid])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    shown = "\n".join(all_lines[:lo]) if lo else _prefix_within(all_lines[0], budget, tokenizer)
    return shown + note(lo, tokenizer.count(shown))


def _prefix_within(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokenizer.count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]
