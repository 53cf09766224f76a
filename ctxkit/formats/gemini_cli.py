"""Gemini CLI chat recordings (`~/.gemini/tmp/<project hash>/chats/session-*.json`).

One JSON object `{sessionId, projectHash, startTime, lastUpdated, messages, kind, ...}`. A
message has `id`, `timestamp`, `type` (`user`, `gemini`, `info`, `error`, `warning`) and
`content` (text, or Gemini API parts). A `gemini` message adds `model`, `tokens`, `thoughts` and
`toolCalls`, each call holding its own result (`result`: `functionResponse` parts).

Read: a `user` message is a user unit (its `content`, what the model read; `displayContent` is
what was typed), a `gemini` message an assistant unit (its thoughts the reasoning, its calls the
tool calls) followed by one tool unit per call result; `tokens` is the provider's count of that
call. `info`/`error`/`warning` messages are the app's notices: kept in place (`formats.kept`),
not read. No system prompt is stored.

Written back as a recording Gemini CLI resumes from: untouched messages as they were (the
object's other keys too), a changed message with its text, its calls or a call's result
replaced, units compaction made as `user` or `gemini` messages of their own.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime, timezone
from typing import Any

from ctxkit.formats.base import Format, newest_model
from ctxkit.formats.checks import MAX_PROBLEMS, parsed
from ctxkit.formats.common import (
    Source,
    args_object,
    args_text,
    blocks_text,
    dumps,
    finish,
    finish_run,
    joins,
    raw_groups,
    timestamp_of,
)
from ctxkit.formats.kept import KEY as KEPT
from ctxkit.formats.kept import Keeper, place
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "gemini-cli"
MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})  # a recording's and a JSONL log's
_NOTICES = frozenset({"info", "error", "warning"})
_NAMESPACE = uuidlib.UUID("3d1f2b7a-6c0e-5a49-8f12-9b4e7d2c6a51")


def detect_object(obj: dict[str, Any]) -> bool:
    """A recording: `sessionId` and `projectHash` beside a `messages` list of typed messages."""
    msgs = obj.get("messages")
    if not (isinstance(obj.get("sessionId"), str) and "projectHash" in obj and isinstance(msgs, list)):
        return False
    return all(isinstance(m, dict) and m.get("type") in MESSAGE_TYPES and "id" in m for m in msgs[:20])


def parts_text(content: Any, src: Source | None = None) -> tuple[str, int]:
    """Text and image count of Gemini API parts (or plain text): text parts, inline data as an
    image, other parts as what the model reads of them."""
    if isinstance(content, str):
        return content, 0
    if isinstance(content, dict):
        content = [content]
    texts: list[str] = []
    images = 0
    for part in content if isinstance(content, list) else []:
        if isinstance(part, str):
            texts.append(part)
        elif not isinstance(part, dict):
            continue
        elif isinstance(part.get("text"), str) and not part.get("thought"):
            texts.append(part["text"])
        elif "inlineData" in part or "fileData" in part:
            images += 1
        elif "functionResponse" in part:
            texts.append(response_text(part["functionResponse"]))
        elif "functionCall" in part or part.get("thought"):
            continue
        else:
            text, n = blocks_text([part], src=src)
            texts.append(text)
            images += n
    return "\n".join(t for t in texts if t), images


def with_results(units: list[Unit]) -> list[list[Unit]]:
    """Units as the messages they are written in: a `gemini` message with the results of its
    calls that follow it, and every other unit alone."""
    groups: list[list[Unit]] = []
    for u in units:
        if u.role == "tool" and groups and groups[-1][0].role == "assistant":
            groups[-1].append(u)
        else:
            groups.append([u])
    return groups


def function_responses(parts: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """A user content's `functionResponse`s (its tool results, in order) and its other parts."""
    responses = [p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), dict)]
    return responses, [p for p in parts if not isinstance(p.get("functionResponse"), dict)]


def response_text(response: Any) -> str:
    """What the model reads of a `functionResponse`: its output (or error), else its JSON."""
    if not isinstance(response, dict):
        return ""
    body = response.get("response")
    if isinstance(body, dict):
        for key in ("output", "error", "content", "result"):
            if isinstance(body.get(key), str):
                return str(body[key])
        return dumps(body)
    return "" if body is None else str(body)


