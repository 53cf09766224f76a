"""The token budget: model windows, output reserve, policy limits, thresholds and statuses.

    effective_limit = context_window - buffer_tokens - max_output_tokens
    limit in force  = min(policy limit, effective_limit)      (the output says which bound)

Each budget value resolves in this order: flag, per-model config (`models:`), per-provider config
(`providers:`), `models.toml`, default. Defaults: window 131072, buffer 8192 (never more than an
eighth of the window), output reserve floor(window / 4). A table's maximum output is reserved
as given but never more than half the window (gpt-4: 8192 window, 8192 max output -> 4096), so a
small model keeps room for its input; a flag or config value is taken exactly.

Policy limits (the spec's `min_limit`, `default_limit`, `agents`, `per_llm`) apply when the
configuration sets `default_limit` or `--limit`, `--agent` or `--llm` is given; otherwise the
model's own effective limit binds (or the target the log names, `budget.resolve`), which is
what `ctxkit guard file --model gpt-4o` means. `--limit N` is
taken exactly; a limit from the config (default_limit, an agent's, a per_llm entry's, with the
P1 agent uplift of 20%) is raised to `min_limit` when below it.

Statuses, as fractions of the limit in force: ok < warn (0.80) <= compact (0.95) <= block
(0.98); above 1.0 is overflow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ctxkit.tokens.loaders import DEFAULT_TOKENIZER  # noqa: F401  (re-exported default)

DEFAULT_CONTEXT_WINDOW = 131072
DEFAULT_BUFFER_TOKENS = 8192
P1_AGENT_UPLIFT = 1.2
STATUSES = ("ok", "warn", "compact", "block", "overflow")
_RANK = {s: i for i, s in enumerate(STATUSES)}


# --- thresholds and statuses ----------------------------------------------------------------


@dataclass(frozen=True)
class Thresholds:
    """Fractions of the limit at which the status becomes warn, compact and block."""

    warn: float = 0.80
    compact: float = 0.95
    block: float = 0.98

    def bounds(self, limit: int) -> dict[str, int]:
        """The fewest tokens at which each status begins: warn, compact, block (integers, so
        `used >= bound` has no float drift at the boundary)."""
        return {
            "warn": math.ceil(limit * self.warn - 1e-9),
            "compact": math.ceil(limit * self.compact - 1e-9),
            "block": math.ceil(limit * self.block - 1e-9),
        }



def status_for(used_tokens: int, limit: int, thresholds: Thresholds = Thresholds()) -> str:
    """ok, warn, compact, block or overflow for `used_tokens` against `limit`."""
    if limit <= 0:
        return "overflow"
    if used_tokens > limit:
        return "overflow"
    bounds = thresholds.bounds(limit)
    for status in ("block", "compact", "warn"):
        if used_tokens >= bounds[status]:
            return status
    return "ok"


def status_rank(status: str) -> int:
    """Order of severity: ok 0 ... overflow 4."""
    return _RANK[status]


def compaction_goal(
    limit: int,
    target: int | None = None,
    thresholds: Thresholds = Thresholds(),
    *,
    in_loop: bool = False,
) -> int:
    """The one compaction goal: `target` when given (never above the limit); else the largest
    context the guard still passes, one token under its compact threshold, so the guard does
    not fire again and as much as possible is kept (`compact`, `score-rl`, `bench`); in an
    agent loop that keeps appending (`in_loop`: `replay`, `guard --as`), floor(limit * warn),
    which leaves room for the turns before the next compaction.

    Measured on the real transcripts (scripts/fidelity_bench.py): aiming one token under the
    compact threshold instead of at the warn threshold keeps more of what the task needs at
    every budget (README, "What the model can still do").

    >>> compaction_goal(5000), compaction_goal(5000, in_loop=True)
    (4749, 4000)
    >>> compaction_goal(5000, target=4500), compaction_goal(5000, target=9000)
    (4500, 5000)
    """
    if target is not None:
        return min(target, limit)
    if in_loop:
        return math.floor(limit * thresholds.warn)
    return max(0, thresholds.bounds(limit)["compact"] - 1)


def compaction_ceiling(
    limit: int, target: int | None = None, thresholds: Thresholds = Thresholds()
) -> int:
    """The most tokens a compaction may leave: one below the guard's compact threshold of the
    limit, so that `guard` at the same limit passes what `compact` wrote (or `target`, when
    a larger one is asked for). The goal is below it; the ceiling is where the chain aims when
    what it cannot remove is already above the goal, and the bar it must clear.

    >>> compaction_ceiling(5000), compaction_ceiling(5000, target=4900)
    (4749, 4900)
    """
    ceiling = thresholds.bounds(limit)["compact"] - 1
    return max(ceiling, compaction_goal(limit, target, thresholds))


def fixed_regions(system_tools: int, unlogged: int, reminders: bool = False) -> str:
    """What no compaction can remove, named for people: the system prompt and tool schemas (and
    the agent's reminders, when the log shows them), and what every call carries that the log
    never shows (the fixed part of its recorded usage).

    >>> fixed_regions(1259, 0)
    'the system prompt and tool schemas alone take 1,259 tokens'
    >>> fixed_regions(0, 64093)
    'what every call carries and the log never shows takes 64,093 tokens (its recorded usage)'
    """
    shown = "the system prompt, tool schemas and the agent's reminders" if reminders else (
        "the system prompt and tool schemas"
    )
    unlogged_text = "what every call carries and the log never shows"
    if not unlogged:
        return f"{shown} alone take {system_tools:,} tokens"
    if not system_tools:
        return f"{unlogged_text} takes {unlogged:,} tokens (its recorded usage)"
    return (
        f"{shown} ({system_tools:,} tokens) and {unlogged_text} "
        f"({unlogged:,}, its recorded usage) take {system_tools + unlogged:,} tokens"
    )


def used_fraction(used_tokens: int, limit: int) -> float:
    """Share of the limit in use (inf when the limit is 0 or less)."""
    return used_tokens / limit if limit > 0 else math.inf


# --- the model's effective limit ------------------------------------------------------------


def effective_limit(context_window: int, buffer_tokens: int, max_output_tokens: int) -> int:
    """context_window - buffer_tokens - max_output_tokens."""
    return context_window - buffer_tokens - max_output_tokens


def default_max_output(context_window: int) -> int:
    """floor(window / 4): the reserve when nothing names a maximum output."""
    return context_window // 4


def default_buffer(context_window: int) -> int:
    """8192, but never more than an eighth of the window."""
    return min(DEFAULT_BUFFER_TOKENS, context_window // 8)


@dataclass(frozen=True)
class ModelBudget:
    """A model's window arithmetic, with where each value came from."""

    name: str
    provider: str
    context_window: int
    max_output_tokens: int
    buffer_tokens: int
    effective_limit: int
    tokenizer: str
    tokenizer_note: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


# --- policy limits --------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyLimit:
    """The policy limit and the rule that set it (e.g. "agent verification")."""

    limit: int
    rule: str
    floored: bool = False


# --- a target: model budget + policy --------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Target(ModelBudget):
    """One model to fit: its window arithmetic (a `ModelBudget`), the policy limit and the limit
    in force."""

    policy_limit: int | None
    policy_rule: str
    limit: int
    bound_by: str  # "model", "policy" or "agent" (the most the log's own agent sends)
    thresholds: Thresholds = Thresholds()
    agent: str | None = None  # the coding agent whose own budget this is (`budget.agents`)

    @property
    def rule(self) -> str:
        """The rule that bound the limit, for people."""
        if self.bound_by == "policy":
            return f"policy: {self.policy_rule}"
        if self.agent:
            return f"agent {self.agent}: the most it sends on this model"
        return "model: window - buffer - max output"

    def to_dict(self) -> dict[str, Any]:
        """Plain fields for JSON output."""
        return {
            "name": self.name,
            "provider": self.provider,
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
            "buffer_tokens": self.buffer_tokens,
            "effective_limit": self.effective_limit,
            "policy_limit": self.policy_limit,
            "policy_rule": self.policy_rule or None,
            "limit": self.limit,
            "bound_by": self.bound_by,
            "rule": self.rule,
            "tokenizer": self.tokenizer,
            "tokenizer_note": self.tokenizer_note or None,
            "agent": self.agent,
            "thresholds": {
                "warn": self.thresholds.warn,
                "compact": self.thresholds.compact,
                "block": self.thresholds.block,
            },
            "sources": dict(self.sources),
        }
