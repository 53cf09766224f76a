"""Helpers shared by the format modules: read context, stats, JSON, text of content blocks."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from ctxkit.classify import classify
from ctxkit.errors import InputError
from ctxkit.model import ROLES, Transcript, Unit


@dataclass(frozen=True)
class ReadOptions:
    """How to read transcripts: built once from the flags (`--from`, `--include-sidechains`,
    `--include-compacted`, `--skip-invalid`) and passed whole to every reader."""

    format: str | None = None  # None: detected per file (per line for datasets)
    include_sidechains: bool = False  # Claude Code: keep subagent records in the main thread
    include_compacted: bool = False  # Claude Code, Codex, OpenHands: also read what their compaction summarized
    skip_invalid: bool = False  # count and skip unreadable lines instead of stopping
    max_input_mb: float | None = None  # largest transcript held; None: $CTXKIT_MAX_INPUT_MB or 1024


@dataclass
class ReadStats:
    """Counts filled while reading, so a command can say how many records it used or skipped."""

    files: int = 0
    records: int = 0  # JSONL lines parsed, or the items of a JSON document's top level
    skipped_invalid: int = 0  # lines (or whole files) skipped by skip_invalid
    skipped_non_message: dict[str, int] = field(default_factory=dict)  # record kind -> count
    skipped_sidechain: int = 0  # Claude Code subagent records left out of the main thread
    warnings: list[str] = field(default_factory=list)  # "path:line: what", for --debug
    skipped_files: list[str] = field(default_factory=list)  # "path (why)": read, not a transcript

    def skip(self, kind: str, n: int = 1) -> None:
        """Count a record that is not a message (by its kind)."""
        self.skipped_non_message[kind] = self.skipped_non_message.get(kind, 0) + n

    def merge(self, other: ReadStats) -> None:
        """Add another file's counts to these."""
        self.files += other.files
        self.records += other.records
        self.skipped_invalid += other.skipped_invalid
        for k, v in other.skipped_non_message.items():
            self.skip(k, v)
        self.skipped_sidechain += other.skipped_sidechain
        self.warnings.extend(other.warnings)
        self.skipped_files.extend(other.skipped_files)


@dataclass
class Source:
    """Where a list of records came from, and how to read it.

    `lines[i]` is the file line of record i when the file is JSONL (None for a JSON document);
    `line` is the dataset line of the whole conversation.
    """

    path: str
    layout: str
    envelope: dict[str, Any] = field(default_factory=dict)
    lines: Sequence[int] | None = None
    line: int | None = None
    tid: str = "t0"
    include_sidechains: bool = False
    skip_invalid: bool = False
    stats: ReadStats = field(default_factory=ReadStats)
    include_compacted: bool = False  # Claude Code: keep records before its last compaction summary
    # Unknown content block types already reported; shared by every Source of one file so a
    # dataset says it once, not once per conversation.
    seen_blocks: set[str] = field(default_factory=set)

    def line_of(self, index: int) -> int | None:
        """File line of record `index`, or the dataset line, or None inside a JSON document."""
        if self.lines is not None and 0 <= index < len(self.lines):
            return self.lines[index]
        return self.line

    def bad(self, index: int, problem: str, record: Any = None) -> None:
        """A record that cannot be read: raise, or count it when skipping invalid input."""
        where = f"record {index + 1}: " if self.lines is None else ""
        if self.skip_invalid:
            self.stats.skipped_invalid += 1
            self.stats.warnings.append(f"{self.path}:{self.line_of(index) or '-'}: {where}{problem}")
            return
        raise InputError(self.path, self.line_of(index), where + problem, snippet_of(record))

    def warn(self, index: int, message: str) -> None:
        """Something odd but readable (a result without its call...)."""
        self.stats.warnings.append(f"{self.path}:{self.line_of(index) or '-'}: {message}")

    def left_out(self, kind: str, n: int) -> None:
        """Count `n` messages an agent's own compaction took out of the model's context (`kind`:
        the reader's COMPACTED, "before X's last compaction") and say so in a warning."""
        self.stats.skip(kind, n)
        self.stats.warnings.append(f"{self.path}: {n:,} messages {kind} left out (the model no longer sees them)")

    def transcript(self, units: list[Unit], source_format: str, session: Any,
                   metadata: dict[str, Any]) -> Transcript:
        """The transcript of an agent's log read from here: its id the session the log names,
        else this source's; its layout, envelope and line this source's."""
        return Transcript(units=units, id=str(session or self.tid), source_format=source_format, layout=self.layout,
                          envelope=dict(self.envelope), line=self.line, metadata=metadata)

    def unknown_block(self, kind: str, how: str) -> None:
        """Report a content block type no reader knows, once per file."""
        if kind in self.seen_blocks:
            return
        self.seen_blocks.add(kind)
        self.stats.warnings.append(f"{self.path}: unknown content block type '{kind}' counted as its {how}")


