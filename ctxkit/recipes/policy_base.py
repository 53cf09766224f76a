"""What every agent policy takes and returns (`Env`, `Step`, `Edit`, `AgentPolicy`) and the
pieces the agents' policies share: system units, the previous summary, the stand-in summary,
cuts that keep a tool call with its result, the newest messages to keep."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.counting import Fit
from ctxkit.model import Transcript, Unit
from ctxkit.recipes.baselines import is_result

SUMMARY_TOKENS = 3_000
SUMMARY_BY = "ctxkit extractive summarizer (standing in for the agent's LLM summary)"

Summarize = Callable[[Sequence[Unit], int, "str | None"], str]


@dataclass
class Edit:
    """One thing a policy did before a call: a compaction (the history replaced by a summary and
    what is kept), or a lighter edit (clear, prune, mask, microcompact, truncate); `failed` when
    the agent tried and kept its context."""

    kind: str
    tokens_before: int
    tokens_after: int
    note: str = ""
    summary_tokens: int = 0

    @property
    def compaction(self) -> bool:
        return self.kind == "compaction"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summary_tokens": self.summary_tokens,
            "note": self.note,
        }


@dataclass
class Env:
    """What a policy knows at a call: the model's window and max output, how tokens are counted,
    the summarizer, the time of the call and of the last answer, and its own state."""

    window: int
    max_output: int
    fit: Fit
    transcript: Transcript  # the original (its tool schemas count in every call)
    summarize: Summarize
    now: float | None = None  # timestamp of the newest unit before the call
    last_answer: float | None = None  # timestamp of the newest assistant unit before that
    new_turn: bool = False  # the unit before this call is a user request: the last loop ended
    state: dict[str, Any] = field(default_factory=dict)  # per policy run

    def tokens(self, units: Sequence[Unit]) -> int:
        return self.fit.total(self.transcript, units)

    def count(self, text: str) -> int:
        return self.fit.tok.count(text)

    def next_id(self, stem: str) -> str:
        n = self.state["made"] = self.state.get("made", 0) + 1
        return f"{stem}-{n}"


@dataclass
class Step:
    """A policy's answer: the context it keeps, what it sends (None: the same), its edits."""

    context: list[Unit]
    sent: list[Unit] | None = None
    edits: list[Edit] = field(default_factory=list)


Policy = Callable[[list[Unit], Env], Step]


@dataclass(frozen=True)
class AgentPolicy:
    """One registered agent: its rule in a line, its sources, and the function."""

    name: str
    label: str
    rule: str
    source: str
    step: Policy
    trigger: Callable[[int, int], int | None]  # (W, O) -> the token count it compacts at
    summarizes: bool = True
    default: bool = True  # replayed when no agents are named


# --- shared pieces ------------------------------------------------------------------------------


def split_system(units: Sequence[Unit]) -> tuple[list[Unit], list[Unit]]:
    """(system units, the rest), order kept."""
    return [u for u in units if u.role == "system"], [u for u in units if u.role != "system"]


def previous_summary(units: Sequence[Unit]) -> str | None:
    """The newest summary in `units` (an earlier compaction's), to merge into the next."""
    for u in reversed(units):
        if u.type == "summary":
            return u.content
    return None


def summarize(env: Env, units: Sequence[Unit], previous: str | None = None) -> str:
    """The stand-in summary of `units` (earlier summaries merged through `previous`)."""
    return env.summarize([u for u in units if u.type != "summary"], SUMMARY_TOKENS, previous)


def blocks_from(units: Sequence[Unit], start: int) -> int:
    """The first index at or after `start` that does not separate a tool result from its call
    (a result whose call is before `start` moves the cut past it)."""
    calls = {c.id for u in units[start:] for c in u.tool_calls}
    i = start
    while i < len(units) and is_result(units[i]) and units[i].tool_call_id not in calls:
        i += 1
    return i


def recent_start(
    units: Sequence[Unit], fit: Fit, *, min_tokens: int, min_texts: int, max_tokens: int
) -> int:
    """Where the newest messages to keep begin: walking back until both `min_tokens` and
    `min_texts` messages with text are in, without going past `max_tokens`; pairs kept."""
    total = 0.0
    texts = 0
    start = len(units)
    for i in range(len(units) - 1, -1, -1):
        cost = fit.unit(units[i])
        if total + cost > max_tokens:
            break
        total += cost
        texts += bool(units[i].content.strip()) and not is_result(units[i])
        start = i
        if total >= min_tokens and texts >= min_texts:
            break
    return blocks_from(units, start)


def result_name(units: Sequence[Unit], u: Unit) -> str:
    """The name of the tool whose output `u` is (its own, else its call's)."""
    if u.name:
        return u.name
    for v in units:
        for c in v.tool_calls:
            if c.id == u.tool_call_id:
                return c.name
    return ""
