"""One budget: `count`, `guard` and `compact` decide on the same figure on every real log that
records provider usage (`counting.measure`), and `guard -> compact -> guard` at one limit ends in
exit 0 (and `expand` gives every record back) or in a refusal that names what cannot be removed."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.errors import CtxkitError
from ctxkit.formats import read_path

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
FOLDERS = (
    "claude-code", "codex", "mini-swe-agent", "aider", "gemini-cli", "opencode", "copilot-cli", "openhands",
)


def _logs() -> list[Path]:
    out = []
    for folder in FOLDERS:
        for path in sorted((REALDATA / folder).glob("*")) if (REALDATA / folder).is_dir() else []:
            try:
                transcripts = list(read_path(str(path)))
            except CtxkitError:
                continue  # a format whose reader has not landed yet
            if transcripts and (transcripts[0].metadata.get("provider_usage") or {}).get("calls"):
                out.append(path)
    return out


LOGS = _logs() if REALDATA.is_dir() else []


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args))
    return r.exit_code, r.stdout, r.stderr


def count_row(path: Path) -> dict:
    code, out, err = run("count", str(path), "--format", "jsonl")
    assert code == 0, err
    return json.loads(out.splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("where", ["a third of the total", "room above the unlogged region"])
@pytest.mark.parametrize("path", LOGS, ids=[f"{p.parent.name}/{p.name[:40]}" for p in LOGS])
def test_guard_compact_guard_converges(path: Path, where: str, tmp_path: Path) -> None:
    before = count_row(path)
    total, unlogged = before["total"], before.get("unlogged", 0)
    assert unlogged > 0 or before["recorded"] is not None
    if where == "a third of the total":
        limit = total // 3
    else:  # the units get a third of their own size below the guard's compact threshold
        limit = math.ceil((unlogged + (total - unlogged) / 3 + 1) / 0.95)
    code, _, _ = run("guard", str(path), "--limit", str(limit))
    assert code == 5  # the whole log, recorded usage included, is over the limit
    out = tmp_path / ("out" + path.suffixes[-1])
    report = tmp_path / "report.json"
    code, _, err = run("compact", str(path), "--limit", str(limit), "-o", str(out), "--report", str(report))
    if code != 0:
        # a refusal names what no strategy can remove, and only when it does not fit
        assert code in (1, 2), err
        names = ("below the least a compaction can leave", "leaves no room", "cannot be removed")
        assert any(n in err for n in names), err
        if unlogged > limit:
            assert "what every call carries and the log never shows" in err
        assert not out.exists()
        named = re.search(r"give --limit ([\d,]+) or more", err)
        if named:  # the limit a refusal names is one compaction meets
            least = named.group(1).replace(",", "")
            code, _, err = run("compact", str(path), "--limit", least, "-o", str(out))
            assert code == 0, err
            assert count_row(out)["total"] <= int(least)
        return
    after = json.loads(report.read_text())["tokens"]["after"]
    again = count_row(out)
    assert again["total"] == after  # one figure, whatever the file holds
    assert after < total
    assert again.get("unlogged", 0) == unlogged
    code, _, err = run("guard", str(out), "--limit", str(limit))
    assert code == 0, err
    back = tmp_path / ("back" + path.suffixes[-1])
    code, _, err = run("expand", str(out), "-o", str(back))
    assert code == 0, err
    assert _records(back) == _records(path)  # every record of the log back


def _records(path: Path) -> object:
    data = path.read_bytes()
    try:
        return json.loads(data)
    except ValueError:
        pass
    try:
        return [json.loads(line) for line in data.splitlines() if line.strip()]
    except ValueError:
        return data  # a Markdown chat history: byte for byte


@pytest.mark.skipif(not LOGS, reason="../shared/realdata is absent")
def test_every_claude_code_and_codex_log_takes_part() -> None:
    folders = {p.parent.name for p in LOGS}
    assert {"claude-code", "codex", "mini-swe-agent"} <= folders
    assert sum(p.parent.name == "claude-code" for p in LOGS) >= 13
