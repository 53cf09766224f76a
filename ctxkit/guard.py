"""Evaluate a transcript against one or more targets: will it fit, with room for the answer?

    >>> from ctxkit.formats import read_text
    >>> from ctxkit.guard import evaluate, resolve_target
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
(`gates.baseline`) adds 7 for a region grown beyond its allowance (`combine_exit_codes`).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.budget import (
    STATUSES,
    Target,
    Thresholds,
    compaction_goal,
    status_for,
    status_rank,
    used_fraction,
)
from ctxkit.budget.targets import resolve_target
from ctxkit.budget.tools import DEFAULT_THRESHOLD as DEFAULT_TOOL_THRESHOLD
from ctxkit.budget.tools import schemas_over
from ctxkit.config.file import Config
from ctxkit.counting import ArchiveRef, RecordedUsage, measure
from ctxkit.errors import CtxkitError, InputError
from ctxkit.gates.baseline import EXIT_REGRESSION
from ctxkit.model import Transcript, Unit
from ctxkit.recipes.triggers import AgentForecast, forecast, get_rule
from ctxkit.tokens import (
    CountOptions,
    Tokenizer,
    TokenizerCache,
    count_transcript,
    count_units,
)

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
    "resolve_target",
    "status_for",
    "threshold_history",
]

FAIL_ON = STATUSES[1:]  # any status but ok can fail a run
EXIT_CODES = {"ok": 0, "warn": 3, "compact": 3, "block": 4, "overflow": 5}
EXIT_PROBLEMS = 6
OVER_HITS_WINDOW_S = 3600
OVER_HITS_TRIGGER = 2  # the spec: more than 2 over-hits in 1 hour

Trace = Callable[[str], None]


def exit_code_for(status: str, fail_on: str = "compact") -> int:
    """The exit code of a status: 0 below the `fail_on` bar, else 3 (warn, compact), 4, 5."""
    if status_rank(status) < status_rank(fail_on):
        return 0
    return EXIT_CODES[status]


# --- pending tool outputs --------------------------------------------------------------------


@dataclass(frozen=True)
class PendingOutput:
    """A tool output about to be appended."""

    name: str
    content: str


@dataclass
class PendingItem:
    """What to do with one pending output: keep, cut (to `tokens_after`) or offload (a stub)."""

    index: int
    name: str
    bytes: int
    tokens: int
    action: str = "keep"
    tokens_after: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "bytes": self.bytes,
            "tokens": self.tokens,
            "action": self.action,
            "tokens_after": self.tokens_after,
        }


@dataclass
class PendingPlan:
    """Pending outputs against the room left: whether they fit raw, and what to cut or offload."""

    items: list[PendingItem]
    room: int
    tokens: int
    tokens_after: int
    fits_raw: bool
    fits_after: bool
    status_after: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "room": self.room,
            "tokens": self.tokens,
            "tokens_after_plan": self.tokens_after,
            "fits_as_is": self.fits_raw,
            "fits_after_plan": self.fits_after,
            "status_after_plan": self.status_after,
            "items": [i.to_dict() for i in self.items],
        }


def _pending_unit(index: int, p: PendingOutput, content: str | None = None) -> Unit:
    return Unit(
        id=f"pending-{index}",
        role="tool",
        type="tool_result",
        content=p.content if content is None else content,
        name=p.name or None,
    )


def offload_stub(p: PendingOutput, preview_chars: int) -> str:
    """The stub that would replace an offloaded output: the offload strategy's own, with a ref
    of the same size as the one the archive will give it."""
    from ctxkit.archive.store import REF_PROBE
    from ctxkit.strategies.offload import preview_of, stub_text

    size = len(p.content.encode("utf-8"))
    return stub_text(p.name or "tool", size, preview_of(p.content, preview_chars), REF_PROBE)


def plan_pending(
    pending: Sequence[PendingOutput],
    used_tokens: int,
    limit: int,
    tok: Tokenizer,
    opts: CountOptions,
    config: Config,
) -> PendingPlan:
    """Decide which pending outputs must be cut or offloaded so the total stays within `limit`.

    Largest first: an output over `offload.threshold_bytes` is offloaded (replaced by a stub),
    a smaller one is cut by what is still over, or offloaded when the cut would leave less than
    its stub.
    """
    off = config.breaking_strategy.offload
    units = [_pending_unit(i, p) for i, p in enumerate(pending)]
    counts = [c.total for c in count_units(units, tok, opts)]
    stubs = [
        c.total
        for c in count_units(
            [
                _pending_unit(i, p, offload_stub(p, off.preview_chars))
                for i, p in enumerate(pending)
            ],
            tok,
            opts,
        )
    ]
    items = [
        PendingItem(i, p.name, len(p.content.encode("utf-8")), n, "keep", n)
        for i, (p, n) in enumerate(zip(pending, counts, strict=True))
    ]
    room = limit - used_tokens
    total = sum(counts)
    excess = total - room
    for item in sorted(items, key=lambda it: (-it.tokens, it.index)):
        if excess <= 0:
            break
        stub = stubs[item.index]
        if stub < item.tokens and (item.bytes > off.threshold_bytes or item.tokens - excess < stub):
            item.action, item.tokens_after = "offload", stub
        else:
            # a small output (or one shorter than its stub) is cut, down to nothing if need be
            item.action, item.tokens_after = "cut", max(0, item.tokens - excess)
        excess -= item.tokens - item.tokens_after
    after = sum(i.tokens_after for i in items)
    thresholds = config.thresholds
    return PendingPlan(
        items=items,
        room=room,
        tokens=total,
        tokens_after=after,
        fits_raw=total <= room,
        fits_after=after <= room,
        status_after=status_for(used_tokens + after, limit, thresholds),
    )


# --- threshold history (guard --replay) ------------------------------------------------------------------------------------


@dataclass
class ThresholdHistory:
    """`guard --replay`: the transcript walked message by message against one target's limit (not
    the agent-loop replay of `ctxkit.replay`, which compacts as it goes)."""

    checks: int
    by_status: dict[str, int]
    first: dict[str, dict[str, Any] | None]
    fires: int
    over_hits: int
    max_over_hits_per_hour: int | None
    trigger: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "checks": self.checks,
            "by_status": dict(self.by_status),
            "first": dict(self.first),
            "fires": self.fires,
            "over_hits": self.over_hits,
            "max_over_hits_per_hour": self.max_over_hits_per_hour,
            "trigger": self.trigger,
        }


def threshold_history(
    units: Sequence[Unit],
    unit_tokens: Sequence[int],
    fixed_tokens: int,
    limit: int,
    thresholds: Thresholds,
    fail_on: str = "compact",
) -> ThresholdHistory:
    """Walk the transcript as it grew: the first unit at which each status was reached, how
    many checks would have fired (status at or above `fail_on`), and over-hits (checks over the
    limit) within any one hour of timestamps, with the spec's "more than 2 in 1 hour" trigger."""
    by_status = dict.fromkeys(STATUSES, 0)
    first: dict[str, dict[str, Any] | None] = dict.fromkeys(STATUSES[1:], None)
    fires = 0
    over_times: list[float] = []
    over_hits = 0
    trigger: dict[str, Any] | None = None
    max_per_hour = 0
    used = fixed_tokens
    for i, (u, n) in enumerate(zip(units, unit_tokens, strict=True)):
        used += n
        status = status_for(used, limit, thresholds)
        by_status[status] += 1
        rank = status_rank(status)
        for name in STATUSES[1 : rank + 1]:
            if first[name] is None:
                first[name] = {
                    "message": i + 1,
                    "unit_id": u.id,
                    "tokens": used,
                    "timestamp": u.timestamp,
                }
        if rank >= status_rank(fail_on):
            fires += 1
        if status == "overflow":
            over_hits += 1
            if u.timestamp is not None:
                now = float(u.timestamp)
                bisect.insort(over_times, now)
                in_hour = bisect.bisect_right(over_times, now) - bisect.bisect_left(
                    over_times, now - OVER_HITS_WINDOW_S
                )
                max_per_hour = max(max_per_hour, in_hour)
                if trigger is None and in_hour > OVER_HITS_TRIGGER:
                    trigger = {
                        "message": i + 1,
                        "unit_id": u.id,
                        "timestamp": u.timestamp,
                        "over_hits_in_hour": in_hour,
                    }
    return ThresholdHistory(
        checks=len(units),
        by_status=by_status,
        first=first,
        fires=fires,
        over_hits=over_hits,
        max_over_hits_per_hour=max_per_hour if over_times or not over_hits else None,
        trigger=trigger,
    )


