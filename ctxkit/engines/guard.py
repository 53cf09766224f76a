"""Evaluate a transcript against one or more targets: will it fit, with room for the answer?

    >>> from ctxkit.formats import read_text
    >>> from ctxkit.engines.guard import evaluate, resolve_target
    >>> (transcript,) = read_text('[{"role": "user", "content": "%s"}]' % ("word " * 9000))
    >>> verdict = evaluate(transcript, [resolve_target("gpt-4"), resolve_target("gpt-4o")])
    >>> [r.status for r in verdict.results]  # about 9,000 tokens: too many for gpt-4's 8k
    ['overflow', 'ok']
    >>> verdict.chosen.target.name, verdict.chosen.status, verdict.exit_code()
    ('gpt-4o', 'ok', 0)

Per target the transcript is counted with the target's tokenizer, by region (system, tool
schemas, summary, history, plus `pending` tool outputs about to be appended), and given a status
against the limit in force (see `budget`). Targets are in order of preference: the first that
fits (any status but overflow) is chosen, later ones are skipped; when none fits the verdict is
`final` (the spec's turn preflight). When only the tool schemas push a target over the limit, it
is treated as fitting with a note (the spec's special case): it can be chosen, and its status is
block, as for a context at the limit itself, so adding tokens never improves a status.

Exit codes (`Verdict.exit_code`): 0 fits (ok, warn), 3 compaction needed, 4 blocked, 5 overflow
or none fits; `fail_on` moves the bar (statuses below it exit 0; warn at the bar exits 3).
With `check=True`, structural errors exit 6 when the fit alone would exit 0; a baseline check
(`gates.baseline`) adds 7 for a region grown beyond its allowance (`gates.exits`).

The pieces: `guard_pending` (pending outputs), `guard_history` (the log as it grew),
`guard_verdict` (the records of a verdict); this module judges each target.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.budget import Target, compaction_goal, status_for
from ctxkit.budget.targets import resolve_target
from ctxkit.budget.tools import DEFAULT_THRESHOLD as DEFAULT_TOOL_THRESHOLD
from ctxkit.budget.tools import schemas_over
from ctxkit.budget.triggers import forecast, get_rule
from ctxkit.config.file import Config
from ctxkit.counting import ArchiveRef, measure
from ctxkit.engines.guard_history import ThresholdHistory, threshold_history, walk_tokens
from ctxkit.engines.guard_pending import (
    PendingItem,
    PendingOutput,
    PendingPlan,
    load_pending,
    plan_pending,
)
from ctxkit.engines.guard_verdict import TargetResult, Verdict
from ctxkit.errors import CtxkitError
from ctxkit.gates.exits import FAIL_ON, combine_exit_codes, exit_code_for
from ctxkit.model import Transcript, Unit
from ctxkit.tokens import CountOptions, TokenizerCache, count_transcript

__all__ = [
    "FAIL_ON",
    "GuardSettings",
    "PendingItem",
    "PendingOutput",
    "PendingPlan",
    "ThresholdHistory",
    "Target",
    "TargetResult",
    "Verdict",
    "combine_exit_codes",
    "compaction_goal",
    "evaluate",
    "evaluate_paths",
    "exit_code_for",
    "load_pending",
    "plan_pending",
    "resolve_target",
    "status_for",
    "threshold_history",
    "walk_tokens",
]

Trace = Callable[[str], None]


@dataclass(frozen=True)
class GuardSettings:
    """How `evaluate` judges a transcript, built once and passed whole (as `CompactSettings`
    is): the configuration (thresholds, policy), a system prompt sent before the units,
    tool schemas that replace the transcript's, `pending` tool outputs about to be appended,
    the threshold replay and structural check, the exit policy, the count options, whether
    recorded usage counts, coding agents whose auto-compaction trigger to apply, the share of a
    window past which the tool schemas alone earn a note, and the archive a file ctxkit
    compacted finds its original's recorded usage in (None: the one beside it).

    >>> GuardSettings(check=True).fail_on
    'compact'
    """

    config: Config = field(default_factory=Config)
    system: str | None = None
    tools: tuple[dict[str, Any], ...] | None = None
    pending: tuple[PendingOutput, ...] = ()
    replay: bool = False
    check: bool = False
    fail_on: str = "compact"
    count_opts: CountOptions = CountOptions()
    use_usage: bool = True
    as_agents: tuple[str, ...] = ()
    tool_threshold: float | None = DEFAULT_TOOL_THRESHOLD
    archive: ArchiveRef = None
    # the targets given stand for "what the log names": a log that records its model is checked
    # against that model under its agent's own budget (`budget.resolve.resolve_budget`) instead
    from_log: bool = False


def evaluate(
    t: Transcript,
    targets: Sequence[Target],
    settings: GuardSettings | None = None,
    *,
    tokenizers: TokenizerCache | None = None,
    trace: Trace | None = None,
) -> Verdict:
    """Count `t` for each target, give each a status, choose the first that fits.

    `settings` (`GuardSettings`) says how: `system` is a system prompt sent before the
    transcript's units, `tools` the tool schemas sent with the call (they replace any the
    transcript carries), `pending` tool outputs about to be appended. Where the log records
    what the provider counted, the gap between that and ctxkit's count of the same context is
    the `unlogged` region (what the log never shows), a fixed region added to the count
    (`counting.measure`, the figure `count` and `compact` use too; a file ctxkit compacted is
    measured on its original in `archive`, by default the one beside it); `use_usage=False`
    ignores recorded usage. `as_agents` names coding agents (`ctxkit.budget.triggers.RULES`)
    whose own auto-compaction trigger is applied to each target's window; with `replay` also
    at which unit each would first have compacted and how many times. When the tool schemas alone pass `tool_threshold` of a target's effective
    window, its notes say so (None: never). `tokenizers` caches tokenizers across calls;
    `trace` hears each step.
    """
    s = settings or GuardSettings()
    system, tools, check, fail_on, opts = s.system, s.tools, s.check, s.fail_on, s.count_opts
    rules = [get_rule(name) for name in s.as_agents]
    if s.from_log:
        from ctxkit.budget.resolve import BudgetRequest, resolve_budget

        flagged = targets[0].tokenizer if targets and targets[0].sources.get("tokenizer") == "flag" else None
        request = BudgetRequest(tokenizer=flagged, config=s.config)
        named = resolve_budget(request, t)
        if named != resolve_budget(request):  # else the log names no model it knows
            targets = [named]
    if not targets:
        raise ValueError("evaluate needs at least one target")
    tokenizers = tokenizers or TokenizerCache()
    say = trace or (lambda _msg: None)
    if system:
        t = t.replace(units=[Unit(id="--system", role="system", content=system), *t.units])
    if tools is not None:
        t = t.replace(tools=list(tools))
    say(f"transcript {t.id}: {len(t.units)} units, {len(t.tools)} tool schemas")

    warnings: list[str] = []
    counted: dict[str, Any] = {}
    results: list[TargetResult] = []
    for target in targets:
        tok, label, warning = tokenizers.get(target)
        if warning and warning not in warnings:
            warnings.append(warning)
        if target.tokenizer_note and "proxy" not in label:
            label += " (proxy)" if tok.exact else " (estimate)"
        key = str(id(tok))
        if key not in counted:
            counted[key] = count_transcript(t, tok, opts)
            say(f"counted with {tok.name}: {counted[key].to_dict()}")
        results.append(_target_result(t, target, counted[key], tok, label, s, rules, say))

    chosen = next((i for i, r in enumerate(results) if r.fits), None)
    for i, r in enumerate(results):
        if chosen is None or i < chosen:
            r.decision = "does not fit"
        else:
            r.decision = "chosen" if i == chosen else "skipped"
    problems: list[Any] = []
    if check:
        from ctxkit.structure import check as structural_check

        problems = list(structural_check(t))
        say(f"check: {len(problems)} structural problems")
    verdict = Verdict(t, results, chosen, problems, check, warnings)
    say(
        f"decision: {verdict.verdict}"
        + (f" -> {verdict.chosen.target.name} ({verdict.status})" if verdict.chosen else "")
        + f", exit {verdict.exit_code(fail_on)} (fail-on {fail_on})"
    )
    return verdict


def _target_result(
    t: Transcript,
    target: Target,
    tc: Any,
    tok: Any,
    label: str,
    s: GuardSettings,
    rules: Sequence[Any],
    say: Trace,
) -> TargetResult:
    """One target's result: the one budget (`counting.measure`), pending outputs planned in,
    the status, its notes (thrash, heavy tool schemas), agents' triggers and the replay."""
    config, pending, do_replay, fail_on, opts = s.config, s.pending, s.replay, s.fail_on, s.count_opts
    use_usage, tool_threshold, archive = s.use_usage, s.tool_threshold, s.archive
    measured = measure(t, tok, opts, usage=use_usage, archive=archive, counted=tc)
    regions = measured.regions
    used = measured.total
    usage = measured.usage
    if usage is not None:
        say(
            f"recorded usage: {usage.fit.last_recorded} at call {len(usage.fit.calls)} (after unit "
            f"{usage.fit.after_unit}"
            + (f" of the original in {usage.origin}" if usage.origin else "")
            + f"); counted {usage.fit.last_counted} for that context; {usage.explain()}"
        )
    plan: PendingPlan | None = None
    if pending:
        plan = plan_pending(pending, used, target.limit, tok, opts, config)
        regions["pending"] = plan.tokens
        used += plan.tokens
        say(
            f"target {target.name}: pending {plan.tokens} tokens, room {plan.room}; plan: "
            + ", ".join(f"{i.name} {i.action} {i.tokens}->{i.tokens_after}" for i in plan.items)
        )
    result = _judge(target, used, regions, label, config)
    result.pending = plan
    result.usage = usage
    if usage is not None:
        result.basis = "recorded usage"
    if measured.note:
        # a compacted file whose original is not at hand: its count leaves out what the log
        # never shows, and a verdict on that would pass what does not fit
        raise CtxkitError(
            measured.note + ", or --no-usage to decide on the file's own count"
        )
    # the replay and the agents' forecasts walk the log as it grew (`walk_tokens`): the fixed
    # part, then every unit at the fitted ratio (1 without recorded usage), at the recorded calls
    # what the provider counted, ending at the verdict's figure
    ratio = measured.ratio
    fixed = regions.get("unlogged", 0) + round(
        ratio * (regions.get("tools", 0) + (opts.reply_priming if t.units else 0))
    )
    result.loop = loop_decision(t, target, used, fixed)
    say(f"target {target.name}: in a loop, {result.loop['rule']}")
    thrash = thrash_note(t, tc, regions, target)
    if thrash:
        result.notes.append(thrash)
    heavy = schemas_over(regions["tools"], target.effective_limit, tool_threshold)
    if heavy:
        result.notes.append(heavy)
    unit_tokens = walk_tokens(t, tc, measured, fixed, tok)
    result.agents = [
        forecast(
            rule,
            target.context_window,
            target.max_output_tokens,
            used,
            unit_tokens if do_replay else None,
            fixed,
        )
        for rule in rules
    ]
    if do_replay:
        # the same fixed part as the verdict's: the unlogged region (system prompt and tool
        # schemas the log never shows) was there from the first call, so every check holds it
        result.replay = threshold_history(
            t.units,
            unit_tokens,
            fixed,
            target.limit,
            target.thresholds,
            fail_on,
        )
    _trace_target(say, result)
    if result.replay is not None:
        rp = result.replay
        say(
            f"target {target.name}: replay {rp.checks} checks, fires {rp.fires}, "
            f"over-hits {rp.over_hits}, most in one hour {rp.max_over_hits_per_hour}"
        )
    return result




