"""Reading an archive back: a unit by its ref (short or long, counted as an access), what recall
and search show of it (`archive.excerpts`), and the originals stored, in either layout (1: JSON
text; 2 and 3: packed, a unit equal to its original's named by its position in it)."""

from __future__ import annotations

import builtins
import copy
import sqlite3
import zlib
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from ctxkit.archive import packing
from ctxkit.archive.database import ACCESS_TIMEOUT_S, BUSY_TIMEOUT_S, ArchiveFile, db_error, now
from ctxkit.archive.excerpts import cut, hits, line_range, matches
from ctxkit.archive.originals import restore
from ctxkit.archive.patterns import SEARCH_TIMEOUT_S, Pattern
from ctxkit.archive.records import (
    COLUMN_TYPES_2,
    COLUMNS,
    COLUMNS_2,
    ArchivedUnit,
    archived_unit,
    check_columns,
    damaged_row,
    transcript_from_json,
    unpack_transcript,
)
from ctxkit.errors import ArchiveError
from ctxkit.model import Transcript
from ctxkit.refs import LONG_PREFIX, SHORT_REF, parse_ref

if TYPE_CHECKING:
    from ctxkit.tokens import Tokenizer


class ArchiveReader(ArchiveFile):
    """An archive opened to read units and originals back (`archive.store.Archive` writes too)."""

    def __init__(self, path: str, *, readonly: bool = False, create: bool = True) -> None:
        self._decoded: dict[str, builtins.list[dict[str, Any]]] = {}  # the last originals read
        super().__init__(path, readonly=readonly, create=create)

    def _text(self, key: bytes) -> str:
        """A stored text by digest."""
        row = self._conn.execute("SELECT body FROM texts WHERE digest = ?", (key,)).fetchone()
        if row is None:
            raise ArchiveError(f"{self.path} is damaged: text {key.hex()} is missing")
        return packing.unpack_text(row[0])


    def find(self, bare: str) -> ArchivedUnit | None:
        """The archived unit a bare ref (no location) names, or None; not counted as an access."""
        if SHORT_REF.fullmatch(bare):
            found = self._units("WHERE ref = ?", (bare,))
            return found[0] if found else None
        if bare.startswith(LONG_PREFIX):
            body = bare[len(LONG_PREFIX) :]
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
            rows = self._conn.execute(f"SELECT {COLUMNS} FROM units {where}", params)
            return [archived_unit(row, self.path) for row in rows]
        out = []
        for row in self._conn.execute(f"SELECT {COLUMNS_2} FROM units {where}", params).fetchall():
            check_columns(row, COLUMN_TYPES_2, self.path)
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
        return self.find(bare) is not None

    def get(self, ref: str, *, count: bool = True) -> ArchivedUnit:
        """The archived unit a ref names (short or long form, location ignored); counts the
        access unless `count` is False."""
        bare, _ = parse_ref(ref)
        if not (SHORT_REF.fullmatch(bare) or bare.startswith(LONG_PREFIX)):
            raise ArchiveError(
                f"{ref!r} is not a ref: use ref-<18 digits> or ctx://<transcript>/<unit>, "
                "optionally with :L50-100 or :match-3"
            )
        found = self.find(bare)
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
        when = now()
        # Access counts are advisory: while a compaction holds the write lock, a recall shows
        # the unit at once and leaves it uncounted rather than wait for the run to end.
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {int(ACCESS_TIMEOUT_S * 1000)}")
        try:
            conn.execute(
                "UPDATE units SET last_accessed = ?, access_count = access_count + 1 WHERE ref = ?",
                (when, found.ref),
            )
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise db_error(self.path, exc) from None
            return
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        found.last_accessed = when
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
            text = line_range(text, lines, item.ref)
        if search is not None:
            rx = Pattern(search, timeout_s=timeout_s)
            text = matches(text, rx, where.match, item.ref, first_line=lines[0] if lines else 1)
        if max_tokens is not None:
            # after a search the lines are no longer the unit's, so the note cannot name them
            first = None if search is not None else (lines[0] if lines else 1)
            text = cut(text, max_tokens, tokenizer, first_line=first)
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
        return hits(self.list(transcript_id), rx, limit)

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

    def latest_of(self, owners: set[str]) -> str:
        """Of these transcript ids, the one whose original was stored last."""
        marks = ",".join("?" for _ in owners)
        row = self._conn.execute(
            f"SELECT transcript_id FROM transcripts WHERE transcript_id IN ({marks}) "
            "ORDER BY rowid DESC LIMIT 1",
            tuple(sorted(owners)),
        ).fetchone()
        return str(row[0]) if row else sorted(owners)[-1]

    def ids_keyed(self, key: str) -> builtins.list[str]:
        """Ids of the originals stored as conversation `key` of a file of many (`<file>#<key>`,
        or `<file>#<key>~<digest>`), whatever the file's name, in stored order."""
        pattern = "%#" + key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self._conn.execute(
            "SELECT transcript_id FROM transcripts WHERE transcript_id LIKE ? ESCAPE '\\' "
            "OR transcript_id LIKE ? ESCAPE '\\' ORDER BY rowid",
            (pattern, pattern + "~%"),
        )
        return [r[0] for r in rows]

    def ids_asking(self, digest: str) -> builtins.list[str]:
        """Ids of the originals whose last user request has this digest, in stored order."""
        rows = self._conn.execute(
            "SELECT transcript_id FROM transcripts WHERE last_request = ? ORDER BY rowid", (digest,)
        )
        return [r[0] for r in rows]

    def restore(self, compacted: Transcript) -> Transcript:
        """The original of a compacted transcript, found through the refs it carries (see
        `archive.originals.restore`)."""
        return restore(self, compacted)
