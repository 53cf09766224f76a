"""The registry: every format module, one line each, in detection order.

A format is its module's `FORMAT` record (`formats.base.Format`, the written contract); adding
one is its module plus one line below. Detection asks the formats in this order and the first
that claims an input reads it, so a format whose records would also pass for another's (Cline's
Anthropic messages, Copilot's events) comes before that one, and the plain chat formats come
last: `openai` is the fallback for a bare list of {role, content} messages. Formats of other
distributions (entry points of the group `ctxkit.formats`, see `ctxkit.plugins`) come after.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from ctxkit import plugins
from ctxkit.errors import UsageError
from ctxkit.formats.base import Format

__all__ = ["FORMATS", "WRITABLE", "detect_format", "is_conversation", "load_plugins", "register", "unregister"]

_MODULES = (
    "units",
    "qwen_code",
    "claude_code",
    "claude_stream",
    "codex",
    "codex_exec",
    "copilot_cli",
    "pi",
    "openhands",
    "gemini_cli",
    "gemini_cli_jsonl",
    "opencode",
    "gemini",
    "cline",
    "anthropic",
    "openai",
    "sharegpt",
    "swe_agent",
    "atif",
    "specstory",
    "aider",
)


def _load(module: str) -> Format:
    fmt = getattr(importlib.import_module(f"ctxkit.formats.{module}"), "FORMAT", None)
    if not isinstance(fmt, Format):
        raise TypeError(f"ctxkit.formats.{module} defines no FORMAT = Format(...) (see ctxkit.formats.base)")
    return fmt


FORMATS: dict[str, Format] = {f.name: f for f in map(_load, _MODULES)}


def register(fmt: Format) -> None:
    """Add a format after those registered (a plugin's, a test's fake); its name must be new."""
    if fmt.name in FORMATS:
        raise UsageError(f"format {fmt.name!r} is registered already")
    FORMATS[fmt.name] = fmt
    _changed()


def unregister(name: str) -> Format:
    """Take a registered format out again (what `register` added)."""
    fmt = FORMATS.pop(name)
    _changed()
    return fmt


def _changed() -> None:
    record_keys.cache_clear()


@functools.cache
def record_keys() -> tuple[str, ...]:
    """Every key a conversation object may hold its records under (`Format.key`, `item_key`,
    `also_keys`): the default `messages` first, then in registry order (Parquet's columns)."""
    keys = [Format.key]
    for f in FORMATS.values():
        for k in (f.item_key, *((f.key, *f.also_keys) if f.shape == "messages" else ())):
            if k is not None and k not in keys:
                keys.append(k)
    return tuple(keys)


def load_plugins() -> list[str]:
    """Register the formats other distributions give (entry points of the group
    `ctxkit.formats`, see `ctxkit.plugins`) that are not registered yet; their names."""
    found = plugins.load("ctxkit.formats", lambda obj: isinstance(obj, Format) and obj.name not in FORMATS,
                         "a ctxkit.formats.base.Format of a new name")
    for _, fmt in found:
        register(fmt)
    return [fmt.name for _, fmt in found]


load_plugins()

# The --from/--to choices: every format known when the CLI starts, plugins included.
WRITABLE: tuple[str, ...] = tuple(FORMATS)


def detect_format(obj: Any) -> str | None:
    """The format of a parsed list of records or JSON object; None if no format claims it.

    An object is asked of every format (`detect_object`: a whole transcript or a conversation
    object of its own), then read as the records it holds under a format's `key`; a list is
    asked of every format whose records may stand bare.
    """
    if isinstance(obj, dict):
        for fmt in FORMATS.values():
            if fmt.detect_object(obj):
                return fmt.name
        for fmt in FORMATS.values():
            for key in (fmt.key, *fmt.also_keys):
                records = obj.get(key)
                if fmt.shape in ("messages", "log") and isinstance(records, list) and fmt.detect(records):
                    return fmt.name
        return None
    if isinstance(obj, list):
        for fmt in FORMATS.values():
            if fmt.shape in ("messages", "log") and fmt.bare and fmt.detect(obj):
                return fmt.name
    return None


def is_conversation(obj: Any) -> bool:
    """Whether a parsed JSON object is one conversation (a dataset's line or item): a whole
    transcript of an object format, or an object holding a format's records under its key."""
    if not isinstance(obj, dict):
        return False
    return any(fmt.detect_object(obj) for fmt in FORMATS.values()) or any(
        fmt.shape == "messages" and isinstance(obj.get(key), list) for fmt in FORMATS.values()
        for key in (fmt.key, *fmt.also_keys)
    )


def kinds() -> str:
    """The labels of the formats a JSON file may be, for an error that found none of them."""
    labels = [f.label for f in FORMATS.values() if f.shape != "text"]
    return ", ".join(labels[:-1]) + " or " + labels[-1]
