"""Removing whole blocks and leaving one placeholder per removed run (shared by the
relevance-driven strategies)."""

from __future__ import annotations

from collections.abc import Callable

from ctxkit.archive.store import REF_PROBE
from ctxkit.model import Unit
from ctxkit.strategies._common import describe, fmt_refs, is_compacted, tool_names
from ctxkit.strategies.base import (
    State,
    archive_unit,
    archived_as,
    fmt_int,
    run_placeholder,
    smaller_than,
)

# (the units removed, the tokens of each, their refs) -> placeholder text
TextFn = Callable[[list[Unit], list[int], list[str]], str]


FAILURES_SAID = 2  # a placeholder names at most this many of the failures it hides


def failed_there(removed: list[Unit]) -> str:
    """`; failed there: Edit(db/mod.rs) -> error: File has not been read yet.` for the failures
    among the removed calls (the newest `FAILURES_SAID`; how many more): a model reading the
    placeholder knows a call went wrong there without recalling it. "" when none failed."""
    from ctxkit.summarizers.extractive import failures

    found = failures(removed)
    if not found:
        return ""
    more = len(found) - FAILURES_SAID
    return "; failed there: " + "; ".join(found[-FAILURES_SAID:]) + (f" (and {more} more)" if more > 0 else "")


def run_text(removed: list[Unit], tokens: list[int], refs: list[str]) -> str:
    """`[3 earlier messages (1,234 tokens) archived as ref-a ref-b ref-c]`, and what failed
    there (`failed_there`)."""
    n = len(removed)
    return (
        f"[{n} earlier message{'s' if n != 1 else ''} ({fmt_int(sum(tokens))} tokens)"
        f" {archived_as(refs)}{failed_there(removed)}]"
    )


def linked_text(removed: list[Unit], tokens: list[int], refs: list[str]) -> str:
    """`[2 earlier messages archived: user message (40 tokens) as ref-a; bash output (1,194
    tokens) as ref-b]`: what each removed message was, beside its ref."""
    names = tool_names(removed)
    parts = [
        f"{describe(u, names)} ({fmt_int(n)} tokens) as {fmt_refs([r])}"
        for u, n, r in zip(removed, tokens, refs, strict=True)
    ]
    n = len(removed)
    return f"[{n} earlier message{'s' if n != 1 else ''} archived: {'; '.join(parts)}{failed_there(removed)}]"


def removable_blocks(state: State, keep: set[int]) -> list[tuple[int, int]]:
    """Blocks with no protected unit and no ctxkit summary/placeholder (those are tiny and carry
    refs of their own); the last block always stays, so the conversation ends where it did."""
    from ctxkit.structure import blocks

    all_blocks = blocks(state.units)
    out = []
    for start, end in all_blocks[:-1]:
        if any(i in keep for i in range(start, end)):
            continue
        if any(is_compacted(state.units[i]) for i in range(start, end)):
            continue
        out.append((start, end))
    return out


def remove_runs(state: State, remove: set[int], strategy: str, text: TextFn) -> State | None:
    """Drop the units at `remove` (whole blocks), archive each, one placeholder per run.

    A run not larger than its placeholder (in tokens or bytes) stays as it is. None when
    nothing is removed or the result is not smaller.
    """
    if not remove:
        return None
    tokens = state.units_tokens()
    out: list[Unit] = []
    run: list[int] = []

    def flush() -> None:
        if not run:
            return
        removed = [state.units[i] for i in run]
        counts = [tokens[i] for i in run]
        probe = text(removed, counts, [REF_PROBE] * len(removed))
        if not smaller_than(probe, removed, state.ctx.tokenizer):
            out.extend(removed)
            run.clear()
            return
        refs = [archive_unit(state, u) for u in removed]
        out.append(run_placeholder(removed, refs, text(removed, counts, refs), strategy))
        run.clear()

    for i, unit in enumerate(state.units):
        if i in remove:
            run.append(i)
            continue
        flush()
        out.append(unit)
    flush()
    new = state.with_units(out)
    return new if new.tokens() < state.tokens() else None
