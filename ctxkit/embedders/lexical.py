"""The `lexical` embedder (the default): BM25 relevance and bag-of-words similarity, no model."""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from itertools import repeat
from operator import mul
from typing import TYPE_CHECKING, Any

from ctxkit.embedders.base import CHUNK_WORDS, normalise_rows, term_counts, terms
from ctxkit.memo import capacity

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
        self._bags: dict[str, _Bag] = {}
        self._term_counts: dict[str, dict[str, int]] = {}
        self._totals: list[_Totals] = []

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
        docs = [self._counts(t) for t in texts]
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

    def _counts(self, text: str) -> dict[str, int]:
        """`term_counts` of a text, read once: relevance and coherence both ask for them."""
        memo = self._term_counts
        counts = memo.get(text)
        if counts is None:
            if len(memo) > max(BOW_MEMO_MAX_TEXTS, capacity()):
                memo.clear()
            counts = memo[text] = term_counts(text)
        return counts

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> float:
        """Cosine between the word-weighted mean bag-of-words vectors of the chunks of a and b."""
        ka, kb = tuple(a), tuple(b)
        if ka and kb and not self._totals:
            # the first pair: the texts both sides share are summed once, for both
            self._keep(*_Totals.pair(ka, kb, self._bag_of()))
        ta, tb = self._totals_of(ka), self._totals_of(kb)
        # a step's sum moved from the one before: their dot product came with the move
        if tb.base is ta:
            return _cosine(tb.dot_base, ta, tb)
        if ta.base is tb:
            return _cosine(ta.dot_base, ta, tb)
        return _cosine_sparse(ta.sums, tb.sums, ta.norm, tb.norm)

    def _mean_bow(self, texts: Sequence[str]) -> dict[str, float]:
        """Sum of the L2-normalised term-count vectors of every chunk, weighted by chunk words
        (the mean's direction, which is all a cosine sees).

        A compaction compares the transcript before and after every step, and a step changes a
        few of its texts: the sum is the last one's, less the texts that left and plus those
        that came (`_Totals.reached`), each text's weighted terms read once (`_bags`). The
        figure is the sum's, whatever the order its texts were added in, to the last bits of a
        float.
        """
        return self._totals_of(tuple(texts)).sums

    def _totals_of(self, key: tuple[str, ...]) -> _Totals:
        totals = self._found(key)
        if totals is None:
            totals = _Totals.reached(self._totals, key, self._bag_of())
            self._keep(totals)
        return totals

    def _found(self, key: tuple[str, ...]) -> _Totals | None:
        return next((t for t in self._totals if t.key == key), None)

    def _keep(self, *totals: _Totals) -> None:
        for t in totals:
            if len(self._totals) >= TOTAL_MEMO_MAX:
                # the first sum stays: a compaction's original, which the final figure reads
                self._totals.pop(1)
            self._totals.append(t)

    def _bag_of(self) -> Callable[[str], _Bag]:
        if len(self._bags) > max(BOW_MEMO_MAX_TEXTS, capacity()):
            self._bags.clear()
        return partial(_bag_of, bags=self._bags, counts=self._counts)


BOW_MEMO_MAX_TEXTS = 100_000
TOTAL_MEMO_MAX = 4  # whole transcripts' sums kept: the original, the last steps' results

# A text's chunks as (term counts, words, L2 norm of the counts): its vector is
# words * count / norm per term; and the number of terms a sum adds for it (its cost).
_Bag = tuple[list[tuple[dict[str, int], float, float]], int]


def _bag(text: str, counts_of: Callable[[str], dict[str, int]]) -> _Bag:
    """Each chunk of `text` as (term counts, chunk words, L2 norm of the counts), and how many
    terms they hold."""
    chunks_out: list[tuple[dict[str, int], float, float]] = []
    words = text.split()
    if len(words) <= CHUNK_WORDS:  # `chunk_text`'s chunks and their words, split once
        chunks = [(text, len(words))] if words else []
    else:
        chunks = [
            (" ".join(words[i : i + CHUNK_WORDS]), len(words[i : i + CHUNK_WORDS]))
            for i in range(0, len(words), CHUNK_WORDS)
        ]
    for chunk, weight in chunks:
        counts = counts_of(chunk) if len(chunks) == 1 else term_counts(chunk)
        if not counts:
            continue
        norm = math.sqrt(sum(map(mul, counts.values(), counts.values())))
        chunks_out.append((counts, float(weight), norm))
    return chunks_out, sum(len(c) for c, _, _ in chunks_out)


