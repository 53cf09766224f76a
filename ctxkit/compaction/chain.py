"""The compaction chain: run strategies in order until the transcript fits, then recover."""

from __future__ import annotations

import dataclasses
import gc
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ctxkit import structure
from ctxkit.archive.recall_tool import add_tools
from ctxkit.archive.store import Archive, ref_scope
from ctxkit.budget import fixed_regions, status_for
from ctxkit.compaction.arrange import arrange, give_back
from ctxkit.compaction.options import CompactSettings, expand_chain
from ctxkit.compaction.recovery import RECOVERY, RECOVERY_MODES
from ctxkit.compaction.result import CompactResult, Event, Observer, Step
from ctxkit.counting import Measure, context_tokens, measure, transcript_label, unit_key
from ctxkit.errors import BreakerFailed, UsageError, unknown_name
from ctxkit.memo import UnitMemo, reserve
from ctxkit.model import Transcript, Unit
from ctxkit.strategies import LABELS, STRATEGIES
from ctxkit.strategies.base import Context, State, protected
from ctxkit.tokens import CountOptions, Tokenizer, TranscriptCount, count_transcript


def check_invariants(
    original: Sequence[Unit],
    state: State,
    keep: set[str],
    archive: Archive | None,
    scope: str,
    stored: set[str] | None = None,
) -> list[str]:
    """Everything that must hold after a step; an empty list means it holds.

    `stored`: ids of original units already found in the archive by an earlier check of this
    run (a stored unit stays stored), which are not looked up again; those found are added.
    """
    problems = [f"{p.kind}: {p.message}" for p in structure.pairs_intact(original, state.units)]
    by_id = {u.id: u for u in state.units}
    if not state.in_recovery:
        for u in original:
            if u.id in keep:
                got = by_id.get(u.id)
                if got is None or got.content != u.content or got.tool_calls != u.tool_calls:
                    problems.append(f"protected unit {u.id} not kept verbatim")
    if archive is not None:
        for u in original:
            got = by_id.get(u.id)
            if got is u or (
                got is not None and got.content == u.content and got.tool_calls == u.tool_calls
            ):
                continue
            if stored is not None and u.id in stored:
                continue
            if not archive.ref_for(scope, u)[1]:
                problems.append(f"unit {u.id} was removed or shortened but is not in the archive")
            elif stored is not None:
                stored.add(u.id)
    return problems


def unit_texts(units: Sequence[Unit]) -> list[str]:
    """The text of each unit that an embedder sees: content plus tool-call names and arguments."""
    out = []
    for u in units:
        if not u.tool_calls:
            if u.content:
                out.append(u.content)
            continue
        text = _call_text(u)
        if text:
            out.append(text)
    return out


def _read_call_text(u: Unit) -> str:
    parts = [u.content, *(f"{c.name} {c.arguments}" for c in u.tool_calls)]
    return "\n".join(p for p in parts if p)


# a calling unit's text, made once per unit (`ctxkit.memo`): every coherence of a run reads it,
# and a text made again is hashed again
_call_text = UnitMemo(_read_call_text)


def coherence(original: Sequence[Unit], result: Sequence[Unit], embedder: Any = None) -> float:
    """The spec's coherence: similarity in [0, 1] of the result's text to the original's.

    `embedder` None is the default one (`embedders.DEFAULT_EMBEDDER`). The report, the chain's
    undo rule and `score-rl` all use this one figure.
    """
    from ctxkit.embedders import DEFAULT_EMBEDDER, get_embedder
    from ctxkit.embedders.relevance import similarity

    if [u.content for u in original] == [u.content for u in result]:
        return 1.0
    emb = embedder if embedder is not None else get_embedder(DEFAULT_EMBEDDER)
    return float(similarity(unit_texts(original), unit_texts(result), emb))


def _default_embedder() -> Any:
    from ctxkit.embedders import DEFAULT_EMBEDDER, get_embedder

    return get_embedder(DEFAULT_EMBEDDER)


def _p1_kept(original: Sequence[Unit], result: Sequence[Unit]) -> tuple[int, int]:
    by_id = {u.id: u for u in result}
    p1 = [u for u in original if u.is_p1]
    kept = sum(1 for u in p1 if u.id in by_id and by_id[u.id].content == u.content)
    return len(p1), kept


