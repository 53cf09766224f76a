"""Running an action on a transcript (one shot or replayed) and scoring the outcome."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import Any

from ctxkit.archive.store import Archive
from ctxkit.budget import used_fraction
from ctxkit.compaction import CompactSettings
from ctxkit.compaction.result import CompactResult, Failure
from ctxkit.compaction.run import run
from ctxkit.errors import unknown_name
from ctxkit.fidelity import claims as fidelity_claims
from ctxkit.fidelity import probes
from ctxkit.model import TYPES, Transcript
from ctxkit.rl.actions import MODES, Action
from ctxkit.rl.reward import clamped, cost_share, reward_terms, time_penalty
from ctxkit.tokens import CountOptions, Tokenizer, count_transcript


@dataclass
class Outcome:
    """What one action did to one transcript: the spec's outcome plus needle retention."""

    transcript_id: str
    action: str
    mode: str
    success: bool
    fits: bool
    invariants_ok: bool
    used_recovery: bool
    coherence_delta: float
    tokens_reduced: int
    original_tokens: int
    final_tokens: int
    limit: int
    time_ms: float
    priority_preserved: float
    compactions: int
    tokens_sent: int | None = None  # replay only: the session's cost
    needles_total: int | None = None  # None without ground truth
    needles_present: int | None = None
    needles_recallable: int | None = None
    retention: float | None = None
    retention_with_recall: float | None = None
    error: str | None = None
    fidelity: float | None = None  # probe recall of the context it left (`fidelity.probes`)
    false_claims: int | None = None  # false claims of the text it wrote (`fidelity.claims`)
    # what the calls wrote to the prompt cache (a replay: every call; one shot: the next call)
    # and what the uncompacted calls send: the reward's cost term (`rl.reward.cost_share`)
    cache_write_tokens: int | None = None
    tokens_sent_baseline: int | None = None

    def add_retention(self, retention: Mapping[str, Any]) -> None:
        """Record needle retention (`truth.needle_retention`'s figures)."""
        self.needles_total = int(retention["total"])
        self.needles_present = int(retention["present"])
        self.needles_recallable = int(retention["recallable"])
        self.retention = float(retention["retention"])
        self.retention_with_recall = float(retention["retention_with_recall"])

    @property
    def reduction_ratio(self) -> float:
        """tokens_reduced / original_tokens (0 for an empty transcript)."""
        return self.tokens_reduced / self.original_tokens if self.original_tokens else 0.0

    @property
    def cost_share(self) -> float | None:
        """The calls' cost as `rl.reward.cost_share` gives it; None when not measured."""
        if self.cache_write_tokens is None or self.tokens_sent_baseline is None:
            return None
        sent = self.tokens_sent if self.tokens_sent is not None else self.final_tokens
        return cost_share(sent, self.cache_write_tokens, self.tokens_sent_baseline)

    @property
    def terms(self) -> dict[str, float]:
        """The reward's terms for this outcome."""
        return reward_terms(
            success=self.success,
            coherence_delta=self.coherence_delta,
            reduction_ratio=self.reduction_ratio,
            priority_preserved=self.priority_preserved,
            used_recovery=self.used_recovery,
            fidelity=self.fidelity,
            cost=self.cost_share,
            false_claims=self.false_claims,
        )

    @property
    def reward(self) -> float:
        """The spec's reward for this outcome."""
        return clamped(self.terms)

    @property
    def time_penalty(self) -> float:
        """The spec's time term, reported beside the reward (`rl.reward`)."""
        return time_penalty(self.time_ms)

    def to_dict(self) -> dict[str, Any]:
        """The outcome as the datasets record it: `time_ms` (the machine's, not the input's)
        stays out, so two runs export the same bytes."""
        return {
            "transcript": self.transcript_id,
            "action": self.action,
            "mode": self.mode,
            "success": self.success,
            "fits": self.fits,
            "invariants_ok": self.invariants_ok,
            "used_recovery": self.used_recovery,
            "coherence_delta": round(self.coherence_delta, 6),
            "tokens_reduced": self.tokens_reduced,
            "original_tokens": self.original_tokens,
            "final_tokens": self.final_tokens,
            "limit": self.limit,
            "priority_preserved": round(self.priority_preserved, 6),
            "compactions": self.compactions,
            "tokens_sent": self.tokens_sent,
            "needles_total": self.needles_total,
            "needles_present": self.needles_present,
            "needles_recallable": self.needles_recallable,
            "retention": self.retention,
            "retention_with_recall": self.retention_with_recall,
            "fidelity": None if self.fidelity is None else round(self.fidelity, 6),
            "false_claims": self.false_claims,
            "error": self.error,
        }


