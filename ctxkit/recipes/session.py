"""What would each agent have kept of this session? The session replayed turn by turn under each
agent's own policy (`recipes.policies`) and under ctxkit's chain, side by side.

The transcript is fed unit by unit, as an agent loop would (`replay.call_points`: a model call
before each run of assistant units, and one at the end when the session ends on a request). At
every call the agent's policy sees the context it holds and decides what it keeps and what it
sends; later units are appended to what it kept, so the later turns see what that agent would
have seen. Per agent the run records how often it compacted (and its lighter edits: clears,
prunes, masks), the tokens sent over the session (the sum of every call's context), the peak,
the calls over the window, and at each compaction the fidelity probes (`fidelity.probes`) of
everything that had happened so far that the compacted context still holds.

Example:
    >>> from ctxkit.simulate import generate
    >>> table = replay_session(generate("growing_session", seed=1, tokens=8000),
    ...                        SessionRequest(agents=("codex", "claude-code"), window=4000, max_output=500))
    >>> [r.agent for r in table.runs], table.runs[0].compactions > 0
    (['codex', 'claude-code'], True)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.counting import Fit
from ctxkit.errors import unknown_name
from ctxkit.fidelity.probes import Probe, ProbeScore, extract
from ctxkit.model import Transcript, Unit
from ctxkit.recipes.policies import POLICIES, SUMMARY_BY, AgentPolicy, Edit, Env, Summarize
from ctxkit.recipes.probing import score_in, session_cwd
from ctxkit.replay import call_points
from ctxkit.structure import is_request
from ctxkit.tokens import DEFAULT_TOKENIZER, CountOptions, Tokenizer, get_tokenizer

CTXKIT = "ctxkit"
AGENTS = (*POLICIES, CTXKIT)  # every name `--as` takes
DEFAULT_AGENTS = (*(n for n, p in POLICIES.items() if p.default), CTXKIT)


@dataclass(frozen=True)
class SessionRequest:
    """One replay: which agents, under which model's window and max output, counted how, and
    summarized by what (None: ctxkit's extractive summarizer standing in)."""

    agents: tuple[str, ...] = DEFAULT_AGENTS
    window: int = 200_000
    max_output: int = 32_000
    model: str = ""  # the model the window came from, for the header
    tokenizer: Tokenizer | None = None
    count_opts: CountOptions = CountOptions()
    summarizer: Summarize | None = None
    summary_by: str = SUMMARY_BY
    price: Any = None  # a models.toml row with prices: each run's calls priced with caching
    unlogged: int | None = None  # tokens every call carries unseen (None: from recorded usage)
    ctxkit_settings: Any = None  # CompactSettings for ctxkit's chain (default: the window's budget)


@dataclass
class CompactionRecord:
    """One compaction or edit of a run, at the call it ran before."""

    call: int
    unit_index: int  # the next unit of the original the loop appends
    kind: str
    tokens_before: int
    tokens_after: int
    summary_tokens: int = 0
    note: str = ""
    probes: ProbeScore | None = None  # for compactions: probes of the session so far
    cache_write_tokens: int | None = None  # ctxkit's: what the first call after it writes

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "call": self.call,
            "unit_index": self.unit_index,
            "kind": self.kind,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summary_tokens": self.summary_tokens,
            "note": self.note,
        }
        if self.cache_write_tokens is not None:
            d["cache_write_tokens"] = self.cache_write_tokens
        if self.probes is not None:
            d["probes"] = self.probes.to_dict()
        return d


