"""Inputs and outputs checked before any work: an input is read up to a limit, a closed
standard stream is caught at the start, and an output never names an input or another output,
a directory or a device it would replace. The writing itself is `ctxkit.atomic`."""
from __future__ import annotations

import io
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO

from ctxkit.errors import CtxkitError, InputError, UsageError

PathLike = str | os.PathLike[str]

PathGroup = PathLike | Iterable[PathLike | None] | None

# How much of one input ctxkit holds: one transcript (a JSON document, a line, the lines of one
# log), or a pipe spooled to $TMPDIR. Real logs stay far below (the largest real one we have is
# 20 MB); an endless input (/dev/zero, a program that never stops) meets it in about a second.
DEFAULT_MAX_INPUT_MB = 1024
MAX_INPUT_ENV = "CTXKIT_MAX_INPUT_MB"
MAX_INPUT_HINT = f"--max-input-mb or {MAX_INPUT_ENV}"


def max_input_bytes(mb: float | None = None) -> int:
    """The input limit in bytes: `mb` when given, else $CTXKIT_MAX_INPUT_MB, else 1024 MB."""
    if mb is None:
        text = os.environ.get(MAX_INPUT_ENV, "").strip()
        if not text:
            return DEFAULT_MAX_INPUT_MB * 2**20
        try:
            mb = float(text)
        except ValueError:
            mb = -1.0
        if not mb > 0 or mb == float("inf"):
            raise UsageError(
                f"{MAX_INPUT_ENV} must be a positive number of megabytes, got {text!r}"
            )
    return max(1, int(mb * 2**20))


def megabytes(n_bytes: int) -> str:
    """`1,024 MB`, `0.5 MB`: a limit as people set it."""
    mb = n_bytes / 2**20
    return f"{mb:,.0f} MB" if mb >= 10 else f"{mb:,.3g} MB"


def too_large(limit: int, what: str = "input") -> str:
    """The problem text of an input over the limit."""
    return (
        f"{what} larger than the {megabytes(limit)} input limit; raise {MAX_INPUT_HINT} "
        "if it really is one transcript"
    )


def read_limited(stream: BinaryIO, limit: int, path: str, line: int | None = None) -> bytes:
    """The rest of `stream`, or `InputError` once more than `limit` bytes came."""
    data = stream.read(limit + 1)
    if data is not None and len(data) > limit:
        raise InputError(path, line, too_large(limit))
    return data or b""


def read_file_limited(path: str, limit: int | None = None) -> bytes:
    """The bytes of a file (`-` = stdin), up to the input limit; errors name the file."""
    limit = max_input_bytes() if limit is None else limit
    name = "<stdin>" if path == "-" else path
    if path == "-":
        if stdin_is_closed():
            raise InputError(name, None, "cannot read: stdin is closed")
        return read_limited(sys.stdin.buffer, limit, name)
    try:
        with open(path, "rb") as f:
            return read_limited(f, limit, name)
    except FileNotFoundError:
        raise InputError(name, None, "no such file") from None
    except PermissionError:
        raise InputError(name, None, "permission denied") from None
    except IsADirectoryError:
        raise InputError(name, None, "is a directory; give a file") from None
    except OSError as exc:
        raise InputError(name, None, f"cannot read: {strerror(exc)}") from None


def strerror(exc: OSError) -> str:
    """An OSError's reason as a sentence goes on: `no such file or directory`."""
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]


# ---------------------------------------------------------------- closed standard streams


class ClosedStream(io.TextIOBase):
    """Stands in for stdin, stdout or stderr when the process started with it closed (`>&-`).

    Data written to a closed stdout has nowhere to go: the write is one error line (exit 1),
    like `echo hi >&-` in a shell. A closed stderr swallows what people would have read, so the
    run still does its work. A closed stdin reads as empty."""

    def __init__(self, name: str, *, fail: bool) -> None:
        super().__init__()
        self.name = name
        self._fail = fail
        self.buffer = _ClosedBuffer(self)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"  # what click checks before it wraps a stream of its own around this one

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "strict"

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return self.name == "stdin"

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:  # type: ignore[override]
        self.refuse()
        return len(text)

    def read(self, size: int | None = -1) -> str:
        return ""

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        return ""

    def flush(self) -> None:
        pass

    def refuse(self) -> None:
        if self._fail:
            raise CtxkitError(
                f"cannot write to {self.name}: it is closed; redirect it (> FILE or > /dev/null) "
                "or give an output file"
            )


