"""Source code: comments and docstrings stripped, bodies collapsed, outlines."""

from __future__ import annotations

import ast
import bisect
import functools
import io
import re
import tokenize
from collections.abc import Callable, Sequence

from ctxkit.compress.base import (
    TOLERANCE,
    Line,
    TokenCounter,
    _count_lines,
    _fit_head,
    _meaningful,
)

_CODE_LINE = re.compile(
    r"^\s*(def |class |async def |import |from \S+ import |return\b|if .*:$|for .*:$|"
    r"function\b|const |let |var |public |private |#include|fn |func |package |}\s*$|.*[;{]\s*$)"
)


_NUMBERED = re.compile(r"^(\s*\d+(?:\t|→))(.*)$")


def _numbered(lines: Sequence[str]) -> list[tuple[str, str]] | None:
    """Split `   12\\t` / `12→` prefixes (Read tool output) from the code, if most lines have one."""
    nonblank = [ln for ln in lines if ln.strip()]
    if not nonblank:
        return None
    hits = [_NUMBERED.match(ln) for ln in lines]
    if sum(1 for m in hits if m) < 0.8 * len(nonblank):
        return None
    return [(m.group(1), m.group(2)) if m else ("", ln) for m, ln in zip(hits, lines, strict=True)]


def compress_code(
    text: str, target_tokens: int, tok: TokenCounter, language: str | None = None
) -> str:
    """Comments and blank lines out, then docstrings to one line, then an outline of signatures.

    Line-number prefixes (`   12\\t`, `12→`) are kept on every surviving line, so a reader
    still knows where each line was. Python output parses whenever the input did.
    """
    lines = text.split("\n")
    numbered = _numbered(lines)
    prefixes = [p for p, _ in numbered] if numbered else [""] * len(lines)
    bodies = [b for _, b in numbered] if numbered else lines
    python = language == "python" or (language is None and _looks_python(bodies))

    # once, not per render: _fit_head renders every line on its own
    width = max((len(p) for p in prefixes), default=0)
    sep = "→" if any(p.endswith("→") for p in prefixes) else "\t"

    def render(kept: list[Line]) -> str:
        out = []
        for idx, body in kept:
            if idx is not None:
                out.append(prefixes[idx] + body)
            elif numbered:
                out.append(" " * (width - 1) + sep + body)
            else:
                out.append(body)
        return "\n".join(out)

    steps: list[Callable[[], list[Line]]] = []
    if python:
        steps += [
            lambda: _py_strip(bodies),
            lambda: _py_strip_docstrings(bodies),
            lambda: _py_collapse(bodies, target_tokens, tok),
            lambda: _py_outline(bodies),
        ]
    else:
        steps += [lambda: _generic_strip(bodies), lambda: _generic_outline(bodies)]
    best = text
    best_tokens = tok.count(text)
    last: list[Line] = [(i, b) for i, b in enumerate(bodies)]
    for step in steps:
        kept = step()
        if not kept or not _meaningful(kept):
            continue  # an outline of nothing but `...` says nothing
        last = kept
        candidate = render(kept)
        n = tok.count(candidate)
        if n < best_tokens:
            best, best_tokens = candidate, n
        if n <= target_tokens * (1 + TOLERANCE):
            return candidate
    # still too big: keep the head of the smallest form, cut where a new top-level statement starts
    must_parse = python and _py_tree(bodies) is not None
    cut = _fit_head(last, target_tokens, tok, render, must_parse)
    if cut is not None and tok.count(cut) < best_tokens:
        return cut
    return best


def _looks_python(lines: Sequence[str]) -> bool:
    joined = "\n".join(lines)
    if re.search(r"^\s*(def|class|async def)\s+\w+.*:\s*(#.*)?$", joined, re.MULTILINE):
        return True
    return (
        bool(re.search(r"^(import \w+|from [\w.]+ import )", joined, re.MULTILINE))
        and ";" not in joined
    )


