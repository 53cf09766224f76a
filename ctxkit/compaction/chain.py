"""The compaction chain: run strategies in order until the transcript fits, then recover."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ctxkit import structure
from ctxkit.archive.recall_tool import add_tools
from ctxkit.archive.store import Archive, ref_scope
from ctxkit.compaction.arrange import arrange, give_back
from ctxkit.compaction.options import CompactSettings, expand_chain
from ctxkit.compaction.recovery import RECOVERY, RECOVERY_MODES
from ctxkit.compaction.result import CompactResult, Event, Observer, Step
from ctxkit.errors import BreakerFailed, UsageError, unknown_name
from ctxkit.model import Transcript, Unit
from ctxkit.strategies import LABELS, STRATEGIES
from ctxkit.strategies.base import Context, State, protected
from ctxkit.tokens import CountOptions, Tokenizer, count_transcript


def check_invariants(
    original: Sequence[Unit],
    state: State,
    keep: set[str],
    archive: Archive | None,
    scope: str,
) -> list[str]:
    """Everything that must hold after a step; an empty list means it holds."""
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
            if got is not None and got.content == u.content and got.tool_calls == u.tool_calls:
                continue
            if not archive.ref_for(scope, u)[1]:
                problems.append(f"unit {u.id} was removed or shortened but is not in the archive")
    return problems


def unit_texts(units: Sequence[Unit]) -> list[str]:
    """The text of each unit that an embedder sees: content plus tool-call names and arguments."""
    out = []
    for u in units:
        parts = [u.content, *(f"{c.name} {c.arguments}" for c in u.tool_calls)]
        text = "\n".join(p for p in parts if p)
        if text:
            out.append(text)
    return out


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
    `CompactSettings(limit=limit)`. The goal is `settings.goal`: the warn threshold of the limit
    unless a target is set, the same from the library as from `ctxkit compact --limit`.
    """
    settings = CompactSettings.given(settings, limit, "compact")
    started = time.perf_counter()
    limit = settings.limit
    options = settings.options
    tok = settings.tok
    copts = settings.count_opts
    embedder = settings.embedder
    summarizer = settings.summarizer
    goal = settings.goal
    if options.recovery_mode not in RECOVERY_MODES:
        raise unknown_name("recovery mode", options.recovery_mode, RECOVERY_MODES)
    chain = expand_chain(options.chain)
    total_steps = max(1, len(chain) * max(1, options.max_iterations))

    def notify(
        phase: str, message: str, tokens: int, progress: int, priority: str = "info"
    ) -> None:
        if observe is not None:
            observe(Event(phase, progress, message, tokens, limit, priority))

    before = count_transcript(transcript, tok, copts)
    budget = settings.budget.to_dict() if settings.budget is not None else None
    tools = add_tools(transcript.tools, settings.added_tools)
    original = list(transcript.units)
    if query is None:
        from ctxkit.embedders.relevance import task_query

        query = task_query(transcript)
    # The id refs and the stored original go under: the transcript's own, unless the archive
    # already holds a different transcript of that name (choosing it takes the write lock).
    # Refs are made from the messages, not the id (the file name): same messages, same output.
    key = archive.key_for(transcript) if archive is not None else transcript.id
    ctx = Context(
        ref_scope=ref_scope(transcript),
        tokenizer=tok,
        count_opts=copts,
        archive=archive,
        transcript_id=key,
        query=query,
        tools=tuple(tools),
        embedder=embedder,
        summarizer=summarizer,
        seed=options.seed,
    )
    state = State(units=tuple(original), target=goal, ctx=ctx)
    # one instance for every coherence of this run: the lexical one keeps each text's terms,
    # and the final figure reads the texts the steps' judges read
    coherence_embedder = embedder if embedder is not None else _default_embedder()
    notify(
        "detection",
        f"Context at {before.total:,} / {limit:,} tokens (target {goal:,})",
        before.total,
        0,
    )

    floor = _irreducible_floor(transcript.replace(tools=tools), tok, copts)
    if floor > limit:
        raise UsageError(
            f"{transcript.id}: limit {limit:,} is below what no strategy can remove: the "
            f"system prompt and tool schemas alone take {floor:,} tokens"
        )
    goal_note = ""
    if floor > goal:
        # The limit holds the system prompt but the goal below it does not: aim for the limit.
        goal_note = (
            f"the target {goal:,} is below the system prompt and tool schemas ({floor:,} tokens), "
            f"which no strategy may touch: aimed for the limit {limit:,}"
        )
        notify(
            "detection",
            f"target {goal:,} is below the system prompt and tool schemas ({floor:,} tokens); "
            f"aiming for the limit {limit:,}",
            before.total,
            0,
            "warning",
        )
        goal = limit
        state = State(units=tuple(original), target=goal, ctx=ctx)

    if state.fits():
        p1_total, p1_kept = _p1_kept(original, original)
        return CompactResult(
            transcript=transcript,
            changed=False,
            fits=True,
            limit=limit,
            target=goal,
            tokens_before=before.total,
            tokens_after=before.total,
            regions_before=dict(before.regions),
            regions_after=dict(before.regions),
            units_before=len(original),
            units_after=len(original),
            steps=[],
            recovery=None,
            p1_total=p1_total,
            p1_kept=p1_kept,
            invariants={"ok": True, "violations": []},
            time_ms=(time.perf_counter() - started) * 1000,
            note=goal_note,
            original=transcript,
            unit_tokens_before=[c.total for c in before.units],
            unit_tokens_after=[c.total for c in before.units],
            budget=budget,
        )

    if archive is not None:
        archive.put_transcript(transcript, key=key)
    keep = {original[i].id for i in protected(state)}
    steps: list[Step] = []
    violations: list[str] = []

    done = 0
    for iteration in range(1, max(1, options.max_iterations) + 1):
        progressed = False
        queue = list(chain)
        while queue:
            name = queue.pop(0)
            done += 1
            if state.fits():
                break
            tokens_before = state.tokens()
            notify(
                name,
                _phase_message(name, tokens_before, goal),
                tokens_before,
                min(99, 100 * done // total_steps),
            )
            t0 = time.perf_counter()
            params = options.strategy_params(name)
            new = STRATEGIES[name](state, params)
            elapsed = (time.perf_counter() - t0) * 1000

            note = _judge(
                new, state, name, params, original, keep, archive, ctx.ref_scope, coherence_embedder
            )
            if note is not None:
                steps.append(
                    Step(name, iteration, tokens_before, tokens_before, elapsed, False, note)
                )
                if note.startswith("rejected: "):
                    violations.append(f"{name}: {note[len('rejected: ') :]}")
                if note.startswith("undone: "):
                    notify(
                        name,
                        f"{name} {note}",
                        tokens_before,
                        min(99, 100 * done // total_steps),
                        "warning",
                    )
                    # The spec: a discard that hurts coherence too much gives way to a summary.
                    if name == "discard_low_rel" and "summarize_old" not in queue:
                        queue.insert(0, "summarize_old")
                continue
            assert new is not None
            tokens_after = new.tokens()
            steps.append(
                Step(
                    name,
                    iteration,
                    tokens_before,
                    tokens_after,
                    elapsed,
                    True,
                    refs=_new_refs(state, new),
                )
            )
            state = new
            progressed = True
        if state.fits() or not progressed:
            break

    recovery: str | None = None
    if state.fits():
        # The chain's steps are coarse: give back what the goal did not need, newest first.
        state = give_back(state, original)
    if not state.fits():
        recovery = options.recovery_mode
        notify(
            "recovery",
            f"Chain left {state.tokens():,} / {goal:,} tokens; recovery: {recovery}",
            state.tokens(),
            -1,
            "warning",
        )
        if recovery == "error":
            raise BreakerFailed(
                f"{transcript.id}: the chain reached {state.tokens():,} tokens, above the target "
                f"{goal:,}; set recovery_mode to fresh_start or truncate, or raise the limit"
            )
        t0 = time.perf_counter()
        tokens_before = state.tokens()
        recover = RECOVERY[recovery]
        assert recover is not None  # `error` raised above
        if recovery == "fresh_start":
            notify(
                "handover",
                f"Writing a handover of about {options.handover_tokens:,} tokens",
                state.tokens(),
                -1,
                "warning",
            )
        chained = state
        state = recover(state, original, options)
        if not state.fits() and chained.tokens() <= limit < state.tokens():
            # Recovery made it bigger (a handover on a tiny transcript): the chain's result
            # already fits the limit, if not the goal; keep it.
            state = chained
        problems = check_invariants(original, state, keep, archive, ctx.ref_scope)
        violations.extend(f"recovery: {p}" for p in problems)
        steps.append(
            Step(
                f"recovery:{recovery}",
                0,
                tokens_before,
                state.tokens(),
                (time.perf_counter() - t0) * 1000,
                True,
                refs=_new_refs(State(units=tuple(original), target=goal, ctx=ctx), state),
            )
        )
        if state.fits():
            state = give_back(state, original)
        if state.tokens() > limit:
            raise BreakerFailed(
                f"{transcript.id}: even after {recovery} the transcript takes "
                f"{state.tokens():,} tokens, above the limit {limit:,}"
            )
        if not state.fits() and not goal_note:
            goal_note = (
                f"the target {goal:,} cannot hold the system prompt, the last request and a "
                f"handover ({state.tokens():,} tokens); within the limit {limit:,}"
            )

    result_t = transcript.replace(units=arrange(state.units), tools=tools)
    after = count_transcript(result_t, tok, copts)
    p1_total, p1_kept = _p1_kept(original, state.units)
    # before time_ms is taken: the figure is part of the work a report's time accounts for
    final_coherence = coherence(original, state.units, coherence_embedder)
    notify("success", f"Context reduced to {after.total:,} / {limit:,} tokens", after.total, 100)
    return CompactResult(
        transcript=result_t,
        changed=True,
        fits=after.total <= goal,
        limit=limit,
        target=goal,
        tokens_before=before.total,
        tokens_after=after.total,
        regions_before=dict(before.regions),
        regions_after=dict(after.regions),
        units_before=len(original),
        units_after=len(result_t.units),  # neighbouring run placeholders merged
        steps=steps,
        recovery=recovery,
        p1_total=p1_total,
        p1_kept=p1_kept,
        invariants={"ok": not violations, "violations": violations},
        time_ms=(time.perf_counter() - started) * 1000,
        coherence=final_coherence,
        note=goal_note,
        original=transcript,
        unit_tokens_before=[c.total for c in before.units],
        unit_tokens_after=[c.total for c in after.units],
        budget=budget,
    )


def _judge(
    new: State | None,
    state: State,
    name: str,
    params: Mapping[str, Any],
    original: Sequence[Unit],
    keep: set[str],
    archive: Archive | None,
    scope: str,
    embedder: Any,
) -> str | None:
    """Why a step's result is not taken (None: take it)."""
    if new is None:
        return "cannot help"
    problems = check_invariants(original, new, keep, archive, scope)
    if problems:
        return "rejected: " + "; ".join(problems)
    if new.tokens() >= state.tokens():
        return "no saving"
    floor = params.get("min_coherence")
    if floor is not None:
        # The step's own damage: the state before it against the state after it.
        step_coherence = coherence(state.units, new.units, embedder)
        if step_coherence < float(floor):
            return f"undone: coherence {step_coherence:.2f} < {float(floor):.2f}"
    return None


def _phase_message(name: str, tokens: int, goal: int) -> str:
    return f"{LABELS.get(name, name)}… ({tokens:,} -> target {goal:,} tokens)"


def _irreducible_floor(t: Transcript, tok: Tokenizer, copts: CountOptions) -> int:
    """Tokens no strategy may remove: system units, tool schemas and reply priming."""
    system_only = t.replace(units=[u for u in t.units if u.role == "system"])
    return count_transcript(system_only, tok, copts).total


def _new_refs(old: State, new: State) -> list[str]:
    """Refs carried by units of `new` that `old` did not have."""

    def refs_of(units: Sequence[Unit]) -> set[str]:
        out: set[str] = set()
        for u in units:
            if "ref" in u.meta:
                out.add(str(u.meta["ref"]))
            out.update(str(r) for r in u.meta.get("refs", ()))
        return out

    old_refs = refs_of(old.units)
    return sorted(refs_of(new.units) - old_refs)
