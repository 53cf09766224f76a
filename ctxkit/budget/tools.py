"""The tool budget: what each tool schema costs, by source, and which tools to defer.

Every tool an agent offers sends its name, description and JSON schema with every call. Tool
search moves that cost out of the window: deferred tools are left out of the request (Anthropic's
`defer_loading: true`), a search tool is offered instead, and the model loads a tool when it needs
one. Claude Code turns this on by itself when MCP tool descriptions pass 10% of the context
window (`ENABLE_TOOL_SEARCH=auto:N` sets another share). `plan_budget` makes the same choice
explicitly and tool by tool:

- the threshold is a share of the target's effective window (default 10%);
- when the schemas pass it, tools are deferred in order of source: MCP tools first, then skill
  tools, then tools an app adds at run time (Codex `dynamic_tools`); built-in tools never;
- within a source, least used first (calls counted in the logs given), then the largest first
  (fewer tools deferred for the same room), then by name;
- deferring stops as soon as what is kept, plus the search tool's own schema and the note the
  agent injects, is under the threshold.

    >>> from ctxkit.tokens import get_tokenizer
    >>> from ctxkit.budget.targets import resolve_target
    >>> tools = [Tool("Read", "builtin", schema={"name": "Read", "description": "x" * 400}),
    ...          Tool("search", "mcp", "docs", {"name": "search", "description": "y" * 2000})]
    >>> plan = plan_budget(tools, {}, get_tokenizer("approx"), resolve_target(context_window=8000))
    >>> plan.threshold_tokens, plan.schema_tokens, plan.deferred
    (500, 617, ('search',))
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.budget import Target
from ctxkit.model import Transcript
from ctxkit.tokens import CountOptions, Tokenizer, schema_text

SOURCES = ("builtin", "mcp", "skill", "app")
DEFER_ORDER = ("mcp", "skill", "app")  # built-in tools are never deferred
DEFAULT_THRESHOLD = 0.10
NOTE = "[{n} tools deferred to save context. Use tool_search to find them.]"
# The search tool offered in place of the deferred ones (its schema is counted as kept).
SEARCH_TOOL: dict[str, Any] = {
    "name": "tool_search",
    "description": (
        "Search the deferred tools by name, description and argument names. The tools found "
        "can be called from the next turn on."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Words to look for in the tools"}},
        "required": ["query"],
    },
}


@dataclass(frozen=True)
class Tool:
    """One tool an agent offers: its name, where it comes from (`SOURCES`; `server` names an MCP
    server), its schema as sent to the model (None when a log shows only its calls), and where
    it was found."""

    name: str
    source: str = "builtin"
    server: str | None = None
    schema: dict[str, Any] | None = None
    origin: str = ""

    def call_names(self) -> tuple[str, ...]:
        """The names a log may call it by (Claude Code prefixes MCP tools with the server)."""
        if self.source == "mcp" and self.server and not self.name.startswith("mcp__"):
            return (self.name, f"mcp__{self.server}__{self.name}")
        return (self.name,)


def tool_name(schema: Mapping[str, Any]) -> str | None:
    """The name of a schema in OpenAI (`function.name`), Anthropic or MCP shape."""
    fn = schema.get("function")
    if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
        return str(fn["name"])
    name = schema.get("name")
    return name if isinstance(name, str) else None


def split_mcp_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of an MCP tool as Claude Code and Codex name it: `mcp__<server>__<tool>`."""
    if not name.startswith("mcp__"):
        return None
    server, sep, tool = name[5:].partition("__")
    return (server, tool) if sep and server and tool else None


def classify(name: str, source: str | None = None, server: str | None = None) -> tuple[str, str | None]:
    """The source and server of a tool: as given, else `mcp` for `mcp__<server>__<tool>` names,
    else built-in."""
    if source is not None:
        return source, server
    split = split_mcp_name(name)
    if split:
        return "mcp", split[0]
    return "builtin", None


def tools_from_schemas(
    schemas: Iterable[Mapping[str, Any]],
    origin: str,
    source: str | None = None,
    server: str | None = None,
) -> list[Tool]:
    """Tools from schemas in any shape (MCP `inputSchema` entries become what a client sends)."""
    from ctxkit.formats.extras import as_model_tool

    out = []
    for i, raw in enumerate(schemas):
        schema = as_model_tool(dict(raw))
        name = tool_name(schema) or f"#{i + 1}"
        src, srv = classify(name, source, server)
        out.append(Tool(name, src, srv, schema, origin))
    return out


def server_name(path: str) -> str:
    """An MCP server's name from its saved `tools/list` file: `git.tools-list.json` -> git."""
    base = os.path.basename(path)
    for suffix in (".json", ".tools-list", ".tools_list", ".tools", "-tools"):
        base = base.removesuffix(suffix)
    return base or "mcp"