def snippet_of(record: Any) -> str:
    """The first characters of a record, for error messages."""
    if record is None:
        return ""
    if isinstance(record, bytes):
        return record[:60].decode("utf-8", "replace")
    if isinstance(record, str):
        return record[:60]
    try:
        return orjson.dumps(record)[:60].decode("utf-8", "replace")
    except TypeError:
        return repr(record)[:60]


# orjson reads an integer beyond 64 bits as a float (123456789012345678901234567890 comes back
# as 1.2345678901234568e+29) and will not write one: a record holding a run of 19 digits (the
# shortest such integer) is read again, and written, by the standard library, which keeps
# integers exact. Floats round-trip either way (both write the shortest exact form).
_LONG_DIGITS = re.compile(rb"\d{19}")
_LONG_DIGITS_TEXT = re.compile(r"\d{19}")


def loads(data: bytes | str) -> Any:
    """JSON text to Python, numbers exact: orjson, or the standard library for huge integers.

    Raises `orjson.JSONDecodeError` (a `ValueError`) on text that is not JSON.
    """
    obj = orjson.loads(data)
    pattern = _LONG_DIGITS_TEXT if isinstance(data, str) else _LONG_DIGITS
    if pattern.search(data) is None:  # type: ignore[arg-type]
        return obj
    try:
        return json.loads(data)
    except ValueError as exc:  # an integer of more than 4,300 digits (Python's own limit)
        text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
        raise orjson.JSONDecodeError(f"number too long: {exc}", text, 0) from None


def dumps(obj: Any, *, indent: bool = False) -> str:
    """Compact JSON text (orjson, or the standard library when an integer exceeds 64 bits)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2 if indent else 0).decode("utf-8")
    except TypeError as exc:
        if "64-bit" not in str(exc):
            raise
    if indent:
        return json.dumps(obj, ensure_ascii=False, indent=2)
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def args_text(value: Any) -> str:
    """Tool-call arguments as JSON text: strings are kept as they are, objects serialized."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return dumps(value)


def args_object(text: str) -> dict[str, Any]:
    """Tool-call arguments text back to an object (Anthropic `input`); non-objects are wrapped."""
    if not text:
        return {}
    try:
        value = loads(text)
    except orjson.JSONDecodeError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}


IMAGE_BLOCKS = frozenset({"image", "image_url", "input_image"})
# Block types read on purpose below (no warning): their text, or their JSON when they have none.
_HANDLED_BLOCKS = frozenset({"document", "refusal", "file", "input_file", "redacted_thinking"})
# Fields holding text the model reads, in a block of a type the caller did not name.
_TEXT_FIELDS = ("text", "refusal", "thinking")
# Opaque fields the model never reads as text (signatures, encrypted reasoning or results).
_OPAQUE_KEYS = frozenset({"signature", "encrypted_content", "encrypted_index"})


def blocks_text(content: Any, text_types: Iterable[str] = ("text",), src: Source | None = None) -> tuple[str, int]:
    """Text and image count of a content value: a string, or a list of typed blocks.

    Blocks of the `text_types` give their `text`; image blocks count as images; any other block
    counts what the model reads of it (see `block_text`), so no content is silently dropped.
    """
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return str(content), 0
    parts: list[str] = []
    images = 0
    types = tuple(text_types)
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in types or (kind is None and "text" in block):
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
        elif kind in IMAGE_BLOCKS:
            images += 1
        else:
            text, n = block_text(block, types, src)
            if text:
                parts.append(text)
            images += n
    return "\n".join(parts), images


