"""`content_type_chunking`: compress unprotected units by their content type, oldest first,
until the transcript fits its target.

Ratios per kind (`compress_ratios`): code 0.7, text 0.5, log 0.4, plan_ref 1.0 (verbatim),
other 0.6. Units typed `message`/`reasoning` count as text; tool results and `other` are
classified by their content (code, log, JSON -> other, prose -> text). The shortened unit keeps
its id, role and pairing; its content ends with a note carrying the archive ref,
`[bash output compressed from 2,000 to 600 tokens; full text archived as ref-…]`.

Content stays valid: JSON content (whatever the unit's type) is compressed as JSON and the note
goes inside it (a last array element or a `"_note"` key), so it still parses; JSON that cannot
hold a note stays whole. Tool-call arguments are never edited: a call is the assistant's own
words, kept whole. P1 units are protected and never shortened, nor are the user's messages
within the user-message budget (`untouchable`); in recovery P1 code keeps at least 90% of its
tokens. The last assistant message (often the session's final answer or confirmation) and the
last user request are never shortened.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.archive.store import REF_PROBE
from ctxkit.compress import compress, detect_kind
from ctxkit.compress.json import is_json, with_note
from ctxkit.fields import number, plain, section, setting
from ctxkit.model import Unit
from ctxkit.strategies._common import describe, is_compacted, tool_names
from ctxkit.strategies.base import State, archive_unit, archived_as, fmt_int, merged, untouchable

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
P1_CODE_RATIO = 0.9

_BY_TYPE = {"code": "code", "log": "log", "plan_ref": "plan_ref", "message": "text", "reasoning": "text"}
# what a detected content kind is compressed as, and which ratio applies
_DETECTED = {"code": ("code", "code"), "log": ("log", "log"), "json": ("json", "other"), "text": ("text", "text")}


def kind_of(unit: Unit) -> tuple[str, str]:
    """(compressor kind, ratio key) for a unit."""
    key = _BY_TYPE.get(unit.type)
    if key == "plan_ref":
        return "plan_ref", "plan_ref"
    if is_json(unit.content):
        return "json", "code" if key == "code" else "log" if key == "log" else "other"
    if key in ("code", "log"):
        return key, key
    detected = detect_kind(unit.content)
    if key == "text" and detected not in ("code", "json"):
        return "text", "text"
    if unit.type == "other":
        return _DETECTED[detected][0], "other"
    return _DETECTED[detected]


def note(what: str, before: int, after: int, ref: str) -> str:
    """The line that ends a compressed unit (or sits inside compressed JSON)."""
    return (
        f"[{what} compressed from {fmt_int(before)} to {fmt_int(after)} tokens;"
        f" full text {archived_as([ref])}]"
    )


def _with_note(short: str, text: str, json_content: bool) -> str | None:
    """The compressed content with its note: inside JSON, after anything else; None when JSON
    cannot hold one."""
    if json_content:
        return with_note(short, text)
    return f"{short}\n{text}" if short else text


def never_shortened(units: Sequence[Unit]) -> set[int]:
    """What the model reads first when it resumes, kept word for word: the last assistant
    message with text, the last user request, the last tool call; and every command an agent
    wrote as text (SWE-agent's `edit 287:296 ... end_of_edit`): cut, the action is lost."""
    from ctxkit.log_events import acted
    from ctxkit.structure import request_indices

    out: set[int] = set()
    for i in range(len(units) - 1, -1, -1):
        if units[i].role == "assistant" and units[i].content.strip():
            out.add(i)
            break
    requests = request_indices(units)
    if requests:
        out.add(requests[-1])
    calls = [i for i, u in enumerate(units) if u.tool_calls]
    if calls:
        # the last call and its results: an output too large to keep is offloaded (its head
        # stays, where the first line is), not cut in the middle
        last = calls[-1]
        ids = {c.id for c in units[last].tool_calls}
        out.add(last)
        out.update(i for i in range(last + 1, len(units)) if units[i].tool_call_id in ids)
    out.update(i for i in range(len(units)) if acted(units, i))
    out.update(_shows_edited_lines(units))
    return out


_SED_SCRIPT = re.compile(r"""\bsed\s+(?:-\w+\s+)*-i[^'"]*['"]\d*s(.)(.+?)\1""")
MIN_ANCHOR_CHARS = 12


def _shows_edited_lines(units: Sequence[Unit]) -> set[int]:
    """Outputs that show a line a later edit changed (an Edit's old string, a `sed -i`
    pattern): cut, they would lose exactly the line the fix is about."""
    from ctxkit.log_events import decoded_args, is_output

    out: set[int] = set()
    anchors: list[str] = []  # the lines later edits changed, seen walking back from the end
    for i in range(len(units) - 1, -1, -1):
        u = units[i]
        if anchors and is_output(u) and any(a in u.content for a in anchors):
            out.add(i)
        for c in u.tool_calls:
            args = decoded_args(c.arguments)
            if not isinstance(args, dict):
                continue
            for key in ("old_string", "old_str"):
                value = args.get(key)
                if isinstance(value, str):
                    first = next((ln.strip() for ln in value.splitlines() if len(ln.strip()) >= MIN_ANCHOR_CHARS), "")
                    if first:
                        anchors.append(first)
            command = args.get("command") or args.get("cmd")
            if isinstance(command, str):
                for m in _SED_SCRIPT.finditer(command):
                    pattern = m.group(2).replace("\\", "")
                    if len(pattern) >= MIN_ANCHOR_CHARS:
                        anchors.append(pattern)
    return out


def content_type_chunking(state: State, params: Mapping[str, Any]) -> State | None:
    """Shorten unprotected units' content by type; None when no unit gets smaller."""
    p = merged(DEFAULTS, params)
    ratios = {**DEFAULT_RATIOS, **dict(p["compress_ratios"] or {})}
    keep = untouchable(state) | never_shortened(state.units)
    names = tool_names(state.units)
    tok = state.ctx.tokenizer
    out = list(state.units)
    changed = False
    # Oldest first, and only until the transcript fits: the recent context stays whole.
    remaining = state.tokens()
    for i, unit in enumerate(state.units):
        if remaining <= state.target:
            break
        if i in keep or is_compacted(unit) or "compressed_from" in unit.meta or not unit.content:
            continue
        before = tok.count(unit.content)
        if before < MIN_TOKENS:
            continue
        kind, key = kind_of(unit)
        ratio = float(ratios.get(key, ratios["other"]))
        if unit.is_p1 and kind == "code":
            ratio = max(ratio, P1_CODE_RATIO)
        if ratio >= 1.0:
            continue
        short = compress(unit.content, kind, ratio, tok)
        after = tok.count(short)
        # what was shortened: the text (a call beside it is never touched)
        what = describe(unit.replace(tool_calls=[]), names) if unit.tool_calls else describe(unit, names)
        json_content = kind == "json"
        probe = _with_note(short, note(what, before, after, REF_PROBE), json_content)
        # never longer than the original, in tokens or in bytes
        if probe is None or len(probe.encode()) >= len(unit.content.encode()):
            continue
        if tok.count(probe) >= before:
            continue
        ref = archive_unit(state, unit)
        content = _with_note(short, note(what, before, after, ref), json_content)
        assert content is not None  # the probe had the same shape
        meta = {**unit.meta, "ref": ref, "strategy": NAME, "compressed_from": before}
        out[i] = unit.replace(content=content, meta=meta)
        remaining -= before - tok.count(content)
        changed = True
    return state.with_units(out) if changed else None
