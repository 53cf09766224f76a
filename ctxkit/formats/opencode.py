"""OpenCode sessions as `opencode export` prints them: `{info, messages: [{info, parts}]}`.

A message's `info` says its role (and for an assistant its model, mode, cost and tokens); its
`parts` are typed: `text`, `reasoning`, `tool` (`{callID, tool, state: {status, input, output
| error, ...}}`: the call and its result in one part), `file`, `step-start` / `step-finish`
(one model call each: its tokens and cost), `patch`, `compaction`, `subtask`, `snapshot`,
`agent`, `retry`.

Read as OpenCode 1.18.33 sends it (`toModelMessages`): a user message is a user unit (its text
parts but the `ignored` ones, attached files as what they are, a `subtask` part as the line it
sends for it); an assistant message is, per model call (`step-start`), an assistant unit (text,
reasoning, the calls of its tool parts) followed by a tool unit per tool part (its output, its
error, "[Old tool result content cleared]" for an output OpenCode pruned, "[Tool execution was
interrupted]" for a call that never finished); a `step-finish` is the provider's count of that
call; the other parts are kept with their message. OpenCode's own compaction is a user message
holding a `compaction` part and the assistant summary after it (`summary: true`): the model
sees only that pair and what follows, so the messages before it are kept in the file and left
out of the units (counted) unless `include_compacted`.

Written back as an export OpenCode imports: untouched messages as they were (the other parts,
snapshots, patches and step counts, with them), a changed message with its text, a tool's output
or its calls replaced, messages compaction made as messages of their own.
"""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

from ctxkit.formats.base import Format, newest_model
from ctxkit.formats.checks import MAX_PROBLEMS, parsed
from ctxkit.formats.common import (
    Source,
    args_object,
    args_text,
    dumps,
    finish,
    joins,
    raw_groups,
    timestamp_of,
)
from ctxkit.formats.kept import KEY as KEPT
from ctxkit.formats.kept import Keeper, place
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "opencode"
COMPACTED = "before OpenCode's last compaction"
COMPACTION_PROMPT = "What did we do so far?"
_NAMESPACE = uuidlib.UUID("8c4d2e6f-1a3b-5c7d-9e0f-4a6b8c2d1e3f")


def detect_object(obj: dict[str, Any]) -> bool:
    """An export: `info` (a session, its `id`) beside `messages` of `{info, parts}`."""
    msgs = obj.get("messages")
    info = obj.get("info")
    if not (isinstance(info, dict) and "id" in info and isinstance(msgs, list)):
        return False
    return all(isinstance(m, dict) and isinstance(m.get("info"), dict) and isinstance(m.get("parts"), list)
               for m in msgs[:20])


def _ms(value: Any) -> float | None:
    return timestamp_of(value) if isinstance(value, (int, float)) else None


def _created(info: dict[str, Any]) -> float | None:
    time = info.get("time")
    return _ms(time.get("created")) if isinstance(time, dict) else None


# What OpenCode (1.18.33's toModelMessages) sends in place of a tool part's own output: the
# output it pruned (`state.time.compacted`), and a call that never finished
PRUNED = "[Old tool result content cleared]"
INTERRUPTED = "[Tool execution was interrupted]"
# what it sends for a user message's compaction and subtask parts
SUBTASK_PROMPT = "The following tool was executed by the user"


def _tool_output(state: Any) -> tuple[str, bool]:
    """A tool part's result as the model reads it, and whether it failed."""
    if not isinstance(state, dict):
        return "", False
    status = state.get("status")
    if status in ("pending", "running"):
        return INTERRUPTED, True
    if status == "error":
        meta = state.get("metadata")
        if isinstance(meta, dict) and meta.get("interrupted") is True and isinstance(meta.get("output"), str):
            return meta["output"], False  # what it printed before it was stopped
        return str(state.get("error") or ""), True
    if isinstance(state.get("time"), dict) and state["time"].get("compacted"):
        return PRUNED, False
    output = state.get("output")
    return (output if isinstance(output, str) else dumps(output) if output is not None else ""), False


