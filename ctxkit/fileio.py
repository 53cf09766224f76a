"""Atomic output files, bounded and spooled inputs: an interrupted run never leaves a half file,
an output never overwrites an input or replaces a device or a symlink, and a pipe is read once,
up to a limit."""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any, BinaryIO

from ctxkit.errors import CtxkitError, InputError, UsageError

# tempfile and shutil (with the compression modules shutil loads) are imported where a file is
# written: `count` and `guard` of a file write none, and start faster without them.

# Errors of the disk, not of the caller's code: inside an atomic write they become one line.
_WRITE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS, errno.EACCES, errno.EPERM}
)

PathLike = str | os.PathLike[str]

# Every file this module writes is opened here: the one seam a test replaces to fill the disk.
_fdopen = os.fdopen
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
        raise InputError(name, None, f"cannot read: {_strerror(exc)}") from None


def _strerror(exc: OSError) -> str:
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


def _target(target: str, what: str = "output") -> tuple[str, bool]:
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
        raise CtxkitError(f"cannot write {what} {target}: {_strerror(exc)}") from None
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


def _is_stream(target: str) -> bool:
    """Whether an output is written in place (see `_target`); False when it cannot be written
    at all, which the writer then reports."""
    try:
        return _target(target)[1]
    except CtxkitError:
        return False


def check_writable(path: PathLike, what: str = "output") -> None:
    """Fail before any work when `path` cannot be written: a directory, a block device, a
    missing or read-only folder, or `-` while stdout is closed."""
    target = os.fspath(path)
    if target == "-":
        check_stdout()
        return
    place, stream = _target(target, what)
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


# ---------------------------------------------------------------- atomic writes


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_error(target: str, exc: OSError) -> CtxkitError:
    """One line for a failed write: `cannot write out.json: No space left on device`."""
    return CtxkitError(f"cannot write {target}: {exc.strerror or exc}")


# O_TMPFILE: a file with no name until it is whole, so a process killed mid-write (SIGKILL, a
# power cut) leaves nothing behind; it gets its name through /proc/self/fd.
_ANONYMOUS = hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")
_NO_ANONYMOUS = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL})


class _Temp:
    """A temp file in the directory of `target`, renamed over it by `place()`."""

    def __init__(self, target: str) -> None:
        import tempfile

        self.target = target
        self.directory = os.path.dirname(os.path.abspath(target))
        self.name: str | None = None
        self.handle: int | None = None  # keeps an anonymous file alive until it is named
        fd = None
        if _ANONYMOUS:
            try:
                fd = os.open(self.directory, os.O_TMPFILE | os.O_WRONLY, 0o600)
            except OSError as exc:
                if exc.errno not in _NO_ANONYMOUS:
                    raise
        if fd is None:
            fd, self.name = tempfile.mkstemp(
                prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=self.directory
            )
        else:
            self.handle = os.dup(fd)
        self.fd = fd
        os.fchmod(fd, 0o666 & ~_umask())

    def place(self) -> None:
        """Rename the whole file over the target."""
        if self.name is None:
            self.name = self._named()
        os.replace(self.name, self.target)
        self.name = None

    def _named(self) -> str:
        """Give the anonymous file a (hidden) name beside the target, for the rename."""
        import shutil
        import tempfile

        assert self.handle is not None
        source = f"/proc/self/fd/{self.handle}"
        base = os.path.basename(self.target)
        directory = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(100):
                name = f".{base}.{os.urandom(6).hex()}.tmp"
                try:
                    # the dir fds make Python call linkat(AT_SYMLINK_FOLLOW), which follows the
                    # /proc link to the file; a plain link() would try to link the /proc entry
                    os.link(source, name, src_dir_fd=directory, dst_dir_fd=directory)
                    return os.path.join(self.directory, name)
                except FileExistsError:
                    continue
                except OSError:
                    break
        finally:
            os.close(directory)
        # no linkat through /proc here: copy the bytes to a named temp file instead
        fd, name = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=self.directory)
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as out, open(source, "rb") as whole:
                shutil.copyfileobj(whole, out)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            os.unlink(name)
            raise
        return name

    def discard(self) -> None:
        if self.name is not None:
            try:
                os.unlink(self.name)
            except OSError:
                pass
            self.name = None

    def close(self) -> None:
        self.discard()
        if self.handle is not None:
            os.close(self.handle)
            self.handle = None


