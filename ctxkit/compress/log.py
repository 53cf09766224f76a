"""Logs: repeated and similar runs collapsed, errors and head/tail kept verbatim."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxkit.compress.base import TOLERANCE, TokenCounter, _count_lines, _normalize

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


_LOCATED = re.compile(
    r"^\S+\.\w+:\d+(?::\d+)?:|^\s*File \"[^\"]+\", line \d+|Traceback \(most recent"
)


_IMPORTANT = re.compile(
    r"(error|warn|traceback|exception|fail|fatal|panic|assert|denied|not found|"
    r"no such file|segmentation fault|killed|timed? ?out)",
    re.IGNORECASE,
)


_HAS_WORD = re.compile(r"[^\W_]")
_EXCEPTION = re.compile(r"^\s*(?:E\s+)?[\w.]*(?:Error|Exception)\b:?")


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
    """Repeats collapsed; then the first line, every error/warning/traceback line, and the head
    and tail as far as the budget goes.

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
    # the first line with words always stays: it says what the output is (a command's banner,
    # a test run's header), so the reader never gets only omission markers
    # (the line's own words: a run of blank lines reads "[x8] ", and x8 is no word of the log)
    first = next((i for i, (s, _) in enumerate(runs) if _HAS_WORD.search(lines[s])), None)
    if first is not None:
        keep.add(first)
        used += counts[first]
    # errors first: the exception lines themselves ("KeyError: 'x'", what a traceback ends on),
    # then the latest before the earliest, except the very first error
    order = sorted(must, reverse=True)
    if order:
        order = [order[-1], *order[:-1]]
    named = [i for i in order if _EXCEPTION.match(entries[i])]
    order = [*named, *(i for i in order if i not in set(named))]
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


def _expand_runs(
    lines: Sequence[str], runs: list[tuple[int, int]], target: int, tok: TokenCounter
) -> str:
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
