"""Spearman correlation of each embedder's similarities with MiniLM's, on pairs of real units.

    .venv/bin/python scripts/eval_embedders.py [--pairs 600] [--seed 12] [--static FILE.npz ...]

Units come from every transcript under ../shared/realdata; each unit's text is what the chain
embeds (content plus tool-call names and arguments, `compaction.unit_texts`), and its first chunk
(`embedders.base.chunk_text`, at most 200 words) is the text compared. Pairs are drawn with a fixed
seed: two thirds within one transcript (what coherence and relevance compare), one third across
transcripts. For each pair every embedder gives `relevance.similarity([a], [b])` - the cosine of
the two embeddings, or the lexical embedder's bag-of-words cosine - and the script prints the
Spearman correlation with MiniLM's (torch, the reference) and the time per unit.

MiniLM's vectors are kept in the usual embedding cache, so a second run costs no model time.
`--static` evaluates other distilled tables (built with scripts/distill_static.py --out).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REALDATA = ROOT.parent / "shared" / "realdata"


def load_units(realdata: Path) -> dict[str, list[list[str]]]:
    """By folder (format), per transcript, the first chunk of each unit's text (3+ words)."""
    from ctxkit.compaction import unit_texts
    from ctxkit.embedders.base import chunk_text
    from ctxkit.formats import read_path

    out: dict[str, list[list[str]]] = {}
    for folder in sorted(p for p in realdata.iterdir() if p.is_dir()):
        for path in sorted(folder.iterdir()):
            try:
                transcripts = list(read_path(str(path)))
            except Exception as e:  # a format the reader does not know is skipped, and said
                print(f"skip {path.name}: {type(e).__name__}", file=sys.stderr)
                continue
            for t in transcripts:
                texts = [chunk_text(x)[0] for x in unit_texts(t.units) if len(x.split()) >= 3]
                texts = list(dict.fromkeys(texts))
                if len(texts) >= 2:
                    out.setdefault(folder.name, []).append(texts)
    return out


def sample_pairs(
    units: dict[str, list[list[str]]], n: int, seed: int
) -> list[tuple[str, str]]:
    """n distinct pairs: 2/3 within a transcript, 1/3 across two; fixed by `seed`.

    A format is drawn first, then a transcript, so one folder of many short chats (sharegpt)
    does not outweigh the agent logs.
    """
    rng = random.Random(seed)
    folders = sorted(units)
    everything = [t for f in folders for t in units[f]]
    pairs: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    while len(pairs) < n:
        if len(pairs) % 3 < 2:
            texts = rng.choice(units[rng.choice(folders)])
            a, b = rng.sample(texts, 2)
        else:
            ta, tb = units[rng.choice(folders)], everything
            a, b = rng.choice(rng.choice(ta)), rng.choice(rng.choice(tb))
        if a != b and (a, b) not in seen:
            seen.add((a, b))
            pairs.append((a, b))
    return pairs


def ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean rank), as Spearman's rho needs."""
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x), dtype=np.float64)
    r[order] = np.arange(len(x), dtype=np.float64)
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        if j > i:
            r[order[i : j + 1]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho: Pearson's correlation of the ranks."""
    rx, ry = ranks(np.asarray(x, dtype=np.float64)), ranks(np.asarray(y, dtype=np.float64))
    return float(np.corrcoef(rx, ry)[0, 1])


def pair_similarities(
    embedder: object, pairs: list[tuple[str, str]], cosine: bool = False
) -> tuple[np.ndarray, float]:
    """Similarity of each pair and the ms per unit it took; `cosine`: of `embed` vectors only."""
    from ctxkit.embedders.relevance import similarity

    texts = list(dict.fromkeys(t for p in pairs for t in p))
    t0 = time.perf_counter()
    embed = getattr(embedder, "embed", None)
    if embed is not None and (cosine or not callable(getattr(embedder, "similarity", None))):
        vectors = dict(zip(texts, np.asarray(embed(texts)), strict=True))
        sims = np.array(
            [max(0.0, min(1.0, float(vectors[a] @ vectors[b]))) for a, b in pairs]
        )
    else:
        sims = np.array([similarity([a], [b], embedder) for a, b in pairs])  # type: ignore[arg-type]
    ms = (time.perf_counter() - t0) * 1000 / len(texts)
    return sims, ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--realdata", type=Path, default=REALDATA)
    ap.add_argument("--pairs", type=int, default=600)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--static", type=Path, action="append", default=[], help="extra tables")
    ap.add_argument("--no-minilm-time", action="store_true", help="cached MiniLM (no timing)")
    args = ap.parse_args()
    if not args.realdata.is_dir():
        print(f"no real transcripts at {args.realdata}", file=sys.stderr)
        return 1
    from ctxkit.embedders import get_embedder

    units = load_units(args.realdata)
    pairs = sample_pairs(units, args.pairs, args.seed)
    n_texts = len({t for p in pairs for t in p})
    n_transcripts = sum(len(v) for v in units.values())
    print(
        f"{len(pairs)} pairs, {n_texts} texts from {n_transcripts} transcripts in "
        f"{len(units)} formats (seed {args.seed})"
    )
    reference, ref_ms = pair_similarities(get_embedder("minilm"), pairs)
    rows = [("minilm", 1.0, ref_ms, "reference (cache hits are fast)")]
    from ctxkit.embedders.static import StaticEmbedder

    # (label, embedder, cosine of embed vectors only)
    candidates: list[tuple[str, object, bool]] = [
        ("static (similarity: cosine + bag of words)", get_embedder("static"), False),
        ("static, cosine only", get_embedder("static"), True),
        ("lexical (bag of words)", get_embedder("lexical"), False),
    ]
    for p in args.static:
        extra = StaticEmbedder(model=str(p))
        candidates += [(f"{p.name}", extra, False), (f"{p.name}, cosine only", extra, True)]
    for name, emb, cosine in candidates:
        sims, ms = pair_similarities(emb, pairs, cosine)
        rows.append((name, spearman(sims, reference), ms, ""))
    print(f"{'embedder':44} {'spearman':>8} {'ms/unit':>8}")
    for name, rho, ms, note in rows:
        print(f"{name:44} {rho:>8.4f} {ms:>8.2f}  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
