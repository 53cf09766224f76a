"""Numbers and nouns in English, for the messages people read: below every package, so the
archive's errors and the reports say "1 ref" and "2 refs" alike."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and its noun in English: "1 check", "2 checks", "1,200 conversations".

    >>> counted(1, "check"), counted(2, "check"), counted(3, "match", "matches")
    ('1 check', '2 checks', '3 matches')
    """
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"
