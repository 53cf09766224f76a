"""Codex's headless output: `codex exec --json`.

One thread event per line on stdout (codex-rs/exec/src/exec_events.rs, checked on Codex
0.169.0): `thread.started` (the thread id), `turn.started`, `item.started` / `item.updated` /
`item.completed` (a `ThreadItem {id, type, ...}`), `turn.completed` (the turn's summed usage),
`turn.failed` and `error`. An item is an `agent_message` or `plan` (text), a `reasoning` summary,
a `command_execution` (`command`, `aggregated_output`, `exit_code`, `status`), a `file_change`
(the paths changed and how), an `mcp_tool_call` (`server`, `tool`, `arguments`, `result` or
`error`), a `collab_tool_call`, a `web_search`, a `todo_list` or an `error`. The prompt, the
system prompt, the tool schemas and the model are not printed, nor any call's own usage: a
turn's usage sums every call of the turn.

Read: each completed item as what the model saw of it: a message or plan as an assistant unit,
reasoning as an assistant unit's reasoning, a command, file change, tool call, web search or
to-do list as a tool call (named for the item type, or the MCP tool; the item id is the call
id) and its result (the command's output, the tool's content or error, the change's status).
Every other event (thread and turn events, items started or updated, error items) is kept in
place (`formats.kept`).

Written back: untouched events byte for byte, a changed item with its text, command or output
replaced, and units compaction made as completed items: an assistant unit as an
`agent_message`, a tool call and its result as one `command_execution` (or `mcp_tool_call`),
and a user unit (a summary) as a `user_message` item, which the stream itself never prints.
"""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, app_records
from ctxkit.formats.common import (
    Source,
    args_object,
    args_text,
    blocks_text,
    dumps,
    finish,
    joins,
    link_group_sizes,
    raw_groups,
    source_records,
)
from ctxkit.formats.kept import KEY as KEPT
from ctxkit.formats.kept import Keeper, place
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "codex-exec"
_EVENTS = frozenset({"thread.started", "turn.started", "turn.completed", "turn.failed", "item.started",
                     "item.updated", "item.completed", "item.plan.delta", "request_user_input", "error"})
_ITEMS = ("item.started", "item.updated", "item.completed")
# the calls an item stands for: its type -> the fields that are the call's arguments
_CALLS = {
    "command_execution": ("command",),
    "file_change": ("changes",),
    "web_search": ("query", "action"),
    "todo_list": ("items",),
    "collab_tool_call": ("tool", "prompt", "receiver_thread_ids"),
}
_NAMESPACE = uuidlib.UUID("3c8e1f07-5b2d-5a94-b6e1-9d0f2a7c4b18")


def _event(rec: Any) -> bool:
    return isinstance(rec, dict) and rec.get("type") in _EVENTS


def detect(records: list[Any]) -> bool:
    """Thread events: every record a `type` of `codex exec --json`, a thread or item event
    among them."""
    head = records[:20]
    return bool(head) and all(_event(r) for r in head) and any(
        r["type"] == "thread.started" or (r["type"] in _ITEMS and isinstance(r.get("item"), dict)) for r in head)


def _result(item: dict[str, Any], src: Source | None) -> tuple[str, bool]:
    """What the model read back from an item's call, and whether it failed."""
    kind = item.get("type")
    status = item.get("status")
    if kind == "command_execution":
        code = item.get("exit_code")
        return str(item.get("aggregated_output") or ""), status in ("failed", "declined") or (
            isinstance(code, int) and code != 0)
    if kind == "mcp_tool_call":
        error = item.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"]), True
        result: dict[str, Any] = item["result"] if isinstance(item.get("result"), dict) else {}
        text, _ = blocks_text(result.get("content"), src=src)
        if not text and result.get("structured_content") is not None:
            text = dumps(result["structured_content"])
        return text, status == "failed"
    if kind == "collab_tool_call":
        states = item.get("agents_states")
        return (dumps(states) if states else ""), status == "failed"
    return (str(status) if isinstance(status, str) else ""), status == "failed"


def _call(item: dict[str, Any], cid: str) -> ToolCall:
    kind = str(item.get("type"))
    if kind == "mcp_tool_call":
        return ToolCall(cid, str(item.get("tool") or ""), args_text(item.get("arguments")))
    args = {k: item[k] for k in _CALLS[kind] if k in item}
    return ToolCall(cid, kind, dumps(args))


