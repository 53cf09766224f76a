"""The `static` embedder: all-MiniLM-L6-v2 distilled into one vector per WordPiece token.

A text's embedding is the mean of its tokens' rows, L2-normalised: a table lookup and a mean, no
torch, about 0.2 ms per unit once the table is loaded. The table, `data/static_minilm.npz`, is built by
`scripts/distill_static.py` from the bundled model (the model2vec method) and checked against
`STATIC_SHA256` when it loads. It holds int8 rows with one float32 scale per row, the
vocabulary in row order and a few lines of metadata.

    >>> emb = StaticEmbedder()
    >>> emb.embed(["fix the login test"]).shape
    (1, 256)

Relevance is the cosine of these vectors (`relevance.relevance_scores`); coherence
(`similarity`) averages that cosine with the lexical embedder's bag-of-words cosine.

The tokenizer is BERT's uncased WordPiece in plain Python (lower-case, accents stripped, split
on whitespace and punctuation, greedy longest match with `##` continuations), with the pieces of
every distinct word cached: transcripts repeat their words, so most lookups are one dict hit.
"""

from __future__ import annotations

import hashlib
import io
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ctxkit.errors import EmbedderError

STATIC_FILE = "static_minilm.npz"
STATIC_SHA256 = "2ddc1b0bed3017c3de15c6dcf9d995d3e173d310b2d519a687f302b645c0110f"
MAX_WORD_CHARS = 100  # BERT's limit: a longer "word" is [UNK]
MAX_TOKENS = 256  # per text, as MiniLM's max_seq_length: a chunk is judged on what MiniLM sees
# coherence = this share of the bag-of-words cosine + the rest of the static cosine: the two err
# differently, and the mix tracks MiniLM better than either (Spearman 0.86 vs 0.84 and 0.79)
LEXICAL_SHARE = 0.5
MEMO_MAX = 50_000  # vectors kept per embedder (~50 MB at 256 float32s)
# static cosines run ~0.18 above MiniLM's on the same pairs (medians 0.47 vs 0.25 on 600 real
# pairs); relevance maps them with MiniLM ~ 0.93 x static - 0.15 (least squares on the seed-12
# and seed-99 pairs of scripts/eval_embedders.py), so rel_threshold means what it does for MiniLM
COSINE_SCALE = (0.93, -0.15)

# a run of letters/digits, or any other single non-space character (punctuation splits words)
_PIECE = re.compile(r"[^\W_]+|[^\w\s]|_")
# BERT splits CJK ideographs into single characters (kana and hangul stay in words)
_CJK = re.compile(
    "([\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff\U00020000-\U0002a6df"
    "\U0002a700-\U0002b73f\U0002b740-\U0002b81f\U0002b820-\U0002ceaf\U0002f800-\U0002fa1f])"
)


class WordPiece:
    """BERT uncased WordPiece over a vocabulary (token -> id), with a per-word cache."""

    def __init__(self, vocab: Sequence[str], unk: str = "[UNK]") -> None:
        self.ids = {tok: i for i, tok in enumerate(vocab)}
        self.unk_id = self.ids.get(unk, -1)
        self._cache: dict[str, tuple[int, ...]] = {}

    def clear(self) -> None:
        """Forget the pieces of every word seen (for cold timings)."""
        self._cache.clear()

    def word_ids(self, word: str) -> tuple[int, ...]:
        """The ids of one lower-cased word's pieces; (unk,) when it cannot be split."""
        got = self._cache.get(word)
        if got is not None:
            return got
        out: list[int] = []
        if len(word) > MAX_WORD_CHARS:
            out = [self.unk_id]
        else:
            start = 0
            while start < len(word):
                end = len(word)
                found = -1
                while end > start:
                    piece = word[start:end] if start == 0 else "##" + word[start:end]
                    found = self.ids.get(piece, -1)
                    if found >= 0:
                        break
                    end -= 1
                if found < 0:
                    out = [self.unk_id]
                    break
                out.append(found)
                start = end
        ids = tuple(i for i in out if i >= 0)
        if len(self._cache) < 500_000:  # a bound for runs over huge, varied datasets
            self._cache[word] = ids
        return ids

    def encode(self, text: str, max_tokens: int | None = None) -> list[int]:
        """Token ids of a text (no [CLS]/[SEP]); stops after `max_tokens` when given."""
        text = normalise(text)
        ids: list[int] = []
        for word in _PIECE.findall(text):
            ids.extend(self.word_ids(word))
            if max_tokens is not None and len(ids) >= max_tokens:
                return ids[:max_tokens]
        return ids


