"""Atomic output files and spooled inputs: an interrupted run never leaves a half file, an
output never overwrites an input, and a pipe is read once."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

from ctxkit.errors import CtxkitError, UsageError

# Errors of the disk, not of the caller's code: inside an atomic write they become one line.
_WRITE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS, errno.EACCES, errno.EPERM}
)

PathLike = str | os.PathLike[str]

# Every file this module writes is opened here: the one seam a test replaces to fill the disk.
_fdopen = os.fdopen
PathGroup = PathLike | Iterable[PathLike | None] | None


# ---------------------------------------------------------------- outputs vs inputs


def _identity(path: str) -> tuple[str, Any] | None:
    """What names the file: (device, inode) when it exists, else its resolved path; None for
    stdout (`-`) and devices such as /dev/null, which any number of flags may share."""
    if path in ("", "-"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return None
    return ("inode", (st.st_dev, st.st_ino))


def _named(group: Mapping[str, PathGroup]) -> Iterator[tuple[str, str]]:
    for flag, value in group.items():
        if value is None:
            continue
        values = [value] if isinstance(value, str | os.PathLike) else value
        for v in values:
            if v is not None:
                yield flag, os.fspath(v)


def check_paths(inputs: Mapping[str, PathGroup], outputs: Mapping[str, PathGroup]) -> None:
    """Refuse (exit 2), before anything is written, an output that names an input or another output.

    Keys are the flags as the user typed them (`PATH`, `-o`, `--report`), values a path, a list
    of paths or None. Files are compared by device and inode when they exist (a symlink or a
    hard link is caught), else by resolved path; `-` and devices (/dev/null) never conflict.

        >>> check_paths({"PATH": ["a.json"]}, {"-o": "out.json", "--report": "out.json"})
        Traceback (most recent call last):
        ctxkit.errors.UsageError: -o out.json and --report out.json name the same file; ...
    """
    seen: dict[tuple[str, Any], tuple[str, str, bool]] = {}
    for flag, path in _named(inputs):
        ident = _identity(path)
        if ident is not None and ident not in seen:
            seen[ident] = (flag, path, True)
    for flag, path in _named(outputs):
        ident = _identity(path)
        if ident is None:
            continue
        if ident in seen:
            other_flag, other, is_input = seen[ident]
            if is_input:
                raise UsageError(
                    f"{flag} {path} is the input {other_flag} {other}: writing it would destroy "
                    "the input; give the output another file"
                )
            raise UsageError(
                f"{other_flag} {other} and {flag} {path} name the same file; give each output "
                "its own file"
            )
        seen[ident] = (flag, path, False)


def check_writable(path: PathLike, what: str = "output") -> None:
    """Fail before any work when `path` cannot be written: a directory, or a missing or
    read-only folder. `-` (stdout) always passes."""
    target = os.fspath(path)
    if target == "-":
        return
    if os.path.isdir(target):
        raise CtxkitError(f"cannot write {what} {target}: it is a directory; give a file path")
    directory = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(directory):
        raise CtxkitError(f"cannot write {what} {target}: the directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise CtxkitError(
            f"cannot write {what} {target}: permission denied (the directory {directory} is not "
            "writable)"
        )
    if os.path.exists(target) and not os.access(target, os.W_OK):
        raise CtxkitError(f"cannot write {what} {target}: permission denied")


# ---------------------------------------------------------------- atomic writes


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_error(target: str, exc: OSError) -> CtxkitError:
    """One line for a failed write: `cannot write out.json: No space left on device`."""
    return CtxkitError(f"cannot write {target}: {exc.strerror or exc}")


def _is_special(target: str) -> bool:
    return os.path.exists(target) and not os.path.isfile(target)


@contextmanager
def atomic_writer(path: PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temp file beside `path`, then rename it over `path`; on error, remove it.

    The file gets the permissions a plain `open(path, "w")` would give (0666 less the umask),
    not mkstemp's 0600. A full disk (or any other failed write) is one `CtxkitError` line.
    """
    target = os.fspath(path)
    check_writable(target)
    kwargs: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
    if _is_special(target):
        # /dev/null, a named pipe, a terminal: write into it; renaming over it would replace
        # the device itself (as root, for everyone).
        try:
            with open(target, mode, **kwargs) as stream:
                yield stream
        except OSError as exc:
            raise write_error(target, exc) from None
        return
    directory = os.path.dirname(os.path.abspath(target))
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory
        )
    except OSError as exc:
        raise write_error(target, exc) from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with _fdopen(fd, mode, **kwargs) as out:
            try:
                yield out
            except OSError as exc:
                if exc.errno in _WRITE_ERRNOS and exc.filename is None:
                    raise write_error(target, exc) from None
                raise
            try:
                out.flush()
                os.fsync(out.fileno())
            except OSError as exc:
                raise write_error(target, exc) from None
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise write_error(target, exc) from None
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS and exc.filename is None:
            # the close at the end of `with os.fdopen` flushes the buffer and may hit the disk
            raise write_error(target, exc) from None
        raise


