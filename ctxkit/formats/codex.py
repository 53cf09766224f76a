"""Codex CLI rollout JSONL: `{timestamp, type, payload}` per line, and the legacy layout.

Written back as a rollout Codex can resume from: the records that are no units (session_meta,
turn_context, event_msg, encrypted reasoning, and the items before Codex's own compaction) kept
in place (`formats.kept`), untouched response items as they were, changed ones with their
payload's output or content replaced, and a ctxkit summary as Codex's own `compacted` record
(on resume Codex rebuilds the history as its initial context, the user messages so far and
that summary).

A rollout with Codex's own `compacted` records is read, by default, as Codex rebuilds it on
resume (`src.include_compacted` reads every record instead): at each compaction the history
becomes the initial context (developer messages, AGENTS.md and environment context), the user
messages so far (newest first within 20,000 approximate tokens, the oldest one kept cut in the
middle) and the summary, or the record's `replacement_history` when it has one (newer CLIs: the
kept messages and an encrypted summary, which no one can read or count); what it replaced is
counted, not read, and stays in the file.

The legacy layout (Codex CLI before mid 2025) has no envelope: a first line `{id, timestamp,
instructions, git}`, `{"record_type": "state"}` markers, then bare response items (`message`,
`function_call`, `function_call_output`, `reasoning`...). It is read the same way and written
back in its own layout.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime, timezone
from typing import Any

from ctxkit.formats.base import Format, newest_model
from ctxkit.formats.checks import MAX_PROBLEMS, app_records, validate_type
from ctxkit.formats.common import (
    ReadStats,
    Source,
    args_text,
    blocks_text,
    dumps,
    finish,
    first_context,
    is_reasoning_only,
    joins,
    raw_groups,
    timestamp_of,
)
from ctxkit.formats.kept import KEY as KEPT
from ctxkit.formats.kept import Keeper, place
from ctxkit.formats.kept import records as kept_records
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "codex"
APP_LABEL = "Codex rollout"

# Every rollout item type Codex 0.169 writes (RolloutItem): the response items the model reads,
# and the records kept in place (events, turn context, compactions, multi-agent mail, usage)
_KINDS = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted",
                    "dynamic_tools_updated", "inter_agent_communication", "inter_agent_communication_metadata",
                    "token_usage_record", "world_state", "security_risk_score", "realtime_item"})
# Response item types a legacy rollout holds bare.
_ITEM_TYPES = frozenset({"message", "function_call", "function_call_output", "custom_tool_call",
                         "custom_tool_call_output", "local_shell_call", "local_shell_call_output", "reasoning",
                         "web_search_call", "ghost_snapshot", "compaction", "image_generation_call"})
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_TEXT_BLOCKS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")

COMPACTED = "before Codex's last compaction"
# Codex keeps this many approximate tokens (4 bytes each) of user messages across a compaction.
USER_MESSAGE_MAX_TOKENS = 20_000
# Messages of the initial context Codex sends again at every turn (it never counts them as the
# user's: `is_session_prefix`).
_SESSION_PREFIXES = ("<environment_context>", "<user_instructions>", "# agents.md instructions for")


def _legacy_item(rec: Any) -> bool:
    """A bare response item of the legacy layout (no envelope)."""
    return isinstance(rec, dict) and rec.get("type") in _ITEM_TYPES and "payload" not in rec


def _legacy_head(rec: Any) -> bool:
    """The first line of a legacy rollout, `{id, timestamp, instructions, git}`, or a state marker."""
    if not isinstance(rec, dict) or "type" in rec or "payload" in rec:
        return False
    return "record_type" in rec or ("id" in rec and "timestamp" in rec and ("instructions" in rec or "git" in rec))


def detect(records: list[Any]) -> bool:
    """Records shaped `{type: session_meta|response_item|event_msg|turn_context, payload}`, or
    a legacy rollout (its header line, then state markers and bare response items)."""
    hits = 0
    for rec in records[:20]:
        if not isinstance(rec, dict):
            return False
        if rec.get("type") in _KINDS and isinstance(rec.get("payload"), dict):
            hits += 1
    if hits > 0 and hits >= min(len(records), 20) // 2:
        return True
    head = records[:20]
    return bool(head) and _legacy_head(head[0]) and all(_legacy_head(r) or _legacy_item(r) for r in head[1:])


def _enveloped(rec: dict[str, Any], first: bool) -> dict[str, Any]:
    """A legacy record as the enveloped record it stands for (the header as session_meta)."""
    if _legacy_item(rec):
        return {"timestamp": rec.get("timestamp"), "type": "response_item", "payload": rec}
    if "record_type" in rec:
        return {"type": "state", "payload": rec}
    return {"timestamp": rec.get("timestamp"), "type": "session_meta", "payload": rec} if first else {
        "type": "state", "payload": rec}


_OUTPUT_ITEMS = frozenset(
    ("reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call")
)


def _model_output(payload: dict[str, Any]) -> bool:
    """An item the model wrote (not an input: a user or developer message, a tool's output)."""
    ptype = payload.get("type")
    if ptype == "message":
        return payload.get("role") == "assistant"
    return ptype in _OUTPUT_ITEMS


def read(records: list[Any], src: Source) -> Transcript:
    """Response items as units; event_msg duplicates, turn context and snapshots kept and
    counted; token_count events become provider usage."""
    legacy = bool(records) and _legacy_head(records[0])
    r = _Rollout(src)
    stats, keeper = src.stats, r.keeper
    for i, given in enumerate(records):
        rec = _enveloped(given, i == 0) if legacy and isinstance(given, dict) else given
        if not isinstance(rec, dict) or not isinstance(rec.get("payload"), dict):
            src.bad(i, "expected a Codex rollout record {timestamp, type, payload}", given)
            continue
        kind = rec.get("type")
        payload = rec["payload"]
        ptype = payload.get("type")
        if kind == "session_meta":
            r.session = r.session or (str(payload["id"]) if payload.get("id") else None)
            stats.skip("session_meta")
            keeper.keep(i, given)
        elif kind == "turn_context":
            r.model = payload.get("model") if isinstance(payload.get("model"), str) else r.model
            stats.skip("turn_context")
            keeper.keep(i, given)
        elif kind == "event_msg":
            stats.skip(f"event_msg:{ptype}")
            keeper.keep(i, given)
            info = payload.get("info")
            if ptype == "token_count" and isinstance(info, dict):
                r.token_count(info)
        elif kind == "compacted":
            r.compacted(i, given, rec, timestamp_of(rec.get("timestamp")))
        elif kind != "response_item":
            stats.skip(str(kind) if kind != "state" else "record_type:state")
            keeper.keep(i, given)
        else:
            r.response_item(i, given, payload, timestamp_of(rec.get("timestamp")))
    return r.transcript(legacy)


class _Rollout:
    """A rollout as read so far: its units, the records kept beside them, and the provider calls
    its token counts report."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.units: list[Unit] = []
        self.keeper = Keeper()
        self.made = 0  # units made so far (ids stay unique when a compaction rebuilds `units`)
        self.names: dict[str, str] = {}
        self.usage_calls: list[dict[str, Any]] = []
        self.last_total: Any = None
        self.session: str | None = None
        self.model: str | None = None
        self.window: int | None = None
        self.base: dict[str, Any] | None = None
        # Where a token_count stands against the response it reports, read off the first one:
        # Codex 0.5x writes it before the response's items (the units at the count are what its
        # call saw); later versions write it when the response ends, after its items and the
        # outputs of its tool calls, so its call saw the units before the response's first item.
        self.response_from: int | None = None  # units before the first model item since the last count
        self.first_call: dict[str, Any] | None = None  # the log's own first call, when a compaction cut it
        self.units_seen: list[Unit] = []  # every unit read, a compaction's cut or not
        self.count_after_items: bool | None = None

    def add(self, unit: Unit, index: int) -> None:
        """A unit read from record `index`."""
        self.made += 1
        self.units.append(finish(unit))
        self.units_seen.append(unit)
        self.keeper.unit(unit.id, [index])

    def token_count(self, info: dict[str, Any]) -> None:
        """A token_count event: the context window, and a provider call when its total is new."""
        if isinstance(info.get("model_context_window"), int):
            self.window = info["model_context_window"]  # what Codex allows the model (95%)
        total = info.get("total_token_usage")
        last = info.get("last_token_usage")
        # Codex repeats the same count after each tool output; a new total is a new call.
        if isinstance(last, dict) and total != self.last_total:
            self.last_total = total
            if self.count_after_items is None:
                self.count_after_items = self.response_from is not None
            from_ = self.response_from
            seen = from_ if self.count_after_items and from_ is not None else len(self.units)
            self.response_from = None
            self.usage_calls.append(
                {
                    "after_unit": seen - 1,
                    # input_tokens already includes cached_input_tokens.
                    "input_tokens": int(last.get("input_tokens") or 0),
                    "cache_read_tokens": int(last.get("cached_input_tokens") or 0),
                    "output_tokens": int(last.get("output_tokens") or 0),
                }
            )

    def compacted(self, i: int, given: Any, rec: dict[str, Any], ts: float | None) -> None:
        """Codex's own compaction (`rec`, the record `given` in today's layout): its summary, or
        the history it replaced the context with, stands for what came before, which is left
        out unless `include_compacted`."""
        src, stats, keeper, units = self.src, self.src.stats, self.keeper, self.units
        uid, payload = f"u{self.made}", rec["payload"]
        text = payload.get("message")
        replacement = payload.get("replacement_history")
        if not src.include_compacted and (isinstance(text, str) or isinstance(replacement, list)):
            if isinstance(replacement, list):
                new = _replacement_units(replacement, rec, i, uid, src)
            else:
                new = _rebuilt(units)
            here = {u.id for u in new}
            hidden = [u for u in units if u.id not in here]
            keeper.hide(hidden)
            units[:] = new
            if hidden:
                stats.skip(COMPACTED, len(hidden))
                stats.warnings.append(
                    f"{src.path}:{src.line_of(i) or '-'}: {len(hidden):,} messages before Codex's compaction "
                    "left out (the model no longer sees them)"
                )
            if self.usage_calls and self.first_call is None:
                self.first_call = first_context(self.units_seen, self.usage_calls)
            self.usage_calls.clear()  # calls before a compaction saw another history
            if isinstance(replacement, list):
                self.base = {"index": i, "record": given}  # what the history now starts from
                self.made += len(new)
                for u in new:
                    keeper.unit(u.id, [i])
                if not new:
                    keeper.keep(i, given)
                stats.skip("compacted")
                return
        if isinstance(text, str) and text:
            self.add(Unit(id=uid, role="user", type="summary", content=text, timestamp=ts, raw=given, group=i), i)
        else:
            stats.skip("compacted")
            keeper.keep(i, given)

    def response_item(self, i: int, given: Any, payload: dict[str, Any], ts: float | None) -> None:
        """A response item: a unit, or (encrypted reasoning, an item of no message) a record kept
        with the item it precedes."""
        ptype = payload.get("type")
        if self.response_from is None and _model_output(payload):
            self.response_from = len(self.units)
        unit = _item_unit(payload, f"u{self.made}", ts, given, i, self.names, self.src)
        if unit is not None:
            self.add(unit, i)
        elif ptype == "reasoning":
            # Only encrypted content: nothing readable to count; it goes with the item it precedes.
            self.src.stats.skip("response_item:reasoning")
            self.keeper.keep(i, given, precedes=True)
        else:
            self.src.stats.skip(f"response_item:{ptype}")
            self.keeper.keep(i, given, precedes=True)

    def transcript(self, legacy: bool) -> Transcript:
        """The transcript read, with what the rollout says of itself."""
        src, units = self.src, self.units
        metadata: dict[str, Any] = {KEPT: self.keeper.metadata()}
        if self.base is not None and not src.include_compacted and any(u.meta.get("item") is not None for u in units):
            metadata["codex_base"] = self.base
        if legacy:
            metadata["codex_layout"] = "legacy"
        if self.usage_calls:
            metadata["provider_usage"] = {"source": NAME, "calls": self.usage_calls}
            if self.first_call is not None:
                metadata["provider_usage"]["first"] = self.first_call
        if self.session:
            metadata["session_id"] = self.session
        if self.model:
            metadata["model"] = self.model
        if self.window:
            metadata["context_window"] = self.window
        return Transcript(
            units=units,
            id=self.session or src.tid,
            source_format=NAME,
            layout=src.layout,
            envelope=dict(src.envelope),
            line=src.line,
            metadata=metadata,
        )


def _item_unit(
    payload: dict[str, Any], uid: str, ts: float | None, raw: Any, group: int, names: dict[str, str], src: Source
) -> Unit | None:
    """The unit of one response item; None for an item the model reads nothing of (encrypted
    reasoning, snapshots, an encrypted compaction summary)."""
    ptype = payload.get("type")
    if ptype == "agent_message":
        # 0.145+ multi-agent: another agent's message in this agent's history (`author`, the
        # agent's path, `content` blocks), sent to the model as input
        text, images = blocks_text(payload.get("content"), _TEXT_BLOCKS, src)
        return Unit(id=uid, role="user", content=text, timestamp=ts, images=images, raw=raw, group=group,
                    meta={"source_role": "agent", "author": str(payload.get("author") or "")})
    if ptype == "message":
        role = payload.get("role")
        meta: dict[str, Any] = {}
        if role not in ("user", "assistant", "system"):
            meta["source_role"] = role
            role = "system" if role == "developer" else "user"
        text, images = blocks_text(payload.get("content"), _TEXT_BLOCKS, src)
        return Unit(id=uid, role=str(role), content=text, timestamp=ts, images=images, raw=raw, group=group, meta=meta)
    if ptype in _CALLS:
        cid = str(payload.get("call_id") or payload.get("id") or f"call_{group}")
        name = str(payload.get("name") or ("local_shell" if ptype == "local_shell_call" else ""))
        args = payload.get("arguments", payload.get("input", payload.get("action")))
        names[cid] = name
        return Unit(id=uid, role="assistant", content="", timestamp=ts,
                    tool_calls=[ToolCall(cid, name, args_text(args))], raw=raw, group=group)
    if ptype in _OUTPUTS:
        cid = str(payload.get("call_id") or "")
        output = payload.get("output")
        if not isinstance(output, str):
            text, _ = blocks_text(output.get("content") if isinstance(output, dict) else output, _TEXT_BLOCKS, src)
            output = text or (dumps(output) if output is not None else "")
        if cid not in names:
            src.warn(group, f"tool output {cid} has no matching call before it")
        return Unit(id=uid, role="tool", content=output, timestamp=ts, tool_call_id=cid, name=names.get(cid),
                    raw=raw, group=group)
    if ptype == "reasoning":
        text, _ = blocks_text(payload.get("summary"), _TEXT_BLOCKS, src)
        body, _ = blocks_text(payload.get("content"), _TEXT_BLOCKS, src)
        text = "\n".join(p for p in (text, body) if p)
        if text:
            return Unit(id=uid, role="assistant", type="reasoning", content="", reasoning=text, timestamp=ts,
                        raw=raw, group=group)
    return None


def _text_of(u: Unit) -> str:
    return u.content.strip().lower()


def _session_prefix(u: Unit) -> bool:
    """A message of the initial context Codex resends at every turn (developer instructions,
    AGENTS.md, environment context), which it never takes for the user's."""
    if u.role == "system":
        return True
    return u.role == "user" and not u.tool_calls and _text_of(u).startswith(_SESSION_PREFIXES)