@dataclass
class AgentRun:
    """One agent's replay of the session."""

    agent: str
    label: str
    rule: str
    trigger: int | None
    call_tokens: list[int] = field(default_factory=list)
    call_cached: list[int] = field(default_factory=list)  # prefix shared with the call before
    log: list[CompactionRecord] = field(default_factory=list)
    final: ProbeScore | None = None  # probes of the whole session in the final context
    window: int = 0
    cost: dict[str, Any] | None = None
    time_ms: float = 0.0
    error: str | None = None
    source: str = ""  # where the rule was read (docs/agents.md cites each)

    @property
    def compaction_log(self) -> list[CompactionRecord]:
        return [c for c in self.log if c.kind == "compaction"]

    @property
    def compactions(self) -> int:
        return len(self.compaction_log)

    @property
    def edits(self) -> int:
        """Lighter edits: clears, prunes, masks, microcompacts, truncations."""
        return sum(1 for c in self.log if c.kind not in ("compaction", "failed"))

    @property
    def tokens_sent(self) -> int:
        return sum(self.call_tokens)

    @property
    def peak_tokens(self) -> int:
        return max(self.call_tokens, default=0)

    @property
    def over_window(self) -> int:
        """Calls whose context was over the window (the model would have refused them)."""
        return sum(1 for n in self.call_tokens if n > self.window)

    @property
    def probes_kept(self) -> list[float]:
        """Probe recall at each compaction."""
        return [c.probes.recall for c in self.compaction_log if c.probes is not None]

    def to_dict(self) -> dict[str, Any]:
        kept = self.probes_kept
        return {
            "agent": self.agent,
            "label": self.label,
            "rule": self.rule,
            "source": self.source,
            "trigger": self.trigger,
            "model_calls": len(self.call_tokens),
            "compactions": self.compactions,
            "edits": self.edits,
            "tokens_sent": self.tokens_sent,
            "peak_tokens": self.peak_tokens,
            "over_window_calls": self.over_window,
            "probes_kept_mean": round(sum(kept) / len(kept), 4) if kept else None,
            "probes_kept_min": round(min(kept), 4) if kept else None,
            "probes_final": self.final.to_dict() if self.final is not None else None,
            "call_tokens": self.call_tokens,
            "log": [c.to_dict() for c in self.log],
            "cost": self.cost,
            "time_ms": round(self.time_ms, 1),
            "error": self.error,
        }


@dataclass
class SessionTable:
    """Every agent's replay of one session, and the same calls without any compaction."""

    transcript_id: str
    units: int
    window: int
    max_output: int
    model: str
    summary_by: str
    runs: list[AgentRun]
    baseline: AgentRun
    source: str = ""
    unlogged: int = 0  # tokens added to every call for what the log never shows

    def to_dict(self) -> dict[str, Any]:
        return {
            "transcript": self.transcript_id,
            "source": self.source,
            "units": self.units,
            "window": self.window,
            "max_output": self.max_output,
            "model": self.model,
            "summary_by": self.summary_by,
            "unlogged_tokens": self.unlogged,
            "baseline": self.baseline.to_dict(),
            "agents": [r.to_dict() for r in self.runs],
        }


def replay_input(t: Transcript) -> Transcript:
    """The session as if it had never been compacted: the agent's own summaries left out (read
    the log with `include_compacted` so what they replaced is there)."""
    return t.replace(units=[u for u in t.units if u.type != "summary"])


def _default_summarizer(tok: Tokenizer) -> Summarize:
    from ctxkit.summarizers.extractive import summarize_extractive

    def summarize(units: Sequence[Unit], target: int, previous: str | None = None) -> str:
        return summarize_extractive(units, target, previous, tok)

    return summarize


class _Probes:
    """Probes of the session up to a unit index, extracted once per index, and their score in a
    context (`recipes.probing.score_in`: paths relative to the session's directory count)."""

    def __init__(self, units: Sequence[Unit], cwd: str | None = None):
        self.units = units
        self.cwd = cwd
        self._cache: dict[int, list[Probe]] = {}

    def upto(self, index: int) -> list[Probe]:
        if index not in self._cache:
            self._cache[index] = extract(list(self.units[:index]))
        return self._cache[index]

    def score(self, index: int, context: Transcript) -> ProbeScore:
        return score_in(self.upto(index), context, self.cwd)


def _shared(previous: Sequence[Unit], now: Sequence[Unit], fit: Fit) -> int:
    """Tokens of the prefix `now` shares with `previous` (what a prompt cache can serve)."""
    shared = 0.0
    for before, unit in zip(previous, now, strict=False):
        if before is not unit and (before.id, before.content) != (unit.id, unit.content):
            break
        shared += fit.unit(unit)
    return round(shared)


