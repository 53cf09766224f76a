"""`ctxkit forensics`: what did the compactions already in these logs lose and cost?"""

from __future__ import annotations

import click

from ctxkit.cli.budget_options import model_option, window_option
from ctxkit.cli.options import input_options, tokenizer_option
from ctxkit.cli.output import check_report, report_options, write_report


@click.command("forensics")
@input_options
@model_option("Price as this model (models.toml). Default: the model the log names, when models.toml prices it.")
@window_option("The window, to say whether carrying on without compacting would have fit (default: the model's).")
@tokenizer_option("How tokens are counted (default cl100k_base).")
@report_options("one object per session per line, most loss first")
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
    from ctxkit.recipes.forensics import ForensicsRequest, analyze_paths
    from ctxkit.report.agents import forensics_page, forensics_text
    from ctxkit.tokens import get_tokenizer

    check_report(paths, html_path, fmt)
    request = ForensicsRequest(
        tokenizer=get_tokenizer(tokenizer) if tokenizer else None, model=model, window=window
    )
    sessions = [s.to_dict() for s in analyze_paths(paths, request, read_opts=read_opts)]
    write_report(sessions, fmt, html_path, forensics_page, forensics_text)
