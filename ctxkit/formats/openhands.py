"""OpenHands event streams: `action` / `observation` events, and evaluation output lines.

An event stream is a JSON array (or JSONL) of events `{id, timestamp, source, message, action
| observation, args | content + extras, cause, tool_call_metadata, llm_metrics}`; an evaluation
output line is `{instance_id, instruction, history: [events], metrics, test_result, ...}`, one
conversation per line. Units are what OpenHands' `ConversationMemory` sends the model:

- event 0 `action: system` is the system prompt (`args.content`), its `args.tools` the tools;
- `message` actions are user or assistant messages (`source`), `finish` an assistant message;
- a tool action (run, run_ipython, read, write, edit, browse, think, delegate, MCP...) is an
  assistant tool call: the call, its arguments and the assistant text come from the model's own
  response in `tool_call_metadata` (one response may make several calls: its text goes with the
  first), else from the action's `args`;
- an observation is the result of the action its `cause` names (or of its tool call id), or a
  user message when it answers no call (a command the user ran); a recall observation is the
  workspace context and microagent knowledge it adds, rendered roughly as OpenHands does;
- OpenHands' own compaction, a `condensation` action, hides the events it forgets (read only
  with `include_compacted`) and its summary is a `summary` unit where OpenHands inserts it;
- early outputs keep their shapes: flat events (no ids, arguments at the top level, a result
  right after its action) and a history of `[action, observation]` pairs.

Events that are no message (agent state changes, recall and condensation actions, null
observations...) are counted as skipped and kept, with everything else, for the writer: read
then written, a stream comes back event for event. A changed unit is its source event with the
text replaced (an observation's `content`, a message's `args.content`, an action's thought and
the model response's text); a unit compaction made up becomes an event OpenHands loads: a
summary or placeholder a `condense` observation (what OpenHands shows its own summaries as), a
message a `message` action, a tool call a `call_tool_mcp` action whose `tool_call_metadata`
holds the call, and its result an `mcp` observation. Once a new event is written, ids are
renumbered to stay unique and increasing, and `cause` and the condensations' forgotten ids
follow.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, agent_log
from ctxkit.formats.common import Source, args_text, blocks_text, dumps, finish, joins, timestamp_of
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "openhands"
MESSAGES_KEY = "history"  # the events of an evaluation output line
# The skip kind counting events an OpenHands condensation made the model forget.
COMPACTED = "forgotten by OpenHands' condensation"

_TOOL_ACTIONS = frozenset(
    {"run", "run_ipython", "read", "write", "edit", "browse", "browse_interactive", "call_tool_mcp", "delegate",
     "think", "task_tracking"}
)
# Events the model never reads (OpenHands' ConversationMemory renders nothing for them).
_SILENT_OBSERVATIONS = frozenset({"agent_state_changed", "null", "success", "loop_detection"})
_CONDENSATIONS = ("condensation", "condensation_request")
_STATE_KEYS = ("thought", "is_input", "blocking", "is_static", "cwd", "hidden", "confirmation_state",
               "security_risk", "impl_source", "translated_ipython_code", "include_extra", "kernel_init_code",
               "keep_prompt", "is_confirmed", "action_risk")
_META_KEY = "openhands"


# Top-level keys of an event; in the flat events of early (OpenDevin) outputs every other key
# is an argument of the action (no `args`) or an extra of the observation.
_TOP_KEYS = frozenset({"id", "timestamp", "source", "message", "cause", "action", "tool_call_metadata", "llm_metrics",
                       "timeout"})


def _is_event(rec: Any) -> bool:
    """One action or one observation (a SWE-agent message has a role, a SWE-agent trajectory
    step both an action and an observation)."""
    return (isinstance(rec, dict) and "role" not in rec
            and isinstance(rec.get("action"), str) != isinstance(rec.get("observation"), str))


def _args(ev: dict[str, Any]) -> dict[str, Any]:
    """An action's arguments: `args`, or the other keys of a flat early event."""
    if "args" in ev or "observation" in ev:
        return _dict(ev.get("args"))
    return {k: v for k, v in ev.items() if k not in _TOP_KEYS}


