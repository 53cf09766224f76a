"""`guard`'s flags, section by section, as one decorator (`guard_options`), and its exit codes
for --help."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ctxkit.budget.triggers import RULES
from ctxkit.cli.budget_options import limit_option, max_output_option, usage_options, window_option
from ctxkit.cli.options import FiniteFloat, count_option, debug_option, file_option, stack
from ctxkit.cli.output import format_option
from ctxkit.cli.sections import input_section, section, tokens_section
from ctxkit.gates.exits import FAIL_ON

F = TypeVar("F", bound=Callable[..., Any])

# a table for people, one JSON verdict per transcript, and the CI formats (`report.ci`)
REPORT_FORMATS = ("table", "json", "github", "junit", "markdown")

EXIT_HELP = """\b
Exit codes:
  0  fits (ok or warn)
  3  compaction needed (compact; also warn with --fail-on warn)
  4  blocked (block)
  5  overflow, or no target fits (verdict final)
  6  structural errors found by --check (when the fit alone exits 0)
  7  --baseline: a region grew beyond its allowance (when the fit exits 0)
  1  runtime error (bad input)
  2  usage error (bad flag or config)"""


_targets_options = section(
    "Targets",
    click.option(
        "--model",
        "models",
        multiple=True,
        metavar="NAME",
        help="Target model, repeatable in order of preference (see models.toml).",
    ),
    limit_option("Policy limit in tokens (taken exactly; the smaller of it and the model's limit binds)."),
    window_option("Context window (tokens)."),
    max_output_option("Output reserve (default: the model's maximum output, else window/4)."),
    count_option("--buffer", "Safety buffer (default 8192, at most window/8).", least=0),
    click.option(
        "--agent", default=None, metavar="NAME", help="Use this agent's policy limit (config agents)."
    ),
    click.option(
        "--llm", default=None, metavar="TYPE", help="Use this LLM type's policy limit (config per_llm)."
    ),
    click.option(
        "--config",
        "config_path",
        default=None,
        metavar="FILE",
        help="YAML configuration (default ./ctxkit.yaml when present).",
    ),
)


_what_the_call_sends_options = section(
    "What the call sends",
    file_option("--system", "system_file", "A system prompt file, counted before the transcript."),
    file_option(
        "--tools",
        "tools_file",
        "Tool schemas: a JSON list (OpenAI or Anthropic shape); replaces the transcript's.",
    ),
    file_option(
        "--pending",
        "pending_file",
        "Tool outputs about to be appended: JSON list of strings or {name, content}, or JSONL.",
    ),
)


_checks_options = section(
    "Checks",
    click.option(
        "--replay",
        "do_replay",
        is_flag=True,
        help="Replay the transcript message by message: when each threshold was first crossed.",
    ),
    click.option(
        "--check",
        "do_check",
        is_flag=True,
        help="Structural lint: orphaned results, missing results, duplicate ids, empty messages, bad ending.",
    ),
    click.option(
        "--as",
        "as_agents",
        multiple=True,
        type=click.Choice(tuple(RULES)),
        help="Apply this coding agent's own auto-compact trigger to each target's window (with "
        "--replay: where it would first have compacted, and how often); repeatable.",
    ),
    usage_options(
        "Ignore the provider usage a log records (by default its gap to the local count, the "
        "`unlogged` region, is added)."
    ),
    click.option(
        "--tool-threshold",
        type=FiniteFloat(min=0.0, max=1.0, min_open=True),
        default=0.10,
        show_default=True,
        help="Warn when tool schemas alone pass this share of a target's effective window.",
    ),
)


_exit_options = section(
    "Exit",
    click.option(
        "--fail-on",
        type=click.Choice(FAIL_ON),
        default="compact",
        show_default=True,
        help="The lowest status that exits non-zero.",
    ),
    click.option(
        "--warn-threshold", type=FiniteFloat(), default=None, help="Warn at this fraction of the limit (0.80)."
    ),
    click.option(
        "--compact-threshold", type=FiniteFloat(), default=None, help="Compact at this fraction (0.95)."
    ),
    click.option("--block-threshold", type=FiniteFloat(), default=None, help="Block at this fraction (0.98)."),
)


_baseline_ci_options = section(
    "Baseline (CI)",
    click.option(
        "--baseline",
        "baseline_path",
        default=None,
        metavar="FILE",
        help="A budget saved by `count --save-baseline`: fail (exit 7) when a region grows beyond "
        "its allowance; prints the diff table.",
    ),
    click.option(
        "--allow",
        "allow",
        multiple=True,
        metavar="REGION=N|P%",
        help="Override the baseline's allowance for a region (tokens or percent); repeatable.",
    ),
)


_report_options = section(
    "Report",
    format_option(
        REPORT_FORMATS,
        "table",
        "table for people, json (one object per transcript per line) for machines; github "
        "(workflow-command annotations), junit (XML) or markdown (a pull-request summary) for CI.",
    ),
    click.option(
        "--details",
        is_flag=True,
        help="Several transcripts: each one's full verdict after the summary (default: the "
        "summary and the transcripts that do not pass).",
    ),
    click.option(
        "--junit",
        "junit_path",
        default=None,
        metavar="FILE",
        help="Also write the checks as JUnit XML (a case per transcript x target, and per baseline entry).",
    ),
    click.option(
        "--summary",
        "summary_path",
        default=None,
        metavar="FILE",
        help="Also write a Markdown summary (for a pull-request comment or $GITHUB_STEP_SUMMARY).",
    ),
    debug_option,
)


def guard_options(f: F) -> F:
    """Every flag of `guard`, under its --help heading, in the order --help lists them."""
    return stack(
        _targets_options,
        _what_the_call_sends_options,
        _checks_options,
        _exit_options,
        _baseline_ci_options,
        _report_options,
        input_section,
        tokens_section,
    )(f)
