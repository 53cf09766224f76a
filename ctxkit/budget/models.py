"""Known models (`models.toml`): windows, maximum outputs, tokenizers, prices, and name lookup."""

from __future__ import annotations

import dataclasses
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


# What names add to a model's own: a dated snapshot or version (`gpt-4o-2024-08-06`,
# `claude-sonnet-4-20250514`, Vertex's `@20250929`, Bedrock's `-v1:0`, OpenAI's `-0613`, Gemini's
# `-preview-05-20`, `-001`) or a moving `-latest`; stripped one at a time, the model's own name
# must remain.
_VERSION = re.compile(
    r"(?:-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8}|-\d{4}|-\d{2}-\d{2}|-\d{3}|-latest|-preview|-exp"
    r"|-v\d+(?::\d+)?|:\d+)$"
)
# Bedrock's `us.anthropic.claude-...` and `meta.llama-...`: a region and a vendor before the name.
_VENDOR = re.compile(
    r"^(?:[a-z]{2,6}\.)?(?:anthropic|meta|mistral|amazon|cohere|openai|deepseek|qwen|google)\."
)
_DIGIT_DOT = re.compile(r"(?<=\d)\.(?=\d)")
_DIGIT_HYPHEN = re.compile(r"(?<=\d)-(?=\d)")
_ONE_M = "[1m]"


def _lookup(key: str) -> str | None:
    models = load_models()
    if key in models:
        return key
    return _aliases().get(key)


def _candidates(key: str) -> list[str]:
    """`key`, then `key` with one version suffix after another stripped, each also with dots
    and hyphens between digits swapped (`claude-sonnet-4.6`, `gpt-5-1-codex`)."""
    out: list[str] = []
    while key:
        for variant in (key, _DIGIT_DOT.sub("-", key), _DIGIT_HYPHEN.sub(".", key)):
            if variant not in out:
                out.append(variant)
        stripped = _VERSION.sub("", key)
        if stripped == key:
            break
        key = stripped
    return out


def find_model(name: str) -> tuple[ModelInfo | None, str]:
    """The table row for a model name and the name it matched as ("" when none).

    A row's name or one of its aliases matches, written as logs and providers write it: with a
    `provider/` or Bedrock `region.vendor.` prefix, a snapshot or version suffix, dots for
    hyphens between digits (`claude-sonnet-4.6`), a router's prefix word
    (`openrouter-llama-4-maverick`), or Claude Code's `[1m]` (the model with its 1M-token
    window). Nothing else matches: a typo is an error (`model_suggestions` says what was
    meant), never another model.

    >>> [find_model(n)[1] for n in ("claude-sonnet-4-5-20250929", "claude-sonnet-4.6", "openai/gpt-5.1-codex")]
    ['claude-sonnet-4-5', 'claude-sonnet-4-6', 'gpt-5.1']
    >>> info, matched = find_model("claude-sonnet-4-5[1m]")
    >>> matched, info.context_window
    ('claude-sonnet-4-5[1m]', 1000000)
    """
    key = name.strip().lower()
    one_m = key.endswith(_ONE_M)
    if one_m:
        key = key[: -len(_ONE_M)]
    key = _VENDOR.sub("", key.rsplit("/", 1)[-1])
    canonical = next((c for c in map(_lookup, _candidates(key)) if c is not None), None)
    if canonical is None:
        canonical = _by_suffix(key)
    if canonical is None:
        return None, ""
    info = load_models()[canonical]
    if one_m:
        if info.extended_context_window is not None:
            info = dataclasses.replace(
                info, context_window=info.extended_context_window, extended_context_window=None
            )
        return info, canonical + _ONE_M
    return info, canonical


def _by_suffix(key: str) -> str | None:
    """The longest known name that `key` ends with after a hyphen: a router's or host's prefix
    word before the model's own name (`openrouter-llama-4-maverick`)."""
    known = sorted({*load_models(), *_aliases()}, key=len, reverse=True)
    for cand in _candidates(key):
        for name in known:
            if cand.endswith("-" + name):
                return _lookup(name)
    return None


def known_model(name: str, flag: str = "") -> ModelInfo:
    """The models.toml row `name` finds; an unknown name is a usage error (after `flag`, when
    given) with the nearest known names."""
    info, _ = find_model(name)
    if info is None:
        close = model_suggestions(name)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise UsageError(f"{flag + ': ' if flag else ''}unknown model {name!r}{hint}")
    return info


