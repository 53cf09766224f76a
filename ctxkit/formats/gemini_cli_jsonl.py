"""Gemini CLI chat recordings as JSONL (0.61 on: `~/.gemini/tmp/<project>/chats/session-*.jsonl`).

Gemini CLI appends a record per line and, to load a session, replays them
(`loadConversationRecord`, packages/core/src/services/chatRecordingService.ts), asking of each
record in this order:

- `{"$rewindTo": id}` (`rewindTo`): the message `id` and every one after it leave the list (all
  of them when `id` is not in it);
- a message, any record with a string `id` (`pushMessage`): it joins the end of the list, or
  takes the place of the message of that id (a `gemini` message is written again when its
  `tokens` or its `toolCalls` arrive);
- `{"$set": {...}}` (`updateMetadata`): keys of the session (`lastUpdated`, `sessionId`,
  `summary`, `memoryScratchpad`, `directories`); a `messages` list replaces the whole list
  (`updateMessagesFromHistory`: the first turn's session context, a resume, a request rolled
  back, Gemini CLI's own masking of old tool outputs);
- the header `{sessionId, projectHash, startTime, lastUpdated, kind}` (`initialize`; again
  when a session is resumed into the same file); `messages` in it are added.

Anything else is passed over. The model then reads the list as `convertSessionToClientHistory`
makes it Gemini API history: a `user` message's parts; a `gemini` message's parts when they
hold its calls or thoughts (the list a resume writes), else its `thoughts`, `content` and
`toolCalls`; then the calls' `result`s as the next user turn. `info`, `error` and `warning`
messages are the app's notices, and a user turn that begins `<session_context>` or
`<hook_context>` is left out (the session context is written afresh).

Read: the final list, in order, as `formats.gemini_cli` reads a recording: a user unit, an
assistant unit (thoughts as reasoning) and a tool unit per call result; `tokens` is the
provider's count of the call (from an earlier version of the message when a resume's rewrite
dropped it); the model of the last `gemini` message is the log's. Gemini CLI's session context
is a system unit (merged with the user's first words by a rollback, those are a user unit of
their own). 0.61 also records each batch of results as a `user` message of `functionResponse`
parts, and a resume adds more (`<id>_response`, each call's `result` holding the whole turn's):
a result already given is an echo, read once (a resumed session sends it again, the live one
did not). Every other record (the header, `$set` and `$rewindTo` records, earlier versions of a
message, notices, echoes) is kept for the round trip (`formats.kept`).

Written back: an untouched log record for record. In a compacted one every record stays where
it was but a removed message's versions; a changed message is written in its last version's
place (an entry of a `$set` list stays one) in the same shape; a unit compaction made becomes a
message just before the next message of the log, in the list where that one joined it; and the
echoes are left out, and a merged session context gives way to the user's words, so that
Gemini CLI resumes each kept result once and the user's first request with it.
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
from collections.abc import Iterable
from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, app_records
from ctxkit.formats.common import (
    Source,
    args_object,
    args_text,
    finish_run,
    joins,
    link_group_sizes,
    raw_groups,
    timestamp_of,
)
from ctxkit.formats.gemini_cli import (
    MESSAGE_TYPES,
    _call,
    _joined,
    _message,
    _usage,
    parts_text,
    response_text,
    with_results,
)
from ctxkit.formats.gemini_cli import write_object as _recording
from ctxkit.formats.kept import KEY as KEPT
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "gemini-cli-jsonl"
_HARNESS = ("<session_context>", "<hook_context>")
_NAMESPACE = uuidlib.UUID("8c4e2a17-3f6b-5d90-b1e8-7a2c9d4f0e63")

Where = tuple[int, int | None]  # a message's version: its record, and its place in that record's list


# ---------------------------------------------------------------- records


def _kind(rec: Any) -> str:
    """What Gemini CLI's loader takes a record for, asked in its order."""
    if not isinstance(rec, dict):
        return "other"
    if isinstance(rec.get("$rewindTo"), str):
        return "rewind"
    if isinstance(rec.get("id"), str):
        return "message"
    if isinstance(rec.get("$set"), (dict, list)):
        return "set"
    if isinstance(rec.get("sessionId"), str) and isinstance(rec.get("projectHash"), str):
        return "header"
    return "other"