class _Totals:
    """One list of texts, the sum of their vectors, and how many terms it took (`size`): kept to
    reach the next list from. A sum moved from another (`base`) knows its dot product with it
    and its own squared norm from what moved, not from every term."""

    __slots__ = ("base", "dot_base", "key", "norm2", "size", "sums", "texts")

    def __init__(
        self,
        key: tuple[str, ...],
        sums: dict[str, float],
        texts: Counter[str],
        size: int,
        base: _Totals | None = None,
        dot_base: float = 0.0,
        norm2: float | None = None,
    ):
        self.key, self.sums, self.texts, self.size = key, sums, texts, size
        self.base, self.dot_base, self.norm2 = base, dot_base, norm2

    @property
    def norm(self) -> float:
        """The sum's L2 norm, made once (every step is judged against the one before)."""
        return math.sqrt(max(0.0, self.norm_squared()))

    def norm_squared(self) -> float:
        if self.norm2 is None:
            self.norm2 = sum(map(mul, self.sums.values(), self.sums.values()))
        return self.norm2

    @classmethod
    def pair(
        cls, a: tuple[str, ...], b: tuple[str, ...], bag_of: Callable[[str], _Bag]
    ) -> tuple[_Totals, _Totals]:
        """The sums over `a` and over `b`, what they share summed once."""
        ca, cb = Counter(a), Counter(b)
        common = ca & cb
        shared: dict[str, float] = {}
        shared_size = _add_all(shared, common, bag_of, 1.0)
        out = []
        for key, counts in ((a, ca), (b, cb)):
            sums = dict(shared)
            size = shared_size + _add_all(sums, counts - common, bag_of, 1.0)
            out.append(cls(key, sums, counts, size))
        return out[0], out[1]

    @classmethod
    def reached(
        cls, kept: Sequence[_Totals], key: tuple[str, ...], bag_of: Callable[[str], _Bag]
    ) -> _Totals:
        """The sum over `key`, moved from the kept sum it differs least from (the texts that
        left taken out, those that came added), or made afresh when that is less work."""
        texts = Counter(key)

        def size(diff: Mapping[str, int]) -> int:  # the terms a sum of these texts adds
            return sum(n * bag_of(text)[1] for text, n in diff.items())

        best: tuple[int, int, _Totals, Mapping[str, int], Mapping[str, int]] | None = None
        for t in kept:
            gone, came = _diff(t.key, t.texts, key, texts)
            lost, new = size(gone), size(came)
            if best is None or lost + new < best[0]:
                best = (lost + new, t.size - lost + new, t, gone, came)
        if best is None or best[0] >= best[1]:  # moving costs more than summing afresh
            sums: dict[str, float] = {}
            return cls(key, sums, texts, _add_all(sums, texts, bag_of, 1.0))
        _, fresh, base, gone, came = best
        # what moved, as one vector: the sum is the base's plus it, and the dot products the
        # next cosine needs come from its terms alone (|b|^2 = |a|^2 + 2 a.d + |d|^2)
        moved: dict[str, float] = {}
        _add_all(moved, gone, bag_of, -1.0)
        _add_all(moved, came, bag_of, 1.0)
        sums = dict(base.sums)
        get = sums.get
        along = 0.0  # the base's sum . what moved
        for term, value in moved.items():
            old = get(term, 0.0)
            along += old * value
            sums[term] = old + value
        before = base.norm_squared()
        across = sum(map(mul, moved.values(), moved.values()))
        return cls(key, sums, texts, fresh, base, before + along, before + 2.0 * along + across)


def _diff(
    a: tuple[str, ...], ca: Counter[str], b: tuple[str, ...], cb: Counter[str]
) -> tuple[Mapping[str, int], Mapping[str, int]]:
    """(the texts of `a` not in `b`, those of `b` not in `a`), as multisets in the order of
    `a` and of `b` (what `ca - cb` and `cb - ca` give). Where neither list repeats a text the
    sets of texts give them, in C: a chain's states share most of their texts."""
    if len(ca) != len(a) or len(cb) != len(b):
        return ca - cb, cb - ca
    only_a = ca.keys() - cb.keys()
    only_b = cb.keys() - ca.keys()
    return (
        dict.fromkeys((x for x in a if x in only_a), 1),
        dict.fromkeys((x for x in b if x in only_b), 1),
    )


def _bag_of(text: str, bags: dict[str, _Bag], counts: Callable[[str], dict[str, int]]) -> _Bag:
    bag = bags.get(text)
    if bag is None:
        bag = bags[text] = _bag(text, counts)
    return bag


def _add_all(
    sums: dict[str, float], texts: Mapping[str, int], bag_of: Callable[[str], _Bag], sign: float
) -> int:
    """Each text's vector (`sign` times, as many times as the text is there) added to `sums`,
    in the texts' order; the terms it took."""
    size = 0
    for text, n in texts.items():
        bag = bag_of(text)
        _add(sums, bag, sign * n)
        size += n * bag[1]
    return size


def _add(sums: dict[str, float], bag: _Bag, times: float) -> None:
    get = sums.get
    for counts, weight, norm in bag[0]:
        for term, count in counts.items():
            sums[term] = get(term, 0.0) + times * (weight * count / norm)


def _cosine_sparse(
    x: dict[str, float], y: dict[str, float], nx: float | None = None, ny: float | None = None
) -> float:
    """Cosine of two sparse vectors in [0, 1], rounded to 6 digits (`nx`, `ny`: their norms,
    when known)."""
    if not x and not y:
        return 1.0
    nx = _norm(x) if nx is None else nx
    ny = _norm(y) if ny is None else ny
    if not nx or not ny:
        return 0.0
    if len(y) < len(x):
        x, y = y, x
    # the products and the sum of the plain loop, in its order: the same float, in C
    dot = sum(map(mul, x.values(), map(y.get, x.keys(), repeat(0.0))))
    return round(min(1.0, max(0.0, dot / (nx * ny))), 6)


def _norm(x: dict[str, float]) -> float:
    return math.sqrt(sum(map(mul, x.values(), x.values())))


def _cosine(dot: float, a: _Totals, b: _Totals) -> float:
    """`_cosine_sparse` of two sums whose dot product is known."""
    if not a.sums and not b.sums:
        return 1.0
    na, nb = a.norm, b.norm
    if not na or not nb:
        return 0.0
    return round(min(1.0, max(0.0, dot / (na * nb))), 6)
