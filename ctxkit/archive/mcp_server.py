"""`ctxkit mcp`: a stdio MCP server that lets a model recall and search an archive.

Two tools, defined once in `ctxkit.archive.recall_tool`: `recall` (the text of an archived unit, a line
range or the matches of a pattern, as `ctxkit recall`) and `search` (which archived units match
a pattern). The archive is opened read-only; a bad call (unknown ref, bad arguments) is a tool
error result the model can read and correct, never the end of the server.

Needs the `mcp` SDK (`pip install 'ctxkit[mcp]'`); nothing else in ctxkit imports it. Written
against the SDK's low-level server, whose API changed in mcp 2 (handlers passed to the
constructor instead of decorators): both are served.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ctxkit.archive.recall_tool import (
    RECALL_TOOL,
    RECALL_TOOL_NAME,
    SEARCH_TOOL,
    SEARCH_TOOL_NAME,
    serve_recall,
    serve_search,
)
from ctxkit.archive.store import Archive
from ctxkit.errors import CtxkitError, UsageError

SERVER_NAME = "ctxkit"
INSTRUCTIONS = (
    "Content removed from this conversation by ctxkit's compaction is archived, not lost: a "
    "placeholder such as [bash output, 6,073 bytes, archived as ref-123456789012345678] names "
    "its ref. Read it back with recall(ref); find items by content with search(query)."
)
INSTALL_HINT = "`ctxkit mcp` needs the MCP SDK: pip install 'ctxkit[mcp]'"

_TOOLS = (RECALL_TOOL, SEARCH_TOOL)
_SERVE: dict[str, Callable[[Archive, Any], str]] = {
    RECALL_TOOL_NAME: serve_recall,
    SEARCH_TOOL_NAME: serve_search,
}


def require_sdk() -> None:
    """Raise a UsageError naming the extra when the `mcp` SDK is not installed."""
    try:
        import mcp.server.lowlevel  # noqa: F401
        import mcp.server.stdio  # noqa: F401
        import mcp.types  # noqa: F401
    except ImportError as exc:
        if getattr(exc, "name", None) and not str(exc.name).startswith("mcp"):
            raise
        raise UsageError(INSTALL_HINT) from None


def call_tool(archive: Archive, name: str, arguments: Any) -> tuple[str, bool]:
    """(the text of a tool call's result, True when it is an error) - never raises a domain error."""
    serve = _SERVE.get(name)
    if serve is None:
        return f"unknown tool {name!r}; known: {', '.join(_SERVE)}", True
    try:
        return serve(archive, arguments if arguments is not None else {}), False
    except CtxkitError as exc:
        return str(exc), True


def build_server(archive: Archive) -> Any:
    """The MCP low-level server with the recall and search tools over `archive`."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    # the wire (camelCase) names, which mcp 1 and mcp 2 (snake_case fields) both accept
    tools = [
        types.Tool.model_validate(
            {"name": t["name"], "description": t["description"], "inputSchema": t["parameters"]}
        )
        for t in _TOOLS
    ]

    def result(name: str, arguments: Any) -> Any:
        text, error = call_tool(archive, name, arguments)
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": text}], "isError": error}
        )

    accepts = inspect.signature(Server.__init__).parameters
    about: dict[str, Any] = {"instructions": INSTRUCTIONS} if "instructions" in accepts else {}
    if "on_call_tool" in accepts:  # mcp 2

        async def on_list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=tools)

        async def on_call_tool(ctx: Any, params: Any) -> Any:
            return result(params.name, params.arguments)

        return Server(SERVER_NAME, on_list_tools=on_list_tools, on_call_tool=on_call_tool, **about)

    server: Any = Server(SERVER_NAME, **about)  # mcp 1: handlers are registered with decorators

    @server.list_tools()
    async def list_tools() -> list[Any]:
        return tools

    @server.call_tool()
    async def call(name: str, arguments: dict[str, Any]) -> Any:
        text, error = call_tool(archive, name, arguments)
        if error:
            raise ValueError(text)  # mcp 1 returns a raised error as an isError result
        return [types.TextContent(type="text", text=text)]

    return server


def serve_stdio(archive_path: str) -> None:
    """Serve the archive's tools over stdin/stdout until the client closes the connection."""
    require_sdk()
    import anyio
    from mcp.server.stdio import stdio_server

    archive = Archive(archive_path, readonly=True, create=False)

    async def run() -> None:
        server = build_server(archive)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(run)
    finally:
        archive.close()
