"""ATIF, the Agent Trajectory Interchange Format (Harbor RFC 0001, v1.4 to v1.6).

One JSON object per trajectory: `schema_version` ("ATIF-v1.x"), `session_id`, `agent` {name,
version, model_name, tool_definitions, extra}, `steps`, and optional `notes`, `final_metrics`,
`continued_trajectory_ref`, `extra`. A step is `{step_id (1, 2, ...), timestamp, source:
system|user|agent, message, ...}`; an agent step adds `model_name`, `reasoning_effort`,
`reasoning_content`, `tool_calls` [{tool_call_id, function_name, arguments (an object)}],
`metrics` {prompt_tokens, completion_tokens, cached_tokens, cost_usd, prompt_token_ids,
completion_token_ids, logprobs, extra}; any step may hold an `observation` {results:
[{source_call_id, content, subagent_trajectory_ref}]}. A message or result content is a string
or (v1.6) a list of text and image parts.

Read: a step is a unit (system, user, assistant), then one tool unit per observation result,
paired by `source_call_id` (a result without one, such as Terminus-2's terminal output, is a
tool unit with no call id). All units of a step share the step as their `raw` record, so an
untouched step is written back as it was (renumbered when steps before it were removed).
An agent step's `metrics` is the provider's count of the call that produced it (prompt tokens
include cached ones, as in Claude Code and Codex usage): truth over ctxkit's estimate.

Written from another format: a step per unit, each tool result in the observation of the step
that made its call (the ATIF pairing rule: a `source_call_id` names a call of its own step);
a result whose call is not in the step before it goes there with no `source_call_id` and its
id in the step's `extra.ctxkit.call_ids`, or in an agent step of its own marked
`extra.ctxkit.observation_only` when no step can hold it; a summary or placeholder unit says
so in `extra.ctxkit.type`. So reading the written file gives back the same units, and writing
that again gives the same JSON. Provider usage becomes the metrics of the step whose call it
counts, and their sums `final_metrics`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ctxkit.formats.base import Format, never
from ctxkit.formats.checks import MAX_PROBLEMS, parsed
from ctxkit.formats.common import (
    Source,
    args_object,
    args_text,
    dumps,
    finish,
    joins,
    link_group_sizes,
    raw_groups,
    timestamp_of,
    tools_as,
)
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "atif"
VERSION = "ATIF-v1.4"  # written when no later field is needed (tool_definitions: v1.5)

SOURCES = {"system": "system", "user": "user", "agent": "assistant"}
_STEP_KEYS = (
    "step_id", "timestamp", "source", "model_name", "reasoning_effort", "message", "reasoning_content",
    "tool_calls", "observation", "metrics", "is_copied_context", "extra",
)
_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")
_MADE_TYPES = ("summary", "placeholder")  # types classification would not give back


def detect(obj: Any) -> bool:
    """A trajectory object: `steps` beside a `schema_version` that starts with "ATIF"."""
    if isinstance(obj, list):
        return bool(obj) and all(detect(o) for o in obj[:5])
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("steps"), list)
        and str(obj.get("schema_version", "")).startswith("ATIF")
    )


# ---------------------------------------------------------------- reading


def _content(value: Any) -> tuple[str, int]:
    """Text and image count of a message or result: a string or a list of content parts."""
    if value is None:
        return "", 0
    if isinstance(value, str):
        return value, 0
    if isinstance(value, list):
        texts, images = [], 0
        for part in value:
            if isinstance(part, dict) and part.get("type") == "image":
                images += 1
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts), images
    return dumps(value), 0


def _result_text(result: dict[str, Any]) -> tuple[str, int]:
    """What a tool unit holds of an observation result: its content, or, when it has none,
    the subagent trajectories it refers to (as JSON)."""
    text, images = _content(result.get("content"))
    if not text and result.get("subagent_trajectory_ref") is not None:
        text = dumps(result["subagent_trajectory_ref"])
    return text, images


def _ctxkit(step: dict[str, Any]) -> dict[str, Any]:
    extra = step.get("extra")
    own = extra.get("ctxkit") if isinstance(extra, dict) else None
    return own if isinstance(own, dict) else {}


def _calls_of(step: dict[str, Any]) -> list[ToolCall]:
    """A step's tool calls; arguments as the JSON text ctxkit kept when it was not the object's
    compact form (`extra.ctxkit.arguments`: a source's `{"a": 1}` with its spaces)."""
    texts = _ctxkit(step).get("arguments")
    texts = texts if isinstance(texts, dict) else {}
    out = []
    for c in step.get("tool_calls") or []:
        if isinstance(c, dict):
            cid = str(c.get("tool_call_id") or "")
            text = texts.get(cid)
            out.append(ToolCall(cid, str(c.get("function_name") or ""),
                                text if isinstance(text, str) else args_text(c.get("arguments"))))
    return out


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(metrics: Any, after_unit: int) -> dict[str, Any] | None:
    """A provider usage call from a step's metrics (prompt tokens already include cached)."""
    if not isinstance(metrics, dict):
        return None
    prompt = _int(metrics.get("prompt_tokens"))
    if not prompt:
        return None
    extra = metrics["extra"] if isinstance(metrics.get("extra"), dict) else {}
    call = {
        "after_unit": after_unit,
        "input_tokens": prompt,
        "cache_read_tokens": _int(metrics.get("cached_tokens")) or 0,
        "output_tokens": _int(metrics.get("completion_tokens")) or 0,
    }
    write = _int(extra.get("cache_creation_input_tokens"))
    if write:
        call["cache_write_tokens"] = write
    return call


def read(obj: dict[str, Any], src: Source) -> Transcript:
    """Units from a trajectory object (see the module doc)."""
    root = {k: v for k, v in obj.items() if k != "steps"}
    agent: dict[str, Any] = root["agent"] if isinstance(root.get("agent"), dict) else {}
    units: list[Unit] = []
    calls: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for i, step in enumerate(obj["steps"]):
        if not isinstance(step, dict) or step.get("source") not in SOURCES:
            src.bad(i, "expected an ATIF step {step_id, source: system|user|agent, message}", step)
            continue
        own = _ctxkit(step)
        ts = timestamp_of(step.get("timestamp"))
        if not own.get("observation_only"):
            tool_calls = _calls_of(step)
            names.update((c.id, c.name) for c in tool_calls)
            text, images = _content(step.get("message"))
            reasoning = step.get("reasoning_content")
            unit = Unit(id=f"u{len(units)}", role=SOURCES[step["source"]], content=text, timestamp=ts,
                        tool_calls=tool_calls, reasoning=reasoning if isinstance(reasoning, str) else "",
                        images=images, raw=step, group=i)
            typed = own.get("type") in _MADE_TYPES
            if typed:
                unit.type = str(own["type"])
            if own.get("join") is True:
                unit.meta["join"] = True
            if step["source"] == "agent":
                call = _usage(step.get("metrics"), len(units) - 1)
                if call is not None:
                    calls.append(call)
            units.append(finish(unit, typed))
        observation = step.get("observation")
        results = observation.get("results") if isinstance(observation, dict) else None
        call_ids: list[Any] = own["call_ids"] if isinstance(own.get("call_ids"), list) else []
        for k, result in enumerate(results or []):
            if not isinstance(result, dict):
                src.bad(i, f"observation result {k + 1}: expected an object {{source_call_id, content}}", result)
                continue
            cid = result.get("source_call_id")
            if cid is None and k < len(call_ids) and call_ids[k] is not None:
                cid = call_ids[k]
            text, images = _result_text(result)
            cid = str(cid) if cid is not None else None
            units.append(finish(Unit(id=f"u{len(units)}", role="tool", content=text, timestamp=ts,
                                     tool_call_id=cid, name=names.get(cid) if cid else None, images=images,
                                     raw=step, group=i)))
    link_group_sizes(units)
    metadata: dict[str, Any] = {"atif_root": root, "atif_keys": list(obj)}
    usage: dict[str, Any] = {"source": NAME, "calls": calls}
    final = root.get("final_metrics")
    if isinstance(final, dict):
        for key, name in (("total_prompt_tokens", "total_input_tokens"),
                          ("total_completion_tokens", "total_output_tokens")):
            if _int(final.get(key)):
                usage[name] = final[key]
    if calls or len(usage) > 2:
        metadata["provider_usage"] = usage
    if isinstance(agent.get("model_name"), str):
        metadata["model"] = agent["model_name"]
    tools = agent.get("tool_definitions")
    session = root.get("session_id")
    return Transcript(
        units=units,
        id=str(session) if isinstance(session, (str, int)) and str(session) else src.tid,
        source_format=NAME,
        layout=src.layout,
        tools=[d for d in tools if isinstance(d, dict)] if isinstance(tools, list) else [],
        line=src.line,
        metadata=metadata,
    )


# ---------------------------------------------------------------- writing


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")


# Formats that are an API's or a dataset's shape, not one agent's: they name no agent.
_NO_AGENT = frozenset({"openai", "anthropic", "sharegpt", "units", NAME})


def _agent_name(t: Transcript) -> str:
    """The agent a transcript came from: an app log's own format (claude-code, codex, aider,
    and any agent format added later), mini-swe-agent by its trajectory, else unknown."""
    if t.source_format not in _NO_AGENT:
        return t.source_format
    usage = t.metadata.get("provider_usage")
    if isinstance(usage, dict) and usage.get("source") == "mini-swe-agent" or "trajectory_format" in t.envelope:
        return "mini-swe-agent"
    return str(t.metadata.get("agent") or "unknown")


def _root(t: Transcript) -> dict[str, Any]:
    """Root fields for a transcript of another format."""
    info: dict[str, Any] = t.envelope["info"] if isinstance(t.envelope.get("info"), dict) else {}
    config: dict[str, Any] = info["config"] if isinstance(info.get("config"), dict) else {}
    model_config: dict[str, Any] = config["model"] if isinstance(config.get("model"), dict) else {}
    version = t.metadata.get("version") or info.get("mini_version")  # mini-swe-agent's `info`
    model = t.metadata.get("model") or model_config.get("model_name")
    agent: dict[str, Any] = {"name": _agent_name(t), "version": str(version or "unknown")}
    if isinstance(model, str):
        agent["model_name"] = model
    if t.tools:
        agent["tool_definitions"] = tools_as(FORMAT.tool_shape, t.tools)
    return {
        "schema_version": "ATIF-v1.5" if t.tools else VERSION,
        "session_id": str(t.metadata.get("session_id") or t.id),
        "agent": agent,
    }


def _usage_by_unit(t: Transcript) -> dict[int, dict[str, Any]]:
    """Each recorded call, at the assistant unit it produced: the latest one up to the unit
    after the context the call saw (a log may record usage before or after its reply)."""
    usage = t.metadata.get("provider_usage")
    calls = usage.get("calls") if isinstance(usage, dict) else None
    out: dict[int, dict[str, Any]] = {}
    n = len(t.units)
    for call in calls or []:
        if not isinstance(call, dict) or not _int(call.get("input_tokens")):
            continue
        after = _int(call.get("after_unit"))
        top = min((after if after is not None else n - 2) + 1, n - 1)
        idx = next((i for i in range(top, -1, -1) if t.units[i].role == "assistant"), None)
        if idx is not None and idx not in out:
            out[idx] = call
    return out


def _metrics(call: dict[str, Any]) -> dict[str, Any]:
    metrics: dict[str, Any] = {"prompt_tokens": int(call["input_tokens"]),
                               "completion_tokens": int(call.get("output_tokens") or 0)}
    if call.get("cache_read_tokens"):
        metrics["cached_tokens"] = int(call["cache_read_tokens"])
    if call.get("cache_write_tokens"):
        metrics["extra"] = {"cache_creation_input_tokens": int(call["cache_write_tokens"])}
    return metrics


def _ordered(step: dict[str, Any], template: dict[str, Any] | None) -> dict[str, Any]:
    """The step's fields in the template's order, then the RFC's; None values left out."""
    order = [*(template or {}), *_STEP_KEYS]
    out = {k: step[k] for k in dict.fromkeys(order) if k in step and step[k] is not None}
    out.update((k, v) for k, v in step.items() if k not in out and v is not None)
    return out


def _with_own(step: dict[str, Any], **fields: Any) -> None:
    """Set ctxkit's own fields in the step's `extra.ctxkit`."""
    extra = dict(step.get("extra") or {})
    own = dict(extra.get("ctxkit") or {})
    own.update(fields)
    extra["ctxkit"] = own
    step["extra"] = extra


class _Builder:
    """Steps from units, one unit at a time."""

    def __init__(self, t: Transcript) -> None:
        self.same = t.source_format == NAME
        self.units = t.units
        self.usage = {} if self.same else _usage_by_unit(t)
        self.steps: list[dict[str, Any]] = []
        self.results_seen = 0  # results of the current step's template already used

    def raw(self, step: dict[str, Any]) -> None:
        n = len(self.steps) + 1
        self.steps.append(step if step.get("step_id") == n else {**step, "step_id": n})

    def template(self, u: Unit) -> dict[str, Any] | None:
        src = u.source if self.same else None
        return src if isinstance(src, dict) and src.get("source") in SOURCES else None

    def unit(self, u: Unit, index: int) -> None:
        if u.role == "tool":
            self.result(u)
            return
        source = {"system": "system", "assistant": "agent"}.get(u.role, "user")
        tpl = self.template(u)
        if tpl is not None and tpl.get("source") != source:
            tpl = None
        step: dict[str, Any] = dict(tpl) if tpl is not None else {}
        for key in ("tool_calls", "observation", "reasoning_content"):
            step.pop(key, None)
        step["step_id"] = len(self.steps) + 1
        step["source"] = source
        if tpl is None:
            step["timestamp"] = _iso(u.timestamp)
        text, _ = _content(step.get("message"))
        if tpl is None or text != u.content:
            step["message"] = u.content
        if source == "agent":
            if u.reasoning:
                step["reasoning_content"] = u.reasoning
            kept = (tpl or {}).get("tool_calls")
            if kept and tpl is not None and _calls_of(tpl) == u.tool_calls:
                step["tool_calls"] = kept
            elif u.tool_calls:
                step["tool_calls"] = [
                    {"tool_call_id": c.id, "function_name": c.name, "arguments": args_object(c.arguments)}
                    for c in u.tool_calls
                ]
                texts = {c.id: c.arguments for c, made in zip(u.tool_calls, step["tool_calls"], strict=True)
                         if args_text(made["arguments"]) != c.arguments}
                if texts:
                    _with_own(step, arguments=texts)
            if index in self.usage:
                step["metrics"] = _metrics(self.usage[index])
        else:
            for key in _AGENT_ONLY:
                step.pop(key, None)
        if u.type in _MADE_TYPES and not (tpl is not None and _ctxkit(tpl).get("type") == u.type):
            _with_own(step, type=u.type)
        if joins(u):
            _with_own(step, join=True)  # one message with the unit before, when written as chat
        self.steps.append(_ordered(step, tpl))
        self.results_seen = 0

    def result(self, u: Unit) -> None:
        cur = self.steps[-1] if self.steps else None
        own_ids = {c.get("tool_call_id") for c in (cur or {}).get("tool_calls") or [] if isinstance(c, dict)}
        if cur is None or cur.get("source") == "user":
            cur = {"step_id": len(self.steps) + 1, "timestamp": _iso(u.timestamp), "source": "agent", "message": ""}
            _with_own(cur, observation_only=True)
            cur = _ordered(cur, None)
            self.steps.append(cur)
            own_ids = set()
            self.results_seen = 0
        else:
            cur = dict(cur)
            self.steps[-1] = cur
        observation = dict(cur.get("observation") or {})
        results = list(observation.get("results") or [])
        tpl = self.template(u)
        tpl_results = ((tpl or {}).get("observation") or {}).get("results") or []
        k = self.results_seen
        base = tpl_results[k] if k < len(tpl_results) and isinstance(tpl_results[k], dict) else None
        self.results_seen += 1
        result: dict[str, Any] = dict(base) if base is not None else {}
        if base is None or _result_text(base)[0] != u.content:
            result["content"] = u.content
        if u.tool_call_id is not None and u.tool_call_id in own_ids:
            result = {"source_call_id": u.tool_call_id, **{k: v for k, v in result.items() if k != "source_call_id"}}
        else:
            result.pop("source_call_id", None)
            if u.tool_call_id is not None:
                ids = list(_ctxkit(cur).get("call_ids") or [])
                ids.extend([None] * (len(results) - len(ids)))
                ids.append(u.tool_call_id)
                _with_own(cur, call_ids=ids)
        results.append(result)
        observation["results"] = results
        cur["observation"] = observation
        self.steps[-1] = _ordered(cur, None)


def write_object(t: Transcript) -> dict[str, Any]:
    """The trajectory object for a transcript (see the module doc)."""
    same = t.source_format == NAME
    builder = _Builder(t)
    index = {id(u): i for i, u in enumerate(t.units)}
    for raw, run in raw_groups(t.units):
        if raw is not None and same and isinstance(raw, dict):
            builder.raw(raw)
            continue
        for u in run:
            builder.unit(u, index[id(u)])
    steps = builder.steps
    if same and isinstance(t.metadata.get("atif_root"), dict):
        root = dict(t.metadata["atif_root"])
        keys = t.metadata.get("atif_keys") if isinstance(t.metadata.get("atif_keys"), list) else None
    else:
        root = _root(t)
        keys = None
        if builder.usage:
            calls = list(builder.usage.values())
            final = {"total_prompt_tokens": sum(int(c["input_tokens"]) for c in calls),
                     "total_completion_tokens": sum(int(c.get("output_tokens") or 0) for c in calls)}
            cached = sum(int(c.get("cache_read_tokens") or 0) for c in calls)
            if cached:
                final["total_cached_tokens"] = cached
            root["final_metrics"] = final
    root["steps"] = steps
    if keys:
        return {k: root[k] for k in dict.fromkeys([*keys, *root]) if k in root}
    return root


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """The steps, and the root fields beside them (files use `write_object`)."""
    obj = write_object(t)
    steps = obj.pop("steps")
    return steps, obj


# ---------------------------------------------------------------- validating


_ATIF_VERSIONS = frozenset(f"ATIF-v1.{n}" for n in range(7))
_ATIF_ROOT = {"schema_version": str, "session_id": str, "agent": dict, "steps": list, "notes": str,
              "final_metrics": dict, "continued_trajectory_ref": str, "extra": dict}
_ATIF_AGENT = {"name": str, "version": str, "model_name": str, "tool_definitions": list, "extra": dict}
_ATIF_FINAL = {"total_prompt_tokens": int, "total_completion_tokens": int, "total_cached_tokens": int,
               "total_cost_usd": (int, float), "total_steps": int, "extra": dict}
_ATIF_STEP = {"step_id": int, "timestamp": str, "source": str, "model_name": str, "reasoning_effort": (str, int, float),
              "message": (str, list), "reasoning_content": str, "tool_calls": list, "observation": dict,
              "metrics": dict, "is_copied_context": bool, "extra": dict}
_ATIF_METRICS = {"prompt_tokens": int, "completion_tokens": int, "cached_tokens": int, "cost_usd": (int, float),
                 "prompt_token_ids": list, "completion_token_ids": list, "logprobs": list, "extra": dict}
_ATIF_CALL = {"tool_call_id": str, "function_name": str, "arguments": dict}
_ATIF_RESULT = {"source_call_id": str, "content": (str, list), "subagent_trajectory_ref": list}
_ATIF_REQUIRED = {"root": ("schema_version", "session_id", "agent", "steps"), "agent": ("name", "version"),
                  "step": ("step_id", "source", "message"), "call": ("tool_call_id", "function_name", "arguments")}
_ATIF_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")
_ATIF_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def _fields(obj: Any, spec: dict[str, Any], where: str, required: tuple[str, ...] = ()) -> list[str]:
    """Type, unknown-key and required-key problems of one ATIF object (null is an absent value)."""
    if not isinstance(obj, dict):
        return [f"{where}: expected an object"]
    out = [f"{where}: missing `{k}`" for k in required if obj.get(k) is None]
    for key, value in obj.items():
        if key not in spec:
            out.append(f"{where}: unknown field `{key}`")
        elif value is not None and (not isinstance(value, spec[key]) or (isinstance(value, bool) and spec[key] is not bool)):
            out.append(f"{where}.{key}: expected {getattr(spec[key], '__name__', 'a number or text')}")
    return out


def _parts(value: Any, where: str) -> list[str]:
    """A v1.6 list of content parts: text parts with `text`, image parts with `source`."""
    if not isinstance(value, list):
        return []
    out = []
    for k, part in enumerate(value):
        at = f"{where}[{k}]"
        if not isinstance(part, dict) or part.get("type") not in ("text", "image") or set(part) - {"type", "text", "source"}:
            out.append(f"{at}: expected a content part {{type: text|image, text | source}}")
        elif part["type"] == "text" and (not isinstance(part.get("text"), str) or part.get("source") is not None):
            out.append(f"{at}: a text part needs `text` and no `source`")
        elif part["type"] == "image":
            src = part.get("source")
            if (part.get("text") is not None or not isinstance(src, dict) or src.get("media_type") not in _ATIF_IMAGE_TYPES
                    or not isinstance(src.get("path"), str) or set(src) - {"media_type", "path"}):
                out.append(f"{at}: an image part needs `source` {{media_type, path}} and no `text`")
    return out


def _atif(obj: Any) -> list[str]:
    """One trajectory object against the ATIF rules."""
    out = _fields(obj, _ATIF_ROOT, "trajectory", _ATIF_REQUIRED["root"])
    if not isinstance(obj, dict):
        return out
    if obj.get("schema_version") not in _ATIF_VERSIONS:
        out.append(f"schema_version: {obj.get('schema_version')!r} is not ATIF-v1.0 to ATIF-v1.6")
    out.extend(_fields(obj.get("agent"), _ATIF_AGENT, "agent", _ATIF_REQUIRED["agent"]))
    if obj.get("final_metrics") is not None:
        out.extend(_fields(obj["final_metrics"], _ATIF_FINAL, "final_metrics"))
    steps: list[Any] = obj["steps"] if isinstance(obj.get("steps"), list) else []
    if not steps:
        out.append("steps: at least one step")
    for i, step in enumerate(steps):
        at = f"step {i + 1}"
        out.extend(_fields(step, _ATIF_STEP, at, _ATIF_REQUIRED["step"]))
        if not isinstance(step, dict):
            continue
        if step.get("step_id") != i + 1:
            out.append(f"{at}: step_id {step.get('step_id')!r}, expected {i + 1} (sequential from 1)")
        if step.get("source") not in ("system", "user", "agent"):
            out.append(f"{at}: source {step.get('source')!r} is not system, user or agent")
        elif step["source"] != "agent":
            out.extend(f"{at}: `{k}` only applies to agent steps" for k in _ATIF_AGENT_ONLY if step.get(k) is not None)
        if isinstance(step.get("timestamp"), str) and timestamp_of(step["timestamp"]) is None:
            out.append(f"{at}: timestamp {step['timestamp']!r} is not ISO 8601")
        out.extend(_parts(step.get("message"), f"{at}.message"))
        ids = set()
        for k, call in enumerate(step.get("tool_calls") or []):
            out.extend(_fields(call, _ATIF_CALL, f"{at}.tool_calls[{k}]", _ATIF_REQUIRED["call"]))
            if isinstance(call, dict):
                ids.add(call.get("tool_call_id"))
        if isinstance(step.get("metrics"), dict):
            out.extend(_fields(step["metrics"], _ATIF_METRICS, f"{at}.metrics"))
        observation = step.get("observation")
        if observation is None:
            continue
        out.extend(_fields(observation, {"results": list}, f"{at}.observation", ("results",)))
        results = observation.get("results") if isinstance(observation, dict) else None
        for k, result in enumerate(results if isinstance(results, list) else []):
            where = f"{at}.observation.results[{k}]"
            out.extend(_fields(result, _ATIF_RESULT, where))
            if not isinstance(result, dict):
                continue
            out.extend(_parts(result.get("content"), f"{where}.content"))
            cid = result.get("source_call_id")
            if cid is not None and cid not in ids:
                out.append(f"{where}: source_call_id {cid!r} is not a tool call of its step")
            for n, ref in enumerate(result.get("subagent_trajectory_ref") or []):
                out.extend(_fields(ref, {"session_id": str, "trajectory_path": str, "extra": dict},
                                   f"{where}.subagent_trajectory_ref[{n}]", ("session_id",)))
    return out[:MAX_PROBLEMS]


def validate(data: Any) -> list[str]:
    """Harbor's ATIF rules on a trajectory, or a dataset of them (a JSON array or one per line)."""
    found = parsed(data)
    items = found if isinstance(found, list) else [found]
    out: list[str] = []
    for n, obj in enumerate(items):
        out.extend(f"trajectory {n + 1}: {p}" if len(items) > 1 else p for p in _atif(obj))
    return out


# tool_shape: its agent's tool_definitions
FORMAT = Format.of_module(__name__, label="ATIF trajectory", shape="object", detect=never,
                          write=write_object, detect_object=detect, item_key="steps",
                          tool_shape="openai")
