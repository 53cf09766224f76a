"""Flags + configuration -> the settings of one compaction run.

`compact`, `score-rl` and `bench` resolve their budget here, through the one budget resolver
(`budget.resolve.resolve_budget`, the guard's too), so a transcript that
`ctxkit compact --model X` produces is one that `ctxkit guard --model X` passes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ctxkit.budget.resolve import BudgetRequest, resolve_budget
from ctxkit.compaction import ChainOptions, CompactSettings, expand_chain
from ctxkit.config.file import Config, load_config
from ctxkit.counting import count_options
from ctxkit.errors import UsageError
from ctxkit.tokens import Tokenizer


def chain_options(
    config: Config, chain: str | None = None, recovery: str | None = None, seed: int = 0
) -> ChainOptions:
    """The chain, parameters and recovery a configuration (and flags) ask for."""
    bs = config.breaking_strategy
    names = tuple(n.strip() for n in chain.split(",") if n.strip()) if chain is not None else bs.chain_order
    if not names:
        raise UsageError("--chain is empty; give strategy names separated by commas")
    return ChainOptions(
        chain=expand_chain(names),
        params={name: bs.params(name) for name in bs.strategies},
        max_iterations=bs.hybrid.max_iterations,
        recovery_mode=recovery or config.recovery_mode,
        handover_tokens=config.handover_tokens,
        seed=seed,
    )


@dataclass(frozen=True)
class SettingsSpec:
    """The flags a run's `CompactSettings` are built from, the budget ones as one `BudgetRequest`
    (its configuration is the one `config_path` names): frozen and picklable, so a Ray worker
    builds the same settings from it as the driver."""

    budget: BudgetRequest = field(default_factory=BudgetRequest)
    target: int | None = None
    config_path: str | None = None
    image_tokens: int | None = None
    tool_schema_scale: float | None = None
    chain: str | None = None
    recovery: str | None = None
    seed: int = 0
    embedder: str | None = None
    embedder_model: str | None = None
    embedding_cache: bool | None = None
    summarizer: str | None = None
    llm_url: str | None = None
    llm_model: str | None = None
    use_usage: bool = True

    def portable(self) -> SettingsSpec:
        """The same flags with the config file's absolute path, for a worker elsewhere."""
        if self.config_path is None:
            return self
        return replace(self, config_path=os.path.abspath(self.config_path))

    def build(
        self,
        *,
        config: Config | None = None,
        progress: bool = False,
        warn: Callable[[str], None] | None = None,
    ) -> CompactSettings:
        """Flags and configuration (`config`, else the file `config_path` names) -> one
        `CompactSettings`: the limit (--limit, else the model's budget, else the configured
        default), thresholds, chain, tokenizer, embedder, summarizer (a bad flag fails here)."""
        from ctxkit.tokens import TokenizerCache

        cfg = config or load_config(self.config_path)
        request = replace(self.budget, config=cfg)
        budget = resolve_budget(request)
        target = self.target
        from_log = target is None and request.from_log
        tok, label, warning = TokenizerCache().get(budget)
        if warning and warn:
            warn(warning)
        if warn:
            for note in budget.notes:
                if note.startswith("--limit ") and note.endswith("the model's limit binds"):
                    warn(f"ctxkit: {note}")  # a limit the model's window overrides
        if target is not None and target > budget.limit:
            raise UsageError(
                f"--target {target:,} is above the limit {budget.limit:,}; pick a smaller target"
            )
        return CompactSettings(
            embedder=build_embedder(cfg, self.embedder, self.embedder_model, self.embedding_cache, warn, progress),
            summarizer=build_summarizer(cfg, self.summarizer, self.llm_url, self.llm_model, tok, warn),
            limit=budget.limit,
            target=target,
            thresholds=budget.thresholds,
            tokenizer=tok,
            tokenizer_label=label,
            count_opts=count_options(self.image_tokens, self.tool_schema_scale),
            options=chain_options(cfg, self.chain, self.recovery, self.seed),
            budget=budget,
            use_usage=self.use_usage,
            from_log=from_log,
            config=cfg if from_log else None,
        )


def compact_settings(
    *,
    limit: int | None = None,
    model: str | None = None,
    tokenizer: str | None = None,
    config: Config | None = None,
    progress: bool = False,
    warn: Callable[[str], None] | None = None,
    **flags: Any,
) -> CompactSettings:
    """`SettingsSpec.build` of the budget flags `limit`, `model`, `tokenizer` and the other
    flags of a `SettingsSpec` (`target`, `chain`, `summarizer`, ...) as keywords."""
    request = BudgetRequest(model=model, limit=limit, tokenizer=tokenizer)
    return SettingsSpec(budget=request, **flags).build(config=config, progress=progress, warn=warn)


def build_embedder(
    config: Config,
    name: str | None = None,
    model: str | None = None,
    cache: bool | None = None,
    warn: Callable[[str], None] | None = None,
    progress: bool = False,
) -> Any:
    """The embedder flags or config ask for (`auto`: MiniLM when it loads, else lexical, said once).

    Loading is lazy inside the embedder, so building one costs nothing until a strategy scores.
    """
    from ctxkit.embedders import get_embedder

    choice = config.embedder
    return LazyEmbedder(
        lambda: get_embedder(
            name or choice.name,
            model=model or choice.model,
            cache=choice.cache if cache is None else cache,
            warn=warn,
            progress=progress,
        )
    )


class LazyEmbedder:
    """Builds the real embedder on first use: a transcript that fits, or a chain that never
    scores relevance, never imports torch."""

    def __init__(self, build: Callable[[], Any]):
        self._build = build
        self._real: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._real is None:
            self._real = self._build()
        return getattr(self._real, attr)


def build_summarizer(
    config: Config,
    name: str | None = None,
    url: str | None = None,
    model: str | None = None,
    tok: Tokenizer | None = None,
    warn: Callable[[str], None] | None = None,
) -> Callable[..., str]:
    """The summarizer flags or config ask for; `llm` takes its retries from `retry_policies`."""
    from ctxkit.summarizers import make_summarizer

    choice = name or config.summarizer.name
    if choice != "llm":
        return make_summarizer(choice, tok=tok)
    from ctxkit.summarizers.llm import settings_from_env

    retry = config.retry_policies.for_tool("summarizer")
    settings = settings_from_env(
        url or config.summarizer.url,
        model or config.summarizer.model,
        timeout_s=retry.timeout_s,
        max_attempts=retry.max_attempts,
        backoff_base_s=retry.backoff_base_s,
        max_delay_s=retry.max_delay_s,
    )
    return make_summarizer("llm", llm_settings=settings, tok=tok, warn=warn)
