"""What each leading agent does to its context before a model call: when it compacts, and what it
keeps. A registry (`POLICIES`) of the agents' own rules, read from their sources (cited per entry;
file, version and date in docs/agents.md), for the session replay (`recipes.session`).

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.budget.triggers import RULES
from ctxkit.counting import Fit
from ctxkit.errors import unknown_name
from ctxkit.model import Transcript, Unit
from ctxkit.recipes.baselines import CLEARED, is_result
from ctxkit.structure import is_request

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


def _truncate_middle(text: str, tokens: int, env: Env) -> str:
    """Codex's `truncate_text` with a token policy: head and tail, a marker in between."""
    have = env.count(text)
    if have <= tokens:
        return text
    keep_chars = max(0, int(len(text) * tokens / max(1, have)))
    half = keep_chars // 2
    return f"{text[:half]}…{have - tokens} tokens truncated…{text[len(text) - half :]}"


def _result_name(units: Sequence[Unit], u: Unit) -> str:
    if u.name:
        return u.name
    for v in units:
        for c in v.tool_calls:
            if c.id == u.tool_call_id:
                return c.name
    return ""


# --- Claude Code --------------------------------------------------------------------------------

CC_PREFIX = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\n"
)
CC_IDLE_S = 3600  # time-based microcompact: the prompt cache (1 h TTL) has expired anyway
CC_KEEP_RESULTS = 5
CC_FILES = 5
CC_FILE_TOKENS = 5_000
CC_RECENT = {"min_tokens": 10_000, "min_texts": 5, "max_tokens": 40_000}
_CC_EXEMPT = ("todowrite", "task", "agent", "exitplanmode", "askuserquestion", "skill")
_READ_TOOLS = ("read", "view", "read_file", "cat")


def _compactable(units: Sequence[Unit], u: Unit) -> bool:
    name = _result_name(units, u).lower()
    return not any(name == x or name.endswith("__" + x) for x in _CC_EXEMPT)


def _clear_older(
    units: list[Unit], keep: int, placeholder: str, allowed: Callable[[Unit], bool]
) -> tuple[list[Unit], int]:
    """All tool results but the newest `keep` (of those `allowed`) replaced by `placeholder`."""
    results = [i for i, u in enumerate(units) if is_result(u) and allowed(u)]
    cleared = 0
    out = list(units)
    for i in results[: max(0, len(results) - keep)]:
        if out[i].content != placeholder:
            out[i] = out[i].replace(content=placeholder, meta={**out[i].meta, "peer": "cleared"})
            cleared += 1
    return out, cleared


def _files_read(units: Sequence[Unit]) -> list[tuple[str, Unit]]:
    """(path, result) of each file read by a read tool, newest first, one per path."""
    from ctxkit.facts import decoded_args

    by_call: dict[str, str] = {}
    for u in units:
        for c in u.tool_calls:
            if c.name.lower() in _READ_TOOLS or c.name.lower().endswith("read_file"):
                args = decoded_args(c.arguments)
                path = next(
                    (
                        args.get(k)
                        for k in ("file_path", "path", "absolute_path")
                        if isinstance(args, dict) and isinstance(args.get(k), str)
                    ),
                    None,
                )
                if path:
                    by_call[c.id] = path
    seen: set[str] = set()
    out = []
    for u in reversed(units):
        path = by_call.get(u.tool_call_id or "")
        if path and path not in seen and u.content and u.content != CLEARED:
            seen.add(path)
            out.append((path, u))
    return out


