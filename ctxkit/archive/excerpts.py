"""What recall and search show of an archived unit's text: a line range, the matches of a
pattern with their context (numbered like `grep -n`), a hit's one-line snippet, and a text cut
to a token budget with a note that says how to read the rest."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ctxkit.archive.patterns import Pattern
from ctxkit.archive.records import ArchivedUnit
from ctxkit.errors import ArchiveError

if TYPE_CHECKING:
    from ctxkit.tokens import Tokenizer

SEARCH_CONTEXT_LINES = 2
SNIPPET_CHARS = 160  # a search hit's line, around the match


def hits(items: Iterable[ArchivedUnit], rx: Pattern, limit: int | None) -> list[dict[str, Any]]:
    """The search hits among `items` (see `Archive.search`), at most `limit`, in their order."""
    found_hits: list[dict[str, Any]] = []
    for item in items:
        if limit is not None and len(found_hits) >= limit:
            break
        rx.check()
        text = item.text()  # what recall shows: content and tool calls
        lines = text.split("\n")
        found = [i for i, line in enumerate(lines) if rx.search(line)]
        if found:
            line: int | None = found[0] + 1
            shown = snippet(lines[found[0]], rx)
        elif rx.search(item.tool_name or "") or rx.search(item.summary):
            line, shown = None, snippet(item.summary or item.content, rx)
        else:
            continue
        found_hits.append(
            {
                **item.info(),
                "chars": len(text),
                "lines": len(lines) if text else 0,
                "matches": len(found),
                "line": line,
                "snippet": shown,
            }
        )
    return found_hits


def snippet(text: str, rx: Pattern, width: int = SNIPPET_CHARS) -> str:
    """One line of `text` around the first match of `rx`, whitespace collapsed, `width` chars."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    m = rx.search(flat)
    start = max(0, min(m.start() - width // 4, len(flat) - width)) if m else 0
    part = flat[start : start + width]
    return ("…" if start else "") + part + ("…" if start + width < len(flat) else "")


def line_range(text: str, lines: tuple[int, int], ref: str) -> str:
    """Lines `a` to `b` of `text` (counted from 1); an `ArchiveError` for a range not in it."""
    a, b = lines
    all_lines = text.split("\n")
    if a < 1 or b < a:
        raise ArchiveError(f"bad line range {a}-{b}: lines count from 1 and A <= B")
    if a > len(all_lines):
        raise ArchiveError(f"{ref} has {len(all_lines)} lines; line {a} is past the end")
    return "\n".join(all_lines[a - 1 : b])


def matches(text: str, rx: Pattern, nth: int | None, ref: str, *, first_line: int) -> str:
    """The lines that match `rx` (only the `nth` match when given) with their context, numbered
    from `first_line` like `grep -n`; overlapping context makes one group."""
    pattern = rx.pattern
    all_lines = text.split("\n")
    hits = [i for i, line in enumerate(all_lines) if rx.search(line)]
    if nth is not None:
        if nth < 1 or nth > len(hits):
            raise ArchiveError(
                f"{ref} has {len(hits)} match(es) for {pattern!r}; match-{nth} is not one"
            )
        hits = [hits[nth - 1]]
    groups: list[str] = []
    shown_until = -1
    for i in hits:
        lo = max(0, i - SEARCH_CONTEXT_LINES)
        hi = min(len(all_lines), i + SEARCH_CONTEXT_LINES + 1)
        block = []
        for j in range(max(lo, shown_until), hi):
            mark = ":" if rx.search(all_lines[j]) else "-"
            block.append(f"{j + first_line}{mark}{all_lines[j]}")
        if lo < shown_until and groups:
            groups[-1] += "\n" + "\n".join(block)  # overlapping context: one group, like grep
        else:
            groups.append("\n".join(block))
        shown_until = hi
    return "\n--\n".join(groups)


def cut(text: str, max_tokens: int, tokenizer: Tokenizer | None, *, first_line: int | None) -> str:
    """Cut text to at most `max_tokens`, note included, on a line boundary when one fits.

    `first_line` is the unit's number of the text's first line (None when the lines are not the
    unit's own, as after a search), so the note can say which `--lines` bring the rest.
    """
    if tokenizer is None:
        from ctxkit.tokens import get_tokenizer

        tokenizer = get_tokenizer(None)
    total = tokenizer.count(text)
    if total <= max_tokens:
        return text
    all_lines = text.split("\n")

    def note(shown_lines: int, shown_tokens: int) -> str:
        head = f"\n[cut: {shown_tokens:,} of {total:,} tokens"
        if first_line is None:
            return f"{head}; narrow the pattern, pick one with :match-N, or raise --max-tokens]"
        last = first_line + len(all_lines) - 1
        if shown_lines == 0:
            shown = f"part of line {first_line}"
        else:
            end_line = first_line + shown_lines - 1
            shown = f"line {first_line}" if shown_lines == 1 else f"lines {first_line}-{end_line}"
        rest = (
            f"--lines {first_line + shown_lines}-{last} for more"
            if 0 < shown_lines < len(all_lines)
            else "raise --max-tokens for more"
        )
        return f"{head}, {shown} of {first_line}-{last}; {rest}]"

    budget = max_tokens - tokenizer.count(note(len(all_lines), total))
    if budget <= 0:
        # too small for the full note: a short one still says the text was cut
        short = "\n[cut: raise --max-tokens]"
        room = max_tokens - tokenizer.count(short)
        if room <= 0:
            return _prefix_within(text, max_tokens, tokenizer)
        return _prefix_within(text, room, tokenizer) + short
    # the longest run of whole lines within budget (binary search on the line count)
    lo, hi = 0, len(all_lines)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokenizer.count("\n".join(all_lines[:mid])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    shown = "\n".join(all_lines[:lo]) if lo else _prefix_within(all_lines[0], budget, tokenizer)
    return shown + note(lo, tokenizer.count(shown))


def _prefix_within(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokenizer.count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]
