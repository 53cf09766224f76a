"""Replay: feed a transcript to the engine message by message, as an agent loop would.

The agent appends each unit of the original transcript to its running context. Before every
model call (the first assistant unit of each run of assistant units, and a last call when the
transcript ends on a request the model still has to answer) it asks the loop's policy
(`budget.policy`: when compacting pays for itself, at most once per 25 calls, and whenever the
call would not fit) whether to compact; if so the chain runs to the policy's goal, and the
compacted context is what the model sees and what later units are appended to. Each compaction
records what the next call still reads from the prompt cache and what it writes.

Checking before each call, not after each unit, keeps parallel tool results together: the
model only answers once every result of its calls has arrived, so that is the moment a real
loop checks its budget.

The report says how often the chain ran, the tokens sent over the whole session (the sum of the
context at each call: the cost), what the model saw at the end, and for each needle of a
generated scenario whether its fact was in the context (or recallable from the archive) at the
call that answered the request needing it.

Example:
    >>> from ctxkit.replay import replay
    >>> from ctxkit.simulate import generate
    >>> r = replay(generate("growing_session", seed=1, tokens=8000), limit=4000)
    >>> r.compactions, r.fits, r.tokens_sent < r.tokens_sent_baseline
    (2, True, True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxkit.archive.store import Archive
from ctxkit.budget import Thresholds, compaction_goal, status_for, status_rank
from ctxkit.budget.policy import LoopPolicy, loop_policy
from ctxkit.compaction import RECOVERY_MODES, CompactResult, CompactSettings, compact, expand_chain
from ctxkit.errors import CtxkitError, UsageError, unknown_name
from ctxkit.fidelity.truth import retention_totals, truth_priorities
from ctxkit.model import Transcript, Unit
from ctxkit.strategies.summarize_old import SUMMARY_ID
from ctxkit.tokens import count_transcript

DEFAULT_THRESHOLDS = Thresholds()
SUMMARY_OUTPUT_TOKENS = 3_000  # an LLM summary's output, as the agents' summaries measure
HEAD_SHARE = 0.5  # the cached head a compaction pins: at most this share of the goal's room
# told of each compaction: (call, index of the next unit, context before, context after)
Observer = Callable[[int, int, Sequence[Unit], Sequence[Unit]], None]


@dataclass
class Compaction:
    """One run of the chain during a replay."""

    call: int  # index of the model call it ran before (0-based)
    unit_index: int  # index in the original transcript of the last unit appended
    unit_id: str
    status: str  # what the guard said
    tokens_before: int
    tokens_after: int
    strategies: list[str]
    recovery: str | None
    fits: bool
    invariants_ok: bool
    time_ms: float
    error: str | None = None
    goal: int | None = None  # where the policy aimed (tokens as each call is counted)
    trigger: int | None = None  # the policy's trigger when it fired
    # the first call after it: the prefix it still read from the cache, and what it wrote
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Every field, in order, the time rounded to hundredths of a millisecond."""
        return {**asdict(self), "time_ms": round(self.time_ms, 2)}


@dataclass
class NeedleCheck:
    """Whether one needle was in front of the model when the request needing it was answered."""

    id: str
    needed_by_unit_id: str
    call: int | None  # the model call that answered it; None when the request never came
    present: bool
    recallable: bool

    def to_dict(self) -> dict[str, Any]:
        """The check as the report records it: every field, in order."""
        return asdict(self)