def _approx_tokens(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4


def _cut_middle(u: Unit, budget: int) -> Unit:
    """A user message cut to `budget` approximate tokens around a marker, as Codex cuts one."""
    data = u.content.encode("utf-8")
    keep = max(budget, 0) * 4
    head = data[: keep // 2].decode("utf-8", "ignore")
    tail = data[len(data) - keep // 2 :].decode("utf-8", "ignore") if keep // 2 else ""
    cut = _approx_tokens(u.content) - budget
    # what the model reads of it; the file keeps the message whole (its record is the unit's)
    return u.replace(content=f"{head}\u2026{cut} tokens truncated\u2026{tail}", raw=u.raw)


def _rebuilt(units: list[Unit]) -> list[Unit]:
    """The history Codex rebuilds at a compaction without a replacement: the initial context,
    then the user's messages (summaries excluded) newest first within its token allowance."""
    prefix = [u for u in units if _session_prefix(u)]
    users = [u for u in units if u.role == "user" and u.type != "summary" and not _session_prefix(u)]
    chosen: list[Unit] = []
    left = USER_MESSAGE_MAX_TOKENS
    for u in reversed(users):
        if left <= 0:
            break
        n = _approx_tokens(u.content)
        if n <= left:
            chosen.append(u)
            left -= n
        else:
            chosen.append(_cut_middle(u, left))
            break
    chosen.reverse()
    return prefix + chosen


def _replacement_units(items: list[Any], rec: dict[str, Any], index: int, uid: str, src: Source) -> list[Unit]:
    """A compaction's `replacement_history` read as the items it holds: units of the compacted
    record (written back as that record, rebuilt from them when compaction changed them), each
    knowing its item's place in the history (`meta["item"]`)."""
    names: dict[str, str] = {}
    ts = timestamp_of(rec.get("timestamp"))
    quiet = Source(path=src.path, layout=src.layout, lines=None, line=src.line, tid=src.tid,
                   skip_invalid=src.skip_invalid, stats=ReadStats(), seen_blocks=src.seen_blocks)
    got: list[Unit] = []
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        unit = _item_unit(item, f"{uid}.{k}", ts, rec, index, names, quiet)
        if unit is not None:
            unit.meta["item"] = k
            got.append(finish(unit))
    for u in got:
        u.meta["group_size"] = len(got)
    return got


# ---------------------------------------------------------------- writing

_NAMESPACE = uuidlib.UUID("0b8f6d3e-4c2a-5e71-8d90-3a6b2c1f7e45")


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text_block(role: str, text: str) -> dict[str, Any]:
    return {"type": "output_text" if role == "assistant" else "input_text", "text": text}


def _items(u: Unit) -> list[dict[str, Any]]:
    """Response items for a unit from its fields (a unit of another format, or made up)."""
    if u.role == "tool":
        return [{"type": "function_call_output", "call_id": u.tool_call_id or "", "output": u.content}]
    role = {"system": "developer", "tool": "user"}.get(u.role, u.role)
    items: list[dict[str, Any]] = []
    if u.content or not u.tool_calls:
        items.append({"type": "message", "role": role, "content": [_text_block(role, u.content)]})
    for c in u.tool_calls:
        items.append({"type": "function_call", "name": c.name, "arguments": c.arguments, "call_id": c.id})
    return items


def _changed(u: Unit, rec: dict[str, Any]) -> dict[str, Any] | None:
    """The unit's source record with what changed replaced; None when it is better left out."""
    payload = dict(rec["payload"])
    ptype = payload.get("type")
    if ptype in ("message", "agent_message"):
        role = str(payload.get("role") or "user")
        payload["content"] = [_text_block(role, u.content)]
    elif ptype in _OUTPUTS:
        payload["output"] = u.content
    elif ptype in _CALLS:
        if len(u.tool_calls) != 1:
            return None
        c = u.tool_calls[0]
        if ptype == "function_call":
            payload["arguments"] = c.arguments
        elif ptype == "custom_tool_call":
            payload["input"] = c.arguments
        else:
            return None if args_text(payload.get("action")) != c.arguments else rec
    else:
        return None  # changed reasoning no longer matches its encrypted content
    return {**rec, "payload": payload}


def _window(units: list[Unit], base: dict[str, Any] | None) -> int:
    """How many units open the transcript as the replacement history of Codex's last
    compaction: its own items and any unit compaction made between or before them."""
    if base is None:
        return 0
    end = 0
    for k, u in enumerate(units):
        if u.meta.get("item") is not None and u.group == base.get("index"):
            end = k + 1
        elif u.source is not None or u.raw is not None:
            break
    return end


def _compacted_from(window: list[Unit], rec: dict[str, Any]) -> dict[str, Any]:
    """The compacted record whose replacement history is `window`, in order: an item of the
    record as it was (rewritten when its unit changed), a unit compaction made as new items;
    the items that were no unit (the encrypted summary) stay where they were. The record
    itself when nothing changed."""
    payload = rec["payload"]
    old = payload.get("replacement_history") or []
    by_item = {u.meta["item"]: u for u in window if isinstance(u.meta.get("item"), int)}
    quiet = Source(path="", layout="lines", stats=ReadStats())
    unit_items = [k for k, item in enumerate(old)
                  if isinstance(item, dict) and _item_unit(item, "", None, None, 0, {}, quiet) is not None]
    if sorted(by_item) == unit_items and len(window) == len(by_item) and all(u.raw is not None for u in window):
        return rec
    items: list[Any] = []
    done: set[int] = set()

    def upto(k: int) -> None:  # the items that were no unit, up to item k
        for j in range(k):
            if j not in done and j not in unit_items:
                items.append(old[j])
                done.add(j)

    for u in window:
        k = u.meta.get("item")
        if isinstance(k, int) and k < len(old):
            upto(k)
            done.add(k)
            if u.raw is not None:
                items.append(old[k])
            else:
                changed = _changed(u, {"payload": old[k]})
                if changed is not None:
                    items.append(changed["payload"])
        elif not is_reasoning_only(u):
            items.extend(_items(u))
    upto(len(old))
    return {**rec, "payload": {**payload, "replacement_history": items}}


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Rollout records for a transcript (see the module doc)."""
    same = t.source_format == NAME and isinstance(t.metadata.get(KEPT), dict)
    legacy = same and t.metadata.get("codex_layout") == "legacy"
    produced: list[tuple[Unit | None, dict[str, Any]]] = []
    clock = next((u.timestamp for u in t.units if u.timestamp is not None), None)
    if not same:
        produced.append((None, {"timestamp": _iso(clock or 0.0), "type": "session_meta", "payload": {
            "id": str(uuidlib.uuid5(_NAMESPACE, t.id)), "timestamp": _iso(clock or 0.0), "cwd": "",
            "originator": "ctxkit", "cli_version": "0.0.0", "instructions": None}}))

    def stamp(u: Unit) -> str:
        last = produced[-1][1] if produced else {}
        return _iso(u.timestamp) or str(last.get("timestamp") or _iso(0.0))

    def record(item: dict[str, Any], u: Unit) -> dict[str, Any]:
        return item if legacy else {"timestamp": stamp(u), "type": "response_item", "payload": item}

    def source(u: Unit) -> dict[str, Any] | None:
        rec = u.source if same and isinstance(u.source, dict) else None
        if rec is not None and legacy:
            rec = _enveloped(rec, False)
        return rec if rec is not None and isinstance(rec.get("payload"), dict) else None

    def bare(rec: dict[str, Any]) -> dict[str, Any]:
        return rec["payload"] if legacy and rec.get("type") == "response_item" else rec

    at: dict[int, int] = {}
    base = t.metadata.get("codex_base") if same else None
    opening = _window(t.units, base if isinstance(base, dict) else None)
    units = t.units
    if opening and isinstance(base, dict):
        # Codex resumes from its last compaction's replacement history: what opens the
        # transcript (its items, and what compaction made among them) goes back into it
        at[len(produced)] = int(base["index"])
        produced.append((None, _compacted_from(units[:opening], base["record"])))
        units = units[opening:]
    resumable = True  # only the initial context and user messages so far: Codex keeps them all
    for raw, run in raw_groups(units):
        first = run[0]
        rec = source(first)
        if raw is not None and rec is not None and not any(joins(u) for u in run):
            produced.append((first, raw))  # the record of the run (a compaction's: its units)
        else:
            for u in run:
                rec = source(u)
                last = produced[-1][1] if produced else None
                if u.raw is not None and rec is not None and not joins(u):
                    produced.append((u, u.raw))
                elif u.type == "summary" and rec is None and resumable and not legacy:
                    produced.append((u, {"timestamp": stamp(u), "type": "compacted", "payload": {"message": u.content}}))
                elif u.type == "summary" and rec is not None and rec.get("type") == "compacted":
                    produced.append((u, {**rec, "payload": {**rec["payload"], "message": u.content}}))
                elif is_reasoning_only(u) and rec is None:
                    pass
                elif joins(u) and u.role != "tool" and last is not None and _joinable(last, u, legacy):
                    payload = dict(last if legacy else last["payload"])
                    payload["content"] = [*payload.get("content", []), _text_block(str(payload.get("role")), u.content)]
                    produced[-1] = (produced[-1][0], payload if legacy else {**last, "payload": payload})
                elif rec is not None and rec.get("type") == "response_item":
                    changed = _changed(u, rec)
                    if changed is not None:
                        produced.append((u, bare(changed)))
                else:
                    produced.extend((u, record(item, u)) for item in _items(u))
        for u in run:
            # On resume Codex keeps, from before a compacted record, only the user's messages
            # and its initial context: a summary after anything else is written as a message.
            resumable = resumable and u.role in ("user", "system") and not u.tool_calls
    return (place(t, produced, at) if same else [rec for _, rec in produced]), {}


def _joinable(last: dict[str, Any], u: Unit, legacy: bool) -> bool:
    """Whether the last record is a message item of the unit's role, to add a block to."""
    if not legacy and last.get("type") != "response_item":
        return False
    payload = last if legacy else last.get("payload") or {}
    role = {"system": "developer"}.get(u.role, u.role)
    return payload.get("type") == "message" and payload.get("role") in (role, u.role) and isinstance(
        payload.get("content"), list
    )


# ---------------------------------------------------------------- validating


_CODEX_INTERNAL_ITEMS = frozenset({"ghost_snapshot"})
_CODEX_KINDS = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
# Response item types a legacy rollout holds bare.
_ITEM_TYPES = frozenset({"message", "function_call", "function_call_output", "custom_tool_call",
                         "custom_tool_call_output", "local_shell_call", "local_shell_call_output", "reasoning",
                         "web_search_call", "ghost_snapshot", "compaction", "image_generation_call"})


def _codex_item(payload: dict[str, Any]) -> dict[str, Any]:
    """A rollout's response item as the SDK types it: Codex's own serialization leaves out the
    id of a reasoning item (and writes its `content` as null), the id and status of an
    assistant message, and the id (and, before 0.120, the action) of a web search call, which
    the SDK's output-item types require."""
    if payload.get("type") == "web_search_call":
        return {"id": "ws_rollout", "action": {"type": "search", "query": ""}, **payload}
    if payload.get("type") == "reasoning":
        item = {k: v for k, v in payload.items() if not (k == "content" and v is None)}
        item.setdefault("id", "rs_rollout")
        return item
    if payload.get("type") == "message" and payload.get("role") == "assistant":
        content = payload.get("content")
        if isinstance(content, list):
            content = [
                {"annotations": [], **b} if isinstance(b, dict) and b.get("type") == "output_text" else b
                for b in content
            ]
        return {"id": "msg_rollout", "status": "completed", **payload, "content": content}
    return payload


def validate(data: Any) -> list[str]:
    """Each response item as `openai.types.responses.ResponseInputItemParam`, every output
    answering a call before it, every call answered, compacted records with their summary."""
    records = app_records(data)
    if records and _legacy_head(records[0]):
        records = [_enveloped(r, i == 0) if isinstance(r, dict) else r for i, r in enumerate(records)]
    out: list[str] = []
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, rec in enumerate(records):
        at = f"record {i + 1}"
        if isinstance(rec, dict) and rec.get("type") == "state":
            continue  # a legacy state marker
        if not isinstance(rec, dict) or rec.get("type") not in _CODEX_KINDS or not isinstance(rec.get("payload"), dict):
            out.append(f"{at}: not a rollout record {{timestamp, type, payload}}")
            continue
        payload = rec["payload"]
        if rec["type"] == "compacted":
            # Codex resumes from the summary message, or from the replacement history newer
            # CLIs write instead (their message is "", the summary an encrypted item in it).
            history = payload.get("replacement_history")
            if not (isinstance(payload.get("message"), str) and payload["message"]) and not isinstance(history, list):
                out.append(f"{at}: compacted record without its summary message")
            continue
        if rec["type"] != "response_item" or payload.get("type") in _CODEX_INTERNAL_ITEMS:
            continue
        out.extend(validate_type("responses.item", _codex_item(payload), at))
        ptype = payload.get("type")
        cid = payload.get("call_id")
        if ptype in ("function_call", "custom_tool_call", "local_shell_call") and isinstance(cid, str):
            calls[cid] = i + 1
        elif ptype in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            if cid not in calls:
                out.append(f"{at}: output {cid} answers no call before it")
            answered.add(str(cid))
        elif ptype == "message" and not payload.get("content"):
            out.append(f"{at}: message without content")
    for cid, n in calls.items():
        if cid not in answered:
            out.append(f"record {n}: call {cid} has no output")
    return out[:MAX_PROBLEMS]


def named_model(t: Transcript) -> str | None:
    """The model the rollout names: its reader's, else the newest `turn_context`'s."""
    return newest_model(t, kept_records(t), _payload_model)


def _payload_model(rec: dict[str, Any]) -> Any:
    payload = rec.get("payload")
    return payload.get("model") if isinstance(payload, dict) else None


FORMAT = Format.of_module(__name__, shape="log", agent="Codex", strict=True, holds_tools=False,
                          compaction=True)
