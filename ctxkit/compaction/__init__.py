"""The compaction chain: run strategies in order until the transcript fits, then recover.

`compact()` is the one engine call behind `ctxkit compact`, `score-rl` and `bench`. It never
returns a transcript that breaks an invariant: a step whose result does, is rejected, recorded
in the report, and the chain moves on (a rejected step is a bug; the tests assert there are
none).

Example:
    >>> from ctxkit.compaction import compact
    >>> from ctxkit.simulate import generate
    >>> result = compact(generate("long_chat", seed=1), limit=5000)
    >>> result.tokens_before, result.target, result.tokens_after <= result.target
    (10000, 4749, True)
"""

from __future__ import annotations

from ctxkit.compaction.chain import check_invariants, coherence, compact, unit_texts
from ctxkit.compaction.options import ChainOptions, CompactSettings, expand_chain
from ctxkit.compaction.parallel import compact_many
from ctxkit.compaction.recovery import (
    MAX_SUFFIX_TRIES,
    MIN_HANDOVER_TOKENS,
    RECOVERY,
    RECOVERY_MODES,
)
from ctxkit.compaction.result import PHASES, CompactResult, Event, Observer, Step

__all__ = [
    "ChainOptions",
    "CompactResult",
    "CompactSettings",
    "Event",
    "MAX_SUFFIX_TRIES",
    "MIN_HANDOVER_TOKENS",
    "Observer",
    "PHASES",
    "RECOVERY",
    "RECOVERY_MODES",
    "Step",
    "check_invariants",
    "coherence",
    "compact",
    "compact_many",
    "expand_chain",
    "unit_texts",
]
