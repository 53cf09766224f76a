"""`ctxkit tools`: the tool budget: tokens per tool schema, by source, and which tools to defer."""

from __future__ import annotations

import sys
from typing import Any

import click

from ctxkit.budget.tools import DEFAULT_THRESHOLD
from ctxkit.cli.budget_options import model_option, window_option
from ctxkit.cli.options import (
    FiniteFloat,
    echo_err,
    file_option,
    input_options,
    reading_note,
    tokenizer_options,
)
from ctxkit.cli.output import format_option
from ctxkit.formats import ReadOptions
from ctxkit.report.tables import default_format, render_table, write_rows


@click.command("tools")
@input_options
@file_option(
    "--tools",
    "tool_files",
    "Tool schemas (a JSON list, OpenAI, Anthropic or MCP shape); mcp__<server>__<tool> "
    "names are MCP tools, the rest built-in. Repeatable.",
    multiple=True,
)
@click.option(
    "--mcp",
    "mcp_files",
    multiple=True,
    metavar="[NAME=]FILE",
    help="An MCP server's saved tools/list (the result or the whole JSON-RPC response); the "
    "server is NAME, else the file's name. Repeatable.",
)
@file_option("--skills", "skill_files", "Tool schemas that skills add. Repeatable.", multiple=True)
@model_option("Target model (its window; see models.toml).")
@window_option("Context window (tokens).")
@click.option(
    "--threshold",
    type=FiniteFloat(min=0.0, max=1.0, min_open=True),
    default=DEFAULT_THRESHOLD,
    show_default=True,
    help="Defer tools while their schemas pass this share of the effective window.",
)
@format_option(help="table (default on a terminal), json (one object), jsonl or csv (a row per tool).")
@tokenizer_options
def tools(
    paths: tuple[str, ...],
    read_opts: ReadOptions,
    tool_files: tuple[str, ...],
    mcp_files: tuple[str, ...],
    skill_files: tuple[str, ...],
    model: str | None,
    window: int | None,
    threshold: float,
    fmt: str | None,
    tokenizer: str | None,
    image_tokens: int | None,
    tool_schema_scale: float | None,
) -> None:
    """Tokens per tool schema, by source (built-in, MCP server, skill), their share of the
    window, and which tools to defer to stay under the threshold: MCP tools first, then skill
    tools, least used first; built-in tools never.

    Logs (PATH...) give the schemas they record (OpenHands, Codex dynamic tools, OpenAI or
    Anthropic requests) and the calls each tool got; Claude Code logs record calls only.

    \b
    Examples:
      ctxkit tools session.jsonl --model claude-sonnet-4
      ctxkit tools --tools builtin.json --mcp github=github-tools.json --model gpt-4o
      ctxkit tools rollout.jsonl --mcp git.tools-list.json --threshold 0.05 --format json
    """
    from ctxkit.budget.targets import resolve_target
    from ctxkit.budget.tools import load_tool_file, tool_budget
    from ctxkit.cli.requests import count_opts
    from ctxkit.formats import ReadStats, expand_paths, read_path
    from ctxkit.tokens import TokenizerCache

    given = [t for f in tool_files for t in load_tool_file(f)]
    for spec in mcp_files:
        name, sep, path = spec.partition("=")
        given += load_tool_file(path, "mcp", name) if sep else load_tool_file(spec, "mcp")
    given += [t for f in skill_files for t in load_tool_file(f, "skill")]
    stats = ReadStats()
    logs = list(paths) if paths else ([] if given else ["-"])  # no file at all: a log on stdin
    transcripts = [t for p in (expand_paths(logs) if logs else []) for t in read_path(p, read_opts, stats=stats)]
    if logs and not transcripts:
        raise click.ClickException("no conversation found in the input")
    log_model = next((t.metadata.get("model") for t in transcripts if t.metadata.get("model")), None)
    target = resolve_target(model or _known(log_model), context_window=window, tokenizer=tokenizer)
    opts = count_opts(image_tokens, tool_schema_scale)
    tok, label, warning = TokenizerCache().get(target)
    if warning:
        echo_err(warning)
    plan = tool_budget(transcripts, given, tok, target, threshold, opts)
    note = reading_note(stats) if logs else None
    if note:
        echo_err(note)
    echo_err(f"tokenizer: {label}")
    _render(plan, fmt or default_format())


def _known(name: Any) -> str | None:
    """A model a log names, when models.toml knows it (a log's model is a hint, not a flag)."""
    from ctxkit.budget.models import find_model

    return name if isinstance(name, str) and find_model(name)[0] is not None else None


def _render(plan: Any, fmt: str) -> None:
    out = sys.stdout
    if fmt == "json":
        import orjson

        out.write(orjson.dumps(plan.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if fmt != "table":
        write_rows(plan.rows(), fmt, out)
        return
    out.write(render_table(plan.source_rows()) + "\n\n")
    rows = plan.rows()
    if not any(r["server"] for r in rows):
        rows = [{k: v for k, v in r.items() if k != "server"} for r in rows]
    out.write(render_table(rows) + "\n\n")
    out.write("\n".join(plan.summary()) + "\n")
