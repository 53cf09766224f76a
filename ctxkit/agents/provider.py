"""The recording provider: a local LLM endpoint that records what an agent sends.

One HTTP server, bound to 127.0.0.1 only, that speaks enough of four provider APIs to satisfy
the real coding agents: the Anthropic Messages API (`/v1/messages`, streaming and not, and
`count_tokens`), the OpenAI Responses API (`/v1/responses`) and Chat Completions
(`/v1/chat/completions`), and the Gemini API (`:generateContent`, `:streamGenerateContent`,
`:countTokens`). It records every request whole and answers from a script: text, or tool calls,
so an agent can be driven through real tool use and write a real log of its own version.

It never forwards anything anywhere, and it keeps no credential: the headers an agent sends its
key in are recorded as `<redacted>`.

Which request takes the next scripted step: a request that offers the agent's tools (the main
loop). Side requests (a title, a routing classifier, a "who speaks next" check) carry no tools,
or ask for JSON; they get a short text, or the smallest JSON their schema allows, and leave the
script where it is. When the script is used up, every main request gets `Done.`

    >>> with RecordingProvider([Step(text="hello")]) as p:
    ...     p.url.startswith("http://127.0.0.1:")
    True
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

HOST = "127.0.0.1"  # never another address: the machine may have one that reaches out
REDACTED = "<redacted>"
_SECRET_HEADERS = frozenset(
    ("authorization", "x-api-key", "x-goog-api-key", "api-key", "proxy-authorization", "cookie")
)


@dataclass(frozen=True)
class ToolCall:
    """A tool call the provider answers with: `input` a dict of arguments, or a string for a
    free-form (custom) tool such as Codex's `apply_patch`."""

    name: str
    input: dict[str, Any] | str = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One scripted answer: text, tool calls, or both (text first)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()

    @staticmethod
    def calls(*calls: ToolCall, text: str = "") -> Step:
        return Step(text=text, tool_calls=tuple(calls))


DONE = Step(text="Done.")


@dataclass
class Recorded:
    """One request as the agent sent it."""

    index: int
    api: str  # anthropic, responses, chat, gemini, or other
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    time: float
    model: str = ""
    main: bool = False  # it offered tools and took a scripted step
    step: int | None = None  # the index of the step it took
    stream: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _without_key(path: str) -> str:
    """The path with the value of a `key=` query parameter (the Gemini API's key) redacted."""
    return re.sub(r"([?&]key=)[^&#]*", r"\1" + REDACTED, path)


def _api_of(path: str) -> str:
    p = urlsplit(path).path
    if p.endswith("/messages") or p.endswith("/messages/count_tokens"):
        return "anthropic"
    if p.endswith("/responses"):
        return "responses"
    if p.endswith("/chat/completions"):
        return "chat"
    if ":generateContent" in p or ":streamGenerateContent" in p or ":countTokens" in p:
        return "gemini"
    return "other"


def offers_tools(api: str, body: Any) -> bool:
    """Whether a request offers the agent's tools: the main loop does, side calls do not."""
    if not isinstance(body, dict):
        return False
    tools = body.get("tools")
    if api == "gemini":
        return any(isinstance(t, dict) and t.get("functionDeclarations") for t in tools or [])
    return bool(tools)


def wants_json(api: str, body: Any) -> dict[str, Any] | None:
    """The JSON schema a side request asks its answer to follow (Gemini's `responseSchema` or
    `responseJsonSchema`, OpenAI's `json_schema` formats, Anthropic's `output_config.format`),
    `{"type": "object"}` when it asks for JSON without one, or None."""
    if not isinstance(body, dict):
        return None
    if api == "gemini":
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            return schema if isinstance(schema, dict) else {"type": "object"}
        return None
    fmt = None
    if api == "responses":
        fmt = (body.get("text") or {}).get("format")
    elif api == "chat":
        fmt = body.get("response_format")
    elif api == "anthropic":
        fmt = (body.get("output_config") or {}).get("format") or body.get("output_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object"):
        schema = fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else {"type": "object"}
    return None


