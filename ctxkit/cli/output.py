"""How a command writes its result, as shared flags: `-o/--output` (`output_option`), `--format`
(`format_option`), and for the agent reports a table or JSON lines with an HTML page beside (`report_options`, `write_report`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
import orjson

from ctxkit.cli.options import stack
from ctxkit.report.tables import FORMATS

F = TypeVar("F", bound=Callable[..., Any])

TABLE_HELP = "table (for a terminal), json, jsonl or csv (default: table on a terminal, else jsonl)."


def output_option(help: str) -> Callable[[F], F]:
    """-o/--output FILE (as `output`), default `-`, stdout; `help` says what goes there."""
    return click.option("-o", "--output", "output", default="-", help=help)


def format_option(
    choices: Sequence[str] = FORMATS,
    default: str | None = None,
    help: str = TABLE_HELP,
    show_default: bool | None = None,
) -> Callable[[F], F]:
    """--format (reaching the command as `fmt`), one of `choices`; --help shows a default other
    than None unless `show_default` says otherwise."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default=default,
        show_default=default is not None if show_default is None else show_default,
        help=help,
    )


def report_options(json_help: str) -> Callable[[F], F]:
    """--format table|json (`json_help` says what a JSON line holds) and --html FILE."""
    return stack(
        format_option(("table", "json"), "table", f"table for people, json ({json_help}) for machines."),
        click.option(
            "--html",
            "html_path",
            default=None,
            metavar="FILE",
            help="Also write a self-contained HTML page (- = stdout).",
        ),
    )


def check_report(paths: Sequence[str], html_path: str | None, fmt: str) -> None:
    """Refuse two things on stdout, an --html that would overwrite an input, or one that
    cannot be written, before any work is done."""
    from ctxkit.fileio import check_paths, check_writable

    if html_path == "-" and fmt == "json":
        raise click.UsageError(
            "--html - and --format json both write to stdout; give --html a file"
        )
    check_paths({"PATH": list(paths)}, {"--html": html_path})
    if html_path:
        check_writable(html_path, "html")


def write_report(
    records: list[dict[str, Any]],
    fmt: str,
    html_path: str | None,
    page: Callable[[list[dict[str, Any]]], str],
    text: Callable[[list[dict[str, Any]]], str],
) -> None:
    """The records as an HTML page (--html, atomically), and on stdout unless the page went
    there: one JSON object a line, or the text for people."""
    from ctxkit.atomic import write_output

    if html_path:
        write_output(html_path, page(records).encode("utf-8"))
    if html_path == "-":
        return
    if fmt == "json":
        for r in records:
            click.echo(orjson.dumps(r).decode())
    else:
        click.echo(text(records), nl=False)
