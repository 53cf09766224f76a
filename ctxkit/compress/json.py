"""JSON: arrays, long objects and long strings elided level by level; the result always parses.

Elided array items become one marker element (`"... 12 more items"`), elided keys of a very
large object one marker key (`"...": "40 more keys"`), so a compressed document is still JSON
a program or a model can read; nothing is ever written after it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ctxkit.compress.base import TokenCounter, _within
from ctxkit.compress.log import compress_log

LONG_STRING = 400  # a string value this long is compressed as the text, code or log it holds
KEYS_PER_ITEM = 5  # an object keeps KEYS_PER_ITEM times as many keys as an array keeps items
NOTE_KEY = "_note"

_JSON_LEVELS = ((20, 400), (10, 200), (5, 100), (3, 60), (2, 30), (1, 16))


# compresses one long string to a ratio of its tokens (`compress.kinds` passes its dispatch by kind)
StringCompressor = Callable[[str, float, TokenCounter], str]


def compress_json(
    text: str, target_tokens: int, tok: TokenCounter, strings: StringCompressor | None = None
) -> str:
    """Long arrays keep their first items plus "... N more items", long strings their start
    plus "... N more chars", objects with very many keys their first ones plus
    `"...": "N more keys"`; tighter at each step until the target is met. Valid JSON in,
    valid JSON out (text that does not parse is compressed as a log). With `strings`, long
    strings are first compressed by that function (by what they hold)."""
    try:
        data = json.loads(text)
    except ValueError:
        return compress_log(text, target_tokens, tok)
    best = _dumps(data)
    if _within(tok, best, target_tokens):
        return best
    # a tool output wrapped in JSON ({"output": "<a log>", "exit_code": 1}): compress the long
    # strings by what they hold before cutting anything of the structure
    longs = _long_strings(data) if strings is not None else []
    if longs and strings is not None:
        long_tokens = sum(tok.count(_dumps(v)) for v in longs)
        rest = tok.count(best) - long_tokens
        if rest < target_tokens:
            data = _compress_strings(data, (target_tokens - rest) / long_tokens, tok, strings)
            best = _dumps(data)
            if _within(tok, best, target_tokens):
                return best
    for max_items, max_chars in _JSON_LEVELS:
        candidate = _dumps(_elide(data, max_items, max_chars))
        best = candidate
        if _within(tok, candidate, target_tokens):
            break
    return best


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _long_strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _long_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _long_strings(v)]
    return [value] if isinstance(value, str) and len(value) >= LONG_STRING else []


def _compress_strings(
    value: object, ratio: float, tok: TokenCounter, strings: StringCompressor
) -> object:
    """The value with each long string compressed to `ratio` by `strings`."""
    if isinstance(value, dict):
        return {k: _compress_strings(v, ratio, tok, strings) for k, v in value.items()}
    if isinstance(value, list):
        return [_compress_strings(v, ratio, tok, strings) for v in value]
    if isinstance(value, str) and len(value) >= LONG_STRING:
        return strings(value, ratio, tok)
    return value


def _elide(value: object, max_items: int, max_chars: int) -> object:
    if isinstance(value, dict):
        max_keys = max_items * KEYS_PER_ITEM
        items = list(value.items())
        out = {k: _elide(v, max_items, max_chars) for k, v in items[:max_keys]}
        if len(items) > max_keys and "..." not in out:
            out["..."] = f"{len(items) - max_keys} more keys"
        elif len(items) > max_keys:
            out.update(items[max_keys:])  # the marker key is taken: keep the object whole
        return out
    if isinstance(value, list):
        head = [_elide(v, max_items, max_chars) for v in value[:max_items]]
        if len(value) > max_items:
            head.append(f"... {len(value) - max_items} more items")
        return head
    # eliding fewer characters than the marker costs would only make it longer
    if isinstance(value, str) and len(value) > max_chars + 24:
        cut = value[:max_chars]
        # end on a line or a word when one is close, so the kept start reads cleanly
        at = max(cut.rfind("\n"), cut.rfind(" "))
        if at >= max_chars * 0.6:
            cut = cut[:at]
        return f"{cut}... ({len(value) - len(cut)} more chars)"
    return value


def is_json(text: str) -> bool:
    """True when `text` is one JSON document (what must still parse after compression)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in '{["-0123456789tfnIN':
        return False
    try:
        json.loads(stripped)
    except ValueError:
        return False
    return True


def with_note(text: str, note: str) -> str | None:
    """JSON `text` with `note` inside it: the last element of an array, a `"_note"` key of an
    object; None when the document is not an array or object (or does not parse)."""
    try:
        data: Any = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, list):
        data.append(note)
    elif isinstance(data, dict):
        key = NOTE_KEY
        while key in data:
            key = "_" + key
        data[key] = note
    else:
        return None
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