@dataclass
class _Run:
    """What stays fixed for one compaction run, and what it gathers (steps, violations)."""

    transcript: Transcript
    settings: CompactSettings
    archive: Archive | None
    observe: Observer | None
    started: float
    before: TranscriptCount
    # the figure before (`counting.measure`): its unlogged region is a fixed region the units are
    # fitted around, and its fit of recorded usage turns counted tokens into the provider's
    measured: Measure
    before_total: int  # the figure before, as `count` gives it (`counting.measure`)
    before_regions: dict[str, int]  # and its regions
    tools: list[dict[str, Any]]
    original: tuple[Unit, ...]
    ctx: Context
    goal: int
    goal_note: str = ""  # with `{verdict}` where what the guard says of the result goes
    block: int = 0  # the guard's block threshold, when the goal is set against it
    keep: set[str] = field(default_factory=set)
    stored: set[str] = field(default_factory=set)  # original units found in the archive
    steps: list[Step] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    coherence_embedder: Any = None

    @property
    def limit(self) -> int:
        return self.settings.limit

    @property
    def ceiling(self) -> int:
        return self.settings.ceiling

    def notify(self, phase: str, message: str, tokens: int, progress: int, priority: str = "info") -> None:
        if self.observe is not None:
            self.observe(Event(phase, progress, message, tokens, self.limit, priority))

    def provider(self, local: int) -> int:
        """What a context of `local` counted tokens comes to: the fixed part, the rest at the
        ratio (the figure `count` gives of a compacted file)."""
        return self.measured.provider_total(local)

    def figure(self, t: Transcript, counted: int) -> int:
        """The figure `count` gives of a compacted transcript: the fixed part, its context at
        the ratio, and what the log does not hold that its kept units still carry."""
        total = self.provider(self.context(t, counted))
        usage = self.measured.usage
        return total + (usage.kept_unseen(t.units) if usage is not None else 0)

    def context(self, t: Transcript, counted: int) -> int:
        """The context a transcript is, as `count` measures it where recorded usage applies
        (`counting.context_tokens`: reasoning of earlier turns left out), else its count."""
        if not self.measured.unlogged and self.measured.ratio == 1.0:
            return counted
        return context_tokens(t, self.settings.tok, self.settings.count_opts)

    def local(self, total: int) -> int:
        """The most counted tokens whose figure is at most `total`."""
        return self.measured.local_budget(total)

    def state(self, units: Sequence[Unit] | None = None) -> State:
        units = self.original if units is None else units
        return State(units=tuple(units), target=self.local(self.goal), ctx=self.ctx)


def compact(
    transcript: Transcript,
    settings: CompactSettings | None = None,
    *,
    limit: int | None = None,
    archive: Archive | None = None,
    query: str | None = None,
    observe: Observer | None = None,
) -> CompactResult:
    """Return the best transcript under the goal that keeps the task alive.

    `settings` says how (`CompactSettings`); `limit` alone is shorthand for
    `CompactSettings(limit=limit)`. The goal is `settings.goal` (`budget.compaction_goal`): one
    token under the guard's compact threshold unless a target is set, the same from the library
    as from `ctxkit compact --limit`.
    """
    settings = CompactSettings.given(settings, limit, "compact").for_transcript(transcript)
    if settings.options.recovery_mode not in RECOVERY_MODES:
        raise unknown_name("recovery mode", settings.options.recovery_mode, RECOVERY_MODES)
    with gc_paused():
        return _compact(transcript, settings, archive, query, observe)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cycle collector held off while it runs: a compaction makes many small objects
    and few cycles, and the collector, started every 700 of them, walked every unit of the
    transcript again each time (a third of a 200,000-message compaction, and more the longer
    it was). Reference counting still frees what is dropped; what cycles there are wait for
    the next collection after it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _compact(
    transcript: Transcript,
    settings: CompactSettings,
    archive: Archive | None,
    query: str | None,
    observe: Observer | None,
) -> CompactResult:
    reserve(len(transcript.units))  # room to read each unit once (`ctxkit.memo`)
    run = _begin(transcript, settings, archive, query, observe)
    state = run.state()
    if state.fits() or run.before_total <= run.goal:
        # the one figure (`count`'s, `guard`'s) decides: a log it puts within the goal is left
        # as it is, even when the units alone count more (content the agent already left out
        # of its calls, as aider's summarized history, is not in the figure)
        return _result(run, state, None, changed=False)
    if archive is not None:
        archive.put_transcript(transcript, key=run.ctx.transcript_id)
    run.keep = {run.original[i].id for i in protected(state)}
    state = _chain(run, state)
    recovery: str | None = None
    if state.fits():
        # The chain's steps are coarse: give back what the goal did not need, newest first.
        state = _give_back(run, state)
    if not state.fits():
        recovery = run.settings.options.recovery_mode
        state = _recover(run, state, recovery)
    return _result(run, state, recovery, changed=True)


