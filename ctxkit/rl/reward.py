"""The reward of one outcome, term by term, as the spec defines it."""

from __future__ import annotations

from ctxkit.rl.actions import SLOW_MS

REWARD_MIN, REWARD_MAX = -2.0, 2.0
# What the model can still answer (`fidelity.probes`: the share of the original's probes the
# compacted context still holds) weighs as much as coherence: of two compactions that both fit,
# the preference pairs prefer the one that keeps what the task needs.
FIDELITY_WEIGHT = 0.5


def reward_terms(
    *,
    success: bool,
    coherence_delta: float,
    reduction_ratio: float,
    priority_preserved: float,
    used_recovery: bool,
    time_ms: float,
    fidelity: float | None = None,
) -> dict[str, float]:
    """Each term of the spec's reward, before the clamp, and the fidelity term (probe recall
    in [0, 1], times `FIDELITY_WEIGHT`; absent when not measured)."""
    terms = {
        "success": 1.0 if success else -1.0,
        "coherence": 0.5 * coherence_delta,
        "reduction": 0.3 * reduction_ratio,
        "priority": 0.2 * priority_preserved,
        "recovery": -0.7 if used_recovery else 0.0,
        "time": -0.1 * max(0.0, time_ms - SLOW_MS) / 1000.0,
    }
    if fidelity is not None:
        terms["fidelity"] = FIDELITY_WEIGHT * fidelity
    return terms


def reward(
    *,
    success: bool,
    coherence_delta: float,
    reduction_ratio: float,
    priority_preserved: float,
    used_recovery: bool,
    time_ms: float,
    fidelity: float | None = None,
) -> float:
    """The spec's reward with the fidelity term: the sum of `reward_terms`, clamped to [-2, 2]."""
    total = sum(
        reward_terms(
            success=success,
            coherence_delta=coherence_delta,
            reduction_ratio=reduction_ratio,
            priority_preserved=priority_preserved,
            used_recovery=used_recovery,
            time_ms=time_ms,
            fidelity=fidelity,
        ).values()
    )
    return max(REWARD_MIN, min(REWARD_MAX, total))