def state_features(
    t: Transcript,
    limit: int,
    tokenizer: Tokenizer,
    count_opts: CountOptions,
    tokens: int | None = None,
) -> dict[str, Any]:
    """The compact state an RL log records: tokens, limit, units, P1 count, type histogram.
    `tokens`: the figure the compaction decided on (`counting.measure`: a log's recorded usage
    counts); default the transcript's own count."""
    if tokens is None:
        tokens = count_transcript(t, tokenizer, count_opts).total
    types = dict.fromkeys(TYPES, 0)
    for u in t.units:
        types[u.type if u.type in types else "other"] += 1
    return {
        "tokens": tokens,
        "limit": limit,
        "used_fraction": round(used_fraction(tokens, limit), 6),
        "units": len(t.units),
        "p1": sum(1 for u in t.units if u.is_p1),
        "types": types,
    }


def _kept_prefix(t: Transcript, result: Transcript, tok: Tokenizer, copts: CountOptions) -> int:
    """Tokens of the prefix `result` shares with `t` (the tool schemas and the units before
    the first change): what the next call still reads from the prompt cache."""
    k = 0
    for a, b in zip(t.units, result.units, strict=False):
        if a is not b and (a.id, a.content) != (b.id, b.content):
            break
        k += 1
    return count_transcript(result.replace(units=list(result.units[:k])), tok, copts).total


def coherence(original: Transcript, result: Transcript, embedder: Any = None) -> float:
    """The chain's coherence figure (`chain.coherence`), so reports and rewards agree."""
    from ctxkit.compaction import coherence as chain_coherence

    return chain_coherence(original.units, result.units, embedder)


@dataclass
class Trial:
    """One (transcript, action) run: the outcome, both states, and the result for datasets."""

    original: Transcript
    result: Transcript
    action: Action
    outcome: Outcome
    state_before: dict[str, Any]
    state_after: dict[str, Any]
    # where the limit came from, for people ("--limit", "its own target, ..."): not in the rows
    limit_source: str = ""

    def row(self) -> dict[str, Any]:
        """The RL log line: {state_before, action, reward, state_after} plus the outcome."""
        return {
            "transcript": self.original.id,
            "mode": self.outcome.mode,
            "state_before": self.state_before,
            "action": self.action.to_dict(),
            "reward": round(self.outcome.reward, 6),
            "state_after": self.state_after,
            "outcome": self.outcome.to_dict(),
        }


def run_action(
    t: Transcript,
    action: Action,
    settings: CompactSettings | None = None,
    *,
    limit: int | None = None,
    mode: str = "oneshot",
) -> Trial:
    """Apply one action to one transcript (one-shot or replayed) and measure the outcome.

    `settings` gives the budget, tokenizer and embedder (`limit` alone is shorthand for
    `CompactSettings(limit=limit)`, or overrides the settings' limit); the action replaces
    their chain, parameters and recovery mode.
    """
    if mode not in MODES:
        raise unknown_name("mode", mode, MODES)
    settings = CompactSettings.given(settings, limit, "run_action")
    if limit is not None:
        settings = settings.replace(from_log=False)  # a limit given here (ground truth) holds
    source = limit_source(settings, t, given=limit is not None)
    # the limit the compaction runs at, which the rows record: the log's own target, when the
    # settings stand for it (`CompactSettings.for_transcript`)
    settings = settings.for_transcript(t)
    settings = settings.replace(options=action.options(settings.options.seed))
    limit, tok, copts = settings.limit, settings.tok, settings.count_opts
    truth = t.metadata.get("ground_truth")
    if truth:
        from ctxkit.fidelity.truth import truth_priorities

        t = truth_priorities(t, truth)
    from ctxkit.counting import measure

    # the figure the compaction decides on, which the limit is against: with a log's recorded
    # usage (what the provider counted), as `count` and `guard` give it
    measured = measure(t, tok, copts, usage=settings.use_usage).total
    before = state_features(t, limit, tok, copts, tokens=measured)
    outcome = partial(Outcome, transcript_id=t.id, action=action.name, mode=mode, limit=limit)
    if mode == "replay":
        result_t, out, retention = _replayed(t, settings, truth, outcome)
    else:
        result_t, out, retention = _compacted_once(t, settings, truth, outcome, before["tokens"])
    if retention is not None:
        out.add_retention(retention)
    # nothing usable came out of a failed run: it keeps nothing of what the task needs
    out.fidelity = probes.score(probes.extract(t), result_t).recall if out.success else 0.0
    # what the compaction's own text says, checked against the original: a false claim costs
    out.false_claims = fidelity_claims.check(t, result_t).false if out.success else 0
    after = state_features(result_t, limit, tok, copts, tokens=out.final_tokens)
    return Trial(t, result_t, action, out, before, after, source)