def run_policy(t: Transcript, policy: AgentPolicy, env: Env, probes: _Probes) -> AgentRun:
    """Replay `t` under one agent's policy (see the module doc)."""
    started = time.perf_counter()
    units = list(t.units)
    run = AgentRun(
        policy.name,
        policy.label,
        policy.rule,
        policy.trigger(env.window, env.max_output),
        window=env.window,
        source=policy.source,
    )
    points = set(call_points(units))
    fixed = env.fit.fixed(t)
    ctx: list[Unit] = []
    previous: list[Unit] = []
    last_answer: float | None = None

    def call(i: int) -> None:
        nonlocal ctx, previous
        env.now = units[i - 1].timestamp if i > 0 else None
        env.last_answer = last_answer
        env.new_turn = i > 0 and is_request(units[i - 1])
        step = policy.step(ctx, env)
        ctx = step.context
        sent = step.sent if step.sent is not None else ctx
        for e in step.edits:
            run.log.append(_record(len(run.call_tokens), i, e, sent, probes))
        run.call_tokens.append(env.tokens(sent))
        run.call_cached.append(
            round(fixed + _shared(previous, sent, env.fit)) if run.call_tokens[:-1] else 0
        )
        previous = list(sent)

    for i, u in enumerate(units):
        if i in points:
            call(i)
        ctx.append(u)
        if u.role == "assistant" and u.timestamp is not None:
            last_answer = u.timestamp
    if len(units) in points:
        call(len(units))
    run.final = probes.score(len(units), t.replace(units=ctx))
    run.time_ms = (time.perf_counter() - started) * 1000
    return run


def _record(
    call: int, index: int, e: Edit, sent: Sequence[Unit], probes: _Probes
) -> CompactionRecord:
    rec = CompactionRecord(
        call, index, e.kind, e.tokens_before, e.tokens_after, e.summary_tokens, e.note
    )
    if e.compaction:
        rec.probes = probes.score(index, Transcript(units=list(sent)))
    return rec


def _new_summaries(before: Sequence[Unit], after: Sequence[Unit]) -> list[Unit]:
    """The summaries a compaction wrote: one it kept byte for byte was written before."""
    kept = {(u.id, u.content) for u in before}
    return [u for u in after if u.type == "summary" and (u.id, u.content) not in kept]


def _written(summary: Unit, fit: Fit) -> float:
    """The tokens of a summary a model would have written (`summarize_old` records them): its
    opening line, the user's words it quotes and the facts its check adds are copied from the
    log; the whole summary when it does not say."""
    written = summary.meta.get("written")
    return fit.unit(summary) if not isinstance(written, int) else written * fit.ratio


def run_ctxkit(
    t: Transcript, settings: Any, window: int, fit: Fit, probes: _Probes, price: Any = None
) -> AgentRun:
    """Replay `t` under ctxkit's own chain and the loop's policy (`replay.replay`,
    `budget.policy`), every call counted as every other row's (`fit.total`: what the log never
    shows, the ratio and the unseen content included), probes scored at each compaction."""
    from ctxkit.replay import replay, settings_policy

    started = time.perf_counter()
    seen: list[CompactionRecord] = []

    def observe(call: int, index: int, before: Sequence[Unit], after: Sequence[Unit]) -> None:
        after_t = t.replace(units=list(after))
        summary = round(sum(_written(u, fit) for u in _new_summaries(before, after)))
        rec = CompactionRecord(
            call, index, "compaction", fit.total(t, before), fit.total(after_t), summary
        )
        rec.probes = probes.score(index, after_t)
        seen.append(rec)

    # the limit in the tokens each call is counted in: what the log never shows, the counted
    # tokens at the provider's ratio
    whole = fit.extra + round(settings.limit * fit.ratio)
    policy = settings_policy(settings.replace(limit=whole), round(fit.fixed(t)))
    if price is not None:
        from ctxkit.budget.policy import CachePrices

        policy = dataclasses.replace(policy, prices=CachePrices.of(price))
    result = replay(t, settings, observe=observe, fit=fit, policy=policy)
    calls = max(1, len(result.baseline_call_tokens) - 1)
    growth = policy.growth(result.baseline_call_tokens[-1] - result.baseline_call_tokens[0], calls)
    fired = [c.trigger for c in result.compaction_log if c.trigger is not None]
    trigger = fired[0] if fired else policy.trigger(growth)
    rule = (
        f"chain {', '.join(settings.options.chain)}; by cost: {policy.describe(growth)}; "
        f"at most one per {policy.min_gap} calls"
    )
    run = AgentRun(CTXKIT, "ctxkit", rule, trigger, window=window)
    run.call_tokens = list(result.call_tokens)
    run.call_cached = [c if k else 0 for k, c in enumerate(result.call_cached)]
    by_call = {c.call: c for c in result.compaction_log}
    for rec in seen:
        c = by_call.get(rec.call)
        if c is not None:
            rec.note = ", ".join(c.strategies) + (f" (recovery {c.recovery})" if c.recovery else "")
            rec.cache_write_tokens = c.cache_write_tokens
    run.log = seen
    run.error = "; ".join(result.errors) or None
    run.final = probes.score(len(t.units), result.transcript)
    run.time_ms = (time.perf_counter() - started) * 1000
    return run


