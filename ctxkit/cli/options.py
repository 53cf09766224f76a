"""Shared flags as decorators, so every subcommand spells the same option the same way."""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ctxkit.engines import DEFAULT_ENGINE, ENGINES, SHARD_MB
from ctxkit.formats import FORMATS, WRITABLE, ReadOptions
from ctxkit.formats.base import agents
from ctxkit.report.tables import reading_note, reading_summary  # noqa: F401  (the commands import them from here)

F = TypeVar("F", bound=Callable[..., Any])


class FiniteFloat(click.FloatRange):
    """A float flag that refuses nan and inf (which pass every range check)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number

    def _describe_range(self) -> str:
        """No range in the help when none is set (click would print `[x<=None]`)."""
        if self.min is None and self.max is None:
            return ""
        return str(super()._describe_range())


def stack(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator of several, applied in the order they would be written."""

    def apply(f: F) -> F:
        for d in reversed(decorators):
            f = d(f)
        return f

    return apply


def from_format_option(help: str) -> Callable[[F], F]:
    """--from FORMAT (as `from_format`), a format ctxkit reads; `help` says what it is read from."""
    return click.option("--from", "from_format", type=click.Choice(sorted(FORMATS)), default=None, help=help)


def to_format_option(help: str) -> Callable[[F], F]:
    """--to FORMAT (as `to_format`), a format ctxkit writes; `help` gives its default."""
    return click.option("--to", "to_format", type=click.Choice(sorted(WRITABLE)), default=None, help=help)


def input_options(f: F) -> F:
    """PATH... (files, globs, or stdin when none or `-`) and the reading flags, which reach the
    command as one `read_opts: ReadOptions` (--from, --include-sidechains, --include-compacted,
    --skip-invalid, --max-input-mb)."""

    @functools.wraps(f)
    def command(
        *args: Any,
        from_format: str | None,
        include_sidechains: bool,
        include_compacted: bool,
        skip_invalid: bool,
        max_input_mb: float | None,
        **kwargs: Any,
    ) -> Any:
        read_opts = ReadOptions(
            format=from_format, include_sidechains=include_sidechains, include_compacted=include_compacted,
            skip_invalid=skip_invalid, max_input_mb=max_input_mb,
        )  # fmt: skip
        return f(*args, read_opts=read_opts, **kwargs)

    return stack(
        click.argument("paths", nargs=-1, type=str, metavar="[PATH]..."),
        from_format_option("Input format (default: detected per file, per line for datasets)."),
        click.option(
            "--include-sidechains",
            is_flag=True,
            help=agents([f.agent or f.name for f in FORMATS.values() if f.sidechains])
            + ": keep subagent (sidechain) records in the main thread.",
        ),
        click.option(
            "--include-compacted",
            is_flag=True,
            help=agents([f.agent or f.name for f in FORMATS.values() if f.compaction])
            + ": also read the records their own compaction summarized away (by default a log "
            "is read as the model sees it after its last compaction).",
        ),
        click.option(
            "--skip-invalid",
            is_flag=True,
            help="Skip lines that cannot be read and report how many, instead of stopping.",
        ),
        click.option(
            "--max-input-mb",
            type=FiniteFloat(min=0.0, min_open=True),
            default=None,
            metavar="MB",
            help="Refuse a transcript (or a piped input) larger than this "
            "(default: $CTXKIT_MAX_INPUT_MB, else 1024).",
        ),
    )(command)  # type: ignore[return-value]


def tokenizer_option(help: str) -> Callable[[F], F]:
    """--tokenizer NAME alone; `help` says what it counts and its default."""
    return click.option("--tokenizer", default=None, metavar="NAME", help=help)


def count_option(
    flag: str, help: str, *, least: int = 1, metavar: str | None = None
) -> Callable[[F], F]:
    """A flag taking a whole number of at least `least` (tokens, runs, workers ...), None when
    not given."""
    return click.option(flag, type=click.IntRange(min=least), default=None, metavar=metavar, help=help)


def file_option(
    flag: str, dest: str, help: str, *, exists: bool = False, multiple: bool = False
) -> Callable[[F], F]:
    """A flag naming one file (not a folder), reaching the command as `dest` (None when not
    given); `exists`: refuse a path that is not there; `multiple`: repeatable, as a tuple."""
    return click.option(
        flag, dest, type=click.Path(exists=exists, dir_okay=False), default=None, multiple=multiple, help=help
    )


def tokenizer_options(f: F) -> F:
    """--tokenizer, --image-tokens, --tool-schema-scale."""
    return stack(
        tokenizer_option(
            "cl100k_base (default, offline), any tiktoken encoding or model name, approx, "
            "approx:<chars-per-token>, max:<name>, or hf:<path/to/tokenizer.json>."
        ),
        count_option("--image-tokens", "Flat cost of one image block (default 85).", least=0),
        click.option(
            "--tool-schema-scale",
            type=FiniteFloat(min=0.0),
            default=None,
            help="Multiply tool-schema tokens (the spec uses 2.09; default 1.0).",
        ),
    )(f)


def engine_options(f: F) -> F:
    """--engine, --ray-address, --ray-workers, --shard-mb: where a dataset command runs; they reach the
    command as `engine` and `ray_opts` (a `ctxkit.engines.ray.RayOptions` for --engine ray, else None)."""

    @functools.wraps(f)
    def command(
        *args: Any,
        engine: str,
        ray_address: str | None,
        ray_workers: int | None,
        ray_task_mb: int | None,
        shard_mb: float,
        **kwargs: Any,
    ) -> Any:
        from ctxkit.cli.requests import ray_options

        ray_opts = ray_options(engine, ray_address, ray_workers, ray_task_mb, shard_mb)
        return f(*args, engine=engine, ray_opts=ray_opts, **kwargs)

    return stack(
        click.option(
            "--engine",
            type=click.Choice(sorted(ENGINES)),
            default=DEFAULT_ENGINE,
            show_default=True,
            help="local: this machine; ray: Ray tasks, one per shard of the dataset "
            "(needs ctxkit[ray]).",
        ),
        click.option(
            "--ray-address",
            default=None,
            metavar="ADDR",
            help="With --engine ray: a running cluster (auto, ray://HOST:10001); default: a local "
            "Ray with this machine's CPUs.",
        ),
        count_option("--ray-workers", "With --engine ray: tasks at once (default: one per CPU of the cluster)."),
        count_option("--ray-task-mb", "With --engine ray: memory Ray reserves for each task, so a node runs no more "
            "tasks than its memory holds (default: none reserved); the run reports workers above it.", metavar='MB'),
        click.option(
            "--shard-mb",
            type=FiniteFloat(min=0.0, min_open=True),
            default=SHARD_MB,
            show_default=True,
            help="With --engine ray: megabytes of a JSONL dataset per task (whole lines).",
        ),
    )(command)  # type: ignore[return-value]


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
