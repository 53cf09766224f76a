"""Logs of today's agents the project had not seen (issue 34): read as their format, counted
within 2% of an independent reading, or refused with what was found and the flag to try; never
misread (a chat export as a system prompt, one agent's log as another's)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.formats import read_path, write_transcripts
from ctxkit.tokens import count_transcript, get_tokenizer

DATA = Path(__file__).parent / "data" / "new_logs"


def _run(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _count(path: Path) -> int:
    (t,) = read_path(str(path))
    return count_transcript(t, get_tokenizer("cl100k_base")).total


# ---------------------------------------------------------------- Gemini CLI sessions

# A read_many_files call as Gemini CLI before 0.1x recorded it (its convertToFunctionResponse:
# a tool's many parts after a functionResponse of "Tool execution succeeded."), the shape public
# `/chat share` exports of such sessions show. Each file's text is a part of its own.
_FILES = ["--- a.py ---\n" + "def f(x):\n    return x * 2\n" * 40, "--- b.md ---\n" + "Some notes on the design.\n" * 60]
_SESSION = {
    "sessionId": "s1", "projectHash": "p", "startTime": "2025-11-02T10:00:00.000Z",
    "lastUpdated": "2025-11-02T10:01:00.000Z",
    "messages": [
        {"id": "m1", "timestamp": "2025-11-02T10:00:00.000Z", "type": "user", "content": "read a.py and b.md"},
        {"id": "m2", "timestamp": "2025-11-02T10:00:05.000Z", "type": "gemini", "content": "",
         "toolCalls": [{"id": "read_many_files-1", "name": "read_many_files", "args": {"paths": ["a.py", "b.md"]},
                        "result": [{"functionResponse": {"id": "read_many_files-1", "name": "read_many_files",
                                                         "response": {"output": "Tool execution succeeded."}}},
                                   *({"text": f} for f in _FILES)],
                        "status": "success", "timestamp": "2025-11-02T10:00:05.000Z"}],
         "model": "gemini-2.5-pro"},
        {"id": "m3", "timestamp": "2025-11-02T10:00:09.000Z", "type": "gemini", "content": "Both files are read."},
    ],
}


def test_a_gemini_cli_call_result_counts_every_part_it_sent(tmp_path: Path) -> None:
    path = tmp_path / "session-1.json"
    text = json.dumps(_SESSION, indent=2)
    path.write_text(text)
    (t,) = read_path(str(path))
    (result,) = [u for u in t.units if u.role == "tool"]
    assert result.content.startswith("Tool execution succeeded.\n--- a.py ---") and result.content.endswith(_FILES[1])
    tok = get_tokenizer("cl100k_base")
    independent = sum(tok.count(s) for s in ["read a.py and b.md", json.dumps({"paths": ["a.py", "b.md"]}),
                                             "Tool execution succeeded.", *_FILES, "Both files are read."])
    ours = count_transcript(t, tok).total
    assert abs(ours - independent) <= 0.02 * independent + 30, (ours, independent)  # + the per-message overhead
    buf = io.StringIO()
    write_transcripts([t], buf)
    assert json.loads(buf.getvalue()) == _SESSION  # written back, every part