def block_text(block: dict[str, Any], text_types: Iterable[str] = ("text",), src: Source | None = None) -> tuple[str, int]:
    """What the model reads of a block that is not plain text or an image, and its image count.

    Text-bearing fields (`text`, `refusal`, `thinking`, a document's `title`/`context` and text
    `source.data`, nested `content`) give their text; a block with none counts as its compact
    JSON. Base64 payloads are never text: a base64 document or image source counts as an image.
    Unknown types are reported once per file through `src`.
    """
    kind = block.get("type")
    if kind == "redacted_thinking":
        return "", 0  # encrypted: no readable text to count
    types = tuple(text_types)
    parts: list[str] = []
    images = 0
    if kind == "document":
        parts.extend(block[k] for k in ("title", "context") if isinstance(block.get(k), str) and block[k])
    parts.extend(block[k] for k in _TEXT_FIELDS if isinstance(block.get(k), str) and block[k])
    source = block.get("source")
    has_text = bool(parts)
    if isinstance(source, dict):
        stype = source.get("type")
        if stype == "text" and isinstance(source.get("data"), str):
            parts.append(source["data"])
            has_text = True
        elif stype == "content" and "content" in source:
            text, n = blocks_text(source["content"], types, src)
            parts.append(text)
            images += n
            has_text = True
        elif stype == "base64":
            images += 1
            has_text = has_text or kind in ("document", "image")
    nested = block.get("content")
    if isinstance(nested, (str, list, dict)):
        text, n = blocks_text(nested, types, src)
        if text or n:
            parts.append(text)
            images += n
            has_text = True
    known = kind in _HANDLED_BLOCKS
    if has_text:
        if not known and src is not None:
            src.unknown_block(str(kind), "text fields")
        return "\n".join(p for p in parts if p), images
    stripped, n = _strip_payloads(block)
    if not known and src is not None:
        src.unknown_block(str(kind), "JSON text")
    return dumps(stripped), n


def _strip_payloads(value: Any) -> tuple[Any, int]:
    """A copy without base64 payloads and opaque fields, and how many image-like payloads it had."""
    if isinstance(value, list):
        out_list: list[Any] = []
        total = 0
        for item in value:
            item, n = _strip_payloads(item)
            out_list.append(item)
            total += n
        return out_list, total
    if not isinstance(value, dict):
        if isinstance(value, str) and value.startswith("data:") and ";base64," in value[:200]:
            return value[: value.index(",") + 1], 1
        return value, 0
    out: dict[str, Any] = {}
    total = 0
    base64_source = value.get("type") == "base64"
    for key, item in value.items():
        if key in _OPAQUE_KEYS:
            continue
        if key == "data" and base64_source:
            total += 1
            continue
        if key == "file_data" and isinstance(item, str):
            total += 1  # an OpenAI file part's base64 file: a flat cost like an image
            continue
        if key == "data" and isinstance(item, str) and len(item) > 256 and " " not in item[:256]:
            continue  # audio and other base64 blobs: not text the model reads
        out[key], n = _strip_payloads(item)
        total += n
    return out, total


