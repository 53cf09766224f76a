"""The one budget resolver (`resolve_budget`): what flags and the configuration name, else the
target a log names: the model it records, under the budget of the agent that wrote it.

With no model, window or limit given (and no `default_limit` in the configuration), `count`,
`guard`, `compact`, `fidelity`, `score-rl` and `replay` check a log against what it ran on: its
recorded model (`Transcript.metadata["model"]`), found by name in models.toml, else by family
(the nearest known model of the same family whose window holds the log's largest recorded call),
with a note; and, for a log of a coding agent, that agent's own budget on it (`budget.agents`):
the most it sends is the limit, and the guard's compact threshold is where the agent itself
compacts (unless the configuration sets `compact_threshold`). The output reserve is the agent's
own (Claude Code keeps min(max output, 20k)), not a share of the window.

    >>> from ctxkit.model import Transcript
    >>> t = Transcript(units=[], source_format="claude-code", metadata={"model": "claude-opus-4-6"})
    >>> target = log_target(t)
    >>> target.name, target.limit, target.thresholds.compact
    ('claude-opus-4-6', 197000, 0.8375)

Every command and the replays ask `resolve_budget` with one `BudgetRequest` and pass the
`Target` it gives whole: model, window, output reserve, buffer, limit and thresholds, each
value with where it came from (`Target.sources`).
"""

from __future__ import annotations

from dataclasses import replace

from ctxkit.budget import Target, Thresholds
from ctxkit.budget.agents import agent_budget, agent_of_format, thresholds_for
from ctxkit.budget.limits import BudgetConfig
from ctxkit.budget.models import ModelInfo, find_family, find_model
from ctxkit.budget.targets import BudgetRequest, request_target
from ctxkit.model import Transcript
from ctxkit.tokens.loaders import DEFAULT_TOKENIZER


def recorded_model_name(t: Transcript) -> str | None:
    """The model name the log records, or None."""
    name = t.metadata.get("model")
    return name.strip() if isinstance(name, str) and name.strip() and not name.startswith("<") else None


def largest_call(t: Transcript) -> int:
    """The largest input any recorded call of the log had (0 when none is recorded)."""
    usage = t.metadata.get("provider_usage") or {}
    calls = usage.get("calls") if isinstance(usage, dict) else None
    return max(
        (int(c.get("input_tokens") or 0) for c in calls or [] if isinstance(c, dict)), default=0
    )


def model_of(t: Transcript) -> tuple[ModelInfo | None, str, list[str]]:
    """The models.toml row of the model a log records (by name, else by family), the name it
    resolved to, and notes for people; (None, "", []) when the log names no model, or one of
    no known family."""
    name = recorded_model_name(t)
    if name is None:
        return None, "", []
    info, matched = find_model(name)
    if info is not None:
        return info, matched, []
    need = largest_call(t)
    info, matched = find_family(name, at_least=need)
    if info is None:
        return None, "", [f"the log records {name}, of no family models.toml knows: give --model"]
    why = f", whose window holds the log's largest call ({need:,})" if need else ""
    return info, matched, [
        f"the log records {name}, not in models.toml: taken as {matched} (same family{why}); "
        f"--model to name another"
    ]


def log_target(
    t: Transcript, *, config: BudgetConfig | None = None, tokenizer: str | None = None
) -> Target | None:
    """The target the log names (see the module doc), or None when it names no known model."""
    info, matched, notes = model_of(t)
    if info is None:
        return None
    config = config or BudgetConfig()
    # counted as `count` counts it (its tokenizer, unless one is asked for): the fit of the
    # log's recorded usage carries the provider's own tokenizer in its ratio
    base = request_target(BudgetRequest(matched, tokenizer=tokenizer or DEFAULT_TOKENIZER, config=config))
    sources = {**base.sources, "tokenizer": "flag" if tokenizer else "default"}
    base = replace(base, notes=(*base.notes, *notes), sources=sources, tokenizer_note="")
    agent = agent_of_format(t.source_format)
    if agent is None:
        return replace(base, notes=(*base.notes, f"the model the log records: {matched}"))
    window = info.context_window
    recorded_window = t.metadata.get("context_window")
    if agent == "codex" and isinstance(recorded_window, int) and recorded_window > 0:
        # Codex records what it allows the model: 95% of the window
        window = round(recorded_window * 100 / 95)
    ab = agent_budget(agent, window, info.max_output_tokens or 0)
    warn, compact, block = thresholds_for(ab, config.warning_threshold, config.block_threshold)
    # a compact threshold the file or a flag sets holds as set; else the agent's own point
    thresholds = Thresholds(warn, compact, block)
    if config.compact_threshold is not None:
        thresholds = config.thresholds
    note = (
        f"{ab.label} on {matched}: window {window:,}; it {ab.rule} (compacts at {ab.trigger:,}, "
        f"sends up to {ab.limit:,}; the guard says compact from "
        f"{thresholds.bounds(ab.limit)['compact']:,}); --model or --limit to check another budget"
    )
    kept = tuple(n for n in base.notes if "reserved as" not in n)  # the agent's reserve replaces it
    return replace(
        base,
        context_window=window,
        max_output_tokens=ab.reserve,
        # the agent's own rule sets the limit: what it leaves beyond its output reserve, never
        # less than nothing (Claude Code sends up to W - 3k whatever it reserves for output)
        buffer_tokens=max(0, window - ab.reserve - ab.limit),
        effective_limit=ab.limit,
        limit=ab.limit,
        bound_by="agent",
        thresholds=thresholds,
        sources={**base.sources, "limit": f"agent {agent}", "context_window": "models.toml"
                 if window == info.context_window else "the log (Codex's model_context_window)"},
        notes=(*kept, note),
        agent=agent,
    )


def resolve_budget(request: BudgetRequest, t: Transcript | None = None) -> Target:
    """The one budget: the target the log `t` names when the request names no other (and the
    log a known model), else the target of the flags, the configuration and models.toml.

    >>> resolve_budget(BudgetRequest(context_window=128000, max_output_tokens=16384)).limit
    103424
    """
    if t is not None and request.from_log:
        named = log_target(t, config=request.config, tokenizer=request.tokenizer)
        if named is not None:
            return named
    return request_target(request)