def _with_args(ev: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """`ev` with its arguments replaced (in `args`, or at the top of a flat early event)."""
    if "args" in ev or "observation" in ev:
        return {**ev, "args": args}
    return {**{k: v for k, v in ev.items() if k in _TOP_KEYS}, **args}


def _is_pair(rec: Any) -> bool:
    """An early evaluation output's history item: `[action, observation]`."""
    return isinstance(rec, list) and len(rec) == 2 and all(_is_event(e) for e in rec)


def detect(obj: Any) -> bool:
    """Events shaped `{id, source, action | observation, ...}` (or pairs of them)."""
    records = obj if isinstance(obj, list) else [obj]
    hits = 0
    for rec in records[:20]:
        if _is_pair(rec):
            rec = rec[0]
        if not isinstance(rec, dict):
            return False
        if _is_event(rec) and any(k in rec for k in ("id", "source", "args", "cause", "extras", "content", "thought")):
            hits += 1
    return hits > 0 and hits >= min(len(records), 20) // 2


def detect_conversation(obj: Any) -> bool:
    """An evaluation output line: `{history: [events], instance_id | instruction | test_result}`."""
    if not isinstance(obj, dict) or "messages" in obj or not isinstance(obj.get("history"), list):
        return False
    history = obj["history"]
    if not history:
        return any(k in obj for k in ("instance_id", "instruction", "test_result"))
    return detect(history)


# ---------------------------------------------------------------- reading


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _forgotten(args: dict[str, Any]) -> list[int]:
    """The event ids a condensation action forgets: a list, or a range start..end."""
    ids = args.get("forgotten_event_ids")
    if isinstance(ids, list):
        return [i for i in ids if isinstance(i, int)]
    start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
    if isinstance(start, int) and isinstance(end, int):
        return list(range(start, end + 1))
    return []


def _hidden(events: Any) -> set[Any]:
    """Ids OpenHands leaves out of the model's view: what condensations forget, and themselves."""
    out: set[Any] = set()
    for ev in events:
        if ev.get("action") in _CONDENSATIONS and "id" in ev:
            out.add(ev["id"])
            if ev["action"] == "condensation" and isinstance(ev.get("args"), dict):
                out.update(_forgotten(ev["args"]))
    return out


def _response(ev: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """The id and assistant message of the model response behind an action, when logged."""
    meta = ev.get("tool_call_metadata")
    resp = meta.get("model_response") if isinstance(meta, dict) else None
    if not isinstance(resp, dict):
        return None, None
    choices = resp.get("choices")
    msg = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    rid = resp.get("id")
    return (str(rid) if rid is not None else None), (msg if isinstance(msg, dict) else None)


def _call_arguments(ev: dict[str, Any], msg: dict[str, Any] | None, call_id: str) -> str:
    """The arguments the model wrote for this call, else the action's args (less bookkeeping)."""
    for c in (msg or {}).get("tool_calls") or []:
        if isinstance(c, dict) and str(c.get("id")) == call_id and isinstance(c.get("function"), dict):
            return args_text(c["function"].get("arguments"))
    return dumps({k: v for k, v in _args(ev).items() if k not in _STATE_KEYS})


def _recall_text(extras: dict[str, Any], shown: set[str]) -> str:
    """Roughly what OpenHands renders for a recall observation (its prompt templates); a
    knowledge recall leaves out microagents an earlier recall showed (`shown`, updated)."""
    parts: list[str] = []
    if extras.get("repo_name") or extras.get("repo_directory"):
        parts.append(f"<REPOSITORY_INFO>\nAt the user's request, repository {extras.get('repo_name') or ''} has been "
                     f"cloned to {extras.get('repo_directory') or ''} in the current working directory.\n"
                     "</REPOSITORY_INFO>")
    if extras.get("repo_instructions"):
        parts.append(f"<REPOSITORY_INSTRUCTIONS>\n{extras['repo_instructions']}\n</REPOSITORY_INSTRUCTIONS>")
    runtime: list[str] = []
    hosts = extras.get("runtime_hosts")
    if isinstance(hosts, dict) and hosts:
        runtime.append("The user has access to the following hosts for accessing a web application,\n"
                       "each of which has a corresponding port:\n"
                       + "".join(f"* {h} (port {p})\n" for h, p in hosts.items()))
    for key in ("additional_agent_instructions",):
        if isinstance(extras.get(key), str) and extras[key]:
            runtime.append(extras[key])
    if extras.get("date"):
        runtime.append(f"Today's date is {extras['date']} (UTC).")
    if runtime:
        parts.append("<RUNTIME_INFORMATION>\n" + "\n".join(runtime) + "\n</RUNTIME_INFORMATION>")
    if isinstance(extras.get("conversation_instructions"), str) and extras["conversation_instructions"]:
        parts.append(f"<CONVERSATION_INSTRUCTIONS>\n{extras['conversation_instructions']}\n</CONVERSATION_INSTRUCTIONS>")
    knowledge = extras.get("recall_type") == "knowledge"
    for agent in extras.get("microagent_knowledge") or []:
        if not isinstance(agent, dict):
            continue
        name = str(agent.get("name"))
        seen = name in shown
        shown.add(name)
        if agent.get("content") and not (knowledge and seen):
            parts.append(f"<EXTRA_INFO>\nThe following information has been included based on a keyword match for "
                         f"\"{agent.get('trigger', '')}\".\nIt may or may not be relevant to the user's request.\n\n"
                         f"{agent['content']}\n</EXTRA_INFO>")
    return "\n\n".join(parts)


def _observation_text(ev: dict[str, Any]) -> str:
    content = ev.get("content")
    text = content if isinstance(content, str) else (dumps(content) if content is not None else "")
    if ev.get("observation") == "run_ipython" and "data:image/png;base64," in text:
        # OpenHands shows the model a stub for images an IPython cell printed
        text = "\n".join(
            "![image](data:image/png;base64, ...) already displayed to user"
            if "![image](data:image/png;base64," in line else line
            for line in text.split("\n")
        )
    return text


def _usage(msg_resp: dict[str, Any], after_unit: int) -> dict[str, Any] | None:
    usage = msg_resp.get("usage")
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return None
    details = usage.get("prompt_tokens_details")
    cached = usage.get("cache_read_input_tokens")
    if not isinstance(cached, int) and isinstance(details, dict):
        cached = details.get("cached_tokens")
    out = usage.get("completion_tokens")
    return {"after_unit": after_unit, "input_tokens": usage["prompt_tokens"],
            "cache_read_tokens": cached if isinstance(cached, int) else 0,
            "output_tokens": out if isinstance(out, int) else 0}


def read(records: list[Any], src: Source) -> Transcript:
    """Units of the messages OpenHands builds from the events (see the module doc)."""
    # Events by position; a history of [action, observation] pairs (early evaluation output) is
    # read as its events in order, event k of pair i at position 2i + k.
    paired = bool(records) and all(isinstance(r, list) for r in records[:20])
    events: list[tuple[int, dict[str, Any]]] = []
    for i, rec in enumerate(records):
        if paired and _is_pair(rec):
            events.extend((2 * i + k, e) for k, e in enumerate(rec))
        elif _is_event(rec) and not paired:
            events.append((i, rec))
        else:
            what = "an [action, observation] pair" if paired else "an OpenHands event with an `action` or `observation` kind"
            src.bad(i, f"expected {what}", rec)
    end = 2 * len(records) if paired else len(records)

    # What OpenHands' View hides: the events every condensation forgets, and the condensations.
    hidden = _hidden(ev for _, ev in events)
    forgotten = set() if src.include_compacted else hidden
    summary_at: tuple[int, int, str] | None = None  # (condensation index, insert before index, text)
    kept = [(i, ev) for i, ev in events if ev.get("id") not in hidden]
    for i, ev in reversed(events):
        args = _dict(ev.get("args"))
        if ev.get("action") == "condensation" and isinstance(args.get("summary"), str) \
                and isinstance(args.get("summary_offset"), int):
            offset = args["summary_offset"]
            before = kept[offset][0] if 0 <= offset < len(kept) else end
            summary_at = (i, before, args["summary"])
            break

    r = _Reader(src, dict(events), {ev.get("id") for _, ev in events})
    for i, ev in events:
        if summary_at is not None and i == summary_at[1]:
            r.summary(summary_at, i)
        if ev.get("id") in forgotten and "id" in ev:
            r.other(i, ev, COMPACTED if ev.get("action") not in _CONDENSATIONS else f"action:{ev['action']}")
        elif isinstance(ev.get("action"), str):
            r.action(i, ev)
        else:
            r.observation(i, ev)
    if summary_at is not None and summary_at[1] >= end:
        r.summary(summary_at, end)

    metadata: dict[str, Any] = {}
    if r.others or summary_at is not None or paired:
        metadata[_META_KEY] = {"events": r.others}
        if summary_at is not None:
            metadata[_META_KEY]["summary_of"] = summary_at[0]
        if paired:
            metadata[_META_KEY]["pairs"] = True
    if r.usage_calls:
        metadata["provider_usage"] = {"source": NAME, "calls": r.usage_calls}
    envelope = dict(src.envelope)
    tid = envelope.get("instance_id")
    return Transcript(
        units=r.units,
        id=str(tid) if isinstance(tid, (str, int)) and not isinstance(tid, bool) and str(tid) else src.tid,
        source_format=NAME,
        layout=src.layout,
        tools=r.tools,
        envelope=envelope,
        line=src.line,
        metadata=metadata,
    )


class _Reader:
    """The units read so far from one stream's events, and what later events look back at:
    tool call ids by action id, tool names by call id, the model responses already read."""

    def __init__(self, src: Source, by_index: dict[int, dict[str, Any]], ids: set[Any]) -> None:
        self.src = src
        self.by_index = by_index
        self.ids = ids  # every event id of the stream
        self.units: list[Unit] = []
        self.tools: list[dict[str, Any]] = []
        self.others: list[list[Any]] = []  # [index, event] of events that are no unit
        self.calls: dict[int, str] = {}  # action event id -> its tool call id
        self.call_names: dict[str, str] = {}
        self.responses: set[str] = set()
        self.usage_calls: list[dict[str, Any]] = []
        self.shown: set[str] = set()  # microagents a recall already showed

    def add(self, unit: Unit, typed: bool = False) -> None:
        """A unit read."""
        self.units.append(finish(unit, typed))

    def other(self, i: int, ev: dict[str, Any], kind: str) -> None:
        """An event that is no unit: kept, and counted by its kind."""
        self.others.append([i, ev])
        self.src.stats.skip(kind)

    def summary(self, summary_at: tuple[int, int, str], at: int) -> None:
        """The condensation's summary, where OpenHands inserts it (before event `at`)."""
        i, _, text = summary_at
        cond = self.by_index[i]
        self.add(Unit(id=f"u{len(self.units)}", role="user", type="summary", content=text,
                      timestamp=timestamp_of(cond.get("timestamp")), raw=cond, group=i,
                      meta={_META_KEY: {"summary_at": at}}), typed=True)

    def _use(self, response: dict[str, Any]) -> None:
        use = _usage(response, len(self.units) - 1)
        if use is not None:
            self.usage_calls.append(use)

    def action(self, i: int, ev: dict[str, Any]) -> None:
        """An action: the system prompt, a message, a finish, a tool call, or a user's command."""
        uid, ts, source, args = f"u{len(self.units)}", timestamp_of(ev.get("timestamp")), ev.get("source"), _args(ev)
        kind = ev["action"]
        if kind == "system":
            if not self.tools and isinstance(args.get("tools"), list):
                self.tools = args["tools"]
            self.add(Unit(id=uid, role="system", content=str(args.get("content") or ev.get("message") or ""),
                          timestamp=ts, raw=ev, group=i))
        elif kind == "message":
            role = "assistant" if source == "agent" else "user"  # early events name no source
            content = args.get("content")
            text, images = blocks_text(content if content is not None else ev.get("message"), src=self.src)
            urls = args.get("image_urls")
            self.add(Unit(id=uid, role=role, content=text, timestamp=ts, raw=ev, group=i,
                          images=images + (len(urls) if isinstance(urls, list) else 0)))
        elif kind == "finish":
            self._finish(i, ev, uid, ts, args)
        elif kind in _TOOL_ACTIONS and not (source == "user" and not isinstance(ev.get("tool_call_metadata"), dict)):
            self._tool_call(i, ev, uid, ts, args)
        elif kind == "run" and source == "user":
            self.add(Unit(id=uid, role="user", content=f"User executed the command:\n{args.get('command', '')}",
                          timestamp=ts, raw=ev, group=i))
        elif kind in _TOOL_ACTIONS:
            self.add(Unit(id=uid, role="user", content=f"User requested: {ev.get('message') or dumps(args)}",
                          timestamp=ts, raw=ev, group=i))
        else:
            self.other(i, ev, f"action:{kind}")

    def _finish(self, i: int, ev: dict[str, Any], uid: str, ts: float | None, args: dict[str, Any]) -> None:
        rid, msg = _response(ev)
        thought = str(args.get("thought") or "")
        said = msg.get("content") if msg else None
        text = thought
        if isinstance(said, str) and said and said != thought:
            text = f"{thought}\n{said}" if thought else said
        if rid is not None and rid not in self.responses and msg is not None:
            self.responses.add(rid)
            self._use(ev["tool_call_metadata"]["model_response"])
        if not text:
            self.other(i, ev, "action:finish")
            return
        self.add(Unit(id=uid, role="user" if ev.get("source") == "user" else "assistant", content=text,
                      timestamp=ts, raw=ev, group=i))

    def _tool_call(self, i: int, ev: dict[str, Any], uid: str, ts: float | None, args: dict[str, Any]) -> None:
        tcm = _dict(ev.get("tool_call_metadata"))
        rid, msg = _response(ev)
        cid = str(tcm.get("tool_call_id") or f"oh-{ev.get('id', i)}")
        name = str(tcm.get("function_name") or ev["action"])
        content, reasoning = "", ""
        first = rid is None or rid not in self.responses
        if msg is not None and rid is not None and first:
            self.responses.add(rid)
            said = msg.get("content")
            content = said if isinstance(said, str) else ""
            why = msg.get("reasoning_content")
            reasoning = why if isinstance(why, str) else ""
            self._use(tcm["model_response"])
        elif msg is None:
            content = str(args.get("thought") or "")
        if isinstance(ev.get("id"), int):
            self.calls[ev["id"]] = cid
        self.call_names[cid] = name
        self.add(Unit(id=uid, role="assistant", content=content, reasoning=reasoning, timestamp=ts,
                      tool_calls=[ToolCall(cid, name, _call_arguments(ev, msg, cid))], raw=ev, group=i,
                      meta={_META_KEY: {"says": True}} if first else {}))

    def observation(self, i: int, ev: dict[str, Any]) -> None:
        """An observation: a tool's result, a condensation's summary, a recall's context, or a
        user message when it answers no call."""
        uid, ts = f"u{len(self.units)}", timestamp_of(ev.get("timestamp"))
        kind = str(ev.get("observation"))
        if kind in _SILENT_OBSERVATIONS:
            self.other(i, ev, f"observation:{kind}")
            return
        if kind == "condense":
            self.add(Unit(id=uid, role="user", type="summary", content=_observation_text(ev), timestamp=ts, raw=ev,
                          group=i), typed=True)
            return
        if kind == "recall":
            text = _recall_text(_dict(ev.get("extras")), self.shown)
            if not text:
                self.other(i, ev, "observation:recall")
                return
            self.add(Unit(id=uid, role="user", content=text, timestamp=ts, raw=ev, group=i,
                          meta={_META_KEY: {"rendered": "recall"}}))
            return
        tcm = _dict(ev.get("tool_call_metadata"))
        cause = ev.get("cause")
        result_of = str(tcm["tool_call_id"]) if tcm.get("tool_call_id") is not None else self.calls.get(cause)  # type: ignore[arg-type]
        units = self.units
        if result_of is None and cause is None and "cause" not in ev and units and units[-1].tool_calls:
            result_of = units[-1].tool_calls[-1].id  # early flat events: a result follows its action
        text = _observation_text(ev)
        if result_of is not None and result_of in self.call_names:
            self.add(Unit(id=uid, role="tool", content=text, timestamp=ts, tool_call_id=result_of,
                          name=self.call_names[result_of], raw=ev, group=i))
        else:
            if (cause is not None and cause not in self.ids) or (cause is None and result_of is not None):
                self.src.warn(i, f"observation {ev.get('id')} answers no action before it (cause {cause})")
            self.add(Unit(id=uid, role="user", content=text, timestamp=ts, raw=ev, group=i))


# ---------------------------------------------------------------- writing


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).replace(tzinfo=None).isoformat()


def _message(role: str, text: str) -> dict[str, Any]:
    return {"source": "user" if role == "user" else "agent", "message": text, "action": "message",
            "args": {"content": text, "image_urls": None, "wait_for_response": False}}


def _condense(text: str) -> dict[str, Any]:
    return {"source": "environment", "message": text, "observation": "condense", "content": text, "extras": {}}


def _metadata(u: Unit, call: ToolCall, k: int, rid: str) -> dict[str, Any]:
    """A `tool_call_metadata` holding the model's response with all the unit's calls."""
    return {
        "function_name": call.name,
        "tool_call_id": call.id,
        "model_response": {
            "id": rid,
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant",
                "content": u.content or None,
                "tool_calls": [{"index": n, "id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments}}
                               for n, c in enumerate(u.tool_calls)],
            }}],
        },
        "total_calls_in_response": len(u.tool_calls),
    }