def _steps(parts: list[Any]) -> list[list[tuple[int, dict[str, Any]]]]:
    """A message's parts cut at each `step-start` (one model call each), with their indexes."""
    steps: list[list[tuple[int, dict[str, Any]]]] = [[]]
    for k, part in enumerate(parts):
        if not isinstance(part, dict):
            continue
        if part.get("type") == "step-start" and steps[-1]:
            steps.append([])
        steps[-1].append((k, part))
    return [s for s in steps if s]


def _user_parts(parts: list[Any]) -> tuple[list[str], int]:
    """The texts OpenCode sends for a user message's parts, and how many images it holds."""
    texts: list[str] = []
    images = 0
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            if part["text"] and not part.get("ignored"):  # an ignored part is never sent
                texts.append(part["text"])
        elif part.get("type") == "file":
            mime = str(part.get("mime") or "")
            if mime.startswith("image/"):
                images += 1
            elif mime not in ("text/plain", "application/x-directory"):  # those come as text parts
                texts.append(f"[file {part.get('filename') or part.get('url') or ''}]")
        elif part.get("type") == "subtask":
            texts.append(SUBTASK_PROMPT)
    return texts, images


def read(obj: dict[str, Any], src: Source) -> Transcript:
    """The session as units (see the module doc)."""
    messages: list[Any] = obj["messages"] if isinstance(obj.get("messages"), list) else []
    units: list[Unit] = []
    keeper = Keeper()
    calls: list[dict[str, Any]] = []
    compacted_at: int | None = None
    session = obj["info"].get("id") if isinstance(obj.get("info"), dict) else None
    for i, msg in enumerate(messages):
        info = msg.get("info") if isinstance(msg, dict) else None
        parts = msg.get("parts") if isinstance(msg, dict) else None
        if not isinstance(info, dict) or not isinstance(parts, list) or info.get("role") not in ("user", "assistant"):
            src.bad(i, "expected an OpenCode message {info: {id, role: user|assistant, ...}, parts: [...]}", msg)
            continue
        mid = str(info.get("id") or f"m{i}")
        ts = _created(info)
        run: list[Unit] = []
        if info["role"] == "user":
            texts, images = _user_parts(parts)
            if any(isinstance(p, dict) and p.get("type") == "compaction" for p in parts):
                compacted_at = len(units)
                texts.append(COMPACTION_PROMPT)  # what OpenCode sends the model for that part
            run.append(Unit(id=mid, role="user", content="\n".join(texts), timestamp=ts, images=images, raw=msg, group=i))
        else:
            summary = bool(info.get("summary")) and info.get("mode") == "compaction"
            for step in _steps(parts):
                texts, thinking, tool_calls, results = [], [], [], []
                for _, part in step:
                    kind = part.get("type")
                    if kind == "text" and isinstance(part.get("text"), str):
                        texts.append(part["text"])
                    elif kind == "reasoning" and isinstance(part.get("text"), str):
                        thinking.append(part["text"])
                    elif kind == "tool":
                        state: dict[str, Any] = part["state"] if isinstance(part.get("state"), dict) else {}
                        cid = str(part.get("callID") or part.get("id"))
                        tool_calls.append(ToolCall(cid, str(part.get("tool") or ""), args_text(state.get("input"))))
                        if state.get("status") in ("completed", "error", "pending", "running"):
                            output, failed = _tool_output(state)
                            results.append(Unit(id=str(part.get("id") or f"{mid}#{cid}"), role="tool", content=output,
                                                timestamp=ts, tool_call_id=cid, name=str(part.get("tool") or "") or None,
                                                raw=msg, group=i, meta={"is_error": True} if failed else {}))
                    elif kind == "step-finish" and isinstance(part.get("tokens"), dict):
                        tok = part["tokens"]
                        cache = tok.get("cache") if isinstance(tok.get("cache"), dict) else {}
                        read_n, write_n = int(cache.get("read") or 0), int(cache.get("write") or 0)
                        prompt = int(tok.get("input") or 0) + read_n + write_n
                        if prompt > 0 and not summary:
                            calls.append({"after_unit": len(units) + len(run) - 1, "input_tokens": prompt,
                                          "cache_read_tokens": read_n, "cache_write_tokens": write_n,
                                          "output_tokens": int(tok.get("output") or 0)})
                if not (texts or thinking or tool_calls):
                    continue
                first = str(step[0][1].get("id") or f"{mid}#{len(run)}")
                uid = mid if not run else first
                run.append(Unit(id=uid, role="assistant", type="summary" if summary else "message",
                                content="\n".join(texts), reasoning="\n".join(thinking), tool_calls=tool_calls,
                                timestamp=ts, raw=msg, group=i))
                run.extend(results)
        if not run:
            src.stats.skip("opencode:empty message")
            keeper.keep(i, msg)
            continue
        for u in run:
            units.append(u if u.type == "summary" else finish(u))
            keeper.unit(u.id, [i])
            if len(run) > 1:
                u.meta["group_size"] = len(run)
    if compacted_at and not src.include_compacted:
        hidden = units[:compacted_at]
        keeper.hide(hidden)
        src.left_out(COMPACTED, len(hidden))
        calls = [{**c, "after_unit": c["after_unit"] - compacted_at} for c in calls if c["after_unit"] >= compacted_at]
        units = units[compacted_at:]
    # the export's other keys, for writing it back (not an envelope other formats would copy)
    rest = {k: v for k, v in obj.items() if k != "messages"}
    metadata: dict[str, Any] = {KEPT: keeper.metadata(), "opencode": {"keys": list(obj), "fields": rest}}
    if calls:
        metadata["provider_usage"] = {"source": NAME, "calls": calls}
    if session:
        metadata["session_id"] = str(session)
    models = [m["info"]["modelID"] for m in obj.get("messages") or []
              if isinstance(m, dict) and isinstance(m.get("info"), dict) and isinstance(m["info"].get("modelID"), str)
              and m["info"]["modelID"]]
    if models:
        metadata["model"] = models[-1]  # the model of the last call, as Claude Code's and Codex's readers say
    return Transcript(units=units, id=str(session or src.tid), source_format=NAME, layout="object",
                      line=src.line, metadata=metadata)


