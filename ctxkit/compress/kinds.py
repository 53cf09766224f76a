"""Content kinds: detection and the compressor registry."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

from ctxkit.compress.base import TokenCounter, _normalize, says_something
from ctxkit.compress.code import _CODE_LINE, _numbered, compress_code
from ctxkit.compress.json import compress_json as _compress_json_only
from ctxkit.compress.log import _LEVEL, _LOCATED, _LOG_LINE, _LOG_START, compress_log
from ctxkit.compress.text import compress_text

KINDS = ("code", "log", "json", "text")


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
    # a compressor never makes things bigger, nor leaves only its markers (`[...]`)
    if not says_something(out) and says_something(text):
        return text
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
    # each count is made when the rule before it did not decide (the rules in order)
    prose = sum(1 for ln in lines if len(ln) > 60 and " " in ln and _PUNCTUATED.search(ln))
    if prose / n >= 0.5:
        return "text"
    if n >= 3:
        codeish = sum(1 for ln in lines if _CODE_LINE.search(ln))
        # an application log's lines start with a timestamp or carry a level; a JSON payload
        # or a trailing `;` must not make it code
        leveled = sum(1 for ln in lines if _LOG_START.search(ln) or _LEVEL.search(ln[:60]))
        if leveled / n >= 0.3 and leveled >= codeish:
            return "log"
        if codeish / n >= 0.3:
            return "code"
        if sum(1 for ln in lines if _LOG_LINE.search(ln) or _LOCATED.search(ln)) / n >= 0.3:
            return "log"
        if (n - len({_normalize(ln) for ln in lines})) / n >= 0.3:
            return "log"
    if n >= 8 and sum(1 for ln in lines if not _PUNCTUATED.search(ln)) / n > 0.8:
        return "log"  # many short unpunctuated lines: command output, listings
    return "text"


_PUNCTUATED = re.compile(r"[.!?:]\s*$")  # a line that ends a sentence or introduces one


def compress_json(text: str, target_tokens: int, tok: TokenCounter) -> str:
    """`compress.json.compress_json` with each long string compressed by what it holds first
    (a log inside `{"output": "...", "exit_code": 1}` is cut as a log)."""
    return _compress_json_only(text, target_tokens, tok, strings=_by_kind)


def _by_kind(text: str, ratio: float, tok: TokenCounter) -> str:
    return compress(text, detect_kind(text), ratio, tok)


COMPRESSORS: dict[str, Callable[[str, int, TokenCounter], str]] = {
    "code": compress_code,
    "log": compress_log,
    "json": compress_json,
    "text": compress_text,
}
