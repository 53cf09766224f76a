"""The Anthropic side: Claude Code's auto-compact and microcompact, and the Messages API's own
server-side edits (`clear_tool_uses`, compaction), each from its cited rule
(`recipes.policies` registers them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctxkit.budget.triggers import RULES
from ctxkit.model import Unit
from ctxkit.recipes.baselines import CLEARED, is_result
from ctxkit.recipes.policy_base import (
    Edit,
    Env,
    Step,
    blocks_from,
    previous_summary,
    recent_start,
    result_name,
    split_system,
    summarize,
)

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
    name = result_name(units, u).lower()
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