def claude_code(ctx: list[Unit], env: Env) -> Step:
    """Claude Code: time-based microcompact, then auto-compact at W - min(O, 20k) - 13k."""
    edits: list[Edit] = []
    idle = (env.now - env.last_answer) if env.now is not None and env.last_answer is not None else 0
    if idle > CC_IDLE_S:
        before = env.tokens(ctx)
        ctx, n = _clear_older(ctx, CC_KEEP_RESULTS, CLEARED, lambda u: _compactable(ctx, u))
        if n:
            edits.append(
                Edit(
                    "microcompact",
                    before,
                    env.tokens(ctx),
                    f"{n} tool results cleared after {idle / 60:.0f} idle minutes",
                )
            )
    tokens = env.tokens(ctx)
    if tokens < RULES["claude-code"].trigger(env.window, env.max_output):
        return Step(ctx, edits=edits)
    system, history = split_system(ctx)
    start = recent_start(history, env.fit, **CC_RECENT)
    if start >= len(history) - 1:  # keep at least the newest message
        start = blocks_from(history, max(0, len(history) - 1))
    older, recent = history[:start], history[start:]
    text = CC_PREFIX + summarize(env, older, previous_summary(older))
    summary = Unit(env.next_id("claude-code-summary"), "user", type="summary", content=text)
    recent_ids = {u.tool_call_id for u in recent if u.tool_call_id}
    files = []
    for path, result in _files_read(older)[:CC_FILES]:
        if result.tool_call_id in recent_ids:
            continue
        body = result.content
        if env.count(body) > CC_FILE_TOKENS:
            body = body[: CC_FILE_TOKENS * 3] + "\n… (truncated)"
        files.append(
            Unit(
                env.next_id("claude-code-file"),
                "user",
                type="code",
                content=f"Note: {path} was read before the last conversation was summarized:\n{body}",
            )
        )
    trigger = RULES["claude-code"].trigger(env.window, env.max_output)
    out = [*system, summary, *files, *recent]
    if env.tokens(out) >= trigger:  # what it keeps must leave room, else the summary alone
        out = (
            [*system, summary, *recent]
            if env.tokens([*system, summary, *recent]) < trigger
            else [*system, summary]
        )
        files = [u for u in files if u in out]
        recent = [u for u in recent if u in out]
    edits.append(
        Edit(
            "compaction",
            tokens,
            env.tokens(out),
            f"{len(files)} files re-read, {len(recent)} recent messages kept",
            env.count(text),
        )
    )
    return Step(out, edits=edits)


# --- Codex CLI ----------------------------------------------------------------------------------

CODEX_USER_TOKENS = 20_000
CODEX_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking "
    "process. You also have access to the state of the tools that were used by that language "
    "model. Use this to build on the work that has already been done and avoid duplicating work. "
    "Here is the summary produced by the other language model, use the information in this "
    "summary to  assist with your own analysis:"
)


def codex_history(
    ctx: Sequence[Unit], summary_text: str, env: Env, stem: str = "codex-summary"
) -> list[Unit]:
    """`build_compacted_history`: the initial context (system and developer messages, the
    context blocks before the first request), the user's requests newest first within 20,000
    tokens (the oldest taken cut in the middle), then the summary as a user message."""
    first = next((i for i, u in enumerate(ctx) if is_request(u) and u.type != "summary"), len(ctx))
    initial = [
        u
        for u in ctx[:first]
        if u.role in ("system", "user") and not is_result(u) and u.type != "summary"
    ]
    initial += [u for u in ctx[first:] if u.role == "system"]
    requests = [u for u in ctx[first:] if is_request(u) and u.type != "summary"]
    room = CODEX_USER_TOKENS
    kept: list[Unit] = []
    for u in reversed(requests):
        if room <= 0:
            break
        cost = env.count(u.content)
        if cost <= room:
            kept.append(u)
            room -= cost
        else:
            kept.append(u.replace(content=_truncate_middle(u.content, room, env)))
            break
    summary = Unit(
        env.next_id(stem), "user", type="summary", content=summary_text or "(no summary available)"
    )
    return [*initial, *reversed(kept), summary]