def _baseline(t: Transcript, fit: Fit, window: int) -> AgentRun:
    """The same calls with nothing compacted."""
    run = AgentRun(
        "none", "no compaction", "every call sends everything so far", None, window=window
    )
    units = list(t.units)
    points = set(call_points(units))
    previous = 0
    for i in range(len(units) + 1):
        if i in points:
            total = fit.total(t, units[:i])  # as every agent's call is counted
            run.call_tokens.append(total)
            run.call_cached.append(previous)
            previous = total
    return run


def calls_cost(run: AgentRun, model: Any) -> dict[str, Any]:
    """What a run's calls cost on `model` with prompt caching (each call reads the prefix it
    shares with the call before and writes the rest), plus the summarizing calls its LLM
    compactions make (their input read from the cache, the summary as output)."""
    from ctxkit.budget.models import call_cost, prefix_call_cost

    calls = sum(
        prefix_call_cost(model, n, c) for n, c in zip(run.call_tokens, run.call_cached, strict=True)
    )
    summaries = sum(
        call_cost(model, 0, c.tokens_before, 0, c.summary_tokens)
        for c in run.compaction_log
        if c.summary_tokens
    )
    return {
        "model": model.name,
        "usd": round(calls + summaries, 6),
        "usd_calls": round(calls, 6),
        "usd_summaries": round(summaries, 6),
        "cache_read_tokens": sum(run.call_cached),
        "cache_write_tokens": sum(
            n - c for n, c in zip(run.call_tokens, run.call_cached, strict=True)
        ),
    }


def replay_session(t: Transcript, request: SessionRequest, source: str = "") -> SessionTable:
    """Replay one session under each requested agent (see the module doc)."""
    for name in request.agents:
        if name not in AGENTS:
            raise unknown_name("agent", name, AGENTS)
    tok = request.tokenizer or get_tokenizer(DEFAULT_TOKENIZER)
    if request.unlogged is None:
        # what every call carries, at the fit of the log's recorded usage (`budget.fit`)
        fit = Fit.recorded(t, tok, request.count_opts)
    else:
        fit = Fit(tok, request.count_opts, extra=request.unlogged)
    unlogged = fit.extra
    t = replay_input(t)
    probes = _Probes(t.units, session_cwd(t))
    summarize = request.summarizer or _default_summarizer(tok)
    runs = []
    for name in request.agents:
        if name == CTXKIT:
            settings = request.ctxkit_settings or _ctxkit_settings(request, tok, unlogged)
            run = run_ctxkit(t, settings, request.window, fit, probes, request.price)
        else:
            env = Env(request.window, request.max_output, fit, t, summarize)
            run = run_policy(t, POLICIES[name], env, probes)
        if request.price is not None:
            run.cost = calls_cost(run, request.price)
        runs.append(run)
    baseline = _baseline(t, fit, request.window)
    if request.price is not None:
        baseline.cost = calls_cost(baseline, request.price)
    return SessionTable(
        t.id,
        len(t.units),
        request.window,
        request.max_output,
        request.model,
        request.summary_by,
        runs,
        baseline,
        source,
        unlogged,
    )


@dataclass(frozen=True)
class ReplayOptions:
    """What `ctxkit replay` asks: the agents, the model (or a window and max output), how to
    count and summarize, and what the log never shows (None: from its recorded usage)."""

    agents: tuple[str, ...] = DEFAULT_AGENTS
    model: str | None = None
    window: int | None = None
    max_output: int | None = None
    tokenizer: str | None = None
    summarizer: str | None = None  # extractive (default) or llm
    llm_url: str | None = None
    llm_model: str | None = None
    unlogged: int | None = None
    config_path: str | None = None


