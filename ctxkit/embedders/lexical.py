"""The `lexical` embedder (the default): BM25 relevance and bag-of-words similarity, no model."""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxkit.embedders.base import chunk_text, normalise_rows, terms

if TYPE_CHECKING:
    import numpy as np

BM25_K1 = 1.5
BM25_B = 0.75
LEXICAL_DIM = 4096


class LexicalEmbedder:
    """BM25 relevance and bag-of-words similarity; pure Python and numpy, no model."""

    name = "lexical"

    def __init__(self, *, model: str | None = None, cache: bool = True, **_: Any) -> None:
        # model and cache are accepted so every factory takes the same keywords
        self.stats = {"computed": 0, "cached": 0}
        self._bow_memo: dict[str, list[tuple[str, float]]] = {}
        self._total_memo: dict[tuple[str, ...], dict[str, float]] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Hashed term-frequency vectors (LEXICAL_DIM wide), L2-normalised; zero rows for blank texts."""
        import numpy as np

        out = np.zeros((len(texts), LEXICAL_DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for term, count in Counter(terms(text)).items():
                # a stable hash: Python's hash() is salted per process, which would break reproducibility
                slot = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "big")
                out[i, slot % LEXICAL_DIM] += count
        self.stats["computed"] += len(texts)
        return normalise_rows(out)

    def scores(self, texts: Sequence[str], query: str) -> list[float]:
        """BM25 (k1 1.5, b 0.75) of each text against the query, divided by the best score."""
        query_terms = set(terms(query))
        docs = [Counter(terms(t)) for t in texts]
        if not docs or not query_terms:
            return [0.0] * len(docs)
        n_docs = len(docs)
        lengths = [sum(d.values()) for d in docs]
        avg_len = (sum(lengths) / n_docs) or 1.0
        doc_freq = {q: sum(1 for d in docs if q in d) for q in query_terms}
        # the Lucene idf stays positive even for terms found in every document
        idf = {q: math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)) for q, df in doc_freq.items()}
        raw = []
        for doc, length in zip(docs, lengths, strict=True):
            score = 0.0
            for q in query_terms:
                tf = doc.get(q, 0)
                if tf:
                    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * length / avg_len)
                    score += idf[q] * tf * (BM25_K1 + 1.0) / (tf + norm)
            raw.append(score)
        best = max(raw)
        return [round(s / best, 6) if best > 0 else 0.0 for s in raw]

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> float:
        """Cosine between the word-weighted mean bag-of-words vectors of the chunks of a and b."""
        return _cosine_sparse(self._mean_bow(a), self._mean_bow(b))

    def _mean_bow(self, texts: Sequence[str]) -> dict[str, float]:
        """Mean of the L2-normalised term-count vectors of every chunk, weighted by chunk
        words; each text's weighted terms are kept, since a compaction compares the transcript
        before and after every step and most of its texts are the same each time."""
        # a chain judges each step against the one before: the same texts are summed twice
        key = tuple(texts)
        done = self._total_memo.get(key)
        if done is not None:
            return done
        memo = self._bow_memo
        if len(memo) > BOW_MEMO_MAX_TEXTS:
            memo.clear()
        total: dict[str, float] = {}
        get = total.get
        for text in texts:
            parts = memo.get(text)
            if parts is None:
                parts = memo[text] = _weighted_terms(text)
            # the additions in text, chunk and term order, as without the memo: the same floats
            for term, value in parts:
                total[term] = get(term, 0.0) + value
        if len(self._total_memo) >= TOTAL_MEMO_MAX:
            self._total_memo.pop(next(iter(self._total_memo)))
        self._total_memo[key] = total
        return total


BOW_MEMO_MAX_TEXTS = 100_000
TOTAL_MEMO_MAX = 4  # whole transcripts' sums kept: the original, the last step's result


def _weighted_terms(text: str) -> list[tuple[str, float]]:
    """(term, chunk words * count / norm) for each term of each chunk of `text`, in order."""
    out: list[tuple[str, float]] = []
    for chunk in chunk_text(text):
        counts = Counter(terms(chunk))
        norm = math.sqrt(sum(c * c for c in counts.values()))
        if not norm:
            continue
        weight = len(chunk.split())
        out.extend((term, weight * count / norm) for term, count in counts.items())
    return out


def _cosine_sparse(x: dict[str, float], y: dict[str, float]) -> float:
    if not x and not y:
        return 1.0
    nx = math.sqrt(sum(v * v for v in x.values()))
    ny = math.sqrt(sum(v * v for v in y.values()))
    if not nx or not ny:
        return 0.0
    if len(y) < len(x):
        x, y = y, x
    dot = sum(v * y.get(k, 0.0) for k, v in x.items())
    return round(min(1.0, max(0.0, dot / (nx * ny))), 6)