def _listed(rec: Any) -> list[Any] | None:
    """The messages a `$set` or a header record lists, or None."""
    kind = _kind(rec)
    holder = rec.get("$set") if kind == "set" else rec if kind == "header" else None
    found = holder.get("messages") if isinstance(holder, dict) else None
    return found if isinstance(found, list) else None


def _is_header(rec: Any) -> bool:
    return _kind(rec) == "header" and not isinstance(rec.get("messages"), list)


def detect(records: list[Any]) -> bool:
    """A header `{sessionId, projectHash, ...}` first, then only records Gemini CLI writes:
    messages `{id, type, ...}`, `{"$set": ...}`, `{"$rewindTo": id}`, headers."""
    head = records[:20]
    if not head or not _is_header(head[0]):
        return False
    for rec in head[1:]:
        kind = _kind(rec)
        if kind == "message" and not isinstance(rec.get("type"), str):
            return False
        if kind == "other":
            return False
    return True


class _Chat:
    """The records replayed as Gemini CLI loads them: the messages left, each with where it
    stands in the list (where it last joined it) and its versions."""

    def __init__(self, records: list[Any]) -> None:
        self.messages: dict[str, dict[str, Any]] = {}
        self.since: dict[str, list[Where]] = {}  # versions since it last joined the list
        self.every: dict[str, list[Where]] = {}  # versions anywhere in the file
        self.fields: dict[str, Any] = {}
        self.protect: set[Where] = set()  # what a later `$rewindTo` must still find
        for i, rec in enumerate(records):
            kind = _kind(rec)
            if kind == "rewind":
                self._rewind(rec["$rewindTo"])
            elif kind == "message":
                self._put(rec["id"], rec, (i, None))
            elif kind == "set":
                if isinstance(rec["$set"], dict):
                    if isinstance(rec["$set"].get("messages"), list):
                        self.messages.clear()
                        self.since.clear()
                    self.fields.update(rec["$set"])
                self._put_all(_listed(rec), i)
            elif kind == "header":
                self.fields.update(rec)
                self._put_all(_listed(rec), i)

    def _put_all(self, listed: list[Any] | None, i: int) -> None:
        for k, msg in enumerate(listed or []):
            if isinstance(msg, dict) and isinstance(msg.get("id"), str):
                self._put(msg["id"], msg, (i, k))

    def _put(self, mid: str, msg: dict[str, Any], at: Where) -> None:
        self.every.setdefault(mid, []).append(at)
        if mid in self.messages:
            self.since[mid].append(at)
        else:
            self.since[mid] = [at]
        self.messages[mid] = msg  # a dict keeps an existing key in its place, as a JS Map does

    def _rewind(self, target: str) -> None:
        if target not in self.messages:
            self.messages.clear()
            self.since.clear()
            return
        self.protect.update(self.since[target])
        ids = list(self.messages)
        for mid in ids[ids.index(target):]:
            del self.messages[mid]
            del self.since[mid]


# ---------------------------------------------------------------- reading


def _parts(content: Any) -> list[Any]:
    """Content as parts (`ensurePartArray`): text is one text part."""
    if isinstance(content, list):
        return [{"text": p} if isinstance(p, str) else p for p in content]
    if isinstance(content, str):
        return [{"text": content}]
    return [content] if isinstance(content, dict) else []


def _response(part: Any) -> dict[str, Any] | None:
    return part["functionResponse"] if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict) else None


def _calls_inline(msg: dict[str, Any]) -> bool:
    """Whether a `gemini` message's content parts hold its calls or thoughts (then Gemini CLI
    sends those parts as they are and not its `thoughts` or `toolCalls`)."""
    parts = _parts(msg.get("content")) if msg.get("content") else []
    return any(isinstance(p, dict) and ("functionCall" in p or p.get("thought")) for p in parts)


