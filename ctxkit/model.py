"""The canonical records: `Unit` (one message) and `Transcript` (an ordered list of units).

Every reader produces these and every writer consumes them, so strategies, the guard and the
archive never see a source format. A unit read from a file keeps its source record in `raw`;
a writer emits `raw` unchanged for units nobody touched, which is what makes read -> write
reproduce the file. Any change to a unit goes through `Unit.replace`, which drops `raw` but
keeps `source`: the record(s) the unit was read from, the template an app-log writer (Claude
Code, Codex) rebuilds a changed unit from, so ids, parent links and timestamps survive.

Units that compaction makes up (summaries, placeholders for removed runs) have no `source`.
`meta["join"] = True` on such a unit means "the same message as the unit before it": a writer
puts both in one message (a second content part or block) instead of two consecutive messages
of one role, which some providers refuse and every model reads as two turns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

ROLES = ("system", "user", "assistant", "tool")
TYPES = (
    "message",
    "code",
    "plan_ref",
    "log",
    "summary",
    "placeholder",
    "tool_call",
    "tool_result",
    "reasoning",
    "other",
)


@dataclass
class ToolCall:
    """One call an assistant makes: `arguments` is kept as the source's JSON text."""

    id: str
    name: str
    arguments: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        return cls(
            id=str(d["id"]), name=str(d.get("name", "")), arguments=str(d.get("arguments", ""))
        )


def _priority_from(value: Any) -> int | None:
    """Accept 1, "1", "P1", "p1"; anything else is no priority."""
    if value is None or value == "":
        return None
    text = str(value).strip().upper().lstrip("P")
    return int(text) if text in ("1", "2", "3") else None


@dataclass
class Unit:
    """One message of a transcript, in a single shape whatever file it came from."""

    id: str
    role: str
    type: str = "message"
    content: str = ""
    timestamp: float | None = None
    priority: int | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None  # tool name on results, speaker name on messages
    reasoning: str = ""  # thinking / reasoning text carried by this message
    images: int = 0  # image blocks, counted at a flat cost
    tokens: int | None = None  # cached count under the current tokenizer
    relevance: float | None = None
    raw: Any = None  # the source record; None once the unit was changed or made up
    source: Any = field(default=None, compare=False, repr=False)  # the source record(s), kept across `replace`
    group: int | None = None  # index of the source record (several units may share one)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def is_p1(self) -> bool:
        return self.priority == 1

    def replace(self, **changes: Any) -> Unit:
        """A changed copy: drops `raw` (it no longer describes the unit) and the token cache."""
        changes.setdefault("raw", None)
        changes.setdefault("tokens", None)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The `units` format record (the seed spec's ContextUnit fields plus role and pairing)."""
        d: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "type": self.type,
            "content": self.content,
            "timestamp": self.timestamp,
            "priorityTag": f"P{self.priority}" if self.priority else None,
            "relevanceScore": self.relevance,
            "tokenCount": self.tokens,
        }
        if self.tool_calls:
            d["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        if self.reasoning:
            d["reasoning"] = self.reasoning
        if self.images:
            d["images"] = self.images
        if self.meta:
            d["meta"] = self.meta
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Unit:
        """Inverse of `to_dict`; also accepts `priority` and `tokens` spelled plainly."""
        return cls(
            id=str(d["id"]),
            role=str(d.get("role") or "user"),
            type=str(d.get("type") or "message"),
            content=str(d.get("content") or ""),
            timestamp=d.get("timestamp"),
            priority=_priority_from(d.get("priorityTag", d.get("priority"))),
            tool_calls=[ToolCall.from_dict(c) for c in d.get("tool_calls") or []],
            tool_call_id=d.get("tool_call_id"),
            name=d.get("name"),
            reasoning=str(d.get("reasoning") or ""),
            images=int(d.get("images") or 0),
            tokens=d.get("tokenCount", d.get("tokens")),
            relevance=d.get("relevanceScore", d.get("relevance")),
            meta=dict(d.get("meta") or {}),
        )


@dataclass
class Transcript:
    """An ordered list of units plus the regions counted apart from history.

    The system prompt is the units with role `system`, the summary region is the units of type
    `summary`, and `tools` holds tool schemas (OpenAI or Anthropic shape) when the source has
    them. `layout` and `envelope` let a writer put the file back the way it was read.
    """

    units: list[Unit]
    id: str = "t0"
    source_format: str = "units"
    layout: str = "lines"  # array | lines | object | dataset
    tools: list[dict[str, Any]] = field(default_factory=list)
    envelope: dict[str, Any] = field(default_factory=dict)  # top-level fields besides messages
    path: str | None = None
    line: int | None = None  # line number of this conversation in a dataset file
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def system_units(self) -> list[Unit]:
        return [u for u in self.units if u.role == "system"]

    @property
    def history_units(self) -> list[Unit]:
        return [u for u in self.units if u.role != "system" and u.type != "summary"]

    def user_requests(self) -> list[Unit]:
        """User messages that are requests (not tool results carried in user records)."""
        return [u for u in self.units if u.role == "user" and u.type != "summary"]

    def replace(self, **changes: Any) -> Transcript:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source_format": self.source_format,
            "layout": self.layout,
            "tools": self.tools,
            "envelope": self.envelope,
            "metadata": self.metadata,
            "units": [u.to_dict() for u in self.units],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Transcript:
        return cls(
            units=[Unit.from_dict(u) for u in d.get("units", [])],
            id=str(d.get("id", "t0")),
            source_format=str(d.get("source_format", "units")),
            layout=str(d.get("layout", "lines")),
            tools=list(d.get("tools") or []),
            envelope=dict(d.get("envelope") or {}),
            metadata=dict(d.get("metadata") or {}),
        )
