"""The compact suite: summarization, the full chain on the 50-unit transcript with each
embedder, and compaction time against one tiktoken pass over the same texts."""

from __future__ import annotations

import shutil
import statistics
import tempfile
from collections.abc import Callable
from functools import partial
from typing import Any

from ctxkit.bench.harness import (
    QUICK_SCENARIOS,
    REAL_MIN_TOKENS,
    _clear,
    _label,
    _raw_pass,
    _repeat,
    _timed,
    _tok,
    cache_dir_env,
    limit_for,
    raw_encoding,
    real_transcripts,
    standard_transcript,
)
from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult, Table
from ctxkit.errors import CtxkitError
from ctxkit.model import Transcript
from ctxkit.tokens import unit_texts

NAME = "compact"


def compact_once(t: Transcript, limit: int, embedder: Any = None, chain: str | None = None) -> Any:
    """`t` through the one compaction run, as `ctxkit compact` runs it (archive in memory)."""
    from ctxkit.compaction.run import compact_one
    from ctxkit.config.file import Config
    from ctxkit.config.settings import compact_settings

    s = compact_settings(limit=limit, config=Config(), chain=chain)
    return compact_one(t, s.replace(embedder=embedder))


def _cached_minilm(cache_dir: str) -> Any:
    """A MiniLM embedder whose SQLite cache lives in `cache_dir` (not the user's cache)."""
    from ctxkit.embedders import get_embedder

    with cache_dir_env(cache_dir):
        return get_embedder("minilm")


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """Summarization, the full chain on 50 units, and compaction against one tiktoken pass."""
    res = SuiteResult("compact")
    _summary(opts, res)
    _chain_per_embedder(opts, res)
    say("compact: compaction against one tiktoken pass")
    _against_tiktoken(opts, res)
    return res


def _summary(opts: BenchOptions, res: SuiteResult) -> None:
    """The extractive summary of a 2,000-token session, cold cache."""
    from ctxkit.simulate import generate
    from ctxkit.summarizers.extractive import summarize_extractive
    from ctxkit.tokens import count_transcript

    tok = _tok()
    small = generate("agent_session", seed=0, tokens=2_000)
    units = small.history_units
    tokens = count_transcript(small, tok).total
    run = _repeat(
        lambda: summarize_extractive(units, 400, tok=tok), opts.repeats(10), before=_clear
    )
    res.figures.append(
        Figure(
            f"extractive summary of {tokens:,} tokens",
            run["mean_s"] * 1000,
            "ms",
            500.0,
            note=f"{len(units)} units -> 400-token summary, cold cache, mean of {run['runs']}",
        )
    )


def _embedders(opts: BenchOptions, cache_dir: str) -> list[tuple[str, Callable[[], Any] | None, str]]:
    """(label, make a fresh embedder or None for the default one, what its caches hold)."""
    from ctxkit.embedders import DEFAULT_EMBEDDER, get_embedder

    embedders: list[tuple[str, Callable[[], Any] | None, str]] = [
        (f"{DEFAULT_EMBEDDER} (default)", None, "cold token cache")
    ]
    if DEFAULT_EMBEDDER != "lexical":
        embedders.append(
            ("lexical", partial(get_embedder, "lexical", cache=False), "cold token cache")
        )
    if not opts.quick:
        embedders.append(
            ("minilm", partial(get_embedder, "minilm", cache=False), "embeddings computed")
        )
        embedders.append(
            (
                "minilm, cached",
                partial(_cached_minilm, cache_dir),
                "embeddings from the SQLite cache",
            )
        )
    return embedders