class _ClosedBuffer(io.BufferedIOBase):
    def __init__(self, owner: ClosedStream) -> None:
        super().__init__()
        self._owner = owner

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return self._owner.name == "stdin"

    def write(self, data: Any) -> int:
        self._owner.refuse()
        return len(data)

    def read(self, size: int | None = -1) -> bytes:
        return b""

    def read1(self, size: int = -1) -> bytes:
        return b""

    def peek(self, size: int = 0) -> bytes:
        return b""

    def readline(self, size: int | None = -1) -> bytes:
        return b""

    def flush(self) -> None:
        pass


def stdout_is_closed() -> bool:
    """Whether the process started with stdout closed (see `ClosedStream`)."""
    return sys.stdout is None or isinstance(sys.stdout, ClosedStream)


def stdin_is_closed() -> bool:
    """Whether the process started with stdin closed."""
    return sys.stdin is None or isinstance(sys.stdin, ClosedStream)


def check_stdout() -> None:
    """Fail before any work when data is to go to a closed stdout."""
    if stdout_is_closed():
        ClosedStream("stdout", fail=True).refuse()


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
    An output `-` while stdout is closed fails here too (exit 1), before any work.

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
        if path == "-":
            check_stdout()
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


# /dev/stdout, /dev/fd/3, /proc/self/fd/1: a descriptor of this process, whatever it is open on
_DESCRIPTOR = re.compile(
    r"/(?:dev/(?:fd/\d+|stdout|stderr|stdin)|proc/(?:self|thread-self|\d+)/fd/\d+)"
)


def _names_a_descriptor(path: str) -> bool:
    """Whether `path`, or a symlink on the way from it, is a /dev/stdout-style path."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on a chain of links
        if _DESCRIPTOR.fullmatch(current):
            return True
        try:
            link = os.readlink(current)
        except OSError:
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), link))
    return False


def write_target(target: str, what: str = "output") -> tuple[str, bool]:
    """Where an output named `target` is written, and whether in place (True) or by rename.

    A FIFO, a character device (/dev/null, a terminal) and a /dev/stdout-style path are written
    through: renaming over them would swap the device for a regular file (as root, for the
    whole machine). A symlink stays a symlink: the file it points to is replaced. A directory,
    a block device or a socket is refused.
    """
    if _names_a_descriptor(target):
        return target, True
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:  # a loop of links, a component that is not a directory
        raise CtxkitError(f"cannot write {what} {target}: {strerror(exc)}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise CtxkitError(f"cannot write {what} {target}: it is a directory; give a file path")
        if stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            kind = "block device" if stat.S_ISBLK(st.st_mode) else "socket"
            raise CtxkitError(f"cannot write {what} {target}: it is a {kind}, not a file")
        if not stat.S_ISREG(st.st_mode):
            return target, True
    if os.path.islink(target):
        return os.path.realpath(target), False
    return target, False


def written_in_place(target: str) -> bool:
    """Whether an output is written in place (see `write_target`); False when it cannot be
    written at all, which the writer then reports."""
    try:
        return write_target(target)[1]
    except CtxkitError:
        return False


def check_writable(path: PathLike, what: str = "output") -> None:
    """Fail before any work when `path` cannot be written: a directory, a block device, a
    missing or read-only folder, or `-` while stdout is closed."""
    target = os.fspath(path)
    if target == "-":
        check_stdout()
        return
    place, stream = write_target(target, what)
    if stream:
        if os.path.exists(place) and not os.access(place, os.W_OK):
            raise CtxkitError(f"cannot write {what} {target}: permission denied")
        return
    directory = os.path.dirname(os.path.abspath(place))
    if not os.path.isdir(directory):
        raise CtxkitError(f"cannot write {what} {target}: the directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise CtxkitError(
            f"cannot write {what} {target}: permission denied (the directory {directory} is not "
            "writable)"
        )
    if os.path.exists(place) and not os.access(place, os.W_OK):
        raise CtxkitError(f"cannot write {what} {target}: permission denied")


def copy_limited(src: BinaryIO, dst: BinaryIO, limit: int, what: str) -> None:
    """Copy `src` to `dst`; `InputError` naming `what` once more than `limit` bytes came.

    A stream whose first chunk is binary (a NUL byte) and not Parquet stops after that chunk:
    it is no transcript, and the reader says so at its first line (/dev/zero is not copied to
    the limit first)."""
    copied = 0
    while True:
        chunk = src.read(1 << 20)
        if not chunk:
            return
        if not copied and b"\x00" in chunk[:8192] and not chunk.startswith(b"PAR1"):
            dst.write(chunk)
            return
        copied += len(chunk)
        if copied > limit:
            raise InputError(
                what, None, too_large(limit, "input") + " (a pipe is copied to $TMPDIR first)"
            )
        dst.write(chunk)
