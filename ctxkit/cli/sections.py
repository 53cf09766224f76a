"""--help with its options under headings: `section` marks them, `SectionedCommand` lists them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ctxkit.cli.options import (
    engine_options,
    input_options,
    progress_option,
    stack,
    tokenizer_options,
)

F = TypeVar("F", bound=Callable[..., Any])


class SectionedCommand(click.Command):
    """A command whose --help lists its options under headings (`section`), in the order the
    headings first appear; options outside any section come last, under "Other options"."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
            if record is not None:
                title = getattr(param, "section", "Other options")
                sections.setdefault(title, []).append(record)
        for title, records in sections.items():
            with formatter.section(title):
                formatter.write_dl(records)


def section(title: str, *decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Option decorators whose options --help shows under `title` (with `SectionedCommand`)."""

    def apply(f: F) -> F:
        before = len(getattr(f, "__click_params__", []))
        f = stack(*decorators)(f)
        params = getattr(f, "__click_params__", [])
        for param in params[before:]:
            param.section = title  # type: ignore[attr-defined]
        return f

    return apply


def input_section(f: F) -> F:
    """The transcripts to read and how (`input_options`), under "Input"."""
    return section("Input", input_options)(f)


def tokens_section(f: F) -> F:
    """How tokens are counted (`tokenizer_options`), under "Tokens"."""
    return section("Tokens", tokenizer_options)(f)


def engine_section(f: F) -> F:
    """Where a dataset command runs (`engine_options`) and its progress bar, under "Engine"."""
    return section("Engine", engine_options, progress_option)(f)
