"""What a ref into an archive looks like, written in a transcript: the short form `ref-` and
digits, the long form `ctx://<transcript>/<unit>`, a location inside the unit, and the pattern
that finds them in text. Below the formats and the archive both: a format tells ctxkit's
summary from an agent's own by the refs it carries, without opening an archive."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

# 8 hex digits in archives written before refs became decimal; 18 or more decimal digits since
SHORT_REF = re.compile(r"ref-[0-9a-f]{8,80}")
LONG_PREFIX = "ctx://"
_LOCATION = re.compile(r":(?:L(?P<a>\d+)(?:-(?P<b>\d+))?|match-(?P<m>\d+))$")

# refs inside placeholder text: short refs, and long refs up to whitespace or a closing bracket
REFS_IN_TEXT = re.compile(r"ref-[0-9a-f]{8,80}(?![0-9a-f])|ctx://[^\s\]\)>\"']+")


@dataclass(frozen=True)
class Location:
    """Where inside a unit a ref points: a line range or the Nth search match."""

    lines: tuple[int, int] | None = None
    match: int | None = None


def parse_ref(ref: str) -> tuple[str, Location]:
    """Split `ref-123456789012345678:L5-9` or `ctx://t/u:match-2` into the bare ref and its location."""
    text = ref.strip()
    m = _LOCATION.search(text)
    if m is None:
        return text, Location()
    bare = text[: m.start()]
    if m.group("m") is not None:
        return bare, Location(match=int(m.group("m")))
    a = int(m.group("a"))
    b = int(m.group("b")) if m.group("b") is not None else a
    return bare, Location(lines=(a, b))


def long_ref(transcript_id: str, unit_id: str) -> str:
    """The long ref `ctx://<transcript>/<unit>` (each part percent-encoded when it holds / or :)."""
    return f"{LONG_PREFIX}{quote(transcript_id, safe='')}/{quote(unit_id, safe='')}"


def carries_ref_text(text: str) -> bool:
    """Whether `text` names a ref into an archive."""
    # the pattern only where its text can be: a substring test reads a message at memchr's
    # speed, the pattern is tried at every position
    return ("ref-" in text or "ctx://" in text) and REFS_IN_TEXT.search(text) is not None
