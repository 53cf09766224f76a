"""The budget's flags: one each for the model, window, limit and output reserve a command
takes (`model_option`, ...), the limit and goal a compaction aims for (`budget_options`), and
whether the recorded usage of a log counts toward the figure (`no_usage_option`, `usage_options`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ctxkit.cli.options import count_option, file_option, stack

F = TypeVar("F", bound=Callable[..., Any])


def model_option(help: str) -> Callable[[F], F]:
    """--model NAME (one model of models.toml); `help` says what the command takes from it."""
    return click.option("--model", default=None, metavar="NAME", help=help)


def window_option(help: str) -> Callable[[F], F]:
    """--window N, a context window in tokens given outright; `help` says what it is for."""
    return count_option("--window", help)


def limit_option(help: str) -> Callable[[F], F]:
    """--limit N, a token limit given outright; `help` says what the command does with it."""
    return count_option("--limit", help)


def max_output_option(help: str) -> Callable[[F], F]:
    """--max-output N, the tokens kept for the model's answer; `help` gives its default."""
    return count_option("--max-output", help, least=0)


def budget_options(f: F) -> F:
    """--limit, --model, --target, --config: the budget a compaction aims for, as the guard sees it."""
    return stack(
        limit_option(
            "Token limit to fit under (default: the config's default_limit when set, else "
            "the log's own target: its model under its agent's budget, else the model's)."
        ),
        click.option(
            "--model", default=None, help="Use this model's budget (as `ctxkit guard` does)."
        ),
        count_option("--target", "Token goal (default: one token under the guard's compact threshold, so the guard does not re-fire)."),
        click.option(
            "--config",
            "config_path",
            default=None,
            help="YAML configuration (default ./ctxkit.yaml).",
        ),
    )(f)


def no_usage_option(help: str) -> Callable[[F], F]:
    """--no-usage (as `no_usage`); `help` says what the recorded usage does by default."""
    return click.option("--no-usage", "no_usage", is_flag=True, help=help)


def usage_options(no_usage_help: str) -> Callable[[F], F]:
    """--no-usage, and --archive (as `archive_path`): where a compacted file finds its
    original's recorded usage."""
    return stack(
        no_usage_option(no_usage_help),
        file_option(
            "--archive",
            "archive_path",
            "Where a file ctxkit compacted finds its original's recorded usage (default: the "
            "archive beside it, FILE.ctx.db).",
        ),
    )
