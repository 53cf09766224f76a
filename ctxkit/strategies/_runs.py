"""Removing whole blocks and leaving one placeholder per removed run (shared by the
relevance-driven strategies)."""

from __future__ import annotations

from collections.abc import Callable

from ctxkit.model import Unit
from ctxkit.strategies._common import is_compacted
from ctxkit.strategies.base import State, archive_unit, run_placeholder

# (number of units removed, their tokens, their refs) -> placeholder text
TextFn = Callable[[int, int, list[str]], str]


def removable_blocks(state: State, keep: set[int]) -> list[tuple[int, int]]:
    """Blocks with no protected unit and no ctxkit summary/placeholder (those are tiny and carry
    refs of their own); the last block always stays, so the conversation ends where it did."""
    from ctxkit.structure import blocks

    all_blocks = blocks(list(state.units))
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

    None when nothing is removed or the result is not smaller.
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
        refs = [archive_unit(state, u) for u in removed]
        n_tokens = sum(tokens[i] for i in run)
        out.append(run_placeholder(removed, refs, text(len(run), n_tokens, refs), strategy))
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