def loop_decision(t: Transcript, target: Target, used: int, fixed: int) -> dict[str, Any]:
    """What the one loop policy (`budget.policy`, the policy of `replay` and `compact
    --replay`) says of this log in an agent loop: its trigger and goal at the log's growth per
    model call (priced on the target's model), and whether a loop compacts before the next
    call (`reason`: "cost", "overflow", or "" below the trigger; the calls since the agent's
    last compaction are not known here, so the gap is not checked)."""
    from ctxkit.budget.models import find_model
    from ctxkit.budget.policy import loop_policy
    from ctxkit.replay import call_points

    policy = loop_policy(target.limit, fixed, find_model(target.name)[0])
    calls = len(call_points(t.units))
    growth = policy.growth(used - fixed, calls)
    d = policy.decide(used, None, growth)
    return {
        "trigger": d.trigger,
        "goal": d.goal,
        "growth_per_call": round(growth, 1),
        "calls": calls,
        "compact": d.compact,
        "reason": d.reason,
        "rule": policy.describe(growth),
    }


def thrash_note(t: Transcript, tc: Any, regions: Mapping[str, int], target: Target) -> str | None:
    """A warning when what compaction can never remove (system, tool schemas, unlogged, P1
    units and the protected requests, with their tool blocks) already reaches the compact
    threshold (compaction would fire again on every turn), or stays above the goal it aims for.
    """
    from ctxkit.structure import protected_indices

    keep = protected_indices(t.units)
    floor = sum(tc.units[i].total for i in keep) + regions.get("tools", 0)
    floor += regions.get("unlogged", 0)
    bounds = target.thresholds.bounds(target.limit)
    goal = compaction_goal(target.limit, thresholds=target.thresholds, in_loop=True)
    what = "system prompt, tool schemas, unlogged, P1 units and the first and last requests"
    if floor >= bounds["compact"]:
        return (
            f"thrash: {floor:,} tokens that no compaction can remove ({what}) reach the compact "
            f"threshold ({bounds['compact']:,}): compaction would repeat on every turn"
        )
    if floor > goal:
        return (
            f"thrash risk: {floor:,} tokens that no compaction can remove ({what}) are above the "
            f"compaction goal ({goal:,}): every compaction ends short of it and fires again soon"
        )
    return None


