"""`content_type_chunking`: compress unprotected units by their content type, oldest first,
until the transcript fits its target.

Ratios per kind (`compress_ratios`): code 0.7, text 0.5, log 0.4, plan_ref 1.0 (verbatim),
other 0.6. Units typed `message`/`reasoning` count as text; tool results and `other` are
classified by their content (code, log, JSON -> other, prose -> text). The shortened unit keeps
its id, role and pairing; its content ends with a note carrying the archive ref. Long string
arguments of tool calls (a file written, an edit) are compressed the same way, as valid JSON. P1 units are
protected and never shortened; in recovery P1 code keeps at least 90% of its tokens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxkit.archive import REF_PROBE
from ctxkit.compress import compress, detect_kind
from ctxkit.model import ToolCall, Unit
from ctxkit.schema import number, plain, section, setting
from ctxkit.strategies._common import is_compacted
from ctxkit.strategies.base import State, archive_unit, fmt_int, merged, protected

if TYPE_CHECKING:
    from ctxkit.tokens import Tokenizer

NAME = "content_type_chunking"
LABEL = "Compressing content by type"  # what a progress event says while it runs


@dataclass(frozen=True)
class CompressRatios:
    """Target size of each content type after chunking, as a fraction (1.0 = verbatim)."""

    code: float = setting(0.7, number(0.0, 1.0))
    text: float = setting(0.5, number(0.0, 1.0))
    log: float = setting(0.4, number(0.0, 1.0))
    plan_ref: float = setting(1.0, number(0.0, 1.0))
    other: float = setting(0.6, number(0.0, 1.0))

    def ratio_for(self, kind: str) -> float:
        """The ratio for a content type; types without their own ratio use `other`."""
        return float(getattr(self, kind, self.other))


@dataclass(frozen=True)
class Params:
    """Compress each unit by its content type."""

    compress_ratios: CompressRatios = setting(
        CompressRatios(), section(CompressRatios), "target size per content type (1.0 = verbatim)"
    )


DEFAULT_RATIOS: dict[str, float] = plain(CompressRatios())
DEFAULTS: dict[str, Any] = plain(Params())
MIN_TOKENS = 64  # below this the note would eat most of the saving
MIN_ARGUMENT_CHARS = 400
P1_CODE_RATIO = 0.9

_BY_TYPE = {"code": "code", "log": "log", "plan_ref": "plan_ref", "message": "text", "reasoning": "text"}
# what a detected content kind is compressed as, and which ratio applies
_DETECTED = {"code": ("code", "code"), "log": ("log", "log"), "json": ("json", "other"), "text": ("text", "text")}


def kind_of(unit: Unit) -> tuple[str, str]:
    """(compressor kind, ratio key) for a unit."""
    key = _BY_TYPE.get(unit.type)
    if key == "plan_ref":
        return "plan_ref", "plan_ref"
    if key in ("code", "log"):
        return key, key
    detected = detect_kind(unit.content)
    if key == "text" and detected not in ("code", "json"):
        return "text", "text"
    if unit.type == "other":
        return _DETECTED[detected][0], "other"
    return _DETECTED[detected]


def note(before: int, after: int, ref: str) -> str:
    """The line that ends a compressed unit."""
    return f"[ctxkit: compressed {fmt_int(before)} -> {fmt_int(after)} tokens; full text: ctxkit recall {ref}]"


def shrink_arguments(call: ToolCall, ratios: Mapping[str, float], tok: Tokenizer) -> ToolCall:
    """The call with its long string arguments (a file written, an edit) compressed by their
    content type; the arguments stay valid JSON. The same call when nothing gets shorter."""
    if len(call.arguments) < MIN_ARGUMENT_CHARS:
        return call
    try:
        data = json.loads(call.arguments)
    except ValueError:
        return call

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str) and len(value) >= MIN_ARGUMENT_CHARS:
            detected = detect_kind(value)
            kind, key = _DETECTED[detected]
            ratio = float(ratios.get(key, ratios["other"]))
            if ratio < 1.0:
                short = compress(value, kind, ratio, tok)
                if len(short) < len(value):
                    return short
        return value

    shrunk = walk(data)
    if shrunk == data:
        return call
    return ToolCall(call.id, call.name, json.dumps(shrunk, ensure_ascii=False))


def content_type_chunking(state: State, params: Mapping[str, Any]) -> State | None:
    """Shorten unprotected units (content and long call arguments) by type; None when no unit
    gets smaller."""
    p = merged(DEFAULTS, params)
    ratios = {**DEFAULT_RATIOS, **dict(p["compress_ratios"] or {})}
    keep = protected(state)
    tok = state.ctx.tokenizer
    out = list(state.units)
    changed = False
    # Oldest first, and only until the transcript fits: the recent context stays whole.
    remaining = state.tokens()
    for i, unit in enumerate(state.units):
        if remaining <= state.target:
            break
        if i in keep or is_compacted(unit) or "compressed_from" in unit.meta:
            continue
        content_tokens = tok.count(unit.content) if unit.content else 0
        short = unit.content
        if content_tokens >= MIN_TOKENS:
            kind, key = kind_of(unit)
            ratio = float(ratios.get(key, ratios["other"]))
            if unit.is_p1 and kind == "code":
                ratio = max(ratio, P1_CODE_RATIO)
            if ratio < 1.0:
                short = compress(unit.content, kind, ratio, tok)
        calls = [shrink_arguments(c, ratios, tok) for c in unit.tool_calls]
        before = content_tokens + sum(tok.count(c.arguments) for c in unit.tool_calls)
        after = tok.count(short) + sum(tok.count(c.arguments) for c in calls)
        probe = note(before, after, REF_PROBE)
        if after + tok.count(probe) + 1 >= before:
            continue
        ref = archive_unit(state, unit)
        text = note(before, after, ref)
        content = f"{short}\n{text}" if short else text
        meta = {**unit.meta, "ref": ref, "strategy": NAME, "compressed_from": before}
        out[i] = unit.replace(content=content, tool_calls=calls, meta=meta)
        remaining -= before - (after + tok.count(text) + 1)
        changed = True
    return state.with_units(out) if changed else None