# --- results -----------------------------------------------------------------------------------


@dataclass
class TargetResult:
    """One target's evaluation."""

    target: Target
    status: str
    used: int
    regions: dict[str, int]
    tokenizer: str
    decision: str = ""  # chosen, skipped, does not fit
    schemas_only: bool = False
    notes: list[str] = field(default_factory=list)
    pending: PendingPlan | None = None
    replay: ThresholdHistory | None = None
    usage: RecordedUsage | None = None  # what the provider recorded, when the log says
    basis: str = "local count"  # or "recorded usage": what `used` rests on
    agents: list[AgentForecast] = field(default_factory=list)  # guard --as AGENT
    # in an agent loop: the one loop policy's trigger and goal for this log (`budget.policy`)
    loop: dict[str, Any] | None = None

    @property
    def limit(self) -> int:
        return self.target.limit

    @property
    def bound_by(self) -> str:
        return self.target.bound_by

    @property
    def remaining(self) -> int:
        """Tokens left under the limit in force (negative when over)."""
        return self.target.limit - self.used

    @property
    def used_fraction(self) -> float:
        return used_fraction(self.used, self.target.limit)

    @property
    def fits(self) -> bool:
        return self.status != "overflow"

    def to_dict(self) -> dict[str, Any]:
        """Plain fields for JSON output."""
        frac = self.used_fraction
        d: dict[str, Any] = {
            "target": self.target.name,
            "status": self.status,
            "decision": self.decision,
            "used": self.used,
            "limit": self.limit,
            "bound_by": self.bound_by,
            "rule": self.target.rule,
            "remaining": self.remaining,
            "used_fraction": round(frac, 4) if math.isfinite(frac) else None,
            "regions": dict(self.regions),
            "schemas_only_overflow": self.schemas_only,
            "tokenizer": self.tokenizer,
            "tokenizer_note": self.target.tokenizer_note or None,
            "notes": list(self.notes),
            "budget": self.target.to_dict(),
            "basis": self.basis,
            "recorded_usage": self.usage.to_dict() if self.usage is not None else None,
        }
        if self.agents:
            d["agents"] = [a.to_dict() for a in self.agents]
        if self.pending is not None:
            d["pending"] = self.pending.to_dict()
        if self.replay is not None:
            d["replay"] = self.replay.to_dict()
        if self.loop is not None:
            d["loop"] = dict(self.loop)
        return d


