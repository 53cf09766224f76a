"""`ctxkit count`'s engine: each transcript measured once (`counting.measure`) into its region
row, and, when asked for, its breakdown, cost rows, prompt-cache layout rows and baseline
entry; on Ray, the region rows counted shard by shard.

    >>> from ctxkit.formats import read_text
    >>> from ctxkit.tokens import get_tokenizer
    >>> (t,) = read_text('[{"role": "user", "content": "hello there"}]')
    >>> rows = count_rows([t], get_tokenizer(None), CountOptions())
    >>> [r["total"] for r in rows.regions]
    [9]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.counting import Breakdown, measure, region_row, transcript_label
from ctxkit.errors import CtxkitError
from ctxkit.formats import ReadOptions
from ctxkit.model import Transcript
from ctxkit.tokens import REGIONS, CountOptions, Tokenizer

Say = Callable[[str], None]

# the columns of recorded usage, which say nothing when no log recorded any
USAGE_COLUMNS = ("unlogged", "unseen", "excess", "recorded")


@dataclass
class CountRows:
    """What a count gives: a region row per transcript, cost rows (--cost), prompt-cache layout
    or section rows (--by section, a prompt file priced) and baseline entries (--save-baseline)."""

    regions: list[dict[str, Any]] = field(default_factory=list)
    costs: list[dict[str, Any]] = field(default_factory=list)
    layouts: list[dict[str, Any]] = field(default_factory=list)
    entries: list[Any] = field(default_factory=list)
    breakdown: Breakdown | None = None  # --by role, type, turn, message or tool

    def table(self) -> list[dict[str, Any]]:
        """The rows a count shows (`region_table`)."""
        return region_table(self.regions, self.breakdown, self.costs)


def read_with_context(
    files: list[str], read_opts: ReadOptions, stats: Any, system: str | None, tools: list[Any]
) -> Iterator[Transcript]:
    """Every transcript (or prompt file) of `files`, read lazily, with the system prompt and
    tool schemas the log does not record (--system, --tools)."""
    from ctxkit.formats.extras import with_context
    from ctxkit.gates.inputs import read_inputs

    for t in read_inputs(files, read_opts, stats):
        yield with_context(t, system, tools)


def count_rows(
    items: Iterable[Transcript],
    tok: Tokenizer,
    opts: CountOptions,
    *,
    by: str | None = None,
    cost_models: Sequence[str] = (),
    usage: bool = True,
    baseline: bool = False,
    archive: str | None = None,
    note: Say = lambda _msg: None,
    trace: Say | None = None,
) -> CountRows:
    """Each transcript's region row, cost rows on each of `cost_models` (--cost), prompt-cache
    layout rows (--by section, or a prompt file priced) and baseline entry; its breakdown too,
    when asked for. `note` hears what people should know of a transcript, `trace` each one's
    size."""
    priced: list[Any] = []
    if cost_models:  # the models table: only with --cost
        from ctxkit.budget.models import priced_model

        priced = [priced_model(name, "--cost") for name in cost_models]
    breakdown = Breakdown(by, tok, opts) if by and by != "section" else None
    if baseline:
        from ctxkit.gates.baseline import entry_of
    if priced or by == "section":  # the prompt-cache layout: a priced or sectioned count only
        from ctxkit.budget.cache import cache_layout, layout_cost, layout_row, min_cacheable_for
        from ctxkit.costs import transcript_cost
        from ctxkit.gates.prompts import PROMPT_FORMAT, section_rows, sections_of

    out = CountRows(breakdown=breakdown)
    for t in items:
        measured = measure(t, tok, opts, usage=usage, archive=archive)
        counted = measured.counted
        label = transcript_label(t)
        if breakdown is not None:
            breakdown.add(t, counted, label)
        row = region_row(t, measured)
        out.regions.append(row)
        if measured.note:
            note(f"note: {measured.note}")
        if baseline:
            out.entries.append(entry_of(t, row, tok))
        if by == "section":
            cached_min = min_cacheable_for(priced[0]) if priced else None
            out.layouts.extend(section_rows(t, tok, label, cached_min))
        for model in priced:
            if t.source_format == PROMPT_FORMAT:
                if by != "section":
                    layout = cache_layout(sections_of(t), tok, min_cacheable_for(model))
                    out.layouts.append(layout_row(label, layout, layout_cost(layout, model)))
                continue
            cost = transcript_cost(t, model, measured.total)
            out.costs.append({"transcript": label, **cost_row(cost)})
        if trace is not None:
            trace(f"{label}: {len(t.units)} units, {counted.total:,} tokens")
    return out


def ray_rows(
    files: list[str],
    read_opts: ReadOptions,
    tokenizer: str | None,
    opts: CountOptions,
    usage: bool,
    system: str | None,
    tools: list[Any],
    ray_opts: Any,
    stats: Any,
) -> list[dict[str, Any]]:
    """The region rows, counted by Ray tasks shard by shard (`ctxkit.engines.ray.count_dataset`)."""
    from ctxkit.engines.dataset import merge_stats
    from ctxkit.engines.ray import CountJob, count_dataset
    from ctxkit.engines.shards import plan_shards

    job = CountJob(read_opts, tokenizer, opts, usage, system, tuple(tools))
    shards = plan_shards(
        files, read_opts, shard_bytes=ray_opts.shard_bytes, workers=ray_opts.parallelism
    )
    rows: list[dict[str, Any]] = []
    for result in count_dataset(shards, job, ray_opts):
        rows.extend(result["rows"])
        merge_stats(stats, result["stats"])
    return rows


def region_table(
    region_rows: list[dict[str, Any]], breakdown: Breakdown | None, cost_rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The rows a count shows: the cost rows when priced, else the breakdown's, else the region
    rows (usage columns only when a log recorded usage; a total under several)."""
    if not region_rows:
        raise CtxkitError("no conversation found in the input")
    if not any(r["recorded"] is not None for r in region_rows):
        # no log recorded usage: the columns would say nothing
        region_rows = [{k: v for k, v in r.items() if k not in USAGE_COLUMNS} for r in region_rows]
    if any("reminders" in r for r in region_rows):
        # a column for every row once one log shows attachments, so the rows line up and add up
        region_rows = [with_reminders(r) for r in region_rows]
    rows = breakdown.rows() if breakdown is not None else region_rows
    if cost_rows:
        return cost_rows
    if breakdown is None and len(rows) > 1:
        return rows + [total_row(rows)]
    return rows


def cost_row(cost: Any) -> dict[str, Any]:
    """The columns of one transcript's `costs.transcript_cost`."""
    return {
        "model": cost.model,
        "calls": cost.calls,
        "input": cost.input_tokens,
        "cache read": cost.cache_read_tokens,
        "cache write": cost.cache_write_tokens,
        "output": cost.output_tokens,
        "$ billed": round(cost.usd, 4),
        "$ without cache": round(cost.usd_no_cache, 4),
        "$ next call cold": round(cost.next_call_cold_usd, 4),
        "$ next call warm": round(cost.next_call_warm_usd, 4),
    }


def with_reminders(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with its `reminders` region (0 when its log shows no attachment) after `history`."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key != "reminders":
            out[key] = value
        if key == "history":
            out["reminders"] = row.get("reminders", 0)
    return out


def total_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The sum of several region rows, labelled with their number."""
    total: dict[str, Any] = {"transcript": f"total ({len(rows)} conversations)", "format": None}
    keys = ("units", *REGIONS, "reminders", *USAGE_COLUMNS[:3], "total", "recorded")
    for key in keys:
        if any(key in r for r in rows):
            total[key] = sum(r[key] or 0 for r in rows)
    return total