def read(records: list[Any], src: Source) -> Transcript:
    """The completed items as units (see the module doc)."""
    units: list[Unit] = []
    keeper = Keeper()
    thread: str | None = None
    threads = 0  # the runs (thread.started events) so far
    stats = src.stats
    for i, rec in enumerate(records):
        if not _event(rec):
            src.bad(i, "expected a `codex exec --json` event {type, ...}", rec)
            continue
        kind = rec["type"]
        if kind == "thread.started":
            threads += 1
            if isinstance(rec.get("thread_id"), str):
                thread = thread or rec["thread_id"]
        item = rec.get("item")
        itype = item.get("type") if isinstance(item, dict) else None
        if kind != "item.completed" or not isinstance(item, dict) or not isinstance(item.get("id"), str) or not (
                itype in ("agent_message", "plan", "reasoning", "user_message", "mcp_tool_call") or itype in _CALLS):
            stats.skip(f"{kind}:{itype}" if itype else kind)
            # what opens a turn or an item goes with the unit that follows, the rest with the one
            # before (the thread's start, before any, stays)
            keeper.keep(i, rec, precedes=kind in ("turn.started", "item.started", "item.updated"))
            continue
        # item ids start again at item_0 in each run: a file of several runs (appended, or
        # `exec resume` after `exec`) names the later runs' units by their run
        uid = item["id"] if threads <= 1 else f"{item['id']}@{threads}"
        made: list[Unit]
        if itype in ("agent_message", "plan"):
            made = [Unit(id=uid, role="assistant", content=str(item.get("text") or ""), raw=rec, group=i)]
        elif itype == "reasoning":
            made = [Unit(id=uid, role="assistant", reasoning=str(item.get("text") or ""), raw=rec, group=i)]
        elif itype == "user_message":
            made = [Unit(id=uid, role="user", content=str(item.get("text") or ""), raw=rec, group=i)]
        else:
            call = _call(item, uid)
            text, failed = _result(item, src)
            made = [Unit(id=uid, role="assistant", tool_calls=[call], raw=rec, group=i),
                    Unit(id=f"{uid}#result", role="tool", content=text, tool_call_id=call.id, name=call.name,
                         raw=rec, group=i, meta={"is_error": True} if failed else {})]
        for u in made:
            units.append(finish(u))
            keeper.unit(u.id, [i], uid if u is made[0] else None)
    link_group_sizes(units)
    metadata: dict[str, Any] = {KEPT: keeper.metadata()}
    if thread:
        metadata["session_id"] = thread
    return src.transcript(units, NAME, thread, metadata)


# ---------------------------------------------------------------- writing


def _changed(run: list[Unit], rec: dict[str, Any]) -> dict[str, Any]:
    """A completed item whose units changed: its text, command, arguments or output replaced."""
    item = dict(rec["item"])
    kind = item.get("type")
    for u in run:
        if u.raw is not None:
            continue
        if u.role == "tool":
            if kind == "command_execution":
                item["aggregated_output"] = u.content
            elif kind == "mcp_tool_call":
                if isinstance(item.get("error"), dict) and item["error"].get("message"):
                    item["error"] = {**item["error"], "message": u.content}
                else:
                    result: dict[str, Any] = item["result"] if isinstance(item.get("result"), dict) else {}
                    item["result"] = {**result, "content": [{"type": "text", "text": u.content}]}
        elif kind in ("agent_message", "plan", "user_message"):
            item["text"] = u.content
        elif kind == "reasoning":
            item["text"] = u.reasoning
        elif u.tool_calls:
            args = args_object(u.tool_calls[0].arguments)
            if kind == "mcp_tool_call":
                item["arguments"] = args
            else:
                item.update({k: v for k, v in args.items() if k in _CALLS.get(str(kind), ())})
    return {**rec, "item": item}


