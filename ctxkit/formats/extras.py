"""What a log leaves out, given beside it: a system prompt (`--system FILE`) and tool schemas
(`--tools FILE`), read with errors that name the file and line; `count` and `guard` share them."""

from __future__ import annotations

from typing import Any

import orjson

from ctxkit.errors import InputError
from ctxkit.model import Transcript, Unit


def read_text_file(path: str) -> str:
    """A UTF-8 text file, or an `InputError` that says why it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise InputError(path, None, "no such file") from None
    except PermissionError:
        raise InputError(path, None, "permission denied") from None
    except IsADirectoryError:
        raise InputError(path, None, "is a directory") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror}") from None


def line_of(text: str, pos: int) -> int:
    """The 1-based line of a character offset."""
    return text.count("\n", 0, pos) + 1


def load_tools(path: str) -> list[dict[str, Any]]:
    """Tool schemas from a JSON list, an object with a `tools` list (an MCP `tools/list` result)
    or a JSON-RPC response holding one; OpenAI, Anthropic or MCP shape (an MCP tool is read as
    the `{name, description, input_schema}` a client sends to the model: `as_model_tool`)."""
    text = read_text_file(path)
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, line_of(text, exc.pos), f"not valid JSON: {exc.msg}") from None
    if isinstance(data, dict) and isinstance(data.get("result"), dict) and "jsonrpc" in data:
        data = data["result"]
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if not isinstance(data, list):
        raise InputError(
            path, None, "expected a JSON list of tool schemas (OpenAI, Anthropic or MCP shape)"
        )
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise InputError(path, None, f"tool schema #{i + 1} is not a JSON object")
    return [as_model_tool(item) for item in data]


def as_model_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """An MCP tool (`inputSchema`, with `annotations`, `title`, `outputSchema` the model never
    sees) as the `{name, description, input_schema}` a client sends; other shapes unchanged."""
    if "inputSchema" not in schema or "input_schema" in schema or "function" in schema:
        return schema
    out: dict[str, Any] = {"name": schema.get("name")}
    if schema.get("description") is not None:
        out["description"] = schema["description"]
    out["input_schema"] = schema["inputSchema"]
    return out


def with_context(t: Transcript, system: str | None, tools: list[dict[str, Any]]) -> Transcript:
    """`t` with a system prompt and tool schemas the log did not record, put before and beside it.

    Provider-recorded calls point at unit indexes, so they move by one with a system prompt.
    """
    if system is None and not tools:
        return t
    units = t.units
    metadata = t.metadata
    if system is not None:
        units = [Unit(id="--system", role="system", content=system), *units]
        usage = metadata.get("provider_usage")
        if isinstance(usage, dict) and usage.get("calls"):
            shifted = [{**c, "after_unit": int(c.get("after_unit", 0)) + 1} for c in usage["calls"]]
            metadata = {**metadata, "provider_usage": {**usage, "calls": shifted}}
    return t.replace(units=units, tools=[*t.tools, *tools], metadata=metadata)
