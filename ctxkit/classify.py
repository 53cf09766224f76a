"""Content type of a unit from its role, tool name and the first few KB of its content.

Deterministic and cheap: only the head of the content is looked at, and the patterns are plain
substring tests or anchored regexes that cannot backtrack badly, so a 50 MB tool result costs
the same as a short one.
"""

from __future__ import annotations

import re

from ctxkit.model import Unit

HEAD_CHARS = 4096

# Tools whose results are file contents (source), or plans.
_READ_TOOLS = frozenset(
    {"read", "read_file", "readfile", "view", "open_file", "cat", "str_replace_editor",
     "str_replace_based_edit_tool", "view_file", "notebookread", "get_file_contents"}
)
_PLAN_TOOLS = frozenset({"todowrite", "todoread", "update_plan", "plan", "exitplanmode"})
_LOG_TOOLS = frozenset({"bash", "shell", "execute_bash", "run_command", "terminal", "exec"})

_NUMBERED_LINE = re.compile(r"^\s*\d+(?:\t|→|: |\s\|)", re.M)
_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |function |const |let |var |package |"
    r"#include|public |private |fn |func |impl |struct |interface |export |@\w+|return\b)",
    re.M,
)
_CHECKBOX = re.compile(r"^\s*(?:[-*]|\d+\.)\s*\[[ xX]\]", re.M)
_LOG_MARKERS = (
    "Traceback (most recent call last)",
    "===== ",
    " passed",
    " failed",
    "FAILED ",
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
    "make: ",
    "[INFO]",
    "$ ",
)


def _looks_like_plan(head: str) -> bool:
    if "To Do List" in head or "TODO list" in head or "Todos have been modified" in head:
        return True
    return len(_CHECKBOX.findall(head)) >= 2


def _looks_like_code(head: str) -> bool:
    if len(_NUMBERED_LINE.findall(head)) >= 3:
        return True
    hits = len(_CODE_LINE.findall(head))
    if hits >= 2:
        return True
    braces = head.count("{") + head.count("}")
    semis = head.count(";\n")
    return hits >= 1 and (braces >= 4 or semis >= 2)


def _looks_like_log(head: str, length: int) -> bool:
    score = sum(1 for m in _LOG_MARKERS if m in head)
    if "<returncode>" in head and length > 1500:
        score += 2
    return score >= 2


def classify(unit: Unit) -> str:
    """The content type of a unit: message, tool_call, tool_result, code, log, plan_ref,
    reasoning or summary (see DESIGN.md, canonical records)."""
    if unit.type == "summary" or unit.meta.get("summary"):
        return "summary"
    role = unit.role
    content = unit.content
    if role == "assistant":
        if unit.tool_calls:
            names = {c.name.lower() for c in unit.tool_calls}
            if names and names <= _PLAN_TOOLS:
                return "plan_ref"
            return "tool_call"
        if not content.strip() and unit.reasoning:
            return "reasoning"
        if unit.type == "reasoning":
            return "reasoning"
        return "message"
    if role != "tool":
        if role == "user" and content.startswith("This session is being continued from a previous"):
            return "summary"
        return "message"
    name = (unit.name or "").lower()
    head = content[:HEAD_CHARS]
    if name in _PLAN_TOOLS or _looks_like_plan(head):
        return "plan_ref"
    if name in _READ_TOOLS:
        return "code"
    # Shell output: a log when it reads like one, code when it is a file dump (cat, sed -n).
    if name in _LOG_TOOLS or "<returncode>" in head[:200]:
        if _looks_like_log(head, len(content)):
            return "log"
        if _looks_like_code(head):
            return "code"
        return "log" if len(content) > 2000 else "tool_result"
    if _looks_like_code(head):
        return "code"
    if _looks_like_log(head, len(content)):
        return "log"
    return "tool_result"
