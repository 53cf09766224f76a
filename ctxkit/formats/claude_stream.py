"""Claude Code's headless output: `claude -p --output-format stream-json --verbose`.

One JSON message per line on stdout, the Agent SDK's `SDKMessage`s (checked on Claude Code
2.1.328): `system` (`init` first: the model, the tool names, the session; `compact_boundary`,
`status`, hook and retry notices), `assistant` and `user` (`message` an Anthropic message,
`parent_tool_use_id` set on a sub-agent's turns, `session_id`, `uuid`), `result` last (the run's
summed usage, cost and `modelUsage`), and with `--include-partial-messages` `stream_event`
deltas. The prompt given with `-p` is not printed (`--replay-user-messages` prints the prompts
read from stdin), nor are the system prompt and the tool schemas.

Read: the assistant and user messages as units, as in a Claude Code log (one response printed
as one message per content block, merged by message id; each `tool_result` block a tool unit);
a sub-agent's turns only with `include_sidechains`. Each response's `usage` is the provider's
count of its call; the model and its window come from `init` and `result`. Claude Code's own
compaction prints a `compact_boundary` and then the summary as a synthetic user message: the
messages before it are left out (kept, and counted) unless `include_compacted`. Every other
message is kept in place (`formats.kept`).

Written back: untouched messages byte for byte, a changed one with its content replaced (the
blocks of a response in its first message), units compaction made as new `user` or
`assistant` messages of the session.
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Any

from ctxkit.formats.anthropic import (
    add_blocks,
    assistant_blocks,
    assistant_parts,
    message_usage,
    tool_result_block,
    tool_units,
)
from ctxkit.formats.base import Format, newest_model
from ctxkit.formats.checks import MAX_PROBLEMS, anthropic_rules, app_records, validate_type
from ctxkit.formats.common import (
    Source,
    blocks_text,
    finish,
    first_context,
    joins,
    link_group_sizes,
    message_model,
    provider_usage,
    raw_groups,
    session_facts,
    source_records,
)
from ctxkit.formats.kept import KEY as KEPT
from ctxkit.formats.kept import Keeper, place
from ctxkit.model import Transcript, Unit

NAME = "claude-code-stream"
COMPACTED = "before Claude Code's last compaction"
_MESSAGES = ("user", "assistant")
# the SDK's message types (sdk.d.ts `SDKMessage`) a stream may print
_KINDS = frozenset({"system", "assistant", "user", "result", "stream_event", "tool_progress", "auth_status",
                    "tool_use_summary", "rate_limit_event", "prompt_suggestion", "keep_alive"})
_NAMESPACE = uuidlib.UUID("0d6b3f5e-94a1-5c27-8e3d-7b2f1a9c4e60")


def _message(rec: Any) -> bool:
    return isinstance(rec, dict) and rec.get("type") in _MESSAGES and isinstance(rec.get("message"), dict)


def detect(records: list[Any]) -> bool:
    """SDK messages: a `type` of the SDK's, `session_id` (a Claude Code log's records carry
    `sessionId` and `parentUuid`), and a system, user or assistant message among them."""
    head = records[:20]
    if not head or not all(isinstance(r, dict) and isinstance(r.get("type"), str) for r in head):
        return False
    if any("sessionId" in r or "parentUuid" in r for r in head):
        return False
    ours = [r for r in head if r["type"] in _KINDS and "session_id" in r]
    if not any(r["type"] in ("system", *_MESSAGES) for r in ours):
        return False
    if any(r["type"] in _MESSAGES and not _message(r) for r in ours):
        return False
    return len(ours) >= (len(head) + 1) // 2


@dataclass
class Stream:
    """What reading a stream has gathered so far: its units, the records kept beside them, tool
    names by call id, unit index by message id and the provider calls by message id."""

    units: list[Unit] = field(default_factory=list)
    keeper: Keeper = field(default_factory=Keeper)
    names: dict[str, str] = field(default_factory=dict)
    by_message: dict[str, int] = field(default_factory=dict)
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)

    def record_call(self, mid: Any, msg: dict[str, Any], index: int, meta: dict[str, Any]) -> str | None:
        """Note the provider call of the response `mid` whose record `msg` made unit `index`;
        the model name when this record starts a new call, else None."""
        usage = msg.get("usage")
        if not isinstance(mid, str) or not isinstance(usage, dict) or meta:
            return None
        got = message_usage(usage)
        call = self.calls.get(mid)
        if call is not None:
            # Usage repeats on every record of a response; the last one is final.
            for key, value in got.items():
                call[key] = max(call[key], value)
            return None
        # The model had seen everything before the first record of its response.
        self.calls[mid] = {"after_unit": index - 1, **got}
        model = msg.get("model")
        if isinstance(model, str) and model != "<synthetic>":
            self.calls[mid]["model"] = model
            return model
        return None


def _assistant(st: Stream, i: int, rec: dict[str, Any], msg: dict[str, Any], uid: str, meta: dict[str, Any],
               name: str | None, src: Source) -> str | None:
    """An assistant message: a unit, or another block of a response already read (merged by
    message id); its usage recorded as the response's call. The model its first record names."""
    units = st.units
    mid = msg.get("id")
    texts, thinking, tool_calls, images = assistant_parts(msg.get("content"), st.names, src)
    index = st.by_message.get(mid) if isinstance(mid, str) else None
    if index is not None and units[index].meta.get("sidechain") == meta.get("sidechain"):
        unit = units[index]  # another block of the same response, printed on its own
        add_blocks(unit, rec, texts, thinking, tool_calls, images)
        st.keeper.also(unit.id, i, name)
    else:
        unit = Unit(id=uid, role="assistant", content="\n".join(texts), reasoning="\n".join(thinking),
                    tool_calls=tool_calls, images=images, raw=rec, source=[rec], group=i, meta=meta)
        index = len(units)
        if isinstance(mid, str):
            st.by_message[mid] = index
        units.append(unit)
        st.keeper.unit(uid, [i], name)
    return st.record_call(mid, msg, index, meta)


