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

This module makes refs and writes; reading back is `archive.reading` (`ArchiveReader`, which
`Archive` extends), on the SQLite file itself (opening, schema, layouts, the write transaction)
in `archive.database`; the records as stored are `archive.records`; what recall shows of a text,
`archive.excerpts`; finding the original of a compacted transcript, `archive.originals`.
What a ref looks like in text is `ctxkit.refs`. `created`, `last_accessed`
and `access_count` live only in the database: they never reach compacted output, which stays
byte-identical for the same input.
"""

from __future__ import annotations

import functools
import hashlib
import sqlite3
from collections.abc import Sequence
from typing import Any

from ctxkit.archive import packing
from ctxkit.archive.database import (
    FORMAT_NAME,
    INSERT_TRANSCRIPT,
    SCHEMA,
    SCHEMA_VERSION,
    db_error,
    has_scope_column,
    now,
)
from ctxkit.archive.originals import last_request_digest, same_units
from ctxkit.archive.reading import ArchiveReader
from ctxkit.archive.records import (
    COLUMNS,
    ArchivedUnit,
    Rows,
    pack_transcript,
    same_record,
    transcript_from_json,
    transcript_to_json,
    unit_record,
)
from ctxkit.errors import ArchiveError
from ctxkit.model import Transcript, Unit

# Decimal digits, not hex: tokenizers split digit runs into fixed groups of three, so every ref
# costs the same number of tokens and a placeholder's size never depends on the digest (hex
# refs cost 4 to 10 tokens each, so the output changed with the input's file name).
REF_DIGITS = 18  # ~60 bits: one clash in ~10^9 units at 71k units a dataset; clashes extend
REF_DIGITS_MAX = 72
REF_PROBE = "ref-" + "0" * REF_DIGITS  # sizes a placeholder before its ref is known


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
        d = unit_record(u)
        d["tokenCount"] = None  # a count made on the way, not part of the message
        doc["units"].append(d)
    # orjson's sorted JSON (`packing.canonical`): the standard library's took a third of a
    # compaction of a real log, whose source records are four times its text
    return hashlib.sha256(packing.canonical(doc)).hexdigest()[:32]


class Archive(ArchiveReader):
    """An SQLite archive of removed units and original transcripts; a context manager."""

    def __init__(self, path: str, *, readonly: bool = False, create: bool = True) -> None:
        self._stored_texts: set[bytes] = set()  # digests known to be in `texts`
        # unit id -> (position, unit) of each original stored by this Archive, by key: an
        # archived unit equal to its original's is stored as a position in it
        self._originals: dict[str, dict[str, tuple[int, Unit]]] = {}
        self._refs: dict[str, tuple[Any, ...]] = {}  # ref -> (scope, unit id, content key) seen
        # (scope, unit id, content) -> its ref, for units found stored: a chain checks every
        # removed unit after every step, and a stored unit stays stored
        self._stored: dict[tuple[str, str, str], str] = {}
        super().__init__(path, readonly=readonly, create=create)

    def _forget_seen(self) -> None:
        """What was seen stored may be undone now: the refs seen are read from the file again."""
        self._refs.clear()
        self._stored.clear()
        super()._forget_seen()

    # -- layouts ------------------------------------------------------------------------------

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
            raise db_error(self.path, exc) from None
        self.layout = self._version()
        self._refs.clear()  # rows seen in layout 1 held the content, not its key
        self._stored.clear()

    def _upgrade(self) -> None:
        """Rewrite a layout-1 archive in this layout, inside the caller's write transaction: the
        same refs, units, originals and access counts, each text stored once, compressed."""
        conn = self._conn
        scoped = has_scope_column(conn)
        units = conn.execute(
            f"SELECT {'scope' if scoped else 'NULL'}, {COLUMNS} FROM units ORDER BY rowid"
        ).fetchall()
        originals = conn.execute(
            "SELECT transcript_id, transcript_json, units, last_request, created FROM transcripts "
            "ORDER BY rowid"
        ).fetchall()
        conn.execute("DROP TABLE units")
        conn.execute("DROP TABLE transcripts")
        for statement in SCHEMA.split(";"):
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

    # -- writing ------------------------------------------------------------------------------

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
            scoped = has_scope_column(self._conn)
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
        self._insert_unit(ref, scope, transcript_id, unit, tool_name, summary, count, now())
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
            and same_record(original[1], unit)
        ):
            position = original[0]  # the original's unit: named, not stored again
        else:
            data, moved = packing.unit_json(packing.stored(unit_record(unit)))
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
            raise db_error(self.path, exc) from None
        self._stored_texts.update(k for k, _ in new)

    def _has_text(self, key: bytes) -> bool:
        row = self._conn.execute("SELECT 1 FROM texts WHERE digest = ?", (key,)).fetchone()
        return row is not None

    def key_for(self, t: Transcript) -> str:
        """The id to archive `t` under: its own, unless another transcript with that id (two
        files named session.json, say) is already stored; then the id plus a content digest.
        Same input, same key, so refs stay deterministic. Choosing a key takes the write lock
        (`begin`): what is read from here holds until the commit."""
        self.begin()
        stored = self.original(t.id)
        if stored is None or same_units(stored, t):
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
        self._insert_transcript(t, key, len(t.units), last_request_digest(t.units), now())

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
        self._write(INSERT_TRANSCRIPT, (key, record, units, last_request, created))
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
            raise db_error(self.path, exc) from None
        self._stored_texts.update(k for k, _ in new)

    def _insert_transcript(
        self, t: Transcript, key: str, units: int, last_request: str, created: str
    ) -> None:
        packed, moved = pack_transcript(t)
        self._put_texts(moved)
        self._write(INSERT_TRANSCRIPT, (key, packed, units, last_request, created))
        self._decoded.pop(key, None)
        self._originals[key] = {u.id: (i, u) for i, u in enumerate(t.units)}

    def _unlink(self, key: str) -> None:
        """Store whole the archived units that name a position in the original stored under
        `key`, which is about to be replaced."""
        for item in self._units("WHERE transcript_id = ? AND record IS NULL", (key,)):
            record = packing.stored(unit_record(item.unit()))
            data, moved = packing.unit_json(record)
            self._put_texts(moved or {})
            self._write(
                "UPDATE units SET record = ?, position = NULL WHERE ref = ?",
                (packing.pack(data, marked=bool(moved)), item.ref),
            )

