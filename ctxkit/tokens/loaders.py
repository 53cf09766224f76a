"""Tokenizers by spec string: a registry of loaders, as tiktoken registers encodings, and the
small tokenizers it builds itself (a Hugging Face file, the estimates approx, max and scaled).
tiktoken's encodings are `tokens.encodings`, the fast counters `tokens.fast`."""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ctxkit.errors import TokenizerError
from ctxkit.tokens.base import CachedCounter, Tokenizer
from ctxkit.tokens.encodings import OFFLINE_ENCODINGS, TiktokenTokenizer, tiktoken_encoding
from ctxkit.tokens.fast import FAST_ENCODINGS, FastTokenizer, fast_counter_name

DEFAULT_TOKENIZER = "cl100k_base"


ACCEPTED_FORMS = (
    "cl100k_base (default, bundled, offline)",
    "o200k_base (bundled through bpe-openai, offline) and the model names that use it (gpt-4o)",
    "any other tiktoken encoding or model name (needs its data in tiktoken's cache)",
    "claude (an estimate: o200k_base x 1.20, fitted on real Claude Code logs)",
    "claude-4.7 (the tokenizer of Claude Opus 4.7 and later, estimated: o200k_base x 1.60)",
    "approx (ceil(chars/4))",
    "approx:<chars-per-token> (e.g. approx:2.5)",
    "max:<name> (the larger of <name> and chars/4, per text)",
    "hf:<path/to/tokenizer.json>",
)


class HFTokenizer(CachedCounter):
    """A local Hugging Face `tokenizer.json`, counted without special tokens or truncation."""

    exact = True

    def __init__(self, path: str):
        super().__init__()
        try:
            from tokenizers import Tokenizer as HFBackend
        except ImportError as exc:  # pragma: no cover - tokenizers is a dependency
            raise TokenizerError(f"hf:{path}: the `tokenizers` package is not installed") from exc
        if not os.path.isfile(path):
            raise TokenizerError(f"hf:{path}: no such file (expected a tokenizer.json)")
        try:
            backend = HFBackend.from_file(path)
        except Exception as exc:
            raise TokenizerError(f"hf:{path}: not a readable tokenizer.json ({exc})") from exc
        # A model's tokenizer.json often truncates and pads to its sequence length.
        backend.no_truncation()
        backend.no_padding()
        self.name = f"hf:{path}"
        self.backend = backend

    def _count_batch(self, texts: list[str]) -> list[int]:
        encodings = self.backend.encode_batch(texts, add_special_tokens=False)
        return [len(e.ids) for e in encodings]


class ApproxTokenizer:
    """ceil(chars / chars_per_token): a fast estimate, no vocabulary."""

    exact = False

    def __init__(self, chars_per_token: float = 4.0):
        self.chars_per_token = chars_per_token
        self.name = "approx" if chars_per_token == 4.0 else f"approx:{chars_per_token:g}"

    def count(self, text: str) -> int:
        """ceil(len(text) / chars_per_token)."""
        return math.ceil(len(text) / self.chars_per_token)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """`count` of each text."""
        cpt = self.chars_per_token
        return [math.ceil(len(t) / cpt) for t in texts]


class MaxTokenizer:
    """Per text, the larger of an inner tokenizer's count and ceil(chars / 4)."""

    exact = False

    def __init__(self, inner: Tokenizer):
        self.inner = inner
        self.name = f"max:{inner.name}"

    def count(self, text: str) -> int:
        """max(inner count, ceil(chars / 4))."""
        return max(self.inner.count(text), math.ceil(len(text) / 4))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """`count` of each text, the inner counts in one batch."""
        inner = self.inner.count_many(texts)
        return [max(n, math.ceil(len(t) / 4)) for n, t in zip(inner, texts, strict=True)]

    def clear_cache(self) -> None:
        """Forget the inner tokenizer's cached counts."""
        clear = getattr(self.inner, "clear_cache", None)
        if clear is not None:
            clear()


class ScaledTokenizer:
    """An estimate for a model family with no public tokenizer: an exact count times a factor
    fitted on that family's recorded usage (never presented as exact)."""

    exact = False

    def __init__(self, name: str, inner: Tokenizer, factor: float):
        self.name = name
        self.inner = inner
        self.factor = factor

    def count(self, text: str) -> int:
        """ceil(inner count * factor); 0 for an empty text."""
        return math.ceil(self.inner.count(text) * self.factor)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """`count` of each text, the inner counts in one batch."""
        return [math.ceil(n * self.factor) for n in self.inner.count_many(texts)]

    def clear_cache(self) -> None:
        """Forget the inner tokenizer's cached counts."""
        clear = getattr(self.inner, "clear_cache", None)
        if clear is not None:
            clear()


# Claude (Anthropic publishes no tokenizer): o200k_base x a factor fitted per tokenizer family on
# the real Claude Code logs' recorded input growth between calls (scripts/fit_claude_factor.py).
# Claude 3 to Opus 4.6: 1.20 (the best next-call error lies between 1.15 and 1.30 for each model
# of the family: Sonnet 4, Opus 4.1, Sonnet 4.5, Opus 4.6). Opus 4.7 and later use a new
# tokenizer ("1.0-1.35x more tokens", Anthropic): 1.60, on the one log of that family
# (claude-opus-5: large steps' median ratio 1.57, next-call error lowest at 1.70).
CLAUDE_O200K_FACTOR = 1.20
CLAUDE_47_O200K_FACTOR = 1.60


_TOKENIZERS: dict[str, Tokenizer] = {}


_TOKENIZERS_LOCK = threading.Lock()