def _resume_text(part: Any) -> str:
    """A part as `partListUnionToString` gives it: what Gemini CLI asks of a user message."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    for key in ("videoMetadata", "thought", "codeExecutionResult", "executableCode", "fileData", "functionCall",
                "functionResponse", "inlineData"):
        if key in part:
            return f"[{key}]"
    return str(part.get("text") or "")


def _is_harness(part: Any) -> bool:
    return _is_text(part) and str(part.get("text") if isinstance(part, dict) else part).lstrip().startswith(_HARNESS)


def _ignored(content: Any) -> bool:
    """A user message that begins with Gemini CLI's own `<session_context>` or `<hook_context>`
    turn, which it leaves out of the history it resumes (`isIgnoredUserContent`; it writes the
    session context afresh)."""
    return "".join(_resume_text(p) for p in _parts(content)).strip().startswith(_HARNESS)


def _failed(result: Any) -> bool:
    return any(isinstance(fr.get("response"), dict) and "error" in fr["response"]
               for fr in (_response(p) for p in _parts(result)) if fr is not None)


class _Reader:
    """Units from the final messages, and what each message is to the writer."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.units: list[Unit] = []
        self.calls: list[dict[str, Any]] = []
        self.model: str | None = None
        self.answered: set[str] = set()  # calls whose result the model has read
        self.open: list[tuple[str, str]] = []  # (id, name) of calls not answered yet
        self.kinds: dict[str, str] = {}  # message id -> unit, notice or echo
        self.owners: dict[str, str] = {}  # message id -> the unit its other records go with
        self.rewrite: set[str] = set()  # messages a changed log has written anew (echoes left out...)

    def message(self, n: int, mid: str, msg: dict[str, Any], earlier: list[dict[str, Any]]) -> None:
        kind = msg.get("type")
        before = len(self.units)
        if kind == "user":
            self._user(n, mid, msg)
        elif kind == "gemini":
            self._gemini(n, mid, msg, earlier)
        else:
            self.src.stats.skip(f"{NAME}:{kind if isinstance(kind, str) else 'untyped'}")
        made = self.units[before:]
        if made:
            self.kinds[mid] = "unit"
            self.owners[mid] = made[0].id
            return
        if kind == "user":  # echoed results only
            self.kinds[mid] = "echo"
            self.src.stats.skip(f"{NAME}:echoed results")
        else:
            self.kinds[mid] = "notice"
        if self.units:
            self.owners[mid] = self.units[-1].id

    def _add(self, run: list[Unit]) -> None:
        self.units.extend(finish_run(run))

    def _user(self, n: int, mid: str, msg: dict[str, Any]) -> None:
        ts = timestamp_of(msg.get("timestamp"))
        parts = _parts(msg.get("content"))
        run: list[Unit] = []
        rest: list[Any] = []
        responses = 0
        for k, part in enumerate(parts):
            fr = _response(part)
            if fr is None:
                rest.append(part)
                continue
            responses += 1
            name = str(fr.get("name") or "")
            own = str(fr["id"]) if fr.get("id") else None
            if own is not None and own in self.answered:
                self.rewrite.add(mid)
                continue  # an echo: its call's own result was read
            # by id, else (a call Gemini CLI wrote without one) the oldest open call of its name,
            # as the Gemini API pairs them
            cid = own if any(c == own for c, _ in self.open) else next(
                (c for c, m in self.open if m == name), own)
            if cid is not None:
                self.answered.update(x for x in (cid, own) if x is not None)
                self.open = [(c, m) for c, m in self.open if c != cid]
            meta = {"is_error": True} if _failed([part]) else {}
            run.append(Unit(id=f"{mid}#{k + 1}", role="tool", content=response_text(fr), timestamp=ts,
                            tool_call_id=cid, name=name or None, raw=msg, group=n, meta=meta))
        if rest or not responses:
            harness = [p for p in rest if _is_harness(p)] if _ignored(msg.get("content")) else []
            words = [p for p in rest if not _is_harness(p)] if harness else rest
            if harness:
                # Gemini CLI's own first turn (the date, the OS, the folder tree) is the
                # harness's: a system unit. A rollback or its own compression merges the user's
                # first words into it, and then it would leave them out on resume with it: a
                # changed log has that message written with the user's words alone
                text, _ = parts_text(harness, self.src)
                run.append(Unit(id=f"{mid}#0" if words else mid, role="system", content=text, timestamp=ts, raw=msg,
                                group=n))
                if words:
                    self.rewrite.add(mid)
            if words or not harness:
                text, images = parts_text(msg.get("content") if not responses and not harness else words, self.src)
                run.append(Unit(id=mid, role="user", content=text, timestamp=ts, images=images, raw=msg, group=n))
        self._add(run)

    def _gemini(self, n: int, mid: str, msg: dict[str, Any], earlier: list[dict[str, Any]]) -> None:
        ts = timestamp_of(msg.get("timestamp"))
        # Gemini CLI's rewrite of the list on resume can drop `tokens` and `model`: an earlier
        # version of the message still has them
        versions = [msg, *reversed(earlier)]
        tokens = next((v["tokens"] for v in versions if isinstance(v.get("tokens"), dict)), None)
        model = next((v["model"] for v in versions if isinstance(v.get("model"), str)), None)
        self.model = model or self.model
        usage = _usage(tokens, len(self.units) - 1)
        if usage is not None:
            self.calls.append(usage)
        records = [c for c in msg.get("toolCalls") or [] if isinstance(c, dict)] if isinstance(
            msg.get("toolCalls"), list) else []
        if _calls_inline(msg):
            parts = [p for p in _parts(msg["content"]) if isinstance(p, dict)]
            text, images = parts_text([p for p in parts if not p.get("thought")], self.src)
            reasoning = "\n".join(str(p.get("text") or "") for p in parts if p.get("thought"))
            calls = [ToolCall(str(fc.get("id") or f"{mid}#{k}"), str(fc.get("name") or ""), args_text(fc.get("args")))
                     for k, fc in enumerate(p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict))]
        else:
            text, images = parts_text(msg.get("content"), self.src)
            reasoning = "\n".join(
                ": ".join(x for x in (str(t.get("subject") or ""), str(t.get("description") or "")) if x)
                for t in msg.get("thoughts") or [] if isinstance(t, dict))
            calls = [ToolCall(str(c.get("id") or f"{mid}#{k}"), str(c.get("name") or ""), args_text(c.get("args")))
                     for k, c in enumerate(records)]
        self.open.extend((c.id, c.name) for c in calls)
        run = [Unit(id=mid, role="assistant", content=text, timestamp=ts, tool_calls=calls, reasoning=reasoning,
                    images=images, raw=msg, group=n)]
        answers, echoed = _answers(mid, records)
        if echoed:
            self.rewrite.add(mid)
        for pid, (k, pieces) in answers.items():
            if pid in self.answered:
                self.rewrite.add(mid)
                continue  # an echo: that call's result was read
            self.answered.add(pid)
            self.open = [(c, m) for c, m in self.open if c != pid]
            call = records[k]
            meta: dict[str, Any] = {"status": call["status"]} if isinstance(call.get("status"), str) else {}
            if call.get("status") == "error" or any(failed for _, failed, _ in pieces):
                meta["is_error"] = True
            name = str(call.get("name") or "") or next((n for _, _, n in pieces if n), None)
            run.append(Unit(id=f"{mid}#{k + 1}", role="tool", content="\n".join(t for t, _, _ in pieces if t),
                            timestamp=timestamp_of(call.get("timestamp")) or ts, tool_call_id=pid,
                            name=name or None, raw=msg, group=n, meta=meta))
        self._add(run)


