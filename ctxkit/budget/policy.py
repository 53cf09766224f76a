"""When to compact in an agent loop, and how deep: one policy, chosen by what the session costs.

Every call of a session with a prompt cache pays, roughly, `read x C` for the context `C` it
shares with the call before (a cache read) and `write x g` for the `g` tokens new since then
(a cache write; input where the provider bills no write). A compaction at `T` tokens down to a
goal `A` changes what follows: every later call reads `T - A` fewer tokens, but the first call
after it writes again what the compaction rewrote (`A - P`, everything after the prefix `P` it
left byte for byte: the system prompt, the tool schemas and what every call carries unseen),
and an LLM summary costs its own call (the context read once more, the summary as output).

Over one cycle between compactions (`n = (T - A) / g` calls, the context growing from `A` to
`T`) the cost per call is

    Q x g / (T - A) + read x (A + T) / 2,      Q = write x (A - P) + summary call

which falls as the goal `A` falls (a deeper compaction is cheaper on every count), and is least
at `T = A + sqrt(2 Q g / read)`. So:

- the goal is deep: `fixed + min(keep_share x (limit - fixed), keep_max)` (12% of the room,
  at most 40,000 tokens: what the task needs does not grow with the window; measured on the
  real sessions, README "ctxkit in the loop"), lowered so that `min_gap` calls at the
  session's growth fit below the limit, but never below 8,000 tokens (half the room in a small
  window: a goal the chain cannot reach makes it fall back to a fresh start); where the chain
  reaches the goal only by shortening or dropping what stays after its summary, the loop runs
  it again to a goal halfway up to the trigger (`replay._Loop._chain`): the task kept more
  than the share;
- the trigger is the cheapest point `A + sqrt(2 Q g / read)`, never past the limit; `g` is
  what the session has added per call so far, measured, not assumed;
- at most one compaction per `min_gap` (25) calls: a context past the trigger sooner waits;
- a compaction at that trigger pays for itself before the next one: what it saves per call,
  `read x (T - A)`, repays `Q` within `Q / (read (T - A))` calls, half of the `(T - A) / g`
  calls the cycle lasts (break-even is checked per compaction in `replay`'s cost column);
- a context over the limit is compacted whatever the gap (the call could not be made).

    >>> p = LoopPolicy(limit=176_000, fixed=24_000, prices=CachePrices.relative())
    >>> p.goal(1_400), p.trigger(1_400)
    (42240, 67506)
    >>> p.decide(60_000, calls_since=30, growth=1_400).compact
    False
    >>> d = p.decide(80_000, calls_since=30, growth=1_400); d.compact, d.reason
    (True, 'cost')
    >>> p.decide(80_000, calls_since=3, growth=1_400).reason, p.decide(180_000, 3, 1_400).reason
    ('gap', 'overflow')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MIN_GAP = 25  # at most one compaction per this many calls (unless a call would not fit)
KEEP_SHARE = 0.12  # the goal: the fixed part and this share of the room above it,
KEEP_MAX = 40_000  # never more than this: what a task needs does not grow with the window
KEEP_MIN = 8_000  # never less than this (or half the room, in a small window)
PRIOR_GROWTH_SHARE = 0.005  # tokens per call before a session has grown: 0.5% of the limit
# relative prices when the model has none (Anthropic's ratios: a read 0.1, a write 1.25 of input)
_RELATIVE = (1.0, 0.1, 1.25, 5.0)


@dataclass(frozen=True)
class CachePrices:
    """USD per token: plain input, cache read, cache write (input where the provider bills no
    write) and output."""

    input: float
    read: float
    write: float
    output: float

    @classmethod
    def relative(cls) -> CachePrices:
        """Anthropic's ratios at $1 per million input tokens: for a model without prices."""
        i, r, w, o = _RELATIVE
        return cls(i / 1e6, r / 1e6, w / 1e6, o / 1e6)

    @classmethod
    def of(cls, model: Any) -> CachePrices:
        """A models.toml row's prices (`budget.models.ModelInfo`); `relative()` without them."""
        inp = getattr(model, "input_per_mtok", None) if model is not None else None
        out = getattr(model, "output_per_mtok", None) if model is not None else None
        if inp is None or out is None:
            return cls.relative()
        read = getattr(model, "cached_input_per_mtok", None)
        write = getattr(model, "cache_write_per_mtok", None)
        return cls(
            inp / 1e6,
            (read if read is not None else inp) / 1e6,
            (write if write is not None else inp) / 1e6,
            out / 1e6,
        )


