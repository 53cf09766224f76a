"""JSON: arrays and long strings elided level by level."""

from __future__ import annotations

import json

from ctxkit.compress.base import TokenCounter, _within
from ctxkit.compress.log import compress_log

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