Answers = dict[str, tuple[int, list[tuple[str, bool, str | None]]]]


def _answers(mid: str, calls: list[dict[str, Any]]) -> tuple[Answers, bool]:
    """The responses the calls' `result`s send, by the call they answer: (the index of that
    call, else of the call whose result holds it; [(text, failed, name)]), and whether one came
    twice. A result holds its own call's response, but Gemini CLI's rewrite of the list on
    resume gives each call of a turn the whole turn's responses: a response already given is an
    echo, left out."""
    index = {str(c.get("id") or f"{mid}#{k}"): k for k, c in enumerate(calls)}
    out: Answers = {}
    echoed = False
    for k, call in enumerate(calls):
        result = call.get("result")
        if not (result and _parts(result)):
            continue  # Gemini CLI sends no response for it
        own = str(call.get("id") or f"{mid}#{k}")
        if isinstance(result, str):
            groups: dict[str, list[tuple[str, bool, str | None]]] = {own: [(result, False, None)]}
        else:
            groups = {}
            for part in _parts(result):
                fr = _response(part)
                pid = str(fr.get("id")) if fr is not None and fr.get("id") else own
                piece = (response_text(fr), _failed([part]), str(fr.get("name") or "") or None) if fr is not None else (
                    parts_text([part])[0], False, None)
                groups.setdefault(pid, []).append(piece)
        for pid, pieces in groups.items():
            if pid in out:
                echoed = True
                continue
            out[pid] = (index.get(pid, k), pieces)
    return out, echoed


