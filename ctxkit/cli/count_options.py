"""`count`'s flags, section by section, as one decorator (`count_flags`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ctxkit.cli.budget_options import usage_options
from ctxkit.cli.options import debug_option, file_option, stack
from ctxkit.cli.output import format_option
from ctxkit.cli.sections import engine_section, input_section, section, tokens_section
from ctxkit.counting import BREAKDOWNS

F = TypeVar("F", bound=Callable[..., Any])


_breakdown_options = section(
    "Breakdown",
    click.option(
        "--by",
        type=click.Choice((*BREAKDOWNS, "section")),
        default=None,
        help="Break the total down by role, type, turn, message or tool, or the system prompt by "
        "section (default: regions).",
    ),
    format_option(help="Output format (default: table on a terminal, else jsonl)."),
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
    file_option(
        "--system",
        "system_file",
        "A text file with the system prompt the log does not record; counted as system.",
        exists=True,
    ),
    file_option(
        "--tools",
        "tools_file",
        "A JSON list of tool schemas the log does not record; counted as tools.",
        exists=True,
    ),
    usage_options(
        "Ignore the provider usage a log records (by default its gap to the local count is "
        "the `unlogged` region)."
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


def count_flags(f: F) -> F:
    """Every flag of `count`, under its --help heading, in the order --help lists them."""
    return stack(
        _breakdown_options,
        _what_the_call_sends_options,
        _baseline_ci_options,
        input_section,
        tokens_section,
        engine_section,
        section("Engine", debug_option),
    )(f)
