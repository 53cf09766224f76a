"""`ctxkit count`: tokens per region, role, type, turn, message or tool; `--calibrate` against
the provider's own usage."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from ctxkit.cli.options import (
    SectionedCommand,
    debug_option,
    echo_err,
    engine_options,
    input_options,
    progress_option,
    reading_note,
    section,
    tokenizer_options,
    want_progress,
)
from ctxkit.counting import BREAKDOWNS, Breakdown, measure, region_row, transcript_label
from ctxkit.errors import CtxkitError, UsageError
from ctxkit.formats import ReadOptions
from ctxkit.formats.extras import load_tools, read_text_file, with_context
from ctxkit.model import Transcript
from ctxkit.report.tables import FORMATS, counted, default_format, render_table, write_rows
from ctxkit.tokens import (
    REGIONS,
    CountOptions,
    Tokenizer,
    get_tokenizer,
)

if TYPE_CHECKING:
    from ctxkit.calibration import Calibration

CALIBRATION_NOTE = (
    "note: provider counts include the system prompt and tool schemas, which Claude Code and "
    "most agent logs never record, and use the provider's own tokenizer, so a constant offset "
    "per session is expected; 'adj' removes it (or pass --system/--tools to count them)."
)


_breakdown_options = section(
    "Breakdown",
    click.option(
        "--by",
        type=click.Choice((*BREAKDOWNS, "section")),
        default=None,
        help="Break the total down by role, type, turn, message or tool, or the system prompt by "
        "section (default: regions).",
    ),
    click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default=None,
        help="Output format (default: table on a terminal, else jsonl).",
    ),
    click.option(
        "--cost",
        "cost_models",
        multiple=True,
        metavar="MODEL",
        help="Price the log's recorded calls (with prompt caching, and without) and the next call on "
        "MODEL's prices from models.toml; repeat for several models.",
    ),
    click.option(
        "--calibrate",
        is_flag=True,
        help="Compare estimates of several tokenizers with the provider's recorded input tokens.",
    ),
)


_what_the_call_sends_options = section(
    "What the call sends",
    click.option(
        "--system",
        "system_file",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="A text file with the system prompt the log does not record; counted as system.",
    ),
    click.option(
        "--tools",
        "tools_file",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="A JSON list of tool schemas the log does not record; counted as tools.",
    ),
    click.option(
        "--no-usage",
        "no_usage",
        is_flag=True,
        help="Ignore the provider usage a log records (by default its gap to the local count is "
        "the `unlogged` region).",
    ),
    click.option(
        "--archive",
        "archive_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Where a file ctxkit compacted finds its original's recorded usage (default: the "
        "archive beside it, FILE.ctx.db).",
    ),
)


_baseline_ci_options = section(
    "Baseline (CI)",
    click.option(
        "--save-baseline",
        "baseline_out",
        default=None,
        metavar="FILE",
        help="Record each input's regions as a checked-in budget for `guard --baseline` (its "
        "allowances are kept when FILE exists).",
    ),
    click.option(
        "--diff",
        "diff_pair",
        nargs=2,
        default=None,
        metavar="A B",
        help="The region diff of B against A: baseline files, transcripts or prompt files.",
    ),
    click.option(
        "--allow",
        "allow",
        multiple=True,
        metavar="REGION=N|P%",
        help="How much a region may grow over the baseline (tokens, or percent of it); `*` is every "
        "region. Repeatable; stored by --save-baseline (default *=2%).",
    ),
)


_input_options = section(
    "Input",
    input_options,
)


_tokens_options = section(
    "Tokens",
    tokenizer_options,
)


_engine_options = section(
    "Engine",
    engine_options,
    progress_option,
    debug_option,
)


@click.command("count", cls=SectionedCommand)
@_breakdown_options
@_what_the_call_sends_options
@_baseline_ci_options
@_input_options
@_tokens_options
@_engine_options
def count(
    paths: tuple[str, ...],
    read_opts: ReadOptions,
    tokenizer: str | None,
    image_tokens: int | None,
    tool_schema_scale: float | None,
    by: str | None,
    fmt: str | None,
    system_file: str | None,
    tools_file: str | None,
    cost_models: tuple[str, ...],
    no_usage: bool,
    archive_path: str | None,
    calibrate: bool,
    baseline_out: str | None,
    allow: tuple[str, ...],
    diff_pair: tuple[str, str] | None,
    engine: str,
    ray_opts: Any,
    progress: bool | None,
    debug: bool,
) -> None:
    """Count tokens per region (system, tools, summary, history), or --by a breakdown.

    \b
    Examples:
      ctxkit count session.jsonl
      ctxkit count 'logs/*.jsonl' --by tool
      ctxkit count dataset.jsonl --format csv > counts.csv
      ctxkit count session.jsonl --calibrate
      ctxkit count 'shards/*.jsonl' --engine ray --format jsonl > counts.jsonl
      ctxkit count prompts/system.md 'fixtures/*.jsonl' --save-baseline ctx-baseline.json
      ctxkit count --diff ctx-baseline.json prompts/system.md
      ctxkit count prompts/system.yaml --by section --cost claude-sonnet-4
    """
    from ctxkit.formats import ReadStats, expand_paths
    from ctxkit.gates.inputs import read_inputs

    opts = CountOptions()
    if image_tokens is not None:
        opts = replace(opts, image_tokens=image_tokens)
    if tool_schema_scale is not None:
        opts = replace(opts, tool_schema_scale=tool_schema_scale)
    fmt = fmt or default_format()
    extra_system = read_text_file(system_file) if system_file else None
    extra_tools = load_tools(tools_file) if tools_file else []

    allowances: dict[str, Any] = {}
    if allow:  # the baseline gate's module only when a gate is asked for
        from ctxkit.gates.baseline import parse_allow

        allowances = parse_allow(allow)
    stats = ReadStats()
    if diff_pair is not None:
        if paths or baseline_out or by or cost_models or calibrate:
            raise UsageError("--diff A B compares two files; give no PATH, --save-baseline, --by, --cost or --calibrate with it")
        _write_diff(diff_pair, read_opts, stats, tokenizer, image_tokens, tool_schema_scale, allowances, no_usage, fmt)
        return
    tok = get_tokenizer(tokenizer)
    files = expand_paths(list(paths) or ["-"])
    if baseline_out:
        from ctxkit.fileio import check_paths

        check_paths({"PATH": files}, {"--save-baseline": baseline_out})

    def transcripts() -> Iterator[Transcript]:
        for t in read_inputs(files, read_opts, stats):
            yield with_context(t, extra_system, extra_tools)

    if ray_opts is not None:
        if by or cost_models or calibrate or archive_path:
            raise UsageError(
                "--engine ray counts the regions of each conversation; --by, --cost, "
                "--calibrate and --archive run on --engine local"
            )
        if baseline_out:
            raise UsageError("--save-baseline runs on --engine local")
        rows = _ray_rows(files, read_opts, tokenizer, opts, no_usage, extra_system,
                         extra_tools, ray_opts, stats)
        _report_reading(tok, stats, debug)
        _write_region_rows(rows, None, [], fmt, by)
        return

    items = _with_progress(transcripts(), len(files), want_progress(progress))
    if calibrate:
        from ctxkit.calibration import calibrate_usage

        cal = calibrate_usage(items, tokenizer, opts, label=_label)
        _report_reading(None, stats, debug)
        loaded = [n for n in cal.tokenizers if n not in cal.unavailable]
        missing = f" ({', '.join(cal.unavailable)} unavailable)" if cal.unavailable else ""
        echo_err(f"tokenizers: {', '.join(loaded)}{missing}")
        echo_err(CALIBRATION_NOTE)
        _write_calibration(cal, fmt)
        return

    priced: list[Any] = []
    if cost_models:  # the models table: only with --cost
        from ctxkit.budget.models import priced_model

        priced = [priced_model(name, "--cost") for name in cost_models]
    breakdown = Breakdown(by, tok, opts) if by and by != "section" else None
    region_rows, cost_rows, layout_rows, entries = _count_rows(
        items, tok, opts, by, breakdown, priced, not no_usage, bool(baseline_out), debug,
        archive_path,
    )
    _report_reading(tok, stats, debug)
    if baseline_out:
        _save_baseline(baseline_out, entries, tokenizer, opts, allowances)
    if layout_rows:
        _write_layout_rows(layout_rows, region_rows, cost_rows, fmt)
        return
    _write_region_rows(region_rows, breakdown, cost_rows if priced else [], fmt, by)


def _count_rows(
    items: Iterable[Transcript],
    tok: Tokenizer,
    opts: CountOptions,
    by: str | None,
    breakdown: Breakdown | None,
    priced: list[Any],
    usage: bool,
    baseline: bool,
    debug: bool,
    archive: str | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    """Each transcript's region row, cost rows, prompt-cache layout rows (--by section, or a
    prompt file priced) and baseline entry; its breakdown too, when asked for."""
    if baseline:
        from ctxkit.gates.baseline import entry_of
    if priced or by == "section":  # the prompt-cache layout: a priced or sectioned count only
        from ctxkit.budget.cache import cache_layout, layout_cost, layout_row, min_cacheable_for
        from ctxkit.costs import transcript_cost
        from ctxkit.gates.prompts import PROMPT_FORMAT, section_rows, sections_of

    region_rows: list[dict[str, Any]] = []
    cost_rows: list[dict[str, Any]] = []
    layout_rows: list[dict[str, Any]] = []
    entries = []
    for t in items:
        measured = measure(t, tok, opts, usage=usage, archive=archive)
        counted = measured.counted
        label = _label(t)
        if breakdown is not None:
            breakdown.add(t, counted, label)
        row = region_row(t, measured)
        region_rows.append(row)
        if measured.note:
            echo_err(f"note: {measured.note}")
        if baseline:
            entries.append(entry_of(t, row, tok))
        if by == "section":
            cached_min = min_cacheable_for(priced[0]) if priced else None
            layout_rows.extend(section_rows(t, tok, label, cached_min))
        for model in priced:
            if t.source_format == PROMPT_FORMAT:
                if by != "section":
                    layout = cache_layout(sections_of(t), tok, min_cacheable_for(model))
                    layout_rows.append(layout_row(label, layout, layout_cost(layout, model)))
                continue
            cost = transcript_cost(t, model, measured.total)
            cost_rows.append({"transcript": label, **_cost_row(cost)})
        if debug:
            echo_err(f"{label}: {len(t.units)} units, {counted.total:,} tokens")
    return region_rows, cost_rows, layout_rows, entries


def _save_baseline(path: str, entries: list[Any], tokenizer: str | None, opts: CountOptions, allow: Any) -> None:
    from ctxkit.gates.baseline import save_entries

    baseline = save_entries(path, entries, tokenizer, opts, allow)
    rules = ", ".join(f"{k}={v}" for k, v in baseline.allow.items())
    echo_err(f"baseline: {len(baseline.entries)} entries ({baseline.tokenizer}) written to {path}; allow {rules}")


def _write_diff(
    pair: tuple[str, str], read_opts: ReadOptions, stats: Any, tokenizer: str | None,
    image_tokens: int | None, tool_schema_scale: float | None, allow: Any, no_usage: bool, fmt: str,
) -> None:
    """`--diff A B`: the region diff table, and a line per file on stderr."""
    from ctxkit.gates.baseline import diff_rows, diff_sides
    from ctxkit.gates.inputs import read_inputs

    diffs, spec = diff_sides(
        *pair,
        lambda p: read_inputs([p], read_opts, stats),
        tokenizer=tokenizer,
        image_tokens=image_tokens,
        tool_schema_scale=tool_schema_scale,
        allow=allow,
        use_usage=not no_usage,
    )
    echo_err(f"tokenizer: {spec}")
    single = len(diffs) == 1
    rows = diff_rows(diffs, changed_only=not single)
    if fmt == "table":
        rows = [{**r, "file": _short_labels({"transcript": r["file"]})["transcript"]} for r in rows]
    write_rows(rows, fmt, sys.stdout)
    for d in diffs:
        if d.status != "ok" or any(r.delta for r in d.regions):
            echo_err(f"{d.key}: {d.status}: {d.summary()}")
    if all(d.status == "ok" and not any(r.delta for r in d.regions) for d in diffs):
        echo_err("no region changed")


def _write_layout_rows(
    layout_rows: list[dict[str, Any]], region_rows: list[dict[str, Any]], cost_rows: list[dict[str, Any]], fmt: str
) -> None:
    """Sections or prompt-cache layouts; with --cost, the transcripts' cost rows after them."""
    rows = [_dollars(r) for r in layout_rows] if fmt == "table" else layout_rows
    write_rows(rows, fmt, sys.stdout)
    if cost_rows:
        if fmt == "table":
            sys.stdout.write("\n")
            cost_rows = [_short_labels(_dollars(r)) for r in cost_rows]
        write_rows(cost_rows, fmt, sys.stdout)


