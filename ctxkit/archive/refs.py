"""How a compacted transcript points into its archive, without opening one: the refs in its
text and where `compact` puts the archive. `count` and `guard` ask this of every input, so it
imports neither SQLite nor hashlib (`archive.store` does). What a ref looks like is
`ctxkit.refs`, below the formats."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ctxkit.model import Unit
from ctxkit.refs import carries_ref_text

# The archive `compact` writes when its output goes to stdout: one per user, in the user's data
# folder, where `count`, `guard`, `recall` and `expand` of a file made through a pipe find it.
DEFAULT_STDOUT_ARCHIVE = "piped.ctx.db"


def first_compacted(units: Sequence[Unit]) -> int | None:
    """The index of the first unit that compaction changed or made (it carries a ref into an
    archive, in its metadata or its text), or None: read back from a compacted file, the units
    before it are the ones every recorded provider call up to there really saw."""
    for i, u in enumerate(units):
        if carries_ref(u):
            return i
    return None


def carries_ref(u: Unit) -> bool:
    """Whether compaction changed or made `u`: it carries a ref into an archive, in its
    metadata or its text (a summary ctxkit wrote, not one an agent wrote)."""
    if "ref" in u.meta or u.meta.get("refs"):
        return True
    return carries_ref_text(u.content)


def user_data_dir() -> str:
    """ctxkit's folder in the user's data folder: `$CTXKIT_DATA_DIR`, else
    `$XDG_DATA_HOME/ctxkit`, else `~/.local/share/ctxkit`."""
    given = os.environ.get("CTXKIT_DATA_DIR")
    if given:
        return given
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "ctxkit")


def piped_archive() -> str:
    """The archive of compactions whose output went to stdout (one per user, shared)."""
    return os.path.join(user_data_dir(), DEFAULT_STDOUT_ARCHIVE)


def default_archive_path(output_path: str | None) -> str:
    """`<out>.ctx.db` beside the output file, or the user's piped archive (`piped_archive`)
    when writing to stdout."""
    if output_path is None or output_path in ("", "-"):
        return piped_archive()
    return f"{output_path}.ctx.db"


def archives_for(path: str | None, given: str | None = None) -> list[str]:
    """Where a compacted file's archive may be, in the order to look: the one given, the one
    beside the file, the user's piped archive (a file compact wrote to stdout)."""
    out = [given] if given else []
    if path and path != "-":
        out.append(default_archive_path(path))
    out.append(piped_archive())
    return out