def read(records: list[Any], src: Source) -> Transcript:
    """The chat as Gemini CLI loads it, as units (see the module doc)."""
    chat = _Chat(records)
    reader = _Reader(src)
    order = list(chat.messages)
    for n, mid in enumerate(order):
        earlier = [_version(records, at) for at in chat.every[mid][:-1]]
        reader.message(n, mid, chat.messages[mid], [e for e in earlier if isinstance(e, dict)])
    link_group_sizes(reader.units)
    # a unit's own record: the last version of its message, when that is a line of its own
    own = {mid: chat.since[mid][-1][0] for mid in order
           if reader.kinds[mid] == "unit" and chat.since[mid][-1][1] is None}
    spans = {u.id: [own[order[u.group]]] for u in reader.units if u.group is not None and order[u.group] in own}
    names: dict[str, str] = {}
    goes_with: dict[int, str | None] = {}  # a message's other records go with its unit (notices with the one before)
    for mid, versions in chat.every.items():
        for i, k in versions:
            if k is None:
                names[str(i)] = mid
                if mid in chat.messages and (i, k) not in chat.protect:
                    goes_with[i] = reader.owners.get(mid)
    skip = set(own.values())
    kept = [[i, goes_with.get(i), rec] for i, rec in enumerate(records) if i not in skip]
    for i, rec in enumerate(records):
        if _kind(rec) == "other":
            src.warn(i, "not a record Gemini CLI reads (it passes it over): kept as it is")
    metadata: dict[str, Any] = {
        KEPT: {"records": kept, "spans": spans, "names": names},
        NAME: {
            "kinds": reader.kinds,
            "owners": reader.owners,
            "at": {mid: list(chat.since[mid][-1]) for mid in order},
            "first": {mid: list(chat.since[mid][0]) for mid in order},
            "rewrite": sorted(reader.rewrite),
            "protect": sorted([[i, k] for i, k in chat.protect], key=lambda w: (w[0], -1 if w[1] is None else w[1])),
        },
    }
    if reader.calls:
        metadata["provider_usage"] = {"source": NAME, "calls": reader.calls}
    session = chat.fields.get("sessionId") if isinstance(chat.fields.get("sessionId"), str) else None
    if session:
        metadata["session_id"] = session
    model = reader.model or next((m for m in _models(records)), None)  # a rolled-back turn's, else none
    if model:
        metadata["model"] = model
    return Transcript(units=reader.units, id=session or src.tid, source_format=NAME, layout=src.layout,
                      line=src.line, metadata=metadata)


def _models(records: list[Any]) -> Iterable[str]:
    """The models of every `gemini` message version in the file, the last first."""
    for rec in reversed(records):
        for msg in [rec] if _kind(rec) == "message" else reversed(_listed(rec) or []):
            if isinstance(msg, dict) and msg.get("type") == "gemini" and isinstance(msg.get("model"), str):
                yield msg["model"]


def _version(records: list[Any], at: Where) -> Any:
    i, k = at
    if k is None:
        return records[i]
    listed = _listed(records[i])
    return listed[k] if listed is not None and k < len(listed) else None


# ---------------------------------------------------------------- writing


def _is_text(part: Any) -> bool:
    return isinstance(part, str) or (isinstance(part, dict) and isinstance(part.get("text"), str)
                                     and not part.get("thought"))


