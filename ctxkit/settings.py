"""Flags + configuration -> the settings of one compaction run.

`compact`, `score-rl` and `bench` resolve their budget here, through the guard's own
`resolve_target`, so a transcript that `ctxkit compact --model X` produces is one that
`ctxkit guard --model X` passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxkit.budget import Target, compaction_target, resolve_target
from ctxkit.chain import ChainOptions, expand_chain
from ctxkit.config import STRATEGY_NAMES, Config, load_config
from ctxkit.errors import UsageError
from ctxkit.tokens import CountOptions, Tokenizer


@dataclass(frozen=True)
class CompactSettings:
    """Everything `chain.compact` needs besides the transcript."""

    limit: int
    target: int
    tokenizer: Tokenizer
    tokenizer_label: str
    count_opts: CountOptions
    options: ChainOptions
    config: Config
    budget: Target


def chain_options(
    config: Config, chain: str | None = None, recovery: str | None = None, seed: int = 0
) -> ChainOptions:
    """The chain, parameters and recovery a configuration (and flags) ask for."""
    bs = config.breaking_strategy
    names = tuple(n.strip() for n in chain.split(",") if n.strip()) if chain else bs.chain_order
    if not names:
        raise UsageError("--chain is empty; give strategy names separated by commas")
    return ChainOptions(
        chain=expand_chain(names),
        params={name: bs.params(name) for name in STRATEGY_NAMES},
        max_iterations=bs.hybrid.max_iterations,
        recovery_mode=recovery or config.recovery_mode,
        handover_tokens=config.handover_tokens,
        seed=seed,
    )


def compact_settings(
    *,
    limit: int | None = None,
    model: str | None = None,
    target: int | None = None,
    config_path: str | None = None,
    config: Config | None = None,
    tokenizer: str | None = None,
    image_tokens: int | None = None,
    tool_schema_scale: float | None = None,
    chain: str | None = None,
    recovery: str | None = None,
    seed: int = 0,
    warn: Callable[[str], None] | None = None,
) -> CompactSettings:
    """Resolve the limit (--limit, else the model's budget, else the configured default) and the goal."""
    from ctxkit.guard import TokenizerCache

    cfg = config or load_config(config_path)
    budget = resolve_target(model, config=cfg, limit=limit, tokenizer=tokenizer)
    tok, label, warning = TokenizerCache().get(budget)
    if warning and warn:
        warn(warning)
    goal = target if target is not None else compaction_target(budget.limit, budget.thresholds)
    if goal > budget.limit:
        raise UsageError(
            f"--target {goal:,} is above the limit {budget.limit:,}; pick a smaller target"
        )
    defaults = CountOptions()
    count_opts = CountOptions(
        image_tokens=defaults.image_tokens if image_tokens is None else image_tokens,
        tool_schema_scale=defaults.tool_schema_scale
        if tool_schema_scale is None
        else tool_schema_scale,
    )
    return CompactSettings(
        limit=budget.limit,
        target=goal,
        tokenizer=tok,
        tokenizer_label=label,
        count_opts=count_opts,
        options=chain_options(cfg, chain, recovery, seed),
        config=cfg,
        budget=budget,
    )
