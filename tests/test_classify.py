"""classify: the content type of a unit from role, tool name and the head of its content."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ctxkit.classify import HEAD_CHARS, classify
from ctxkit.formats import read_path
from ctxkit.model import ToolCall, Unit

PYTHON_FILE = '''import os
from pathlib import Path


class Loader:
    def __init__(self, root):
        self.root = Path(root)

    def load(self, name):
        return (self.root / name).read_text()
'''

PYTEST_LOG = """============================= test session starts ==============================
platform linux -- Python 3.11.5, pytest-8.0.0
collected 12 items

tests/test_a.py ....F.......                                             [100%]
FAILED tests/test_a.py::test_five - AssertionError: assert 1 == 2
========================= 1 failed, 11 passed in 0.31s =========================
"""


def tool(content: str, name: str | None = None) -> Unit:
    return Unit(id="r", role="tool", content=content, tool_call_id="c", name=name)


@pytest.mark.parametrize(
    ("unit", "expected"),
    [
        (Unit(id="s", role="system", content="You are helpful."), "message"),
        (Unit(id="u", role="user", content="Fix the bug in loader.py"), "message"),
        (Unit(id="a", role="assistant", content="Done, the loader now caches."), "message"),
        (Unit(id="a", role="assistant", content="", tool_calls=[ToolCall("c", "Bash", "{}")]), "tool_call"),
        (Unit(id="a", role="assistant", content="", tool_calls=[ToolCall("c", "TodoWrite", "{}")]), "plan_ref"),
        (Unit(id="a", role="assistant", content="", reasoning="Let me think about the cache."), "reasoning"),
        (Unit(id="u", role="user", type="summary", content="Earlier: we fixed X."), "summary"),
        (Unit(id="u", role="user", content="This session is being continued from a previous conversation..."), "summary"),
        (tool('{"status": "ok", "reservation_id": "ABC123"}', "get_reservation_details"), "tool_result"),
        (tool("     1→import os\n     2→import sys\n     3→\n     4→def main():", "Read"), "code"),
        (tool(PYTHON_FILE, "bash"), "code"),
        (tool("<returncode>0</returncode>\n<output>\n" + PYTHON_FILE + "</output>", None), "code"),
        (tool(PYTEST_LOG, "bash"), "log"),
        (tool("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom", "shell"), "log"),
        (tool("<returncode>0</returncode>\n<output>\n" + "a.txt\n" * 400 + "</output>", "bash"), "log"),
        (tool("npm ERR! code ENOENT\nnpm ERR! syscall open\nnpm ERR! path /x/package.json", "Bash"), "log"),
        (tool("Todos have been modified successfully.", "TodoWrite"), "plan_ref"),
        (tool("## To Do List\n- [x] read the code\n- [ ] write the fix\n- [ ] run tests", "think"), "plan_ref"),
        (tool("- [x] one\n- [ ] two\n- [ ] three\n", None), "plan_ref"),
        (tool("The file /x/a.py has been updated.\n   10→def f():\n   11→    return 1\n   12→", "Edit"), "code"),
        (tool("Applied 3 edits to /x/notes.md", "MultiEdit"), "tool_result"),
        (tool("No matches found", "Grep"), "tool_result"),
    ],
)
def test_classify_cases(unit: Unit, expected: str) -> None:
    assert classify(unit) == expected


def test_only_the_head_is_read() -> None:
    # The code is beyond the head: the tail of a 50 MB result cannot change its type.
    big = "plain words here\n" * 400_000 + PYTHON_FILE
    assert len(big) > 100 * HEAD_CHARS
    assert classify(tool(big, "fetch")) == "tool_result"
    assert classify(tool(PYTHON_FILE + big, "fetch")) == "code"


def test_deterministic() -> None:
    u = tool(PYTEST_LOG, "bash")
    assert {classify(u) for _ in range(5)} == {"log"}


def test_readers_type_real_transcripts(realdata: Path) -> None:
    types: Counter[str] = Counter()
    for folder in ("claude-code", "mini-swe-agent", "codex", "openai-chat"):
        for path in sorted((realdata / folder).glob("*.json*")):
            for t in read_path(str(path)):
                types.update(u.type for u in t.units)
                for u in t.units:
                    if u.role == "tool":
                        assert u.type in ("tool_result", "code", "log", "plan_ref")
                    if u.role == "assistant" and u.tool_calls:
                        assert u.type in ("tool_call", "plan_ref")
    for kind in ("message", "tool_call", "tool_result", "code", "log", "plan_ref", "reasoning", "summary"):
        assert types[kind] > 0, kind
