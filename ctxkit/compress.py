"""Type-aware compressors: shrink one text to about a token target, keeping what matters.

Code loses comments and blank lines first (indentation untouched, so Python still parses),
then becomes an outline of signatures. Logs collapse repeats and keep the head, every
error/warning/traceback line and the tail. JSON keeps every key and elides long arrays and
strings. Prose keeps its most informative sentences, in order. Every compressor is
deterministic and returns the best it can when the target is out of reach.
"""

from __future__ import annotations

import ast
import bisect
import io
import json
import math
import re
import tokenize
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol

TOLERANCE = 0.1  # a result within 10% over the target counts as on target


class TokenCounter(Protocol):
    """Anything with `count(text) -> int` (a `ctxkit.tokens.Tokenizer`)."""

    def count(self, text: str) -> int: ...


KINDS = ("code", "log", "json", "text")

# --------------------------------------------------------------------------------------------
# dispatch


def compress(text: str, kind: str, ratio: float, tok: TokenCounter) -> str:
    """Compress `text` of `kind` (code, log, json, text, plan_ref, other) to `ratio` of its tokens."""
    if ratio >= 1.0 or not text or kind == "plan_ref":
        return text
    tokens = tok.count(text)
    target = max(1, math.ceil(tokens * max(ratio, 0.0)))
    if tokens <= target:
        return text
    if kind not in KINDS:
        kind = detect_kind(text)
    out = COMPRESSORS[kind](text, target, tok)
    # a compressor never makes things bigger
    return out if tok.count(out) < tokens else text


def detect_kind(text: str) -> str:
    """Guess code, log, json or text from the content itself."""
    stripped = text.strip()
    if stripped[:1] in "{[" and stripped[-1:] in "}]":
        try:
            json.loads(stripped)
            return "json"
        except ValueError:
            pass
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "text"
    if _numbered(lines) is not None:
        return "code"
    n = len(lines)
    codeish = sum(1 for ln in lines if _CODE_LINE.search(ln))
    logish = sum(1 for ln in lines if _LOG_LINE.search(ln) or _LOCATED.search(ln))
    prose = sum(1 for ln in lines if len(ln) > 60 and re.search(r"[.!?:]\s*$", ln) and " " in ln)
    repeated = n - len({_normalize(ln) for ln in lines})
    if prose / n >= 0.5:
        return "text"
    # an application log's lines start with a timestamp or carry a level; a JSON payload or a
    # trailing `;` must not make it code
    leveled = sum(1 for ln in lines if _LOG_START.search(ln) or _LEVEL.search(ln[:60]))
    if n >= 3 and leveled / n >= 0.3 and leveled >= codeish:
        return "log"
    if n >= 3 and codeish / n >= 0.3:
        return "code"
    if n >= 3 and (logish / n >= 0.3 or repeated / n >= 0.3):
        return "log"
    if n >= 8 and sum(1 for ln in lines if not re.search(r"[.!?:]\s*$", ln)) / n > 0.8:
        return "log"  # many short unpunctuated lines: command output, listings
    return "text"


_CODE_LINE = re.compile(
    r"^\s*(def |class |async def |import |from \S+ import |return\b|if .*:$|for .*:$|"
    r"function\b|const |let |var |public |private |#include|fn |func |package |}\s*$|.*[;{]\s*$)"
)
_LOG_LINE = re.compile(
    r"^\s*(\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\[?\d\d:\d\d:\d\d|(DEBUG|INFO|WARN|WARNING|ERROR|TRACE)\b|"
    r"PASSED|FAILED|ok\b|\$ )"
)
_LOG_START = re.compile(
    r"^\s*\[?(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\d\d:\d\d:\d\d|"
    r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d|[IWEF]\d{4} \d\d:)"
)
_LEVEL = re.compile(
    r"(?:^|[\s\[|(<])(?:DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)(?=[\]\s:|)>]|$)"
    r"|\blevel=(?:debug|info|warn|warning|error|fatal|trace)\b"
)
_LOCATED = re.compile(r"^\S+\.\w+:\d+(?::\d+)?:|^\s*File \"[^\"]+\", line \d+|Traceback \(most recent")
_IMPORTANT = re.compile(
    r"(error|warn|traceback|exception|fail|fatal|panic|assert|denied|not found|"
    r"no such file|segmentation fault|killed|timed? ?out)",
    re.IGNORECASE,
)


def _normalize(line: str) -> str:
    """A line with numbers and hex ids blanked, so near-repeats compare equal."""
    return re.sub(r"0x[0-9a-fA-F]+|\d+", "#", line.strip())