@dataclass(frozen=True)
class Decision:
    """What the policy says before one call: compact or not, why, and where it aims."""

    compact: bool
    reason: str  # "cost", "overflow" (the call would not fit), "gap" (too soon), "" (below)
    trigger: int
    goal: int


@dataclass(frozen=True)
class LoopPolicy:
    """The one compaction policy of an agent loop (see the module doc). Tokens are as the
    provider counts them: `limit` the most one call may send, `fixed` what every call carries
    and no compaction removes (it stays cached)."""

    limit: int
    fixed: int
    prices: CachePrices
    keep_share: float = KEEP_SHARE
    keep_max: int = KEEP_MAX
    min_gap: int = MIN_GAP
    summary_tokens: int = 0  # output of an LLM summary (0: the extractive summarizer, no call)

    def growth(self, added: float, calls: int) -> float:
        """Tokens per call: `added` over `calls`, or the prior before any call has grown."""
        prior = PRIOR_GROWTH_SHARE * self.limit
        return added / calls if calls > 0 and added > 0 else prior

    def goal(self, growth: float) -> int:
        """Where a compaction aims: deep, but never below what a working context needs (half
        the room, up to `KEEP_MIN`: a goal the chain cannot reach makes it fall back to its
        ceiling or to a fresh start), with room for `min_gap` calls below the limit where the
        window has it."""
        room = max(0, self.limit - self.fixed)
        floor = min(KEEP_MIN, room / 2)
        keep = min(self.keep_share * room, self.keep_max, room - self.min_gap * growth)
        return int(self.fixed + max(floor, keep))

    def rewrite_usd(self, goal: int, context: int) -> float:
        """Q: what one compaction costs beyond carrying on: its rewrite of the cache after the
        fixed prefix, and the summarizing call when an LLM writes the summary."""
        p = self.prices
        summary = p.read * context + p.output * self.summary_tokens if self.summary_tokens else 0.0
        return p.write * max(0, goal - self.fixed) + summary

    def trigger(self, growth: float, context: int | None = None) -> int:
        """The cheapest context to compact at (see the module doc), never past the limit."""
        a = self.goal(growth)
        q = self.rewrite_usd(a, context if context is not None else self.limit)
        best = a + math.sqrt(2 * q * max(growth, 1.0) / self.prices.read)
        return int(min(self.limit, best))

    def break_even_calls(self, context: int, growth: float) -> float:
        """Calls after a compaction at `context` until what it saves repays what it cost."""
        a = self.goal(growth)
        saved = self.prices.read * max(1, context - a)
        return self.rewrite_usd(a, context) / saved

    def decide(self, tokens: int, calls_since: int | None, growth: float) -> Decision:
        """Before a call with `tokens` in the context, `calls_since` calls after the last
        compaction (None: none yet), the session growing `growth` tokens per call."""
        trigger, goal = self.trigger(growth, tokens), self.goal(growth)
        if tokens > self.limit:
            return Decision(True, "overflow", trigger, goal)
        if tokens < trigger:
            return Decision(False, "", trigger, goal)
        if calls_since is not None and calls_since < self.min_gap:
            return Decision(False, "gap", trigger, goal)
        return Decision(True, "cost", trigger, goal)

    def describe(self, growth: float) -> str:
        """One line for people: the trigger and the goal at this growth, and why."""
        goal, trigger = self.goal(growth), self.trigger(growth)
        return (
            f"compact at {trigger:,} tokens to {goal:,} (growth {growth:,.0f} per call; "
            f"pays back in {self.break_even_calls(trigger, growth):.1f} calls)"
        )


def loop_policy(limit: int, fixed: int, model: Any = None, summary_tokens: int = 0) -> LoopPolicy:
    """The policy for a loop under `limit` with `fixed` tokens no compaction removes, priced on
    `model` (a models.toml row; Anthropic's ratios without prices)."""
    return LoopPolicy(
        limit=limit, fixed=fixed, prices=CachePrices.of(model), summary_tokens=summary_tokens
    )


__all__ = ["CachePrices", "Decision", "LoopPolicy", "MIN_GAP", "loop_policy"]
