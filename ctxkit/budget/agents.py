"""Each coding agent's own budget: the most it sends, where it compacts, what it keeps for the
answer; and what the pinned versions were measured to send (`agents.toml`).

A log of an agent is checked against that agent's budget on the log's model: Claude Code on
claude-opus-4-6 compacts at W - min(O, 20k) - 13k and sends up to W - 3k (its room for a manual
/compact; real logs show 178,144 tokens sent on a 200,000-token window), so `guard` of its log
says "compact" where Claude Code itself compacted and nothing before. The rules are read from
each agent's source (cited per entry; the triggers are `budget.triggers.RULES`) and checked
against real logs (the compaction points their `compact_boundary` records hold). The guard's
compact threshold sits one call's growth (1% of the window) below the agent's trigger: the
agent decides on its own estimate, which counts the call about to be made.

    >>> b = agent_budget("claude-code", 200_000, 64_000)
    >>> b.limit, b.trigger, b.reserve
    (197000, 167000, 20000)
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ctxkit.budget.triggers import RULES


@dataclass(frozen=True)
class AgentBudget:
    """One agent on one model: the most it sends (`limit`), where it compacts (`trigger`), the
    output it keeps room for (`reserve`), and the rule, for people."""

    agent: str
    label: str
    window: int
    limit: int
    trigger: int
    reserve: int
    rule: str
    source: str


@dataclass(frozen=True)
class _Rule:
    label: str
    formats: tuple[str, ...]
    limit: Callable[[int, int], int]
    reserve: Callable[[int, int], int]
    rule: str
    source: str


def _claude_reserve(w: int, o: int) -> int:
    return min(o, 20_000) if o else 20_000


def _opencode_reserve(w: int, o: int) -> int:
    return min(o, 32_000) or 32_000


_RULES: dict[str, _Rule] = {
    "claude-code": _Rule(
        "Claude Code",
        ("claude-code",),
        lambda w, o: w - 3_000,
        _claude_reserve,
        "compacts at W - min(O, 20k) - 13k, sends up to W - 3k",
        "src/services/compact/autoCompact.ts (v2.1.88): MAX_OUTPUT_TOKENS_FOR_SUMMARY 20,000, "
        "AUTOCOMPACT_BUFFER_TOKENS 13,000, MANUAL_COMPACT_BUFFER_TOKENS 3,000; real logs "
        "compact at 167,332 and 167,602 on a 200,000-token window and send up to 178,144",
    ),
    "codex": _Rule(
        "Codex",
        ("codex",),
        lambda w, o: (w * 95) // 100,
        lambda w, o: w - (w * 95) // 100,
        "sends up to 0.95 W (effective_context_window_percent), compacts at 0.9 W",
        "openai/codex codex-rs: effective_context_window_percent 95, auto-compact at 90% of the "
        "window; its rollouts record the 95% as model_context_window (258,400 of 272,000)",
    ),
    "gemini-cli": _Rule(
        "Gemini CLI",
        ("gemini-cli", "gemini-cli-jsonl"),
        lambda w, o: w,
        lambda w, o: 0,
        "sends up to W (Gemini's input limit; the output has its own), compresses at 0.5 W",
        "google-gemini/gemini-cli tokenLimit(model); chatCompressionService.ts "
        "DEFAULT_COMPRESSION_TOKEN_THRESHOLD 0.5",
    ),
    "opencode": _Rule(
        "opencode",
        ("opencode",),
        lambda w, o: w - _opencode_reserve(w, o),
        _opencode_reserve,
        "sends up to W - O' (O' = min(O, 32k)), compacts at W - O' - min(20k, O')",
        "sst/opencode session/overflow.ts: OUTPUT_TOKEN_MAX 32,000, COMPACTION_BUFFER 20,000",
    ),
}


def agent_of_format(fmt: str) -> str | None:
    """The agent whose log format `fmt` is (claude-code for Claude Code logs), or None."""
    for name, rule in _RULES.items():
        if fmt in rule.formats:
            return name
    return None


def agent_budget(agent: str, window: int, max_output: int) -> AgentBudget:
    """`agent` on a model of `window` tokens and `max_output` (0: unknown): its budget."""
    rule = _RULES[agent]
    max_output = max_output or 32_000  # not published: the common reserve
    limit = max(1, rule.limit(window, max_output))
    trigger = min(limit, max(1, RULES[agent].trigger(window, max_output)))
    return AgentBudget(
        agent=agent,
        label=rule.label,
        window=window,
        limit=limit,
        trigger=trigger,
        reserve=rule.reserve(window, max_output),
        rule=rule.rule,
        source=rule.source,
    )


AGENT_BUDGETS = tuple(_RULES)


# --- what the pinned versions send -----------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """What one version of an agent sent on its first call, measured with the recording
    provider (`ctxkit agent probe`): tokens per region (cl100k_base) and what it asked for."""

    agent: str
    version: str
    mode: str  # print or interactive
    model: str
    date: str
    how: str
    max_tokens: int | None
    system: int
    tools: int
    mcp: int
    skills: int
    reminders: int

    @property
    def fixed(self) -> int:
        """What every call carries whatever the conversation: system prompt, tools, skills."""
        return self.system + self.tools + self.mcp + self.skills

    @property
    def per_call(self) -> int:
        """All the agent adds to a conversation on its first call (reminders included)."""
        return self.fixed + self.reminders

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "fixed": self.fixed, "per_call": self.per_call}


@lru_cache(maxsize=1)
def measured() -> tuple[Measured, ...]:
    """The bundled measurements (`agents.toml`), in file order."""
    from importlib import resources

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    text = resources.files("ctxkit.budget").joinpath("agents.toml").read_text(encoding="utf-8")
    rows = tomllib.loads(text).get("measured", [])
    return tuple(Measured(**{"max_tokens": None, **row}) for row in rows)


def measured_for(agent: str, mode: str | None = None) -> Measured | None:
    """The newest measurement of `agent` (in `mode` when given), or None."""
    rows = [m for m in measured() if m.agent == agent and (mode is None or m.mode == mode)]
    return rows[-1] if rows else None


def thresholds_for(
    budget: AgentBudget, warn: float = 0.80, block: float = 0.98
) -> tuple[float, float, float]:
    """The guard's warn, compact and block fractions for an agent's budget: compact one call's
    growth (1% of the window) before the agent compacts, warn no later, block halfway from
    compact to the limit."""
    point = max(1, budget.trigger - budget.window // 100)
    compact = point / budget.limit if budget.limit else 1.0
    compact = math.floor(compact * 10_000) / 10_000
    return min(warn, compact), compact, max(compact, min(block, (1 + compact) / 2))
