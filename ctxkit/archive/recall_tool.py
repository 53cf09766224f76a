"""The recall tool a model calls to read back what compaction archived: one definition.

`RECALL_TOOL` (name, description written for a model, JSON schema) is what `ctxkit mcp` lists
and what `ctxkit compact --recall-tool` adds to a transcript's tools, in the output format's
shape (`recall_tool_for`); `serve_recall` executes a call, for an agent harness as for the MCP
server, with the semantics of `ctxkit recall` (`Archive.recall`).

Example (a harness that got a `recall` tool call from the model):
    >>> from ctxkit.archive.store import Archive
    >>> from ctxkit.model import Unit
    >>> with Archive(":memory:") as archive:
    ...     ref = archive.put("t0", Unit("r1", "tool", "log", "ok\\nFAILED: test_x\\ndone"))
    ...     print(serve_recall(archive, {"ref": ref, "search": "FAILED"}))
    1-ok
    2:FAILED: test_x
    3-done
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxkit.errors import ArchiveError, UsageError
from ctxkit.refs import SHORT_REF, parse_ref

if TYPE_CHECKING:
    from ctxkit.archive.store import Archive

RECALL_TOOL_NAME = "recall"
SEARCH_TOOL_NAME = "search"
SEARCH_LIMIT = 20  # units a search lists unless the call asks for another number
TOOL_TIMEOUT_S = 10.0  # a model's recall or search call answers (or fails) within this
MAX_ARGUMENT_CHARS = 10_000  # a ref, a pattern or a transcript id is never longer

# Every token here is paid on every call of a model that gets the tool: said once, briefly.
RECALL_DESCRIPTION = (
    "Read back content removed from this conversation to save space. A placeholder such as "
    '"[bash output, 6,073 bytes, archived as ref-123456789012345678]" names its ref. '
    "For a large item ask for `lines` or `search` rather than the whole text."
)

RECALL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ref": {"type": "string", "description": "The ref- a placeholder names"},
        "lines": {
            "type": ["string", "array"],
            "items": {"type": "integer"},
            "description": 'Only these lines, from 1: "50-100", "7" or [50, 100]',
        },
        "search": {
            "type": "string",
            "description": "Regular expression: only matching lines, with 2 lines of context",
        },
        "max_tokens": {"type": "integer", "description": "Cut the reply to this many tokens"},
    },
    "required": ["ref"],
    "additionalProperties": False,
}

RECALL_TOOL: dict[str, Any] = {
    "name": RECALL_TOOL_NAME,
    "description": RECALL_DESCRIPTION,
    "parameters": RECALL_PARAMETERS,
}

SEARCH_DESCRIPTION = (
    "Find archived content (what compaction removed from the conversation) by a regular "
    "expression, case-insensitive: lists the matching items with their ref, tool, type, size "
    "and the first matching line. An empty query lists every item. Read one with recall(ref)."
)

SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "A regular expression (text that is not one is matched literally); "
            "matched against each item's text, tool name and summary.",
        },
        "transcript": {
            "type": "string",
            "description": "Only items of this transcript id.",
        },
        "limit": {
            "type": "integer",
            "description": f"At most this many items (default {SEARCH_LIMIT}).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

SEARCH_TOOL: dict[str, Any] = {
    "name": SEARCH_TOOL_NAME,
    "description": SEARCH_DESCRIPTION,
    "parameters": SEARCH_PARAMETERS,
}


def recall_tool_for(fmt: str) -> dict[str, Any] | None:
    """The recall tool in the shape format `fmt` writes tools in; None for an app's own log
    (Claude Code, Codex), whose records carry no tool schemas: the app serves its tools itself.

    >>> sorted(recall_tool_for("anthropic"))
    ['description', 'input_schema', 'name']
    >>> sorted(recall_tool_for("openai"))
    ['function', 'type']
    """
    from ctxkit.formats import FORMATS
    from ctxkit.formats.common import tools_as

    own = FORMATS.get(fmt)
    if own is not None and not own.holds_tools:
        return None
    shape = own.tool_shape if own is not None else None
    return tools_as(shape, [{"type": "function", "function": dict(RECALL_TOOL)}])[0]


def tool_name(tool: Mapping[str, Any]) -> str | None:
    """The name of a tool schema in any shape (OpenAI function, Anthropic, bare function)."""
    fn = tool.get("function")
    if isinstance(fn, Mapping):
        return fn.get("name") if isinstance(fn.get("name"), str) else None
    return tool.get("name") if isinstance(tool.get("name"), str) else None


def _shaped_like(tool: dict[str, Any], like: Mapping[str, Any]) -> dict[str, Any]:
    """`tool` in the shape of the schema `like` (a transcript's tools all look alike)."""
    fn = tool.get("function") if isinstance(tool.get("function"), dict) else None
    if "input_schema" in like and fn is not None:
        return {
            "name": fn["name"],
            "description": fn.get("description", ""),
            "input_schema": fn.get("parameters") or {"type": "object", "properties": {}},
        }
    if "parameters" in like and "function" not in like and fn is not None:
        return dict(fn)  # bare function schemas (ShareGPT's)
    return tool


def add_tools(tools: list[dict[str, Any]], added: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`tools` and then each of `added` whose name is not among them (a transcript compacted
    again keeps one recall tool), in the shape of the tools already there."""
    if not added:
        return tools
    names = {tool_name(t) for t in tools if isinstance(t, Mapping)}
    like = tools[0] if tools and isinstance(tools[0], Mapping) else {}
    return [*tools, *(_shaped_like(t, like) for t in added if tool_name(t) not in names)]


def serving_hint(archive_path: str) -> str:
    """How to serve recall to an app whose log carries no tool schemas (Claude Code, Codex)."""
    archive_path = os.path.abspath(archive_path)  # the app starts the server from elsewhere
    return (
        f"serve recall over MCP instead: ctxkit mcp --archive {archive_path} "
        f"(Claude Code: claude mcp add ctxkit -- ctxkit mcp --archive {archive_path}; Codex: "
        f'[mcp_servers.ctxkit] command = "ctxkit", args = ["mcp", "--archive", "{archive_path}"] '
        "in ~/.codex/config.toml)"
    )


_LINES = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def parse_lines(value: Any, what: str = "lines") -> tuple[int, int] | None:
    """A line range from "50-100", "7", 7 or [50, 100]; None for None. Raises UsageError."""
    if value is None:
        return None
    if isinstance(value, bool):
        value = str(value)
    if isinstance(value, int):
        a = b = value
    elif (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        a, b = value
    else:
        m = _LINES.fullmatch(value) if isinstance(value, str) else None
        if m is None:
            raise UsageError(
                f"{what} {value!r}: expected A-B or A (line numbers from 1), e.g. {what} 50-100"
            )
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
    if a < 1 or b < a:
        raise UsageError(f"{what} {a}-{b}: lines count from 1 and A must not exceed B")
    return a, b


def _arguments(arguments: Any, schema: Mapping[str, Any], tool: str) -> dict[str, Any]:
    if not isinstance(arguments, Mapping):
        raise UsageError(f"{tool}: arguments must be an object, got {type(arguments).__name__}")
    known = schema["properties"]
    extra = sorted(set(arguments) - set(known))
    if extra:
        raise UsageError(
            f"{tool}: unknown argument(s) {', '.join(extra)}; known: {', '.join(known)}"
        )
    args = {k: v for k, v in arguments.items() if v is not None}
    for name in schema["required"]:
        if name not in args:
            raise UsageError(f"{tool}: argument {name!r} is required")
    for name, spec in known.items():
        value = args.get(name)
        kind = spec.get("type")
        if value is None or kind not in ("string", "integer"):
            continue  # `lines` takes several shapes: parse_lines checks it
        if not isinstance(value, str if kind == "string" else int) or isinstance(value, bool):
            shown = repr(value) if len(repr(value)) <= 60 else type(value).__name__
            raise UsageError(f"{tool}: argument {name!r} must be a {kind}, got {shown}")
        if isinstance(value, str) and len(value) > MAX_ARGUMENT_CHARS:
            raise UsageError(
                f"{tool}: argument {name!r} has {len(value):,} characters; at most "
                f"{MAX_ARGUMENT_CHARS:,}"
            )
        if isinstance(value, int) and value < 1:
            raise UsageError(f"{tool}: argument {name!r} must be at least 1, got {value}")
    return args


def serve_recall(archive: Archive, arguments: Any, *, timeout_s: float = TOOL_TIMEOUT_S) -> str:
    """Execute a recall tool call: the text to hand back to the model.

    `arguments` is the call's JSON object (`ref`, optional `lines`, `search`, `max_tokens`).
    Bad arguments or an unknown ref raise a `CtxkitError` whose message is fit to return to the
    model as the tool's error result. A search that matches nothing is an answer, not an error;
    one that takes more than `timeout_s` is an error.
    """
    args = _arguments(arguments, RECALL_PARAMETERS, RECALL_TOOL_NAME)
    ref = args["ref"].strip()
    if not ref:
        raise UsageError("recall: argument 'ref' is empty; give the ref a placeholder names")
    search = args.get("search")
    if SHORT_REF.fullmatch(parse_ref(ref)[0]) and not archive.has(ref):
        # said for the model that asked, not for a person at a shell (Archive.get's message)
        raise ArchiveError(
            f"unknown ref {ref}: nothing archived has it; give the ref exactly as the "
            "placeholder writes it (ref- and 18 digits)"
        )
    text = archive.recall(
        ref,
        lines=parse_lines(args.get("lines")),
        search=search,
        max_tokens=args.get("max_tokens"),
        timeout_s=timeout_s,
    )
    if search is not None and not text:
        return f"no line of {ref} matches {search!r}"
    return text


def serve_search(archive: Archive, arguments: Any, *, timeout_s: float = TOOL_TIMEOUT_S) -> str:
    """Execute a search tool call: one line per matching archived unit (see `Archive.search`);
    one that takes more than `timeout_s` is an error."""
    args = _arguments(arguments, SEARCH_PARAMETERS, SEARCH_TOOL_NAME)
    limit = args.get("limit", SEARCH_LIMIT)
    hits = archive.search(
        args["query"], transcript_id=args.get("transcript"), limit=limit + 1, timeout_s=timeout_s
    )
    if not hits:
        where = f" of transcript {args['transcript']!r}" if args.get("transcript") else ""
        return f"no archived item{where} matches {args['query']!r}"
    lines = [_hit_line(h) for h in hits[:limit]]
    if len(hits) > limit:
        lines.append(f"(more match: raise limit above {limit} or narrow the query)")
    return "\n".join(lines)


def _hit_line(hit: Mapping[str, Any]) -> str:
    what = " ".join(p for p in (hit["tool_name"], hit["type"]) if p)
    size = f"{hit['chars']:,} chars, {hit['lines']:,} lines"
    if hit["tokens"] is not None:
        size = f"{hit['tokens']:,} tokens, " + size
    head = f"{hit['ref']} [{what}, {size}] transcript {hit['transcript_id']}"
    if hit["line"] is None:
        return f"{head}: {hit['snippet']}"
    return f"{head}: line {hit['line']}: {hit['snippet']}"
