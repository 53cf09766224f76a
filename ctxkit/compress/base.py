"""What every compressor shares: the token counter, tolerance and line helpers."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from typing import Protocol

TOLERANCE = 0.1  # a result within 10% over the target counts as on target


class TokenCounter(Protocol):
    """Anything with `count(text) -> int` (a `ctxkit.tokens.Tokenizer`)."""

    def count(self, text: str) -> int: ...


def _normalize(line: str) -> str:
    """A line with numbers and hex ids blanked, so near-repeats compare equal."""
    return _NUMBERS.sub("#", line.strip())


_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")


# what compressors write in place of what they cut; a result made only of these says nothing
_MARKERS = re.compile(
    r"\[\.\.\.\]|\[\.\.\. \d+ (?:lines omitted|more bytes)\]|#? ?\.\.\. \d+ more (?:lines|items|chars)"
    r"|\[x\d+(?: similar)?\]|\[last\]|\.\.\."
)
_WORD_CHAR = re.compile(r"[^\W_]")


def says_something(text: str) -> bool:
    """True when `text` holds words besides the compressors' markers (`[...]`, `...`,
    `[... 12 lines omitted]`): a compressed text must keep some of what it was."""
    return _WORD_CHAR.search(_MARKERS.sub(" ", text)) is not None


def _meaningful(kept: Sequence[Line]) -> bool:
    """True when some kept line comes from the original and has words."""
    return any(idx is not None and _WORD_CHAR.search(text) for idx, text in kept)


def _within(tok: TokenCounter, text: str, target: int) -> bool:
    return tok.count(text) <= target * (1 + TOLERANCE)


Line = tuple[int | None, str]  # (index in the original lines or None for a made-up line, text)


def _fit_head(
    kept: list[Line],
    target: int,
    tok: TokenCounter,
    render: Callable[[list[Line]], str],
    must_parse: bool,
) -> str | None:
    """The longest head of `kept` under the target; for Python, cut only where the head still
    parses (before an unindented line, checked with `ast`)."""
    if len(kept) < 2 or not _meaningful(kept):
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
        if not _meaningful(kept[:cut]):
            continue
        if must_parse:
            try:
                ast.parse("\n".join(line for _, line in kept[:cut]))
            except SyntaxError:
                continue
        rest = len(kept) - cut
        marker = (None, f"# ... {rest} more lines" if must_parse else f"... {rest} more lines")
        return render(kept[:cut] + [marker] + _closing_fence(kept[:cut]))
    return None


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def _closing_fence(head: Sequence[Line]) -> list[Line]:
    """The line that closes a markdown code fence the head leaves open (a message cut inside
    its code block), so what follows the cut is not read as code; [] when none is open."""
    open_fence: str | None = None
    for _, text in head:
        m = _FENCE.match(text)
        if m is None:
            continue
        mark = m.group(1)
        if open_fence is None:
            open_fence = mark
        elif mark[0] == open_fence[0] and len(mark) >= len(open_fence) and not text.strip()[len(mark):].strip():
            open_fence = None
    return [] if open_fence is None else [(None, open_fence)]


def _count_lines(tok: TokenCounter, lines: Sequence[str]) -> list[int]:
    count_many = getattr(tok, "count_many", None)
    if count_many is not None:
        return [int(n) for n in count_many([ln + "\n" for ln in lines])]
    return [tok.count(ln + "\n") for ln in lines]