def _content_with(template: Any, text: str, calls: list[ToolCall] | None) -> Any:
    """A message's content with its text replaced (and, when its parts hold the calls, its
    calls): thought parts and parts of other kinds stay where they were."""
    if not isinstance(template, list):
        return text
    slot = next((k for k, p in enumerate(template) if _is_text(p)), None)
    if slot is None:
        slot = next((k for k, p in enumerate(template) if isinstance(p, dict) and "functionCall" in p), len(template))
    wanted = {c.id: c for c in calls} if calls is not None else None
    out: list[Any] = []
    for k, part in enumerate(template):
        if k == slot and text:
            out.append({**part, "text": text} if _is_text(part) and isinstance(part, dict) else {"text": text})
        if _is_text(part):
            continue
        fc = part.get("functionCall") if isinstance(part, dict) else None
        if wanted is not None and isinstance(fc, dict):
            call = wanted.pop(str(fc.get("id")), None)
            if call is None:
                continue  # compaction took it out
            if call.arguments != args_text(fc.get("args")):
                part = {**part, "functionCall": {**fc, "args": args_object(call.arguments)}}
        out.append(part)
    if slot == len(template) and text:
        out.append({"text": text})
    for call in (wanted or {}).values():
        out.append({"functionCall": {"id": call.id, "name": call.name, "args": args_object(call.arguments)}})
    return out


