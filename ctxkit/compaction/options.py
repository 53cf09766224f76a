"""How to compact: the chain of strategies, their parameters and the recovery mode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.errors import unknown_name
from ctxkit.strategies import DEFAULT_CHAIN, DEFAULT_PARAMS, STRATEGIES


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
