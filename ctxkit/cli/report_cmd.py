"""`ctxkit report`: a compaction report (`compact --report`) as a self-contained HTML page."""

from __future__ import annotations

import click

from ctxkit.atomic import write_output
from ctxkit.fileio import check_paths, check_writable
from ctxkit.report.html import render_file


@click.command("report")
@click.argument("report_path", metavar="REPORT.json")
@click.option(
    "--html",
    "html_path",
    required=True,
    help="Write the page here (- = stdout): the same page `compact --html` writes.",
)
def report(report_path: str, html_path: str) -> None:
    """Show a compaction, unit by unit, from its JSON report.

    \b
    Examples:
      ctxkit compact session.jsonl --limit 5000 -o small.jsonl --report run.json
      ctxkit report run.json --html run.html
    """
    check_paths({"REPORT.json": report_path}, {"--html": html_path})
    check_writable(html_path, "html")
    write_output(html_path, render_file(report_path).encode("utf-8"))
