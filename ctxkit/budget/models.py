"""Known models (`models.toml`): windows, maximum outputs, tokenizers, prices, and name lookup."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ctxkit.errors import UsageError
from ctxkit.tokens.loaders import DEFAULT_TOKENIZER


@dataclass(frozen=True)
class ModelInfo:
    """One row of models.toml."""

    name: str
    provider: str
    context_window: int
    max_output_tokens: int | None = None
    tokenizer: str = DEFAULT_TOKENIZER
    tokenizer_proxy: bool = False
    tokenizer_note: str = ""
    extended_context_window: int | None = None
    notes: str = ""
    aliases: tuple[str, ...] = ()
    input_per_mtok: float | None = None  # USD per million input tokens
    cached_input_per_mtok: float | None = None  # a prompt-cache read
    cache_write_per_mtok: float | None = None  # a prompt-cache write (Anthropic)
    output_per_mtok: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The row as `ctxkit models --format json` prints it."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__} | {
            "aliases": list(self.aliases)
        }


@lru_cache(maxsize=1)
def load_models() -> dict[str, ModelInfo]:
    """The bundled models table, by name."""
    # imported here: a command that names no model (`count`) never reads the table
    from importlib import resources

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    text = resources.files("ctxkit.budget").joinpath("models.toml").read_text(encoding="utf-8")
    table = tomllib.loads(text)["models"]
    return {
        name: ModelInfo(name=name, **{**row, "aliases": tuple(row.get("aliases", ()))})
        for name, row in table.items()
    }


@lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    return {alias: m.name for m in load_models().values() for alias in m.aliases}


# A vendor's dated snapshot of a model (`gpt-4o-2024-08-06`, `claude-sonnet-4-20250514`) or its
# moving `-latest` pointer: the same window and prices as the model itself.
_SNAPSHOT = re.compile(r"^(?P<base>.+?)-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def find_model(name: str) -> tuple[ModelInfo | None, str]:
    """The table row for a model name and the name it matched as ("" when none).

    Names are strict: a row's name or one of its aliases, without a `provider/` prefix,
    optionally followed by a dated snapshot suffix or `-latest`. Nothing else matches: a typo
    is an error (`model_suggestions` says what was meant), never another model.
    """
    models = load_models()
    key = name.strip().lower()
    if "/" in key:
        key = key.rsplit("/", 1)[1]
    snapshot = _SNAPSHOT.match(key)
    for cand in (key, snapshot.group("base") if snapshot else None):
        if cand is None:
            continue
        canonical = cand if cand in models else _aliases().get(cand)
        if canonical is not None:
            return models[canonical], canonical
    return None, ""


def priced_model(name: str, flag: str = "--cost") -> ModelInfo:
    """The model a price flag names, with prices; an unknown or unpriced one is a usage error."""
    info, _ = find_model(name)
    if info is None:
        close = model_suggestions(name)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise UsageError(f"{flag}: unknown model {name!r}{hint}")
    if info.input_per_mtok is None or info.output_per_mtok is None:
        raise UsageError(f"{flag}: models.toml lists no prices for {info.name}")
    return info


def model_suggestions(name: str, n: int = 3) -> list[str]:
    """The known model names (and aliases) closest to `name`, best first."""
    import difflib

    key = name.strip().lower().rsplit("/", 1)[-1]
    return difflib.get_close_matches(key, [*load_models(), *_aliases()], n=n, cutoff=0.6)
