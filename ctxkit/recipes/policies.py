"""What each leading agent does to its context before a model call: when it compacts, and what it
keeps. A registry (`POLICIES`) of the agents' own rules, read from their sources (cited per entry;
file, version and date in docs/agents.md), for the session replay (`recipes.session`). The
policies live in `recipes.anthropic_policies` (Claude Code, the Messages API's own edits) and
`recipes.open_source_policies` (Codex CLI, Gemini CLI, OpenHands, opencode); what they take,
return and share in `recipes.policy_base`.

A policy is a function `(context, env) -> Step`: given the context the agent would send now (the
units it holds) it returns the context it keeps, what it actually sends (a server-side edit
changes what is sent, not what the client holds), and the edits it made. Where an agent writes
an LLM summary, `env.summarize` stands in (ctxkit's extractive summarizer by default, labelled
so, or an LLM endpoint), asked for `SUMMARY_TOKENS`: about the median size of Claude Code's own
summaries in the real logs (1.2k-5.1k tokens, six summaries).

| policy | fires | keeps |
|---|---|---|
| claude-code | W - min(O, 20k) - 13k; microcompact after 60 idle minutes | nine-section summary, the 5 newest files read (<= 5k each), recent messages (>= 10k tokens and 5 text messages, <= 40k) |
| codex | 0.9 W | initial context, user messages newest first within 20k, handoff summary |
| gemini-cli | 0.5 W; tool-output masking every call | state snapshot of the oldest 70% (by characters), the newest 30%, old function responses over a 50k budget cut to 40k characters |
| openhands | > 240 events or > W tokens | the first 2 events, a summary, the newest 117 events (or the suffix under W/2 tokens) |
| openhands-masking | every call | observations outside the 100 newest events replaced by <MASKED> |
| opencode | W - O' - min(20k, O'), O' = min(O, 32k); prune after each user turn | summary and the newest turns within min(15k, max(2k, usable/4)); tool outputs beyond the newest 40k cleared when that saves > 20k |
| anthropic-clear-tool-uses | input > 100k (server side, every call) | all tool results but the newest 3 cleared |
| anthropic-compaction | input > 150k (server side) | the summary only |
"""

from __future__ import annotations

from collections.abc import Callable

from ctxkit.budget.triggers import RULES
from ctxkit.errors import registered
from ctxkit.recipes.anthropic_policies import (
    CLEAR_TRIGGER,
    SERVER_COMPACT_TRIGGER,
    anthropic_clear_tool_uses,
    anthropic_compaction,
    claude_code,
)
from ctxkit.recipes.open_source_policies import (
    codex,
    gemini_cli,
    opencode,
    opencode_usable,
    openhands,
    openhands_masking,
)
from ctxkit.recipes.policy_base import (
    SUMMARY_BY,
    SUMMARY_TOKENS,
    AgentPolicy,
    Edit,
    Env,
    Step,
    Summarize,
)

# --- the registry -------------------------------------------------------------------------------


def _fixed(n: int) -> Callable[[int, int], int]:
    return lambda w, o: n


POLICIES: dict[str, AgentPolicy] = {
    p.name: p
    for p in (
        AgentPolicy(
            "claude-code",
            "Claude Code",
            "auto-compact at W - min(O, 20k) - 13k: nine-section summary + 5 files re-read + recent "
            "messages; microcompact (newest 5 tool results) after 60 idle minutes",
            "Claude Code docs and changelog; autoCompact.ts constants as documented for 2.1.x",
            claude_code,
            RULES["claude-code"].trigger,
        ),
        AgentPolicy(
            "codex",
            "Codex CLI",
            "at 0.9 W: initial context + user messages (newest, <= 20k) + handoff summary",
            "openai/codex codex-rs/core/src/compact.rs (build_compacted_history)",
            codex,
            RULES["codex"].trigger,
        ),
        AgentPolicy(
            "gemini-cli",
            "Gemini CLI",
            "at 0.5 W: <state_snapshot> of the oldest 70% + the newest 30%; tool outputs past the "
            "newest 50k tokens masked",
            "google-gemini/gemini-cli packages/core/src/context/chatCompressionService.ts, "
            "toolOutputMaskingService.ts",
            gemini_cli,
            RULES["gemini-cli"].trigger,
        ),
        AgentPolicy(
            "openhands",
            "OpenHands",
            "LLMSummarizingCondenser(max_size=240, keep_first=2), max_tokens = W",
            "OpenHands/software-agent-sdk openhands/sdk/context/condenser/llm_summarizing_condenser.py",
            openhands,
            lambda w, o: w,
        ),
        AgentPolicy(
            "openhands-masking",
            "OpenHands (masking)",
            "ObservationMaskingCondenser(attention_window=100): older observations <MASKED>",
            "All-Hands-AI/OpenHands openhands/memory/condenser/impl/observation_masking_condenser.py",
            openhands_masking,
            lambda w, o: None,
            summarizes=False,
            default=False,
        ),
        AgentPolicy(
            "opencode",
            "opencode",
            "at W - O' - min(20k, O'): summary + newest turns within min(15k, max(2k, usable/4)); "
            "prune tool output beyond the newest 40k when it saves > 20k",
            "sst/opencode packages/opencode/src/session/compaction.ts, overflow.ts",
            opencode,
            opencode_usable,
        ),
        AgentPolicy(
            "anthropic-clear-tool-uses",
            "Anthropic clear_tool_uses",
            "clear_tool_uses_20250919: over 100k input tokens, all tool results but the newest 3 "
            "cleared (server side)",
            "https://docs.claude.com/en/docs/build-with-claude/context-editing",
            anthropic_clear_tool_uses,
            _fixed(CLEAR_TRIGGER),
            summarizes=False,
            default=False,
        ),
        AgentPolicy(
            "anthropic-compaction",
            "Anthropic compaction",
            "compact_20260112: over 150k input tokens, a summary replaces everything before it",
            "https://platform.claude.com/docs/en/build-with-claude/compaction-threshold",
            anthropic_compaction,
            _fixed(SERVER_COMPACT_TRIGGER),
            default=False,
        ),
    )
}


def get_policy(name: str) -> AgentPolicy:
    """The policy registered under `name`; an unknown name lists the known ones."""
    return registered(POLICIES, "agent", name)


__all__ = [
    "POLICIES",
    "SUMMARY_BY",
    "SUMMARY_TOKENS",
    "AgentPolicy",
    "Edit",
    "Env",
    "Step",
    "Summarize",
    "get_policy",
]
