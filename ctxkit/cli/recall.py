"""`ctxkit recall` (read back what compaction archived) and `ctxkit expand` (restore a transcript)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click
import orjson

from ctxkit.cli.options import echo_err
from ctxkit.errors import UsageError
from ctxkit.fileio import check_paths, check_stdout, spooled_input
from ctxkit.formats import FORMATS, WRITABLE
from ctxkit.report.tables import counted

LIST_FORMATS = ("table", "jsonl")  # recall --list: a table for people, or JSON lines

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ctxkit.archive.store import Archive
    from ctxkit.engines.shards import ShardedArchive
    from ctxkit.model import Transcript

_PREVIEW_CHARS = 48


def _parse_lines(text: str | None) -> tuple[int, int] | None:
    from ctxkit.archive.recall_tool import parse_lines

    return parse_lines(text, "--lines")


def _open_for_reading(path: str) -> Archive | ShardedArchive:
    """Open an existing archive, or a directory of archive shards (`compact --engine ray`);
    read-only when the file cannot be written (no access stats then)."""
    from ctxkit.engines.shards import open_archive

    readonly = os.path.exists(path) and not os.access(path, os.W_OK)
    return open_archive(path, readonly=readonly)


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
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Cut the text to N tokens (a note says where it was cut).",
)
@click.option(
    "--tokenizer",
    default=None,
    metavar="NAME",
    help="Tokenizer for --max-tokens (default cl100k_base, offline).",
)
@click.option("--list", "list_", is_flag=True, help="List the archived units instead.")
@click.option("--transcript", default=None, metavar="ID", help="With --list: one transcript only.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(LIST_FORMATS),
    default="table",
    help="With --list: a table for people or JSON lines.",
)
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
    from ctxkit.archive.store import default_archive_path

    path = archive_path or default_archive_path(None)
    if list_:
        if ref is not None or lines or search or max_tokens:
            raise UsageError("--list takes no REF, --lines, --search or --max-tokens")
    elif ref is None:
        raise UsageError("give a REF to recall, or --list to see the refs")
    elif transcript is not None:
        raise UsageError("--transcript goes with --list")
    line_range = _parse_lines(lines)

    with _open_for_reading(path) as archive:
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
@click.option(
    "-o", "--output", default="-",
    help="Output file (atomic write), or DIR/ for a directory run's files one by one; default stdout.",
)
@click.option(
    "--from",
    "from_format",
    type=click.Choice(sorted(FORMATS)),
    default=None,
    help="Format of COMPACTED (default: detected).",
)
@click.option(
    "--to",
    "to_format",
    type=click.Choice(sorted(WRITABLE)),
    default=None,
    help="Output format (default: the original's, when it can be written).",
)
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
    from ctxkit.archive.refs import archives_for
    from ctxkit.archive.store import Archive, default_archive_path
    from ctxkit.cli.compact import refuse_terminal
    from ctxkit.compaction.sinks import transcript_output
    from ctxkit.formats import read_path

    refuse_terminal(output, "expand")
    if os.path.isdir(compacted):
        # `compact --engine ray -o DIR`: its output shards in order, its archive shards beside
        _expand_shards(compacted, archive_path or compacted, output, from_format, to_format)
        return
    path = archive_path or default_archive_path(None if compacted == "-" else compacted)
    if not archive_path and not os.path.exists(path):
        # a file compact wrote to stdout: its archive is the user's piped one
        path = next((p for p in archives_for(compacted) if os.path.exists(p)), path)
    check_paths({"COMPACTED": compacted, "--archive": path}, {"-o": output})
    if not os.path.exists(path):
        if not archive_path and _written_as_read(compacted, output, from_format, to_format):
            return  # compact changed nothing and so archived nothing: no archive to read
        Archive(path, create=False)  # raises the clear error
    with spooled_input(compacted) as source, _open_for_reading(path) as archive:
        label = None if source == compacted else ("<stdin>" if compacted == "-" else compacted)
        tally = {"read": 0, "untouched": 0}

        def restored() -> Iterator[Transcript]:
            # one conversation at a time: a dataset is never held whole
            for t in read_path(source, from_format, label=label):
                original = archive.restore(t)
                tally["read"] += 1
                tally["untouched"] += original is t
                yield original

        with transcript_output(output, source, to_format) as sink:
            sink.write(restored())
            if not tally["read"]:
                raise UsageError(f"{compacted}: no transcript to expand")
            if tally["untouched"] == tally["read"]:
                sink.keep_input()  # nothing was compacted: the input, byte for byte
    n, untouched = tally["read"], tally["untouched"]
    note = (
        f" ({untouched:,} had nothing archived and {'is' if untouched == 1 else 'are'} written as read)"
        if untouched else ""
    )
    echo_err(f"Expanded {counted(n, 'transcript')} from {path}{note}")


def _written_as_read(
    compacted: str, output: str, from_format: str | None, to_format: str | None
) -> bool:
    """A file compact left unchanged (no unit names an archive, so it wrote none): written as
    read, and said; False when some unit was compacted (its archive is needed)."""
    from ctxkit.archive.refs import first_compacted
    from ctxkit.compaction.sinks import transcript_output
    from ctxkit.formats import read_path

    with spooled_input(compacted) as source:
        found = list(read_path(source, from_format, label=None if source == compacted else compacted))
        if not found or any(first_compacted(t.units) is not None for t in found):
            return False
        with transcript_output(output, source, to_format) as sink:
            sink.write(iter(found))
            sink.keep_input()
    echo_err(f"Expanded {counted(len(found), 'transcript')}: none was compacted (no refs, no archive), written as read")
    return True


def _expand_shards(
    directory: str, archive_path: str, output: str, from_format: str | None, to_format: str | None
) -> None:
    """Every output of a directory run restored, in input order (its index's; without one, name
    order): into one output, or with `-o DIR/` each into a file of its own name there (a file
    in which nothing was compacted as it was, byte for byte)."""
    from ctxkit.compaction.sinks import transcript_output
    from ctxkit.engines.shards import indexed_outputs
    from ctxkit.fileio import output_directory
    from ctxkit.formats import expand_paths, read_path

    files = indexed_outputs(directory)
    if files is None:
        files = expand_paths([directory])
    elif not files:
        raise UsageError(f"{directory}: no transcript to expand (the run that wrote it wrote no output)")
    to_dir = output.endswith(os.sep) or os.path.isdir(output)
    check_paths({"COMPACTED": files, "--archive": archive_path}, {"-o": None if to_dir else output})
    tally = {"read": 0, "untouched": 0}

    def restored(archive: Archive | ShardedArchive, paths: list[str]) -> Iterator[Transcript]:
        for path in paths:
            for t in read_path(path, from_format):
                original = archive.restore(t)
                tally["read"] += 1
                tally["untouched"] += original is t
                yield original

    with _open_for_reading(archive_path) as archive:
        if to_dir:
            if os.path.realpath(output) == os.path.realpath(directory):
                raise UsageError(f"-o {output} is the directory expanded: give another -o DIR/")
            with output_directory(output):
                for path in files:
                    before = dict(tally)
                    with transcript_output(os.path.join(output, os.path.basename(path)), path, to_format) as sink:
                        sink.write(restored(archive, [path]))
                        if tally["untouched"] - before["untouched"] == tally["read"] - before["read"]:
                            sink.keep_input()  # nothing compacted in it: the file as it was
        else:
            with transcript_output(output, directory, to_format) as sink:
                sink.write(restored(archive, files))
                if not tally["read"]:
                    raise UsageError(f"{directory}: no transcript to expand")
    n = tally["read"]
    where = f" into {output}" if to_dir else ""
    echo_err(f"Expanded {counted(n, 'transcript')} from {counted(len(files), 'file')} of {archive_path}{where}")