def _user(st: Stream, i: int, rec: dict[str, Any], content: Any, uid: str, meta: dict[str, Any],
          name: str | None, summary: bool, src: Source) -> None:
    """A user message: its tool results one unit each, then its text (a request, or the
    summary of a compaction)."""
    units = st.units
    blocks = content if isinstance(content, list) else []
    k = 0
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            unit = tool_units(block, uid=uid if k == 0 else f"{uid}#{k}", group=i, raw=rec, names=st.names,
                              ts=None, src=src)
            unit.meta.update(meta)
            if unit.tool_call_id not in st.names:
                src.warn(i, f"tool result {unit.tool_call_id} has no matching tool_use before it")
            units.append(unit)
            st.keeper.unit(unit.id, [i], name if k == 0 else None)
            k += 1
    rest = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "tool_result")]
    if rest or not isinstance(content, list) or not content:
        text, images = blocks_text(rest if isinstance(content, list) else content, src=src)
        unit = Unit(id=uid if k == 0 else f"{uid}#{k}", role="user", type="summary" if summary else "message",
                    content=text, images=images, raw=rec, group=i, meta=dict(meta))
        units.append(finish(unit, typed=summary))
        st.keeper.unit(unit.id, [i], name if k == 0 else None)


def read(records: list[Any], src: Source) -> Transcript:
    """The messages the stream printed, as units (see the module doc)."""
    st = Stream()
    units, keeper = st.units, st.keeper
    session: str | None = None
    model: str | None = None
    window: int | None = None
    compacted_at: int | None = None
    summary_next = False
    stats = src.stats
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            src.bad(i, "expected a Claude Code stream-json message {type, ...}", rec)
            continue
        kind = rec["type"]
        name = rec.get("uuid") if isinstance(rec.get("uuid"), str) else None
        session = session or (rec["session_id"] if isinstance(rec.get("session_id"), str) else None)
        if kind == "system" and rec.get("subtype") == "init" and isinstance(rec.get("model"), str):
            model = rec["model"]
        elif kind == "system" and rec.get("subtype") == "compact_boundary":
            summary_next = True
        elif kind == "result" and isinstance(rec.get("modelUsage"), dict):
            for key, used in rec["modelUsage"].items():
                if isinstance(used, dict) and isinstance(used.get("contextWindow"), int) and key == model:
                    window = used["contextWindow"]
        if not _message(rec):
            stats.skip(f"{kind}:{rec['subtype']}" if isinstance(rec.get("subtype"), str) else kind)
            keeper.keep(i, rec, name=name)
            continue
        sub = bool(rec.get("parent_tool_use_id"))
        if sub and not src.include_sidechains:
            stats.skipped_sidechain += 1
            keeper.keep(i, rec, name=name)
            continue
        meta: dict[str, Any] = {"sidechain": True} if sub else {}
        msg = rec["message"]
        content = msg.get("content")
        uid = name or f"m{i}"
        if kind == "assistant":
            if (named := _assistant(st, i, rec, msg, uid, meta, name, src)) is not None:
                model = named
            continue
        summary = summary_next and not sub and bool(rec.get("isSynthetic"))
        if not sub:
            if summary:
                compacted_at = len(units)
            summary_next = False
        _user(st, i, rec, content, uid, meta, name, summary, src)
    for u in units:
        if u.type != "summary":
            finish(u)
    link_group_sizes(units)
    usage_calls = [c for c in st.calls.values() if c["input_tokens"] > 0]
    first_call = first_context(units, usage_calls)
    if compacted_at and not src.include_compacted:
        hidden = units[:compacted_at]
        keeper.hide(hidden)
        units = units[compacted_at:]
        usage_calls = [{**c, "after_unit": c["after_unit"] - compacted_at} for c in usage_calls
                       if c["after_unit"] >= compacted_at]
        src.left_out(COMPACTED, len(hidden))
    metadata: dict[str, Any] = {}
    if usage_calls:
        metadata["provider_usage"] = provider_usage(NAME, usage_calls, first_call)
    metadata.update(session_facts(model, window, session))
    metadata[KEPT] = keeper.metadata()
    return src.transcript(units, NAME, session, metadata)


