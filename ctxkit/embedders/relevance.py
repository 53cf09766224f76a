"""Relevance and coherence over any embedder: `relevance_scores` rates units against the task
query, `similarity` rates how much of one text set survives in another (the coherence check
after a compaction step), `task_query` is the query.

    >>> from ctxkit.embedders import get_embedder
    >>> relevance_scores(["fix the login test", "a cake recipe"], "login test fails", get_embedder("lexical"))
    [1.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxkit.embedders import DEFAULT_EMBEDDER, get_embedder
from ctxkit.embedders.base import QUERY_PART_CHARS, Embedder, chunk_text, cosine_of_means

if TYPE_CHECKING:
    from ctxkit.model import Transcript

def relevance_scores(
    texts: Sequence[str], query: str, embedder: Embedder | None = None
) -> list[float]:
    """Relevance of each text to the query in [0, 1]: clipped cosine, or normalised BM25 for lexical.

    With an embedding model a long text is split into the same chunks `similarity` uses and
    scores as its most relevant chunk: a test log whose tail names the failing file is relevant,
    and the coherence check that follows finds every chunk already embedded.
    """
    emb = embedder if embedder is not None else get_embedder(DEFAULT_EMBEDDER)
    if not texts:
        return []
    if not query.strip():
        return [0.0] * len(texts)  # no task to be relevant to
    scorer = getattr(emb, "scores", None)
    if callable(scorer):
        return [float(s) for s in scorer(texts, query)]
    import numpy as np  # only here: BM25 above needs none

    chunks = [chunk_text(t) for t in texts]
    flat = [c for cs in chunks for c in cs]
    matrix = np.asarray(emb.embed([*flat, query]), dtype=np.float32)
    cos = matrix[:-1] @ matrix[-1]
    # an embedder whose cosines run on another scale than MiniLM's maps them onto it, so the
    # thresholds (prioritize_recent's rel_threshold) mean the same with either
    scale, shift = getattr(emb, "cosine_scale", (1.0, 0.0))
    scores: list[float] = []
    start = 0
    for cs in chunks:
        best = (
            scale * float(cos[start : start + len(cs)].max()) + shift if cs else 0.0
        )  # a blank text is about nothing
        start += len(cs)
        scores.append(round(min(1.0, max(0.0, best)), 6))
    return scores


def similarity(a: Sequence[str], b: Sequence[str], embedder: Embedder) -> float:
    """Coherence in [0, 1]: cosine between the word-weighted mean embeddings of the chunks of a and b."""
    own = getattr(embedder, "similarity", None)
    if callable(own):
        return float(own(a, b))
    return cosine_of_means(a, b, embedder)



def task_query(t: Transcript, priority_areas: Sequence[str] = ()) -> str:
    """The relevance query: first and last user requests, P1 units and configured priority areas."""
    requests = [
        u
        for u in t.units
        if u.role == "user"
        and u.type not in ("tool_result", "summary", "placeholder")
        and u.content.strip()
    ]
    parts: list[str] = []
    if requests:
        parts.append(requests[0].content)
        if requests[-1] is not requests[0]:
            parts.append(requests[-1].content)
    parts.extend(a for a in priority_areas if a.strip())
    parts.extend(u.content for u in t.units if u.is_p1 and u.content.strip())
    seen: set[str] = set()
    out: list[str] = []
    for p in parts:
        text = p.strip()[:QUERY_PART_CHARS]  # a pasted log as a request must not drown the rest
        if text not in seen:
            seen.add(text)
            out.append(text)
    return "\n".join(out)