@dataclass
class ReplayResult:
    """Everything a replay measured.

    `transcript` is the context at the end of the session: what the model saw at its last call
    plus anything appended after it (its own last answer), which is also what the next call
    would start from.
    """

    transcript_id: str
    transcript: Transcript
    limit: int
    target: int
    thresholds: Thresholds
    units: int
    model_calls: int
    call_tokens: list[int]
    baseline_call_tokens: list[int]  # the same calls without any compaction
    compaction_log: list[Compaction]
    needles: list[NeedleCheck]
    original_tokens: int
    final_tokens: int
    p1_total: int
    p1_kept: int
    time_ms: float
    # Per call, the tokens of the prefix it shares with the call before (what a provider's
    # prompt cache can serve): a compaction that rewrites the context leaves only what comes
    # before its first change (the system prompt, the tool schemas).
    call_cached: list[int] = field(default_factory=list)
    baseline_cached: list[int] = field(default_factory=list)

    @property
    def compactions(self) -> int:
        """How many times the chain ran (failed runs included)."""
        return len(self.compaction_log)

    @property
    def tokens_sent(self) -> int:
        """Sum of the context size over every model call: what the session costs."""
        return sum(self.call_tokens)

    @property
    def tokens_sent_baseline(self) -> int:
        """What the same calls would have sent with no compaction (may exceed the limit)."""
        return sum(self.baseline_call_tokens)

    @property
    def peak_tokens(self) -> int:
        """The largest context sent to the model."""
        return max(self.call_tokens, default=0)

    @property
    def over_limit_calls(self) -> int:
        """Model calls whose context was above the limit (the model would have rejected them)."""
        return sum(1 for n in self.call_tokens if n > self.limit)

    @property
    def used_recovery(self) -> bool:
        """True when any compaction fell back to its recovery mode."""
        return any(c.recovery for c in self.compaction_log)

    @property
    def invariants_ok(self) -> bool:
        """True when no compaction reported a violated invariant."""
        return all(c.invariants_ok for c in self.compaction_log)

    @property
    def errors(self) -> list[str]:
        """Messages of compactions that failed (the context went on uncompacted)."""
        return [c.error for c in self.compaction_log if c.error]

    @property
    def fits(self) -> bool:
        """Every call was under the limit and every compaction succeeded."""
        return self.over_limit_calls == 0 and not self.errors

    @property
    def compaction_time_ms(self) -> float:
        """Time spent in the chain, over all compactions."""
        return sum(c.time_ms for c in self.compaction_log)

    @property
    def retention(self) -> dict[str, Any]:
        """Needle totals: present, recallable (not present but in the archive), lost, ratios."""
        total = len(self.needles)
        present = sum(1 for n in self.needles if n.present)
        recallable = sum(1 for n in self.needles if n.recallable)
        return retention_totals(total, present, recallable)

    def summary_line(self) -> str:
        """One line for people."""
        line = (
            f"{self.transcript_id}: {self.model_calls} calls, {self.compactions} compactions, "
            f"{self.tokens_sent:,} tokens sent ({self.tokens_sent_baseline:,} without "
            f"compaction), peak {self.peak_tokens:,} / {self.limit:,}, final {self.final_tokens:,}"
        )
        if self.needles:
            r = self.retention
            line += f", needles {r['present']}/{r['total']} present, {r['recallable']} recallable"
        if self.errors:
            line += f", {len(self.errors)} failed compactions"
        return line

    def to_dict(self, *, include_transcript: bool = False) -> dict[str, Any]:
        """The JSON report; `include_transcript` adds the final context's units."""
        d: dict[str, Any] = {
            "transcript": self.transcript_id,
            "limit": self.limit,
            "target": self.target,
            "thresholds": {
                "warn": self.thresholds.warn,
                "compact": self.thresholds.compact,
                "block": self.thresholds.block,
            },
            "units": self.units,
            "model_calls": self.model_calls,
            "compactions": self.compactions,
            "tokens_sent": self.tokens_sent,
            "tokens_sent_baseline": self.tokens_sent_baseline,
            "peak_tokens": self.peak_tokens,
            "over_limit_calls": self.over_limit_calls,
            "original_tokens": self.original_tokens,
            "last_call_tokens": self.call_tokens[-1] if self.call_tokens else 0,
            "final_tokens": self.final_tokens,
            "final_units": len(self.transcript.units),
            "fits": self.fits,
            "used_recovery": self.used_recovery,
            "invariants_ok": self.invariants_ok,
            "p1": {"total": self.p1_total, "kept": self.p1_kept},
            "compaction_time_ms": round(self.compaction_time_ms, 2),
            "time_ms": round(self.time_ms, 2),
            "compaction_log": [c.to_dict() for c in self.compaction_log],
            "needles": [n.to_dict() for n in self.needles],
            "retention": self.retention if self.needles else None,
        }
        if include_transcript:
            d["final_transcript"] = [u.to_dict() for u in self.transcript.units]
        return d


