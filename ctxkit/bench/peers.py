"""Peers that ctxkit is compared with: every recipe in `ctxkit.recipes.RECIPES` (drop-oldest,
observation masking, clear_tool_uses, LangChain trim_messages, the Codex and Gemini CLI recipes),
one registry: a new peer is one module and one registry line there."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

from ctxkit.bench.harness import _clear, _label, _mean, _median, _settings
from ctxkit.engines.methods import Checks, all_methods, available, label
from ctxkit.model import Transcript, Unit
from ctxkit.tokens import CountOptions, speaker_name, unit_texts

PEERS = all_methods()
PEER_LABELS = {name: label(name) for name in PEERS}


def raw_unit_tokens(u: Unit, enc: Any, copts: CountOptions) -> int:
    """One unit's tokens by ctxkit's accounting, encoded with raw tiktoken (no cache)."""
    texts = [x for x in unit_texts([u])[0] if x]
    n = sum(len(enc.encode_ordinary(x)) for x in texts)
    n += copts.tokens_per_message + u.images * copts.image_tokens
    if speaker_name(u):
        n += copts.tokens_per_name
    return n


def runnable_peers() -> tuple[list[str], list[str]]:
    """(peers that can run here, a note for each that cannot: its optional package is missing)."""
    return available(PEERS)


def run_peer(
    peer: str, t: Transcript, limit: int, coherence_embedders: Sequence[tuple[str, Any]]
) -> dict[str, Any]:
    """Run one peer on one transcript and measure it: fits, tokens, time, pairs, P1, needles."""
    from ctxkit.engines.methods import run_method

    s = _settings(limit)
    _clear()
    gc.collect()
    # the goal is the budget of every method; ctxkit aims at it on what the log holds
    ran = run_method(peer, t, s.goal, s.replace(target=s.goal))
    row: dict[str, Any] = {
        "peer": peer,
        "transcript": _label(t),
        "source": "simulated" if "ground_truth" in t.metadata else "real",
        "units": len(t.units),
        "tokens_before": ran.tokens_before,
        "limit": s.limit,
        "goal": s.goal,
    }
    if ran.result is None or ran.checks is None:
        row.update(error=ran.error, fits=False, time_ms=ran.time_ms)
        return row
    row["time_ms"] = round(ran.time_ms, 3)
    row.update(_checked(ran.checks, len(ran.result.units)))
    row.update(_fidelity(t, ran.result, s.tok, s.goal))
    row.update(_probes(t, ran.result))
    truth = t.metadata.get("ground_truth")
    if truth:
        row.update(_needles(t, ran.result, truth, ran.archived))
    if coherence_embedders:
        from ctxkit.compaction import coherence

        for name, emb in coherence_embedders:
            row[f"coherence_{name}"] = round(coherence(t.units, ran.result.units, emb), 4)
    return row


def _checked(checks: Checks, units_after: int) -> dict[str, Any]:
    """The checks of a run (`engines.methods.check`), as the quality table names them."""
    return {
        "fits": checks.fits,
        "tokens_after": checks.tokens_after,
        "units_after": units_after,
        "broken_pairs": checks.broken_pairs,
        "p1_total": checks.p1_total,
        "p1_kept": checks.p1_kept,
        "last_request_kept": checks.last_request_kept,
    }


def _probes(t: Transcript, result: Transcript) -> dict[str, Any]:
    """Probe recall of a run, overall and per category (`ctxkit.fidelity.probes`)."""
    from ctxkit.fidelity import probes as P

    score = P.score(P.extract(t), result)
    row: dict[str, Any] = {"probe_recall": round(score.recall, 4)}
    for cat in P.CATEGORIES:
        share = score.category(cat)
        if share is not None:
            row[f"probe_{cat}"] = round(share, 4)
    return row


def _needles(t: Transcript, result: Transcript, truth: dict[str, Any], archived: Any) -> dict[str, Any]:
    """The ground truth's needles in a run's result, and in what it archived (ctxkit alone
    keeps an archive to recall from)."""
    from ctxkit.fidelity.truth import needle_retention

    kept = needle_retention(result, truth, archived, transcript_id=t.id)
    return {
        "needles_total": kept["total"],
        "needles_present": kept["present"],
        "needles_recallable": kept["recallable"],
    }


def _fidelity(t: Transcript, result: Transcript, tok: Any, goal: int) -> dict[str, Any]:
    """The fidelity table's measures of one run (`ctxkit.fidelity.measures`); needles are `run_peer`'s.
    "In budget": the user messages the engine's budget for `goal` promises to keep."""
    from ctxkit.engines.methods import ENGINE_RULES as rules
    from ctxkit.fidelity import measures as fidelity

    trail = fidelity.files_trail(t, result, rules)
    users = fidelity.user_verbatim(
        t, result, rules, rules.user_message_budget(goal), count=tok.count
    )
    return {
        "files_trail_kept": trail.kept,
        "files_trail_total": trail.total,
        "user_verbatim_kept": users.all.kept,
        "user_verbatim_total": users.all.total,
        "user_verbatim_in_budget_kept": users.in_budget.kept,
        "user_verbatim_in_budget_total": users.in_budget.total,
        "last_request_verbatim": fidelity.last_request_verbatim(t, result),
    }