def _arguments(text: str) -> Any:
    from ctxkit.formats.common import args_object

    return args_object(text)


class _Writer:
    """Emits events in order, giving ids and mapping `cause` links as it goes."""

    def __init__(self, renumber: bool, flat: bool = False, source_ids: set[Any] | None = None) -> None:
        self.out: list[dict[str, Any]] = []
        self.renumber = renumber
        self.source_ids = source_ids or set()  # ids of the source's events (written or not)
        self.flat = flat  # an early stream: events without ids, arguments at the top
        self.ids: dict[int, int] = {}  # source id -> written id
        self.last = -1
        self.clock: str | None = None
        self.calls: dict[str, dict[str, Any]] = {}  # tool call id -> written action event

    def emit(self, ev: dict[str, Any], made: bool = False) -> dict[str, Any]:
        if self.renumber and (made or isinstance(ev.get("id"), int)):  # an event with no id keeps none
            orig = ev.get("id")
            new = max(self.last + 1, orig) if isinstance(orig, int) and not made else self.last + 1
            if isinstance(orig, int) and not made:
                self.ids.setdefault(orig, new)
            if new != orig:
                ev = {"id": new, **{k: v for k, v in ev.items() if k != "id"}}
            self.last = new
            cause = ev.get("cause")
            if isinstance(cause, int) and not made:
                mapped = self.ids.get(cause)  # an earlier event: known by now, or no longer written
                if mapped is None and cause in self.source_ids:
                    ev = {k: v for k, v in ev.items() if k != "cause"}
                elif mapped is not None and mapped != cause:
                    ev = {**ev, "cause": mapped}
            if ev.get("action") == "condensation" and isinstance(ev.get("args"), dict):
                ev = self._condensation(ev)
        if isinstance(ev.get("timestamp"), str):
            self.clock = ev["timestamp"]
        meta = ev.get("tool_call_metadata")
        if "action" in ev and isinstance(meta, dict) and meta.get("tool_call_id") is not None:
            self.calls[str(meta["tool_call_id"])] = ev
        self.out.append(ev)
        return ev

    def new_id(self, orig: Any) -> Any:
        """The id an event of the source is written with (None: not written)."""
        return self.ids.get(orig) if self.renumber else orig

    def _condensation(self, ev: dict[str, Any]) -> dict[str, Any]:
        """The forgotten ids of a condensation, as written (events no longer written dropped)."""
        args = dict(ev["args"])
        ids = args.get("forgotten_event_ids")
        if isinstance(ids, list):
            mapped = [self.ids[i] for i in ids if isinstance(i, int) and i in self.ids]
            if mapped != ids:
                args["forgotten_event_ids"] = mapped
        else:
            forgotten = _forgotten(args)
            mapped = [self.ids[i] for i in forgotten if i in self.ids]
            start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
            if mapped and (mapped[0], mapped[-1]) != (start, end):
                args["forgotten_events_start_id"], args["forgotten_events_end_id"] = mapped[0], mapped[-1]
            elif not mapped and forgotten:
                args["forgotten_events_start_id"] = args["forgotten_events_end_id"] = None
                args["forgotten_event_ids"] = []
        return ev if args == ev["args"] else {**ev, "args": args}

    def made(self, ev: dict[str, Any], ts: float | None) -> dict[str, Any]:
        if self.flat:  # in the stream's own shape: no id, time or cause; results follow their actions
            args = ev.get("args") if "action" in ev else {}
            return self.emit({**{k: v for k, v in ev.items() if k not in ("args", "cause", "source", "message")},
                              **(args or {})})
        stamp = _iso(ts) or self.clock or _iso(0.0)
        return self.emit({"id": None, "timestamp": stamp, **ev}, made=True)


