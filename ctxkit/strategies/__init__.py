"""The compaction strategies, by config name.

Each is a pure function `(state, params) -> state | None` (None = cannot help); see `base`.
`hybrid` is not here: it is the chain itself, repeated (see `ctxkit.chain`).
"""

from __future__ import annotations

from typing import Any

from ctxkit.errors import unknown_name
from ctxkit.strategies import mask_observations as _mask
from ctxkit.strategies import offload as _offload
from ctxkit.strategies.base import (
    Context,
    State,
    Strategy,
    archive_unit,
    placeholder,
    protected,
)

STRATEGIES: dict[str, Strategy] = {
    "offload": _offload.offload,
    "mask_observations": _mask.mask_observations,
}

DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "offload": dict(_offload.DEFAULTS),
    "mask_observations": dict(_mask.DEFAULTS),
}


def get_strategy(name: str) -> Strategy:
    """The strategy registered under `name`; an unknown name is a UsageError listing the known."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise unknown_name("strategy", name, STRATEGIES) from None


__all__ = [
    "Context",
    "DEFAULT_PARAMS",
    "STRATEGIES",
    "State",
    "Strategy",
    "archive_unit",
    "get_strategy",
    "placeholder",
    "protected",
]
