"""The compaction chain: run strategies in order until the transcript fits, then recover.

`compact()` is the one engine call behind `ctxkit compact`, `score-rl` and `bench`. It never
returns a transcript that breaks an invariant: a step whose result does, is rejected, recorded
in the report, and the chain moves on (a rejected step is a bug; the tests assert there are
none).

Example:
    >>> result = compact(transcript, limit=5000)
    >>> result.tokens_after <= result.target
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit import structure
from ctxkit.archive import Archive, make_ref
from ctxkit.config import DEFAULT_CHAIN_ORDER as DEFAULT_CHAIN
from ctxkit.errors import BreakerFailed, CtxkitError, UsageError, unknown_name
from ctxkit.model import Transcript, Unit
from ctxkit.strategies import DEFAULT_PARAMS, STRATEGIES
from ctxkit.strategies.base import Context, State, archive_unit, protected, refs_hint
from ctxkit.tokens import CountOptions, Tokenizer, count_transcript, get_tokenizer

RECOVERY_MODES = ("fresh_start", "truncate", "error")

PHASES = (
    "detection",
    "offload",
    "mask_observations",
    "content_type_chunking",
    "summarize_old",
    "prioritize_recent",
    "discard_low_rel",
    "hybrid",
    "recovery",
    "handover",
    "success",
)


@dataclass(frozen=True)
class Event:
    """One phase of a run, as the spec's UI consumes it: `progress` is 0-100, -1 in recovery;
    `priority` is info (normal work), warning (recovery, an undone step) or critical (failure)."""

    phase: str
    progress: int
    message: str
    tokens: int
    limit: int
    priority: str = "info"

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "progress": self.progress,
            "message": self.message,
            "tokens": self.tokens,
            "limit": self.limit,
            "priority": self.priority,
        }


Observer = Callable[[Event], None]


@dataclass(frozen=True)
class ChainOptions:
    """How to compact: the chain, each strategy's parameters, recovery."""

    chain: tuple[str, ...] = DEFAULT_CHAIN
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _config_params())
    max_iterations: int = 3
    recovery_mode: str = "fresh_start"
    handover_tokens: int = 500
    seed: int = 0

    def strategy_params(self, name: str) -> dict[str, Any]:
        merged = dict(DEFAULT_PARAMS.get(name, {}))
        merged.update(self.params.get(name, {}))
        return merged


@dataclass
class Step:
    """What one strategy did in one pass of the chain."""

    strategy: str
    iteration: int
    tokens_before: int
    tokens_after: int
    time_ms: float
    applied: bool
    note: str = ""
    refs: list[str] = field(default_factory=list)

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "iteration": self.iteration,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.saved,
            "time_ms": round(self.time_ms, 2),
            "applied": self.applied,
            "note": self.note,
            "refs": self.refs,
        }


@dataclass
class CompactResult:
    """The compacted transcript and everything the report says about how it got there."""

    transcript: Transcript
    changed: bool
    fits: bool
    limit: int
    target: int
    tokens_before: int
    tokens_after: int
    regions_before: dict[str, int]
    regions_after: dict[str, int]
    units_before: int
    units_after: int
    steps: list[Step]
    recovery: str | None
    p1_total: int
    p1_kept: int
    invariants: dict[str, Any]
    time_ms: float
    coherence: float | None = None

    @property
    def strategies_applied(self) -> list[str]:
        seen: list[str] = []
        for s in self.steps:
            if s.applied and s.saved > 0 and s.strategy not in seen:
                seen.append(s.strategy)
        if self.recovery and f"recovery:{self.recovery}" not in seen:
            seen.append(f"recovery:{self.recovery}")
        return seen

    @property
    def refs(self) -> list[str]:
        out: list[str] = []
        for s in self.steps:
            out.extend(r for r in s.refs if r not in out)
        return out

    def summary_line(self) -> str:
        """The one line for people: "Context reduced 18,432 -> 3,420 / 5,000 tokens (offload)"."""
        if not self.changed:
            return f"Context fits: {self.tokens_before:,} / {self.limit:,} tokens (unchanged)"
        used = ", ".join(self.strategies_applied) or "no strategy"
        return (
            f"Context reduced {self.tokens_before:,} -> {self.tokens_after:,} / "
            f"{self.limit:,} tokens ({used})"
        )

    def report(self) -> dict[str, Any]:
        """The JSON report: tokens per region, units, steps, refs, P1, invariants."""
        return {
            "transcript": self.transcript.id,
            "changed": self.changed,
            "fits": self.fits,
            "limit": self.limit,
            "target": self.target,
            "tokens": {
                "before": self.tokens_before,
                "after": self.tokens_after,
                "regions_before": self.regions_before,
                "regions_after": self.regions_after,
            },
            "units": {"before": self.units_before, "after": self.units_after},
            "steps": [s.to_dict() for s in self.steps],
            "strategies": self.strategies_applied,
            "recovery": self.recovery,
            "refs": self.refs,
            "p1": {"total": self.p1_total, "kept": self.p1_kept},
            "invariants": self.invariants,
            "coherence": self.coherence,
            "time_ms": round(self.time_ms, 2),
        }


