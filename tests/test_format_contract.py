"""The format contract (`ctxkit.formats.base.Format`): every registered format implements it in
full, and a new format is its own module plus one registry line: the CLI's choices, detection,
`config --init` and `sdk.problems` follow from the registry alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctxkit.formats import FORMATS, WRITABLE, Format, read_text, write_transcripts
from ctxkit.formats.base import SHAPES
from ctxkit.formats.sdk import problems
from ctxkit.model import ToolCall, Transcript, Unit

REPO = Path(__file__).resolve().parents[1]

TOY = '''"""A toy format: one {"who", "said"} object per line."""

from __future__ import annotations

from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.common import Source
from ctxkit.model import Transcript, Unit


def detect(records: list[Any]) -> bool:
    return bool(records) and all(isinstance(r, dict) and set(r) == {"who", "said"} for r in records[:20])


def read(records: list[Any], src: Source) -> Transcript:
    units = [Unit(id=f"u{i}", role=r["who"], content=r["said"], raw=r, group=i) for i, r in enumerate(records)]
    return Transcript(units=units, id=src.tid, source_format="toy", layout=src.layout)


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    return [u.raw if t.source_format == "toy" and u.raw else {"who": u.role, "said": u.content} for u in t.units], {}


def validate(data: Any) -> list[str]:
    lines = data.splitlines() if isinstance(data, str) else []
    return [f"line {n + 1}: not a toy record" for n, line in enumerate(lines) if line and '"who"' not in line]


FORMAT = Format(name="toy", label="toy log", shape="log", detect=detect, read=read, write=write, validate=validate)
'''


def _sample() -> Transcript:
    return Transcript(units=[
        Unit(id="s", role="system", content="Be brief."),
        Unit(id="u", role="user", content="List the files."),
        Unit(id="a", role="assistant", content="", tool_calls=[ToolCall("c1", "ls", '{"path": "."}')]),
        Unit(id="r", role="tool", content="a.py\nb.py", tool_call_id="c1", name="ls"),
        Unit(id="z", role="assistant", content="Two files."),
    ], id="sample", source_format="units")


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_implements_the_contract(name: str) -> None:
    fmt = FORMATS[name]
    assert isinstance(fmt, Format) and fmt.name == name and fmt.shape in SHAPES and fmt.label
    for part in (fmt.detect, fmt.read, fmt.write, fmt.validate, fmt.detect_object, fmt.sniff, fmt.looks_like):
        assert callable(part)
    assert name in WRITABLE
    assert fmt.detect([]) is False or not fmt.bare  # no records are no format's (ShareGPT's empty turns are)
    # what it writes it reads back and finds valid
    import io

    out = io.StringIO()
    write_transcripts([_sample()], out, name)
    assert problems(name, out.getvalue()) == []
    (back,) = read_text(out.getvalue(), name)
    assert back.source_format == name
    assert "Two files." in "\n".join(u.content for u in back.units)


def test_a_new_format_is_its_module_and_one_registry_line(tmp_path: Path) -> None:
    """A toy format, added to a copy of the package by its own module and one line in the
    registry, is a choice of --from and --to, is detected, is named by `config --init` and is
    checked by `sdk.problems`, with no other file touched."""
    root = tmp_path / "copy"
    shutil.copytree(REPO / "ctxkit", root / "ctxkit", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "ctxkit" / "formats" / "toy.py").write_text(TOY, encoding="utf-8")
    registry = root / "ctxkit" / "formats" / "registry.py"
    text = registry.read_text(encoding="utf-8")
    assert text.count('    "units",\n') == 1
    registry.write_text(text.replace('    "units",\n', '    "units",\n    "toy",\n'), encoding="utf-8")
    log = tmp_path / "chat.jsonl"
    log.write_text('{"who": "user", "said": "hi"}\n{"who": "assistant", "said": "hello"}\n', encoding="utf-8")
    # -S: no site hooks, so the checkout's own (editable) install does not shadow the copy;
    # the installed libraries come from their folders on PYTHONPATH
    import site

    libs = os.pathsep.join([str(root), *site.getsitepackages()])
    env = {**os.environ, "PYTHONPATH": libs, "PYTHONDONTWRITEBYTECODE": "1"}

    def ctxkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-S", "-m", "ctxkit", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120, check=False)

    where = subprocess.run([sys.executable, "-S", "-c", "import ctxkit; print(ctxkit.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(root))
    for command in ("count", "compact", "expand"):
        shown = ctxkit(command, "--help").stdout
        assert "toy" in shown.split("--from", 1)[1].split("]", 1)[0], command
    assert "toy" in ctxkit("compact", "--help").stdout.split("--to", 1)[1].split("]", 1)[0]
    counted = ctxkit("count", "chat.jsonl")
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout.splitlines()[0])["format"] == "toy"
    assert ctxkit("config", "--init", "x.yaml").returncode == 0
    assert "toy" in (tmp_path / "x.yaml").read_text(encoding="utf-8").rsplit("formats", 1)[1]
    converted = ctxkit("compact", "chat.jsonl", "--to", "openai", "--limit", "100000", "-o", "chat.json")
    assert converted.returncode == 0, converted.stderr
    checked = subprocess.run([sys.executable, "-S", "-c", "from ctxkit.formats.sdk import problems; "
                              "print(problems('toy', open('chat.jsonl').read()))"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, check=True)
    assert checked.stdout.strip() == "[]"