def create_whole(path: str, data: bytes, mode: int = 0o600) -> bool:
    """`data` as a new file at `path`, which appears whole or not at all and never replaces
    anything: False when `path` exists (made by someone else meanwhile). The file is written
    with no name (`O_TMPFILE`) and linked into place, so a process killed at any moment leaves
    nothing behind; without that, a hidden temp file beside it is linked, then unlinked."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    if _ANONYMOUS:
        try:
            fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY, mode)
        except OSError as exc:
            if exc.errno not in _NO_ANONYMOUS:
                raise
        else:
            try:
                os.fchmod(fd, mode)
                _write_all(fd, data)
                os.fsync(fd)
                dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    # linkat(AT_SYMLINK_FOLLOW) through /proc: the file gets its one name, or
                    # FileExistsError when that name is taken
                    name = os.path.basename(path)
                    os.link(f"/proc/self/fd/{fd}", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    return True
                except FileExistsError:
                    return False
                except OSError as exc:
                    if exc.errno not in (errno.ENOENT, errno.EPERM, errno.EXDEV, errno.EOPNOTSUPP):
                        raise
                finally:
                    os.close(dir_fd)
            finally:
                os.close(fd)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, mode)
        _write_all(fd, data)
        os.fsync(fd)
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
        # a filesystem without hard links: claim the name, then fill it
        try:
            claimed = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            return False
        try:
            _write_all(claimed, data)
            os.fsync(claimed)
        finally:
            os.close(claimed)
        return True
    finally:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _text_kwargs(mode: str) -> dict[str, Any]:
    return {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}


@contextmanager
def atomic_writer(path: PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temp file beside `path`, then rename it over `path`; on error, remove it.

    The file gets the permissions a plain `open(path, "w")` would give (0666 less the umask),
    not mkstemp's 0600. A full disk (or any other failed write) is one `CtxkitError` line. A
    device, a FIFO or /dev/stdout is written through, and a symlink's target replaced (see
    `_target`).
    """
    target = os.fspath(path)
    check_writable(target)
    place, stream = _target(target)
    kwargs = _text_kwargs(mode)
    if stream:
        # appended: /dev/stdout may be a file the shell opened with >>
        try:
            with open(place, mode.replace("w", "a"), **kwargs) as out:
                yield out
        except OSError as exc:
            raise write_error(target, exc) from None
        return
    try:
        temp = _Temp(place)
    except OSError as exc:
        raise write_error(target, exc) from None
    try:
        with _fdopen(temp.fd, mode, **kwargs) as out:
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
            temp.place()
        except OSError as exc:
            raise write_error(target, exc) from None
    except BaseException as exc:
        temp.discard()
        if isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS and exc.filename is None:
            # the close at the end of `with os.fdopen` flushes the buffer and may hit the disk
            raise write_error(target, exc) from None
        raise
    finally:
        temp.close()


class AtomicSet:
    """Several files written as one: each to a temp file, all renamed only when all are whole.

    A failure before the renames leaves none of them (old files stay as they were). stdout
    (`-`), a device or a FIFO of the set gets its bytes at the commit, before the renames, or
    earlier with `write_streams` (a caller that must know they went through before it commits
    something else)."""

    def __init__(self) -> None:
        self._staged: list[tuple[_Temp, str]] = []  # (temp, target)
        self._streams: list[tuple[IO[bytes], str, str]] = []  # (spool, target, where)

    @contextmanager
    def open(self, path: PathLike, mode: str = "w") -> Iterator[IO[Any]]:
        """A file of the set; written in full now, renamed into place with the others."""
        import tempfile

        target = os.fspath(path)
        check_writable(target)
        place, stream = ("-", True) if target == "-" else _target(target)
        kwargs = _text_kwargs(mode)
        if stream:
            spool: IO[bytes] = tempfile.TemporaryFile("w+b")  # noqa: SIM115 - closed at commit
            self._streams.append((spool, target, place))
            if "b" in mode:
                yield spool
                return
            text = io.TextIOWrapper(spool, **kwargs)  # type: ignore[arg-type]
            yield text
            text.flush()
            text.detach()
            return
        try:
            temp = _Temp(place)
        except OSError as exc:
            raise write_error(target, exc) from None
        self._staged.append((temp, target))
        try:
            with _fdopen(temp.fd, mode, **kwargs) as out:
                yield out
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            if exc.errno in _WRITE_ERRNOS and exc.filename is None:
                raise write_error(target, exc) from None
            raise

    def write_streams(self) -> None:
        """Write what is staged for stdout, devices and FIFOs now (the renames wait)."""
        import shutil

        for spool, target, place in self._streams:
            spool.seek(0)
            try:
                if place == "-":
                    sys.stdout.flush()
                    shutil.copyfileobj(spool, sys.stdout.buffer)
                    sys.stdout.flush()
                else:
                    with open(place, "ab") as out:
                        shutil.copyfileobj(spool, out)
            except BrokenPipeError:
                raise
            except OSError as exc:
                raise write_error(target, exc) from None
            spool.close()
        self._streams = []

    def commit(self) -> None:
        """Write the streams, then rename every file into place."""
        self.write_streams()
        for temp, target in self._staged:
            try:
                temp.place()
            except OSError as exc:
                raise write_error(target, exc) from None
        self.discard()

    def discard(self) -> None:
        for temp, _ in self._staged:
            temp.close()
        for spool, _, _ in self._streams:
            spool.close()
        self._staged = []
        self._streams = []