def text_lines(text: str) -> list[str]:
    """Lines with their ends, cut at `\n` only (str.splitlines also cuts at \x1e, \f, \u2028...)."""
    pieces = text.split("\n")
    lines = [p + "\n" for p in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def timestamp_of(value: Any) -> float | None:
    """Seconds since the epoch from an ISO-8601 string or a number; None when absent or odd."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        # Milliseconds are common in JS-written logs.
        return float(value) / 1000.0 if value > 1e11 else float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def finish(unit: Unit, typed: bool = False) -> Unit:
    """Give a unit its content type (unless the source stated one)."""
    if not typed:
        unit.type = classify(unit)
    return unit


def canonical_role(role: str, aliases: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """A source's role as one of ctxkit's (`ROLES`): itself, else its alias, else `user`; and
    the unit's meta, which keeps a role it replaced (`source_role`)."""
    if role in ROLES:
        return role, {}
    return aliases.get(role, "user"), {"source_role": role}


def finish_run(run: list[Unit]) -> list[Unit]:
    """The units one source record gave, finished (`finish`) and, where it gave several, each
    marked with their number (`group_size`, as `link_group_sizes` marks them)."""
    for u in run:
        finish(u)
    if len(run) > 1:
        for u in run:
            u.meta["group_size"] = len(run)
    return run


def link_group_sizes(units: list[Unit]) -> None:
    """Mark units that share a source record with the group size, so writers can tell whether
    a group is still whole before they emit its raw record."""
    i = 0
    n = len(units)
    while i < n:
        j = i + 1
        g = units[i].group
        while j < n and units[j].group == g and g is not None:
            j += 1
        if j - i > 1:
            for u in units[i:j]:
                u.meta["group_size"] = j - i
        i = j


def raw_groups(units: Sequence[Unit]) -> list[tuple[Any, list[Unit]]]:
    """Split units into runs that share a group; each run carries its raw record when it is whole
    and untouched (every unit still has the same raw and none is missing), else None."""
    runs: list[tuple[Any, list[Unit]]] = []
    i = 0
    n = len(units)
    while i < n:
        u = units[i]
        j = i + 1
        if u.group is not None:
            while j < n and units[j].group == u.group:
                j += 1
        run = list(units[i:j])
        raw = u.raw
        size = u.meta.get("group_size", 1) if u.meta else 1
        if raw is not None and len(run) == size and all(v.raw is raw or v.raw == raw for v in run):
            runs.append((raw, run))
        else:
            runs.append((None, run))
        i = j
    return runs


def tools_as(shape: str | None, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas in a format's `tool_shape` (OpenAI `function` or Anthropic `input_schema`);
    schemas already in that shape, or of unknown shape, or for no shape (None), pass through."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, dict):
            out.append(tool)
            continue
        if shape == "anthropic" and (isinstance(tool.get("function"), dict) or (
                "name" in tool and "parameters" in tool and "input_schema" not in tool)):
            fn = tool["function"] if isinstance(tool.get("function"), dict) else tool
            conv: dict[str, Any] = {"name": fn.get("name", "")}
            if "description" in fn:
                conv["description"] = fn["description"]
            conv["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
            out.append(conv)
        elif shape == "openai" and "input_schema" in tool:
            fn = {"name": tool.get("name", "")}
            if "description" in tool:
                fn["description"] = tool["description"]
            fn["parameters"] = tool["input_schema"]
            out.append({"type": "function", "function": fn})
        elif shape == "openai" and "name" in tool and "parameters" in tool and "function" not in tool:
            # Bare function schemas (ShareGPT's `tools` string holds these).
            out.append({"type": "function", "function": tool})
        else:
            out.append(tool)
    return out


def message_model(record: dict[str, Any]) -> str | None:
    """The model an app log's record of an Anthropic message names (`message.model`); None for
    `<synthetic>`, the app's own messages."""
    msg = record.get("message")
    model = msg.get("model") if isinstance(msg, dict) else None
    return model if isinstance(model, str) and not model.startswith("<") else None


def source_records(u: Unit) -> list[dict[str, Any]]:
    """The record(s) a unit was read from, as a list (an app log's response may span several)."""
    src = u.source if u.source is not None else u.raw
    if isinstance(src, list):
        return [r for r in src if isinstance(r, dict)]
    return [src] if isinstance(src, dict) else []


def joins(u: Unit) -> bool:
    """Whether the unit goes in the same message as the unit before it (`meta["join"]`)."""
    return bool(u.meta.get("join")) if u.meta else False


def is_reasoning_only(u: Unit) -> bool:
    """An assistant unit that holds only reasoning: not a chat message of its own."""
    return u.role == "assistant" and not u.content and not u.tool_calls and not u.images and bool(u.reasoning)


def first_context(units: list[Unit], calls: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The log's first recorded call and the texts of what it saw (`input_tokens`, `texts`), for
    the budget's fit (`budget.fit`: nothing stays fixed beyond what that call carried) when the
    reader keeps only what follows the agent's compaction; None when no call is recorded."""
    if not calls:
        return None
    first = min(calls, key=lambda c: int(c.get("after_unit", 0)))
    texts: list[str] = []
    for u in units[: max(0, int(first.get("after_unit", -1)) + 1)]:
        texts += [u.content, u.reasoning, *(f"{c.name} {c.arguments}" for c in u.tool_calls)]
    return {"input_tokens": int(first["input_tokens"]), "texts": [x for x in texts if x]}


def session_facts(model: Any, window: Any, session: Any) -> dict[str, Any]:
    """What an agent's log says of its session, where it says it: the model, its context window
    and the session id (metadata `model`, `context_window`, `session_id`)."""
    facts = {"model": model, "context_window": window, "session_id": session}
    return {key: value for key, value in facts.items() if value}


def provider_usage(source: str, calls: list[dict[str, Any]], first: dict[str, Any] | None) -> dict[str, Any]:
    """A log's `provider_usage` metadata: its recorded calls, and the whole log's first call
    (`first_context`) where the reader kept only what follows the agent's compaction, so the
    kept calls start later."""
    out: dict[str, Any] = {"source": source, "calls": calls}
    if first is not None and calls and first["input_tokens"] != calls[0]["input_tokens"]:
        out["first"] = first
    return out
