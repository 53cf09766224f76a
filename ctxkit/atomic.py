"""Atomic output files and inputs spooled once: an interrupted run never leaves a half file
(each is written to a temp file, nameless where the system allows, and renamed over its target
when whole), several files can be written as one, and a pipe is copied once to a temp file so it
can be read twice. Which outputs may be written at all is decided by `ctxkit.fileio`."""

from __future__ import annotations

import errno
import io
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from ctxkit.errors import CtxkitError, InputError
from ctxkit.fileio import (
    PathLike,
    check_stdout,
    check_writable,
    copy_limited,
    max_input_bytes,
    strerror,
    write_target,
    written_in_place,
)

# tempfile and shutil (with the compression modules shutil loads) are imported where a file is
# written: `count` and `guard` of a file write none, and start faster without them.

# Errors of the disk, not of the caller's code: inside an atomic write they become one line.
_WRITE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS, errno.EACCES, errno.EPERM}
)

# Every file this module writes is opened here: the one seam a test replaces to fill the disk.
_fdopen = os.fdopen

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
                _fill(fd, data, mode)
                dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    # linkat(AT_SYMLINK_FOLLOW) through /proc: the file gets its one name, or
                    # FileExistsError when that name is taken
                    name = os.path.basename(path)
                    linked = _link_new(
                        lambda: os.link(f"/proc/self/fd/{fd}", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd),
                        (errno.ENOENT, errno.EPERM, errno.EXDEV, errno.EOPNOTSUPP),
                    )
                finally:
                    os.close(dir_fd)
                if linked is not None:
                    return linked
            finally:
                os.close(fd)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        _fill(fd, data, mode)
        linked = _link_new(
            lambda: os.link(tmp, path), (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK)
        )
        if linked is not None:
            return linked
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


def _link_new(link: Callable[[], None], unsupported: tuple[int, ...]) -> bool | None:
    """Give a whole file its one name with `link`: True when linked, False when the name is
    taken, None when this way of linking fails with an errno of `unsupported` (try another)."""
    try:
        link()
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in unsupported:
            raise
        return None


def _fill(fd: int, data: bytes, mode: int) -> None:
    """Give a new file its mode and the whole of `data`, on the disk before it gets its name."""
    os.fchmod(fd, mode)
    _write_all(fd, data)
    os.fsync(fd)


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
    `fileio.write_target`).
    """
    target = os.fspath(path)
    check_writable(target)
    place, stream = write_target(target)
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
        place, stream = ("-", True) if target == "-" else write_target(target)
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

    if path != "-" and not discard and not written_in_place(path):
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
                        raise InputError(name, None, f"cannot read: {strerror(exc)}") from None
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