def _begin(
    transcript: Transcript,
    settings: CompactSettings,
    archive: Archive | None,
    query: str | None,
    observe: Observer | None,
) -> _Run:
    """The run's fixed parts: the counts before, the unlogged region, the strategies' context,
    and the goal, checked against what no strategy may touch."""
    started = time.perf_counter()
    tok, copts = settings.tok, settings.count_opts
    before = count_transcript(transcript, tok, copts)
    # What the log never shows (recorded usage beyond ctxkit's count: Claude Code's system
    # prompt and tool schemas) is a fixed region like the system prompt: the units are fitted
    # around it, and every figure reported is the one `count` and `guard` give (`measure`).
    measured = measure(
        transcript, tok, copts, usage=settings.use_usage, archive=archive, counted=before
    )
    tools = add_tools(transcript.tools, settings.added_tools)
    original = tuple(transcript.units)  # a tuple: its structure is read once (`structure`)
    ctx = _strategies_context(transcript, settings, archive, query, before, measured, tools, original)
    run = _Run(
        transcript, settings, archive, observe, started, before, measured, measured.total,
        measured.regions, tools, original, ctx, settings.goal, coherence_embedder=ctx.embedder,
    )
    run.notify(
        "detection",
        f"Context at {run.before_total:,} / {settings.limit:,} tokens (target {settings.goal:,})",
        run.before_total,
        0,
    )
    _aim(run)
    return run


def _strategies_context(
    transcript: Transcript,
    settings: CompactSettings,
    archive: Archive | None,
    query: str | None,
    before: TranscriptCount,
    measured: Any,
    tools: list[dict[str, Any]],
    original: tuple[Unit, ...],
) -> Context:
    """What every strategy of the run reads: the task query, the archive's key, the embedder,
    the summarizer, and the counts just made."""
    fixed = measured.unlogged
    ratio = measured.ratio
    if query is None:
        from ctxkit.embedders.relevance import task_query

        query = task_query(transcript)
    # The id refs and the stored original go under: the transcript's own, unless the archive
    # already holds a different transcript of that name (choosing it takes the write lock).
    # Refs are made from the messages, not the id (the file name): same messages, same output.
    key = archive.key_for(transcript) if archive is not None else transcript.id
    # one instance for relevance and every coherence of this run: the lexical one keeps each
    # text's terms, and the final figure reads the texts the steps' judges read
    embedder = settings.embedder if settings.embedder is not None else _default_embedder()
    return Context(
        ref_scope=ref_scope(transcript),
        tokenizer=settings.tok,
        count_opts=settings.count_opts,
        archive=archive,
        transcript_id=key,
        query=query,
        tools=tuple(tools),
        embedder=embedder,
        summarizer=settings.summarizer,
        seed=settings.options.seed,
        originals={u.id: u for u in original},
        reminders=before.regions.get("reminders", 0),
        pinned=settings.pinned,
        # the counts just made: the first state's total reads them (`strategies.base.unit_counts`);
        # a unit that came with content the log does not hold (recorded usage) carries it, at
        # the ratio, for as long as it is kept unchanged
        counts=_with_unseen(
            _unsent_reasoning(
                {id(u): (u, c) for u, c in zip(original, before.units, strict=True)},
                original, measured.usage is not None and (fixed != 0 or ratio != 1.0),
            ),
            original, measured.usage, ratio,
        ),
    )