def codex(ctx: list[Unit], env: Env) -> Step:
    """Codex CLI: at 90% of the window, `build_compacted_history` with a handoff summary."""
    tokens = env.tokens(ctx)
    if tokens < RULES["codex"].trigger(env.window, env.max_output):
        return Step(ctx)
    text = CODEX_PREFIX + "\n" + summarize(env, ctx, previous_summary(ctx))
    out = codex_history(ctx, text, env)
    kept = sum(1 for u in out if u.type != "summary")
    return Step(
        out,
        edits=[
            Edit("compaction", tokens, env.tokens(out), f"{kept} messages kept", env.count(text))
        ],
    )


# --- Gemini CLI ---------------------------------------------------------------------------------

GEMINI_PRESERVE = 0.3
GEMINI_RESPONSE_BUDGET = 50_000
GEMINI_TRUNCATE_CHARS = 40_000  # DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD
GEMINI_ACK = "Got it. Thanks for the additional context!"
GEMINI_PROTECT = 50_000  # tool-output masking: the newest tool tokens never masked
GEMINI_PRUNABLE = 30_000  # ... and masking only once this much can be masked
GEMINI_PREVIEW = 250
GEMINI_EXEMPT = ("activate_skill", "ask_user", "enter_plan_mode", "exit_plan_mode")
MASK_TAG = "tool_output_masked"


def _chars(u: Unit) -> int:
    return len(u.content) + sum(len(c.name) + len(c.arguments) for c in u.tool_calls) + 40


def gemini_split(history: Sequence[Unit], fraction: float = 1 - GEMINI_PRESERVE) -> int:
    """`findCompressSplitPoint`: the first user message (not a function response) at which
    `fraction` of the characters lie before it; else everything when the history ends on a
    model answer without calls, else the last such user message seen."""
    sizes = [_chars(u) for u in history]
    target = sum(sizes) * fraction
    last = 0
    running = 0
    for i, u in enumerate(history):
        if u.role == "user" and not is_result(u):
            if running >= target:
                return i
            last = i
        running += sizes[i]
    if history and history[-1].role == "assistant" and not history[-1].tool_calls:
        return len(history)
    return last


def _cut_output(text: str, max_chars: int, path: str) -> str:
    """`formatTruncatedToolOutput`: the first 20% and last 80% of `max_chars`."""
    if len(text) <= max_chars:
        return text
    head = int(max_chars * 0.2)
    tail = max_chars - head
    return (
        f"Output too large. Showing first {head:,} and last {tail:,} characters. For full output "
        f"see: {path}\n{text[:head]}\n\n... [{len(text) - head - tail:,} characters omitted] ...\n\n{text[-tail:]}"
    )


def gemini_truncate(history: Sequence[Unit], env: Env, tokens: int) -> list[Unit]:
    """`truncateHistoryToBudget`: newest first, function responses past a 50k-token budget cut
    to the threshold `min(40,000 characters, 4 x the window left)`."""
    max_chars = max(0, min(GEMINI_TRUNCATE_CHARS, 4 * (env.window - tokens)))
    used = 0
    out = list(history)
    for i in range(len(out) - 1, -1, -1):
        u = out[i]
        if not is_result(u):
            continue
        cost = env.count(u.content)
        if used + cost > GEMINI_RESPONSE_BUDGET and len(u.content) > max_chars:
            cut = _cut_output(
                u.content, max_chars, f"tool-outputs/{_result_name(history, u) or 'tool'}_{i}.txt"
            )
            out[i] = u.replace(content=cut, meta={**u.meta, "peer": "truncated"})
            used += env.count(cut)
        else:
            used += cost
    return out


