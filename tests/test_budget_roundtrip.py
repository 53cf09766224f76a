"""One budget: `count`, `guard` and `compact` decide on the same figure on every real log that
records provider usage (`counting.measure`), and `guard -> compact -> guard` at one limit ends in
exit 0 or in a refusal that names what cannot be removed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.errors import CtxkitError
from ctxkit.formats import read_path

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
FOLDERS = ("claude-code", "codex", "mini-swe-agent", "aider", "gemini-cli", "opencode", "copilot-cli")
# Logs Codex compacted itself: its own compaction record is written after ctxkit's summary and
# read back as the start of the context (a codex writer bug, failing on main as
# tests/test_formats_sdk.py::test_app_log_compact_then_expand[codex])
CODEX_COMPACTED = {
    "EntityProcess__agentv__checkpoints-v1__00-34f597b72d-1@d5f0c1dc.jsonl",
    "savekirk__session-bridge__checkpoints-v1__27-787ded68f8-0@5ba663ad.jsonl",
}


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


def _compacted_by_its_agent(src: Path) -> bool:
    """The log holds Claude Code's own compaction summary."""
    return b'"isCompactSummary":true' in src.read_bytes().replace(b" ", b"")


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
    if path.name in CODEX_COMPACTED:
        pytest.xfail("the codex writer puts Codex's own compaction after ctxkit's summary")
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
        names = ("below what no strategy can remove", "leaves no room", "cannot be removed")
        assert any(n in err for n in names), err
        if unlogged > limit:
            assert "what the log never shows (the unlogged region of recorded usage)" in err
        assert not out.exists()
        return
    after = json.loads(report.read_text())["tokens"]["after"]
    again = count_row(out)
    assert again["total"] == after  # one figure, whatever the file holds
    if after > total and _compacted_by_its_agent(path):
        # on main too: ctxkit compact --limit 33000 of templar a46211b7, then ctxkit count of
        # the output, gives 132,950 tokens for a 92,571-token log
        pytest.xfail(
            "a Claude Code log Claude Code had compacted, once summarize_old has run, reads back "
            "with the records before Claude Code's compaction (claude-code writer/reader)"
        )
    assert after < total
    assert again.get("unlogged", 0) == unlogged
    code, _, err = run("guard", str(out), "--limit", str(limit))
    assert code == 0, err


@pytest.mark.skipif(not LOGS, reason="../shared/realdata is absent")
def test_every_claude_code_and_codex_log_takes_part() -> None:
    folders = {p.parent.name for p in LOGS}
    assert {"claude-code", "codex", "mini-swe-agent"} <= folders
    assert sum(p.parent.name == "claude-code" for p in LOGS) >= 13
