"""What leading agents keep when they compact, applied once to a transcript within a budget.

Each agent writes its summary with an LLM; here ctxkit's offline extractive summarizer stands in
(`summarizers.extractive.summarize_extractive`) and the output says so (metadata
`summary_by`). The rules of what is kept beside the summary are the agents' own:

- Codex CLI (`codex-rs/core/src/compact.rs`, `build_compacted_history`): the initial context
  (system and developer messages), then the user's messages, newest first within 20,000 tokens
  (the oldest one taken cut in the middle), then one user message holding the summary behind a
  handoff prefix. No assistant message or tool output survives.
- Gemini CLI (`packages/core/src/services/chatCompressionService.ts`): the history is split
  where 30% of it (by characters) remains, at a user message that is not a function response;
  the older 70% becomes a `<state_snapshot>` user message answered by the model, the newest 30%
  stays verbatim. Where that does not fit the budget, the newest part that fits is kept.

Both fall back to dropping the oldest messages when the result still does not fit, as their
harness would on the next overflow.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxkit.counting import Fit
from ctxkit.model import Transcript, Unit
from ctxkit.recipes.baselines import drop_oldest, is_result, with_meta
from ctxkit.structure import is_request

SUMMARY_BY = "ctxkit extractive summarizer (standing in for the agent's LLM summary)"
CODEX_USER_TOKENS = 20_000
CODEX_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its "
    "thinking process. Use it to build on the work that has already been done:"
)
GEMINI_KEEP_SHARE = 0.3
SUMMARY_SHARE = 0.25  # of the budget, for the stand-in summary; at most SUMMARY_MAX tokens
SUMMARY_MAX = 2_000


def _summary(units: Sequence[Unit], target: int, fit: Fit) -> str:
    from ctxkit.summarizers.extractive import summarize_extractive

    return summarize_extractive(list(units), max(40, target), None, fit.tok)


def _summary_budget(budget: int) -> int:
    return min(SUMMARY_MAX, max(60, int(budget * SUMMARY_SHARE)))


def _cut_middle(text: str, tokens: int, fit: Fit) -> str:
    """Codex's `truncate_middle`: head and tail of a message that does not fit whole."""
    if fit.tok.count(text) <= tokens:
        return text
    chars = max(0, tokens * 4)
    half = chars // 2
    return f"{text[:half]}\n…(truncated)…\n{text[len(text) - half :]}" if half else ""


def codex(t: Transcript, budget: int, fit: Fit) -> Transcript:
    """Codex CLI's compaction: initial context + recent user messages (20k) + handoff summary."""
    if fit.total(t) <= budget:
        return t
    system = [u for u in t.units if u.role == "system"]
    history = [u for u in t.units if u.role != "system"]
    summary_text = CODEX_PREFIX + "\n" + _summary(history, _summary_budget(budget), fit)
    summary = Unit("codex-summary", "user", type="summary", content=summary_text)
    room: float = budget - fit.total(t, [*system, summary])
    room = min(room, CODEX_USER_TOKENS)
    requests = [u for u in history if is_request(u)]  # Codex leaves out its own context blocks too
    kept: list[Unit] = []
    for u in reversed(requests):
        cost = fit.unit(u)
        if cost <= room:
            kept.append(u)
            room -= cost
            continue
        cut = _cut_middle(u.content, int(room) - 8, fit)
        if cut:
            kept.append(u.replace(content=cut))
        break
    out = t.replace(units=[*system, *reversed(kept), summary])
    return with_meta(drop_oldest(out, budget, fit), summary_by=SUMMARY_BY)


def _gemini_split(history: Sequence[Unit], fit: Fit) -> int:
    """The index from which the newest 30% of the history (by characters) is kept: the first
    user message (not a tool result) at or after that point; len(history) when there is none."""
    sizes = [len(u.content) + sum(len(c.arguments) for c in u.tool_calls) for u in history]
    total = sum(sizes)
    running = 0
    for i, size in enumerate(sizes):
        if (
            running >= total * (1 - GEMINI_KEEP_SHARE)
            and history[i].role == "user"
            and not is_result(history[i])
        ):
            return i
        running += size
    return len(history)


def gemini_cli(t: Transcript, budget: int, fit: Fit) -> Transcript:
    """Gemini CLI's compression: a state snapshot of the older 70%, the newest 30% verbatim."""
    if fit.total(t) <= budget:
        return t
    system = [u for u in t.units if u.role == "system"]
    history = [u for u in t.units if u.role != "system"]
    split = _gemini_split(history, fit)
    snapshot_text = (
        "<state_snapshot>\n"
        + _summary(history[:split], _summary_budget(budget), fit)
        + "\n</state_snapshot>"
    )
    snapshot = Unit("gemini-snapshot", "user", type="summary", content=snapshot_text)
    ack = Unit("gemini-ack", "assistant", content="Got it. Thanks for the additional context!")
    out = t.replace(units=[*system, snapshot, ack, *history[split:]])
    if fit.total(out) > budget:
        # the newest 30% does not fit: keep the newest part of it that does
        head = [*system, snapshot, ack]
        trimmed = drop_oldest(
            t.replace(units=history[split:]), round(budget - fit.total(t, head) + fit.fixed(t)), fit
        )
        out = t.replace(units=[*head, *trimmed.units])
    return with_meta(drop_oldest(out, budget, fit), summary_by=SUMMARY_BY)
