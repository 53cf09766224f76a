"""The SQLite file under an archive: opened and checked (never made from a file that is not
one), its schema and layout, created whole, and the one write transaction its rows gather in.

The journal is SQLite's default rollback journal (not WAL), so an archive is one file that can
be copied or moved. Writes gather in one transaction that `commit()` or `close()` ends, so a
compaction's units are stored together or not at all. A run that fails rolls its writes back
(`abort()`, or leaving the `with` block on an exception): the archive stays as it was before.
A new archive file is created 0600 (it holds whole transcripts). Writers take the lock when
they first write (BEGIN IMMEDIATE) and wait up to `BUSY_TIMEOUT_S` for another writer instead of
failing with "database is locked".
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

from ctxkit.archive.records import COLUMNS_2
from ctxkit.errors import ArchiveError

SCHEMA_VERSION = "3"
FORMAT_NAME = "ctxkit-archive"
BUSY_TIMEOUT_S = 600.0  # another writer holds the archive: wait (a run commits once, at its end)
ACCESS_TIMEOUT_S = 1.0  # but a recall does not wait that long just to count an access

SCHEMA = """
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


_CLOCK: list[Any] = [None, ""]  # (the second, its ISO text): a run stores many rows in one


INSERT_TRANSCRIPT = (
    "INSERT INTO transcripts (transcript_id, record, units, last_request, created) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (transcript_id) DO UPDATE SET "
    "record = excluded.record, units = excluded.units, "
    "last_request = excluded.last_request, created = excluded.created"
)
INSERT_UNIT = (
    f"INSERT INTO units (scope, {COLUMNS_2}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def now() -> str:
    """The time to the second in UTC, as ISO text: when a row was made or last read."""
    second = int(time.time())
    if second != _CLOCK[0]:
        _CLOCK[:] = [second, datetime.fromtimestamp(second, timezone.utc).isoformat(timespec="seconds")]
    return str(_CLOCK[1])


_Self = TypeVar("_Self", bound="ArchiveFile")


class ArchiveFile:
    """An archive's SQLite file, open: its layout, its write transaction and the unit rows not
    yet written to it; a context manager that commits, or rolls back on an exception."""

    def __init__(self, path: str, *, readonly: bool = False, create: bool = True) -> None:
        self.path = path
        self.readonly = readonly
        # This object made the file: a run that fails before storing anything removes it again.
        self.created = False
        self.layout = int(SCHEMA_VERSION)  # of the file: 1 for an old archive read as it is
        # unit rows not yet in the database: they go in together, in one statement, before
        # anything reads it (`_conn`); a compaction archives hundreds of units, one at a time
        self._pending: list[tuple[Any, ...]] = []
        # every row of `units` is one this object wrote and remembers (`_refs`), so a ref it
        # does not know is free without asking: a private archive, or a new one under our lock
        self._rows_known = False
        self._db = self._open(path, readonly=readonly, create=create and not readonly)
        try:
            self._prepare()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise db_error(path, exc) from None
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
            self._db.executemany(INSERT_UNIT, rows)
        except sqlite3.DatabaseError as exc:
            raise db_error(self.path, exc) from None

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
                self.created = create_archive_file(path)
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
        tables = _tables(conn)
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
            write_schema(conn)
        elif not self.readonly and self._version() != 1 and not self._complete():
            # a file another writer is still making, or one without its meta rows: complete it
            # under the write lock (a layout-1 archive is rewritten at its first write instead)
            write_schema(conn)
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
        tables = _tables(conn)
        if "ctxkit_meta" not in tables:
            return 0
        row = conn.execute("SELECT value FROM ctxkit_meta WHERE key = 'schema_version'").fetchone()
        try:
            return int(row[0]) if row is not None else 1
        except ValueError:
            raise ArchiveError(
                f"{self.path}: unknown archive schema version {row[0]!r}"
            ) from None

    def _complete(self) -> bool:
        """Whether the file is a whole archive of this layout (tables and meta rows)."""
        conn = self._conn
        tables = _tables(conn)
        if not {"ctxkit_meta", "texts", "units", "transcripts"} <= tables:
            return False
        return self._version() >= 2  # layouts 2 and 3 have the same tables

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
            tables = sorted(_tables(conn) - {"ctxkit_meta"})
            if not any(conn.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone() for t in tables):
                os.unlink(self.path)
                self.created = False
        except OSError:
            pass
        finally:
            conn.rollback()

    def __enter__(self: _Self) -> _Self:
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

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        # Writes join one open transaction, committed by `commit` or `close`: a compaction's
        # units land together, with one sync to disk instead of one per unit.
        if self.readonly:
            raise ArchiveError(f"archive {self.path} was opened read-only")
        try:
            self._conn.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise db_error(self.path, exc) from None

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
            raise db_error(self.path, exc) from None

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
            self._forget_seen()
            raise
        self._conn.execute("RELEASE conversation")

    def commit(self) -> None:
        """Make the writes so far durable (close does it too)."""
        if self.readonly or not self._conn.in_transaction:
            return
        try:
            self._conn.commit()
        except sqlite3.DatabaseError as exc:
            raise db_error(self.path, exc) from None
        # others may write once the lock is gone (a file; no one else sees a private archive)
        self._rows_known = self._rows_known and self.path == ":memory:"

    def _forget_seen(self) -> None:
        """What was seen stored may be undone now: read it from the file again."""
        self._rows_known = False


def _tables(conn: sqlite3.Connection) -> set[str]:
    """The names of the database's tables."""
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def has_scope_column(conn: sqlite3.Connection) -> bool:
    """Whether the `units` table has its `scope` column (archives from before refs had a scope do not)."""
    return any(r[1] == "scope" for r in conn.execute("PRAGMA table_info(units)"))


def write_schema(conn: sqlite3.Connection) -> None:
    """The tables and meta rows, in one write transaction, checked again under the lock."""
    conn.execute("PRAGMA journal_mode = DELETE")
    with conn:
        if not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")  # the write lock, or wait for it
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT OR IGNORE INTO ctxkit_meta (key, value) VALUES (?, ?), (?, ?)",
            ("format", FORMAT_NAME, "schema_version", SCHEMA_VERSION),
        )
        if not has_scope_column(conn):  # an archive from before refs had a scope
            conn.execute("ALTER TABLE units ADD COLUMN scope TEXT")


def create_archive_file(path: str) -> bool:
    """Make a new, whole archive at `path`: its schema built in memory and the file linked into
    place in one step (`atomic.create_whole`: 0600, since it will hold whole transcripts), so
    no one ever sees it half made, an existing file is never taken over, and a process killed
    meanwhile leaves nothing. False when another writer made it first (then that one is used)."""
    from ctxkit.atomic import create_whole

    conn = sqlite3.connect(":memory:")
    try:
        write_schema(conn)
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


def db_error(path: str, exc: sqlite3.DatabaseError) -> ArchiveError:
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
