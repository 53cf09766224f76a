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
    "evaluate": "ctxkit.engines.guard",
    "compact": "ctxkit.compaction",
}


def lazy_names(module: str, names: dict[str, str]):
    """A module `__getattr__` that imports each of `names` from its module when first asked for."""

    def __getattr__(name: str) -> object:
        import importlib

        home = names.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return __getattr__


__getattr__ = lazy_names("ctxkit", _EXPORTS)


__all__ = sorted(_EXPORTS)