def get_tokenizer(spec: str | None = None) -> Tokenizer:
    """The tokenizer for a spec (None means cl100k_base), loaded once and cached."""
    spec = (spec or DEFAULT_TOKENIZER).strip()
    with _TOKENIZERS_LOCK:
        tok = _TOKENIZERS.get(spec)
    if tok is None:
        tok = _load(spec)
        with _TOKENIZERS_LOCK:
            tok = _TOKENIZERS.setdefault(spec, tok)
    return tok


def _unknown(spec: str, why: str = "") -> TokenizerError:
    forms = "; ".join(ACCEPTED_FORMS)
    reason = f" ({why})" if why else ""
    return TokenizerError(f"unknown tokenizer {spec!r}{reason}; accepted: {forms}")


def _approx(arg: str | None, spec: str) -> Tokenizer:
    if arg is None:
        return ApproxTokenizer()
    try:
        chars_per_token = float(arg)
    except ValueError:
        raise _unknown(spec, f"{arg!r} is not a number of characters per token") from None
    if not math.isfinite(chars_per_token) or chars_per_token <= 0:
        raise _unknown(spec, "characters per token must be a positive number")
    return ApproxTokenizer(chars_per_token)


def _max(arg: str | None, spec: str) -> Tokenizer:
    if not arg:
        raise _unknown(spec, "max: needs a tokenizer name, e.g. max:cl100k_base")
    return MaxTokenizer(get_tokenizer(arg))


def _hf(arg: str | None, spec: str) -> Tokenizer:
    if not arg:
        raise _unknown(spec, "hf: needs a path to a tokenizer.json")
    return HFTokenizer(os.path.expanduser(arg))


def _claude(arg: str | None, spec: str) -> Tokenizer:
    if arg:
        raise _unknown(spec, "claude takes no argument")
    return ScaledTokenizer("claude", get_tokenizer("o200k_base"), CLAUDE_O200K_FACTOR)


def _claude_47(arg: str | None, spec: str) -> Tokenizer:
    if arg:
        raise _unknown(spec, "claude-4.7 takes no argument")
    return ScaledTokenizer("claude-4.7", get_tokenizer("o200k_base"), CLAUDE_47_O200K_FACTOR)


# Tokenizer kinds by the prefix of their spec (`kind` or `kind:argument`), as tiktoken registers
# encodings; a spec with no registered kind is a tiktoken encoding or model name.
LOADERS: dict[str, Callable[[str | None, str], Tokenizer]] = {
    "approx": _approx,
    "max": _max,
    "hf": _hf,
    "claude": _claude,
    "claude-4.7": _claude_47,
}


def _load(spec: str) -> Tokenizer:
    kind, sep, arg = spec.partition(":")
    loader = LOADERS.get(kind)
    if loader is not None:
        return loader(arg if sep else None, spec)
    return _load_tiktoken(spec)


def _resolve_tiktoken_name(spec: str) -> str | None:
    if spec in FAST_ENCODINGS:
        return spec  # the common case, without importing tiktoken
    import tiktoken
    import tiktoken.model

    offline = {bundle: name for name, bundle in OFFLINE_ENCODINGS.items()}
    if spec in offline:
        return offline[spec]
    if spec in tiktoken.list_encoding_names():
        return spec
    try:
        return tiktoken.model.encoding_name_for_model(spec)
    except KeyError:
        return None


def _load_tiktoken(spec: str) -> Tokenizer:
    name = _resolve_tiktoken_name(spec)
    if name is None:
        raise _unknown(spec, "not a tiktoken encoding or model name")
    if spec != name:
        # Model names share the tokenizer of their encoding (and its cache).
        return get_tokenizer(name)
    counter = fast_counter_name(name)
    if counter is not None:
        return FastTokenizer(name, counter, lambda: tiktoken_encoding(name))
    return TiktokenTokenizer(name, tiktoken_encoding(name))


def count_text(text: str, tok: Tokenizer | None = None) -> int:
    """Tokens in one text (default tokenizer cl100k_base)."""
    return (tok or get_tokenizer()).count(text)


def clear_caches() -> None:
    """Forget cached counts in every loaded tokenizer (tokenizers themselves stay loaded)."""
    with _TOKENIZERS_LOCK:
        loaded = list(_TOKENIZERS.values())
    for tok in loaded:
        clear = getattr(tok, "clear_cache", None)
        if clear is not None:
            clear()


class TokenizerCache:
    """Loads each target's tokenizer once; a models.toml tokenizer that cannot load offline falls
    back to cl100k_base with one announced warning (a flag or config choice is never replaced)."""

    def __init__(self) -> None:
        self._loaded: dict[str, tuple[Tokenizer, str, str | None]] = {}

    def get(self, target: Any) -> tuple[Tokenizer, str, str | None]:
        """(tokenizer, label for the output, warning or None) for a budget `Target`."""
        spec = target.tokenizer
        explicit = target.sources.get("tokenizer") not in ("models.toml", "default")
        key = f"{spec}|{explicit}"
        if key not in self._loaded:
            self._loaded[key] = self._load(spec, explicit)
        return self._loaded[key]

    @staticmethod
    def _load(spec: str, explicit: bool) -> tuple[Tokenizer, str, str | None]:
        try:
            return get_tokenizer(spec), spec, None
        except TokenizerError as exc:
            if explicit or spec == DEFAULT_TOKENIZER:
                raise
            found = re.search(r"could not be loaded offline \((.*?)\)\. Use", str(exc))
            cause = found.group(1) if found else str(exc)
            label = f"{DEFAULT_TOKENIZER} (proxy: {spec} unavailable offline)"
            warning = (
                f"warning: tokenizer {spec} is not bundled and cannot be loaded offline ({cause}); "
                f"counting with {DEFAULT_TOKENIZER} as a proxy for the targets that use it "
                f"(choose another with --tokenizer)"
            )
            return get_tokenizer(DEFAULT_TOKENIZER), label, warning