@dataclass
class Verdict:
    """The evaluation of one transcript against its targets."""

    transcript: Transcript
    results: list[TargetResult]
    chosen_index: int | None
    problems: list[Any] = field(default_factory=list)
    checked: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> TargetResult | None:
        return None if self.chosen_index is None else self.results[self.chosen_index]

    @property
    def verdict(self) -> str:
        """`fits` (a target was chosen) or `final` (none fits: the turn cannot go ahead)."""
        return "fits" if self.chosen is not None else "final"

    @property
    def status(self) -> str:
        """The chosen target's status, or overflow when none fits."""
        return self.chosen.status if self.chosen is not None else "overflow"

    def structural_errors(self) -> list[Any]:
        """Problems of severity error found by `check`."""
        return [p for p in self.problems if getattr(p, "severity", "error") == "error"]

    def exit_code(self, fail_on: str = "compact") -> int:
        """0 fits, 3 compaction needed, 4 blocked, 5 overflow or none fits; 6 structural errors."""
        code = exit_code_for(self.status, fail_on)
        if code == 0 and self.checked and self.structural_errors():
            return EXIT_PROBLEMS
        return code

    @property
    def recorded_model(self) -> dict[str, Any] | None:
        """The model the log records (`metadata["model"]`) and the models.toml row it resolves
        to, or the nearest names when it resolves to none; None when the log names no model."""
        return recorded_model(self.transcript)

    def to_dict(self, fail_on: str = "compact") -> dict[str, Any]:
        """Plain fields for JSON output."""
        t = self.transcript
        d: dict[str, Any] = {
            "path": t.path,
            "transcript": t.id,
            "line": t.line,
            "units": len(t.units),
            "verdict": self.verdict,
            "chosen": self.chosen.target.name if self.chosen else None,
            "status": self.status,
            "exit_code": self.exit_code(fail_on),
            "targets": [r.to_dict() for r in self.results],
            "recorded_model": self.recorded_model,
        }
        if self.checked:
            d["problems"] = [
                {
                    "kind": p.kind,
                    "unit_id": p.unit_id,
                    "message": p.message,
                    "severity": getattr(p, "severity", "error"),
                }
                for p in self.problems
            ]
        return d


# --- evaluation --------------------------------------------------------------------------------