def load_tool_file(path: str, source: str | None = None, server: str | None = None) -> list[Tool]:
    """Tools from a file: a JSON list of schemas, `{"tools": [...]}` (an MCP `tools/list`
    result) or the whole JSON-RPC response; `source="mcp"` names the server after the file
    unless `server` is given."""
    from ctxkit.formats.extras import load_tools

    if source == "mcp" and server is None:
        server = server_name(path)
    return tools_from_schemas(load_tools(path), path, source, server)


def tool_calls(t: Transcript) -> Counter[str]:
    """How often each tool is called in a transcript."""
    calls: Counter[str] = Counter()
    for u in t.units:
        for c in u.tool_calls:
            calls[c.name] += 1
    return calls


def logged_tools(t: Transcript) -> list[Tool]:
    """The tools a log shows: its tool schemas (OpenHands event 0, an OpenAI or Anthropic
    request), the tools a host app added (Codex `dynamic_tools`, source `app`), and by name only
    the tools it calls but never describes (Claude Code, Codex built-ins)."""
    where = t.path or "<stdin>"
    tools = tools_from_schemas(t.tools, where)
    from ctxkit.formats.kept import records

    for rec in records(t):  # the records a log keeps beside its messages: Codex's session_meta
        payload = rec.get("payload") if isinstance(rec, dict) else None
        if isinstance(payload, dict) and rec.get("type") == "session_meta":
            dynamic = payload.get("dynamic_tools")
            if isinstance(dynamic, list):
                tools += tools_from_schemas([d for d in dynamic if isinstance(d, dict)], where, "app")
    known = {n for tool in tools for n in tool.call_names()}
    for name in [*tool_calls(t), *(t.metadata.get("deferred_tools") or ())]:
        if name not in known:
            src, srv = classify(name)
            tools.append(Tool(name, src, srv, None, where))
            known.add(name)
    return tools


def merge_tools(*groups: Iterable[Tool]) -> list[Tool]:
    """Tools by name, first seen first; a later schema fills in a tool seen only by name."""
    out: dict[str, Tool] = {}
    alias: dict[str, str] = {}
    for group in groups:
        for tool in group:
            key = next((alias[n] for n in tool.call_names() if n in alias), None)
            if key is None:
                out[tool.name] = tool
                for n in tool.call_names():
                    alias[n] = tool.name
            elif out[key].schema is None and tool.schema is not None:
                out[key] = tool
                for n in tool.call_names():
                    alias[n] = key
    return list(out.values())


def tool_budget(
    transcripts: Iterable[Transcript],
    given: Sequence[Tool],
    tok: Tokenizer,
    target: Target,
    threshold: float = DEFAULT_THRESHOLD,
    opts: CountOptions = CountOptions(),
) -> ToolBudget:
    """The budget of the tools `given` (from files) and those the logs show, with the calls the
    logs make; one inventory for all (several sessions of one agent say more about use)."""
    calls: Counter[str] = Counter()
    logged: list[Tool] = []
    deferred: set[str] | None = None
    for t in transcripts:
        logged.extend(logged_tools(t))
        calls.update(tool_calls(t))
        if t.metadata.get("deferred_tools") is not None:
            deferred = (deferred or set()) | set(t.metadata["deferred_tools"])
    return plan_budget(merge_tools(given, logged), calls, tok, target, threshold, opts, deferred)


# --- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolLine:
    """One tool in the budget: its tokens (None: no schema known), calls, and `keep` or `defer`."""

    name: str
    source: str
    server: str | None
    tokens: int | None
    calls: int
    action: str  # keep | defer | unknown (no schema)
    logged: str | None = None  # what the log says the agent did: deferred, loaded

    def to_dict(self, effective_limit: int) -> dict[str, Any]:
        share = round(100 * self.tokens / effective_limit, 2) if self.tokens is not None else None
        return {
            "tool": self.name,
            "source": self.source,
            "server": self.server,
            "tokens": self.tokens,
            "share %": share,
            "calls": self.calls,
            "action": self.action,
            **({"logged": self.logged} if self.logged is not None else {}),
        }