def _judge(
    target: Target, used: int, regions: dict[str, int], label: str, config: Config
) -> TargetResult:
    thresholds = target.thresholds
    status = status_for(used, target.limit, thresholds)
    notes: list[str] = list(target.notes)
    if target.tokenizer_note:
        notes.append(target.tokenizer_note)
    schemas_only = False
    schema_tokens = regions.get("tools", 0)
    if status == "overflow" and schema_tokens and used - schema_tokens <= target.limit:
        # Fitting, but never better than a context at the limit itself (block): a status that
        # improved when tokens were added would mislead a loop that checks after each message.
        schemas_only = True
        status = "block"
        notes.append(
            f"only the tool schemas ({schema_tokens:,} tokens) push it over the limit; "
            "treated as fitting, with status block (send fewer tools)"
        )
    return TargetResult(
        target, status, used, regions, label, notes=notes, schemas_only=schemas_only
    )


def _trace_target(say: Trace, r: TargetResult) -> None:
    t = r.target
    say(
        f"target {t.name}: effective {t.context_window} - {t.buffer_tokens} (buffer) - "
        f"{t.max_output_tokens} (max output) = {t.effective_limit} "
        f"[{', '.join(f'{k} from {v}' for k, v in t.sources.items())}]"
    )
    if t.policy_limit is not None:
        say(f"target {t.name}: policy {t.policy_limit} ({t.policy_rule})")
    b = t.thresholds.bounds(t.limit)
    say(
        f"target {t.name}: limit {t.limit} bound by {t.bound_by}; warn >= {b['warn']}, "
        f"compact >= {b['compact']}, block >= {b['block']}, overflow > {t.limit}"
    )
    say(
        f"target {t.name}: used {r.used} = "
        + " + ".join(f"{v} ({k})" for k, v in r.regions.items())
        + f" -> {r.status}"
        + (" (schemas only)" if r.schemas_only else "")
    )



def evaluate_paths(
    paths: Sequence[str],
    read_opts: Any = None,
    targets: Sequence[Target] = (),
    settings: GuardSettings | None = None,
    *,
    stats: Any = None,
    tokenizers: TokenizerCache | None = None,
    trace: Trace | None = None,
) -> Iterator[Verdict]:
    """`evaluate` over every transcript of these paths (globs and folders expanded, none =
    stdin; read lazily, a dataset one conversation at a time; a prompt file as `gates.inputs`
    reads it), in input order: the one call behind `ctxkit guard`."""
    from ctxkit.formats import ReadOptions
    from ctxkit.gates.inputs import read_inputs

    tokenizers = tokenizers or TokenizerCache()
    for t in read_inputs(paths, read_opts or ReadOptions(), stats):
        yield evaluate(t, targets, settings, tokenizers=tokenizers, trace=trace)
