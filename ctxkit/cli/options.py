"""Shared flags as decorators, so every subcommand spells the same option the same way."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

FORMAT_NAMES = ["units", "openai", "anthropic", "claude-code", "codex", "sharegpt"]
WRITE_FORMAT_NAMES = ["units", "openai", "anthropic"]


class FiniteFloat(click.FloatRange):
    """A float flag that refuses nan and inf (which pass every range check)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def _stack(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    def apply(f: F) -> F:
        for d in reversed(decorators):
            f = d(f)
        return f

    return apply


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Keep a reader flag in the context, so every reader call can ask for it."""
    ctx.meta[f"ctxkit.{param.name}"] = value
    return value


def include_compacted() -> bool:
    """Whether --include-compacted was given to the running command."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get("ctxkit.include_compacted"))


def input_options(f: F) -> F:
    """PATH... (files, globs, or stdin when none or `-`), --from, --include-sidechains, --skip-invalid."""
    return _stack(
        click.argument("paths", nargs=-1, type=str),
        click.option(
            "--from",
            "from_format",
            type=click.Choice(FORMAT_NAMES),
            default=None,
            help="Input format (default: detected per file, per line for datasets).",
        ),
        click.option(
            "--include-sidechains",
            is_flag=True,
            help="Claude Code: keep subagent (sidechain) records in the main thread.",
        ),
        click.option(
            "--include-compacted",
            is_flag=True,
            expose_value=False,
            callback=_remember,
            help="Claude Code: also read the records its own compaction summarized away "
            "(by default a log is read from its last compaction summary on, as the model sees it).",
        ),
        click.option(
            "--skip-invalid",
            is_flag=True,
            help="Skip lines that cannot be read and report how many, instead of stopping.",
        ),
    )(f)


def tokenizer_options(f: F) -> F:
    """--tokenizer, --image-tokens, --tool-schema-scale."""
    return _stack(
        click.option(
            "--tokenizer",
            default=None,
            metavar="NAME",
            help="cl100k_base (default, offline), any tiktoken encoding or model name, approx, "
            "approx:<chars-per-token>, max:<name>, or hf:<path/to/tokenizer.json>.",
        ),
        click.option(
            "--image-tokens",
            type=click.IntRange(min=0),
            default=None,
            help="Flat cost of one image block (default 85).",
        ),
        click.option(
            "--tool-schema-scale",
            type=FiniteFloat(min=0.0),
            default=None,
            help="Multiply tool-schema tokens (the spec uses 2.09; default 1.0).",
        ),
    )(f)


def budget_options(f: F) -> F:
    """--limit, --model, --target, --config: the budget a compaction aims for, as the guard sees it."""
    return _stack(
        click.option(
            "--limit",
            type=click.IntRange(min=1),
            default=None,
            help="Token limit to fit under (default: the model's, else the configured budget).",
        ),
        click.option(
            "--model", default=None, help="Use this model's budget (as `ctxkit guard` does)."
        ),
        click.option(
            "--target",
            type=click.IntRange(min=1),
            default=None,
            help="Token goal (default: the warn threshold of the limit, so the guard does not re-fire).",
        ),
        click.option(
            "--config",
            "config_path",
            default=None,
            help="YAML configuration (default ./ctxkit.yaml).",
        ),
    )(f)


def progress_option(f: F) -> F:
    """--progress/--no-progress: a tqdm bar on stderr, default on only for a terminal."""
    return click.option(
        "--progress/--no-progress",
        default=None,
        help="Progress bar on stderr (default: on when stderr is a terminal).",
    )(f)


def debug_option(f: F) -> F:
    """--debug, also turned on by CTXKIT_DEBUG=1."""
    return click.option(
        "--debug",
        is_flag=True,
        default=lambda: os.environ.get("CTXKIT_DEBUG", "") not in ("", "0"),
        help="Print each step of the evaluation on stderr (or set CTXKIT_DEBUG=1).",
    )(f)


def want_progress(flag: bool | None) -> bool:
    """The progress bar is on when asked for, or by default when stderr is a terminal."""
    return sys.stderr.isatty() if flag is None else flag


def echo_err(message: str) -> None:
    """A message for people: stderr."""
    click.echo(message, err=True)


def reading_summary(stats: Any) -> str:
    """What the readers read and skipped, for people: "read 2 files, 91 records; skipped ..."."""
    files = f"{stats.files:,} file{'s' if stats.files != 1 else ''}"
    parts = [f"read {files}, {stats.records:,} records"]
    skipped = []
    non_message = sum(stats.skipped_non_message.values())
    if non_message:
        kinds = ", ".join(
            f"{k} {v:,}"
            for k, v in sorted(
                stats.skipped_non_message.items(), key=lambda kv: (-kv[1], str(kv[0]))
            )
        )
        skipped.append(f"{non_message:,} non-message records ({kinds})")
    if stats.skipped_sidechain:
        skipped.append(
            f"{stats.skipped_sidechain:,} sidechain records (--include-sidechains keeps them)"
        )
    if stats.skipped_invalid:
        skipped.append(f"{stats.skipped_invalid:,} invalid lines (--skip-invalid)")
    if skipped:
        parts.append("skipped " + "; ".join(skipped))
    return "; ".join(parts)