@functools.lru_cache(maxsize=64)  # each step of `compress_code` asks again for the same code
def _py_comments(source: str) -> dict[int, int] | None:
    """Line (0-based) -> column where a comment starts; None when the code does not tokenize
    and holds a `#` (callers then drop lines that start with one; they only read the dict)."""
    found: dict[int, int] = {}
    if "#" not in source:
        # a comment starts with #: code without one has none, tokenized or not (Python's
        # tokenizer, in Python, was most of the time to shorten a source file)
        return found
    try:
        for t in tokenize.generate_tokens(io.StringIO(source).readline):
            if t.type == tokenize.COMMENT:
                found[t.start[0] - 1] = t.start[1]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return found


def _py_strip(bodies: Sequence[str]) -> list[Line]:
    """Drop comments and blank lines; tokenize finds real comments (not `#` inside strings)."""
    comments = _py_comments("\n".join(bodies))
    out: list[Line] = []
    for i, line in enumerate(bodies):
        if comments is None:
            if line.lstrip().startswith("#") and not line.startswith("#!"):
                continue
        elif i in comments:
            line = line[: comments[i]].rstrip()
        if line.strip():
            out.append((i, line))
    return out


def _py_tree(bodies: Sequence[str]) -> ast.Module | None:
    return _parsed("\n".join(bodies))