class _Strip(dict):  # type: ignore[type-arg]
    """str.translate table: code point -> itself, or None for marks and control characters.

    Filled on first sight of each character, so translate runs in C for every one after that."""

    def __missing__(self, cp: int) -> int | None:
        keep = unicodedata.category(chr(cp)) not in ("Mn", "Cc", "Cf", "Co", "Cs")
        self[cp] = cp if keep else None
        return self[cp]


_STRIP = _Strip({ord(c): ord(c) for c in " \t\n\r"})


def normalise(text: str) -> str:
    """BERT's uncased clean-up: lower case, accents stripped, control characters dropped."""
    text = text.lower()
    if text.isascii():
        return text
    return unicodedata.normalize("NFD", _CJK.sub(r" \1 ", text)).translate(_STRIP)


class StaticTable:
    """The loaded table: tokenizer, int8 rows, their scales, and metadata."""

    def __init__(self, path: Path, expect_sha256: str | None) -> None:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if expect_sha256 is not None and digest != expect_sha256:
            raise EmbedderError(
                f"static embedder table {path} has sha256 {digest[:12]}…, expected "
                f"{expect_sha256[:12]}…; reinstall ctxkit or rebuild it with "
                "scripts/distill_static.py"
            )
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            self.vectors = np.asarray(npz["vectors"])
            self.scales = np.asarray(npz["scales"], dtype=np.float32)
            vocab = str(npz["vocab"]).split("\n")
            self.meta = dict(
                line.split("=", 1) for line in str(npz["meta"]).split("\n") if "=" in line
            )
        if len(vocab) != len(self.vectors):
            raise EmbedderError(f"static embedder table {path}: vocabulary and rows differ")
        self.sha256 = digest
        self.dim = int(self.vectors.shape[1])
        self.wordpiece = WordPiece(vocab)


@lru_cache(maxsize=4)
def load_table(path: str | None = None) -> StaticTable:
    """The bundled table (hash-checked), or the .npz at `path` (not checked); once per process."""
    if path is None:
        ref = resources.files("ctxkit") / "data" / STATIC_FILE
        with resources.as_file(ref) as real:
            if not real.is_file():
                raise EmbedderError(
                    f"static embedder table {STATIC_FILE} is missing from the ctxkit package; "
                    "reinstall ctxkit"
                )
            return StaticTable(real, STATIC_SHA256)
    file = Path(path).expanduser()
    if not file.is_file():
        raise EmbedderError(f"static embedder table {path} does not exist")
    return StaticTable(file, None)


class StaticEmbedder:
    """Mean of distilled MiniLM token vectors; rows L2-normalised (zero rows for token-less texts)."""

    name = "static"
    cosine_scale = COSINE_SCALE  # read by relevance.relevance_scores

    def __init__(self, *, model: str | None = None, cache: bool = True, **_: Any) -> None:
        # `cache` is accepted so every factory takes the same keywords: a lookup needs no cache
        self.table = load_table(model)
        self.dim = self.table.dim
        self.model_id = f"static:{self.table.sha256[:16]}"
        self.stats = {"computed": 0, "cached": 0}
        # the coherence gate embeds the original's units again after every step: keep them
        self._memo: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text: the mean of its first MAX_TOKENS token vectors, L2-normalised."""
        table = self.table
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            got = self._memo.get(text)
            if got is not None:
                out[row] = got
                self.stats["cached"] += 1
                continue
            ids = table.wordpiece.encode(text, MAX_TOKENS)
            if ids:
                # the scaled sum of int8 rows: one small matrix-vector product per text
                vec = table.scales[ids] @ table.vectors[ids].astype(np.float32)
                out[row] = vec / (float(np.linalg.norm(vec)) or 1.0)
            if len(self._memo) < MEMO_MAX:
                self._memo[text] = out[row].copy()
            self.stats["computed"] += 1
        return out

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> float:
        """Coherence in [0, 1]: the mean of the static cosine and the bag-of-words cosine."""
        from ctxkit.embedders.base import cosine_of_means
        from ctxkit.embedders.lexical import LexicalEmbedder

        static = cosine_of_means(a, b, self)
        lexical = LexicalEmbedder().similarity(a, b)
        return round(LEXICAL_SHARE * lexical + (1.0 - LEXICAL_SHARE) * static, 6)