def _sent_parts(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Each call's own `functionResponse` part, wherever in the calls' results it is."""
    out: dict[str, Any] = {}
    for call in calls:
        result = call.get("result")
        for part in _parts(result) if isinstance(result, list) else []:
            fr = _response(part)
            if fr is not None and fr.get("id") is not None:
                out.setdefault(str(fr["id"]), part)
    return out


def _own_call(c: ToolCall, result: Unit | None, template: dict[str, Any] | None, sent: dict[str, Any]) -> dict[str, Any]:
    """A call written anew: its result only its own response (a rewrite of the list on resume
    gives each call the whole turn's), a changed one in the shape Gemini CLI writes."""
    if template is None or result is None or result.raw is None:
        return _call(c, {c.id: result} if result is not None else {}, template)
    call = dict(template)
    if isinstance(call.get("result"), list) and c.id in sent:
        call["result"] = [sent[c.id]]
    if c.arguments != args_text(template.get("args")):
        call["args"] = args_object(c.arguments)
    return call


def _rebuilt(run: list[Unit]) -> dict[str, Any] | None:
    """A message of the log with what compaction changed in its units (`run`, one message's);
    None when nothing of it is left."""
    template: dict[str, Any] = run[0].source
    msg = dict(template)
    results = {u.tool_call_id or "": u for u in run if u.role == "tool"}
    if template.get("type") == "gemini":
        head = run[0]
        inline = _calls_inline(template)
        msg["content"] = _content_with(template.get("content"), head.content, head.tool_calls if inline else None)
        calls = [c for c in template.get("toolCalls") or [] if isinstance(c, dict)] if isinstance(
            template.get("toolCalls"), list) else []
        sources = {str(c.get("id")): c for c in calls}
        if calls or (head.tool_calls and not inline):
            sent = _sent_parts(calls)
            msg["toolCalls"] = [_own_call(c, results.get(c.id), sources.get(c.id), sent)
                                for c in head.tool_calls if c.id in sources or not inline]
        return msg
    # a user message: its text, and the results its functionResponse parts carry (a part whose
    # unit is gone goes too: an echo, or a result whose call compaction took out)
    mid = str(template.get("id"))
    by_id = {u.id: u for u in run}
    user = by_id.get(mid)
    parts = _parts(template.get("content"))
    out: list[Any] = []
    for k, part in enumerate(parts):
        fr = _response(part)
        if fr is None:
            out.append(part)
            continue
        unit = by_id.get(f"{mid}#{k + 1}")
        if unit is None:
            continue
        if unit.raw is None:
            key = "error" if unit.meta.get("is_error") else "output"
            part = {**part, "functionResponse": {**fr, "response": {key: unit.content}}}
        out.append(part)
    text = user.content if user is not None else ""
    content = template.get("content")
    msg["content"] = _content_with(out if isinstance(content, list) else content, text, None)
    return msg if msg["content"] or user is not None else None


def _produced(t: Transcript, again: frozenset[str] = frozenset()) -> list[tuple[Unit, dict[str, Any], bool]]:
    """The messages for the transcript's units, in order: (first unit, message, whether it
    differs from the record it was read from); the messages `again` names are written anew
    even when untouched."""
    out: list[tuple[Unit, dict[str, Any], bool]] = []
    made: list[Unit] = []  # units compaction made, waiting for their group to end

    def flush() -> None:
        for g in with_results(made):
            last = out[-1][1] if out else None
            if joins(g[0]) and len(g) == 1 and g[0].role in ("user", "assistant") and isinstance(last, dict) and (
                    last.get("type") == ("gemini" if g[0].role == "assistant" else "user")):
                out[-1] = (out[-1][0], _joined(last, g[0].content), True)
                continue
            msg = _message(g, t, False)
            if msg is not None:
                out.append((g[0], msg, True))
        made.clear()

    for raw, run in raw_groups(t.units):
        head = run[0]
        if head.group is None or not isinstance(head.source, dict) or head.source.get("type") not in MESSAGE_TYPES:
            made.extend(run)
            continue
        flush()
        if raw is not None and not any(joins(u) for u in run) and str(head.source.get("id")) not in again:
            out.append((head, raw, False))
            continue
        msg = _rebuilt(run)
        if msg is not None:
            out.append((head, msg, True))
    flush()
    return out


def _header(t: Transcript) -> list[dict[str, Any]]:
    """A chat for a transcript of another format: a header as Gemini CLI writes when it turns a
    `.json` recording into JSONL (it loads no session without a session id and a project hash),
    then the messages."""
    recording = _recording(t)
    head = {k: v for k, v in recording.items() if k != "messages"}
    if not head.get("projectHash"):
        head["projectHash"] = hashlib.sha256(t.id.encode("utf-8")).hexdigest()
    head.setdefault("kind", "main")
    return [head, *recording["messages"]]


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """The chat's records for a transcript (see the module doc)."""
    plan = t.metadata.get(NAME) if t.source_format == NAME else None
    kept = t.metadata.get(KEPT)
    if not isinstance(plan, dict) or not isinstance(kept, dict):
        return _header(t), {}
    produced = _produced(t)
    kinds: dict[str, str] = plan.get("kinds") or {}
    owners: dict[str, str] = plan.get("owners") or {}
    at = {mid: (w[0], w[1]) for mid, w in (plan.get("at") or {}).items()}
    first = {mid: (w[0], w[1]) for mid, w in (plan.get("first") or {}).items()}
    protect = {(w[0], w[1]) for w in plan.get("protect") or []}
    ids = {u.id for u in t.units}
    written = {str(m.get("id")): m for _, m, _ in produced if str(m.get("id")) in kinds}
    changed = any(rebuilt for _, _, rebuilt in produced) or any(
        kind == "unit" and mid not in written for mid, kind in kinds.items())
    if changed and plan.get("rewrite"):
        produced = _produced(t, frozenset(plan["rewrite"]))  # without their echoes, say
        written = {str(m.get("id")): m for _, m, _ in produced if str(m.get("id")) in kinds}

    # a message compaction made goes just before the next message of the log, in the list
    # where that one joined it (after everything, when none follows)
    before: dict[Where, list[dict[str, Any]]] = {}
    waiting: list[dict[str, Any]] = []
    for _, msg, _ in produced:
        mid = str(msg.get("id"))
        if mid not in kinds:
            waiting.append(msg)
        elif waiting:
            before.setdefault(first[mid], []).extend(waiting)
            waiting = []

    def stays(mid: str, where: Where) -> bool:
        kind = kinds.get(mid)
        if kind is None or where in protect:
            return True  # no longer listed (rewound, replaced): it changes nothing, or a rewind needs it
        if kind == "unit":
            return mid in written
        if kind == "echo":
            return not changed
        owner = owners.get(mid)
        return owner is None or owner in ids

    records: list[tuple[float, Any]] = []
    for i, _, rec in kept.get("records") or []:
        listed = _listed(rec)
        if listed is not None:
            out: list[Any] = []
            for k, msg in enumerate(listed):
                out.extend(before.pop((i, k), []))
                entry = msg.get("id") if isinstance(msg, dict) and isinstance(msg.get("id"), str) else None
                if entry is None:
                    out.append(msg)
                elif stays(entry, (i, k)):
                    out.append(written[entry] if at.get(entry) == (i, k) and entry in written else msg)
            if len(out) != len(listed) or any(a is not b for a, b in zip(out, listed, strict=True)):
                rec = {**rec, "$set": {**rec["$set"], "messages": out}} if _kind(rec) == "set" else {**rec, "messages": out}
        elif _kind(rec) == "message" and not stays(rec["id"], (i, None)):
            continue
        records.append((float(i), rec))
    for mid, msg in written.items():
        if at[mid][1] is None:
            records.append((float(at[mid][0]), msg))
    for where, msgs in before.items():  # lines of their own, before the line they precede
        records.extend((where[0] - 0.5 if where[1] is None else where[0] + 0.5, msg) for msg in msgs)
    records.sort(key=lambda r: r[0])  # stable: made-up messages keep their order
    return [rec for _, rec in records] + waiting, {}


# ---------------------------------------------------------------- validating


def validate(data: Any) -> list[str]:
    """What Gemini CLI needs to resume the chat: a header with a session id and a project hash
    first, records it reads; in the list they leave, messages of known types, each call with a
    name and object args, answered before the next model turn."""
    records = app_records(data)
    out: list[str] = []
    if not records or not _is_header(records[0]):
        out.append("record 1: expected the header {sessionId, projectHash, startTime, lastUpdated, kind}")
    chat = _Chat(records)
    if not (chat.fields.get("sessionId") and chat.fields.get("projectHash")):
        out.append("no session id or project hash: Gemini CLI would not load the chat")
    for i, rec in enumerate(records):
        if _kind(rec) == "other":
            out.append(f"record {i + 1}: not a record Gemini CLI reads")
    pending: list[str] = []
    for n, (mid, msg) in enumerate(chat.messages.items()):
        at = f"message {n + 1} ({mid})"
        if msg.get("type") not in MESSAGE_TYPES or "content" not in msg:
            out.append(f"{at}: expected {{id, timestamp, type, content}} of a known type")
            continue
        if msg["type"] == "gemini":
            if pending:
                out.append(f"{at}: tool call(s) {', '.join(pending)} not answered before this turn")
                pending = []
            inline = _calls_inline(msg)
            calls = [p["functionCall"] for p in _parts(msg["content"]) if isinstance(p, dict) and isinstance(
                p.get("functionCall"), dict)] if inline else [c for c in msg.get("toolCalls") or [] if isinstance(c, dict)]
            for k, call in enumerate(calls):
                if not (isinstance(call.get("name"), str) and isinstance(call.get("args"), dict)):
                    out.append(f"{at}: tool call {k + 1} needs a name and object args")
                elif isinstance(call.get("id"), str):
                    pending.append(call["id"])
            for call in msg.get("toolCalls") or []:
                if isinstance(call, dict) and call.get("result") and call.get("id") in pending:
                    pending.remove(call["id"])
        elif msg["type"] == "user":
            for part in _parts(msg["content"]):
                fr = _response(part)
                if fr is not None and fr.get("id") in pending:
                    pending.remove(fr["id"])
    return out[:MAX_PROBLEMS]


def hint(found: Any) -> str | None:
    """Gemini CLI's headless events (`gemini -p --output-format stream-json`: init, message,
    tool_use, tool_result, result). Not read: a tool_result's `output` is the result as the
    terminal shows it (`resultDisplay`: nothing for a file read, a diff for a write), not what
    the model read (0.61.0, measured), so a count of it would be a misreading. The chat the run
    wrote holds what the model read."""
    if isinstance(found, dict) and found.get("type") == "init" and "session_id" in found and "model" in found:
        return ("Gemini CLI's --output-format stream-json events, whose tool results are what the "
                "terminal shows, not what the model read: read the chat the run wrote, "
                "~/.gemini/tmp/<project>/chats/session-*.jsonl (--from gemini-cli-jsonl)")
    return None


FORMAT = Format.of_module(__name__, label="Gemini CLI chat (JSONL)", shape="log",
                          agent="Gemini CLI", strict=True, holds_tools=False,
                          omits="the system prompt or tool schemas")