def _ray_rows(
    files: list[str],
    read_opts: ReadOptions,
    tokenizer: str | None,
    opts: CountOptions,
    no_usage: bool,
    system: str | None,
    tools: list[Any],
    ray_opts: Any,
    stats: Any,
) -> list[dict[str, Any]]:
    """The region rows, counted by Ray tasks shard by shard (`ctxkit.engines.ray.count_dataset`)."""
    from ctxkit.engines.dataset import merge_stats
    from ctxkit.engines.ray import CountJob, count_dataset
    from ctxkit.engines.shards import plan_shards

    job = CountJob(read_opts, tokenizer, opts, not no_usage, system, tuple(tools))
    shards = plan_shards(
        files, read_opts, shard_bytes=ray_opts.shard_bytes, workers=ray_opts.parallelism
    )
    rows: list[dict[str, Any]] = []
    for result in count_dataset(shards, job, ray_opts):
        rows.extend(result["rows"])
        merge_stats(stats, result["stats"])
    return rows


def _write_region_rows(
    region_rows: list[dict[str, Any]],
    breakdown: Breakdown | None,
    cost_rows: list[dict[str, Any]],
    fmt: str,
    by: str | None,
) -> None:
    if not region_rows:
        raise CtxkitError("no conversation found in the input")
    any_usage = any(r["recorded"] is not None for r in region_rows)
    if not any_usage:
        # no log recorded usage: the columns would say nothing
        region_rows = [
            {k: v for k, v in r.items() if k not in ("unlogged", "unseen", "excess", "recorded")}
            for r in region_rows
        ]
    if any("reminders" in r for r in region_rows):
        # a column for every row once one log shows attachments, so the rows line up and add up
        region_rows = [_with_reminders(r) for r in region_rows]
    rows = breakdown.rows() if breakdown is not None else region_rows
    if cost_rows:
        rows = cost_rows
    elif breakdown is None and len(rows) > 1:
        rows = rows + [_total_row(rows)]
    if not rows:
        what = "tool calls or results" if by == "tool" else "messages"
        echo_err(f"nothing to show by {by}: no {what} in the input")
    if fmt == "table":
        rows = [_short_labels(_dollars(r)) for r in rows]
    write_rows(rows, fmt, sys.stdout)


