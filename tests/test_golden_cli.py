"""Golden CLI outputs of every command on real transcripts (guard's policy cases have their own).

A case is `tests/data/<command>/<case>.args`: one ctxkit command per line (shell words, `#` starts
a comment, `# exit: N` is the exit code the last command must give, default 0). In the words,
`{in}` is the case's input `<case>.in.*`, `{data}` the command's data folder (the commands run
in it, so files are named relative to it), `{tmp}` a scratch folder and `{out}` the folder whose
files are compared. Expected, exactly:

- `<case>.stdout` and `<case>.stderr`: what the commands printed, in order, with the scratch
  folder written as `{tmp}` and archive timestamps as `{time}`;
- `<case>.out.<name>`: each file the commands wrote into `{out}` (and no other file there).

The clock is frozen (timings print as 0), so rewards and reports are the same on any machine.
Rewrite after an intended change with `pytest tests/test_golden_cli.py --regen-goldens`.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxkit.cli import cli

DATA = Path(__file__).parent / "data"
COMMANDS = (
    "bench", "compact", "config", "count", "expand", "guard", "models", "recall", "report",
    "score-rl", "simulate",
)
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")  # archive times (UTC, seconds)


def _cases(command: str) -> list[str]:
    return sorted(p.name.removesuffix(".args") for p in (DATA / command).glob("*.args"))


def _parse(text: str) -> tuple[list[str], int]:
    commands, exit_code = [], 0
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# exit:"):
            exit_code = int(line.split(":", 1)[1])
        elif line and not line.startswith("#"):
            commands.append(line)
    return commands, exit_code


@pytest.fixture
def run_case(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    golden: Callable[[Path, str | bytes], None],
    regen_goldens: bool,
) -> Callable[[str, str], None]:
    """`run_case(command, case)`: run the case's commands and compare with its golden files."""

    def run(command: str, case: str) -> None:
        folder = DATA / command
        lines, want_exit = _parse((folder / f"{case}.args").read_text())
        assert lines, f"{case}.args names no command"
        inputs = sorted(folder.glob(f"{case}.in.*"))
        out = tmp_path / "out"
        out.mkdir()
        # run in the data folder so inputs are named relative to it, as they print
        places = {
            "{in}": inputs[0].name if inputs else "{in}",
            "{data}": ".",
            "{tmp}": str(tmp_path),
            "{out}": str(out),
        }
        monkeypatch.chdir(folder)
        monkeypatch.setattr(time, "perf_counter", lambda: 0.0)  # every duration is 0 ms
        stdout, stderr = [], []
        for number, line in enumerate(lines, 1):
            args = [_fill(word, places) for word in shlex.split(line)]
            result = CliRunner().invoke(cli, args, catch_exceptions=False)
            stdout.append(result.stdout)
            stderr.append(result.stderr)
            want = want_exit if number == len(lines) else 0
            assert result.exit_code == want, f"{line}\n{result.stderr}"

        def unplace(text: str) -> str:
            return _STAMP.sub("{time}", text.replace(str(tmp_path), "{tmp}"))

        golden(folder / f"{case}.stdout", unplace("".join(stdout)))
        golden(folder / f"{case}.stderr", unplace("".join(stderr)))
        written = sorted(p.name for p in out.iterdir())
        prefix = f"{case}.out."
        expected = sorted(p.name.removeprefix(prefix) for p in folder.glob(prefix + "*"))
        if regen_goldens:
            for name in set(expected) - set(written):
                (folder / (prefix + name)).unlink()
        else:
            assert written == expected, "the files written into {out}"
        for name in written:
            golden(folder / (prefix + name), unplace((out / name).read_text(encoding="utf-8")))

    return run


def _fill(word: str, places: dict[str, str]) -> str:
    for key, value in places.items():
        word = word.replace(key, value)
    return word


@pytest.mark.parametrize(
    ("command", "case"), [(c, case) for c in COMMANDS for case in _cases(c)]
)
def test_command(command: str, case: str, run_case: Callable[[str, str], None]) -> None:
    run_case(command, case)


def test_every_command_has_cases() -> None:
    assert all(_cases(c) for c in COMMANDS)
