"""The reward of one outcome, term by term, as the spec defines it, plus fidelity, cost and
the false claims of the compaction's own text.

The spec's time term (-0.1 per second above 500 ms) is reported beside the reward, not in it:
time depends on the machine and its load, and a reward that did would make two exports of
the same input differ. `time_penalty` gives it; the summary table shows the time taken.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REWARD_MIN, REWARD_MAX = -2.0, 2.0
SLOW_MS = 500.0  # the spec's threshold of the time term
# What the model can still answer (`fidelity.probes`: the share of the original's probes the
# compacted context still holds) weighs as much as coherence, as a penalty for what was lost
# (0 when every probe is kept, -0.5 when none is): the seed's terms alone already reach the
# clamp (+2) for a good compaction, so a bonus would tie two that both fit; a penalty still
# tells them apart, and the preference pairs prefer the one that keeps what the task needs.
FIDELITY_WEIGHT = 0.5
# What the calls cost (`cost_share`: the tokens sent, cache writes at their premium, as a share
# of writing every token the uncompacted calls send) weighs a fifth: in [-0.2, 0], so of two
# equally faithful compactions the preference pairs prefer the cheaper; fidelity still weighs
# more than what it costs.
COST_WEIGHT = 0.2
# prices relative to a cache read, as the loop policy's default (`budget.policy.CachePrices`:
# Anthropic's ratios, a read 0.1 and a write 1.25 of input)
_READ, _WRITE = 0.1, 1.25
# Each false claim of the text the compaction wrote (`fidelity.claims`: a file said to be
# edited that no call modified, an error the log does not flag, a done task shown pending, a
# summary placed before older messages) costs as much as losing a fifth of the probes: a model
# acts on what it reads, and one false statement sends the next turn wrong where a missing one
# only leaves it to look. At most CLAIMS_MAX in all, so a compaction that failed still scores
# lower than one that fits and misstates.
CLAIM_PENALTY = 0.1
CLAIMS_MAX = 0.5


def cost_share(sent: int, written: int, baseline_sent: int) -> float:
    """What a compaction's calls cost as a share of the uncompacted calls all written to the
    cache: every token sent is at least read from the cache, a token written pays the write's
    premium over a read. `sent`, `written`: the tokens the calls sent and wrote to the cache (a
    replay: summed over the session; one shot: the next call); `baseline_sent`: what the calls
    send without compaction. In [0, 1] when nothing grows; 0 for an empty baseline.

    >>> cost_share(100_000, 0, 100_000), cost_share(40_000, 10_000, 100_000)
    (0.08, 0.124)
    """
    if baseline_sent <= 0:
        return 0.0
    cost = _READ * sent + (_WRITE - _READ) * written
    return round(cost / (_WRITE * baseline_sent), 6)


def reward_terms(
    *,
    success: bool,
    coherence_delta: float,
    reduction_ratio: float,
    priority_preserved: float,
    used_recovery: bool,
    fidelity: float | None = None,
    cost: float | None = None,
    false_claims: int | None = None,
) -> dict[str, float]:
    """Each term of the spec's reward, before the clamp (every one deterministic), the
    fidelity term (`FIDELITY_WEIGHT` times the share of probes lost, negated: in [-0.5, 0]; 0
    for a failed action, which the success term already scores; absent when not measured), the
    cost term (`COST_WEIGHT` times `cost_share`, negated; 0 for a failed action; absent when
    not measured) and the claims term (`CLAIM_PENALTY` per false claim, at most `CLAIMS_MAX`,
    negated; 0 for a failed action; absent when not measured)."""
    terms = {
        "success": 1.0 if success else -1.0,
        "coherence": 0.5 * coherence_delta,
        "reduction": 0.3 * reduction_ratio,
        "priority": 0.2 * priority_preserved,
        "recovery": -0.7 if used_recovery else 0.0,
    }
    if fidelity is not None:
        # a failed action scores the spec's -1 and no credit either way: nothing came out
        terms["fidelity"] = -FIDELITY_WEIGHT * (1.0 - fidelity) if success else 0.0
    if cost is not None:
        terms["cost"] = -COST_WEIGHT * min(1.0, cost) if success else 0.0
    if false_claims is not None:
        terms["claims"] = -min(CLAIMS_MAX, CLAIM_PENALTY * false_claims) if success else 0.0
    return terms


def reward(**inputs: Any) -> float:
    """The spec's reward with the fidelity, cost and claims terms: the sum of
    `reward_terms(**inputs)` (the same keywords), clamped to [-2, 2]."""
    return clamped(reward_terms(**inputs))


def clamped(terms: Mapping[str, float]) -> float:
    """The reward its terms make: their sum, clamped to [REWARD_MIN, REWARD_MAX]."""
    return max(REWARD_MIN, min(REWARD_MAX, sum(terms.values())))


def time_penalty(time_ms: float) -> float:
    """The spec's time term, -0.1 per second above `SLOW_MS`: reported beside the reward."""
    return -0.1 * max(0.0, time_ms - SLOW_MS) / 1000.0
