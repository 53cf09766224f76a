"""The persistent embedding cache: vectors by (model id, text hash) in SQLite, in the user cache
directory, so a second run over the same transcripts costs no model time."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

def cache_dir() -> Path:
    """The user cache directory: $CTXKIT_CACHE_DIR, else $XDG_CACHE_HOME/ctxkit, else ~/.cache/ctxkit."""
    override = os.environ.get("CTXKIT_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ctxkit"


_BUSY_S = 30.0


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch `conn`'s file to WAL, waiting out the other openers of a new file.

    SQLite answers "database is locked" at once, without its busy handler, when another connection
    holds a write lock while this one asks for the switch (the busy handler could deadlock there):
    several --jobs workers opening a fresh cache together hit it. So wait here, up to the same
    timeout."""
    deadline = time.monotonic() + _BUSY_S
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


class EmbeddingCache:
    """Vectors by (model id, sha256 of text) in SQLite, stored as float32 bytes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # several --jobs processes may share the file: WAL and a generous busy timeout
        self.conn = sqlite3.connect(str(path), timeout=_BUSY_S)
        _use_wal(self.conn)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS embeddings ("
            " model TEXT NOT NULL, text_sha256 TEXT NOT NULL, dim INTEGER NOT NULL,"
            " vector BLOB NOT NULL, PRIMARY KEY (model, text_sha256))"
        )
        self.conn.commit()

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors among `hashes` (missing ones are absent from the result)."""
        import numpy as np

        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self.conn.execute(
                f"SELECT text_sha256, dim, vector FROM embeddings WHERE model = ? AND text_sha256 IN ({marks})",
                [model, *part],
            )
            for digest, dim, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape[0] == dim:
                    found[digest] = vec
        return found

    def put_many(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Store vectors; an existing entry for the same key is kept."""
        import numpy as np

        rows = [
            (model, digest, int(vec.shape[0]), np.asarray(vec, dtype=np.float32).tobytes())
            for digest, vec in items
        ]
        with self.conn:
            self.conn.executemany("INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?, ?)", rows)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


# one connection per file and process: embedders come and go per transcript, file handles must not
_CACHES: dict[tuple[str, int], EmbeddingCache] = {}


def open_cache(path: Path) -> EmbeddingCache:
    """The shared EmbeddingCache for `path` in this process (a forked worker opens its own)."""
    key = (str(path), os.getpid())
    if key not in _CACHES:
        _CACHES[key] = EmbeddingCache(path)
    return _CACHES[key]