def recorded_model(t: Transcript) -> dict[str, Any] | None:
    """The model a log records and what it resolves to in models.toml: `name`, `matched` (the
    row, or None) and `suggestions` (the nearest names when there is no row).

    The guard does not take it as the target by itself: `--model` names the budget, so the same
    command checks every file against the same limit and `count`'s figure (its tokenizer) is the
    guard's; the verdict says which model the log ran on and how to check against it.
    """
    from ctxkit.budget.models import find_model, model_suggestions

    name = t.metadata.get("model")
    if not isinstance(name, str) or not name.strip():
        return None
    info, matched = find_model(name)
    return {
        "name": name,
        "matched": matched or None,
        "context_window": info.context_window if info is not None else None,
        "suggestions": [] if info is not None else model_suggestions(name),
    }


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
    # against that model under its agent's own budget (`budget.resolve.log_target`) instead
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
    ignores recorded usage. `as_agents` names coding agents (`ctxkit.recipes.triggers.RULES`)
    whose own auto-compaction trigger is applied to each target's window; with `replay` also
    at which unit each would first have compacted and how many times. When the tool schemas alone pass `tool_threshold` of a target's effective
    window, its notes say so (None: never). `tokenizers` caches tokenizers across calls;
    `trace` hears each step.
    """
    s = settings or GuardSettings()
    system, tools, check, fail_on, opts = s.system, s.tools, s.check, s.fail_on, s.count_opts
    rules = [get_rule(name) for name in s.as_agents]
    if s.from_log:
        from ctxkit.budget.resolve import log_target

        named = log_target(t, config=s.config, tokenizer=targets[0].tokenizer if targets and
                           targets[0].sources.get("tokenizer") == "flag" else None)
        if named is not None:
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
            f"recorded usage: {usage.recorded} at call {usage.calls} (after unit "
            f"{usage.after_unit}"
            + (f" of the original in {usage.origin}" if usage.origin else "")
            + f"); counted {usage.estimated} for that context; {usage.explain()}"
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
    ratio = usage.ratio if usage is not None else 1.0
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


def walk_tokens(t: Transcript, tc: Any, measured: Any, fixed: int, tok: Any) -> list[int]:
    """What each unit adds to the context as the log grew, for `guard --replay` and the
    agents' forecasts: its count at the fitted ratio, the agent's reminders where the log shows
    them, and, where the log recorded a call, what the provider counted: the walk is at each
    recorded call's figure after the unit it followed (content the agent pruned shows as a
    fall), and at the verdict's figure (`measured.total`) after the last unit."""
    from ctxkit.tokens.accounting import attachment_texts

    usage = measured.usage
    ratio = usage.ratio if usage is not None else 1.0
    out = [round(u.total * ratio) for u in tc.units] if ratio != 1.0 else [u.total for u in tc.units]
    if not out:
        return out
    last = len(out) - 1
    for after, text in attachment_texts(t):
        out[min(max(after, 0), last)] += round(ratio * tok.count(text))
    # an agent's own compaction inside the log (`--include-compacted`): the calls after it saw
    # another context, so the walk goes on with the log's content, as if it had not compacted
    # (what `--as` forecasts from)
    cut = len(out)
    if usage is not None and not usage.origin:
        cut = next((i for i, u in enumerate(t.units) if i and u.type == "summary"), cut)
        prefix = list(itertools.accumulate(out))
        shift, previous = 0, -1  # what the anchors before added; the last anchored unit
        for recorded, _, after in usage.fit.calls:  # in call order: after_unit never falls
            if previous <= after < cut:
                delta = recorded - fixed - (prefix[after] + shift)
                out[after] += delta
                shift += delta
                previous = after
    if cut == len(out):
        out[last] += measured.total - fixed - sum(out)
    return out


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


# --- inputs beside the transcript and the combined exit code ----------------------------


def load_pending(path: str) -> list[PendingOutput]:
    """Pending tool outputs: a JSON list of strings or {name, content}, or JSONL of either."""
    import orjson

    from ctxkit.formats.extras import read_text_file

    text = read_text_file(path)
    items: list[tuple[int | None, Any]]
    try:
        data = orjson.loads(text)
        if not isinstance(data, list):
            data = [data]
        items = [(None, d) for d in data]
    except orjson.JSONDecodeError:
        items = []
        for n, text_line in enumerate(text.splitlines(), 1):
            if not text_line.strip():
                continue
            try:
                items.append((n, orjson.loads(text_line)))
            except orjson.JSONDecodeError as exc:
                raise InputError(path, n, f"not valid JSON: {exc.msg}", text_line) from None
    out = []
    for i, (line, item) in enumerate(items):
        if isinstance(item, str):
            out.append(PendingOutput(name=f"output{i + 1}", content=item))
        elif isinstance(item, dict) and isinstance(item.get("content"), str):
            out.append(
                PendingOutput(
                    name=str(item.get("name") or f"output{i + 1}"), content=item["content"]
                )
            )
        else:
            raise InputError(
                path,
                line,
                f'pending output #{i + 1}: expected a string or {{"name", "content"}} with string content',
            )
    return out


def combine_exit_codes(codes: Sequence[int]) -> int:
    """The worst exit code over several transcripts and gates (5 > 4 > 3 > 7 > 6 > 0)."""
    order = {
        0: 0,
        EXIT_PROBLEMS: 1,
        EXIT_REGRESSION: 2,
        EXIT_CODES["warn"]: 3,
        EXIT_CODES["block"]: 4,
        EXIT_CODES["overflow"]: 5,
    }
    return max(codes, key=lambda c: order.get(c, len(order)))


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
