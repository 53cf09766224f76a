"""`ctxkit mcp`: a stdio MCP server that lets a model recall and search an archive.

Two tools, defined once in `ctxkit.archive.recall_tool`: `recall` (the text of an archived unit, a line
range or the matches of a pattern, as `ctxkit recall`) and `search` (which archived units match
a pattern). The archive is opened read-only; a bad call (unknown ref, bad arguments) is a tool
error result the model can read and correct, never the end of the server.

Needs the `mcp` SDK (`pip install 'ctxkit[mcp]'`); nothing else in ctxkit imports it. Written
against the SDK's low-level server, whose API changed in mcp 2 (handlers passed to the
constructor instead of decorators): both are served.

Every request is answered within a bound. A line of more than `MAX_REQUEST_BYTES` is refused
unread, one that is not JSON gets a JSON-RPC parse error (-32700), one that is not a JSON-RPC
message an invalid-request error (-32600); the SDK's own transport logs those and answers
nothing. A tool call's pattern matching stops after `recall_tool.TOOL_TIMEOUT_S` with an
error result.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

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
MAX_REQUEST_BYTES = 1 << 20  # one JSON-RPC line; a real tool call is a few hundred bytes
_READ_CHUNK = 1 << 16

# JSON-RPC 2.0 error codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600

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
    """(the text of a tool call's result, True when it is an error) - never raises: a server
    that answers a bad call (or a damaged archive row) with an error result keeps serving."""
    serve = _SERVE.get(name)
    if serve is None:
        return f"unknown tool {name!r}; known: {', '.join(_SERVE)}", True
    try:
        return serve(archive, arguments if arguments is not None else {}), False
    except CtxkitError as exc:
        return str(exc), True
    except RecursionError:
        return "the call's arguments are nested too deeply", True
    except Exception as exc:  # noqa: BLE001 - one failed call is that call's answer
        return f"{name} failed: {type(exc).__name__}: {exc}", True


def error_reply(request_id: Any, code: int, message: str) -> str:
    """A JSON-RPC error response line (`request_id` None: the request's id is unknown)."""
    rid = request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
    ) + "\n"


class _Output:
    """The server's stdout as the SDK's stdio transport writes it (`write`, `flush`): one whole
    line per write, under a lock, so an error reply never lands inside another message."""

    def __init__(self, stream: BinaryIO) -> None:
        import anyio

        self._stream = stream
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        import anyio

        async with self._lock:
            await anyio.to_thread.run_sync(self._put, text)

    async def flush(self) -> None:
        pass  # every write is flushed

    def _put(self, text: str) -> None:
        self._stream.write(text.encode("utf-8"))
        self._stream.flush()


class _Requests:
    """The server's stdin as the SDK's stdio transport reads it (`async for line in stdin`),
    passing on only lines that are JSON-RPC messages; every other line gets its error reply."""

    def __init__(self, stream: BinaryIO, out: _Output, validate: Callable[[str], Any]) -> None:
        self._stream = stream
        self._out = out
        self._validate = validate

    def __aiter__(self) -> _Requests:
        return self

    async def __anext__(self) -> str:
        import anyio

        while True:
            raw, size, head = await anyio.to_thread.run_sync(self._line)
            if raw is None and size == 0:
                raise StopAsyncIteration
            if raw is None:
                await self._out.write(
                    error_reply(
                        _id_in_head(head),
                        INVALID_REQUEST,
                        f"request of {size:,} bytes refused: at most {MAX_REQUEST_BYTES:,}",
                    )
                )
                continue
            text = raw.decode("utf-8", "replace")
            if not text.strip():
                continue
            problem = self._problem(text)
            if problem is None:
                return text
            await self._out.write(problem)

    def _line(self) -> tuple[bytes | None, int, bytes]:
        """(the next line, its size, its first chunk); the line is None for a line over the
        bound, read and dropped without holding it, and at the end (size 0)."""
        chunks: list[bytes] = []
        size = 0
        head = b""
        while True:
            chunk = self._stream.readline(_READ_CHUNK)
            if not chunk:
                break
            head = head or chunk
            size += len(chunk)
            if size <= MAX_REQUEST_BYTES:
                chunks.append(chunk)
            else:
                chunks = []
            if chunk.endswith(b"\n"):
                break
        if size > MAX_REQUEST_BYTES:
            return None, size, head
        return (b"".join(chunks) if chunks else None), size, head

    def _problem(self, text: str) -> str | None:
        """The error reply a line gets, or None when it is a JSON-RPC message."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            return error_reply(None, PARSE_ERROR, f"Parse error: not JSON ({str(exc)[:100]})")
        if not isinstance(data, dict):
            return error_reply(
                None,
                INVALID_REQUEST,
                f"Invalid Request: expected a JSON-RPC object, got a JSON {type(data).__name__}",
            )
        try:
            self._validate(text)
        except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError, say which field
            first = str(exc).splitlines()
            detail = "; ".join(line.strip() for line in first[1:3]) or type(exc).__name__
            return error_reply(data.get("id"), INVALID_REQUEST, f"Invalid Request: {detail[:200]}")
        return None


# "id" among the top-level keys before any nested value: a refused request's id, unparsed
_HEAD_ID = re.compile(rb'^\s*\{[^{}\[\]]*?"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


def _id_in_head(head: bytes) -> Any:
    """The id of a request too large to parse, when its first bytes show it (clients write
    `{"jsonrpc": "2.0", "id": 7, ...`), so the client can match the refusal; else None."""
    m = _HEAD_ID.match(head)
    if m is None:
        return None
    try:
        return json.loads(m.group(1))
    except ValueError:
        return None


def _message_validator() -> Callable[[str], Any]:
    """What the SDK's transport checks a line with (mcp 2's adapter, mcp 1's model)."""
    import mcp.types as types

    adapter = getattr(types, "jsonrpc_message_adapter", None)
    if adapter is not None:
        return lambda line: adapter.validate_json(line, by_name=False)
    validate: Callable[[str], Any] = types.JSONRPCMessage.model_validate_json  # type: ignore[attr-defined]
    return validate


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
    out = _Output(sys.stdout.buffer)
    requests = _Requests(sys.stdin.buffer, out, _message_validator())

    async def run() -> None:
        server = build_server(archive)
        async with stdio_server(requests, out) as (read_stream, write_stream):  # type: ignore[arg-type]
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(run)
    finally:
        archive.close()