def request_for(t: Transcript, options: ReplayOptions, warn: Any = None) -> SessionRequest:
    """The replay of one session under the one budget (`budget.resolve.resolve_budget`, as
    `guard` and `compact` resolve it): --window and --max-output, else --model, else the model
    the log names under its agent's budget, else the default window; prices from that model's
    row. The agents' own rules read the model's max output (`max_output`), ctxkit's chain the
    budget's limit less what the log never shows."""
    from ctxkit.budget import default_max_output
    from ctxkit.budget.models import find_model
    from ctxkit.budget.resolve import BudgetRequest, model_of, resolve_budget
    from ctxkit.config.file import load_config
    from ctxkit.config.settings import compact_settings
    from ctxkit.recipes.forensics import log_model

    config = load_config(options.config_path)
    request = BudgetRequest(
        model=options.model,
        context_window=options.window,
        max_output_tokens=options.max_output,
        config=config,
    )
    budget = resolve_budget(request, t)  # an unknown --model is a usage error here
    info = find_model(options.model)[0] if options.model else None
    window = budget.context_window
    if options.model is None and options.window is None:
        # the model the log records, by name or by family (`budget.resolve.model_of`)
        info, _, notes = model_of(t)
        if info is None and log_model(t):
            info, _ = find_model(str(log_model(t)))
        if info is not None and budget.name == "default":
            # a model only the log's records name, or a policy limit in the configuration: the
            # agents' rules run on the model's window all the same
            window = info.context_window
            if request.from_log:
                budget = resolve_budget(request.for_model(info.name))
        if warn is not None:
            for note in notes:
                warn(f"ctxkit: {note}")
    max_output = options.max_output
    if max_output is None:
        known = info.max_output_tokens if info is not None and options.window is None else None
        max_output = known or default_max_output(window)
    label = info.name if info is not None else ("custom" if options.window else "default")
    priced = (
        info
        if info is not None and info.input_per_mtok is not None and info.output_per_mtok is not None
        else None
    )
    settings = compact_settings(
        tokenizer=options.tokenizer,
        summarizer=options.summarizer,
        llm_url=options.llm_url,
        llm_model=options.llm_model,
        config=config,
        warn=warn,
    )
    tok = settings.tokenizer or get_tokenizer(options.tokenizer)
    if options.unlogged is None:
        fit = Fit.recorded(t, tok, settings.count_opts)
    else:
        fit = Fit(tok, settings.count_opts, extra=options.unlogged)
    # ctxkit's limit is the budget's, less what no compaction can remove, in the tokens ctxkit
    # counts (the fit's ratio); ctxkit's chain does not add recorded usage's again
    # (use_usage=False)
    room = budget.limit - fit.extra
    limit = int(room / fit.ratio) if fit.ratio > 0 else room
    settings = settings.replace(limit=max(1, limit), use_usage=False)
    by = SUMMARY_BY
    summarize = None
    if options.summarizer == "llm" and settings.summarizer is not None:
        summarize = settings.summarizer
        by = f"LLM endpoint ({options.llm_model or 'CTXKIT_LLM_MODEL'}), extractive when it fails"
    return SessionRequest(
        agents=options.agents,
        window=window,
        max_output=max_output,
        model=label,
        tokenizer=tok,
        count_opts=settings.count_opts,
        summarizer=summarize,
        summary_by=by,
        price=priced,
        ctxkit_settings=settings,
        unlogged=options.unlogged,  # None: the replay fits the log's recorded usage
    )


def replay_paths(
    paths: Sequence[str], options: ReplayOptions, read_opts: Any = None, warn: Any = None
) -> list[SessionTable]:
    """`ctxkit replay`: every session of every path (read with `include_compacted`, so what the
    agent's own compactions replaced is there), replayed under each agent."""
    from ctxkit.errors import UsageError
    from ctxkit.recipes.forensics import read_sessions

    for name in options.agents:
        if name not in AGENTS:
            raise unknown_name("agent", name, AGENTS)
    out = [
        replay_session(t, request_for(t, options, warn), source=path)
        for path, t in read_sessions(paths, read_opts)
    ]
    if not out:
        raise UsageError(f"{', '.join(paths) or '<stdin>'}: no session to replay")
    return out


def _ctxkit_settings(request: SessionRequest, tok: Tokenizer, unlogged: int = 0) -> Any:
    """ctxkit's default chain under the budget of the request's window and max output
    (`budget.resolve.resolve_budget`), less what the log never shows, which no compaction can
    remove, so not counted again from recorded usage."""
    from ctxkit.budget.resolve import BudgetRequest, resolve_budget
    from ctxkit.compaction import CompactSettings

    budget = resolve_budget(
        BudgetRequest(context_window=request.window, max_output_tokens=request.max_output)
    )
    limit = max(1, budget.limit - unlogged)
    return CompactSettings(limit=limit, tokenizer=tok, count_opts=request.count_opts, use_usage=False)


__all__ = [
    "AGENTS",
    "CTXKIT",
    "DEFAULT_AGENTS",
    "AgentRun",
    "CompactionRecord",
    "SessionRequest",
    "SessionTable",
    "ReplayOptions",
    "calls_cost",
    "replay_input",
    "replay_paths",
    "replay_session",
    "request_for",
]
