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

from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, agent_log
from ctxkit.formats.common import Source, args_text, blocks_text, dumps, finish, timestamp_of
from ctxkit.formats.openhands_events import (
    CONDENSATIONS,
    META_KEY,
    NAME,
    TOOL_ACTIONS,
    TOOL_SHAPE,
    as_dict,
    event_args,
    hidden_ids,
    is_event,
    response_of,
)
from ctxkit.formats.openhands_write import write
from ctxkit.model import ToolCall, Transcript, Unit

MESSAGES_KEY = "history"  # the events of an evaluation output line
# The skip kind counting events an OpenHands condensation made the model forget.
COMPACTED = "forgotten by OpenHands' condensation"

# Events the model never reads (OpenHands' ConversationMemory renders nothing for them).
_SILENT_OBSERVATIONS = frozenset({"agent_state_changed", "null", "success", "loop_detection"})
_STATE_KEYS = ("thought", "is_input", "blocking", "is_static", "cwd", "hidden", "confirmation_state",
               "security_risk", "impl_source", "translated_ipython_code", "include_extra", "kernel_init_code",
               "keep_prompt", "is_confirmed", "action_risk")


def _is_pair(rec: Any) -> bool:
    """An early evaluation output's history item: `[action, observation]`."""
    return isinstance(rec, list) and len(rec) == 2 and all(is_event(e) for e in rec)


def detect(obj: Any) -> bool:
    """Events shaped `{id, source, action | observation, ...}` (or pairs of them)."""
    records = obj if isinstance(obj, list) else [obj]
    hits = 0
    for rec in records[:20]:
        if _is_pair(rec):
            rec = rec[0]
        if not isinstance(rec, dict):
            return False
        if is_event(rec) and any(k in rec for k in ("id", "source", "args", "cause", "extras", "content", "thought")):
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


def _call_arguments(ev: dict[str, Any], msg: dict[str, Any] | None, call_id: str) -> str:
    """The arguments the model wrote for this call, else the action's args (less bookkeeping)."""
    for c in (msg or {}).get("tool_calls") or []:
        if isinstance(c, dict) and str(c.get("id")) == call_id and isinstance(c.get("function"), dict):
            return args_text(c["function"].get("arguments"))
    return dumps({k: v for k, v in event_args(ev).items() if k not in _STATE_KEYS})


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
        elif is_event(rec) and not paired:
            events.append((i, rec))
        else:
            what = "an [action, observation] pair" if paired else "an OpenHands event with an `action` or `observation` kind"
            src.bad(i, f"expected {what}", rec)
    end = 2 * len(records) if paired else len(records)

    # What OpenHands' View hides: the events every condensation forgets, and the condensations.
    hidden = hidden_ids(ev for _, ev in events)
    forgotten = set() if src.include_compacted else hidden
    summary_at: tuple[int, int, str] | None = None  # (condensation index, insert before index, text)
    kept = [(i, ev) for i, ev in events if ev.get("id") not in hidden]
    for i, ev in reversed(events):
        args = as_dict(ev.get("args"))
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
            r.other(i, ev, COMPACTED if ev.get("action") not in CONDENSATIONS else f"action:{ev['action']}")
        elif isinstance(ev.get("action"), str):
            r.action(i, ev)
        else:
            r.observation(i, ev)
    if summary_at is not None and summary_at[1] >= end:
        r.summary(summary_at, end)

    metadata: dict[str, Any] = {}
    if r.others or summary_at is not None or paired:
        metadata[META_KEY] = {"events": r.others}
        if summary_at is not None:
            metadata[META_KEY]["summary_of"] = summary_at[0]
        if paired:
            metadata[META_KEY]["pairs"] = True
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
                      meta={META_KEY: {"summary_at": at}}), typed=True)

    def _use(self, response: dict[str, Any]) -> None:
        use = _usage(response, len(self.units) - 1)
        if use is not None:
            self.usage_calls.append(use)

    def action(self, i: int, ev: dict[str, Any]) -> None:
        """An action: the system prompt, a message, a finish, a tool call, or a user's command."""
        uid, ts, source, args = f"u{len(self.units)}", timestamp_of(ev.get("timestamp")), ev.get("source"), event_args(ev)
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
        elif kind in TOOL_ACTIONS and not (source == "user" and not isinstance(ev.get("tool_call_metadata"), dict)):
            self._tool_call(i, ev, uid, ts, args)
        elif kind == "run" and source == "user":
            self.add(Unit(id=uid, role="user", content=f"User executed the command:\n{args.get('command', '')}",
                          timestamp=ts, raw=ev, group=i))
        elif kind in TOOL_ACTIONS:
            self.add(Unit(id=uid, role="user", content=f"User requested: {ev.get('message') or dumps(args)}",
                          timestamp=ts, raw=ev, group=i))
        else:
            self.other(i, ev, f"action:{kind}")

    def _finish(self, i: int, ev: dict[str, Any], uid: str, ts: float | None, args: dict[str, Any]) -> None:
        rid, msg = response_of(ev)
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
        tcm = as_dict(ev.get("tool_call_metadata"))
        rid, msg = response_of(ev)
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
                      meta={META_KEY: {"says": True}} if first else {}))

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
            text = _recall_text(as_dict(ev.get("extras")), self.shown)
            if not text:
                self.other(i, ev, "observation:recall")
                return
            self.add(Unit(id=uid, role="user", content=text, timestamp=ts, raw=ev, group=i,
                          meta={META_KEY: {"rendered": "recall"}}))
            return
        tcm = as_dict(ev.get("tool_call_metadata"))
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


# write and tool_shape: its parts kept in openhands_write and openhands_events
FORMAT = Format.of_module(__name__, label="OpenHands event stream", shape="messages", write=write,
                          tool_shape=TOOL_SHAPE, agent="OpenHands",
                          detect_object=detect_conversation, compaction=True)
