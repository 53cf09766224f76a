"""The budget's keys of the configuration: the policy limits (`min_limit`, `default_limit`,
`per_llm`, `agents`), the thresholds, and per-model and per-provider budget overrides.

They are the first keys of `context_config` (`config.file.Config` extends `BudgetConfig`), kept
here so the budget resolves a target from them without importing the configuration, which is
built from the strategy, embedder and summarizer registries above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxkit.budget import Thresholds
from ctxkit.errors import ConfigError
from ctxkit.fields import (
    boolean,
    fail,
    integer,
    mapping,
    named_map,
    number,
    optional,
    section,
    setting,
    text,
)


def _priority(value: Any, path: str) -> int | None:
    if value is None:
        return None
    text = str(value).strip().upper()
    if isinstance(value, bool) or text.lstrip("P") not in ("1", "2", "3"):
        raise fail(path, value, "is not a priority", "1, 2, 3, P1, P2, P3 or null")
    return int(text.lstrip("P"))


@dataclass(frozen=True)
class AgentPolicy:
    """An agent's policy limit; a P1 agent gets 20% more."""

    limit: int = setting(5000, integer(1))
    priority: int | None = setting(None, _priority)


def _agent(value: Any, path: str) -> AgentPolicy:
    if isinstance(value, int) and not isinstance(value, bool):
        return AgentPolicy(limit=integer(1)(value, path))
    data = mapping(value, path)
    if "limit" not in data:
        raise ConfigError(
            f"{path}: missing key limit; allowed: an integer limit, or a mapping with limit and priority"
        )
    return section(AgentPolicy)(data, path)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class PerLLM:
    """A limit for one LLM type; `follow_default` means "use default_limit"."""

    type: str = setting("", text(optional=False))
    limit: int | None = setting(None, optional(integer(1)))
    follow_default: bool = setting(False, boolean)


def _per_llm(value: Any, path: str) -> tuple[PerLLM, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise fail(
            path, value, "is not a list", "a list of {type, limit} or {type, follow_default: true}"
        )
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        entry = section(PerLLM)(item, where)
        if not entry.type:
            raise ConfigError(
                f"{where}: missing key type; allowed: a mapping with type and limit or follow_default"
            )
        if entry.limit is None and not entry.follow_default:
            raise ConfigError(
                f"{where}: neither limit nor follow_default; allowed: limit: <integer> or follow_default: true"
            )
        out.append(entry)
    return tuple(out)


@dataclass(frozen=True)
class ModelOverride:
    """Budget values for one model or provider; unset values fall through to the next source."""

    context_window: int | None = setting(None, optional(integer(1)))
    max_output_tokens: int | None = setting(None, optional(integer(0)))
    buffer_tokens: int | None = setting(None, optional(integer(0)))
    tokenizer: str | None = setting(None, text())


DEFAULT_AGENTS = {"verification": AgentPolicy(limit=4000), "coding": AgentPolicy(limit=5000)}


@dataclass(frozen=True)
class BudgetConfig:
    """The budget's keys of `context_config`, with the spec's defaults."""

    min_limit: int = setting(3500, integer(1))
    # unset (None): no policy limit; each log is checked against the target it names (its model
    # under its agent's budget), else the model's effective limit
    default_limit: int | None = setting(None, optional(integer(1)))
    warning_threshold: float = setting(Thresholds.warn, number(0.0, 1.0, low_open=True))
    # unset (None): 0.95, except against a coding agent's own budget, where the guard says
    # compact one call's growth before the agent compacts itself (`budget.agents.thresholds_for`)
    compact_threshold: float | None = setting(
        None, optional(number(0.0, 1.0, low_open=True))
    )
    block_threshold: float = setting(Thresholds.block, number(0.0, 1.0, low_open=True))
    per_llm: tuple[PerLLM, ...] = setting((), _per_llm)
    agents: dict[str, AgentPolicy] = setting(DEFAULT_AGENTS, named_map(_agent))
    models: dict[str, ModelOverride] = setting({}, named_map(section(ModelOverride)))
    providers: dict[str, ModelOverride] = setting({}, named_map(section(ModelOverride)))

    @property
    def thresholds(self) -> Thresholds:
        """The warn, compact and block fractions this configuration sets (compact 0.95 unset)."""
        compact = Thresholds.compact if self.compact_threshold is None else self.compact_threshold
        return Thresholds(self.warning_threshold, compact, self.block_threshold)