def _chain_per_embedder(opts: BenchOptions, res: SuiteResult) -> None:
    """The default and the relevance-first chain on the standard transcript, with each embedder."""
    from ctxkit.tokens import count_transcript

    std = standard_transcript()
    limit = limit_for(std)
    std_tokens = count_transcript(std, _tok()).total
    cache_dir = tempfile.mkdtemp(prefix="ctxkit-bench-embeddings-")
    embedders = _embedders(opts, cache_dir)
    chains = [
        ("default chain", None),
        ("relevance-first chain", "discard_low_rel,prioritize_recent,summarize_old"),
    ]
    for chain_label, chain in chains:
        for name, make, caches in embedders:
            try:
                if make is not None:
                    # model load is reported by the embed suite; the cached variant fills its
                    # cache here, untimed
                    compact_once(std, limit, make(), chain)
            except CtxkitError as exc:
                res.skipped.append(f"chain with {name}: {exc}")
                continue
            runs: list[float] = []
            last: Any = None
            emb: Any = None
            for _ in range(opts.repeats(5)):
                _clear()
                emb = make() if make is not None else None  # a fresh in-memory memo each run
                w, _c, last = _timed(partial(compact_once, std, limit, emb, chain))
                runs.append(w)
            stats = getattr(emb, "stats", {}) if emb is not None else {}
            res.figures.append(
                Figure(
                    f"{chain_label}, {len(std.units)} units, {name}",
                    statistics.mean(runs) * 1000,
                    "ms",
                    2000.0,
                    note=f"{std_tokens:,} -> {last.tokens_after:,} tokens (limit {limit:,}), "
                    f"{', '.join(last.strategies_applied) or 'no strategy'}; {caches}, "
                    f"mean of {len(runs)}"
                    + (
                        f"; texts embedded {stats.get('computed')}, cached {stats.get('cached')}"
                        if stats
                        else ""
                    ),
                    detail={"fits": last.fits, "tokens_after": last.tokens_after, **stats},
                )
            )
    shutil.rmtree(cache_dir, ignore_errors=True)


def _against_tiktoken(opts: BenchOptions, res: SuiteResult) -> None:
    """Each transcript's compaction time against one tiktoken pass over its texts."""
    from ctxkit.simulate import SCENARIOS, generate

    enc = raw_encoding()
    names = list(QUICK_SCENARIOS if opts.quick else SCENARIOS)
    corpus = [generate(s, seed=0) for s in names]
    real = real_transcripts(opts.realdata, REAL_MIN_TOKENS)
    if opts.quick:  # the first two that limit_for makes compact (not a log that already fits)
        from ctxkit.counting import measure

        real = [t for t in real if limit_for(t) < measure(t, _tok()).total][:2]
    corpus += real
    multiples: list[float] = []
    for t in corpus:
        texts = [x for x in unit_texts(t.units)[0] if x]
        one = _repeat(partial(_raw_pass, enc, texts), opts.repeats(5))["best_s"]
        lim = limit_for(t)
        try:
            runs = []
            for _ in range(opts.repeats(3)):
                _clear()
                w, _c, out = _timed(partial(compact_once, t, lim))
                runs.append(w)
        except CtxkitError as exc:
            res.skipped.append(f"{_label(t)}: {exc}")
            continue
        best = min(runs)
        multiples.append(best / one)
        res.rows.append(
            {
                "transcript": _label(t),
                "source": "simulated" if "ground_truth" in t.metadata else "real",
                "units": len(t.units),
                "tokens": out.tokens_before,
                "limit": lim,
                "tokens_after": out.tokens_after,
                "tiktoken_pass_ms": round(one * 1000, 3),
                "compact_ms": round(best * 1000, 3),
                "multiple": round(best / one, 2),
                "strategies": ",".join(out.strategies_applied),
            }
        )
    if multiples:
        res.figures.append(
            Figure(
                "compaction time / one tiktoken pass (median)",
                statistics.median(multiples),
                "x",
                note=f"{len(multiples)} transcripts, cold caches, best of runs each; "
                f"range {min(multiples):.1f}-{max(multiples):.1f}x",
            )
        )


def tables(s: SuiteResult) -> list[Table]:
    """Each transcript's compaction time against one tiktoken pass."""
    if not s.rows:
        return []
    head = ("transcript", "set", "tokens", "limit", "after", "tiktoken ms", "compact ms", "x pass")
    keys = (
        "transcript", "source", "tokens", "limit", "tokens_after", "tiktoken_pass_ms",
        "compact_ms", "multiple",
    )
    return [(None, head, [tuple(r[k] for k in keys) for r in s.rows])]