def _replayed(
    t: Transcript, settings: CompactSettings, truth: Any, outcome: Callable[..., Outcome]
) -> tuple[Transcript, Outcome, dict[str, Any] | None]:
    """The context an agent loop replayed under `settings` ends with, its outcome, and the
    needles it retained (with ground truth)."""
    from ctxkit.replay import replay

    with Archive(":memory:") as archive:
        r = replay(t, settings, archive=archive, truth=truth)
    result_t = r.transcript
    retention = r.retention if truth else None
    out = outcome(
        success=r.fits and r.invariants_ok,
        fits=r.fits,
        invariants_ok=r.invariants_ok,
        used_recovery=r.used_recovery,
        coherence_delta=coherence(t, result_t, settings.embedder),
        tokens_reduced=max(0, r.original_tokens - r.final_tokens),
        original_tokens=r.original_tokens,
        final_tokens=r.final_tokens,
        time_ms=r.compaction_time_ms,
        priority_preserved=r.p1_kept / r.p1_total if r.p1_total else 1.0,
        compactions=r.compactions,
        tokens_sent=r.tokens_sent,
        error=r.errors[0] if r.errors else None,
        cache_write_tokens=sum(n - c for n, c in zip(r.call_tokens, r.call_cached, strict=True)),
        tokens_sent_baseline=r.tokens_sent_baseline,
    )
    return result_t, out, retention


def _compacted_once(
    t: Transcript, settings: CompactSettings, truth: Any, outcome: Callable[..., Outcome], tokens: int
) -> tuple[Transcript, Outcome, dict[str, Any] | None]:
    """The context one compaction under `settings` leaves (the original when it failed, of
    `tokens`), its outcome, and the needles it retained (with ground truth)."""
    embedder, tok, copts = settings.embedder, settings.tok, settings.count_opts
    c, retention = _oneshot(t, settings, truth)
    if isinstance(c, Failure):
        # No context came out: nothing of the original is usable, so no coherence,
        # reduction or priority credit.
        result_t = t
        out = outcome(
            success=False,
            fits=False,
            invariants_ok=True,
            used_recovery=False,
            coherence_delta=0.0,
            tokens_reduced=0,
            original_tokens=tokens,
            final_tokens=tokens,
            time_ms=0.0,
            priority_preserved=0.0,
            compactions=1,
            error=c.message,
        )
    else:
        result_t = c.transcript
        out = outcome(
            success=c.fits and bool(c.invariants["ok"]),
            fits=c.fits,
            invariants_ok=bool(c.invariants["ok"]),
            used_recovery=c.recovery is not None,
            coherence_delta=coherence(t, result_t, embedder),
            tokens_reduced=max(0, c.tokens_before - c.tokens_after),
            original_tokens=c.tokens_before,
            final_tokens=c.tokens_after,
            time_ms=c.time_ms,
            priority_preserved=c.p1_kept / c.p1_total if c.p1_total else 1.0,
            compactions=1 if c.changed else 0,
            # the next call: it reads the prefix the compaction left as it was and writes
            # the rest; without compaction it would read the whole original
            cache_write_tokens=max(0, c.tokens_after - _kept_prefix(t, result_t, tok, copts)),
            tokens_sent_baseline=c.tokens_before,
        )
    return result_t, out, retention


def limit_source(settings: CompactSettings, t: Transcript, *, given: bool = False) -> str:
    """Where the limit `t` is scored at comes from, for people: its ground truth, --limit, the
    log's own target (model and agent), --model, the configuration, or the default."""
    if given:
        return "its ground truth's limit"
    if settings.from_log:
        named = settings.for_transcript(t)
        if named is not settings and named.budget is not None:
            own = named.budget
            return f"its log's own target, {own.name}" + (f" under {own.agent}" if own.agent else "")
    b = settings.budget
    if b is None:
        return "the limit given"
    if b.bound_by == "policy":
        rule = b.policy_rule
        return rule if rule.startswith("--limit") else f"the configuration's {rule}"
    if b.name == "default":
        return "the default limit (no --limit, and no model the log names)"
    return f"--model {b.name}"


