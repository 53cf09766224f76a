"""ctxkit's compaction beside its peers, judged by the probes of the original: the engine of
`ctxkit fidelity` and `ctxkit bench --suite fidelity`.

`compare` compacts one transcript to a token budget with ctxkit's default chain and with every
recipe in `ctxkit.recipes.RECIPES` (`engines.methods.run_method`), and scores each result with
the same probes (`fidelity.probes`: recall) and checks every claim of the text each wrote
against the original (`fidelity.claims`: precision). A result counts when it is valid: within the budget, no tool call split
from its result, the system prompt kept word for word; a refusal or an invalid result keeps
nothing. `summarize` turns rows into one line per method and budget (mean recall over the
transcripts, per category, refusals), the table `ctxkit bench --suite fidelity` and
`ctxkit fidelity` print.

    >>> from ctxkit.simulate import generate
    >>> rows = compare(generate("agent_session", seed=0, tokens=6000), 2000, methods=("ctxkit", "drop_oldest"))
    >>> [r.method for r in rows], all(r.valid for r in rows)
    (['ctxkit', 'drop_oldest'], True)
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.engines.methods import (
    CTXKIT,
    Checks,
    all_methods,
    available,
    check,
    label,
    run_method,
)
from ctxkit.fidelity import claims as C
from ctxkit.fidelity import probes as P
from ctxkit.model import Transcript

__all__ = [
    "BUDGET_SHARES", "CTXKIT", "Row", "all_methods", "available", "bench", "compare", "label",
    "one_transcript", "score_files", "score_method", "summarize",
]

BUDGET_SHARES = (3, 6, 10)  # budgets of 1/3, 1/6 and 1/10 of a transcript's own tokens


@dataclass
class Row:
    """One method on one transcript at one budget."""

    method: str
    transcript: str
    budget: int
    tokens_before: int
    tokens_after: int | None = None
    fits: bool = False
    pairs_intact: bool = False
    system_kept: bool = False
    score: P.ProbeScore | None = None
    claims: C.ClaimScore | None = None  # what its own text says, checked against the original
    error: str | None = None
    time_ms: float = 0.0
    share: int | None = None  # the budget as 1/share of the transcript, when the bench set it
    meta: dict[str, Any] = field(default_factory=dict)

    def take(self, checks: Checks) -> None:
        """Record what the checks of the row's result found (`engines.methods.check`)."""
        self.tokens_after = checks.tokens_after
        self.fits = checks.fits
        self.pairs_intact = checks.pairs_intact
        self.system_kept = checks.system_kept

    @property
    def valid(self) -> bool:
        """Within the budget, no pair broken, the system prompt kept, and not refused."""
        return self.error is None and self.fits and self.pairs_intact and self.system_kept

    @property
    def recall(self) -> float:
        """Probe recall; 0.0 for a refusal or an invalid result."""
        return self.score.recall if self.valid and self.score is not None else 0.0

    @property
    def precision(self) -> float | None:
        """True claims over all claims of the text the compaction wrote (`fidelity.claims`);
        None for a refusal."""
        return self.claims.precision if self.claims is not None else None

    def to_dict(self, lost: bool = True, claims: bool = True) -> dict[str, Any]:
        """The row as data; `lost`: every probe lost, `claims`: every false claim (quoted)."""
        d: dict[str, Any] = {
            "method": self.method,
            "transcript": self.transcript,
            "budget": self.budget,
            "share": self.share,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "valid": self.valid,
            "fits": self.fits,
            "pairs_intact": self.pairs_intact,
            "system_kept": self.system_kept,
            "recall": round(self.recall, 4),
            "precision": None if self.precision is None else round(self.precision, 4),
            "error": self.error,
            "time_ms": round(self.time_ms, 1),
        }
        if self.score is not None:
            d["probes"] = self.score.to_dict()
            if not lost:
                d["probes"].pop("lost", None)
        if self.claims is not None:
            d["claims"] = self.claims.to_dict(claims=claims)
        return d


def score_method(
    method: str,
    t: Transcript,
    budget: int,
    probes: Sequence[P.Probe] | None = None,
    settings: Any = None,
) -> tuple[Row, Transcript | None]:
    """One method on one transcript: the row (scored) and the compacted transcript (None when
    refused). `settings` (a `CompactSettings`) overrides ctxkit's own, limit aside."""
    probes = list(probes) if probes is not None else P.extract(t)
    ours = settings.replace(limit=budget) if settings is not None else None
    ran = run_method(method, t, budget, ours)
    row = Row(method, t.id, budget, ran.tokens_before, time_ms=ran.time_ms, meta=ran.meta)
    if ran.error is not None:
        row.error = ran.error.splitlines()[0]
    if ran.result is not None and ran.checks is not None:
        row.take(ran.checks)
        row.score = P.score(probes, ran.result)
        row.claims = C.check(t, ran.result)
    return row, ran.result