def _aim(run: _Run) -> None:
    """The goal, checked against what no strategy may touch (the irreducible floor, the last
    request at its shortest): a limit below it is an error; a goal below it is raised to the
    most the guard passes, or under the guard's block threshold."""
    transcript, tools, fixed = run.transcript, run.tools, run.measured.unlogged
    tok, copts, limit, goal, ceiling = (
        run.settings.tok, run.settings.count_opts, run.settings.limit, run.settings.goal, run.settings.ceiling
    )
    floor = run.provider(_irreducible_floor(transcript.replace(tools=tools), tok, copts)) - fixed
    least = max(floor, min(
        run.provider(_smallest_output(transcript.replace(tools=tools), tok, copts)),
        run.before_total,
    ) - fixed)
    regions = fixed_regions(floor, fixed, bool(run.ctx.reminders))
    if least > floor:
        regions += (
            f", and {least - floor:,} for the last request at its shortest and a line naming "
            "the archive of the rest"
        )
    if least + fixed > limit:
        fix = f"give --limit {least + fixed:,} or more (nothing smaller can hold it)"
        if fixed:
            fix += ", or --no-usage to fit the log's own content alone"
        raise UsageError(
            f"{_label(transcript)}: limit {limit:,} is below the least a compaction can leave, "
            f"{least + fixed:,} tokens ({regions}): {fix}"
        )
    if least + fixed > ceiling:
        # The limit holds the least a compaction leaves, but not under the guard's compact
        # threshold: the most under the guard's block threshold, so the guard asks for
        # compaction again rather than blocking; the limit itself when even that is too small.
        block = run.settings.thresholds.bounds(limit)["block"]
        run.goal = block - 1 if least + fixed < block else limit
        run.goal_note = (
            f"what no strategy may touch ({regions}) is at or above the guard's compact "
            f"threshold {ceiling + 1:,} of the limit {limit:,}: compacted within "
            f"{run.goal:,}{{verdict}}; raise the limit (to {_limit_for(least + fixed, run):,} or "
            "more) to stop that"
        )
        run.block = block
        run.notify("detection", run.goal_note.replace("{verdict}", ""), run.before_total, 0, "warning")
        return
    if least + fixed > goal:
        # The limit holds the least a compaction leaves but the goal below it does not: aim for
        # the most the guard passes at this limit.
        run.goal_note = (
            f"the target {goal:,} is below the least a compaction can leave ({least + fixed:,} tokens): "
            f"aimed for {ceiling:,}, the most the guard passes at the limit {limit:,}"
        )
        run.notify(
            "detection",
            f"target {goal:,} is below the least a compaction can leave ({least + fixed:,} tokens); "
            f"aiming for {ceiling:,}",
            run.before_total,
            0,
            "warning",
        )
        run.goal = ceiling


