"""The quality suite: ctxkit's chain beside LangChain trim_messages, drop-oldest and
observation masking, on simulated and real transcripts."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

from ctxkit.bench.harness import (
    QUICK_SCENARIOS,
    REAL_MIN_TOKENS,
    _label,
    limit_for,
    real_transcripts,
)
from ctxkit.bench.peers import PEER_LABELS, run_peer, runnable_peers, summarize_peers
from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult, Table
from ctxkit.errors import CtxkitError

NAME = "quality"


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """ctxkit's chain beside LangChain trim_messages, drop-oldest and observation masking."""
    from ctxkit.embedders import get_embedder
    from ctxkit.simulate import SCENARIOS, generate

    res = SuiteResult("quality")
    peers, missing = runnable_peers()
    res.skipped.extend(missing)
    embedders: list[tuple[str, Any]] = [("lexical", get_embedder("lexical", cache=False))]
    want_minilm = opts.coherence_minilm if opts.coherence_minilm is not None else not opts.quick
    if want_minilm:
        try:
            embedders.append(("minilm", get_embedder("minilm")))
        except CtxkitError as exc:
            res.skipped.append(f"coherence with minilm: {exc}")
    names = opts.scenarios or (QUICK_SCENARIOS if opts.quick else tuple(SCENARIOS))
    corpus = [generate(s, seed=0) for s in names]
    real = real_transcripts(opts.realdata, REAL_MIN_TOKENS)
    if not real:
        res.skipped.append("real transcripts: not found")
    if opts.quick:
        real = sorted(real, key=lambda t: len(t.units))[:2]
    corpus += real
    # run_peer collects garbage before each timed run; what is alive now (the corpus, the
    # modules) stays alive, so it is set aside and each collection walks only the run's own
    gc.collect()
    gc.freeze()
    try:
        for t in corpus:
            say(f"quality: {_label(t)}")
            limit = limit_for(t)
            for peer in peers:
                res.rows.append(run_peer(peer, t, limit, embedders))
    finally:
        gc.unfreeze()
    res.summary = summarize_peers(res.rows)
    for line in res.summary:
        if line["peer"] != "ctxkit":
            continue
        res.figures.append(
            Figure(
                f"ctxkit chain, {line['source']}: transcripts that fit",
                line["fits"] / line["transcripts"],
                "share",
                note=f"{line['transcripts']} transcripts; broken pairs {line['broken_pairs']}",
            )
        )
        if line.get("needle_retention") is not None:
            res.figures.append(
                Figure(
                    "ctxkit chain, simulated: needle retention (in context + recallable)",
                    line["needle_retention_with_recall"],
                    "share",
                    note=f"in context alone {line['needle_retention']:.2f}",
                )
            )
    return res


def tables(s: SuiteResult) -> list[Table]:
    """The peers side by side, then their fidelity."""
    if not s.summary:
        return []
    return [
        (None, *peer_rows(s.summary, PEER_COLUMNS)),
        ("fidelity (share kept; per transcript, then averaged):", *peer_rows(s.summary, FIDELITY_COLUMNS)),
    ]


PEER_COLUMNS = (
    ("peer", "peer"),
    ("source", "set"),
    ("transcripts", "n"),
    ("fits", "fits"),
    ("tokens_after_over_goal", "tokens/goal"),
    ("time_ms_median", "time ms (median)"),
    ("broken_pairs", "broken pairs"),
    ("p1_kept", "P1 kept (mean)"),
    ("all_p1_kept", "all P1 kept"),
    ("needle_retention", "needles"),
    ("needle_retention_with_recall", "+recall"),
    ("last_request_kept", "last req."),
    ("coherence_lexical", "coh. lexical"),
    ("coherence_minilm", "coh. minilm"),
)

# The fidelity table: what each peer kept of what a model needs to go on (`ctxkit.fidelity.measures`).
FIDELITY_COLUMNS = (
    ("peer", "peer"),
    ("source", "set"),
    ("transcripts", "n"),
    ("needle_retention", "needles present"),
    ("files_trail", "files-touched trail"),
    ("user_verbatim", "user msgs verbatim"),
    ("user_verbatim_in_budget", "in budget"),
    ("last_request_verbatim", "last req. verbatim"),
)


def peer_rows(
    summary: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]
) -> tuple[list[str], list[Sequence[Any]]]:
    """The headers and rows of a per-peer table: the columns some summary line has."""
    cols = [c for c in columns if any(c[0] in r for r in summary)]
    rows: list[Sequence[Any]] = []
    for r in summary:
        vals = []
        for key, _h in cols:
            v = r.get(key)
            if key in ("fits", "last_request_kept", "last_request_verbatim"):
                v = f"{v}/{r['transcripts']}"
            elif key == "all_p1_kept":
                v = f"{v}/{r['transcripts_with_p1']}" if r["transcripts_with_p1"] else None
            elif key == "peer":
                v = PEER_LABELS.get(str(v), v)
            vals.append(v)
        rows.append(vals)
    return [h for _k, h in cols], rows