def compare(
    t: Transcript, budget: int, methods: Sequence[str] | None = None, settings: Any = None
) -> list[Row]:
    """Every method on one transcript at one budget, scored against the same probes."""
    names = list(methods) if methods is not None else list(all_methods())
    probes = P.extract(t)
    return [score_method(m, t, budget, probes, settings)[0] for m in names]


def summarize(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One line per method (and budget share, when rows carry one): mean recall over the cases
    every method could be judged on (some method returned a valid result), per category, and
    how many results were refused or invalid."""
    cases: dict[tuple[str, int, int | None], list[Row]] = {}
    for r in rows:
        cases.setdefault((r.transcript, r.budget, r.share), []).append(r)
    feasible = {k for k, rs in cases.items() if any(r.valid for r in rs)}
    out: list[dict[str, Any]] = []
    order = list(dict.fromkeys(r.method for r in rows))
    shares = sorted({r.share for r in rows}, key=lambda s: (s is None, s or 0))
    for method in order:
        for share in shares:
            mine = [
                r for r in rows
                if r.method == method and r.share == share and (r.transcript, r.budget, r.share) in feasible
            ]
            if not mine:
                continue
            line: dict[str, Any] = {
                "method": method,
                "label": label(method),
                "budget": f"1/{share}" if share else "",
                "cases": len(mine),
                "recall": round(statistics.mean(r.recall for r in mine), 3),
            }
            # precision over the claims of every valid result (a claim counts once, wherever)
            judged = [r.claims for r in mine if r.valid and r.claims is not None]
            total = sum(c.total for c in judged)
            line["claims"] = total
            line["false_claims"] = sum(c.false for c in judged)
            line["precision"] = round(1 - line["false_claims"] / total, 3) if total else None
            for cat in P.CATEGORIES:
                vals: list[float] = []
                for r in mine:
                    kept = r.score.category(cat) if r.valid and r.score is not None else None
                    if kept is not None:
                        vals.append(kept)
                line[cat] = round(statistics.mean(vals), 3) if vals else None
            line["refused"] = sum(1 for r in mine if r.error is not None)
            line["invalid"] = sum(1 for r in mine if r.error is None and not r.valid)
            line["time_ms_median"] = round(statistics.median(r.time_ms for r in mine), 1)
            out.append(line)
    return out


def bench(
    transcripts: Iterable[Transcript],
    shares: Sequence[int] = BUDGET_SHARES,
    methods: Sequence[str] | None = None,
    progress: Any = None,
) -> list[Row]:
    """Every method on every transcript at 1/share of its own tokens, for each share."""
    from ctxkit.tokens import count_transcript, get_tokenizer

    names = list(methods) if methods is not None else list(all_methods())
    tok = get_tokenizer()
    rows: list[Row] = []
    for t in transcripts:
        n = count_transcript(t, tok).total
        probes = P.extract(t)
        if progress is not None:
            progress(f"fidelity: {t.metadata.get('bench_source', t.id)} ({n:,} tokens, {len(probes)} probes)")
        for share in shares:
            for m in names:
                row, _ = score_method(m, t, n // share, probes)
                row.share = share
                row.transcript = str(t.metadata.get("bench_source", t.id))
                rows.append(row)
    return rows


def one_transcript(path: str, read_opts: Any = None) -> Transcript:
    """The one transcript a file holds (a file of several is a usage error that says so)."""
    from ctxkit.errors import UsageError
    from ctxkit.formats import read_path

    found = list(read_path(path, read_opts)) if read_opts is not None else list(read_path(path))
    if len(found) != 1:
        raise UsageError(f"{path}: holds {len(found)} transcripts; fidelity compares one at a time")
    return found[0]


def score_files(original: str, compacted: Sequence[str], read_opts: Any = None) -> list[Row]:
    """Each compacted file scored against the probes of the original (any compaction: ctxkit's,
    a peer's, an agent's own); the budget of each row is its own size."""
    from ctxkit.counting import measure
    from ctxkit.tokens import get_tokenizer

    t = one_transcript(original, read_opts)
    probes = P.extract(t)
    tok = get_tokenizer()
    before = measure(t, tok).total  # the figures `count` gives of each file
    rows = []
    for path in compacted:
        c = one_transcript(path, read_opts)
        row = Row(path, t.id, 0, before)
        row.take(check(t, c, 0, tok))
        row.tokens_after = measure(c, tok).total
        row.budget = row.tokens_after or 0  # judged on what it kept, not against a budget
        row.fits = True
        row.score = P.score(probes, c)
        row.claims = C.check(t, c)
        rows.append(row)
    return rows
