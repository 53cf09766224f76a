"""When would my agent compact? Each coding agent's own auto-compaction trigger, as a registry.

Every entry turns a model's context window `W` and max output `O` into the token count at which
that agent compacts (or summarizes its history), and says how much of the history it keeps
afterwards, so a replay can count how often it would have fired. The formulas are read from
each agent's own source (cited per entry; details and dates in docs/guard.md) and are what
`ctxkit guard --as AGENT` applies to a transcript.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.errors import registered


@dataclass(frozen=True)
class AgentRule:
    """One agent's trigger: `trigger(W, O)` tokens; after compacting it keeps `kept(history)`
    tokens of the history it had (a summary and/or a recent tail)."""

    name: str
    formula: str
    source: str
    trigger: Callable[[int, int], int]
    kept: Callable[[int, int, int], int]  # (history tokens, W, O) -> tokens kept after compacting


def _claude_code(w: int, o: int) -> int:
    return w - min(o, 20_000) - 13_000


def _codex(w: int, o: int) -> int:
    return (w * 9) // 10


def _gemini(w: int, o: int) -> int:
    return math.floor(0.5 * w)


def _opencode(w: int, o: int) -> int:
    out = min(o, 32_000) or 32_000
    return max(0, w - out - min(20_000, out))


def _cline(w: int, o: int) -> int:
    fixed = {64_000: w - 27_000, 128_000: w - 30_000, 200_000: w - 40_000}
    legacy = fixed.get(w, max(w - 40_000, math.floor(0.8 * w)))
    current = math.floor(0.9 * 0.9 * w)
    return min(legacy, current)


def _roo(w: int, o: int) -> int:
    reserved = min(o, math.ceil(0.2 * w)) if o else 8_192
    return math.floor(0.9 * w) - reserved


def _aider(w: int, o: int) -> int:
    return min(max((w - o) // 16, 1024), 8192)


RULES: dict[str, AgentRule] = {
    rule.name: rule
    for rule in (
        AgentRule(
            "claude-code",
            "W - min(O, 20k) - 13k",
            "src/services/compact/autoCompact.ts (v2.1.88): MAX_OUTPUT_TOKENS_FOR_SUMMARY = 20_000, "
            "AUTOCOMPACT_BUFFER_TOKENS = 13_000",
            _claude_code,
            lambda h, w, o: min(h, min(o, 20_000)),  # the summary replaces the history
        ),
        AgentRule(
            "codex",
            "0.9 W (or model_auto_compact_token_limit, capped at 0.9 W)",
            "openai/codex codex-rs/protocol/src/openai_models.rs: (context_window * 9) / 10",
            _codex,
            lambda h, w, o: min(h, 20_000 + 4_000),  # recent user messages (<= 20k) + summary
        ),
        AgentRule(
            "gemini-cli",
            "0.5 W (model.compressionThreshold)",
            "google-gemini/gemini-cli packages/core/src/context/chatCompressionService.ts: "
            "DEFAULT_COMPRESSION_TOKEN_THRESHOLD = 0.5, COMPRESSION_PRESERVE_THRESHOLD = 0.3",
            _gemini,
            lambda h, w, o: math.floor(0.3 * h),  # keeps the newest 30% of the history
        ),
        AgentRule(
            "opencode",
            "W - O' - min(20k, O'), O' = min(O, 32k)",
            "sst/opencode packages/opencode/src/session/overflow.ts: COMPACTION_BUFFER = 20_000, "
            "OUTPUT_TOKEN_MAX = 32_000",
            _opencode,
            lambda h, w, o: min(h, min(15_000, max(2_000, _opencode(w, o) // 4))),
        ),
        AgentRule(
            "cline",
            "min(W - 27k/30k/40k (64k/128k/200k windows) else max(W - 40k, 0.8 W), 0.81 W)",
            "cline/cline context-window-utils.ts (<= v3.89) and sdk compaction-shared.ts (v4): "
            "CONTEXT_WINDOW_INPUT_RATIO = 0.9, COMPACTION_TRIGGER_RATIO = 0.9",
            _cline,
            lambda h, w, o: min(h, 20_000),  # DEFAULT_PRESERVE_RECENT_TOKENS
        ),
        AgentRule(
            "roo-code",
            "0.9 W - min(O, 0.2 W) (autoCondenseContextPercent 100)",
            "RooCodeInc/Roo-Code src/core/context-management/index.ts: TOKEN_BUFFER_PERCENTAGE = 0.1",
            _roo,
            lambda h, w, o: min(h, min(o, 20_000) if o else 8_192),  # a condensed summary
        ),
        AgentRule(
            "aider",
            "history budget min(max((W - O) / 16, 1024), 8192)",
            "Aider-AI/aider aider/models.py: max_chat_history_tokens = "
            "min(max(max_input_tokens / 16, 1024), 8192)",
            _aider,
            lambda h, w, o: min(h, _aider(w, o) // 2),  # a recent tail under half the budget
        ),
    )
}


def get_rule(name: str) -> AgentRule:
    """The rule registered under `name`; an unknown name lists the known ones."""
    return registered(RULES, "agent", name)


@dataclass
class AgentForecast:
    """What one agent would have done with a transcript under one model's window."""

    agent: str
    formula: str
    source: str
    trigger: int
    used: int
    compacts_now: bool
    compactions: int | None = None  # with the replay: how many times over the transcript
    first_at: int | None = None  # the unit index at which it would first have compacted

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def forecast(
    rule: AgentRule,
    window: int,
    max_output: int,
    used: int,
    unit_tokens: Sequence[int] | None = None,
    fixed_tokens: int = 0,
) -> AgentForecast:
    """Would `rule`'s agent compact at `used` tokens, and (given each unit's tokens and the part
    no compaction removes) at which unit it would first have compacted and how many times.

    aider's budget is for the chat history alone, so `fixed_tokens` (system, tools, unlogged) is
    left out of what it compares; the others compare the whole prompt.
    """
    trigger = rule.trigger(window, max_output)
    history_only = rule.name == "aider"
    compared = used - fixed_tokens if history_only else used
    out = AgentForecast(rule.name, rule.formula, rule.source, trigger, used, compared >= trigger)
    if unit_tokens is not None:
        history = 0
        count = 0
        for i, n in enumerate(unit_tokens):
            history += n
            total = history if history_only else fixed_tokens + history
            if total >= trigger:
                count += 1
                if out.first_at is None:
                    out.first_at = i
                history = rule.kept(history, window, max_output)
        out.compactions = count
    return out