def _changed(u: Unit, ev: dict[str, Any], texts: dict[str, str]) -> dict[str, Any] | None:
    """The source event with the unit's text replaced; None when it cannot hold the change."""
    kind = ev.get("action")
    args = dict(_args(ev))
    if kind is None:
        if ev.get("observation") == "recall":
            return None  # OpenHands renders its own text from the extras
        return {**ev, "content": u.content}
    if kind in ("message", "system"):
        args["content"] = u.content
        return _said(ev, args, u.content)
    if kind == "finish":
        args["thought"] = u.content
        rid, _ = _response(ev)
        if rid is not None:
            texts[rid] = u.content  # else OpenHands appends the response's old text
        return _said(ev, args, u.content)
    if kind in _TOOL_ACTIONS and u.tool_calls:
        rid, msg = _response(ev)
        if (u.meta.get(_META_KEY) or {}).get("says") or msg is None:
            if "thought" in args or msg is None:
                args["thought"] = u.content
            if rid is not None:
                texts[rid] = u.content
        out = _with_args(ev, args)
        if msg is not None:
            new_args = {c.id: c.arguments for c in u.tool_calls}
            old = {str(c.get("id")): args_text((c.get("function") or {}).get("arguments"))
                   for c in msg.get("tool_calls") or [] if isinstance(c, dict)}
            if any(old.get(k) != v for k, v in new_args.items() if k in old):
                out["tool_call_metadata"] = _patched_response(ev["tool_call_metadata"], None, new_args)
        return out
    return None