def _within(tok: TokenCounter, text: str, target: int) -> bool:
    return tok.count(text) <= target * (1 + TOLERANCE)


# --------------------------------------------------------------------------------------------
# code

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


Line = tuple[int | None, str]  # (index in the original lines or None for a made-up line, text)


def compress_code(text: str, target_tokens: int, tok: TokenCounter, language: str | None = None) -> str:
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
        if not kept:
            continue
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
    return bool(re.search(r"^(import \w+|from [\w.]+ import )", joined, re.MULTILINE)) and ";" not in joined


def _py_comments(source: str) -> dict[int, int] | None:
    """Line (0-based) -> column where a comment starts; None when the code does not tokenize."""
    found: dict[int, int] = {}
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
    try:
        return ast.parse("\n".join(bodies))
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
                isinstance(node, ast.Assign | ast.AnnAssign) and start == end and len(bodies[start]) <= 100
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
_PREPROCESSOR = re.compile(r"^#\s*(include|define|if|ifdef|ifndef|endif|else|elif|pragma|undef|import)\b")


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


def _fit_head(
    kept: list[Line],
    target: int,
    tok: TokenCounter,
    render: Callable[[list[Line]], str],
    must_parse: bool,
) -> str | None:
    """The longest head of `kept` under the target; for Python, cut only where the head still
    parses (before an unindented line, checked with `ast`)."""
    if len(kept) < 2:
        return None
    # count the lines as rendered: line-number prefixes cost tokens too
    counts = _count_lines(tok, [render([line]) for line in kept])
    budget = target - 12  # room for the marker line
    total = 0
    cuts: list[int] = []
    for i, n in enumerate(counts):
        if total + n > budget:
            break
        total += n
        nxt = kept[i + 1][1] if i + 1 < len(kept) else ""
        if not must_parse or (nxt[:1] not in (" ", "\t") and nxt.strip()):
            cuts.append(i + 1)
    for cut in reversed(cuts[-50:] if must_parse else cuts[-1:]):
        if must_parse:
            try:
                ast.parse("\n".join(line for _, line in kept[:cut]))
            except SyntaxError:
                continue
        rest = len(kept) - cut
        marker = (None, f"# ... {rest} more lines" if must_parse else f"... {rest} more lines")
        return render(kept[:cut] + [marker])
    return None


def _count_lines(tok: TokenCounter, lines: Sequence[str]) -> list[int]:
    count_many = getattr(tok, "count_many", None)
    if count_many is not None:
        return [int(n) for n in count_many([ln + "\n" for ln in lines])]
    return [tok.count(ln + "\n") for ln in lines]


# --------------------------------------------------------------------------------------------
# logs


