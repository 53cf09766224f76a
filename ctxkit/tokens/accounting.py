"""Per-message token accounting (OpenAI's documented rule) and the regions of a transcript."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.model import Transcript, Unit
from ctxkit.tokens.loaders import Tokenizer, get_tokenizer

# Slots of the flat text list built for one batch, per unit.
_CONTENT, _CALLS, _REASONING, _OVERHEAD = 0, 1, 2, 3


REGIONS = ("system", "tools", "summary", "history")


@dataclass(frozen=True)
class CountOptions:
    """Accounting constants; the defaults are OpenAI's documented ones for chat models."""

    image_tokens: int = 85
    tool_schema_scale: float = 1.0
    tokens_per_message: int = 3
    tokens_per_name: int = 1
    reply_priming: int = 3


@dataclass(slots=True)
class UnitCount:
    """Tokens of one unit, by part.

    `overhead` is the message framing: tokens_per_message, the role, a speaker name when set
    (tokens_per_name + its text; not on tool results, whose name only labels the tool), the
    id of the call a tool result answers, and the text a format frames the content with
    (`framing`: Cline's `[read_file for 'a.py'] Result:` line over a result, which the model
    reads and a compaction of the content keeps).
    """

    content: int = 0
    tool_calls: int = 0
    reasoning: int = 0
    overhead: int = 0
    images: int = 0

    @property
    def total(self) -> int:
        return self.content + self.tool_calls + self.reasoning + self.overhead + self.images

    def to_dict(self) -> dict[str, int]:
        return {
            "content": self.content,
            "tool_calls": self.tool_calls,
            "reasoning": self.reasoning,
            "overhead": self.overhead,
            "images": self.images,
            "total": self.total,
        }


@dataclass
class TranscriptCount:
    """Per-unit counts (aligned with `transcript.units`) and totals per region."""

    units: list[UnitCount]
    regions: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"regions": dict(self.regions), "total": self.total}


def speaker_name(unit: Unit) -> str | None:
    """The name a message sends (OpenAI's `name`); a tool result's name is ctxkit's label only."""
    if unit.role == "tool" or unit.type == "tool_result":
        return None
    return unit.name or None


def framing(unit: Unit) -> str:
    """The text a format writes around a unit's content (`meta["framing"]`), "" when none."""
    frame = unit.meta.get("framing") if unit.meta else None
    return frame if isinstance(frame, str) else ""


def unit_texts(units: Sequence[Unit]) -> tuple[list[str], list[tuple[int, int]]]:
    """Every text `count_units` encodes, with the (unit index, part) each belongs to."""
    texts: list[str] = []
    slots: list[tuple[int, int]] = []
    for i, u in enumerate(units):
        if u.content:
            texts.append(u.content)
            slots.append((i, _CONTENT))
        if u.reasoning:
            texts.append(u.reasoning)
            slots.append((i, _REASONING))
        for call in u.tool_calls:
            texts.append(call.name)
            slots.append((i, _CALLS))
            if call.arguments:
                texts.append(call.arguments)
                slots.append((i, _CALLS))
        texts.append(u.role)
        slots.append((i, _OVERHEAD))
        # the rest of the framing a message costs: a speaker name, the id a result answers, and
        # the text a format writes around the content
        for text in (speaker_name(u), u.tool_call_id, framing(u)):
            if text:
                texts.append(text)
                slots.append((i, _OVERHEAD))
    return texts, slots


def _count_parts(
    units: Sequence[Unit], tok: Tokenizer, opts: CountOptions
) -> tuple[list[UnitCount], list[int]]:
    """Each unit's counts by part, and its total."""
    # Six texts per unit (content, reasoning, role, speaker name, answered call id, framing; ""
    # when absent) and two per tool call, counted in one batch and read back in the same order. The
    # loops run once per message of every count (a million-token log has ten thousand): each
    # unit's speaker name is looked up once, and its total is summed here, not by the property.
    texts: list[str] = []
    add = texts.append
    named: list[bool] = []
    for u in units:
        name = speaker_name(u)
        named.append(name is not None)
        add(u.content)
        add(u.reasoning)
        add(u.role)
        add(name or "")
        add(u.tool_call_id or "")
        add(framing(u))
        for call in u.tool_calls:
            add(call.name)
            add(call.arguments)
    counts = tok.count_many(texts) if texts else []
    per_message = opts.tokens_per_message
    per_name = opts.tokens_per_name
    image_tokens = opts.image_tokens
    result: list[UnitCount] = []
    totals: list[int] = []
    keep = result.append
    total_of = totals.append
    at = 0
    for u, has_name in zip(units, named, strict=True):
        content, reasoning, role, name_tokens, call_id, frame = counts[at : at + 6]
        at += 6
        calls = 0
        if u.tool_calls:
            for _ in u.tool_calls:
                calls += counts[at] + counts[at + 1]
                at += 2
        overhead = per_message + role + name_tokens + call_id + frame + (per_name if has_name else 0)
        images = u.images * image_tokens
        keep(UnitCount(content, calls, reasoning, overhead, images))
        total_of(content + calls + reasoning + overhead + images)
    return result, totals