def _said(ev: dict[str, Any], args: dict[str, Any], text: str) -> dict[str, Any]:
    """A message or finish action with new text: its arguments, and its `message` when it has one."""
    out = _with_args(ev, args)
    return {**out, "message": text} if "message" in ev else out


def _patched_response(meta: dict[str, Any], text: str | None, arguments: dict[str, str] | None) -> dict[str, Any]:
    meta = copy.deepcopy(meta)
    msg = meta["model_response"]["choices"][0]["message"]
    if text is not None:
        msg["content"] = text
    for c in msg.get("tool_calls") or []:
        if isinstance(c, dict) and arguments and str(c.get("id")) in arguments and isinstance(c.get("function"), dict):
            c["function"]["arguments"] = arguments[str(c["id"])]
    return meta


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Events for a transcript (see the module doc)."""
    same = t.source_format == NAME
    kept = (t.metadata.get(_META_KEY) or {}).get("events") if same else None
    others = sorted((x for x in kept or [] if isinstance(x, list) and len(x) == 2), key=lambda x: x[0])

    def sourced(u: Unit) -> dict[str, Any] | None:
        return u.source if same and _is_event(u.source) and u.group is not None else None

    def at(u: Unit) -> int:
        info = u.meta.get(_META_KEY) if u.meta else None
        if isinstance(info, dict) and isinstance(info.get("summary_at"), int):
            return info["summary_at"]
        return u.group  # type: ignore[return-value]

    verbatim = same and all(u.raw is not None and not joins(u) for u in t.units)
    # A response's text goes with its first action; with that one gone, its other actions
    # (which repeat the whole response) must not bring the text back.
    saying = {_response(u.source)[0] for u in t.units if sourced(u) is not None
              and (u.meta.get(_META_KEY) or {}).get("says")}
    events = [ev for ev in map(sourced, t.units) if ev is not None]
    flat = bool(events) and not any("id" in ev for ev in events)
    # Ids stay as they are unless an event comes in between (or a cause is no longer written).
    w = _Writer(renumber=not flat, flat=flat,
                source_ids={ev.get("id") for ev in events} | {ev.get("id") for _, ev in others})
    texts: dict[str, str] = {}  # model response id -> its new text
    summary_cond: dict[int, dict[str, Any]] = {}  # condensation index -> what to set
    read_summary = (t.metadata.get(_META_KEY) or {}).get("summary_of") if same else None
    nexts: list[int | None] = [None] * (len(t.units) + 1)
    for k in range(len(t.units) - 1, -1, -1):
        u = t.units[k]
        nexts[k] = at(u) if sourced(u) is not None else nexts[k + 1]
    pos = 0

    def flush(upto: int | None) -> None:
        nonlocal pos
        while pos < len(others) and (upto is None or others[pos][0] < upto):
            i, ev = others[pos]
            if i in summary_cond and ev.get("action") == "condensation":
                ev = {**ev, "args": {**ev["args"], **summary_cond[i]}}
            w.emit(ev)
            pos += 1

    if isinstance(read_summary, int) and not any(
            (sourced(u) or {}).get("action") == "condensation" for u in t.units):
        summary_cond[read_summary] = {"summary": None, "summary_offset": None}  # ctxkit dropped it
    for k, u in enumerate(t.units):
        ev = sourced(u)
        flush(nexts[k])
        if ev is not None and ev.get("action") == "condensation":
            # OpenHands' own summary: its condensation event carries it (written in its place)
            if verbatim:
                continue
            view = _view_length(w, others[pos:])
            change: dict[str, Any] = {}
            if u.content != ev["args"].get("summary"):
                change["summary"] = u.content
            if view != ev["args"].get("summary_offset"):
                change["summary_offset"] = view
            if change:
                summary_cond[u.group] = change  # type: ignore[index]
            continue
        if ev is not None and u.raw is not None and not joins(u):
            rid = _response(ev)[0] if u.tool_calls else None
            if rid is not None and rid not in saying:
                texts.setdefault(rid, "")
            w.emit(u.raw)
            continue
        if ev is not None:
            changed = _changed(u, ev, texts)
            if changed is not None:
                w.emit(changed)
                continue
        _made(w, u, t)
    flush(None)
    out = w.out
    if texts:
        out = [_with_text(ev, texts) for ev in out]
    if same and (t.metadata.get(_META_KEY) or {}).get("pairs"):
        return _pairs(out), {}
    return out, {}


# What an early evaluation output puts beside an action that had no observation, and the reverse.
_NO_OBSERVATION = {"message": "No observation", "observation": "null", "content": "", "extras": {}}
_NO_ACTION = {"message": "No action", "action": "null", "args": {}}


def _pairs(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Events as [action, observation] pairs again (a lone event gets a null partner)."""
    out: list[list[dict[str, Any]]] = []
    k = 0
    while k < len(events):
        ev = events[k]
        nxt = events[k + 1] if k + 1 < len(events) else None
        if "action" in ev and nxt is not None and "observation" in nxt:
            out.append([ev, nxt])
            k += 2
            continue
        out.append([ev, dict(_NO_OBSERVATION)] if "action" in ev else [dict(_NO_ACTION), ev])
        k += 1
    return out