def smallest_json(schema: Any) -> Any:
    """The smallest value a JSON schema allows: its const or first enum value, the first of its
    alternatives, its required properties, the shortest strings and lists it allows, zero."""
    if not isinstance(schema, dict):
        return {}
    if "const" in schema:
        return schema["const"]
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return smallest_json(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    kind = str(kind).lower() if kind else ("object" if "properties" in schema else "string")
    if kind == "object":
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {k: smallest_json(props.get(k)) for k in required}
    if kind == "array":
        return [smallest_json(schema.get("items")) for _ in range(int(schema.get("minItems") or 0))]
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)
        return int(low) if kind == "integer" else low
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    # a strict schema's minLength would reject "" (Codex's thread title asks for 1 or more)
    return "x" * int(schema.get("minLength") or 0)


class RecordingProvider:
    """A local endpoint for agents: records each request, answers from `script`.

    `usage(recorded)` gives the input tokens the provider reports for a request (default: the
    size of its JSON body / 4, which an agent only logs); `on_request` is called with each
    request as it arrives."""

    def __init__(
        self,
        script: Sequence[Step] = (),
        *,
        usage: Callable[[Recorded], int] | None = None,
        on_request: Callable[[Recorded], None] | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.script = list(script)
        self.requests: list[Recorded] = []
        self._usage = usage or (lambda r: len(json.dumps(r.body)) // 4 if r.body else 0)
        self._on_request = on_request
        self._delay_s = delay_s
        self._lock = threading.Lock()
        self._next_step = 0
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- life cycle

    def start(self) -> RecordingProvider:
        handler = _handler_for(self)
        self._server = ThreadingHTTPServer((HOST, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> RecordingProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the recording provider is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    # --- what was recorded

    def main_requests(self) -> list[Recorded]:
        """The requests that offered tools (the agent's own loop), in order."""
        return [r for r in self.requests if r.main]

    def steps_used(self) -> int:
        return self._next_step

    # --- answering

    def _record(self, method: str, path: str, headers: dict[str, str], body: Any) -> Recorded:
        path = _without_key(path)
        api = _api_of(path)
        model = ""
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            model = body["model"]
        elif api == "gemini":
            model = urlsplit(path).path.rsplit("/", 1)[-1].split(":", 1)[0]
        clean = {k: (REDACTED if k.lower() in _SECRET_HEADERS else v) for k, v in headers.items()}
        stream = bool(isinstance(body, dict) and body.get("stream")) or (
            ":streamGenerateContent" in path
        )
        with self._lock:
            rec = Recorded(
                index=len(self.requests),
                api=api,
                method=method,
                path=path,
                headers=clean,
                body=body,
                time=time.time(),
                model=model,
                stream=stream,
            )
            counting = urlsplit(path).path.endswith(("count_tokens", ":countTokens"))
            if not counting and api != "other" and offers_tools(api, body) and not wants_json(api, body):
                rec.main = True
                rec.step = self._next_step
                self._next_step += 1
            self.requests.append(rec)
        if self._on_request is not None:
            self._on_request(rec)
        return rec

    def step_for(self, rec: Recorded) -> Step:
        """The scripted step a request is answered with; a side request gets `ok`, or the
        smallest JSON its schema allows."""
        if rec.main and rec.step is not None and rec.step < len(self.script):
            return self.script[rec.step]
        if rec.main:
            return DONE
        schema = wants_json(rec.api, rec.body)
        return Step(text="ok" if schema is None else json.dumps(smallest_json(schema)))

    def input_tokens(self, rec: Recorded) -> int:
        return int(self._usage(rec))

    def next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"


# --- the wire formats ------------------------------------------------------------------------


def _anthropic(p: RecordingProvider, rec: Recorded, step: Step) -> Iterable[tuple[str, Any]]:
    """(event, data) pairs of a Messages API answer (one pair, event "", when not streaming)."""
    body = rec.body if isinstance(rec.body, dict) else {}
    blocks: list[dict[str, Any]] = []
    if step.text:
        blocks.append({"type": "text", "text": step.text})
    for call in step.tool_calls:
        args = call.input if isinstance(call.input, dict) else {"input": call.input}
        blocks.append({"type": "tool_use", "id": p.next_id("toolu_"), "name": call.name, "input": args})
    stop = "tool_use" if step.tool_calls else "end_turn"
    usage = {
        "input_tokens": p.input_tokens(rec),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": max(1, len(json.dumps(blocks)) // 4),
    }
    message = {
        "id": p.next_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if not rec.stream:
        yield "", message
        return
    start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            yield "content_block_start", {
                "type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""},
            }
            yield "content_block_delta", {
                "type": "content_block_delta", "index": i,
                "delta": {"type": "text_delta", "text": block["text"]},
            }
        else:
            yield "content_block_start", {
                "type": "content_block_start", "index": i,
                "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}},
            }
            yield "content_block_delta", {
                "type": "content_block_delta", "index": i,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
            }
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": usage["output_tokens"]},
    }
    yield "message_stop", {"type": "message_stop"}


def _responses(p: RecordingProvider, rec: Recorded, step: Step) -> Iterable[tuple[str, Any]]:
    """Events of an OpenAI Responses API answer (the response object alone when not streaming)."""
    body = rec.body if isinstance(rec.body, dict) else {}
    kinds = {
        t.get("name"): t.get("type")
        for t in body.get("tools") or []
        if isinstance(t, dict)
    }
    items: list[dict[str, Any]] = []
    if step.text:
        items.append({
            "id": p.next_id("msg_"), "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        })
    for call in step.tool_calls:
        if isinstance(call.input, str) or kinds.get(call.name) == "custom":
            text = call.input if isinstance(call.input, str) else json.dumps(call.input)
            items.append({
                "id": p.next_id("ctc_"), "type": "custom_tool_call", "status": "completed",
                "call_id": p.next_id("call_"), "name": call.name, "input": text,
            })
        else:
            items.append({
                "id": p.next_id("fc_"), "type": "function_call", "status": "completed",
                "call_id": p.next_id("call_"), "name": call.name,
                "arguments": json.dumps(call.input),
            })
    tokens_in = p.input_tokens(rec)
    tokens_out = max(1, len(json.dumps(items)) // 4)
    response = {
        "id": p.next_id("resp_"), "object": "response", "created_at": int(time.time()),
        "status": "completed", "model": body.get("model", "gpt"), "output": items,
        "usage": {
            "input_tokens": tokens_in, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens_out, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens_in + tokens_out,
        },
    }
    if not rec.stream:
        yield "", response
        return
    seq = itertools.count()
    pending = dict(response, status="in_progress", output=[], usage=None)
    yield "response.created", {"type": "response.created", "sequence_number": next(seq), "response": pending}
    yield "response.in_progress", {
        "type": "response.in_progress", "sequence_number": next(seq), "response": pending,
    }
    for i, item in enumerate(items):
        opened = dict(item, status="in_progress")
        if item["type"] == "message":
            opened["content"] = []
        yield "response.output_item.added", {
            "type": "response.output_item.added", "sequence_number": next(seq), "output_index": i,
            "item": opened,
        }
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            yield "response.content_part.added", {
                "type": "response.content_part.added", "sequence_number": next(seq),
                "item_id": item["id"], "output_index": i, "content_index": 0, "part": part,
            }
            yield "response.output_text.delta", {
                "type": "response.output_text.delta", "sequence_number": next(seq),
                "item_id": item["id"], "output_index": i, "content_index": 0, "delta": text,
            }
            yield "response.output_text.done", {
                "type": "response.output_text.done", "sequence_number": next(seq),
                "item_id": item["id"], "output_index": i, "content_index": 0, "text": text,
            }
            yield "response.content_part.done", {
                "type": "response.content_part.done", "sequence_number": next(seq),
                "item_id": item["id"], "output_index": i, "content_index": 0,
                "part": dict(part, text=text),
            }
        elif item["type"] == "function_call":
            yield from _call_input_events("function_call_arguments", "arguments", item, i, seq)
        else:
            yield from _call_input_events("custom_tool_call_input", "input", item, i, seq)
        yield "response.output_item.done", {
            "type": "response.output_item.done", "sequence_number": next(seq), "output_index": i,
            "item": item,
        }
    yield "response.completed", {
        "type": "response.completed", "sequence_number": next(seq), "response": response,
    }


def _call_input_events(
    kind: str, key: str, item: dict[str, Any], i: int, seq: Iterator[int]
) -> Iterable[tuple[str, Any]]:
    """The delta and done events of a call's input (`arguments`, a custom tool's `input`),
    streamed whole in one delta."""
    yield f"response.{kind}.delta", {
        "type": f"response.{kind}.delta", "sequence_number": next(seq),
        "item_id": item["id"], "output_index": i, "delta": item[key],
    }
    yield f"response.{kind}.done", {
        "type": f"response.{kind}.done", "sequence_number": next(seq),
        "item_id": item["id"], "output_index": i, key: item[key],
    }


def _chat(p: RecordingProvider, rec: Recorded, step: Step) -> Iterable[tuple[str, Any]]:
    """Chunks of a Chat Completions answer (the completion alone when not streaming); a stream
    ends with `[DONE]`."""
    body = rec.body if isinstance(rec.body, dict) else {}
    calls = [
        {
            "id": p.next_id("call_"), "type": "function",
            "function": {
                "name": c.name,
                "arguments": c.input if isinstance(c.input, str) else json.dumps(c.input),
            },
        }
        for c in step.tool_calls
    ]
    finish = "tool_calls" if calls else "stop"
    tokens_in = p.input_tokens(rec)
    usage = {
        "prompt_tokens": tokens_in, "completion_tokens": max(1, len(step.text) // 4),
        "total_tokens": tokens_in + max(1, len(step.text) // 4),
    }
    ident, created, model = p.next_id("chatcmpl-"), int(time.time()), body.get("model", "gpt")
    if not rec.stream:
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
        if calls:
            message["tool_calls"] = calls
        yield "", {
            "id": ident, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage,
        }
        return

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    yield "", chunk({"role": "assistant", "content": step.text or ""})
    for i, c in enumerate(calls):
        yield "", chunk({"tool_calls": [dict(c, index=i)]})
    last = chunk({}, finish)
    last["usage"] = usage
    yield "", last
    yield "", "[DONE]"


def _gemini(p: RecordingProvider, rec: Recorded, step: Step) -> Iterable[tuple[str, Any]]:
    """Chunks of a Gemini generateContent answer (one when not streaming)."""
    parts: list[dict[str, Any]] = []
    if step.text:
        parts.append({"text": step.text})
    for call in step.tool_calls:
        args = call.input if isinstance(call.input, dict) else {"input": call.input}
        parts.append({"functionCall": {"name": call.name, "args": args}})
    tokens_in = p.input_tokens(rec)
    tokens_out = max(1, len(json.dumps(parts)) // 4)
    yield "", {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": tokens_in, "candidatesTokenCount": tokens_out,
            "totalTokenCount": tokens_in + tokens_out,
        },
        "modelVersion": rec.model,
        "responseId": p.next_id("resp_"),
    }


_ANSWERS = {"anthropic": _anthropic, "responses": _responses, "chat": _chat, "gemini": _gemini}


def _json_answer(p: RecordingProvider, rec: Recorded) -> Any:
    """Answers that are not a model's turn: token counts, and a JSON side request."""
    path = urlsplit(rec.path).path
    if path.endswith("count_tokens"):
        return {"input_tokens": p.input_tokens(rec)}
    if path.endswith(":countTokens"):
        return {"totalTokens": p.input_tokens(rec)}
    return None


def _handler_for(p: RecordingProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send_json(self, status: int, data: Any) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            p._record("GET", self.path, dict(self.headers), None)
            self._send_json(404, {"error": {"message": "not served by the recording provider"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            rec = p._record("POST", self.path, dict(self.headers), body)
            if p._delay_s:
                time.sleep(p._delay_s)
            counted = _json_answer(p, rec)
            if counted is not None:
                self._send_json(200, counted)
                return
            answer = _ANSWERS.get(rec.api)
            if answer is None:
                self._send_json(404, {"error": {"message": "not served by the recording provider"}})
                return
            events = list(answer(p, rec, p.step_for(rec)))
            try:
                if not rec.stream:
                    self._send_json(200, events[0][1])
                    return
                if rec.api == "gemini" and "alt=sse" not in urlsplit(rec.path).query:
                    # without ?alt=sse, Gemini streams one JSON array of its chunks
                    self._send_json(200, [data for _, data in events])
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                for event, data in events:
                    if event:
                        self.wfile.write(f"event: {event}\n".encode())
                    text = data if isinstance(data, str) else json.dumps(data)
                    self.wfile.write(f"data: {text}\n\n".encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler
