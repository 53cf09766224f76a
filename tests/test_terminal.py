"""A transcript never lands on a terminal: `compact` and `expand` with stdout a terminal refuse
and say what to give (run in a real pseudo-terminal)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).parents[1] / "sample_transcripts" / "tau-bench-airline.json"


def _in_a_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run `ctxkit ARGS` with stdout and stderr on a pseudo-terminal; its exit code and screen."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxkit", *args], cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=follower, stderr=follower, env={**os.environ, "COLUMNS": "200"},
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=120)
    finally:
        os.close(leader)
    return code, b"".join(chunks).decode("utf-8", "replace")


def test_compact_refuses_to_write_a_transcript_to_a_terminal(tmp_path: Path) -> None:
    code, screen = _in_a_terminal(["compact", str(SAMPLE), "--limit", "4000"], tmp_path)
    assert code == 2
    assert "stdout is a terminal: give -o FILE" in screen
    assert '"role"' not in screen  # no transcript on the screen
    assert sorted(os.listdir(tmp_path)) == []  # and no file left in the working directory
    code, screen = _in_a_terminal(
        ["compact", str(SAMPLE), "--limit", "4000", "-o", str(tmp_path / "small.json")], tmp_path
    )
    assert code == 0 and (tmp_path / "small.json").is_file(), screen
    code, screen = _in_a_terminal(["expand", str(tmp_path / "small.json")], tmp_path)
    assert code == 2 and "stdout is a terminal" in screen