@dataclass(frozen=True)
class ToolBudget:
    """The tool schemas against a target's window, and the deferral that brings them under the
    threshold (`deferred`, the `note` an agent injects, and what the window `gain`s per call)."""

    target: str
    context_window: int
    effective_limit: int
    threshold: float
    tools: tuple[ToolLine, ...]
    deferred: tuple[str, ...]
    note: str | None
    overhead_tokens: int  # the search tool's schema and the note, when anything is deferred
    logged_deferred: tuple[str, ...] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def threshold_tokens(self) -> int:
        return math.floor(self.threshold * self.effective_limit)

    @property
    def schema_tokens(self) -> int:
        """Tokens of every schema known (tools seen only by name are not in it)."""
        return sum(t.tokens or 0 for t in self.tools)

    @property
    def after_tokens(self) -> int:
        """Tokens of the schemas kept, plus the search tool and the note when anything is deferred."""
        kept = sum(t.tokens or 0 for t in self.tools if t.action != "defer")
        return kept + (self.overhead_tokens if self.deferred else 0)

    @property
    def gain(self) -> int:
        """Tokens the window gains on every call."""
        return self.schema_tokens - self.after_tokens

    @property
    def over(self) -> bool:
        """Whether the schemas alone pass the threshold."""
        return self.schema_tokens > self.threshold_tokens

    @property
    def fits_after(self) -> bool:
        return self.after_tokens <= self.threshold_tokens

    @property
    def unknown(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools if t.tokens is None)

    def share(self, tokens: int) -> float:
        return round(100 * tokens / self.effective_limit, 2) if self.effective_limit else 0.0

    def rows(self) -> list[dict[str, Any]]:
        """A row per tool, largest first within each source."""
        return [t.to_dict(self.effective_limit) for t in self.tools]

    def source_rows(self) -> list[dict[str, Any]]:
        """Tools, tokens, share and calls per source (an MCP server is a source of its own)."""
        groups: dict[str, list[ToolLine]] = {}
        for t in self.tools:
            key = f"mcp:{t.server}" if t.source == "mcp" and t.server else t.source
            groups.setdefault(key, []).append(t)
        rows = []
        for key, members in groups.items():
            tokens = sum(t.tokens or 0 for t in members)
            rows.append(
                {
                    "source": key,
                    "tools": len(members),
                    "described": sum(t.tokens is not None for t in members),
                    "tokens": tokens,
                    "share %": self.share(tokens),
                    "calls": sum(t.calls for t in members),
                    "deferred": sum(t.action == "defer" for t in members),
                }
            )
        rows.append(
            {
                "source": "total",
                "tools": len(self.tools),
                "described": sum(t.tokens is not None for t in self.tools),
                "tokens": self.schema_tokens,
                "share %": self.share(self.schema_tokens),
                "calls": sum(t.calls for t in self.tools),
                "deferred": len(self.deferred),
            }
        )
        return rows

    def summary(self) -> list[str]:
        """The verdict for people, a line each."""
        limit = (
            f"{self.target}: window {self.context_window:,}, effective {self.effective_limit:,}; "
            f"threshold {self.threshold:.0%} = {self.threshold_tokens:,} tokens"
        )
        lines = [limit]
        schemas = f"tool schemas {self.schema_tokens:,} tokens ({self.share(self.schema_tokens)}%)"
        if not any(t.tokens is not None for t in self.tools):
            lines.append("no tool schema in the input: nothing to weigh against the threshold")
        elif not self.over:
            lines.append(f"{schemas}: under the threshold, nothing to defer")
        else:
            by_source = Counter(t.source for t in self.tools if t.action == "defer")
            which = ", ".join(f"{s} {by_source[s]}" for s in DEFER_ORDER if by_source[s])
            if self.deferred:
                lines.append(
                    f"{schemas}: defer {len(self.deferred)} tools ({which}) -> {self.after_tokens:,} "
                    f"tokens ({self.share(self.after_tokens)}%, with tool_search and the note "
                    f"{self.overhead_tokens:,}); the window gains {self.gain:,} tokens per call"
                )
            else:
                lines.append(f"{schemas}: over the threshold, and no tool may be deferred")
            if not self.fits_after:
                kept = self.after_tokens
                lines.append(
                    f"still over by {kept - self.threshold_tokens:,} tokens: built-in tools are "
                    "never deferred (trim their descriptions, or give a larger model)"
                )
        if self.unknown:
            lines.append(
                f"{len(self.unknown)} tools have no schema in the input (the log shows their calls "
                "only): give --tools/--mcp files to count them"
            )
        if self.logged_deferred is not None:
            deferred = [t for t in self.tools if t.logged == "deferred"]
            kinds = Counter(t.source for t in deferred)
            lines.append(
                f"the log: the agent itself deferred {len(deferred)} of these tools ("
                + ", ".join(f"{s} {kinds[s]}" for s in SOURCES if kinds[s])
                + ") and loaded the rest"
            )
        if self.note:
            lines.append(f"note: {self.note}")
        lines.extend(self.notes)
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "context_window": self.context_window,
            "effective_limit": self.effective_limit,
            "threshold": self.threshold,
            "threshold_tokens": self.threshold_tokens,
            "schema_tokens": self.schema_tokens,
            "over": self.over,
            "deferred": list(self.deferred),
            "note": self.note,
            "overhead_tokens": self.overhead_tokens if self.deferred else 0,
            "after_tokens": self.after_tokens,
            "gain": self.gain,
            "fits_after": self.fits_after,
            "unknown": list(self.unknown),
            "logged_deferred": list(self.logged_deferred) if self.logged_deferred is not None else None,
            "by_source": self.source_rows(),
            "tools": self.rows(),
        }


