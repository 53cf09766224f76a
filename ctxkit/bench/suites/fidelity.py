"""The fidelity suite: what the model can still answer after compaction. Probe recall
(`fidelity.probes`) and claim precision (`fidelity.claims`) of ctxkit's default chain and of
every peer on the real transcripts at 1/3, 1/6 and 1/10 of their own tokens
(`engines.fidelity`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ctxkit.bench.harness import real_transcripts
from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult, Table

NAME = "fidelity"

FIDELITY_MIN_TOKENS = 3_000  # smaller transcripts have little to compact and few probes
FIDELITY_MARGIN = 0.10  # ctxkit's mean recall over the best peer's, at every budget


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """What the model can still answer: probe recall (`fidelity.probes`) of ctxkit's default and
    of every peer on the real transcripts at 1/3, 1/6 and 1/10 of their own tokens."""
    from ctxkit.engines import fidelity as compare

    res = SuiteResult("fidelity")
    methods, missing = compare.available(compare.all_methods())
    res.skipped.extend(missing)
    found = real_transcripts(opts.realdata, FIDELITY_MIN_TOKENS)
    per_file = Counter(str(t.metadata.get("bench_source")) for t in found)
    # a file of many conversations is a dataset of chats, not an agent session
    real = [t for t in found if per_file[str(t.metadata.get("bench_source"))] <= 3]
    if not real:
        res.skipped.append("real transcripts: not found")
        return res
    if opts.quick:
        real = sorted(real, key=lambda t: len(t.units))[:3]
    rows = compare.bench(real, methods=methods, progress=say)
    res.rows = [r.to_dict(lost=False, claims=False) for r in rows]
    res.summary = compare.summarize(rows)
    for share in compare.BUDGET_SHARES:
        lines = [line for line in res.summary if line["budget"] == f"1/{share}"]
        ours = next((line for line in lines if line["method"] == compare.CTXKIT), None)
        peers = [line for line in lines if line["method"] != compare.CTXKIT]
        if ours is None or not peers:
            continue
        best = max(peers, key=lambda line: line["recall"])
        res.figures.append(
            Figure(
                f"probe recall at 1/{share}: ctxkit over the best peer",
                ours["recall"] - best["recall"],
                "recall",
                target=FIDELITY_MARGIN,
                better="higher",
                note=f"ctxkit {ours['recall']:.3f}, {best['label']} {best['recall']:.3f}; "
                f"{ours['cases']} cases, ctxkit refused {ours['refused']}",
            )
        )
    return res


def tables(s: SuiteResult) -> list[Table]:
    """One row per method and budget."""
    if not s.summary:
        return []
    return [(None, *fidelity_rows(s.summary))]


def fidelity_rows(summary: Sequence[dict[str, Any]]) -> tuple[list[str], list[Sequence[Any]]]:
    """The probe-recall table: one row per method and budget (`engines.fidelity.summarize`)."""
    from ctxkit.fidelity.probes import CATEGORIES

    headers = ["method", "budget", "cases", "recall", "precision", *CATEGORIES, "refused", "invalid", "ms (median)"]
    rows: list[Sequence[Any]] = [
        [line["label"], line["budget"], line["cases"], line["recall"], line.get("precision"),
         *(line.get(c) for c in CATEGORIES), line["refused"], line["invalid"], line["time_ms_median"]]
        for line in summary
    ]
    return headers, rows