@contextmanager
def atomic_set() -> Iterator[AtomicSet]:
    """`with atomic_set() as files: with files.open(a) as f: ...`: every file or none."""
    files = AtomicSet()
    try:
        yield files
        files.commit()
    finally:
        files.discard()


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
    import shutil

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
    import shutil
    import tempfile

    if path != "-" and not discard and not _is_stream(path):
        with atomic_writer(path) as out:
            yield out
        return
    if path == "-" and not discard:
        check_stdout()
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
    import shutil

    out.flush()
    out.seek(0)
    out.truncate()
    with open(source, "rb") as f:
        shutil.copyfileobj(f, out.buffer)  # type: ignore[attr-defined]
    out.buffer.flush()  # type: ignore[attr-defined]


@contextmanager
def output_directory(path: str) -> Iterator[str]:
    """`path` as a directory of outputs, made if missing; when it was made here and the block
    fails (or is left early), it is removed again with what was written in it, so a failed run
    (an unreachable cluster, a killed task) leaves no directory behind."""
    import shutil

    made = not os.path.isdir(path)
    os.makedirs(path, exist_ok=True)
    try:
        yield path
    except BaseException:
        if made:
            shutil.rmtree(path, ignore_errors=True)
        raise


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
def spooled_input(source: str, max_input_mb: float | None = None) -> Iterator[str]:
    """A path for `source` that can be read twice (detection, then an unchanged copy).

    stdin and pipes are copied, once, to a temp file in the temp directory ($TMPDIR), up to
    the input limit (`max_input_bytes(max_input_mb)`); more is an `InputError`. The
    temp file has no name where the system allows it (the path is /proc/self/fd/N), so even a
    killed run leaves nothing in $TMPDIR.
    """
    import tempfile

    if not needs_spooling(source):
        yield source
        return
    limit = max_input_bytes(max_input_mb)
    what = "stdin" if source == "-" else source
    name = "<stdin>" if source == "-" else source  # as the readers name it
    directory = tempfile.gettempdir()
    try:
        temp = _Temp(os.path.join(directory, "ctxkit-stdin"))
    except OSError as exc:
        raise CtxkitError(f"cannot spool {what} to a temp file: {exc.strerror or exc}") from None
    try:
        try:
            with _fdopen(temp.fd, "wb") as f:
                if source == "-":
                    copy_limited(sys.stdin.buffer, f, limit, name)
                else:
                    try:
                        src = open(source, "rb")  # noqa: SIM115 - closed below
                    except OSError as exc:
                        raise InputError(name, None, f"cannot read: {_strerror(exc)}") from None
                    with src:
                        copy_limited(src, f, limit, name)
        except OSError as exc:
            if exc.errno in _WRITE_ERRNOS:
                raise CtxkitError(
                    f"cannot spool {what} to a temp file: {exc.strerror or exc}"
                ) from None
            raise
        yield temp.name if temp.name is not None else f"/proc/self/fd/{temp.handle}"
    finally:
        temp.close()


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


spooled_stdin = spooled_input  # the old name