def _view_length(w: _Writer, rest: list[list[Any]]) -> int:
    """How many events written so far OpenHands keeps in its view (a summary's offset)."""
    hidden = _hidden(w.out)
    for _, ev in rest:  # condensations still to come forget events written already
        if ev.get("action") == "condensation" and isinstance(ev.get("args"), dict):
            hidden.update(w.new_id(i) for i in _forgotten(ev["args"]))
    return sum(1 for ev in w.out if ev.get("id") not in hidden)


def _with_text(ev: dict[str, Any], texts: dict[str, str]) -> dict[str, Any]:
    """An action whose model response got a new text (every action of that response holds it)."""
    if "action" not in ev:
        return ev
    rid, msg = _response(ev)
    if rid is None or rid not in texts or msg is None or msg.get("content") == texts[rid]:
        return ev
    return {**ev, "tool_call_metadata": _patched_response(ev["tool_call_metadata"], texts[rid], None)}


def _made(w: _Writer, u: Unit, t: Transcript) -> None:
    """Events for a unit that has no source event (made up by compaction, or another format's)."""
    last = w.out[-1] if w.out else None
    # A summary or placeholder is a `condense` observation even when it joins the message before:
    # OpenHands shows it right after that message (consecutive user messages are its own way,
    # as with recalls), and the user's own message stays as it was.
    if joins(u) and last is not None and u.role != "tool" and u.type not in ("summary", "placeholder"):
        if last.get("action") == "message" and (last.get("source") == "user") == (u.role == "user"):
            text = f"{last['args'].get('content') or ''}\n\n{u.content}"
            w.out[-1] = {**last, "message": text, "args": {**last["args"], "content": text}}
            return
        if last.get("observation") == "condense" and u.role == "user":
            text = f"{last.get('content') or ''}\n\n{u.content}"
            w.out[-1] = {**last, "message": text, "content": text}
            return
    if u.role == "system":
        args: dict[str, Any] = {"content": u.content}
        if t.tools:
            from ctxkit.formats.common import tools_as

            args["tools"] = tools_as(FORMAT.tool_shape, t.tools)
        w.made({"source": "agent", "message": u.content, "action": "system", "args": args}, u.timestamp)
    elif u.role == "tool":
        action = w.calls.get(u.tool_call_id or "")
        if action is None:
            w.made(_message("user", u.content), u.timestamp)
            return
        meta = action["tool_call_metadata"]
        kind = action.get("action")
        obs = {"think": "think", "call_tool_mcp": "mcp"}.get(str(kind), "mcp")
        extras: dict[str, Any] = {}
        if obs == "mcp":
            call = next((c for c in (_response(action)[1] or {}).get("tool_calls") or []
                         if isinstance(c, dict) and str(c.get("id")) == u.tool_call_id), {})
            fn = _dict(call.get("function"))
            extras = {"name": str(fn.get("name") or meta.get("function_name") or ""),
                      "arguments": _arguments(args_text(fn.get("arguments")))}
        w.made({"source": "agent", "message": u.content, "cause": action.get("id"), "observation": obs,
                "tool_call_metadata": meta, "content": u.content, "extras": extras}, u.timestamp)
    elif u.role == "assistant" and u.tool_calls:
        rid = f"ctxkit-{u.id}"
        for k, c in enumerate(u.tool_calls):
            w.made({"source": "agent", "message": c.name, "action": "call_tool_mcp",
                    "tool_call_metadata": _metadata(u, c, k, rid),
                    "args": {"name": c.name, "arguments": _arguments(c.arguments), "thought": u.content if k == 0 else ""}},
                   u.timestamp)
    elif u.role == "assistant":
        if u.content or u.images:
            w.made(_message("assistant", u.content), u.timestamp)
    elif u.type in ("summary", "placeholder"):
        w.made(_condense(u.content), u.timestamp)
    else:
        w.made(_message("user", u.content), u.timestamp)