# ---------------------------------------------------------------- writing


def _id(prefix: str, t: Transcript, key: str) -> str:
    return f"{prefix}_ctxkit{uuidlib.uuid5(_NAMESPACE, f'{t.id}/{key}').hex[:20]}"


def _rebuilt(run: list[Unit], msg: dict[str, Any]) -> dict[str, Any]:
    """A source message with the parts of the units left: a changed unit's text or output
    replaced, the calls and results compaction removed taken out (a step with nothing left
    goes whole)."""
    parts = [p for p in msg.get("parts") or [] if isinstance(p, dict)]
    if msg["info"].get("role") == "user":
        unit = run[0]
        if unit.raw is not None:
            return msg
        out, done = [], False
        for p in parts:
            if p.get("type") == "text" and not p.get("ignored"):
                if not done:
                    out.append({**p, "text": unit.content})
                    done = True
                continue
            out.append(p)
        if not done:
            out.insert(0, {"id": f"{msg['info'].get('id')}_text", "type": "text", "text": unit.content})
        return {**msg, "parts": out}
    here = {u.id: u for u in run}
    tools = {u.tool_call_id: u for u in run if u.role == "tool"}
    out = []
    mid = str(msg["info"].get("id"))
    named = False  # the first step with content is the unit named after the message
    for step in _steps(parts):
        first = str(step[0][1].get("id") or "")
        if not any(p.get("type") in ("text", "reasoning", "tool") for _, p in step):
            out.extend(p for _, p in step)
            continue
        found = here.get(first if named else mid)
        named = True
        if found is None:
            continue  # the step went with compaction
        unit = found
        calls = {c.id: c for c in unit.tool_calls}
        wrote_text = False
        for _, p in step:
            kind = p.get("type")
            if kind == "text" and unit.raw is None:
                if not wrote_text and unit.content:
                    out.append({**p, "text": unit.content})
                wrote_text = True
            elif kind == "tool":
                cid = str(p.get("callID") or p.get("id"))
                if cid not in calls:
                    continue
                result = tools.get(cid)
                state = dict(p.get("state") or {})
                if args_text(state.get("input")) != calls[cid].arguments:
                    state["input"] = args_object(calls[cid].arguments)
                if result is not None and result.raw is None:
                    key = "error" if state.get("status") == "error" else "output"
                    state[key] = result.content
                    state.pop("metadata", None)  # the app's preview of the old output
                out.append({**p, "state": state})
            else:
                out.append(p)
        if unit.raw is None and not wrote_text and unit.content:
            out.append({"id": f"{first}_text", "sessionID": msg["info"].get("sessionID"), "messageID": mid,
                        "type": "text", "text": unit.content})
    return {**msg, "parts": out}