def gemini_mask(ctx: list[Unit], env: Env) -> tuple[list[Unit], int]:
    """`ToolOutputMaskingService.mask`: past the newest 50k tool tokens (the latest turn never
    counted), every older tool output becomes a 250 + 250 character preview, once 30k can go."""
    end = len(ctx) - 1
    while end > 0 and is_result(ctx[end]) and is_result(ctx[end - 1]):
        end -= 1  # the latest Content: a run of function responses is one message
    protected = 0.0
    boundary = False
    prunable: list[int] = []
    total = 0.0
    for i in range(end - 1, -1, -1):
        u = ctx[i]
        if not is_result(u) or u.content.startswith(f"<{MASK_TAG}>"):
            continue
        if _result_name(ctx, u).lower() in GEMINI_EXEMPT:
            continue
        cost = env.fit.unit(u)
        if not boundary:
            protected += cost
            if protected <= GEMINI_PROTECT:
                continue
            boundary = True
        prunable.append(i)
        total += cost
    if total < GEMINI_PRUNABLE:
        return ctx, 0
    out = list(ctx)
    for i in prunable:
        text = out[i].content
        preview = (
            f"{text[:GEMINI_PREVIEW]}\n... [TRUNCATED] ...\n{text[-GEMINI_PREVIEW:]}"
            if len(text) > 2 * GEMINI_PREVIEW
            else text
        )
        masked = (
            f"<{MASK_TAG}>\n{preview}\n\nOutput too large. Full output available at: "
            f"tool-outputs/{_result_name(ctx, out[i]) or 'tool'}_{i}.txt\n</{MASK_TAG}>"
        )
        out[i] = out[i].replace(content=masked, meta={**out[i].meta, "peer": "masked"})
    return out, len(prunable)


def gemini_cli(ctx: list[Unit], env: Env) -> Step:
    """Gemini CLI: compression at half the window, then tool-output masking on every call."""
    edits: list[Edit] = []
    tokens = env.tokens(ctx)
    if tokens >= RULES["gemini-cli"].trigger(env.window, env.max_output):
        system, history = split_system(ctx)
        truncated = gemini_truncate(history, env, tokens)
        if env.state.get("failed"):
            # a summary already failed: truncation alone, when it helps
            out = [*system, *truncated]
            after = env.tokens(out)
            if after < tokens:
                edits.append(
                    Edit("truncate", tokens, after, "function responses over the 50k budget cut")
                )
                ctx = out
        else:
            split = gemini_split(truncated)
            if split > 0:
                text = (
                    "<state_snapshot>\n"
                    + summarize(env, history[:split], previous_summary(history[:split]))
                    + "\n</state_snapshot>"
                )
                snapshot = Unit(
                    env.next_id("gemini-snapshot"), "user", type="summary", content=text
                )
                ack = Unit(env.next_id("gemini-ack"), "assistant", content=GEMINI_ACK)
                out = [*system, snapshot, ack, *truncated[split:]]
                after = env.tokens(out)
                if after > tokens:
                    env.state["failed"] = True
                    edits.append(
                        Edit(
                            "failed", tokens, tokens, "the snapshot would have inflated the context"
                        )
                    )
                else:
                    edits.append(
                        Edit(
                            "compaction",
                            tokens,
                            after,
                            f"{len(history) - split} newest messages kept",
                            env.count(text),
                        )
                    )
                    ctx = out
    before = env.tokens(ctx)
    ctx, n = gemini_mask(ctx, env)
    if n:
        edits.append(Edit("mask", before, env.tokens(ctx), f"{n} tool outputs masked"))
    return Step(ctx, edits=edits)


# --- OpenHands ----------------------------------------------------------------------------------

OH_MAX_SIZE = 240
OH_KEEP_FIRST = 2
OH_ATTENTION = 100  # ObservationMaskingCondenserConfig.attention_window
OH_MASKED = "<MASKED>"


def _events(u: Unit) -> int:
    """OpenHands events a unit stands for: one action per tool call, else one."""
    return max(1, len(u.tool_calls))