def _runs(lines: Sequence[str]) -> list[tuple[int, int]]:
    """Maximal runs `[start, end)` of lines equal once numbers and hex ids are blanked."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        j = i + 1
        key = _normalize(lines[i])
        while j < len(lines) and _normalize(lines[j]) == key:
            j += 1
        out.append((i, j))
        i = j
    return out


def _run_text(lines: Sequence[str], start: int, end: int) -> str:
    """One run as text: the line itself, `[xN] line` for exact repeats, or for lines that differ
    in their numbers `[xN similar] first (numbers vary)` and the last line, so the run does not
    read as one request made N times."""
    n = end - start
    first = lines[start]
    if n == 1:
        return first
    if all(lines[k].strip() == first.strip() for k in range(start + 1, end)):
        return f"[x{n}] {first}"
    if n == 2:
        return f"{first}\n{lines[start + 1]}"
    return f"[x{n} similar] {first} (numbers vary)\n[last] {lines[end - 1]}"


def collapse_repeats(lines: Sequence[str]) -> list[str]:
    """Runs of the same line become `[x37] line`; runs that differ only in numbers become
    `[x37 similar] first (numbers vary)` plus `[last] last line`."""
    out: list[str] = []
    for start, end in _runs(lines):
        out.extend(_run_text(lines, start, end).split("\n"))
    return out


def compress_log(text: str, target_tokens: int, tok: TokenCounter) -> str:
    """Repeats collapsed; then the head, every error/warning/traceback line and the tail.

    When collapsing alone lands well under the target, the spare budget goes back to verbatim
    lines (errors first, then head and tail), so the result aims at the target, not far below.
    """
    lines = text.split("\n")
    runs = _runs(lines)
    entries = [_run_text(lines, s, e) for s, e in runs]
    joined = "\n".join(entries)
    size = tok.count(joined)
    if size <= target_tokens * (1 + TOLERANCE):
        if size >= target_tokens * (1 - TOLERANCE) or len(runs) == len(lines):
            return joined
        return _expand_runs(lines, runs, target_tokens, tok)
    counts = _count_lines(tok, entries)
    must = _important_lines(entries)
    budget = target_tokens - 15  # room for omission markers
    keep: set[int] = set()
    used = 0
    # errors first, the latest ones before the earliest, except the very first error
    order = sorted(must, reverse=True)
    if order:
        order = [order[-1], *order[:-1]]
    for i in order:
        if used + counts[i] > budget:
            continue
        keep.add(i)
        used += counts[i]
    # then grow the head and the tail alternately (the tail twice as fast: it holds the outcome)
    for i in _head_tail(len(entries)):
        if i in keep:
            continue
        if used + counts[i] > budget:
            break
        keep.add(i)
        used += counts[i]
    sizes = [e - s for s, e in runs]
    return _with_gaps(entries, keep, "[... {n} lines omitted]", sizes)


def _head_tail(n: int) -> list[int]:
    """0, n-1, n-2, 1, n-3, n-4, 2, ...: the head grows at half the pace of the tail."""
    out: list[int] = []
    head, tail = 0, n - 1
    turn = 0
    while head <= tail:
        if turn % 3 == 0:
            out.append(head)
            head += 1
        else:
            out.append(tail)
            tail -= 1
        turn += 1
    return out


def _expand_runs(lines: Sequence[str], runs: list[tuple[int, int]], target: int, tok: TokenCounter) -> str:
    """The collapsed log with as many lines of its collapsed runs shown verbatim as the target
    allows (errors first, then head and tail); found by a binary search on how many."""
    in_run = [False] * len(lines)
    for s, e in runs:
        if e - s > 1:
            in_run[s:e] = [True] * (e - s)
    errors = [i for i in _important_lines(lines) if in_run[i]]
    if errors:
        errors = [errors[0], *reversed(errors[1:])]
    order = dict.fromkeys(errors)
    order.update(dict.fromkeys(i for i in _head_tail(len(lines)) if in_run[i]))
    ranked = list(order)

    def render(k: int) -> str:
        verbatim = set(ranked[:k])
        out: list[str] = []
        for s, e in runs:
            i = s
            while i < e:
                if i in verbatim:
                    out.append(lines[i])
                    i += 1
                    continue
                j = i + 1
                while j < e and j not in verbatim:
                    j += 1
                out.append(_run_text(lines, i, j))
                i = j
        return "\n".join(out)

    lo, hi = 0, len(ranked)
    best = render(0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        candidate = render(mid)
        if tok.count(candidate) <= target:
            lo, best = mid, candidate
        else:
            hi = mid - 1
    return best


def _important_lines(lines: Sequence[str]) -> list[int]:
    """Error, warning and failure lines, and whole Python tracebacks."""
    found: set[int] = set()
    in_tb = False
    for i, line in enumerate(lines):
        if "Traceback (most recent call last)" in line:
            in_tb = True
        if in_tb:
            found.add(i)
            # a traceback ends at its first unindented line after the header (the exception)
            if i > 0 and line[:1] not in (" ", "\t") and "Traceback" not in line:
                in_tb = False
            continue
        if _IMPORTANT.search(line):
            found.add(i)
    return sorted(found)


def _with_gaps(
    lines: Sequence[str], keep: set[int], marker: str, sizes: Sequence[int] | None = None
) -> str:
    """The kept lines, each gap replaced by `marker` naming how many lines (`sizes[i]` original
    lines for entry i, default one) it stands for."""
    out: list[str] = []
    gap = 0
    for i, line in enumerate(lines):
        if i in keep:
            if gap:
                out.append(marker.format(n=gap))
                gap = 0
            out.append(line)
        else:
            gap += sizes[i] if sizes is not None else 1
    if gap:
        out.append(marker.format(n=gap))
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# json

_JSON_LEVELS = ((20, 400), (10, 200), (5, 100), (3, 60), (2, 30), (1, 16))


def compress_json(text: str, target_tokens: int, tok: TokenCounter) -> str:
    """Every key kept; long arrays keep their first items plus "... N more items", long strings
    their start plus "... N more chars"; tighter at each step until the target is met."""
    try:
        data = json.loads(text)
    except ValueError:
        return compress_log(text, target_tokens, tok)
    best = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if _within(tok, best, target_tokens):
        return best
    for max_items, max_chars in _JSON_LEVELS:
        candidate = json.dumps(
            _elide(data, max_items, max_chars), ensure_ascii=False, separators=(",", ":")
        )
        best = candidate
        if _within(tok, candidate, target_tokens):
            break
    return best


def _elide(value: object, max_items: int, max_chars: int) -> object:
    if isinstance(value, dict):
        return {k: _elide(v, max_items, max_chars) for k, v in value.items()}
    if isinstance(value, list):
        head = [_elide(v, max_items, max_chars) for v in value[:max_items]]
        if len(value) > max_items:
            head.append(f"... {len(value) - max_items} more items")
        return head
    # eliding fewer characters than the marker costs would only make it longer
    if isinstance(value, str) and len(value) > max_chars + 24:
        return f"{value[:max_chars]}... ({len(value) - max_chars} more chars)"
    return value


# --------------------------------------------------------------------------------------------
# prose

_SENTENCE = re.compile(r"[^\n.!?]*(?:[.!?]+(?=\s|$)|\n+|$)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{2,}")
STOPWORDS = frozenset(
    """the and for that this with you are was have has not but from they will would there
    their what which when where who into then than them these those been being its our your
    can could should just also about more some such only over very any all one out get
    let use used using make made here were had did does doing done how why""".split()
)


def split_sentences(text: str) -> list[str]:
    """Sentences with their trailing whitespace, so joining them gives the text back."""
    parts: list[str] = []
    pos = 0
    for m in _SENTENCE.finditer(text):
        if m.end() == m.start():
            if m.end() >= len(text):
                break
            continue
        end = m.end()
        while end < len(text) and text[end] in " \t":
            end += 1
        parts.append(text[pos:end])
        pos = end
    if pos < len(text):
        parts.append(text[pos:])
    # glue pieces that are only whitespace onto the previous sentence
    out: list[str] = []
    for p in parts:
        if out and not p.strip():
            out[-1] += p
        else:
            out.append(p)
    return out


def words(text: str) -> list[str]:
    """Lower-cased content words (paths and identifiers kept whole)."""
    return [w for w in (m.group(0).lower().strip("./-") for m in _WORD.finditer(text)) if w and w not in STOPWORDS]


def sentence_scores(sentences: Sequence[str]) -> list[float]:
    """TF-IDF weight of each sentence, first and last sentences boosted."""
    bags = [Counter(words(s)) for s in sentences]
    n = len(sentences)
    df: Counter[str] = Counter()
    tf: Counter[str] = Counter()
    for bag in bags:
        df.update(bag.keys())
        tf.update(bag)
    scores = []
    for i, bag in enumerate(bags):
        if not bag:
            scores.append(0.0)
            continue
        weight = sum(math.log(1 + tf[w]) * math.log(1 + n / df[w]) for w in bag)
        score = weight / math.sqrt(sum(bag.values()) + 1)
        if i == 0:
            score *= 1.5
        if i == n - 1:
            score *= 1.25
        scores.append(score)
    return scores


def compress_text(text: str, target_tokens: int, tok: TokenCounter) -> str:
    """The most informative sentences (TF-IDF, first/last boosted), in their original order."""
    sentences = split_sentences(text)
    if len(sentences) <= 1:
        return _truncate(text, target_tokens, tok)
    counts = _count_lines(tok, sentences)
    scores = sentence_scores(sentences)
    order = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))
    budget = target_tokens - 4
    keep: set[int] = set()
    used = 0
    seen: set[str] = set()
    for i in order:
        key = " ".join(sentences[i].split()).lower()
        if key in seen or used + counts[i] > budget:
            continue  # a repeated sentence says nothing new
        seen.add(key)
        keep.add(i)
        used += counts[i]
    if not keep:
        return _truncate(text, target_tokens, tok)
    out: list[str] = []
    prev = -1
    for i in sorted(keep):
        if i != prev + 1:
            out.append("[...] ")
        out.append(sentences[i])
        prev = i
    if prev != len(sentences) - 1:
        out.append(" [...]")
    return "".join(out).rstrip()


def _truncate(text: str, target_tokens: int, tok: TokenCounter) -> str:
    """The head of a text that has no sentences to choose from, cut to about the target."""
    tokens = tok.count(text)
    if tokens <= target_tokens:
        return text
    chars = max(1, int(len(text) * target_tokens / tokens) - 12)
    for _ in range(8):
        cut = text[:chars].rstrip() + " [...]"
        if tok.count(cut) <= target_tokens * (1 + TOLERANCE) or chars <= 1:
            return cut
        chars = max(1, int(chars * 0.85))
    return text[:chars] + " [...]"


COMPRESSORS: dict[str, Callable[[str, int, TokenCounter], str]] = {
    "code": compress_code,
    "log": compress_log,
    "json": compress_json,
    "text": compress_text,
}