class AtomicSet:
    """Several files written as one: each to a temp file, all renamed only when all are whole.

    A failure before the renames leaves none of them (old files stay as they were)."""

    def __init__(self) -> None:
        self._staged: list[tuple[str, str]] = []  # (temp, target)

    @contextmanager
    def open(self, path: PathLike, mode: str = "w") -> Iterator[IO[Any]]:
        """A file of the set; written in full now, renamed into place with the others."""
        target = os.fspath(path)
        check_writable(target)
        kwargs: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        directory = os.path.dirname(os.path.abspath(target))
        try:
            fd, tmp = tempfile.mkstemp(
                prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory
            )
        except OSError as exc:
            raise write_error(target, exc) from None
        self._staged.append((tmp, target))
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            with _fdopen(fd, mode, **kwargs) as out:
                yield out
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            if exc.errno in _WRITE_ERRNOS and exc.filename is None:
                raise write_error(target, exc) from None
            raise

    def commit(self) -> None:
        for tmp, target in self._staged:
            os.replace(tmp, target)
        self._staged = []

    def discard(self) -> None:
        for tmp, _ in self._staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        self._staged = []


@contextmanager
def atomic_set() -> Iterator[AtomicSet]:
    """`with atomic_set() as files: with files.open(a) as f: ...`: every file or none."""
    files = AtomicSet()
    try:
        yield files
    except BaseException:
        files.discard()
        raise
    files.commit()


def write_bytes_atomic(path: PathLike, data: bytes) -> None:
    """The whole of `data` at `path`, or nothing."""
    with atomic_writer(path, "wb") as out:
        out.write(data)


def write_output(path: str, data: bytes) -> None:
    """`data` to stdout when `path` is `-`, else atomically to the file."""
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        write_bytes_atomic(path, data)


def copy_output(source: str, path: str) -> None:
    """The bytes of `source`, unchanged, to `path` (or stdout), in chunks (a dataset may be big)."""
    with open(source, "rb") as f:
        if path == "-":
            sys.stdout.flush()
            shutil.copyfileobj(f, sys.stdout.buffer)
            sys.stdout.flush()
            return
        with atomic_writer(path, "wb") as out:
            shutil.copyfileobj(f, out)


@contextmanager
def rewindable_output(path: str, *, discard: bool = False) -> Iterator[IO[str]]:
    """A text stream for `path` (`-` = stdout) that is written in full before anything reaches
    the target, so a writer may still start over (`rewrite_with`) once it has seen everything.

    A file is its atomic temp; stdout, a pipe or a device get a temp file copied out at the end
    (memory stays flat whatever the size). With `discard`, nothing reaches the target (a dry run).
    """
    if path != "-" and not discard and not _is_special(path):
        with atomic_writer(path) as out:
            yield out
        return
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as tmp:
        yield tmp
        if discard:
            return
        tmp.flush()
        tmp.seek(0)
        if path == "-":
            sys.stdout.flush()
            shutil.copyfileobj(tmp.buffer, sys.stdout.buffer)
            sys.stdout.flush()
        else:
            with atomic_writer(path, "wb") as out:
                shutil.copyfileobj(tmp.buffer, out)


def rewrite_with(out: IO[str], source: str) -> None:
    """Replace what was written to a `rewindable_output` stream by the bytes of `source`."""
    out.flush()
    out.seek(0)
    out.truncate()
    with open(source, "rb") as f:
        shutil.copyfileobj(f, out.buffer)  # type: ignore[attr-defined]
    out.buffer.flush()  # type: ignore[attr-defined]


# ---------------------------------------------------------------- inputs read once


def needs_spooling(source: str) -> bool:
    """Whether `source` can be read only once: stdin, a pipe (`<(cmd)`, /dev/fd/N), a FIFO, a
    device. A regular file can be opened again; anything else is copied first."""
    if source == "-":
        return True
    try:
        return not stat.S_ISREG(os.stat(source).st_mode)
    except OSError:
        return False  # the reader reports a missing or unreadable file


@contextmanager
def spooled_input(source: str) -> Iterator[str]:
    """A path for `source` that can be read twice (detection, then an unchanged copy).

    stdin and pipes are copied, once, to a temp file in the temp directory ($TMPDIR).
    """
    if not needs_spooling(source):
        yield source
        return
    what = "stdin" if source == "-" else source
    try:
        fd, tmp = tempfile.mkstemp(prefix="ctxkit-stdin-")
    except OSError as exc:
        raise CtxkitError(f"cannot spool {what} to a temp file: {exc.strerror or exc}") from None
    try:
        try:
            with _fdopen(fd, "wb") as f:
                if source == "-":
                    shutil.copyfileobj(sys.stdin.buffer, f)
                else:
                    with open(source, "rb") as src:
                        shutil.copyfileobj(src, f)
        except OSError as exc:
            if exc.errno in _WRITE_ERRNOS:
                raise CtxkitError(
                    f"cannot spool {what} to a temp file: {exc.strerror or exc}"
                ) from None
            raise
        yield tmp
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


spooled_stdin = spooled_input  # the old name
