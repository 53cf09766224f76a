"""`compact`'s lines for people (stderr): what a file run, a directory run or a `--replay` run
did, from the outcome `engines.compact` returns."""

from __future__ import annotations

from typing import Any

from ctxkit.english import counted


def file_run_lines(request: Any, outcome: Any) -> list[str]:
    """A file run: each conversation's line (a dataset: those left out, every one with -v), a
    dataset's tally, where the archive is, and a dry run said."""
    s = outcome.summary
    several = s.conversations > 1
    lines = []
    for who, line in outcome.lines:
        if not several:
            lines.append(line)
        elif request.verbose or line.startswith("left out: "):
            lines.append(f"{who}: {line}")  # a dataset: what was left out, each line with -v
    if several and s.written:  # (nothing written: the exit line says so)
        lines.append(tally(s, f"{s.conversations:,} conversations"))
    if outcome.archive and not request.dry_run:
        lines.append(f"Archive: {outcome.archive} (ctxkit recall --list --archive {outcome.archive})")
    if request.dry_run:
        lines.append("Dry run: nothing written.")
    return lines


def tally(s: Any, head: str) -> str:
    """A run's one line: "300 conversations: 12 compacted, 288 unchanged; 1,200 -> 900 tokens"."""
    what = [f"{s.changed:,} compacted", f"{s.written - s.changed:,} unchanged"]
    if s.failures:
        what.append(f"{len(s.failures):,} left out")
    return f"{head}: {', '.join(what)}; {s.tokens_before:,} -> {s.tokens_after:,} tokens"


def directory_run_lines(request: Any, outcome: Any) -> list[str]:
    """A directory run: each conversation's line, the tally over files and shards, and where
    the outputs and archives are."""
    s = outcome.summary
    lines = [f"{who}: {line}" for who, line in outcome.lines]
    shards = f" ({counted(outcome.shards, 'shard')})" if outcome.shards != outcome.inputs else ""
    lines.append(tally(s, f"{counted(s.conversations, 'conversation')} from {counted(outcome.inputs, 'file')}{shards}"))
    out = request.output
    archives = f" and {counted(outcome.archives, 'archive')}" if outcome.archives else ""
    lines.append(
        f"Output: {out}, {counted(outcome.outputs, 'file')}{archives} "
        f"(ctxkit expand {out} -o restored/; ctxkit recall --list --archive {out})"
    )
    return lines


def replay_lines(outcome: Any) -> list[str]:
    """`compact --replay`: each transcript's replay line and its compactions, then what they
    cost on each --cost model and when each paid back."""
    lines = []
    for r in outcome.results:
        lines.append(r.summary_line())
        for c in r.compaction_log:
            what = c.error or (
                f"{c.tokens_before:,} -> {c.tokens_after:,} ({', '.join(c.strategies) or 'none'}), "
                f"the next call reads {c.cache_read_tokens:,} from the cache and writes "
                f"{c.cache_write_tokens:,}"
            )
            lines.append(f"  before call {c.call} (after unit {c.unit_id}): {what}, {c.time_ms:.0f} ms")
    for cost in outcome.costs:
        for m in cost:
            lines.append(
                f"cost on {m['model']}: ${m['usd']:.4f} with compaction, "
                f"${m['usd_without_compaction']:.4f} without (input, prompt caching priced)"
            )
            for c in m["compactions"]:
                n = c["break_even_calls"]
                paid = (
                    "not paid back within the session"
                    if n is None
                    else "paid back by that call itself"
                    if n == 0
                    else f"paid back after {n} more call{'s' if n != 1 else ''}"
                )
                lines.append(
                    f"  compaction before call {c['call']}: ${c['invalidation_usd']:.4f} more than "
                    f"a cached call (the rewritten prefix is written, not read); {paid}"
                )
    return lines
