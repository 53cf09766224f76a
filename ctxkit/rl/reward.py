"""The reward of one outcome, term by term, as the spec defines it, plus fidelity.

The spec's time term (-0.1 per second above 500 ms) is reported beside the reward, not in it:
time depends on the machine and its load, and a reward that did would make two exports of
the same input differ. `time_penalty` gives it; the summary table shows the time taken.
"""

from __future__ import annotations

REWARD_MIN, REWARD_MAX = -2.0, 2.0
SLOW_MS = 500.0  # the spec's threshold of the time term
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
    fidelity: float | None = None,
) -> dict[str, float]:
    """Each term of the spec's reward, before the clamp (every one deterministic), and the
    fidelity term (probe recall in [0, 1], times `FIDELITY_WEIGHT`; absent when not measured)."""
    terms = {
        "success": 1.0 if success else -1.0,
        "coherence": 0.5 * coherence_delta,
        "reduction": 0.3 * reduction_ratio,
        "priority": 0.2 * priority_preserved,
        "recovery": -0.7 if used_recovery else 0.0,
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
            fidelity=fidelity,
        ).values()
    )
    return max(REWARD_MIN, min(REWARD_MAX, total))


def time_penalty(time_ms: float) -> float:
    """The spec's time term, -0.1 per second above `SLOW_MS`: reported beside the reward."""
    return -0.1 * max(0.0, time_ms - SLOW_MS) / 1000.0
