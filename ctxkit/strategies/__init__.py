"""The compaction strategies, by config name.

Each is a pure function `(state, params) -> state | None` (None = cannot help); see `base`.
`hybrid` is not here: it is the chain itself, repeated (see `ctxkit.compaction`).
"""

from __future__ import annotations

from typing import Any

from ctxkit.errors import unknown_name
from ctxkit.strategies import content_type_chunking as _chunking
from ctxkit.strategies import discard_low_rel as _discard
from ctxkit.strategies import mask_observations as _mask
from ctxkit.strategies import offload as _offload
from ctxkit.strategies import prioritize_recent as _recent
from ctxkit.strategies import summarize_old as _summarize_old
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
    "content_type_chunking": _chunking.content_type_chunking,
    "summarize_old": _summarize_old.summarize_old,
    "prioritize_recent": _recent.prioritize_recent,
    "discard_low_rel": _discard.discard_low_rel,
}

DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "summarize_old": dict(_summarize_old.DEFAULTS),
    "prioritize_recent": dict(_recent.DEFAULTS),
    "content_type_chunking": {"compress_ratios": dict(_chunking.DEFAULT_RATIOS)},
    "discard_low_rel": dict(_discard.DEFAULTS),
    "offload": dict(_offload.DEFAULTS),
    "mask_observations": dict(_mask.DEFAULTS),
}


# Offloading first keeps huge outputs one `recall` away; summarizing old turns next keeps the most
# meaning per token (measured with score-rl over every scenario and on the real transcripts:
# mean coherence 0.864 against 0.820 for masking and chunking before summarizing).
DEFAULT_CHAIN: tuple[str, ...] = (
    "offload",
    "summarize_old",
    "mask_observations",
    "content_type_chunking",
    "prioritize_recent",
    "discard_low_rel",
)


def get_strategy(name: str) -> Strategy:
    """The strategy registered under `name`; an unknown name is a UsageError listing the known."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise unknown_name("strategy", name, STRATEGIES) from None


__all__ = [
    "Context",
    "DEFAULT_CHAIN",
    "DEFAULT_PARAMS",
    "STRATEGIES",
    "State",
    "Strategy",
    "archive_unit",
    "get_strategy",
    "placeholder",
    "protected",
]
