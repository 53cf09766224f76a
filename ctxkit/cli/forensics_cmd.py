"""`ctxkit forensics`: what did the compactions already in these logs lose and cost?"""

from __future__ import annotations

import click
import orjson

from ctxkit.cli.options import input_options


@click.command("forensics")
@input_options
@click.option(
    "--model",
    default=None,
    metavar="NAME",
    help="Price as this model (models.toml). Default: the model the log names, when models.toml prices it.",
)
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=None,
    help="The window, to say whether carrying on without compacting would have fit (default: the model's).",
)
@click.option(
    "--tokenizer",
    default=None,
    metavar="NAME",
    help="How tokens are counted (default cl100k_base).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("table", "json")),
    default="table",
    show_default=True,
    help="table for people, json (one object per session per line, most loss first) for machines.",
)
@click.option(
    "--html",
    "html_path",
    default=None,
    metavar="FILE",
    help="Also write a self-contained HTML page (- = stdout).",
)
def forensics(
    paths: tuple[str, ...],
    read_opts: object,
    model: str | None,
    window: int | None,
    tokenizer: str | None,
    fmt: str,
    html_path: str | None,
) -> None:
    """For each compaction an agent made in these logs (Claude Code, Codex, OpenHands, ...):
    the tokens before and after, the fidelity probes neither its summary nor the messages it kept
    carry, the files read again after it, how the summary grew, and what it cost in cache writes
    and reads. Sessions that lost the most come first.

    \b
    Examples:
      ctxkit forensics ~/.claude/projects/myproj/
      ctxkit forensics logs/*.jsonl --model claude-sonnet-4 --format json
      ctxkit forensics session.jsonl --html forensics.html
    """
    from ctxkit.atomic import write_output
    from ctxkit.fileio import check_paths, check_writable
    from ctxkit.recipes.forensics import ForensicsRequest, analyze_paths
    from ctxkit.report.agents import forensics_page, forensics_text
    from ctxkit.tokens import get_tokenizer

    if html_path == "-" and fmt == "json":
        raise click.UsageError(
            "--html - and --format json both write to stdout; give --html a file"
        )
    check_paths({"PATH": list(paths)}, {"--html": html_path})
    if html_path:
        check_writable(html_path, "html")
    request = ForensicsRequest(
        tokenizer=get_tokenizer(tokenizer) if tokenizer else None, model=model, window=window
    )
    sessions = [s.to_dict() for s in analyze_paths(paths, request, read_opts=read_opts)]
    if html_path:
        write_output(html_path, forensics_page(sessions).encode("utf-8"))
    if html_path == "-":
        return
    if fmt == "json":
        for s in sessions:
            click.echo(orjson.dumps(s).decode())
    else:
        click.echo(forensics_text(sessions), nl=False)
