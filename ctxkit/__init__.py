"""ctxkit: offline context management for LLM agent transcripts.

The library stands alone (no click); the public API is re-exported lazily so that
`import ctxkit` stays cheap.
"""

from __future__ import annotations

# No imports here: this runs first in every `ctxkit` command, where a Ctrl-C cannot yet be
# handled (see ctxkit.cli); the exports are imported when asked for.

__version__ = "0.1.0"

_EXPORTS = {
    "Unit": "ctxkit.model",
    "Transcript": "ctxkit.model",
    "ToolCall": "ctxkit.model",
    "read_path": "ctxkit.formats",
    "read_text": "ctxkit.formats",
    "write_transcripts": "ctxkit.formats",
    "get_tokenizer": "ctxkit.tokens",
    "count_transcript": "ctxkit.tokens",
    "evaluate": "ctxkit.guard",
    "compact": "ctxkit.compaction",
}


def __getattr__(name: str) -> object:
    import importlib

    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxkit' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = sorted(_EXPORTS)
