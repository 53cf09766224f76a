"""The open-source coding agents' policies, read from their sources: Codex CLI, Gemini CLI,
OpenHands (its summarizing and its masking condenser) and opencode
(`recipes.policies` registers them)."""

from __future__ import annotations

from collections.abc import Sequence

from ctxkit.budget.triggers import RULES
from ctxkit.model import Unit
from ctxkit.recipes.baselines import CLEARED, is_result
from ctxkit.recipes.policy_base import (
    Edit,
    Env,
    Step,
    blocks_from,
    previous_summary,
    result_name,
    split_system,
    summarize,
)
from ctxkit.structure import is_request

# --- Codex CLI ----------------------------------------------------------------------------------

CODEX_USER_TOKENS = 20_000
CODEX_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking "
    "process. You also have access to the state of the tools that were used by that language "
    "model. Use this to build on the work that has already been done and avoid duplicating work. "
    "Here is the summary produced by the other language model, use the information in this "
    "summary to  assist with your own analysis:"
)


def _truncate_middle(text: str, tokens: int, env: Env) -> str:
    """Codex's `truncate_text` with a token policy: head and tail, a marker in between."""
    have = env.count(text)
    if have <= tokens:
        return text
    keep_chars = max(0, int(len(text) * tokens / max(1, have)))
    half = keep_chars // 2
    return f"{text[:half]}…{have - tokens} tokens truncated…{text[len(text) - half :]}"


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
                u.content, max_chars, f"tool-outputs/{result_name(history, u) or 'tool'}_{i}.txt"
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
        if result_name(ctx, u).lower() in GEMINI_EXEMPT:
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
            f"tool-outputs/{result_name(ctx, out[i]) or 'tool'}_{i}.txt\n</{MASK_TAG}>"
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
        if not is_result(u) or result_name(ctx, u).lower() in OPENCODE_PROTECTED_TOOLS:
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


def opencode_usable(w: int, o: int) -> int:
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
    usable = opencode_usable(env.window, env.max_output)
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