def openhands(ctx: list[Unit], env: Env) -> Step:
    """OpenHands SDK `LLMSummarizingCondenser(max_size=240, keep_first=2)`, `max_tokens` the
    model's input limit: past 240 events it keeps the first 2, a summary and the newest
    240 // 2 - 2 - 1 events; past the token limit, the newest suffix under half of it."""
    events = sum(_events(u) for u in ctx)
    tokens = env.tokens(ctx)
    limit = env.window
    reasons = []
    if events > OH_MAX_SIZE:
        reasons.append("events")
    if tokens > limit:
        reasons.append("tokens")
    if not reasons:
        return Step(ctx)
    head_end = 0
    seen = 0
    while head_end < len(ctx) and seen < OH_KEEP_FIRST:
        seen += _events(ctx[head_end])
        head_end += 1
    suffixes = []
    if "events" in reasons:
        suffixes.append(OH_MAX_SIZE // 2 - OH_KEEP_FIRST - 1)
    if "tokens" in reasons:
        # the shortest suffix (in events) that brings the view under half the limit
        room = limit // 2 - env.tokens(ctx[:head_end])
        n_events = 0
        kept = 0.0
        for u in reversed(ctx[head_end:]):
            cost = env.fit.unit(u)
            if kept + cost > room:
                break
            kept += cost
            n_events += _events(u)
        suffixes.append(n_events)
    tail_events = min(suffixes)
    start = len(ctx)
    n = 0
    while start > head_end and n + _events(ctx[start - 1]) <= tail_events:
        start -= 1
        n += _events(ctx[start])
    start = blocks_from(ctx, max(start, head_end))
    forgotten = ctx[head_end:start]
    if not forgotten:
        return Step(ctx)
    text = summarize(env, forgotten, previous_summary(forgotten))
    summary = Unit(env.next_id("openhands-summary"), "user", type="summary", content=text)
    out = [*ctx[:head_end], summary, *ctx[start:]]
    note = f"{' and '.join(reasons)}: {sum(_events(u) for u in forgotten)} events forgotten"
    return Step(out, edits=[Edit("compaction", tokens, env.tokens(out), note, env.count(text))])


def openhands_masking(ctx: list[Unit], env: Env) -> Step:
    """OpenHands `ObservationMaskingCondenser(attention_window=100)`: every observation outside
    the newest 100 events reads `<MASKED>`."""
    total = sum(_events(u) for u in ctx)
    out = list(ctx)
    position = 0
    masked = 0
    before = env.tokens(ctx)
    for i, u in enumerate(ctx):
        if is_result(u) and position < total - OH_ATTENTION and u.content != OH_MASKED:
            out[i] = u.replace(content=OH_MASKED, meta={**u.meta, "peer": "masked"})
            masked += 1
        position += _events(u)
    if not masked:
        return Step(ctx)
    return Step(out, edits=[Edit("mask", before, env.tokens(out), f"{masked} observations masked")])


# --- opencode -----------------------------------------------------------------------------------

OPENCODE_PROTECT = 40_000
OPENCODE_MINIMUM = 20_000
OPENCODE_PROTECTED_TOOLS = ("skill",)


def opencode_prune(ctx: list[Unit], env: Env) -> tuple[list[Unit], int]:
    """`SessionCompaction.prune`: newest first, past the two newest user turns and up to the last
    summary, completed tool outputs beyond the newest 40k tokens are cleared when that saves
    more than 20k."""
    turns = 0
    total = pruned = 0
    marks: list[int] = []
    for i in range(len(ctx) - 1, -1, -1):
        u = ctx[i]
        if is_request(u):
            turns += 1
        if turns < 2:
            continue
        if u.type == "summary":
            break
        if not is_result(u) or _result_name(ctx, u).lower() in OPENCODE_PROTECTED_TOOLS:
            continue
        if u.content == CLEARED:
            break
        cost = env.count(u.content)
        total += cost
        if total <= OPENCODE_PROTECT:
            continue
        pruned += cost
        marks.append(i)
    if pruned <= OPENCODE_MINIMUM:
        return ctx, 0
    out = list(ctx)
    for i in marks:
        out[i] = out[i].replace(content=CLEARED, meta={**out[i].meta, "peer": "pruned"})
    return out, len(marks)


def _opencode_usable(w: int, o: int) -> int:
    return RULES["opencode"].trigger(w, o)


def opencode(ctx: list[Unit], env: Env) -> Step:
    """opencode: prune when a user turn begins; compact at the usable window, keeping a summary
    and the newest turns within min(15k, max(2k, usable / 4)) tokens."""
    edits: list[Edit] = []
    if env.new_turn:
        before = env.tokens(ctx)
        ctx, n = opencode_prune(ctx, env)
        if n:
            edits.append(Edit("prune", before, env.tokens(ctx), f"{n} tool outputs cleared"))
    tokens = env.tokens(ctx)
    usable = _opencode_usable(env.window, env.max_output)
    if tokens < usable:
        return Step(ctx, edits=edits)
    system, history = split_system(ctx)
    budget = min(15_000, max(2_000, usable // 4))
    turn_starts = [i for i, u in enumerate(history) if is_request(u)]
    keep = len(history)
    used = 0.0
    for k in range(len(turn_starts) - 1, -1, -1):
        start = turn_starts[k]
        end = turn_starts[k + 1] if k + 1 < len(turn_starts) else len(history)
        size = sum(env.fit.unit(u) for u in history[start:end])
        if used + size <= budget:
            used += size
            keep = start
            continue
        # splitTurn: the longest tail of this turn (after its request) within what is left
        for s in range(start + 1, end):
            if sum(env.fit.unit(u) for u in history[s:end]) <= budget - used:
                keep = blocks_from(history, s)
                break
        break
    if keep == 0:
        return Step(ctx, edits=edits)
    text = summarize(env, history[:keep], previous_summary(history[:keep]))
    summary = Unit(env.next_id("opencode-summary"), "assistant", type="summary", content=text)
    out = [*system, summary, *history[keep:]]
    edits.append(
        Edit(
            "compaction",
            tokens,
            env.tokens(out),
            f"{len(history) - keep} recent messages kept",
            env.count(text),
        )
    )
    return Step(out, edits=edits)


# --- Anthropic API ------------------------------------------------------------------------------

CLEAR_TRIGGER = 100_000
CLEAR_KEEP = 3
SERVER_COMPACT_TRIGGER = 150_000


def anthropic_clear_tool_uses(ctx: list[Unit], env: Env) -> Step:
    """`clear_tool_uses_20250919` with its defaults: when the request is over 100k input tokens
    the server clears every tool result but the newest 3. The client keeps its full history and
    sends it again; the edit applies to each request."""
    tokens = env.tokens(ctx)
    if tokens <= CLEAR_TRIGGER:
        return Step(ctx)
    sent, n = _clear_older(ctx, CLEAR_KEEP, CLEARED, lambda u: True)
    if not n:
        return Step(ctx)
    after = env.tokens(sent)
    return Step(
        ctx,
        sent=sent,
        edits=[Edit("clear", tokens, after, f"{n} tool results cleared (server side)")],
    )


def anthropic_compaction(ctx: list[Unit], env: Env) -> Step:
    """`compact_20260112` with its default trigger: over 150k input tokens the server writes a
    compaction block and drops everything before it on later requests."""
    tokens = env.tokens(ctx)
    if tokens <= SERVER_COMPACT_TRIGGER:
        return Step(ctx)
    system, history = split_system(ctx)
    text = summarize(env, history, previous_summary(history))
    summary = Unit(env.next_id("anthropic-compaction"), "assistant", type="summary", content=text)
    out = [*system, summary]
    return Step(
        out,
        edits=[
            Edit(
                "compaction",
                tokens,
                env.tokens(out),
                "everything before the compaction block dropped",
                env.count(text),
            )
        ],
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
            _opencode_usable,
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
    try:
        return POLICIES[name]
    except KeyError:
        raise unknown_name("agent", name, POLICIES) from None


__all__ = [
    "POLICIES",
    "SUMMARY_BY",
    "SUMMARY_TOKENS",
    "AgentPolicy",
    "Edit",
    "Env",
    "Step",
    "get_policy",
]