def _mean_share(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    """Mean over the transcripts that had something to keep of `key`_kept / `key`_total."""
    return _mean([r[f"{key}_kept"] / r[f"{key}_total"] for r in rows if r.get(f"{key}_total")])


def summarize_peers(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per (peer, source): rates and means over the transcripts."""
    out: list[dict[str, Any]] = []
    sources = [s for s in ("simulated", "real") if any(r["source"] == s for r in rows)]
    for source in sources:
        for peer in PEERS:
            mine = [r for r in rows if r["peer"] == peer and r["source"] == source]
            if not mine:
                continue
            ok = [r for r in mine if "error" not in r]
            line: dict[str, Any] = {
                "peer": peer,
                "source": source,
                "transcripts": len(mine),
                "errors": len(mine) - len(ok),
                "fits": sum(1 for r in mine if r.get("fits")),
                "tokens_after_over_goal": _mean([r["tokens_after"] / r["goal"] for r in ok]),
                "time_ms_mean": _mean([r["time_ms"] for r in mine]),
                "time_ms_median": _median([r["time_ms"] for r in mine]),
                "broken_pairs": sum(r.get("broken_pairs", 0) for r in ok),
                "transcripts_with_broken_pairs": sum(1 for r in ok if r.get("broken_pairs")),
                "last_request_kept": sum(1 for r in ok if r.get("last_request_kept")),
            }
            # per transcript, then averaged: one all-P1 transcript must not outweigh the rest
            with_p1 = [r for r in ok if r.get("p1_total")]
            line["p1_kept"] = _mean([r["p1_kept"] / r["p1_total"] for r in with_p1])
            line["all_p1_kept"] = sum(1 for r in with_p1 if r["p1_kept"] == r["p1_total"])
            line["transcripts_with_p1"] = len(with_p1)
            needles = sum(r.get("needles_total", 0) for r in ok)
            if needles:
                line["needle_retention"] = sum(r.get("needles_present", 0) for r in ok) / needles
                line["needle_retention_with_recall"] = (
                    sum(r.get("needles_present", 0) + r.get("needles_recallable", 0) for r in ok)
                    / needles
                )
            # fidelity: per transcript, then averaged (one long session must not outweigh)
            line["files_trail"] = _mean_share(ok, "files_trail")
            line["user_verbatim"] = _mean_share(ok, "user_verbatim")
            line["user_verbatim_in_budget"] = _mean_share(ok, "user_verbatim_in_budget")
            line["last_request_verbatim"] = sum(1 for r in ok if r.get("last_request_verbatim"))
            line["probe_recall"] = _mean([r["probe_recall"] for r in ok if "probe_recall" in r])
            for key in sorted({k for r in ok for k in r if k.startswith("coherence_")}):
                line[key] = _mean([r[key] for r in ok if key in r])
            out.append(line)
    return out