def _cost_row(cost: Any) -> dict[str, Any]:
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


def _dollars(row: dict[str, Any]) -> dict[str, Any]:
    """Dollar columns to four decimals in a table (a table would round $0.0055 to 0.0)."""
    return {k: f"{v:.4f}" if k.startswith("$") and isinstance(v, float) else v for k, v in row.items()}


def _short_labels(row: dict[str, Any], width: int = 48) -> dict[str, Any]:
    """Cut long paths from the left for tables: the end of a path names the file."""
    label = row.get("transcript")
    if isinstance(label, str) and len(label) > width:
        return {**row, "transcript": "…" + label[-(width - 1) :]}
    return row


_label = transcript_label


def _with_reminders(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with its `reminders` region (0 when its log shows no attachment) after `history`."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key != "reminders":
            out[key] = value
        if key == "history":
            out["reminders"] = row.get("reminders", 0)
    return out


def _total_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {"transcript": f"total ({len(rows)} conversations)", "format": None}
    keys = ("units", *REGIONS, "reminders", "unlogged", "unseen", "excess", "total", "recorded")
    for key in keys:
        if any(key in r for r in rows):
            total[key] = sum(r[key] or 0 for r in rows)
    return total


def _with_progress(
    items: Iterator[Transcript], n_files: int, enabled: bool
) -> Iterator[Transcript]:
    """A tqdm bar on stderr: per file when there are several, else per conversation."""
    if not enabled:
        yield from items
        return
    from tqdm import tqdm

    if n_files > 1:
        bar = tqdm(total=n_files, unit="file", file=sys.stderr, leave=False)
        current: str | None = None
        seen = 0
        for t in items:
            if t.path != current:
                if current is not None:
                    bar.update(1)
                current = t.path
            seen += 1
            bar.set_postfix(conversations=seen, refresh=False)
            yield t
        bar.update(bar.total - bar.n)
    else:
        bar = tqdm(unit="conv", file=sys.stderr, leave=False)
        for t in items:
            bar.update(1)
            yield t
    bar.close()


def _report_reading(tok: Tokenizer | None, stats: Any, debug: bool) -> None:
    if tok is not None:
        echo_err(f"tokenizer: {tok.name} ({'exact' if tok.exact else 'estimate'})")
    note = reading_note(stats, verbose=debug)  # quiet when all was read as expected
    if note:
        echo_err(note)
    if stats.warnings:
        if debug:
            for w in stats.warnings:
                echo_err(f"warning: {w}")
        else:
            echo_err(f"{counted(len(stats.warnings), 'warning')} (--debug lists them)")


def _short_name(name: str) -> str:
    """A column label: the encoding without its `_base`, `max:<name>` as `max`."""
    return "max" if name.startswith("max:") else name.removesuffix("_base")


def _write_calibration(cal: Calibration, fmt: str) -> None:
    out = sys.stdout
    calls = cal.call_rows()
    summary = cal.summary()
    if fmt != "table":
        rows = (
            [{"kind": "call", **r} for r in calls]
            + [{"kind": "session", **r} for r in cal.sessions()]
            + [{"kind": "summary", **r} for r in summary]
        )
        write_rows(rows, fmt, out)
        return
    available = [n for n in cal.tokenizers if n not in cal.unavailable]
    many = len({r["transcript"] for r in calls}) > 1
    call_rows = []
    for r in calls:
        row: dict[str, Any] = {}
        if many:
            row["session"] = _short_labels({"transcript": r["transcript"]}, 32)["transcript"]
        row["call"] = r["call"]
        row["after unit"] = r["after_unit"]
        row["provider"] = r["provider"]
        for n in available:
            short = _short_name(n)
            row[short] = r.get(f"est:{n}")
            row[f"{short} err%"] = r.get(f"err_pct:{n}")
            row[f"{short} adj%"] = r.get(f"adj_err_pct:{n}")
        call_rows.append(row)
    sources = sorted({str(r.get("source")) for r in calls})
    out.write(f"Input tokens per call: provider ({', '.join(sources)}) vs ctxkit estimates\n")
    out.write(render_table(call_rows) + "\n\n")
    summary_rows = [
        {
            "tokenizer": s["tokenizer"],
            "calls": s["calls"],
            "mean |err|": s["mean_abs_err"],
            "mean |err|%": s["mean_abs_err_pct"],
            "mean err%": s["mean_err_pct"],
            "offset": s["median_offset"],
            "adj |err|": s["mean_abs_err_adj"],
            "adj |err|%": s["mean_abs_err_pct_adj"],
            "adj err%": s["mean_err_pct_adj"],
        }
        for s in summary
        if "note" not in s
    ]
    if many:
        session_rows = []
        for r in cal.sessions():
            row = {"session": _short_labels({"transcript": r["transcript"]}, 40)["transcript"]}
            row["calls"] = r.get("calls")
            for n in available:
                row[f"{_short_name(n)} offset"] = r.get(f"offset:{n}")
                row[f"{_short_name(n)} adj |err|%"] = r.get(f"adj_abs_err_pct:{n}")
            session_rows.append(row)
        out.write("Per session\n")
        out.write(render_table(session_rows) + "\n\n")
    out.write("Summary per tokenizer\n")
    out.write(render_table(summary_rows) + "\n")
    for s in summary:
        if "note" in s:
            out.write(f"{s['tokenizer']}: {s['note']}\n")
    out.write(
        "\nerr = estimate - provider. offset = median(provider - estimate) per session: the "
        "fixed part the log\ndoes not show (system prompt, tool schemas) and the tokenizers' "
        "difference on the content, together\n(`ctxkit count` and `guard` fit them apart: "
        "docs/guard.md). adj = error after adding each session's\noffset back.\n"
    )
