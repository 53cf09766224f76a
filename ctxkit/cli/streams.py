"""The standard streams of a command: a closed stdin, stdout or stderr given a stand-in, and a
reader that left the pipe (`| head`) answered by a quiet exit, as a Unix filter does."""

from __future__ import annotations

import os
import sys


def guard_standard_streams() -> None:
    """Give a closed stdin, stdout or stderr (`>&-`) a stand-in, so a run reports a closed
    stdout in one line and works on without a stderr, instead of failing on `None`.

    The descriptor itself is pointed at /dev/null: a file ctxkit opens next would otherwise get
    number 1 or 2, and whatever is written to "stdout" would land in it."""
    from ctxkit.fileio import ClosedStream

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
                if null != fd:
                    os.dup2(null, fd)
                    os.close(null)
            except OSError:
                pass
            setattr(sys, name, ClosedStream(name, fail=name == "stdout"))
        else:
            if getattr(sys, name) is None:  # open, but Python did not wrap it
                setattr(sys, name, ClosedStream(name, fail=name == "stdout"))


def quiet_exit_on_broken_pipe() -> None:
    """`ctxkit ... | head -1`: the reader left; stop as a Unix filter does, without a word.

    stdout is pointed at /dev/null so the interpreter's final flush cannot raise again.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(141)  # 128 + SIGPIPE, what a shell reports for a filter killed by the pipe