def schema_tokens(tools: Sequence[Tool], tok: Tokenizer, opts: CountOptions = CountOptions()) -> list[int | None]:
    """Tokens of each tool's schema, counted as the `tools` region counts them (None: no schema)."""
    texts = [schema_text(t.schema) for t in tools if t.schema is not None]
    counts = iter(tok.count_many(texts) if texts else [])
    return [
        math.ceil(next(counts) * opts.tool_schema_scale) if t.schema is not None else None
        for t in tools
    ]


def _overhead(n: int, tok: Tokenizer, opts: CountOptions) -> int:
    """The search tool's schema plus the note, as a system message, for `n` deferred tools."""
    from ctxkit.model import Unit
    from ctxkit.tokens import count_units

    (note,) = count_units([Unit(id="note", role="system", content=NOTE.format(n=n))], tok, opts)
    search = math.ceil(tok.count(schema_text(SEARCH_TOOL)) * opts.tool_schema_scale)
    return search + note.total


def plan_budget(
    tools: Sequence[Tool],
    calls: Mapping[str, int],
    tok: Tokenizer,
    target: Target,
    threshold: float = DEFAULT_THRESHOLD,
    opts: CountOptions = CountOptions(),
    logged_deferred: Iterable[str] | None = None,
) -> ToolBudget:
    """Count each tool's schema against `target`'s effective window and choose what to defer
    (see the module docstring for the order)."""
    if not 0 < threshold <= 1:
        raise ValueError("threshold is a fraction of the window, above 0 and at most 1")
    tokens = schema_tokens(tools, tok, opts)
    used = {t.name: sum(calls.get(n, 0) for n in t.call_names()) for t in tools}
    budget = math.floor(threshold * target.effective_limit)
    total = sum(n or 0 for n in tokens)
    deferred: list[int] = []
    if total > budget:
        order = sorted(
            (i for i, t in enumerate(tools) if t.source in DEFER_ORDER and tokens[i]),
            key=lambda i: (DEFER_ORDER.index(tools[i].source), used[tools[i].name], -(tokens[i] or 0), tools[i].name),
        )
        kept = total
        for i in order:
            if deferred and kept + _overhead(len(deferred), tok, opts) <= budget:
                break
            deferred.append(i)
            kept -= tokens[i] or 0
    overhead = _overhead(len(deferred), tok, opts) if deferred else 0
    logged = set(logged_deferred) if logged_deferred is not None else None
    lines = []
    for i, t in enumerate(tools):
        action = "defer" if i in deferred else ("keep" if tokens[i] is not None else "unknown")
        mark = None
        if logged is not None:
            mark = "deferred" if any(n in logged for n in t.call_names()) else "loaded"
        lines.append(ToolLine(t.name, t.source, t.server, tokens[i], used[t.name], action, mark))
    rank = {s: k for k, s in enumerate(SOURCES)}
    lines.sort(key=lambda ln: (rank.get(ln.source, len(rank)), ln.server or "", -(ln.tokens or 0), ln.name))
    names = tuple(tools[i].name for i in deferred)
    return ToolBudget(
        target=target.name,
        context_window=target.context_window,
        effective_limit=target.effective_limit,
        threshold=threshold,
        tools=tuple(lines),
        deferred=names,
        note=NOTE.format(n=len(names)) if names else None,
        overhead_tokens=overhead,
        logged_deferred=tuple(sorted(logged)) if logged is not None else None,
    )


def schemas_over(tools_tokens: int, effective_limit: int, threshold: float | None = DEFAULT_THRESHOLD) -> str | None:
    """A warning when tool schemas alone pass `threshold` of the effective window, else None."""
    if threshold is None or effective_limit <= 0:
        return None
    budget = math.floor(threshold * effective_limit)
    if tools_tokens <= budget:
        return None
    return (
        f"tool schemas alone are {tools_tokens:,} tokens, {100 * tools_tokens / effective_limit:.1f}% "
        f"of the effective window {effective_limit:,} (threshold {threshold:.0%}): "
        "`ctxkit tools` says which to defer"
    )
