"""What every embedder shares: the `Embedder` protocol, terms and chunks of a text, and the
cosine of two text sets' mean embeddings (coherence for embedders without their own measure)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

try:
    from collections import _count_elements  # type: ignore[attr-defined]  # Counter's C loop
except ImportError:  # another Python than CPython

    def _count_elements(mapping: dict[str, int], iterable: Iterable[str]) -> None:
        get = mapping.get
        for item in iterable:
            mapping[item] = get(item, 0) + 1


CHUNK_WORDS = 200  # MiniLM sees 256 wordpieces; ~200 words fit, so long texts are split, not cut
BATCH_SIZE = 64
CHARS_PER_TOKEN_CUT = 16  # pre-cut by characters so megabyte strings are never tokenized whole
QUERY_PART_CHARS = 2000


@runtime_checkable
class Embedder(Protocol):
    """Anything with a name and `embed(texts) -> (n, d) float32` with L2-normalised rows.

    An embedder may also define `scores(texts, query) -> list[float]` and
    `similarity(a, b) -> float`; `relevance_scores` and `similarity` then use those instead of
    cosines of `embed` (the lexical embedder does, with BM25 and bag-of-words).
    """

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script; _ . / split identifiers
_STOPWORDS = frozenset(
    "a an and are as at be but by do does for from has have i if in into is it its me my no not "
    "of on or our so than that the their then there these this to was we were what when which "
    "who will with you your".split()
)


def terms(text: str) -> list[str]:
    """Lower-cased alphanumeric terms without common English stopwords (identifiers split on punctuation)."""
    if text.isascii():  # lower-casing ASCII moves no word boundary: one pass, the same terms
        return [w for w in text.translate(_ASCII_TERMS).split() if w not in _STOPWORDS]
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in _STOPWORDS]


def term_counts(text: str) -> dict[str, int]:
    """`terms` of the text counted, in order of first use (what a bag of words holds)."""
    # a plain dict counted by Counter's own C loop: making a Counter costs three times as much
    # as counting a short message's words
    counts: dict[str, int] = {}
    if not text.isascii():
        _count_elements(counts, terms(text))
        return counts
    _count_elements(counts, text.translate(_ASCII_TERMS).split())
    for word in _STOPWORDS.intersection(counts):
        del counts[word]
    return counts


# An ASCII text's terms are its runs of letters and digits, lower-cased (`_WORD` on ASCII):
# everything else becomes a space and `str.split` finds them, in half the regex's time.
_ASCII_TERMS = str.maketrans(
    {i: chr(i).lower() if chr(i).isalnum() else " " for i in range(128)}
)


def chunk_text(text: str, words: int = CHUNK_WORDS) -> list[str]:
    """Split a text into pieces of at most `words` whitespace-separated words (none if blank)."""
    parts = text.split()
    if len(parts) <= words:
        # the text itself, not a re-spaced copy, so its cached embedding from scoring is reused
        return [text] if parts else []
    return [" ".join(parts[i : i + words]) for i in range(0, len(parts), words)]


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def normalise_rows(m: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32, copy=False)


def cosine_of_means(a: Sequence[str], b: Sequence[str], embedder: Embedder) -> float:
    """Cosine in [0, 1] of the word-weighted mean embeddings of the chunks of a and b."""
    import numpy as np

    mean_a = _mean_embedding(a, embedder)
    mean_b = _mean_embedding(b, embedder)
    if mean_a is None and mean_b is None:
        return 1.0
    if mean_a is None or mean_b is None:
        return 0.0
    na, nb = float(np.linalg.norm(mean_a)), float(np.linalg.norm(mean_b))
    if not na or not nb:
        return 0.0
    cos = float(mean_a @ mean_b) / (na * nb)
    return round(min(1.0, max(0.0, cos)), 6)


def _mean_embedding(texts: Sequence[str], embedder: Embedder) -> np.ndarray | None:
    """Word-weighted mean of chunk embeddings, so a long tool output counts for its length."""
    import numpy as np

    chunks = [c for t in texts for c in chunk_text(t)]
    if not chunks:
        return None
    vectors = np.asarray(embedder.embed(chunks), dtype=np.float32)
    weights = np.array([len(c.split()) for c in chunks], dtype=np.float32)
    return np.asarray((weights[:, None] * vectors).sum(axis=0) / weights.sum(), dtype=np.float32)