def count_units(
    units: Sequence[Unit], tok: Tokenizer, opts: CountOptions = CountOptions()
) -> list[UnitCount]:
    """Count each unit in one batch through `tok`; also sets `unit.tokens` to the total."""
    return _count_and_total(units, tok, opts)[0]


def _count_and_total(
    units: Sequence[Unit], tok: Tokenizer, opts: CountOptions
) -> tuple[list[UnitCount], list[int]]:
    """`count_units`, with each unit's total as a list."""
    result, totals = _count_parts(units, tok, opts)
    for u, total in zip(units, totals, strict=True):
        u.tokens = total
    return result, totals


def schema_text(schema: dict[str, Any]) -> str:
    """The text a tool schema is counted as: compact JSON with sorted keys."""
    import orjson

    return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()


def count_tool_schemas(
    tools: Sequence[dict[str, Any]], tok: Tokenizer, opts: CountOptions = CountOptions()
) -> int:
    """Tokens of the tool-schema region: each schema's JSON text, times tool_schema_scale."""
    if not tools:
        return 0
    raw = sum(tok.count_many([schema_text(t) for t in tools]))
    return math.ceil(raw * opts.tool_schema_scale)


def region_of(unit: Unit) -> str:
    """The region a unit is counted in: system, summary or history."""
    if unit.role == "system":
        return "system"
    if unit.type == "summary":
        return "summary"
    return "history"


def count_transcript(
    t: Transcript,
    tok: Tokenizer | None = None,
    opts: CountOptions = CountOptions(),
    known: Mapping[int, tuple[Unit, UnitCount]] | None = None,
) -> TranscriptCount:
    """Count every unit of a transcript and total the regions (reply priming is history).

    `known`: counts already made under the same tokenizer and options, by `id(unit)` with the
    unit (a compaction's memo): the units found there are not counted again.
    """
    tok = tok or get_tokenizer()
    if known:
        units: list[UnitCount | None] = []
        totals: list[int] = []
        fresh: list[int] = []
        for i, u in enumerate(t.units):
            hit = known.get(id(u))
            if hit is not None and hit[0] is u:
                units.append(hit[1])
                totals.append(hit[1].total)
            else:
                units.append(None)
                totals.append(0)
                fresh.append(i)
        if fresh:
            counted, fresh_totals = _count_and_total([t.units[i] for i in fresh], tok, opts)
            for i, uc, total in zip(fresh, counted, fresh_totals, strict=True):
                units[i] = uc
                totals[i] = total
        return _totalled(t, [uc for uc in units if uc is not None], totals, tok, opts)
    return _totalled(t, *_count_and_total(t.units, tok, opts), tok, opts)


def _totalled(
    t: Transcript, units: list[UnitCount], totals: list[int], tok: Tokenizer, opts: CountOptions
) -> TranscriptCount:
    regions = dict.fromkeys(REGIONS, 0)
    for u, total in zip(t.units, totals, strict=True):
        regions[region_of(u)] += total
    regions["tools"] = count_tool_schemas(t.tools, tok, opts)
    if t.units:
        regions["history"] += opts.reply_priming
    reminders = count_attachments(t, tok)
    if reminders:
        regions["reminders"] = reminders
    return TranscriptCount(units=units, regions=regions, total=sum(regions.values()))


def attachment_texts(t: Transcript) -> list[tuple[int, str]]:
    """What the agent puts into the context beside the units, as the log shows it: (the index
    of the unit before it, its text), from a reader's `metadata["attachments"]` (Claude Code's
    attachment records; `formats.claude_attachments`)."""
    found = t.metadata.get("attachments") if t.metadata else None
    if not isinstance(found, list):
        return []
    return [
        (int(a.get("after_unit", -1)), str(a["text"]))
        for a in found
        if isinstance(a, dict) and isinstance(a.get("text"), str) and a["text"]
    ]


def count_attachments(t: Transcript, tok: Tokenizer) -> int:
    """Tokens of the `reminders` region: every attachment the log shows in the context."""
    texts = [text for _, text in attachment_texts(t)]
    return sum(tok.count_many(texts)) if texts else 0