def _chain(run: _Run, state: State) -> State:
    """The strategies in chain order, up to `max_iterations` passes, each step judged (kept,
    undone or rejected) before the next; stops at the goal or when a pass changes nothing."""
    options = run.settings.options
    chain = expand_chain(options.chain)
    total_steps = max(1, len(chain) * max(1, options.max_iterations))
    done = 0
    for iteration in range(1, max(1, options.max_iterations) + 1):
        progressed = False
        queue = list(chain)
        retry: dict[str, dict[str, Any]] = {}  # a strategy run again at once, gentler
        while queue:
            name = queue.pop(0)
            done += 1
            if state.fits():
                break
            tokens_before = run.provider(state.tokens())
            progress = min(99, 100 * done // total_steps)
            run.notify(name, _phase_message(name, tokens_before, run.goal), tokens_before, progress)
            t0 = time.perf_counter()
            params = retry.pop(name, None) or options.strategy_params(name)
            new = STRATEGIES[name](state, params)
            elapsed = (time.perf_counter() - t0) * 1000
            note = _judge(new, state, name, params, run)
            if note is not None:
                run.steps.append(Step(name, iteration, tokens_before, tokens_before, elapsed, False, note))
                if note.startswith("rejected: "):
                    run.violations.append(f"{name}: {note[len('rejected: ') :]}")
                if note.startswith("undone: "):
                    run.notify(name, f"{name} {note}", tokens_before, progress, "warning")
                    # The spec: a discard that hurts coherence too much gives way to a summary.
                    if name == "discard_low_rel" and "summarize_old" not in queue:
                        queue.insert(0, "summarize_old")
                    # A summary of all the goal needed that hurts it too much gives way to a
                    # shorter one, the newest part left to the strategies after it.
                    gentler = _shorter_summary(name, params)
                    if gentler is not None:
                        retry[name] = gentler
                        queue.insert(0, name)
                continue
            assert new is not None
            run.steps.append(
                Step(name, iteration, tokens_before, run.provider(new.tokens()), elapsed, True,
                     refs=_new_refs(state, new))
            )
            state = new
            progressed = True
        if state.fits() or not progressed:
            break
    return state


def _recover(run: _Run, state: State, recovery: str) -> State:
    """The recovery mode's answer when the chain stopped short of the goal (`error` raises);
    the chain's own result when the recovery would only make it bigger."""
    fixed, goal, ceiling, limit = run.measured.unlogged, run.goal, run.ceiling, run.limit
    options = run.settings.options
    run.notify(
        "recovery",
        f"Chain left {run.provider(state.tokens()):,} / {goal:,} tokens; recovery: {recovery}",
        run.provider(state.tokens()),
        -1,
        "warning",
    )
    if recovery == "error":
        raise BreakerFailed(
            f"{_label(run.transcript)}: the chain reached {run.provider(state.tokens()):,} tokens, above the "
            f"target {goal:,}; set recovery_mode to fresh_start or truncate, or raise the limit"
        )
    t0 = time.perf_counter()
    tokens_before = run.provider(state.tokens())
    recover = RECOVERY[recovery]
    assert recover is not None  # `error` raised above
    if recovery == "fresh_start":
        run.notify(
            "handover",
            f"Writing a handover of about {options.handover_tokens:,} tokens",
            run.provider(state.tokens()),
            -1,
            "warning",
        )
    chained = state
    state = recover(state, run.original, options)
    if not state.fits() and chained.tokens() < state.tokens() and run.provider(state.tokens()) > ceiling:
        # Recovery made it bigger (a handover on a tiny transcript): the chain's result is
        # nearer, and may already pass the guard, if not the goal; keep it.
        state = chained
    problems = check_invariants(
        run.original, state, run.keep, run.archive, run.ctx.ref_scope, run.stored
    )
    run.violations.extend(f"recovery: {p}" for p in problems)
    run.steps.append(
        Step(
            f"recovery:{recovery}",
            0,
            tokens_before,
            run.provider(state.tokens()),
            (time.perf_counter() - t0) * 1000,
            True,
            refs=_new_refs(State(units=tuple(run.original), target=goal, ctx=run.ctx), state),
        )
    )
    if state.fits():
        state = _give_back(run, state)
    total = run.provider(state.tokens())
    if total > limit:
        kept = "the system prompt and the last request"
        raise BreakerFailed(
            f"{_label(run.transcript)}: even after {recovery} the transcript takes {total:,} tokens, above the "
            f"limit {limit:,}: {kept}"
            + (f", and {fixed_regions(0, fixed)}," if fixed else "")
            + " cannot be removed; raise the limit"
        )
    if total > ceiling and not run.goal_note:
        run.goal_note = (
            f"the system prompt, the last request and a handover take {total:,} tokens: under "
            f"the limit {limit:,} but at or above the guard's compact threshold {ceiling + 1:,}, "
            "so the guard will ask for compaction again; raise the limit to stop that"
        )
    elif not state.fits() and not run.goal_note:
        run.goal_note = (
            f"the target {goal:,} cannot hold the system prompt, the last request and a "
            f"handover ({total:,} tokens); within {ceiling:,}, the most the "
            f"guard passes at the limit {limit:,}"
        )
    return state


def _give_back(run: _Run, state: State) -> State:
    """`give_back`, a step of its own when it puts anything back (its `saved` is negative):
    `--explain`, the report and its page say where the tokens after the passes went."""
    t0 = time.perf_counter()
    given = give_back(state, run.original)
    if given is not state:
        originals = run.ctx.originals

        def whole(s: State) -> int:  # the units as they were read
            return sum(1 for u in s.units if originals.get(u.id) is u)

        run.steps.append(
            Step(
                GIVE_BACK,
                0,
                run.provider(state.tokens()),
                run.provider(given.tokens()),
                (time.perf_counter() - t0) * 1000,
                True,
                note=f"{whole(given) - whole(state):,} messages restored whole, newest first",
            )
        )
    return given


GIVE_BACK = "give_back"


def _result(run: _Run, state: State, recovery: str | None, *, changed: bool) -> CompactResult:
    """The one result record: the transcript as arranged (the input itself when nothing
    changed), its counts before and after, the steps and what the invariants found."""
    fixed, before, settings = run.measured.unlogged, run.before, run.settings
    if changed:
        result_t = run.transcript.replace(units=arrange(state.units), tools=run.tools)
        after = count_transcript(result_t, settings.tok, settings.count_opts, run.ctx.counts)
        total = run.figure(result_t, after.total)
        regions = _with_unlogged(after.regions, fixed, total - after.total - fixed)
        if settings.as_written is not None:
            total, regions = _written_figures(settings.as_written(result_t), regions, settings, run)
        # before time_ms is taken: the figure is part of the work a report's time accounts for
        final_coherence: float | None = coherence(run.original, state.units, run.coherence_embedder)
        run.notify("success", f"Context reduced to {total:,} / {run.limit:,} tokens", total, 100)
    else:
        result_t, after, final_coherence = run.transcript, before, None
        total, regions = run.before_total, dict(run.before_regions)
    p1_total, p1_kept = _p1_kept(run.original, state.units)
    return CompactResult(
        transcript=result_t,
        changed=changed,
        fits=total <= run.goal if changed else True,
        limit=run.limit,
        target=run.goal,
        tokens_before=run.before_total,
        tokens_after=total,
        regions_before=dict(run.before_regions),
        regions_after=regions,
        units_before=len(run.original),
        units_after=len(result_t.units),  # neighbouring run placeholders merged
        steps=run.steps,
        recovery=recovery,
        p1_total=p1_total,
        p1_kept=p1_kept,
        invariants={"ok": not run.violations, "violations": run.violations},
        time_ms=(time.perf_counter() - run.started) * 1000,
        coherence=final_coherence,
        note=_said(run, total),
        original=run.transcript,
        unit_tokens_before=[c.total for c in before.units],
        unit_tokens_after=[c.total for c in after.units],
        budget=settings.budget.to_dict() if settings.budget is not None else None,
    )


def _said(run: _Run, total: int) -> str:
    """The goal's note with what the guard says of the result at `total` tokens."""
    if "{verdict}" not in run.goal_note:
        return run.goal_note
    status = status_for(total, run.limit, run.settings.thresholds)
    verdict = {
        "block": f", at the guard's block threshold {run.block:,} or above (block, exit 4)",
        "compact": ", and the guard will ask for compaction again (compact, exit 3)",
    }.get(status, f", and the guard says {status}")
    return run.goal_note.replace("{verdict}", verdict)


def _written_figures(
    written: Transcript, regions: Mapping[str, int], settings: CompactSettings, run: _Run
) -> tuple[int, dict[str, int]]:
    """(tokens, regions) of a compacted transcript as its output file reads back (`written`),
    plus the unlogged region its original's recorded usage measured (in `regions`, the
    compacted transcript's own): the figure `count` gives of that file. A summary the format
    joins to the request after it stays the summary region here (up to its own count), though
    the file holds it in a history message."""
    counted = count_transcript(written, settings.tok, settings.count_opts)
    out = dict(counted.regions)
    joined = min(regions.get("summary", 0), out.get("history", 0))
    if joined > out.get("summary", 0):
        out["history"] -= joined - out.get("summary", 0)
        out["summary"] = joined
    total = run.figure(written, counted.total)
    fixed = run.measured.unlogged
    return total, _with_unlogged(out, fixed, total - counted.total - fixed)


def _judge(
    new: State | None, state: State, name: str, params: Mapping[str, Any], run: _Run
) -> str | None:
    """Why a step's result is not taken (None: take it)."""
    if new is None:
        return "cannot help"
    problems = check_invariants(
        run.original, new, run.keep, run.archive, run.ctx.ref_scope, run.stored
    )
    if problems:
        return "rejected: " + "; ".join(problems)
    if new.tokens() >= state.tokens():
        return "no saving"
    floor = params.get("min_coherence")
    if floor is not None:
        # The step's own damage: the state before it against the state after it.
        step_coherence = coherence(state.units, new.units, run.coherence_embedder)
        if step_coherence < float(floor):
            return f"undone: coherence {step_coherence:.2f} < {float(floor):.2f}"
    return None


def _shorter_summary(name: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """summarize_old's parameters for its second try when its summary was undone: at most
    `retry_threshold` of the history; None when that is no shorter than the first try."""
    if name != "summarize_old":
        return None
    share, again = params.get("old_threshold"), params.get("retry_threshold")
    if share is None or again is None or float(again) >= float(share):
        return None
    return {**params, "old_threshold": float(again)}


def _phase_message(name: str, tokens: int, goal: int) -> str:
    return f"{LABELS.get(name, name)}… ({tokens:,} -> target {goal:,} tokens)"


def _with_unlogged(regions: Mapping[str, int], fixed: int, excess: int = 0) -> dict[str, int]:
    """The regions with what recorded usage adds: the fixed part, and the rest of the
    provider's count (its tokenizer against ours) as `excess`."""
    out = dict(regions)
    if fixed:
        out["unlogged"] = fixed
    if excess:
        out["excess"] = excess
    return out


def _unsent_reasoning(
    counts: dict[int, tuple[Unit, Any]], units: Sequence[Unit], applies: bool
) -> dict[int, tuple[Unit, Any]]:
    """The count memo with the reasoning of turns before the last request left out, as the
    figure leaves it out where recorded usage applies (`counting.context_tokens`: the agents do
    not send earlier turns' reasoning back), so the chain aims at the figure it is judged by."""
    if not applies:
        return counts
    from ctxkit.archive.refs import carries_ref
    from ctxkit.structure import is_user_request

    last = next((i for i in range(len(units) - 1, -1, -1)
                 if units[i].role == "user" and is_user_request(units[i])), -1)
    start = next((i for i in range(last, 0, -1)
                  if units[i].type == "summary" and not carries_ref(units[i])), 0)
    for u in units[start:max(last, 0)]:
        held = counts.get(id(u))
        if held is not None and held[1].reasoning:
            counts[id(u)] = (held[0], dataclasses.replace(held[1], reasoning=0))
    return counts


def _with_unseen(
    counts: dict[int, tuple[Unit, Any]], units: Sequence[Unit], usage: Any, ratio: float
) -> dict[int, tuple[Unit, Any]]:
    """The count memo with each unit's unseen content (`RecordedUsage.unseen_units`) added to
    its framing, in counted tokens."""
    if usage is None or not usage.unseen_units:
        return counts
    by_key: dict[str, list[Unit]] = {}
    for u in units:
        by_key.setdefault(unit_key(u), []).append(u)
    for key, tokens in usage.unseen_units:
        same = by_key.get(key)
        if not same:
            continue
        u = same.pop(0)
        if id(u) not in counts:
            continue
        unit, c = counts[id(u)]
        extra = math.ceil(tokens / ratio) if ratio else tokens
        counts[id(u)] = (unit, dataclasses.replace(c, overhead=c.overhead + extra))
    return counts


def _label(t: Transcript) -> str:
    """The transcript in an error: its file (and line), else its id."""
    return transcript_label(t) if t.path else t.id


def _limit_for(tokens: int, run: _Run) -> int:
    """The smallest limit whose compact threshold is above `tokens`."""
    share = run.settings.thresholds.compact
    return math.floor(tokens / share) + 1 if share > 0 else tokens + 1


def _irreducible_floor(t: Transcript, tok: Tokenizer, copts: CountOptions) -> int:
    """Tokens no strategy may remove: system units, tool schemas and reply priming."""
    system_only = t.replace(units=[u for u in t.units if u.role == "system"])
    return count_transcript(system_only, tok, copts).total


def _smallest_output(t: Transcript, tok: Tokenizer, copts: CountOptions) -> int:
    """Tokens of the least a compaction can leave (`recovery.smallest_form`): the floor, a line
    naming the archive and the last request at its shortest."""
    from ctxkit.compaction.recovery import smallest_form

    return count_transcript(t.replace(units=smallest_form(t.units, tok)), tok, copts).total


def _new_refs(old: State, new: State) -> list[str]:
    """Refs carried by units of `new` that `old` did not have."""
    return sorted(new.refs - old.refs)