def _calls_results(call: dict[str, Any]) -> list[dict[str, Any]]:
    result = call.get("result")
    return [p["functionResponse"] for p in result if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)] if isinstance(result, list) else []


def _result_text(result: Any) -> str:
    """What the model read of a call's `result`: each functionResponse's output, and the parts
    sent beside it. Gemini CLI before 0.1x sent a tool's many parts as they were, after a
    functionResponse of "Tool execution succeeded." (read_many_files: each file a text part);
    a reader of the functionResponse alone undercounted such a session by a tenth."""
    if isinstance(result, str):
        return result
    texts = []
    for part in result if isinstance(result, list) else []:
        if not isinstance(part, dict):
            continue
        fr = part.get("functionResponse")
        texts.append(response_text(fr) if isinstance(fr, dict) else parts_text([part])[0])
    return "\n".join(t for t in texts if t)


def _usage(tokens: Any, after: int) -> dict[str, Any] | None:
    """The provider's count of one call: the prompt (cached included), cache reads, output."""
    if not isinstance(tokens, dict) or not isinstance(tokens.get("input"), int) or tokens["input"] <= 0:
        return None
    out = tokens.get("output") if isinstance(tokens.get("output"), int) else 0
    return {"after_unit": after, "input_tokens": tokens["input"],
            "cache_read_tokens": int(tokens.get("cached") or 0), "output_tokens": out}


def read(obj: dict[str, Any], src: Source) -> Transcript:
    """The recording as units (see the module doc)."""
    messages: list[Any] = obj["messages"] if isinstance(obj.get("messages"), list) else []
    units: list[Unit] = []
    keeper = Keeper()
    calls: list[dict[str, Any]] = []
    model: str | None = None
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("type") not in MESSAGE_TYPES:
            src.bad(i, "expected a Gemini CLI message {id, timestamp, type: user|gemini|info|error|warning, content}", msg)
            continue
        kind = msg["type"]
        ts = timestamp_of(msg.get("timestamp"))
        uid = str(msg.get("id") or f"m{i}")
        if kind in _NOTICES:
            src.stats.skip(f"gemini-cli:{kind}")
            keeper.keep(i, msg)
            continue
        if kind == "user":
            text, images = parts_text(msg.get("content"), src)
            units.append(finish(Unit(id=uid, role="user", content=text, timestamp=ts, images=images, raw=msg, group=i)))
            keeper.unit(uid, [i])
            continue
        model = msg.get("model") if isinstance(msg.get("model"), str) else model
        text, images = parts_text(msg.get("content"), src)
        thoughts = [
            ": ".join(x for x in (str(t.get("subject") or ""), str(t.get("description") or "")) if x)
            for t in msg.get("thoughts") or [] if isinstance(t, dict)
        ]
        tool_calls = [
            ToolCall(str(c.get("id") or f"{uid}#{k}"), str(c.get("name") or ""), args_text(c.get("args")))
            for k, c in enumerate(msg.get("toolCalls") or []) if isinstance(c, dict)
        ]
        usage = _usage(msg.get("tokens"), len(units) - 1)
        if usage is not None:
            calls.append(usage)
        run = [Unit(id=uid, role="assistant", content=text, timestamp=ts, tool_calls=tool_calls,
                    reasoning="\n".join(thoughts), images=images, raw=msg, group=i)]
        for k, call in enumerate(msg.get("toolCalls") or []):
            if not isinstance(call, dict):
                continue
            cid = str(call.get("id") or f"{uid}#{k}")
            results = _calls_results(call)
            meta: dict[str, Any] = {"status": call["status"]} if isinstance(call.get("status"), str) else {}
            if call.get("status") == "error" or any(isinstance(r.get("response"), dict) and "error" in r["response"] for r in results):
                meta["is_error"] = True
            run.append(Unit(id=f"{uid}#{k + 1}", role="tool", content=_result_text(call.get("result")),
                            timestamp=timestamp_of(call.get("timestamp")) or ts, tool_call_id=cid,
                            name=str(call.get("name") or "") or None, raw=msg, group=i, meta=meta))
        for u in finish_run(run):
            units.append(u)
            keeper.unit(u.id, [i])
    # the recording's other keys, for writing it back (not an envelope other formats would copy)
    rest = {k: v for k, v in obj.items() if k != "messages"}
    metadata: dict[str, Any] = {KEPT: keeper.metadata(), "gemini_cli": {"keys": list(obj), "fields": rest}}
    if calls:
        metadata["provider_usage"] = {"source": NAME, "calls": calls}
    if isinstance(obj.get("sessionId"), str):
        metadata["session_id"] = obj["sessionId"]
    if model:
        metadata["model"] = model
    return Transcript(units=units, id=str(obj.get("sessionId") or src.tid), source_format=NAME, layout="object",
                      line=src.line, metadata=metadata)


