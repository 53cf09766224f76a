"""`ctxkit count`: tokens per region, role, type, turn, message or tool; `--calibrate` against
the provider's own usage.

Flags (`count_flags`) -> `CountOptions` (`cli.requests`) -> `engines.count` -> the tables of
`report.count`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import click

from ctxkit.cli.count_options import count_flags
from ctxkit.cli.options import echo_err, reading_note, want_progress
from ctxkit.cli.requests import count_opts
from ctxkit.cli.sections import SectionedCommand
from ctxkit.counting import transcript_label
from ctxkit.engines.count import count_rows, ray_rows, read_with_context, region_table
from ctxkit.english import counted
from ctxkit.errors import UsageError
from ctxkit.formats import ReadOptions
from ctxkit.formats.extras import load_tools, read_text_file
from ctxkit.model import Transcript
from ctxkit.report.count import write_count_rows, write_diff_rows, write_layout_rows
from ctxkit.report.tables import default_format
from ctxkit.tokens import CountOptions, Tokenizer, get_tokenizer

CALIBRATION_NOTE = (
    "note: provider counts include the system prompt and tool schemas, which Claude Code and "
    "most agent logs never record, and use the provider's own tokenizer, so a constant offset "
    "per session is expected; 'adj' removes it (or pass --system/--tools to count them)."
)


@click.command("count", cls=SectionedCommand)
@count_flags
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

    opts = count_opts(image_tokens, tool_schema_scale)
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
        _write_diff(diff_pair, read_opts, stats, tokenizer, (image_tokens, tool_schema_scale), allowances, no_usage, fmt)
        return
    tok = get_tokenizer(tokenizer)
    files = expand_paths(list(paths) or ["-"])
    if baseline_out:
        from ctxkit.fileio import check_paths

        check_paths({"PATH": files}, {"--save-baseline": baseline_out})
    if ray_opts is not None:
        if by or cost_models or calibrate or archive_path:
            raise UsageError(
                "--engine ray counts the regions of each conversation; --by, --cost, "
                "--calibrate and --archive run on --engine local"
            )
        if baseline_out:
            raise UsageError("--save-baseline runs on --engine local")
        rows = ray_rows(files, read_opts, tokenizer, opts, not no_usage, extra_system,
                        extra_tools, ray_opts, stats)
        _report_reading(tok, stats, debug)
        _write_rows(region_table(rows, None, []), fmt, by)
        return
    transcripts = read_with_context(files, read_opts, stats, extra_system, extra_tools)
    items = _with_progress(transcripts, len(files), want_progress(progress))
    if calibrate:
        _calibrate(items, tokenizer, opts, stats, fmt, debug)
        return
    found = count_rows(
        items, tok, opts, by=by, cost_models=cost_models, usage=not no_usage,
        baseline=bool(baseline_out), archive=archive_path, note=echo_err,
        trace=echo_err if debug else None,
    )
    _report_reading(tok, stats, debug)
    if baseline_out:
        _save_baseline(baseline_out, found.entries, tokenizer, opts, allowances)
    if found.layouts:
        write_layout_rows(found.layouts, found.costs, fmt, sys.stdout)
        return
    _write_rows(found.table(), fmt, by)


def _calibrate(
    items: Iterator[Transcript], tokenizer: str | None, opts: CountOptions, stats: Any, fmt: str, debug: bool
) -> None:
    """`--calibrate`: several tokenizers against the provider's recorded input tokens."""
    from ctxkit.calibration import calibrate_usage
    from ctxkit.report.count import write_calibration

    cal = calibrate_usage(items, tokenizer, opts, label=transcript_label)
    _report_reading(None, stats, debug)
    loaded = [n for n in cal.tokenizers if n not in cal.unavailable]
    missing = f" ({', '.join(cal.unavailable)} unavailable)" if cal.unavailable else ""
    echo_err(f"tokenizers: {', '.join(loaded)}{missing}")
    echo_err(CALIBRATION_NOTE)
    write_calibration(cal, fmt, sys.stdout)


def _write_rows(rows: list[dict[str, Any]], fmt: str, by: str | None) -> None:
    """The region, breakdown or cost rows; a word on stderr when a breakdown found nothing."""
    if not rows:
        what = "tool calls or results" if by == "tool" else "messages"
        echo_err(f"nothing to show by {by}: no {what} in the input")
    write_count_rows(rows, fmt, sys.stdout)


def _save_baseline(path: str, entries: list[Any], tokenizer: str | None, opts: CountOptions, allow: Any) -> None:
    """`--save-baseline FILE`: the entries written, and a line that says so."""
    from ctxkit.gates.baseline import save_entries

    baseline = save_entries(path, entries, tokenizer, opts, allow)
    rules = ", ".join(f"{k}={v}" for k, v in baseline.allow.items())
    echo_err(f"baseline: {len(baseline.entries)} entries ({baseline.tokenizer}) written to {path}; allow {rules}")


def _write_diff(
    pair: tuple[str, str], read_opts: ReadOptions, stats: Any, tokenizer: str | None,
    flags: tuple[int | None, float | None], allow: Any, no_usage: bool, fmt: str,
) -> None:
    """`--diff A B`: the region diff table, and a line per file on stderr. `flags` are
    --image-tokens and --tool-schema-scale as given (None: as the baseline recorded them)."""
    from ctxkit.gates.baseline import diff_rows, diff_sides
    from ctxkit.gates.inputs import read_inputs

    diffs, spec = diff_sides(
        *pair,
        lambda p: read_inputs([p], read_opts, stats),
        tokenizer=tokenizer,
        image_tokens=flags[0],
        tool_schema_scale=flags[1],
        allow=allow,
        use_usage=not no_usage,
    )
    echo_err(f"tokenizer: {spec}")
    write_diff_rows(diff_rows(diffs, changed_only=len(diffs) != 1), fmt, sys.stdout)
    for d in diffs:
        if d.status != "ok" or any(r.delta for r in d.regions):
            echo_err(f"{d.key}: {d.status}: {d.summary()}")
    if all(d.status == "ok" and not any(r.delta for r in d.regions) for d in diffs):
        echo_err("no region changed")


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