def _oneshot(
    t: Transcript, settings: CompactSettings, truth: Mapping[str, Any] | None
) -> tuple[CompactResult | Failure, dict[str, Any] | None]:
    """`t` through the one compaction run (scratch archive in memory); the result, or why
    there is none, and needle retention against the archive while it is open."""
    from ctxkit.fidelity.truth import needle_retention

    got: list[Any] = []

    def keep(item: CompactResult | Failure, archive: Archive) -> None:
        retention = None
        if truth and isinstance(item, CompactResult):
            retention = needle_retention(item.transcript, truth, archive)
        got.append((item, retention))

    run([t], settings, on_result=keep, keep_going=True)
    return got[0]


def score(
    transcripts: Iterable[Transcript],
    actions: Sequence[Action],
    settings: CompactSettings | None = None,
    *,
    limit_for: Callable[[Transcript], int | None] | None = None,
    mode: str = "oneshot",
) -> Iterator[list[Trial]]:
    """For each transcript (read lazily), the trials of every action, in action order.

    `limit_for` picks each transcript's limit (e.g. from its ground truth); default the
    settings' own. One of the two is needed.
    """
    if settings is None and limit_for is None:
        raise TypeError("score() needs settings or limit_for")
    for t in transcripts:
        limit = limit_for(t) if limit_for is not None else None
        yield [run_action(t, a, settings, limit=limit, mode=mode) for a in actions]


@dataclass
class _Tally:
    n: int = 0
    reward: float = 0.0
    fits: int = 0
    success: int = 0
    recovery: int = 0
    time_ms: float = 0.0
    needles: int = 0
    present: int = 0
    recallable: int = 0
    coherence: float = 0.0
    reduction: float = 0.0
    fidelity: float = 0.0


class Summary:
    """Running per-action totals (bounded memory): mean reward, fit rate, retention, time."""

    def __init__(self) -> None:
        self._by: dict[str, _Tally] = {}

    def add(self, trial: Trial) -> None:
        """Count one trial."""
        o = trial.outcome
        s = self._by.setdefault(o.action, _Tally())
        s.n += 1
        s.reward += o.reward
        s.fits += o.fits
        s.success += o.success
        s.recovery += o.used_recovery
        s.time_ms += o.time_ms
        s.coherence += o.coherence_delta
        s.reduction += o.reduction_ratio
        s.fidelity += o.fidelity or 0.0
        if o.needles_total:
            s.needles += o.needles_total
            s.present += o.needles_present or 0
            s.recallable += o.needles_recallable or 0

    def merge(self, other: Summary) -> None:
        """Add another run's totals (a shard scored elsewhere) to these."""
        for name, t in other._by.items():
            s = self._by.setdefault(name, _Tally())
            for f in fields(_Tally):
                setattr(s, f.name, getattr(s, f.name) + getattr(t, f.name))

    def rows(self) -> list[dict[str, Any]]:
        """One row per action, best mean reward first."""
        out: list[dict[str, Any]] = []
        for name, s in self._by.items():
            out.append(
                {
                    "action": name,
                    "n": s.n,
                    "mean_reward": s.reward / s.n,
                    "fit_rate": s.fits / s.n,
                    "success_rate": s.success / s.n,
                    "recovery_rate": s.recovery / s.n,
                    "mean_coherence": s.coherence / s.n,
                    "mean_reduction": s.reduction / s.n,
                    "mean_fidelity": s.fidelity / s.n,
                    "retention": s.present / s.needles if s.needles else None,
                    "retention_with_recall": (s.present + s.recallable) / s.needles
                    if s.needles
                    else None,
                    "mean_time_ms": s.time_ms / s.n,
                }
            )
        out.sort(key=lambda r: -r["mean_reward"])
        return out

    def table(self) -> str:
        """The rows as an aligned text table."""
        head = (
            "action",
            "n",
            "reward",
            "fit",
            "recovery",
            "coherence",
            "fidelity",
            "reduced",
            "retention",
            "+recall",
            "time ms",
        )
        body = []
        for r in self.rows():

            def pct(v: float | None) -> str:
                return "-" if v is None else f"{v:.0%}"

            body.append(
                (
                    r["action"],
                    str(r["n"]),
                    f"{r['mean_reward']:+.3f}",
                    pct(r["fit_rate"]),
                    pct(r["recovery_rate"]),
                    f"{r['mean_coherence']:.3f}",
                    f"{r['mean_fidelity']:.3f}",
                    pct(r["mean_reduction"]),
                    pct(r["retention"]),
                    pct(r["retention_with_recall"]),
                    f"{r['mean_time_ms']:.1f}",
                )
            )
        widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
        lines = []
        for row in [head, *body]:
            cells = [row[0].ljust(widths[0])] + [
                c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
            ]
            lines.append("  ".join(cells))
        return "\n".join(lines)