# ---------------------------------------------------------------- writing


def _iso(ts: float | None) -> str:
    value = datetime.fromtimestamp(ts or 0.0, timezone.utc)
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _call(c: ToolCall, results: dict[str, Unit], template: dict[str, Any] | None) -> dict[str, Any]:
    """A tool call record with its result, from the source's when there is one."""
    result = results.get(c.id)
    call: dict[str, Any] = dict(template) if template is not None else {
        "id": c.id, "name": c.name, "args": args_object(c.arguments), "status": "success",
        "timestamp": _iso(result.timestamp if result is not None else None)}
    if template is None or (result is not None and result.raw is None):
        output = result.content if result is not None else ""
        key = "error" if result is not None and result.meta.get("is_error") else "output"
        call["result"] = [{"functionResponse": {"id": c.id, "name": c.name, "response": {key: output}}}]
        if template is not None:
            call.pop("resultDisplay", None)  # the app's rendering of the old output
    if template is not None and c.arguments != args_text(template.get("args")):
        call["args"] = args_object(c.arguments)
    return call


def _message(run: list[Unit], t: Transcript, same: bool, answers: dict[str, Unit] | None = None) -> dict[str, Any] | None:
    """One message for a run of units (an assistant unit and its results, or one unit)."""
    head = run[0]
    template = head.source if same and isinstance(head.source, dict) and head.source.get("type") in MESSAGE_TYPES else None
    ts = _iso(head.timestamp)
    if head.role in ("tool", "system"):
        return None  # a result rides in its call's message; no recording holds a system prompt
    if head.role == "user":
        msg = dict(template) if template is not None else {"id": str(uuidlib.uuid5(_NAMESPACE, f"{t.id}/{head.id}")),
                                                            "timestamp": ts, "type": "user"}
        content = template.get("content") if template is not None else None
        msg["content"] = head.content if isinstance(content, str) else [{"text": head.content}]
        return msg
    msg = dict(template) if template is not None else {"id": str(uuidlib.uuid5(_NAMESPACE, f"{t.id}/{head.id}")),
                                                        "timestamp": ts, "type": "gemini"}
    msg["content"] = head.content
    results = {**(answers or {}), **{u.tool_call_id or "": u for u in run[1:] if u.role == "tool"}}
    sources = {str(c.get("id")): c for c in (template.get("toolCalls") or []) if isinstance(c, dict)} if template else {}
    if head.tool_calls or sources:
        msg["toolCalls"] = [_call(c, results, sources.get(c.id)) for c in head.tool_calls]
    if template is None and head.reasoning:
        msg["thoughts"] = [{"subject": "", "description": head.reasoning, "timestamp": ts}]
    return msg


def _joined(msg: dict[str, Any], text: str) -> dict[str, Any]:
    """A message with more text at its end (a unit that joins the message before)."""
    content = msg.get("content")
    if isinstance(content, list):
        return {**msg, "content": [*content, {"text": text}]}
    return {**msg, "content": f"{content}\n\n{text}" if content else text}