# ---------------------------------------------------------------- validating


_OPENHANDS_TOOL_META = ("function_name", "tool_call_id", "model_response")


def _problems(records: Any, where: str) -> list[str]:
    """An OpenHands event stream as `event_from_dict` and the View read it: each event one
    action or one observation, ids unique and increasing, every `cause` an earlier event, every
    tool result's call an earlier action's, a condensation's forgotten ids earlier events and
    its summary with its offset."""
    if not isinstance(records, list):
        return [f"{where}events: not a list"]
    out: list[str] = []
    if records and all(isinstance(r, list) for r in records):  # early output: [action, observation] pairs
        for i, pair in enumerate(records):
            if len(pair) != 2 or not (isinstance(pair[0], dict) and "action" in pair[0]
                                      and isinstance(pair[1], dict) and "observation" in pair[1]):
                out.append(f"{where}pair {i + 1}: not [action, observation]")
        records = [e for pair in records for e in pair]
    seen: set[int] = set()
    calls: set[str] = set()
    last = -1
    # Early (OpenDevin) streams have no ids at all, and flat arguments; results follow actions.
    flat = not any(isinstance(ev, dict) and "id" in ev for ev in records)
    for i, ev in enumerate(records):
        at = f"{where}event {i + 1}"
        if not isinstance(ev, dict) or (("action" in ev) == ("observation" in ev)):
            out.append(f"{at}: not an event with exactly one of `action` and `observation`")
            continue
        eid = ev.get("id")
        if flat or ("id" not in ev and "null" in (ev.get("action"), ev.get("observation"))):
            pass  # no ids at all, or a null partner of a pair
        elif not isinstance(eid, int) or isinstance(eid, bool) or eid in seen or eid <= last:
            out.append(f"{at}: id {eid!r} is not a new integer above the one before ({last})")
        else:
            seen.add(eid)
            last = eid
        if ev.get("source") not in (None, "agent", "user", "environment"):
            out.append(f"{at}: unknown source {ev.get('source')!r}")
        meta = ev.get("tool_call_metadata")
        if meta is not None and (not isinstance(meta, dict) or any(k not in meta for k in _OPENHANDS_TOOL_META)):
            out.append(f"{at}: tool_call_metadata without " + ", ".join(_OPENHANDS_TOOL_META))
            meta = None
        if "action" in ev:
            args = ev.get("args", ev if flat else {})
            if not isinstance(args, dict):
                out.append(f"{at}: args is not an object")
                continue
            if ev["action"] in ("message", "system") and not isinstance(args.get("content"), str):
                out.append(f"{at}: {ev['action']} without its text in args.content")
            if meta is not None:
                calls.add(str(meta["tool_call_id"]))
            if ev["action"] == "condensation":
                ids = args.get("forgotten_event_ids")
                start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
                ranged = start is not None and end is not None
                if (ids is not None) == ranged:
                    out.append(f"{at}: condensation needs forgotten_event_ids or a start..end range, not both")
                elif isinstance(ids, list) and any(x not in seen for x in ids):
                    out.append(f"{at}: condensation forgets ids that are no earlier event")
                if (args.get("summary") is None) != (args.get("summary_offset") is None):
                    out.append(f"{at}: condensation summary and summary_offset go together")
            continue
        if not isinstance(ev.get("content", ""), str):
            out.append(f"{at}: observation content is not text")
        cause = ev.get("cause")
        if cause is not None and cause not in seen:
            out.append(f"{at}: cause {cause!r} is no earlier event")
        if meta is not None and str(meta["tool_call_id"]) not in calls:
            out.append(f"{at}: result of tool call {meta['tool_call_id']} that no earlier action made")
    return out[:MAX_PROBLEMS]



validate = agent_log(_problems, MESSAGES_KEY)


FORMAT = Format(
    name=NAME,
    label="OpenHands event stream",
    shape="messages",
    detect=detect,
    read=read,
    write=write,
    validate=validate,
    agent="OpenHands",
    detect_object=detect_conversation,
    key=MESSAGES_KEY,
    compaction=True,
    tool_shape="openai",  # the system action's tools
)