def call_points(units: Sequence[Unit]) -> list[int]:
    """Indices where the model is called: before each first assistant unit of a run, and at the
    end (len(units)) when the transcript ends on something other than an assistant unit."""
    points = [
        i
        for i, u in enumerate(units)
        if u.role == "assistant" and (i == 0 or units[i - 1].role != "assistant")
    ]
    if units and units[-1].role != "assistant":
        points.append(len(units))
    return points


def replay(
    t: Transcript,
    settings: CompactSettings | None = None,
    *,
    limit: int | None = None,
    archive: Archive | None = None,
    truth: Mapping[str, Any] | None = None,
    observe: Observer | None = None,
    fit: Any = None,
    policy: LoopPolicy | None = None,
) -> ReplayResult:
    """Replay `t` through an agent loop under the limit; compact when the loop's policy says so.

    `settings` says how to compact (the same record `compact` takes: its goal, thresholds,
    chain); `limit` alone is shorthand for `CompactSettings(limit=limit)`, or overrides the
    settings' limit. `truth` is the ground truth (default: `t.metadata["ground_truth"]` when
    present). Without an archive an in-memory SQLite archive holds what compaction removes, so
    recall still counts. `observe(call, unit_index, before, after)` is told of every successful
    compaction: the context before and after it, before the call it ran for (the unit at
    `unit_index` is the next one the loop appends). `fit` (`counting.Fit`) is how each
    call is counted (default: the fit of the log's recorded usage, when settings use it).

    When to compact and how deep is `policy` (`budget.policy.LoopPolicy`; default: the one
    policy for `settings.limit`, priced on the model of `settings.budget`); settings with a
    `target` of their own keep the guard's thresholds and that target instead.
    """
    settings = CompactSettings.given(settings, limit, "replay")
    started = time.perf_counter()
    expand_chain(settings.options.chain)  # bad names fail here, not inside the loop
    if settings.options.recovery_mode not in RECOVERY_MODES:
        raise unknown_name("recovery mode", settings.options.recovery_mode, RECOVERY_MODES)
    if truth is None:
        truth = t.metadata.get("ground_truth")
    if truth:
        t = truth_priorities(t, truth)
    own_archive = archive is None
    store = Archive(":memory:") if archive is None else archive
    try:
        return _run(t, settings, store, truth, started, observe, fit, policy)
    finally:
        if own_archive:
            store.close()