class _Writer:
    """Completed items for units of no source event, a tool call waiting for its result."""

    def __init__(self, t: Transcript) -> None:
        self.t = t
        self.out: list[tuple[Unit | None, Any]] = []
        self.waiting: list[tuple[Unit, ToolCall]] = []
        self.used: set[str] = set()  # the ids of the items written

    def _id(self, u: Unit, n: int = 0) -> str:
        return "item_ctxkit_" + uuidlib.uuid5(_NAMESPACE, f"{self.t.id}/{u.id}/{n}").hex[:16]

    def item(self, u: Unit, item: dict[str, Any]) -> None:
        """A completed item, its id made unique in the thread (another format's call ids may
        repeat)."""
        base, n = item["id"], 0
        while item["id"] in self.used:
            n += 1
            item["id"] = f"{base}#{n}"
        self.used.add(item["id"])
        self.out.append((u, {"type": "item.completed", "item": item}))

    def source(self, u: Unit, rec: dict[str, Any]) -> None:
        """An event of the source (its item's id taken)."""
        item = rec.get("item")
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            self.used.add(item["id"])
        self.out.append((u, rec))

    def flush(self) -> None:
        """Calls no result answered (before a user message, or at the end): items with no output."""
        for u, call in self.waiting:
            self.item(u, _call_item(call, "", False))
        self.waiting = []

    def unit(self, u: Unit) -> None:
        if u.role == "tool":
            found = next((w for w in self.waiting if w[1].id == u.tool_call_id), None)
            if found is None:
                call = ToolCall(u.tool_call_id or self._id(u), u.name or "tool", "")
            else:
                self.waiting.remove(found)
                call = found[1]
            self.item(u, _call_item(call, u.content, bool(u.meta.get("is_error"))))
            return
        if u.role != "assistant":
            self.flush()  # a response's calls are answered before the next user message
        last = self.out[-1][1]["item"] if self.out and "item" in self.out[-1][1] else None
        if joins(u) and last is not None and last.get("type") == ("agent_message" if u.role == "assistant" else
                                                                   "user_message"):
            last["text"] = f"{last.get('text') or ''}\n\n{u.content}" if last.get("text") else u.content
            return
        if u.role == "system":
            return  # the stream prints no system prompt
        if u.role != "assistant":
            self.item(u, {"id": self._id(u), "type": "user_message", "text": u.content})
            return
        if u.reasoning:
            self.item(u, {"id": self._id(u, 1), "type": "reasoning", "text": u.reasoning})
        if u.content:
            self.item(u, {"id": self._id(u), "type": "agent_message", "text": u.content})
        self.waiting.extend((u, c) for c in u.tool_calls)


def _call_item(call: ToolCall, output: str, failed: bool) -> dict[str, Any]:
    """One completed item for a call and its result: a command, or a tool call."""
    args = args_object(call.arguments)
    command = args.get("command", args.get("cmd"))
    if call.name in ("command_execution", "exec_command", "shell", "local_shell") and command is not None:
        text = command if isinstance(command, str) else " ".join(map(str, command)) if isinstance(
            command, list) else dumps(command)
        return {"id": call.id, "type": "command_execution", "command": text, "aggregated_output": output,
                "exit_code": 1 if failed else 0, "status": "failed" if failed else "completed"}
    item: dict[str, Any] = {"id": call.id, "type": "mcp_tool_call", "server": "", "tool": call.name,
                            "arguments": args_object(call.arguments)}
    if failed:
        item.update({"result": None, "error": {"message": output}, "status": "failed"})
    else:
        item.update({"result": {"content": [{"type": "text", "text": output}], "structured_content": None},
                     "error": None, "status": "completed"})
    return item


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Thread events for a transcript (see the module doc)."""
    same = t.source_format == NAME
    w = _Writer(t)
    if not same:
        w.out.append((None, {"type": "thread.started", "thread_id": str(uuidlib.uuid5(_NAMESPACE, t.id))}))
    for raw, run in raw_groups(t.units):
        sources = source_records(run[0]) if same else []
        if sources and _event(sources[0]) and isinstance(sources[0].get("item"), dict) and not any(
                joins(u) for u in run):
            w.flush()
            w.source(run[0], sources[0] if raw is not None else _changed(run, sources[0]))
            continue
        for u in run:
            w.unit(u)
    w.flush()
    return (place(t, w.out) if same else [rec for _, rec in w.out]), {}


# ---------------------------------------------------------------- validating


def validate(data: Any) -> list[str]:
    """What a reader of the stream expects: every line a thread event of `codex exec --json`,
    each item event an item `{id, type}`, no item completed twice in a thread, each completed
    command with its command and output."""
    out: list[str] = []
    completed: set[str] = set()
    for i, rec in enumerate(app_records(data)):
        at = f"event {i + 1}"
        if not _event(rec):
            out.append(f"{at}: not a `codex exec --json` event")
            continue
        if rec["type"] == "thread.started":
            completed = set()  # another session of the file
        if rec["type"] not in _ITEMS:
            continue
        item = rec.get("item")
        if not (isinstance(item, dict) and isinstance(item.get("id"), str) and isinstance(item.get("type"), str)):
            out.append(f"{at}: {rec['type']} without an item {{id, type}}")
            continue
        if rec["type"] == "item.completed":
            if item["id"] in completed:
                out.append(f"{at}: item {item['id']!r} completed twice")
            completed.add(item["id"])
            if item["type"] == "command_execution" and not (
                    isinstance(item.get("command"), str) and isinstance(item.get("aggregated_output"), str)):
                out.append(f"{at}: command_execution without its command and aggregated_output")
    return out[:MAX_PROBLEMS]


FORMAT = Format.of_module(__name__, label="Codex exec --json", shape="log", agent="Codex",
                          strict=True, holds_tools=False,
                          omits="the system prompt, the tool schemas or the prompt")
