"""Atomic outputs: whole or nothing, normal permissions, devices and pipes written in place."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from ctxkit.atomic import atomic_writer, write_bytes_atomic
from ctxkit.errors import CtxkitError
from ctxkit.fileio import check_writable


def test_whole_file_with_plain_permissions(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    write_bytes_atomic(target, b"[]\n")
    assert target.read_bytes() == b"[]\n"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask


def test_failure_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_writer(target) as out:
        out.write("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_named_pipe_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_bytes_atomic(fifo, b"data\n")
    reader.join(timeout=10)
    assert got == [b"data\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("case", ["directory", "missing folder"])
def test_unwritable_targets_are_one_clear_error(case: str, tmp_path: Path) -> None:
    target = tmp_path if case == "directory" else tmp_path / "nope" / "x.json"
    with pytest.raises(CtxkitError, match=f"cannot write output {target}"):
        check_writable(target)
    with pytest.raises(CtxkitError, match=f"cannot write output {target}"):
        write_bytes_atomic(target, b"x")
