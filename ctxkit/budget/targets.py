"""A target's budget resolved from flags, the configuration and `models.toml`.

Each budget value resolves in this order: flag, per-model config (`models:`), per-provider config
(`providers:`), `models.toml`, default. Policy limits come from the configuration or `--limit`,
`--agent`, `--llm`; the smaller of the model's effective limit and the policy limit binds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ctxkit.budget import (
    DEFAULT_CONTEXT_WINDOW,
    P1_AGENT_UPLIFT,
    ModelBudget,
    PolicyLimit,
    Target,
    default_buffer,
    default_max_output,
    effective_limit,
)
from ctxkit.budget.limits import BudgetConfig, ModelOverride
from ctxkit.budget.models import find_model, model_suggestions
from ctxkit.errors import UsageError
from ctxkit.tokens.loaders import DEFAULT_TOKENIZER


@dataclass(frozen=True)
class BudgetRequest:
    """What names a budget: the budget flags of a command and the configuration (None: not
    given). With none of them, a log names its own (`budget.resolve.log_target`)."""

    model: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    buffer_tokens: int | None = None
    limit: int | None = None
    agent: str | None = None
    llm: str | None = None
    tokenizer: str | None = None
    # left out of the hash (its tables are dicts): a `SettingsSpec` holding a request keys a cache
    config: BudgetConfig = field(default_factory=BudgetConfig, hash=False)

    @property
    def from_log(self) -> bool:
        """Whether a log's own target applies: nothing names another budget (no model, window,
        output, buffer, limit or policy flag, no `default_limit` in the configuration)."""
        given = (self.context_window, self.max_output_tokens, self.buffer_tokens, self.limit)
        named = bool(self.model) or bool(self.agent) or bool(self.llm)
        return not named and all(v is None for v in given) and self.config.default_limit is None

    def for_model(self, model: str | None) -> BudgetRequest:
        """The same request naming `model` (guard checks each --model in turn)."""
        return replace(self, model=model)


def resolve_model_budget(request: BudgetRequest) -> ModelBudget:
    """Resolve window, output reserve, buffer and tokenizer: flags, per-model config,
    per-provider config, models.toml, default.

    >>> resolve_model_budget(BudgetRequest("gpt-4o")).effective_limit
    103424
    """
    model, config = request.model, request.config
    context_window, max_output_tokens = request.context_window, request.max_output_tokens
    info, matched = find_model(model) if model else (None, "")
    given = (context_window, max_output_tokens, request.buffer_tokens)
    name = model or ("custom" if any(v is not None for v in given) else "default")
    model_cfg = _lookup(config.models, model, matched)
    if model and info is None and model_cfg is None and context_window is None:
        close = model_suggestions(model)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise UsageError(
            f"unknown model {model!r}; {hint}`ctxkit models` lists the known ones. Give "
            "--window (and --max-output), or add it under context_config.models"
        )
    provider = info.provider if info else (model.split("/", 1)[0] if model and "/" in model else "")
    provider_cfg = config.providers.get(provider) if provider else None
    notes: list[str] = []
    if info is not None and matched != (model or "").lower():
        notes.append(f"{model} matched as {matched}")
    sources: dict[str, str] = {}

    def pick(key: str, flag: Any, table: Any) -> Any:
        for value, src in (
            (flag, "flag"),
            (getattr(model_cfg, key, None), f"config models.{model}"),
            (getattr(provider_cfg, key, None), f"config providers.{provider}"),
            (table, "models.toml"),
        ):
            if value is not None:
                sources[key] = src
                return value
        sources[key] = "default"
        return None

    window = pick("context_window", context_window, info.context_window if info else None)
    window = DEFAULT_CONTEXT_WINDOW if window is None else int(window)
    output = pick("max_output_tokens", max_output_tokens, info.max_output_tokens if info else None)
    if output is None:
        output = default_max_output(window)
    elif sources["max_output_tokens"] == "models.toml" and output > window // 2:
        notes.append(
            f"max output {output} reserved as {window // 2} (half the {window}-token window)"
        )
        output = window // 2
    buffer = pick("buffer_tokens", request.buffer_tokens, None)
    buffer = default_buffer(window) if buffer is None else int(buffer)
    tok = pick("tokenizer", request.tokenizer, info.tokenizer if info else None) or DEFAULT_TOKENIZER
    note = ""
    if info is not None and info.tokenizer_proxy and sources["tokenizer"] == "models.toml":
        note = info.tokenizer_note or f"no public tokenizer; {tok} is a proxy"
    if info is not None and info.notes:
        notes.append(info.notes)
    limit = effective_limit(window, buffer, int(output))
    if limit <= 0:
        raise UsageError(
            f"{name}: effective limit {window} - {buffer} (buffer) - {output} (max output) = "
            f"{limit}, no room for input; lower --buffer or --max-output, or raise --window"
        )
    return ModelBudget(
        name=name,
        provider=provider,
        context_window=window,
        max_output_tokens=int(output),
        buffer_tokens=buffer,
        effective_limit=limit,
        tokenizer=tok,
        tokenizer_note=note,
        sources=sources,
        notes=tuple(notes),
    )


def _lookup(
    table: dict[str, ModelOverride], model: str | None, matched: str
) -> ModelOverride | None:
    if not model:
        return None
    for key in (model, model.lower(), matched):
        if key and key in table:
            return table[key]
    return None


# --- policy limits


def policy_applies(
    config: BudgetConfig, *, limit: int | None = None, agent: str | None = None, llm: str | None = None
) -> bool:
    """Policy limits are in play when the configuration sets `default_limit` or a policy flag
    is given (a file that leaves default_limit unset leaves each log its own target)."""
    return config.default_limit is not None or limit is not None or bool(agent) or bool(llm)


def resolve_policy(
    config: BudgetConfig,
    *,
    limit: int | None = None,
    agent: str | None = None,
    llm: str | None = None,
) -> PolicyLimit | None:
    """The policy limit in play (None when no policy applies): `--limit` exactly, else the
    smaller of the agent's and the LLM type's limits, else default_limit when set; config
    limits are raised to min_limit."""
    if not policy_applies(config, limit=limit, agent=agent, llm=llm):
        return None
    if limit is not None:
        if limit <= 0:
            raise UsageError(f"--limit {limit}: the limit must be a positive number of tokens")
        return PolicyLimit(limit, "--limit")
    found: list[tuple[int, str]] = []
    if agent:
        policy = config.agents.get(agent)
        if policy is None:
            known = ", ".join(sorted(config.agents)) or "(none configured)"
            raise UsageError(
                f"unknown agent {agent!r}; known: {known} (add it under context_config.agents)"
            )
        if policy.priority == 1:
            found.append((math.floor(policy.limit * P1_AGENT_UPLIFT), f"agent {agent} (P1 +20%)"))
        else:
            found.append((policy.limit, f"agent {agent}"))
    if llm:
        entry = next((e for e in config.per_llm if e.type.lower() == llm.lower()), None)
        if entry is None:
            # like --agent: a typo must not pass silently for the default limit
            known = ", ".join(sorted(e.type for e in config.per_llm)) or "(none configured)"
            raise UsageError(
                f"unknown LLM type {llm!r}; known: {known} (add it under context_config.per_llm)"
            )
        if entry.follow_default or entry.limit is None:
            if config.default_limit is not None:  # unset: no policy limit, as without --llm
                found.append((config.default_limit, f"per_llm {entry.type} (follows default_limit)"))
        else:
            found.append((entry.limit, f"per_llm {entry.type}"))
    if not found and config.default_limit is not None:
        found.append((config.default_limit, "default_limit"))
    if not found:
        return None
    value, rule = min(found, key=lambda item: item[0])
    if value < config.min_limit:
        return PolicyLimit(config.min_limit, f"{rule} {value}, raised to min_limit", floored=True)
    return PolicyLimit(value, rule)


# --- a target: model budget + policy


def resolve_target(model: str | None = None, **flags: Any) -> Target:
    """The budget of one target named by `model` and the keywords of a `BudgetRequest`.

    >>> resolve_target(context_window=128000, buffer_tokens=8192, max_output_tokens=16384).limit
    103424
    """
    if flags.get("config") is None:
        flags.pop("config", None)
    return request_target(BudgetRequest(model, **flags))


def request_target(request: BudgetRequest) -> Target:
    """The budget a request names: the model's effective limit, the policy limit, the smaller
    binds."""
    config, limit = request.config, request.limit
    mb = resolve_model_budget(request)
    policy = resolve_policy(config, limit=limit, agent=request.agent, llm=request.llm)
    in_force, bound_by = mb.effective_limit, "model"
    notes = list(mb.notes)
    if policy is not None and policy.limit < mb.effective_limit:
        in_force, bound_by = policy.limit, "policy"
    elif limit is not None and policy is not None and policy.limit > mb.effective_limit:
        if mb.name == "default":
            # No model was named: the default window is a guess, the limit is what was asked.
            in_force, bound_by = policy.limit, "policy"
            notes.append(
                f"--limit {limit:,} taken as given: no model was named (the default window's "
                f"limit would be {mb.effective_limit:,}; --model or --window to check one)"
            )
        else:
            notes.append(
                f"--limit {limit:,} is above {mb.name}'s own limit {mb.effective_limit:,} "
                f"(window {mb.context_window:,} - buffer {mb.buffer_tokens:,} - max output "
                f"{mb.max_output_tokens:,}): the model's limit binds"
            )
    window = {f.name: getattr(mb, f.name) for f in fields(mb)}
    return Target(
        **{**window, "notes": tuple(notes)},
        policy_limit=policy.limit if policy else None,
        policy_rule=policy.rule if policy else "",
        limit=in_force,
        bound_by=bound_by,
        thresholds=config.thresholds,
    )