def priced_model(name: str, flag: str = "--cost") -> ModelInfo:
    """The model a price flag names, with prices; an unknown or unpriced one is a usage error."""
    info = known_model(name, flag)
    if info.input_per_mtok is None or info.output_per_mtok is None:
        raise UsageError(f"{flag}: models.toml lists no prices for {info.name}")
    return info


def call_cost(model: Any, uncached: int, cache_read: int, cache_write: int, output: int) -> float:
    """USD for one call's tokens on `model`'s prices (per million tokens; a price the model does
    not list is billed as plain input)."""
    inp = model.input_per_mtok
    if inp is None or model.output_per_mtok is None:
        raise ValueError(f"{model.name} has no prices in models.toml")
    cached = model.cached_input_per_mtok if model.cached_input_per_mtok is not None else inp
    write = model.cache_write_per_mtok if model.cache_write_per_mtok is not None else inp
    usd = uncached * inp + cache_read * cached + cache_write * write
    return (usd + output * model.output_per_mtok) / 1_000_000


def prefix_call_cost(model: Any, tokens: int, cached: int) -> float:
    """USD for one call's `tokens` of input on `model` when `cached` of them are a prefix read
    from the prompt cache and the rest is written to it (billed as a cache write where the
    provider bills one, else as input); output left out."""
    rest = tokens - cached
    writes = model.cache_write_per_mtok is not None
    return call_cost(model, 0 if writes else rest, cached, rest if writes else 0, 0)


def model_suggestions(name: str, n: int = 3) -> list[str]:
    """The known model names (and aliases) closest to `name`, best first."""
    import difflib

    key = name.strip().lower().rsplit("/", 1)[-1]
    return difflib.get_close_matches(key, [*load_models(), *_aliases()], n=n, cutoff=0.6)


# A model name's family, tier and version: `claude-opus-4-6` is (claude, opus, 4.6), `gpt-5.1-codex`
# (gpt, codex, 5.1), `gemini-3.1-pro-preview` (gemini, pro, 3.1). Words that name neither a family
# nor a version are tiers.
_FAMILIES = ("claude", "gpt", "gemini", "deepseek", "qwen", "llama", "grok", "mistral", "phi", "o")
_WORD = re.compile(r"[a-z]+|\d+(?:[.-]\d+)*")


def _parts(name: str) -> tuple[str, frozenset[str], tuple[int, ...]] | None:
    key = _VENDOR.sub("", name.strip().lower().rsplit("/", 1)[-1]).removesuffix(_ONE_M)
    words = _WORD.findall(key)
    if not words:
        return None
    family = words[0]
    if family not in _FAMILIES:
        return None
    version: tuple[int, ...] = ()
    tiers: set[str] = set()
    for w in words[1:]:
        if w[0].isdigit():
            numbers = tuple(int(n) for n in re.split(r"[.-]", w))
            if not version and not (len(numbers) == 1 and numbers[0] > 1000):  # not a date
                version = numbers[:2]
        elif w not in ("preview", "latest", "exp", "v"):
            tiers.add(w)
    if family == "o" and not version:
        return None
    return family, frozenset(tiers), version


def find_family(name: str, at_least: int = 0) -> tuple[ModelInfo | None, str]:
    """The known model nearest an unknown name of a known family: the same family, as many of
    its tier words as can be had (opus, pro, codex, mini...), then the nearest version, newer
    preferred; (None, "") when the family is unknown. A model whose window is below `at_least`
    (a log's largest recorded call: the model it ran on held it) is passed over while any holds
    it. A guess, which the caller says.

    >>> [find_family(n)[0].name for n in ("claude-fable-5", "gpt-5.5", "gemini-3.1-pro-preview")]
    ['claude-opus-5', 'gpt-5.4', 'gemini-3-pro-preview']
    """
    wanted = _parts(name)
    if wanted is None:
        return None, ""
    family, tiers, version = wanted
    best: tuple[Any, ...] | None = None
    for info in load_models().values():
        got = _parts(info.name)
        if got is None or got[0] != family:
            continue
        shared = len(tiers & got[1])
        extra = len(got[1] - tiers)
        distance = _version_distance(version, got[2])
        newer = 1 if got[2] >= version else 0
        holds = 1 if info.context_window >= at_least else 0
        score = (holds, shared, -extra, -distance, newer, info.context_window)
        if best is None or score > best[0]:
            best = (score, info)
    if best is None:
        return None, ""
    return best[1], best[1].name


def _version_distance(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    def value(v: tuple[int, ...]) -> float:
        return (v[0] if v else 0) + (v[1] / 10 if len(v) > 1 else 0)

    return abs(value(a) - value(b))
