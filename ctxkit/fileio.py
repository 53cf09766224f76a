"""Atomic output files and spooled stdin: an interrupted run never leaves a half file."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from ctxkit.errors import CtxkitError


def check_writable(path: str | os.PathLike[str], what: str = "output") -> None:
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
            f"cannot write {what} {target}: the directory {directory} is not writable"
        )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temp file beside `path`, then rename it over `path`; on error, remove it.

    The file gets the permissions a plain `open(path, "w")` would give (0666 less the umask),
    not mkstemp's 0600.
    """
    target = os.fspath(path)
    check_writable(target)
    if os.path.exists(target) and not os.path.isfile(target):
        # /dev/null, a named pipe, a terminal: write into it; renaming over it would replace
        # the device itself (as root, for everyone).
        kwargs0: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        try:
            with open(target, mode, **kwargs0) as stream:
                yield stream
        except OSError as exc:
            raise CtxkitError(f"cannot write {target}: {exc.strerror or exc}") from None
        return
    directory = os.path.dirname(os.path.abspath(target))
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory
        )
    except OSError as exc:
        raise CtxkitError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        kwargs: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        with os.fdopen(fd, mode, **kwargs) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
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
    """The bytes of `source`, unchanged, to `path` (or stdout)."""
    with open(source, "rb") as f:
        write_output(path, f.read())


@contextmanager
def spooled_stdin(source: str) -> Iterator[str]:
    """A path for `source`; `-` (stdin) is spooled to a temp file first, so it can be read twice
    (an unchanged transcript is then copied byte for byte)."""
    if source != "-":
        yield source
        return
    fd, tmp = tempfile.mkstemp(prefix="ctxkit-stdin-")
    try:
        with os.fdopen(fd, "wb") as f:
            shutil.copyfileobj(sys.stdin.buffer, f)
        yield tmp
    finally:
        os.unlink(tmp)
