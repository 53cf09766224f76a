"""Rooms sized to be read (issue "A house to live in"): no module over 800 lines, no function
over 100, no command module over 250. A room that grows past its size is split along a seam."""

from __future__ import annotations

import ast
from pathlib import Path

import ctxkit

SRC = Path(ctxkit.__file__).parent
MODULE_LINES = 800
FUNCTION_LINES = 100
COMMAND_LINES = 250


def _sources() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(SRC)), path.read_text(encoding="utf-8"))
        for path in sorted(SRC.rglob("*.py"))
    ]


def _lines(text: str) -> int:
    return len(text.splitlines())


def test_no_module_over_800_lines() -> None:
    found = [f"{name}: {_lines(text)}" for name, text in _sources() if _lines(text) > MODULE_LINES]
    assert found == []


def test_no_command_module_over_250_lines() -> None:
    found = [
        f"{name}: {_lines(text)}"
        for name, text in _sources()
        if name.startswith("cli/") and _lines(text) > COMMAND_LINES
    ]
    assert found == []


def _long_functions(text: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES:
                found.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_over_100_lines() -> None:
    assert [f for name, text in _sources() for f in _long_functions(text, name)] == []


def test_the_function_check_counts_a_long_function() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES))
    assert _long_functions(f"def f():\n{body}\n", "m.py") == [f"m.py:1 f ({FUNCTION_LINES + 1} lines)"]
    assert _long_functions("def g():\n    return 1\n", "m.py") == []
