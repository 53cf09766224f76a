"""`ctxkit mcp`: serve an archive's recall and search tools to Claude Code, Codex or any MCP client."""

from __future__ import annotations

import os

import click

from ctxkit.cli.options import echo_err


@click.command("mcp")
@click.option(
    "--archive",
    "archive_path",
    default=None,
    metavar="PATH",
    help="The archive compact wrote (default: the one compact writes for stdout); opened read-only.",
)
def mcp(archive_path: str | None) -> None:
    """Serve recall and search over an archive as a stdio MCP server.

    A model reads back what compaction archived: recall(ref, lines?, search?, max_tokens?) and
    search(query, transcript?, limit?). Needs the MCP SDK: pip install 'ctxkit[mcp]'.

    \b
    Examples:
      claude mcp add ctxkit -- ctxkit mcp --archive /abs/path/small.jsonl.ctx.db
      # Codex, in ~/.codex/config.toml:
      #   [mcp_servers.ctxkit]
      #   command = "ctxkit"
      #   args = ["mcp", "--archive", "/abs/path/small.jsonl.ctx.db"]
    """
    from ctxkit.archive.mcp_server import require_sdk, serve_stdio
    from ctxkit.archive.refs import default_archive_path
    from ctxkit.archive.store import Archive
    from ctxkit.errors import UsageError

    path = archive_path or default_archive_path(None)
    try:
        require_sdk()
    except UsageError as exc:
        echo_err(f"ctxkit: {exc}")
        raise SystemExit(2) from None
    Archive(path, readonly=True, create=False).close()  # a bad path fails here, in one line
    from ctxkit.fileio import check_stdout

    check_stdout()  # the answers go there
    if os.isatty(0):
        echo_err(f"ctxkit mcp: serving {path} on stdin/stdout (an MCP client starts this)")
    serve_stdio(path)
