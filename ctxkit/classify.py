"""Content type of a unit from its role, tool name and the first few KB of its content.

Deterministic and cheap: only the head of the content is looked at, and the patterns are plain
substring tests or anchored regexes that cannot backtrack badly, so a 50 MB tool result costs
the same as a short one.
"""

from __future__ import annotations

import re
from itertools import islice

from ctxkit.model import Unit

HEAD_CHARS = 4096

# Tools whose results are file contents (source), or plans.
_READ_TOOLS = frozenset(
    {"read", "read_file", "readfile", "view", "open_file", "cat", "view_file", "notebookread",
     "get_file_contents", "str_replace_editor", "str_replace_based_edit_tool"}
)
_EDIT_TOOLS = frozenset({"edit", "multiedit", "write", "create_file", "edit_file", "apply_patch", "notebookedit"})
_PLAN_TOOLS = frozenset({"todowrite", "todoread", "update_plan", "plan", "exitplanmode"})
_SHELL_TOOLS = frozenset(
    {"bash", "shell", "execute_bash", "run_command", "terminal", "exec", "local_shell", "run_shell_command"}
)

# One pass over line starts finds both numbered lines (cat -n, Read) and source lines. A
# leading "\n" instead of ^ with re.M lets the regex engine jump between newlines.
_CODE_LINE = re.compile(
    r"\n(?:(?P<num> *\d+(?:\t|→|: |:\t| \| |-))|[ \t]*(?:def |class |import |from [\w.]+ import |"
    r"function |const |let |var |package |#include|public |private |fn |func |impl |struct |"
    r"interface |export |@\w+|return\b|if \(|for \(|\}|\)|#!/))"
)
LINE_HEAD_CHARS = 2048
_CHECKBOX = re.compile(r"\n[ \t]*(?:[-*]|\d+\.) ?\[[ xX]\]")
_LOG_MARKERS = (
    "Traceback (most recent call last)",
    "=====",
    " passed",
    " failed",
    "FAILED",
    "PASSED",
    "ERROR",
    "WARN",
    "npm ERR!",
    "npm warn",
    "error:",
    "warning:",
    "Error:",
    "exit code",
    "Exit code",
    "make[",
    "[INFO]",
    "--- FAIL",
    "test result:",
    "Compiling ",
    "\tat ",
)


def _matches(pattern: re.Pattern[str], text: str, limit: int) -> int:
    """How many times `pattern` matches, counting no further than `limit`."""
    return sum(1 for _ in islice(pattern.finditer(text), limit))


def _looks_like_plan(head: str) -> bool:
    if "To Do List" in head or "TODO list" in head or "Todos have been modified" in head:
        return True
    if "[ ]" not in head and "[x]" not in head and "[X]" not in head:
        return False
    return _matches(_CHECKBOX, "\n" + head, 3) >= 3


def _code_score(head: str) -> int:
    numbered = hits = 0
    for m in islice(_CODE_LINE.finditer("\n" + head[:LINE_HEAD_CHARS]), 8):
        if m.group("num") is not None:
            numbered += 1
        else:
            hits += 1
    if numbered >= 3:
        return 3
    if not hits:
        return 0
    braces = head.count("{") + head.count("}") + head.count(";\n")
    return hits + (1 if braces >= 6 else 0)


def _log_score(head: str, length: int) -> int:
    score = sum(1 for m in _LOG_MARKERS if m in head)
    if "<returncode>" in head[:100] and length > 1500:
        score += 1
    return score


def _unescaped(head: str) -> str:
    # Codex wraps shell output in a JSON string; look at it as lines.
    if head.startswith('{"output":'):
        return head.replace("\\n", "\n").replace("\\t", "\t")
    return head


def classify(unit: Unit) -> str:
    """The content type of a unit: message, tool_call, tool_result, code, log, plan_ref,
    reasoning or summary (see DESIGN.md, canonical records)."""
    if unit.type == "summary":
        return "summary"
    role = unit.role
    content = unit.content
    if role == "assistant":
        if unit.tool_calls:
            names = {c.name.lower() for c in unit.tool_calls}
            if names and names <= _PLAN_TOOLS:
                return "plan_ref"
            return "tool_call"
        if unit.type == "reasoning" or (unit.reasoning and not content.strip()):
            return "reasoning"
        return "message"
    if role != "tool":
        if role == "user" and content.startswith("This session is being continued from a previous"):
            return "summary"
        return "message"
    name = (unit.name or "").lower()
    head = _unescaped(content[:HEAD_CHARS])
    if name in _PLAN_TOOLS:
        return "plan_ref"
    if name in _READ_TOOLS:
        return "code"
    code = _code_score(head)
    if name in _EDIT_TOOLS:
        return "code" if code >= 2 else "tool_result"
    if _looks_like_plan(head):
        return "plan_ref"
    log = _log_score(head, len(content))
    if "Traceback (most recent call last)" in head or log >= 2 and log >= code:
        return "log"
    if code >= 3:
        return "code"
    if name in _SHELL_TOOLS or "<returncode>" in head[:100]:
        # Command output: long output is a log even without markers (ls, grep, find).
        return "log" if log or len(content) > 1500 else "tool_result"
    return "tool_result"