def _config_params() -> dict[str, dict[str, Any]]:
    """Every strategy's parameters as the default configuration sets them."""
    from ctxkit.config import STRATEGY_NAMES, Config

    bs = Config().breaking_strategy
    return {name: bs.params(name) for name in STRATEGY_NAMES}


def expand_chain(names: Sequence[str]) -> tuple[str, ...]:
    """Validate strategy names; `hybrid` stands for the default chain."""
    out: list[str] = []
    for name in names:
        if name == "hybrid":
            out.extend(n for n in DEFAULT_CHAIN if n not in out)
        elif name in STRATEGIES:
            out.append(name)
        else:
            raise unknown_name("strategy", name, [*STRATEGIES, "hybrid"])
    return tuple(out)


def check_invariants(
    original: Sequence[Unit],
    state: State,
    keep: set[str],
    archive: Archive | None,
    transcript_id: str,
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
            if not archive.has(make_ref(transcript_id, u.id, u.content)):
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

    `embedder` None is the lexical one. The report, the chain's undo rule and `score-rl` all use
    this one figure.
    """
    from ctxkit.relevance import get_embedder, similarity

    if [u.content for u in original] == [u.content for u in result]:
        return 1.0
    emb = embedder if embedder is not None else get_embedder("lexical")
    return float(similarity(unit_texts(original), unit_texts(result), emb))


def _p1_kept(original: Sequence[Unit], result: Sequence[Unit]) -> tuple[int, int]:
    by_id = {u.id: u for u in result}
    p1 = [u for u in original if u.is_p1]
    kept = sum(1 for u in p1 if u.id in by_id and by_id[u.id].content == u.content)
    return len(p1), kept


def compact(
    transcript: Transcript,
    *,
    limit: int,
    target: int | None = None,
    options: ChainOptions | None = None,
    tokenizer: Tokenizer | None = None,
    count_opts: CountOptions | None = None,
    archive: Archive | None = None,
    query: str | None = None,
    embedder: Any = None,
    summarizer: Callable[..., str] | None = None,
    observe: Observer | None = None,
) -> CompactResult:
    """Return the best transcript under `target` (default: the limit) that keeps the task alive."""
    started = time.perf_counter()
    options = options or ChainOptions()
    tok = tokenizer or get_tokenizer()
    copts = count_opts or CountOptions()
    goal = limit if target is None else min(target, limit)
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
    original = list(transcript.units)
    if query is None:
        from ctxkit.relevance import task_query

        query = task_query(transcript)
    # The id refs and the stored original go under: the transcript's own, unless the archive
    # already holds a different transcript of that name.
    key = archive.key_for(transcript) if archive is not None else transcript.id
    ctx = Context(
        tokenizer=tok,
        count_opts=copts,
        archive=archive,
        transcript_id=key,
        query=query,
        tools=tuple(transcript.tools),
        embedder=embedder,
        summarizer=summarizer,
        seed=options.seed,
    )
    state = State(units=tuple(original), target=goal, ctx=ctx)
    coherence_embedder = embedder
    notify(
        "detection",
        f"Context at {before.total:,} / {limit:,} tokens (target {goal:,})",
        before.total,
        0,
    )

    floor = _irreducible_floor(transcript, tok, copts)
    if floor > limit:
        raise UsageError(
            f"{transcript.id}: limit {limit:,} is below what no strategy can remove: the "
            f"system prompt and tool schemas alone take {floor:,} tokens"
        )
    if floor > goal:
        # The limit holds the system prompt but the goal below it does not: aim for the limit.
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
                new, state, name, params, original, keep, archive, key, coherence_embedder
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
        recover = _fresh_start if recovery == "fresh_start" else _truncate
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
        problems = check_invariants(original, state, keep, archive, key)
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
        if state.tokens() > limit:
            raise BreakerFailed(
                f"{transcript.id}: even after {recovery} the transcript takes "
                f"{state.tokens():,} tokens, above the limit {limit:,}"
            )

    result_t = transcript.replace(units=list(state.units))
    after = count_transcript(result_t, tok, copts)
    p1_total, p1_kept = _p1_kept(original, state.units)
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
        units_after=len(state.units),
        steps=steps,
        recovery=recovery,
        p1_total=p1_total,
        p1_kept=p1_kept,
        invariants={"ok": not violations, "violations": violations},
        time_ms=(time.perf_counter() - started) * 1000,
        coherence=coherence(original, state.units, coherence_embedder),
    )


def _judge(
    new: State | None,
    state: State,
    name: str,
    params: Mapping[str, Any],
    original: Sequence[Unit],
    keep: set[str],
    archive: Archive | None,
    transcript_id: str,
    embedder: Any,
) -> str | None:
    """Why a step's result is not taken (None: take it)."""
    if new is None:
        return "cannot help"
    problems = check_invariants(original, new, keep, archive, transcript_id)
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
    labels = {
        "summarize_old": "Summarizing old context",
        "prioritize_recent": "Prioritizing recent and relevant units",
        "content_type_chunking": "Compressing content by type",
        "discard_low_rel": "Discarding low-relevance units",
        "offload": "Offloading large tool outputs",
        "mask_observations": "Masking old observations",
    }
    return f"{labels.get(name, name)}… ({tokens:,} -> target {goal:,} tokens)"


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


def _last_request_index(units: Sequence[Unit]) -> int | None:
    for i in range(len(units) - 1, -1, -1):
        if structure.is_user_request(units[i]):
            return i
    return None


def _fit_last_request(state: State, request: Unit, room: int) -> Unit:
    """The last request verbatim, or, when it alone cannot fit, offloaded: the archive keeps it
    whole and the context keeps as much of its head and tail as fits, with the ref."""
    tok = state.ctx.tokenizer
    if tok.count(request.content) <= room:
        return request
    ref = archive_unit(state, request)
    text = request.content

    def shortened(keep_chars: int) -> str:
        head, tail = text[: keep_chars * 2 // 3], text[len(text) - keep_chars // 3 :]
        note = (
            f"[ctxkit: this request is larger than the context allows; {len(text) - keep_chars:,} "
            f"of its {len(text):,} characters are in the archive: ctxkit recall {ref}]"
        )
        return f"{head}\n{note}\n{tail}" if tail else f"{head}\n{note}"

    low, high = 0, len(text)
    while low < high:  # the longest head + tail that fits the room
        mid = (low + high + 1) // 2
        if tok.count(shortened(mid)) <= room:
            low = mid
        else:
            high = mid - 1
    return request.replace(
        content=shortened(low),
        meta={**request.meta, "ref": ref, "strategy": "recovery", "offloaded_request": True},
    )


MIN_HANDOVER_TOKENS = 120  # below this a handover says too little to be worth the room


MAX_SUFFIX_TRIES = 8  # shorter recent runs tried before the minimal form


def _fresh_start(state: State, original: Sequence[Unit], options: ChainOptions) -> State:
    """System units, a handover of everything dropped (every P1 unit named), then the most
    recent work that still fits, from the last user request on at least.

    When even the last request and a small handover do not fit, this is the spec's minimal form:
    the handover and the last request (offloaded with a ref if it alone is too big).
    """
    system = [u for u in original if u.role == "system"]
    for tail in _recent_suffixes(state, original):
        kept_ids = {u.id for u in tail}
        dropped = [u for u in original if u.role != "system" and u.id not in kept_ids]
        fitted = _with_handover(state, system, dropped, tail, options)
        if fitted is not None:
            return fitted
    return _minimal_fresh_start(state, original, options)


def _recent_suffixes(state: State, original: Sequence[Unit]) -> Iterator[list[Unit]]:
    """Runs of the chain's latest units, cut at block boundaries and holding the last user
    request, longest first, that leave room for a handover naming the P1 units they drop."""
    last_i = _last_request_index(original)
    if last_i is None:
        return
    current = [u for u in state.units if u.role != "system"]
    request_at = next((k for k, u in enumerate(current) if u.id == original[last_i].id), None)
    if request_at is None:
        return
    tok = state.ctx.tokenizer
    sizes = state.with_units(current).units_tokens()
    system_tokens = state.with_units([u for u in state.units if u.role == "system"]).tokens()
    p1 = [u for u in original if u.is_p1 and u.role != "system"]
    tries = 0
    for start, _end in structure.blocks(current):  # longest suffix first
        if start > request_at or tries >= MAX_SUFFIX_TRIES:
            return
        tail = current[start:]
        kept = {u.id for u in tail}
        # The handover must name every P1 unit it drops: at least its id on a line.
        p1_cost = sum(tok.count(u.id) + 4 for u in p1 if u.id not in kept)
        if sum(sizes[start:]) + p1_cost + MIN_HANDOVER_TOKENS <= state.target - system_tokens:
            tries += 1
            yield tail


def _with_handover(
    state: State,
    system: list[Unit],
    dropped: list[Unit],
    tail: list[Unit],
    options: ChainOptions,
) -> State | None:
    """system + handover(dropped) + tail, the handover shrunk until the whole fits."""
    from ctxkit.summarize import handover

    tok = state.ctx.tokenizer
    refs = [archive_unit(state, u) for u in dropped]
    p1 = [u for u in dropped if u.is_p1]
    fixed = state.with_units([*system, *tail]).tokens() + state.ctx.count_opts.tokens_per_message
    size = min(options.handover_tokens, state.target - fixed)
    hint = f"\n[ctxkit: {len(dropped):,} earlier messages archived; {refs_hint(refs)}]"
    while size >= 16:
        text = handover(
            dropped, target_tokens=size, p1_units=p1, tok=tok, include_last_request=False
        )
        text += hint
        summary = Unit(
            id="ctxkit-handover",
            role="user",
            type="summary",
            content=text,
            meta={"refs": refs, "strategy": "fresh_start"},
        )
        candidate = State(
            units=(*system, summary, *tail), target=state.target, ctx=state.ctx, in_recovery=True
        )
        over = candidate.tokens() - state.target
        if over <= 0:
            return candidate
        size -= over + 8
    return None


def _minimal_fresh_start(state: State, original: Sequence[Unit], options: ChainOptions) -> State:
    """System units + a handover naming every P1 unit + the last user request verbatim."""
    from ctxkit.summarize import handover

    system = [u for u in original if u.role == "system"]
    last_i = _last_request_index(original)
    body = [u for i, u in enumerate(original) if u.role != "system" and i != last_i]
    refs = [archive_unit(state, u) for u in body]
    p1 = [u for u in body if u.is_p1]
    tok = state.ctx.tokenizer
    base = state.with_units(system)
    room = state.target - base.tokens() - 2 * state.ctx.count_opts.tokens_per_message
    request = None
    if last_i is not None:
        # The request keeps priority over the handover, which needs only a little room.
        request = _fit_last_request(
            state, original[last_i], max(0, room - min(options.handover_tokens, 160))
        )
        room -= tok.count(request.content)
    # The handover gets what the system prompt and the last request leave, up to its own size;
    # the summarizer's length is approximate, so shrink it until the whole fits.
    size = max(16, min(options.handover_tokens, room))
    candidate = state
    hint = f"\n[ctxkit: {len(body):,} earlier messages archived; {refs_hint(refs)}]"
    for _ in range(6):
        text = handover(body, target_tokens=size, p1_units=p1, tok=tok) + hint
        summary = Unit(
            id="ctxkit-handover",
            role="user",
            type="summary",
            content=text,
            meta={"refs": refs, "strategy": "fresh_start"},
        )
        units = [*system, summary, *([request] if request is not None else [])]
        candidate = State(units=tuple(units), target=state.target, ctx=state.ctx, in_recovery=True)
        over = candidate.tokens() - state.target
        if over <= 0 or size <= 16:
            break
        size = max(16, size - over - 8)
    return candidate


def _truncate_marker(state: State, dropped: Sequence[Unit]) -> Unit:
    """One placeholder for the dropped turns, with their refs (the units go to the archive)."""
    refs = [archive_unit(state, u) for u in dropped]
    return Unit(
        id="ctxkit-truncated",
        role="user",
        type="placeholder",
        content=f"[ctxkit: {len(dropped)} earlier messages removed; {refs_hint(refs)}]",
        meta={"refs": refs, "strategy": "truncate"},
    )


def _truncate(state: State, original: Sequence[Unit], options: ChainOptions) -> State:
    """Drop the oldest whole turns (archived, one placeholder) until the rest fits."""
    units = list(state.units)
    system = [u for u in units if u.role == "system"]
    rest = [u for u in units if u.role != "system"]
    turn_starts = sorted({t.start for t in structure.turns(rest)} | {len(rest)})
    for cut in turn_starts:
        if cut == 0:
            continue
        dropped = rest[:cut]
        kept = rest[cut:]
        if not kept:
            break
        marker = _truncate_marker(state, dropped)
        candidate = State(
            units=tuple([*system, marker, *kept]),
            target=state.target,
            ctx=state.ctx,
            in_recovery=True,
        )
        if candidate.fits():
            return candidate
    # One turn alone is too big: keep only the last user request (as picoclaw does).
    last_i = _last_request_index(rest)
    marker = _truncate_marker(state, [u for i, u in enumerate(rest) if i != last_i])
    base = State(
        units=tuple([*system, marker]), target=state.target, ctx=state.ctx, in_recovery=True
    )
    if last_i is None:
        return base
    room = state.target - base.tokens() - state.ctx.count_opts.tokens_per_message
    request = _fit_last_request(state, rest[last_i], room)
    return State(
        units=tuple([*system, marker, request]),
        target=state.target,
        ctx=state.ctx,
        in_recovery=True,
    )


# --- many transcripts (a dataset), optionally in parallel processes ------------------------------

_WORK: dict[str, Any] = {}  # what forked workers inherit: the compact() keyword arguments


def _work_one(t: Transcript) -> tuple[str, Any, list[Event], list[Any], Transcript | None]:
    """Compact one transcript in a worker, into a private in-memory archive whose rows go back to
    the parent (one process writes the SQLite file)."""
    events: list[Event] = []
    scratch = Archive(":memory:")
    try:
        result = compact(t, archive=scratch, observe=events.append, **_WORK)
    except CtxkitError as exc:
        return ("error", (type(exc).__name__, str(exc), exc.exit_code), events, [], None)
    rows = scratch.list(t.id) if result.changed else []
    original = scratch.original(t.id) if result.changed else None
    scratch.close()
    return ("ok", result, events, rows, original)


def compact_many(
    transcripts: Iterable[Transcript],
    *,
    jobs: int = 1,
    archive: Archive | None = None,
    observe: Observer | None = None,
    **kwargs: Any,
) -> Iterator[CompactResult]:
    """`compact` over many transcripts, results in input order; `jobs` > 1 forks worker processes.

    Workers archive into memory and hand their rows back, so the archive file has one writer and
    the same refs as a serial run (refs are content hashes).
    """
    import sys

    # Forking a process whose torch threads are running can deadlock the children: fork only
    # while torch is not loaded (the CLI's embedder is lazy, so its parent has not loaded it).
    if jobs <= 1 or "torch" in sys.modules:
        for t in transcripts:
            yield compact(t, archive=archive, observe=observe, **kwargs)
        return
    import multiprocessing

    _WORK.clear()
    _WORK.update(kwargs)
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for status, payload, events, rows, original in pool.imap(_work_one, transcripts):
                for event in events:
                    if observe is not None:
                        observe(event)
                if status == "error":
                    kind, message, code = payload
                    error = CtxkitError(message)
                    error.exit_code = code
                    raise error
                if archive is not None and original is not None:
                    if archive.key_for(original) != original.id:
                        # Another transcript of this name is archived already: redo this one
                        # here, so its refs carry the archive's distinct key.
                        yield compact(original, archive=archive, observe=observe, **kwargs)
                        continue
                    archive.put_transcript(original)
                    for row in rows:
                        archive.put(
                            row.transcript_id, row.unit(), summary=row.summary, tokens=row.tokens
                        )
                yield payload
    finally:
        _WORK.clear()