def _made(u: Unit, t: Transcript, template: dict[str, Any] | None, parent: str | None) -> dict[str, Any]:
    """A new message for a unit compaction made (or one of another format)."""
    fields = (t.metadata.get("opencode") or {}).get("fields") or {}
    session = str(fields["info"].get("id") if isinstance(fields.get("info"), dict) else _id("ses", t, "session"))
    mid = _id("msg", t, u.id)
    created = int((u.timestamp or 0) * 1000)
    info: dict[str, Any]
    if u.role == "assistant":
        base = dict(template or {})
        info = {**{k: v for k, v in base.items() if k in ("modelID", "providerID", "mode", "agent", "path")},
                "id": mid, "sessionID": session, "role": "assistant", "time": {"created": created, "completed": created},
                "parentID": parent or "", "cost": 0,
                "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}}
        info.setdefault("modelID", "")
        info.setdefault("providerID", "")
        info.setdefault("mode", "build")
        info.setdefault("path", {"cwd": "", "root": ""})
        parts: list[dict[str, Any]] = []
        if u.content:
            parts.append({"id": _id("prt", t, u.id), "sessionID": session, "messageID": mid, "type": "text",
                          "text": u.content})
        for c in u.tool_calls:
            parts.append({"id": _id("prt", t, f"{u.id}/{c.id}"), "sessionID": session, "messageID": mid,
                          "type": "tool", "callID": c.id, "tool": c.name,
                          "state": {"status": "completed", "input": args_object(c.arguments), "output": "",
                                    "title": "", "metadata": {}, "time": {"start": created, "end": created}}})
        return {"info": info, "parts": parts}
    info = {"id": mid, "sessionID": session, "role": "user", "time": {"created": created}}
    return {"info": info, "parts": [{"id": _id("prt", t, u.id), "sessionID": session, "messageID": mid,
                                      "type": "text", "text": u.content}]}


def write(t: Transcript) -> dict[str, Any]:
    """The export object for a transcript (see the module doc)."""
    same = t.source_format == NAME
    produced: list[tuple[Unit | None, Any]] = []
    template: dict[str, Any] | None = None  # the last assistant's info, new ones copy its model
    last_user: str | None = None
    for raw, run in raw_groups(t.units):
        msg = run[0].source if same and isinstance(run[0].source, dict) and isinstance(run[0].source.get("info"), dict) else None
        if msg is not None and raw is not None and not any(joins(u) for u in run):
            produced.append((run[0], raw))
        elif msg is not None:
            produced.append((run[0], _rebuilt(run, msg)))
        else:
            for u in run:
                if u.role == "system" or (u.role == "assistant" and not u.content and not u.tool_calls):
                    continue
                if u.role == "tool" and produced:
                    # a result of a call made in the message before: it is that call's output
                    prev = produced[-1][1]
                    for p in prev.get("parts") or []:
                        if p.get("type") == "tool" and p.get("callID") == u.tool_call_id:
                            p["state"] = {**p["state"], "output": u.content}
                    continue
                last = produced[-1][1] if produced else None
                if joins(u) and isinstance(last, dict) and last["info"].get("role") == u.role:
                    part = {"id": _id("prt", t, u.id), "sessionID": last["info"].get("sessionID"),
                            "messageID": last["info"].get("id"), "type": "text", "text": u.content}
                    produced[-1] = (produced[-1][0], {**last, "parts": [*last["parts"], part]})
                    continue
                new = _made(u, t, template, last_user)
                produced.append((u, new))
                if u.role == "user":
                    last_user = new["info"]["id"]
        last = produced[-1][1] if produced else None
        if isinstance(last, dict) and isinstance(last.get("info"), dict):
            if last["info"].get("role") == "assistant":
                template = last["info"]
            else:
                last_user = str(last["info"].get("id"))
    messages = place(t, produced) if same else [m for _, m in produced]
    own = t.metadata.get("opencode") if same else None
    envelope = dict(own["fields"]) if isinstance(own, dict) and isinstance(own.get("fields"), dict) else {
        "info": {"id": _id("ses", t, "session"), "title": t.id, "time": {"created": 0, "updated": 0}}}
    keys = (t.metadata.get("opencode") or {}).get("keys") if same else None
    obj = {**envelope, "messages": messages}
    if isinstance(keys, list):
        obj = {k: obj[k] for k in dict.fromkeys([*keys, *obj]) if k in obj}
    return obj


# ---------------------------------------------------------------- validating


def validate(data: Any) -> list[str]:
    """What `opencode import` needs: a session `info` with an id, messages with an id, a role
    and typed parts; an assistant's `parentID` an earlier user message; each tool part with a
    call id, a tool name and a finished state."""
    found = parsed(data)
    items = found if isinstance(found, list) else [found]
    out: list[str] = []
    for n, obj in enumerate(items):
        where = f"session {n + 1}: " if len(items) > 1 else ""
        if not isinstance(obj, dict) or not isinstance(obj.get("info"), dict) or "id" not in obj["info"]:
            out.append(f"{where}expected {{info: {{id, ...}}, messages: [...]}}")
            continue
        seen: set[Any] = set()
        users: set[Any] = set()
        for i, msg in enumerate(obj.get("messages") or []):
            at = f"{where}message {i + 1}"
            info = msg.get("info") if isinstance(msg, dict) else None
            if not isinstance(info, dict) or info.get("role") not in ("user", "assistant") or not isinstance(msg.get("parts"), list):
                out.append(f"{at}: expected {{info: {{id, role}}, parts: [...]}}")
                continue
            if not info.get("id") or info["id"] in seen:
                out.append(f"{at}: missing or repeated id")
            seen.add(info.get("id"))
            if info["role"] == "user":
                users.add(info.get("id"))
            elif info.get("parentID") not in users:
                out.append(f"{at}: parentID {info.get('parentID')!r} is no earlier user message")
            for k, part in enumerate(msg["parts"]):
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    out.append(f"{at}: part {k + 1} has no type")
                elif part["type"] == "tool" and not (part.get("callID") and part.get("tool") and isinstance(part.get("state"), dict)):
                    out.append(f"{at}: tool part {k + 1} needs a callID, a tool and a state")
    return out[:MAX_PROBLEMS]


def named_model(t: Transcript) -> str | None:
    """The model the export names: its reader's, else the newest message's `info.modelID`."""
    return newest_model(t, (u.raw for u in t.units), _model_id)


def _model_id(rec: dict[str, Any]) -> Any:
    info = rec.get("info")
    return info.get("modelID") if isinstance(info, dict) else None


FORMAT = Format.of_module(__name__, label="OpenCode session", shape="object", agent="OpenCode",
                          holds_tools=False, omits="the system prompt or tool schemas",
                          compaction=True)