@functools.lru_cache(maxsize=64)  # each step of `compress_code` parses the same code again
def _parsed(source: str) -> ast.Module | None:
    """The module `source` parses to (callers only read it), None when it does not."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _docstring_nodes(tree: ast.Module) -> list[ast.Expr]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                found.append(body[0])
    return found


def _py_strip_docstrings(bodies: Sequence[str]) -> list[Line]:
    """Comments and blank lines out, and each docstring cut to its first line."""
    tree = _py_tree(bodies)
    if tree is None:
        return []
    replace: dict[int, str] = {}
    drop: set[int] = set()
    for expr in _docstring_nodes(tree):
        start, end = expr.lineno - 1, (expr.end_lineno or expr.lineno) - 1
        if start == end:
            continue
        assert isinstance(expr.value, ast.Constant)
        first = next((ln.strip() for ln in str(expr.value.value).splitlines() if ln.strip()), "")
        indent = bodies[start][: len(bodies[start]) - len(bodies[start].lstrip())]
        replace[start] = indent + repr(first)
        drop.update(range(start + 1, end + 1))
    stripped = _py_strip(bodies)
    out: list[Line] = []
    for idx, line in stripped:
        assert idx is not None
        if idx in drop:
            continue
        out.append((idx, replace.get(idx, line)))
    return out


def _py_collapse(bodies: Sequence[str], target: int, tok: TokenCounter) -> list[Line]:
    """Docstrings cut, then function bodies replaced by `...`, largest first, until the code
    fits: small functions stay whole for as long as the budget allows."""
    tree = _py_tree(bodies)
    if tree is None:
        return []
    base = _py_strip_docstrings(bodies)
    idxs = [idx if idx is not None else -1 for idx, _ in base]
    counts = _count_lines(tok, [line for _, line in base])
    prefix = [0]
    for n in counts:
        prefix.append(prefix[-1] + n)

    def weight(lo: int, hi: int) -> int:
        return prefix[bisect.bisect_right(idxs, hi)] - prefix[bisect.bisect_left(idxs, lo)]

    ranges: list[tuple[int, int, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0]
            lo = first.lineno - 1
            if bodies[lo][: first.col_offset].strip():
                continue  # body on the signature line
            ranges.append((lo, (node.end_lineno or node.lineno) - 1, first.col_offset))
    ranges.sort(key=lambda r: (-weight(r[0], r[1]), r[0]))
    total = prefix[-1]
    marker = 2
    # owner[i] = start of the outermost collapsed body holding line i; function bodies nest
    # properly, so one array keeps this linear in the number of lines
    owner: list[int | None] = [None] * len(bodies)
    collapsed: dict[int, tuple[int, int, int]] = {}
    for lo, hi, indent in ranges:
        if total <= target:
            break
        if owner[lo] is not None:
            continue  # inside a body already collapsed
        inner: set[int] = set()
        for i in range(lo, hi + 1):
            held = owner[i]
            if held is not None:
                inner.add(held)
            owner[i] = lo
        saved = sum(weight(collapsed[c][0], collapsed[c][1]) - marker for c in inner)
        total -= weight(lo, hi) - saved - marker
        for c in inner:
            del collapsed[c]
        collapsed[lo] = (lo, hi, indent)
    if not collapsed:
        return base
    out: list[Line] = []
    emitted: set[int] = set()
    for idx, line in base:
        assert idx is not None
        holder = owner[idx]
        if holder is None:
            out.append((idx, line))
        elif holder not in emitted:
            emitted.add(holder)
            out.append((None, " " * collapsed[holder][2] + "..."))
    return out


def _py_outline(bodies: Sequence[str]) -> list[Line]:
    """Imports, short module-level assignments, class and def signatures with `...` bodies."""
    tree = _py_tree(bodies)
    if tree is None:
        return []
    keep: list[Line] = []

    def span(node: ast.stmt) -> tuple[int, int]:
        first = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
        return first - 1, (node.end_lineno or node.lineno) - 1

    def visit(stmts: list[ast.stmt]) -> int:
        kept = 0
        for node in stmts:
            start, end = span(node)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                first = node.body[0]
                body_line = first.lineno - 1
                if bodies[body_line][: first.col_offset].strip():
                    # the body shares a line with the signature: keep the whole (short) node
                    keep.extend((i, bodies[i]) for i in range(start, end + 1))
                    kept += 1
                    continue
                keep.extend((i, bodies[i]) for i in range(start, body_line))
                inner = visit(node.body) if isinstance(node, ast.ClassDef) else 0
                if inner == 0:
                    keep.append((None, " " * first.col_offset + "..."))
                kept += 1
            elif isinstance(node, ast.Import | ast.ImportFrom) or (
                isinstance(node, ast.Assign | ast.AnnAssign)
                and start == end
                and len(bodies[start]) <= 100
            ):
                keep.extend((i, bodies[i]) for i in range(start, end + 1))
                kept += 1
        return kept

    visit(tree.body)
    if not keep:
        return []
    # comments on kept lines go too
    comments = _py_comments("\n".join(bodies)) or {}
    out: list[Line] = []
    for idx, line in keep:
        if idx is not None and idx in comments:
            line = line[: comments[idx]].rstrip()
            if not line.strip():
                continue
        out.append((idx, line))
    return out


_C_LIKE = re.compile(r"[;{}]\s*$", re.MULTILINE)


_PREPROCESSOR = re.compile(
    r"^#\s*(include|define|if|ifdef|ifndef|endif|else|elif|pragma|undef|import)\b"
)


def _generic_strip(bodies: Sequence[str]) -> list[Line]:
    """Comment lines (`//`, `/* */`, `#` outside C) and blank lines out."""
    c_like = len(_C_LIKE.findall("\n".join(bodies))) >= 3
    out: list[Line] = []
    in_block = False
    for i, line in enumerate(bodies):
        s = line.strip()
        if in_block:
            if "*/" in s:
                in_block = False
            continue
        if not s or s.startswith("//"):
            continue
        if s.startswith("/*"):
            in_block = "*/" not in s
            continue
        if s.startswith("#") and not s.startswith("#!") and not (c_like and _PREPROCESSOR.match(s)):
            continue
        out.append((i, line))
    return out


_SIGNATURE = re.compile(
    r"^\s*(export\s+)?(default\s+)?(public|private|protected|static|async|abstract|final|pub|"
    r"func|fn|def|class|interface|struct|enum|impl|trait|type|function|module|package|import|"
    r"using|namespace)\b"
)


def _generic_outline(bodies: Sequence[str]) -> list[Line]:
    """Signature-looking and unindented lines, with `...` where bodies were."""
    stripped = _generic_strip(bodies)
    out: list[Line] = []
    gap = False
    for idx, line in stripped:
        if _SIGNATURE.match(line) or (line[:1] not in (" ", "\t") and line.strip()):
            if gap:
                out.append((None, "    ..."))
            out.append((idx, line))
            gap = False
        else:
            gap = True
    if gap:
        out.append((None, "    ..."))
    return out
