"""Patterns that `recall --search`, the recall tool and the search tool match archived text
with, in bounded time.

A regular expression from a model (or a person) can take exponential time on Python's `re`:
`(a|aa)+$` against forty a's and a `!` runs for hours, and an MCP server that runs it stops
answering. Patterns are matched with the `regex` engine instead (the same syntax as `re`; it
comes with tiktoken), whose matching takes a timeout, against one deadline for the whole call.

    >>> p = Pattern("fail(ed|ure)", ignore_case=True)
    >>> bool(p.search("Test FAILED")), p.search("passed")
    (True, None)
"""

from __future__ import annotations

import time
from typing import Any

import regex

from ctxkit.errors import ArchiveError

MAX_PATTERN_CHARS = 10_000  # longer is not a search pattern (and compiling it takes seconds)
SEARCH_TIMEOUT_S = 30.0  # the whole search or recall, at a shell; the MCP tools pass less


class Pattern:
    """A compiled pattern and the deadline of the call that uses it.

    Text that does not compile as a regular expression is matched literally. `search` raises
    `ArchiveError` once the deadline has passed, whether in one slow match or over many."""

    def __init__(
        self, pattern: str, *, ignore_case: bool = False, timeout_s: float = SEARCH_TIMEOUT_S
    ) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise ArchiveError(
                f"the pattern has {len(pattern):,} characters; a search pattern has at most "
                f"{MAX_PATTERN_CHARS:,}"
            )
        self.pattern = pattern
        self.timeout_s = timeout_s
        flags = regex.IGNORECASE if ignore_case else 0
        try:
            self._rx: Any = regex.compile(pattern, flags)
        except Exception:  # noqa: BLE001 - regex.error, or an OverflowError for a{99999999999}
            self._rx = regex.compile(regex.escape(pattern), flags)
        self.deadline = time.monotonic() + timeout_s

    def search(self, text: str) -> Any:
        """The first match in `text`, or None."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._too_slow()
        try:
            return self._rx.search(text, timeout=left)
        except TimeoutError:
            raise self._too_slow() from None

    def check(self) -> None:
        """Raise when the deadline has passed (between matches, in a long loop)."""
        if time.monotonic() > self.deadline:
            raise self._too_slow()

    def _too_slow(self) -> ArchiveError:
        shown = self.pattern if len(self.pattern) <= 60 else self.pattern[:57] + "..."
        return ArchiveError(
            f"the search for {shown!r} took more than {self.timeout_s:g} s and was stopped; "
            "use a simpler pattern (nested repeats such as (a+)+ backtrack without end) or "
            "narrow the search"
        )