def write_object(t: Transcript) -> dict[str, Any]:
    """The recording object for a transcript (see the module doc)."""
    same = t.source_format == NAME
    produced: list[tuple[Unit | None, Any]] = []
    # a result rides in its call's record: another format's results, wherever they are
    answers = {} if same else {u.tool_call_id or "": u for u in t.units if u.role == "tool"}
    called: set[str] = set()  # calls written so far
    for raw, run in raw_groups(t.units):
        if same and raw is not None and not any(joins(u) for u in run):
            produced.append((run[0], raw))
            called.update(c.id for c in run[0].tool_calls)
            continue
        if not same:  # results of calls whose message is written are in it
            run = [u for u in run if not (u.role == "tool" and (u.tool_call_id or "") in called)]
        elif run[0].role == "tool" and produced and isinstance(produced[-1][1], dict) and produced[-1][1].get("type") == "gemini":
            continue
        for g in with_results(run):
            last = produced[-1][1] if produced else None
            if joins(g[0]) and len(g) == 1 and isinstance(last, dict) and last.get("type") == (
                    "gemini" if g[0].role == "assistant" else "user") and g[0].role != "tool":
                produced[-1] = (produced[-1][0], _joined(last, g[0].content))
                continue
            msg = _message(g, t, same, answers)
            if msg is not None:
                produced.append((g[0], msg))
                called.update(c.id for c in g[0].tool_calls)
    messages = place(t, produced) if same else [m for _, m in produced]
    own = t.metadata.get("gemini_cli") if same else None
    envelope = dict(own["fields"]) if isinstance(own, dict) and isinstance(own.get("fields"), dict) else {
        "sessionId": str(uuidlib.uuid5(_NAMESPACE, t.id)), "projectHash": "",
        "startTime": _iso(next((u.timestamp for u in t.units if u.timestamp is not None), None)),
        "lastUpdated": _iso(next((u.timestamp for u in reversed(t.units) if u.timestamp is not None), None))}
    keys = (t.metadata.get("gemini_cli") or {}).get("keys") if same else None
    obj = {**envelope, "messages": messages}
    if isinstance(keys, list):
        obj = {k: obj[k] for k in dict.fromkeys([*keys, *obj]) if k in obj}
    return obj


def write(t: Transcript) -> dict[str, Any]:
    """The recording object (an object format's writer)."""
    return write_object(t)


# ---------------------------------------------------------------- validating


def validate(data: Any) -> list[str]:
    """What Gemini CLI needs to resume a recording: its keys, unique message ids, known types,
    each call with an id, a name, object args and its own `functionResponse`; and the Gemini API
    history it rebuilds (each call answered before the next model turn)."""
    found = parsed(data)
    items = found if isinstance(found, list) else [found]
    out: list[str] = []
    for n, obj in enumerate(items):
        where = f"session {n + 1}: " if len(items) > 1 else ""
        if not isinstance(obj, dict):
            out.append(f"{where}not an object")
            continue
        for key in ("sessionId", "projectHash", "startTime", "lastUpdated", "messages"):
            if key not in obj:
                out.append(f"{where}missing `{key}`")
        seen: set[Any] = set()
        for i, msg in enumerate(obj.get("messages") or []):
            at = f"{where}message {i + 1}"
            if not isinstance(msg, dict) or msg.get("type") not in MESSAGE_TYPES or "content" not in msg:
                out.append(f"{at}: expected {{id, timestamp, type, content}} of a known type")
                continue
            if not isinstance(msg.get("id"), str) or msg["id"] in seen:
                out.append(f"{at}: missing or repeated id")
            seen.add(msg.get("id"))
            for k, call in enumerate(msg.get("toolCalls") or []):
                if not (isinstance(call, dict) and isinstance(call.get("id"), str) and isinstance(call.get("name"), str)
                        and isinstance(call.get("args"), dict)):
                    out.append(f"{at}: tool call {k + 1} needs an id, a name and object args")
                    continue
                if not any(r.get("id") in (None, call["id"]) for r in _calls_results(call)):
                    out.append(f"{at}: tool call {call['id']} has no functionResponse")
    return out[:MAX_PROBLEMS]


def named_model(t: Transcript) -> str | None:
    """The model the session names: its reader's, else the newest message's `model`."""
    return newest_model(t, (u.raw for u in t.units), lambda rec: rec.get("model"))


FORMAT = Format.of_module(__name__, label="Gemini CLI session", shape="object", agent="Gemini CLI",
                          holds_tools=False, omits="the system prompt or tool schemas")