# ---------------------------------------------------------------- writing


def _new(u: Unit, t: Transcript, kind: str, message: dict[str, Any], session: str) -> dict[str, Any]:
    """A message of the session for a unit compaction made (or one of another format)."""
    return {"type": kind, "message": message, "parent_tool_use_id": None, "session_id": session,
            "uuid": str(uuidlib.uuid5(_NAMESPACE, f"{t.id}/{u.id}"))}


def _user_record(run: list[Unit], template: dict[str, Any]) -> dict[str, Any]:
    """A user message printed once, some of its units changed or gone: its blocks rebuilt."""
    content = template["message"].get("content")
    if not isinstance(content, list):
        return {**template, "message": {**template["message"], "content": run[-1].content}}
    results = {b.get("tool_use_id"): b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"}
    rest = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
    blocks: list[Any] = []
    for u in run:
        if u.role == "tool":
            blocks.append(tool_result_block(u, results.get(u.tool_call_id)))
        elif u.raw is not None:
            blocks.extend(rest)
        else:
            blocks.append({"type": "text", "text": u.content})
    rec = {k: v for k, v in template.items() if not (k == "tool_use_result" and any(u.raw is None for u in run))}
    return {**rec, "message": {**template["message"], "content": blocks}}


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Stream-json messages for a transcript (see the module doc)."""
    same = t.source_format == NAME
    session = str(t.metadata.get("session_id") or uuidlib.uuid5(_NAMESPACE, t.id))
    produced: list[tuple[Unit | None, Any]] = []
    for raw, run in raw_groups(t.units):
        sources = source_records(run[0]) if same else []
        if raw is not None and sources and not any(joins(u) for u in run):
            produced.extend((run[0], rec) for rec in sources)
            continue
        if sources and _message(sources[0]) and run[0].role != "assistant" and not any(joins(u) for u in run):
            produced.append((run[0], _user_record(run, sources[0])))
            continue
        for u in run:
            if u.role == "system" or (u.role == "assistant" and not (u.content or u.tool_calls)):
                continue  # the stream prints no system prompt; reasoning alone is no message
            last = produced[-1][1] if produced else None
            if joins(u) and u.role != "tool" and isinstance(last, dict) and last.get("type") == (
                    "assistant" if u.role == "assistant" else "user"):
                content = last["message"].get("content")
                blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
                produced[-1] = (produced[-1][0], {**last, "message": {**last["message"], "content": [
                    *blocks, {"type": "text", "text": u.content}]}})
                continue
            mine = source_records(u) if same else []
            template = mine[0] if mine and _message(mine[0]) else None
            if u.role == "assistant":
                blocks = assistant_blocks(u)
                if template is not None:
                    produced.append((u, {**template, "message": {**template["message"], "content": blocks}}))
                else:
                    mid = "msg_ctxkit_" + uuidlib.uuid5(_NAMESPACE, f"{t.id}/{u.id}").hex[:24]
                    produced.append((u, _new(u, t, "assistant", {
                        "id": mid, "type": "message", "role": "assistant", "model": "<synthetic>", "content": blocks,
                        "stop_reason": None, "stop_sequence": None}, session)))
            elif u.role == "tool":
                block = tool_result_block(u)
                if template is not None:
                    rec = {k: v for k, v in template.items() if k != "tool_use_result"}
                    produced.append((u, {**rec, "message": {**template["message"], "content": [block]}}))
                elif isinstance(last, dict) and last.get("type") == "user" and isinstance(
                        last["message"].get("content"), list) and produced[-1][0] is not None \
                        and produced[-1][0].role == "tool" and not source_records(produced[-1][0]):
                    msg = last["message"]
                    produced[-1] = (produced[-1][0], {**last, "message": {**msg, "content": [*msg["content"], block]}})
                else:
                    produced.append((u, _new(u, t, "user", {"role": "user", "content": [block]}, session)))
            elif template is not None:
                produced.append((u, _user_record([u], template)))
            else:
                produced.append((u, _new(u, t, "user", {"role": "user", "content": u.content}, session)))
    return (place(t, produced) if same else [rec for _, rec in produced]), {}


# ---------------------------------------------------------------- validating


def validate(data: Any) -> list[str]:
    """What a reader of the stream expects: every line an SDK message `{type, ...}`, each user or
    assistant message an Anthropic `MessageParam` of its type, and the main thread's messages
    under the Messages API rules (from the last compaction summary on)."""
    records = app_records(data)
    out: list[str] = []
    messages: list[tuple[str, str, Any]] = []
    mids: dict[str, int] = {}
    for i, rec in enumerate(records):
        at = f"message {i + 1}"
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            out.append(f"{at}: not an SDK message {{type, ...}}")
            continue
        if rec["type"] not in _MESSAGES:
            continue
        msg = rec.get("message")
        if not isinstance(msg, dict):
            out.append(f"{at}: no message object")
            continue
        out.extend(validate_type("anthropic.messages", [{k: v for k, v in msg.items() if k in ("role", "content")}], at))
        if msg.get("role") != rec["type"]:
            out.append(f"{at}: message role {msg.get('role')!r} in a {rec['type']} message")
        if rec.get("parent_tool_use_id"):
            continue
        if rec["type"] == "user" and rec.get("isSynthetic") and messages and any(
                r.get("type") == "system" and r.get("subtype") == "compact_boundary"
                for r in records[max(0, i - 3):i] if isinstance(r, dict)):
            out.extend(_rules(messages))
            messages, mids = [], {}
        content = msg.get("content")
        blocks = list(content) if isinstance(content, list) else [{"type": "text", "text": content}]
        mid = msg.get("id")
        if rec["type"] == "assistant" and isinstance(mid, str) and mid in mids:
            w, r, c = messages[mids[mid]]
            messages[mids[mid]] = (w, r, [*c, *blocks])
            continue
        if isinstance(mid, str):
            mids[mid] = len(messages)
        messages.append((at, rec["type"], blocks))
    out.extend(_rules(messages))
    return out[:MAX_PROBLEMS]


def _rules(messages: list[tuple[str, str, Any]]) -> list[str]:
    """The Messages API rules on what the stream printed: the prompt it never prints comes
    first (a stream starting with the answer is not short of a user message)."""
    if messages and messages[0][1] == "assistant":
        messages = [("", "user", [{"type": "text", "text": "(the -p prompt)"}]), *messages]
    return anthropic_rules(messages, "")


def named_model(t: Transcript) -> str | None:
    """The model the stream names: its reader's, else the newest assistant message's."""
    return newest_model(t, (u.raw for u in t.units), message_model)


FORMAT = Format.of_module(__name__, label="Claude Code stream-json", shape="log",
                          agent="Claude Code", strict=True, holds_tools=False,
                          omits="the system prompt, the tool schemas or the -p prompt",
                          sidechains=True, compaction=True)
