"""`ctxkit recall` (read back what compaction archived) and `ctxkit expand` (restore a transcript)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
import orjson

from ctxkit.cli.options import (
    count_option,
    echo_err,
    from_format_option,
    to_format_option,
    tokenizer_option,
)
from ctxkit.cli.output import format_option, output_option
from ctxkit.english import counted
from ctxkit.errors import UsageError
from ctxkit.fileio import check_stdout

LIST_FORMATS = ("table", "jsonl")  # recall --list: a table for people, or JSON lines

if TYPE_CHECKING:
    from ctxkit.archive.store import Archive
    from ctxkit.engines.shards import ShardedArchive

_PREVIEW_CHARS = 48


def _parse_lines(text: str | None) -> tuple[int, int] | None:
    from ctxkit.archive.recall_tool import parse_lines

    return parse_lines(text, "--lines")


@click.command("recall")
@click.argument("ref", required=False)
@click.option(
    "--archive",
    "archive_path",
    default=None,
    metavar="PATH",
    help="The archive compact wrote (default: the one compact writes for stdout, in your data folder).",
)
@click.option("--lines", "lines", default=None, metavar="A-B", help="Only lines A to B (from 1).")
@click.option(
    "--search",
    default=None,
    metavar="PATTERN",
    help="Only lines matching PATTERN (a regular expression), with 2 lines of context.",
)
@count_option("--max-tokens", "Cut the text to N tokens (a note says where it was cut).")
@tokenizer_option("Tokenizer for --max-tokens (default cl100k_base, offline).")
@click.option("--list", "list_", is_flag=True, help="List the archived units instead.")
@click.option("--transcript", default=None, metavar="ID", help="With --list: one transcript only.")
@format_option(LIST_FORMATS, "table", "With --list: a table for people or JSON lines.", show_default=False)
def recall(
    ref: str | None,
    archive_path: str | None,
    lines: str | None,
    search: str | None,
    max_tokens: int | None,
    tokenizer: str | None,
    list_: bool,
    transcript: str | None,
    fmt: str,
) -> None:
    """Print an archived unit, a line range or the matches of a pattern.

    REF is a short ref (ref- and 18 digits) or a long one (ctx://<transcript>/<unit>), as the
    placeholders in a compacted transcript name them; it may end with :L50-100 or :match-3.

    \b
    Examples:
      ctxkit recall ref-792930170588529134 --archive small.json.ctx.db
      ctxkit recall ref-792930170588529134 --search 'Error|FAILED' --archive small.json.ctx.db
      ctxkit recall ref-792930170588529134:L50-100 --max-tokens 500 --archive small.json.ctx.db
      ctxkit recall --list --archive small.json.ctx.db
    """
    from ctxkit.archive.refs import default_archive_path
    from ctxkit.engines.expand import open_for_reading

    path = archive_path or default_archive_path(None)
    if list_:
        if ref is not None or lines or search or max_tokens:
            raise UsageError("--list takes no REF, --lines, --search or --max-tokens")
    elif ref is None:
        raise UsageError("give a REF to recall, or --list to see the refs")
    elif transcript is not None:
        raise UsageError("--transcript goes with --list")
    line_range = _parse_lines(lines)

    with open_for_reading(path) as archive:
        if list_:
            _list(archive, transcript, fmt)
            return
        assert ref is not None
        tok = None
        if max_tokens is not None:
            from ctxkit.tokens import get_tokenizer

            tok = get_tokenizer(tokenizer)
        text = archive.recall(
            ref, lines=line_range, search=search, max_tokens=max_tokens, tokenizer=tok
        )
    if search is not None and not text:
        echo_err(f"ctxkit: no line of {ref} matches {search!r}")
        raise SystemExit(1)
    _write_exactly(text + "\n")


def _write_exactly(text: str) -> None:
    """The archived text as it was, byte for byte: not through click.echo, which removes
    terminal colour codes when stdout is not a terminal. A lone surrogate (a JSON `\\ud800`
    escape that no UTF-8 can hold) is written as that escape."""
    check_stdout()
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8", "backslashreplace"))
    sys.stdout.buffer.flush()


def _list(archive: Archive | ShardedArchive, transcript: str | None, fmt: str) -> None:
    items = archive.list(transcript)
    if fmt == "jsonl":
        for it in items:
            click.echo(orjson.dumps(it.info()).decode())
        return
    if not items:
        where = f" for transcript {transcript!r}" if transcript else ""
        echo_err(f"ctxkit: {archive.path} holds no archived units{where}")
        return
    header = ("REF", "TRANSCRIPT", "UNIT", "TYPE", "TOOL", "TOKENS", "LINES", "READ", "PREVIEW")
    rows = [
        (
            it.ref,
            _short(it.transcript_id, 24),
            _short(it.unit_id, 14),
            it.type,
            it.tool_name or "",
            f"{it.tokens:,}" if it.tokens is not None else "",
            f"{it.content.count(chr(10)) + 1 if it.content else 0:,}",
            str(it.access_count),
            _preview(it.summary or it.content),
        )
        for it in items
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    right = {5, 6, 7}
    for r in [header, *rows]:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        click.echo("  ".join(cells).rstrip())
    transcripts = len({it.transcript_id for it in items})
    echo_err(
        f"{counted(len(items), 'archived unit')} from {counted(transcripts, 'transcript')} in {archive.path}"
    )


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _preview(text: str) -> str:
    from ctxkit.cli import one_line

    return _short(one_line(" ".join(text.split())), _PREVIEW_CHARS)


@click.command("expand")
@click.argument("compacted", required=False, default="-")
@click.option(
    "--archive",
    "archive_path",
    default=None,
    metavar="PATH",
    help="The archive compact wrote (default <COMPACTED>.ctx.db, else the one compact writes for stdout).",
)
@output_option("Output file (atomic write), or DIR/ for a directory run's files one by one; default stdout.")
@from_format_option("Format of COMPACTED (default: detected).")
@to_format_option("Output format (default: the original's, when it can be written).")
def expand(
    compacted: str,
    archive_path: str | None,
    output: str,
    from_format: str | None,
    to_format: str | None,
) -> None:
    """Restore the original transcript of a compacted one, from its archive.

    \b
    Examples:
      ctxkit expand small.json --archive small.json.ctx.db -o original.json
      ctxkit expand small.jsonl > original.jsonl      # archive: small.jsonl.ctx.db
      ctxkit expand small/ -o restored/               # `compact logs/ -o small/`, file by file
    """
    from ctxkit.cli.compact import refuse_terminal
    from ctxkit.engines.expand import ExpandRequest
    from ctxkit.engines.expand import expand as expand_transcripts

    refuse_terminal(output, "expand")
    done = expand_transcripts(ExpandRequest(compacted, archive_path, output, from_format, to_format))
    echo_err(done.describe())