def replay_path(
    path: str,
    settings: CompactSettings,
    opts: Any = None,
    *,
    archive_path: str | None = None,
    label: str | None = None,
    sidecar_of: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[ReplayResult]:
    """Replay every transcript of a file (`compact --replay`), with the ground truth of the
    sidecar beside `sidecar_of` (default `path`) when there is one. The archive is scratch
    (in memory) unless `archive_path` is given: a replay writes no transcript to recall into.
    """
    from ctxkit.fidelity.truth import attach_truth, read_truth_records, sidecar_for
    from ctxkit.formats import read_path

    transcripts = list(read_path(path, opts, label=label))
    if not transcripts:
        raise UsageError(f"{label or path}: no transcript to replay")
    sidecar = sidecar_for(sidecar_of or path)
    if sidecar is not None:
        attach_truth(transcripts, read_truth_records(sidecar), warn=warn)
    with Archive(archive_path or ":memory:") as archive:
        return [replay(t, settings, archive=archive) for t in transcripts]


def _run(
    t: Transcript,
    settings: CompactSettings,
    archive: Archive,
    truth: Mapping[str, Any] | None,
    started: float,
    observe: Observer | None = None,
    fit: Any = None,
    policy: LoopPolicy | None = None,
) -> ReplayResult:
    tok, copts = settings.tok, settings.count_opts
    units = list(t.units)
    # counted as `compact` and `guard` count it: with recorded usage, what every call carries
    # and the log never shows, and every counted token at the provider's ratio (`budget.fit`)
    from ctxkit.counting import Fit

    if fit is None:
        fit = Fit.recorded(t, tok, copts) if settings.use_usage else Fit(tok, copts)
    per_unit = [fit.unit(u) for u in units]
    fixed = fit.fixed(t)
    if policy is None and settings.target is None:
        policy = settings_policy(settings, round(fixed))
    if settings.target is None:
        # an agent loop keeps appending: each compaction leaves room to work before the next
        loop_goal = compaction_goal(settings.limit, thresholds=settings.thresholds, in_loop=True)
        settings = settings.replace(target=loop_goal)
    limit, goal, thresholds = settings.limit, settings.goal, settings.thresholds
    if policy is not None:
        limit = policy.limit

    needles = list((truth or {}).get("needles", []))
    wanted: dict[str, list[dict[str, Any]]] = {}
    for n in needles:
        wanted.setdefault(str(n["needed_by_unit_id"]), []).append(n)
    loop = _Loop(t, settings, archive, fit, fixed, limit, policy, observe, context_tokens=fixed, baseline=fixed)
    points = set(call_points(units))
    for i, u in enumerate(units):
        if i in points:
            loop.call(i)
        loop.append(u, per_unit[i])
        loop.due.extend(wanted.pop(u.id, ()))
    if len(units) in points:
        loop.call(len(units))
    context, due, baseline = loop.context, loop.due, loop.baseline
    checks, call_tokens = loop.checks, loop.call_tokens

    final = t.replace(units=list(context))
    final_tokens = fit.total(final) if fit.extra or fit.ratio != 1.0 else count_transcript(final, tok, copts).total
    if units and settings.use_usage and (fit.extra or fit.ratio != 1.0):
        from ctxkit.counting import measure

        baseline = measure(t, tok, copts).total  # the figure `count` gives of the log itself
    checks += _unmet_checks(final, due, wanted, needles, archive)
    order = {str(n["id"]): k for k, n in enumerate(needles)}
    checks.sort(key=lambda c: order.get(c.id, len(order)))

    by_id = {u.id: u for u in context}
    p1 = [u for u in units if u.is_p1]
    p1_kept = sum(1 for u in p1 if u.id in by_id and by_id[u.id].content == u.content)
    return ReplayResult(
        transcript_id=t.id,
        transcript=final,
        limit=limit,
        target=goal,
        thresholds=thresholds,
        units=len(units),
        model_calls=len(call_tokens),
        call_tokens=call_tokens,
        baseline_call_tokens=loop.baseline_tokens,
        compaction_log=loop.log,
        needles=checks,
        original_tokens=round(baseline) if units else 0,
        final_tokens=final_tokens,
        p1_total=len(p1),
        p1_kept=p1_kept,
        time_ms=(time.perf_counter() - started) * 1000,
        call_cached=loop.call_cached,
        baseline_cached=loop.baseline_cached,
    )


@dataclass
class _Loop:
    """An agent loop replayed call by call: the context each model call sends (compacted first
    when the policy or the thresholds say so), what it shares with the call before (read from
    the cache), the same calls without compaction, and the needles each call is checked for."""

    t: Transcript
    settings: CompactSettings
    archive: Archive
    fit: Any  # how each unit is counted (`counting.Fit`)
    fixed: float  # what every call carries and no compaction removes
    limit: int
    policy: LoopPolicy | None
    observe: Observer | None
    context: list[Unit] = field(default_factory=list)
    context_counts: list[int] = field(default_factory=list)  # each context unit's tokens, as they stand
    context_tokens: Any = 0  # the running total (`fit`'s figures); re-counted whole after each compaction
    baseline: float = 0  # the running total without compaction
    previous_call: list[Unit] = field(default_factory=list)  # the context the last call sent
    call_tokens: list[int] = field(default_factory=list)
    baseline_tokens: list[int] = field(default_factory=list)
    call_cached: list[int] = field(default_factory=list)
    baseline_cached: list[int] = field(default_factory=list)
    log: list[Compaction] = field(default_factory=list)
    due: list[dict[str, Any]] = field(default_factory=list)  # needles whose request arrived, checked at the next call
    checks: list[NeedleCheck] = field(default_factory=list)
    last_compaction: int | None = None

    def append(self, u: Unit, tokens: int) -> None:
        """The log's next unit joins the context (and the baseline)."""
        self.context.append(u)
        self.context_counts.append(tokens)
        self.context_tokens += tokens
        self.baseline += tokens

    def call(self, index: int) -> None:
        """A model call before the unit at `index`: compacted first when due, then counted."""
        call = len(self.call_tokens)
        entry = self._compacted(index, call)
        self._count(call, entry)
        if self.due:
            self._check_needles(call)

    def _compacted(self, index: int, call: int) -> Compaction | None:
        """The compaction this call runs first, when the policy (else the thresholds) says so."""
        settings, units = self.settings, self.t.units
        decision = None
        if self.policy is not None:
            # the session's growth per call so far, as the log shows it (compactions aside)
            growth = (self.policy.growth(self.baseline - self.baseline_tokens[0], call) if call
                      else self.policy.growth(0, 0))
            since = None if self.last_compaction is None else call - self.last_compaction
            decision = self.policy.decide(round(self.context_tokens), since, growth)
            status, fire = decision.reason, decision.compact
        else:
            status = status_for(self.context_tokens, self.limit, settings.thresholds)
            fire = status_rank(status) >= status_rank("compact")
        if not fire:
            return None
        last = max(0, index - 1)
        current = self.t.replace(units=list(self.context))
        at = (last, units[last].id)
        result, entry = self._chain(current, decision, call, at, status)
        if decision is not None:
            entry.goal, entry.trigger = decision.goal, decision.trigger
        self.log.append(entry)
        if result is not None:
            self.last_compaction = call
            if self.observe is not None:
                self.observe(call, index, current.units, result.transcript.units)
            self.context = list(result.transcript.units)
            self.context_counts = [self.fit.unit(u) for u in self.context]
            self.context_tokens = round(self.fixed + sum(self.context_counts))
        return entry

    def _chain(
        self, current: Transcript, decision: Any, call: int, at: tuple[int, str], status: str
    ) -> tuple[CompactResult | None, Compaction]:
        """Run the chain to the policy's goal, with the head the prompt cache holds pinned where
        the chain gets there as well with it (`_cached_head`). A goal the chain reaches only by
        shortening or dropping what stays after its summary, or by a recovery, is deeper than
        what the task keeps: the chain runs again to a goal halfway up to the trigger, and the
        shallower of the two compactions is taken."""
        settings = self.settings
        rest = (self.archive, call, at, status, self.context_tokens)
        if decision is None:
            return _compact_at(current, settings, *rest)
        goals = [decision.goal]
        if decision.trigger > decision.goal:
            goals.append((decision.goal + min(decision.trigger, self.limit)) // 2)
        tried: list[tuple[CompactResult | None, Compaction]] = []
        for goal in goals:
            chain = _chain_settings(settings, current, self.context_tokens, goal, self.limit, self.fit)
            head = self._cached_head(goal)
            if head:
                # the cached head pinned (`CompactSettings.pinned`: no strategy touches it, the
                # new summary goes after it), where the chain gets there with a summary at most
                pinned = _compact_at(current, chain.replace(pinned=head), *rest)
                if _shallow(pinned[0]):
                    return pinned
            tried.append(_compact_at(current, chain, *rest))
            if _shallow(tried[-1][0]):
                return tried[-1]
        # the shallowest, the deeper goal's first among equals
        return min(tried, key=lambda t: _depth(t[0]) if t[0] is not None else 100)

    def _cached_head(self, goal: int) -> int:
        """How many leading units the next compaction may leave byte for byte: the first
        requests and the summaries this loop's compactions left after them, which every call
        since has read from the prompt cache, while they take at most `HEAD_SHARE` of the room
        the goal leaves above the fixed part (past that, one summary of everything is shorter);
        0 when the context does not begin so."""
        head = 0
        for k, u in enumerate(self.context):
            if u.type == "summary" and u.id.startswith(SUMMARY_ID):
                head = k + 1
            elif u.role not in ("system", "user"):
                break
        size = sum(self.context_counts[:head])
        return head if head and size <= HEAD_SHARE * max(0, goal - self.fixed) else 0

    def _count(self, call: int, entry: Compaction | None) -> None:
        """The call's tokens, with and without compaction, and what it shares with the call
        before (a cache read; the rest is a cache write)."""
        shared = 0.0
        if call:
            shared = self.fixed
            for before, now, size in zip(self.previous_call, self.context, self.context_counts, strict=False):
                if before is not now and (before.id, before.content) != (now.id, now.content):
                    break
                shared += size
        self.call_cached.append(round(min(shared, self.context_tokens)))
        if entry is not None:
            entry.cache_read_tokens = self.call_cached[-1]
            entry.cache_write_tokens = round(self.context_tokens) - self.call_cached[-1]
        self.baseline_cached.append(self.baseline_tokens[-1] if self.baseline_tokens else 0)
        self.previous_call = list(self.context)
        self.call_tokens.append(round(self.context_tokens))
        self.baseline_tokens.append(round(self.baseline))

    def _check_needles(self, call: int) -> None:
        """Whether the needles due are in this call's context, or recallable from the archive."""
        from ctxkit.fidelity.truth import needle_retention

        seen = self.t.replace(units=list(self.context))
        found = needle_retention(seen, {"needles": self.due}, self.archive)
        for n, row in zip(self.due, found["needles"], strict=True):
            self.checks.append(
                NeedleCheck(
                    id=str(n["id"]),
                    needed_by_unit_id=str(n["needed_by_unit_id"]),
                    call=call,
                    present=bool(row["present"]),
                    recallable=bool(row["recallable"]),
                )
            )
        self.due.clear()


def _shallow(result: CompactResult | None) -> bool:
    """A compaction that reached its goal with a summary at most: nothing that stays after
    the summary was shortened or dropped, and no recovery."""
    return result is not None and result.changed and result.fits and _depth(result) <= 1


def _depth(result: CompactResult) -> int:
    """How deep a compaction went (`strategies.DEPTHS`): 0 offloading alone, 1 with a
    summary, 2 with a strategy that shortens or drops what stays after it, more with a
    recovery."""
    from ctxkit.strategies import DEPTHS

    steps = [DEPTHS[s] for s in result.strategies_applied if s in DEPTHS]
    return max(steps, default=0) + (10 if result.recovery else 0)


def settings_policy(settings: CompactSettings, fixed: int) -> LoopPolicy:
    """The loop's policy under `settings`: its limit, `fixed` tokens no compaction removes,
    priced on the model its budget names (Anthropic's price ratios when none is priced), and a
    summarizing call counted when the settings name a summarizer (`ctxkit replay` prices every
    row's summaries as an LLM's call, ctxkit's extractive ones too, so the policy does)."""
    from ctxkit.budget.models import find_model

    model = find_model(settings.budget.name)[0] if settings.budget is not None else None
    summary = SUMMARY_OUTPUT_TOKENS if settings.summarizer is not None else 0
    return loop_policy(settings.limit, fixed, model, summary_tokens=summary)


def _chain_settings(
    settings: CompactSettings, current: Transcript, tokens: float, goal: int, limit: int, fit: Any
) -> CompactSettings:
    """The chain's settings for one compaction to `goal` under `limit` (tokens as each call is
    counted: `fit`), in the tokens the chain counts: without recorded usage the chain counts
    the units alone, so what is above the goal is removed at the fit's ratio."""
    if settings.use_usage or (not fit.extra and fit.ratio == 1.0 and not fit.unseen):
        return settings.replace(target=min(goal, limit), limit=limit)
    counted = count_transcript(current, settings.tok, settings.count_opts).total
    ratio = fit.ratio if fit.ratio > 0 else 1.0
    target = max(1, round(counted - (tokens - goal) / ratio))
    ceiling = max(target + 1, round(counted - (tokens - limit) / ratio))
    return settings.replace(target=target, limit=ceiling)


def _compact_at(
    current: Transcript,
    settings: CompactSettings,
    archive: Archive,
    call: int,
    after: tuple[int, str],
    status: str,
    tokens: int,
) -> tuple[CompactResult | None, Compaction]:
    """Compact the context before model call `call` (after unit `after`, its index and id); the
    result (None when the chain failed) and the log entry."""
    t0 = time.perf_counter()
    try:
        result = compact(current, settings, archive=archive)
    except CtxkitError as exc:
        entry = Compaction(
            call=call,
            unit_index=after[0],
            unit_id=after[1],
            status=status,
            tokens_before=tokens,
            tokens_after=tokens,
            strategies=[],
            recovery=None,
            fits=False,
            invariants_ok=True,
            time_ms=(time.perf_counter() - t0) * 1000,
            error=str(exc),
        )
        return None, entry
    entry = Compaction(
        call=call,
        unit_index=after[0],
        unit_id=after[1],
        status=status,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        strategies=result.strategies_applied,
        recovery=result.recovery,
        fits=result.fits,
        invariants_ok=bool(result.invariants["ok"]),
        time_ms=result.time_ms,
    )
    return result, entry


def _unmet_checks(
    final: Transcript,
    due: list[dict[str, Any]],
    wanted: Mapping[str, list[dict[str, Any]]],
    needles: list[dict[str, Any]],
    archive: Archive,
) -> list[NeedleCheck]:
    """Needles no call checked: a request that never got a call (the transcript ends on an
    assistant unit) is checked against the final context, which is still what the model had in
    front of it; a request that does not occur in the transcript finds nothing."""
    from ctxkit.fidelity.truth import needle_retention

    checks: list[NeedleCheck] = []
    if due:
        found = needle_retention(final, {"needles": due}, archive)
        for n, row in zip(due, found["needles"], strict=True):
            checks.append(
                NeedleCheck(
                    str(n["id"]),
                    str(n["needed_by_unit_id"]),
                    None,
                    row["present"],
                    row["recallable"],
                )
            )
    for pending in wanted.values():
        for n in pending:
            checks.append(
                NeedleCheck(str(n["id"]), str(n["needed_by_unit_id"]), None, False, False)
            )
    return checks


def replay_cost(r: ReplayResult, model: Any) -> dict[str, Any]:
    """What the replayed calls cost on `model`'s prices, with prompt caching, against the same
    calls without compaction; and per compaction, what rewriting the cached prefix cost (its
    tokens written instead of read) and how many later calls it took to pay that back (None:
    not within the session).

    Each call reads from the cache the prefix it shares with the call before and writes the rest
    (billed as a cache write where the provider bills one, else as input); output is left out
    (the same with or without compaction).
    """
    from ctxkit.budget.models import prefix_call_cost

    def billed(tokens: int, cached: int) -> float:
        return prefix_call_cost(model, tokens, cached)

    costs = [billed(n, c) for n, c in zip(r.call_tokens, r.call_cached, strict=True)]
    base = [billed(n, c) for n, c in zip(r.baseline_call_tokens, r.baseline_cached, strict=True)]
    compactions = []
    calls = [c.call for c in r.compaction_log if c.error is None]
    for k, call in enumerate(calls):
        if call >= len(costs):
            continue
        # the premium of that call over reading its whole context from the cache
        invalidation = costs[call] - billed(r.call_tokens[call], r.call_tokens[call])
        end = calls[k + 1] if k + 1 < len(calls) else len(costs)
        saved = 0.0
        break_even = None
        for j in range(call, end):
            saved += base[j] - costs[j]
            if break_even is None and saved >= 0:
                break_even = j - call
        compactions.append(
            {
                "call": call,
                "invalidation_usd": round(invalidation, 6),
                "saved_usd": round(saved, 6),
                "break_even_calls": break_even,
            }
        )
    return {
        "model": model.name,
        "usd": round(sum(costs), 6),
        "usd_without_compaction": round(sum(base), 6),
        "compactions": compactions,
    }


__all__ = [
    "replay_cost",
    "Compaction",
    "NeedleCheck",
    "ReplayResult",
    "call_points",
    "replay",
]
