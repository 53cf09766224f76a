"""The recording provider, through the providers' own SDKs (anthropic, openai) and plain HTTP
(Gemini), and `count_request` on the bodies it recorded. No agent runs here."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import anthropic
import openai
import pytest

from ctxkit.agents.provider import (
    REDACTED,
    Recorded,
    RecordingProvider,
    Step,
    ToolCall,
    smallest_json,
)
from ctxkit.agents.regions import count_request
from ctxkit.tokens import count_tool_schemas, get_tokenizer

USAGE = 1234  # the input tokens every answer reports (a fixed figure, so tests can assert it)
KEY = "sk-test-secret-0123456789"

Serve = Callable[..., RecordingProvider]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """`serve(script)`: a started provider, stopped (and checked stopped) after the test."""
    started: list[RecordingProvider] = []

    def start(script: Sequence[Step] = (), **kwargs: Any) -> RecordingProvider:
        kwargs.setdefault("usage", lambda rec: USAGE)
        p = RecordingProvider(script, **kwargs).start()
        started.append(p)
        return p

    yield start
    for p in started:
        port = p.port
        p.stop()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


def _anthropic(p: RecordingProvider) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=p.url, api_key=KEY, max_retries=0)


def _openai(p: RecordingProvider) -> openai.OpenAI:
    return openai.OpenAI(base_url=p.url + "/v1", api_key=KEY, max_retries=0)


def _post(p: RecordingProvider, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(
        p.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        return json.loads(response.read())


def _sse(p: RecordingProvider, path: str, body: Any) -> tuple[str, list[Any]]:
    """POST `body`, read the event stream: its content type and each `data:` line, parsed."""
    conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        kind = response.getheader("Content-Type") or ""
        text = response.read().decode()
    finally:
        conn.close()
    chunks = [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]
    return kind, chunks


# --- the server --------------------------------------------------------------------------------


def test_binds_loopback_only_and_stops() -> None:
    p = RecordingProvider().start()
    try:
        assert p._server is not None
        assert p._server.server_address[0] == "127.0.0.1"
        assert p.url == f"http://127.0.0.1:{p.port}"
        port = p.port
    finally:
        p.stop()
    with pytest.raises(RuntimeError, match="not running"):
        p.port  # noqa: B018
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


# --- Anthropic Messages ------------------------------------------------------------------------

READ = {
    "name": "Read",
    "description": "Read a file.",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
}


def test_anthropic_text_and_tool_use(serve: Serve) -> None:
    p = serve([Step(text="hello"), Step.calls(ToolCall("Read", {"file_path": "/a.txt"}), text="reading")])
    client = _anthropic(p)
    ask = {"model": "claude-x", "max_tokens": 100, "tools": [READ]}
    first = client.messages.create(messages=[{"role": "user", "content": "hi"}], **ask)
    assert [b.type for b in first.content] == ["text"]
    assert first.content[0].text == "hello"  # type: ignore[union-attr]
    assert (first.stop_reason, first.model, first.usage.input_tokens) == ("end_turn", "claude-x", USAGE)

    second = client.messages.create(messages=[{"role": "user", "content": "read it"}], **ask)
    assert [b.type for b in second.content] == ["text", "tool_use"]
    use = second.content[1]
    assert isinstance(use, anthropic.types.ToolUseBlock)
    assert (use.name, use.input) == ("Read", {"file_path": "/a.txt"})
    assert use.id.startswith("toolu_")
    assert second.stop_reason == "tool_use"
    assert [(r.main, r.step, r.stream, r.api) for r in p.requests] == [
        (True, 0, False, "anthropic"), (True, 1, False, "anthropic"),
    ]


def test_anthropic_streaming_text_and_tool_use(serve: Serve) -> None:
    p = serve([Step(text="hello"), Step.calls(ToolCall("Read", {"file_path": "/a.txt"}), text="reading")])
    client = _anthropic(p)
    ask = {"model": "claude-x", "max_tokens": 100, "tools": [READ]}
    with client.messages.stream(messages=[{"role": "user", "content": "hi"}], **ask) as stream:
        assert "".join(stream.text_stream) == "hello"
        first = stream.get_final_message()
    assert (first.stop_reason, first.usage.input_tokens) == ("end_turn", USAGE)

    events = list(client.messages.create(messages=[{"role": "user", "content": "go"}], stream=True, **ask))
    assert [e.type for e in events] == [
        "message_start",
        "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]
    delta = events[5].delta  # type: ignore[union-attr]
    assert delta.type == "input_json_delta"
    assert json.loads(delta.partial_json) == {"file_path": "/a.txt"}
    assert all(r.stream and r.main for r in p.requests)


def test_anthropic_stream_accumulates_the_tool_input(serve: Serve) -> None:
    p = serve([Step.calls(ToolCall("Read", {"file_path": "/a.txt"}), ToolCall("Read", {"file_path": "/b"}))])
    with _anthropic(p).messages.stream(
        model="claude-x", max_tokens=100, tools=[READ], messages=[{"role": "user", "content": "x"}]  # type: ignore[list-item]
    ) as stream:
        message = stream.get_final_message()
    uses = [b for b in message.content if b.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == [("Read", {"file_path": "/a.txt"}), ("Read", {"file_path": "/b"})]
    assert len({u.id for u in uses}) == 2
    assert message.stop_reason == "tool_use"


# --- OpenAI Responses --------------------------------------------------------------------------

EXEC = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}
PATCH_TOOL = {"type": "custom", "name": "apply_patch", "description": "Apply a patch."}
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+alpha\n*** End Patch\n"


def _check_response_output(output: Sequence[Any]) -> None:
    assert [o.type for o in output] == ["message", "function_call", "custom_tool_call", "custom_tool_call"]
    assert output[0].content[0].text == "on it"
    assert (output[1].name, json.loads(output[1].arguments)) == ("exec_command", {"cmd": "ls"})
    assert (output[2].name, output[2].input) == ("apply_patch", PATCH)
    # a dict given for a custom tool goes as its JSON text: the tool takes one string
    assert (output[3].name, json.loads(output[3].input)) == ("apply_patch", {"x": 1})
    assert len({o.call_id for o in output[1:]}) == 3


SCRIPTED_CALLS = Step.calls(
    ToolCall("exec_command", {"cmd": "ls"}),
    ToolCall("apply_patch", PATCH),
    ToolCall("apply_patch", {"x": 1}),
    text="on it",
)


def test_responses_function_and_custom_tool_calls(serve: Serve) -> None:
    p = serve([SCRIPTED_CALLS])
    response = _openai(p).responses.create(model="gpt-x", input="hi", tools=[EXEC, PATCH_TOOL])  # type: ignore[list-item]
    _check_response_output(response.output)
    assert response.status == "completed"
    assert response.usage is not None and response.usage.input_tokens == USAGE
    assert [(r.api, r.main, r.stream) for r in p.requests] == [("responses", True, False)]


def test_responses_streaming(serve: Serve) -> None:
    p = serve([SCRIPTED_CALLS])
    with _openai(p).responses.stream(model="gpt-x", input="hi", tools=[EXEC, PATCH_TOOL]) as stream:  # type: ignore[list-item]
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    _check_response_output(final.output)
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.done") == 4
    assert kinds.count("response.output_text.delta") == 1
    assert kinds.count("response.function_call_arguments.done") == 1
    assert kinds.count("response.custom_tool_call_input.done") == 2
    assert [(r.main, r.stream) for r in p.requests] == [(True, True)]


# --- OpenAI Chat Completions -------------------------------------------------------------------

CHAT_EXEC = {"type": "function", "function": {k: EXEC[k] for k in ("name", "description", "parameters")}}
TWO_CALLS = Step.calls(ToolCall("exec_command", {"cmd": "ls"}), ToolCall("exec_command", {"cmd": "pwd"}))


def test_chat_completions_tool_calls(serve: Serve) -> None:
    p = serve([TWO_CALLS, Step(text="all done")])
    client = _openai(p)
    messages = [{"role": "user", "content": "hi"}]
    first = client.chat.completions.create(model="gpt-x", messages=messages, tools=[CHAT_EXEC])  # type: ignore[arg-type,list-item]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [  # type: ignore[union-attr]
        ("exec_command", {"cmd": "ls"}), ("exec_command", {"cmd": "pwd"}),
    ]
    assert first.usage is not None and first.usage.prompt_tokens == USAGE
    second = client.chat.completions.create(model="gpt-x", messages=messages, tools=[CHAT_EXEC])  # type: ignore[arg-type,list-item]
    assert (second.choices[0].message.content, second.choices[0].finish_reason) == ("all done", "stop")


def test_chat_completions_streaming(serve: Serve) -> None:
    p = serve([TWO_CALLS, Step(text="all done")])
    client = _openai(p)
    messages = [{"role": "user", "content": "hi"}]
    with client.chat.completions.stream(model="gpt-x", messages=messages, tools=[CHAT_EXEC]) as stream:  # type: ignore[arg-type,list-item]
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("exec_command", {"cmd": "ls"}), ("exec_command", {"cmd": "pwd"}),
    ]
    assert final.choices[0].finish_reason == "tool_calls"
    chunks = list(client.chat.completions.create(
        model="gpt-x", messages=messages, tools=[CHAT_EXEC], stream=True,  # type: ignore[arg-type,list-item]
    ))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "all done"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == USAGE
    assert [(r.main, r.step, r.stream) for r in p.requests] == [(True, 0, True), (True, 1, True)]


# --- Gemini generateContent --------------------------------------------------------------------

GEMINI_TOOLS = [{
    "functionDeclarations": [
        {"name": "read_file", "description": "Read a file.",
         "parameters": {"type": "OBJECT", "properties": {"file_path": {"type": "STRING"}}}},
    ]
}]
GEMINI_ASK = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": GEMINI_TOOLS}
GEMINI_CALL = Step.calls(ToolCall("read_file", {"file_path": "/a.txt"}), text="reading")


def _gemini_parts(chunks: Sequence[Any]) -> list[Any]:
    return [part for c in chunks for part in c["candidates"][0]["content"]["parts"]]


def test_gemini_generate_content(serve: Serve) -> None:
    p = serve([GEMINI_CALL])
    answer = _post(p, "/v1beta/models/gemini-x:generateContent", GEMINI_ASK)
    assert _gemini_parts([answer]) == [
        {"text": "reading"}, {"functionCall": {"name": "read_file", "args": {"file_path": "/a.txt"}}},
    ]
    assert answer["usageMetadata"]["promptTokenCount"] == USAGE
    assert answer["candidates"][0]["content"]["role"] == "model"
    (rec,) = p.requests
    assert (rec.api, rec.model, rec.main, rec.step, rec.stream) == ("gemini", "gemini-x", True, 0, False)


def test_gemini_stream_generate_content_sse(serve: Serve) -> None:
    p = serve([GEMINI_CALL])
    kind, chunks = _sse(p, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", GEMINI_ASK)
    assert kind == "text/event-stream"
    assert _gemini_parts(chunks) == [
        {"text": "reading"}, {"functionCall": {"name": "read_file", "args": {"file_path": "/a.txt"}}},
    ]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert [(r.main, r.stream) for r in p.requests] == [(True, True)]


def test_gemini_stream_without_sse_is_a_json_array(serve: Serve) -> None:
    # without ?alt=sse the Gemini API streams one JSON array of the chunks
    p = serve([GEMINI_CALL])
    answer = _post(p, "/v1beta/models/gemini-x:streamGenerateContent", GEMINI_ASK)
    assert isinstance(answer, list)
    assert _gemini_parts(answer)[0] == {"text": "reading"}


# --- side requests -----------------------------------------------------------------------------


def test_side_requests_leave_the_script_where_it_is(serve: Serve) -> None:
    p = serve([Step(text="first step")])
    client = _anthropic(p)
    side = client.messages.create(model="claude-haiku", max_tokens=10, messages=[{"role": "user", "content": "title?"}])
    assert side.content[0].text == "ok"  # type: ignore[union-attr]
    counted = client.messages.count_tokens(model="claude-x", messages=[{"role": "user", "content": "x"}], tools=[READ])  # type: ignore[list-item]
    assert counted.input_tokens == USAGE
    assert p.steps_used() == 0
    main = client.messages.create(
        model="claude-x", max_tokens=10, tools=[READ], messages=[{"role": "user", "content": "go"}]  # type: ignore[list-item]
    )
    assert main.content[0].text == "first step"  # type: ignore[union-attr]
    after = client.messages.create(
        model="claude-x", max_tokens=10, tools=[READ], messages=[{"role": "user", "content": "go"}]  # type: ignore[list-item]
    )
    assert after.content[0].text == "Done."  # type: ignore[union-attr]  # the script is used up
    assert [(r.main, r.step) for r in p.requests] == [(False, None), (False, None), (True, 0), (True, 1)]
    assert [r.main for r in p.main_requests()] == [True, True]


ROUTER_SCHEMA = {
    "type": "OBJECT",
    "properties": {
        "reasoning": {"type": "STRING"},
        "model_choice": {"type": "STRING", "enum": ["flash", "pro"]},
        "confidence": {"type": "NUMBER", "minimum": 0.5},
        "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
        "note": {"type": "STRING"},
    },
    "required": ["reasoning", "model_choice", "confidence", "tags"],
}


def test_gemini_json_side_request_gets_the_smallest_json(serve: Serve) -> None:
    p = serve([Step(text="main step")])
    ask = {**GEMINI_ASK, "generationConfig": {"responseMimeType": "application/json", "responseSchema": ROUTER_SCHEMA}}
    answer = _post(p, "/v1beta/models/gemini-flash-lite:generateContent", ask)
    (part,) = _gemini_parts([answer])
    assert json.loads(part["text"]) == {"reasoning": "", "model_choice": "flash", "confidence": 0.5, "tags": []}
    assert (p.requests[0].main, p.steps_used()) == (False, 0)
    main = _post(p, "/v1beta/models/gemini-x:generateContent", GEMINI_ASK)
    assert _gemini_parts([main]) == [{"text": "main step"}]


TITLE_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 36}},
    "required": ["title"],
    "additionalProperties": False,
}


def test_responses_json_side_request_gets_json_that_fits_the_schema(serve: Serve) -> None:
    # Codex's interactive mode asks for a thread title this way (no tools, a strict schema)
    p = serve([Step(text="main step")])
    fmt = {"format": {"type": "json_schema", "name": "codex_output_schema", "strict": True, "schema": TITLE_SCHEMA}}
    response = _openai(p).responses.create(model="gpt-x", input="name this", text=fmt)  # type: ignore[arg-type]
    title = json.loads(response.output_text)
    assert title == {"title": "x"}  # the shortest string minLength 1 allows
    assert p.steps_used() == 0


def test_chat_json_side_request_gets_json(serve: Serve) -> None:
    p = serve([Step(text="main step")])
    client = _openai(p)
    schema = {"type": "json_schema", "json_schema": {"name": "t", "schema": TITLE_SCHEMA}}
    answer = client.chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "x"}], response_format=schema,  # type: ignore[arg-type,list-item]
    )
    assert json.loads(answer.choices[0].message.content or "") == {"title": "x"}
    plain = client.chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "x"}], response_format={"type": "json_object"},  # type: ignore[list-item]
    )
    assert json.loads(plain.choices[0].message.content or "") == {}
    assert p.steps_used() == 0


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "string"}, ""),
        ({"type": "string", "minLength": 3}, "xxx"),
        ({"type": "integer", "minimum": 2}, 2),
        ({"type": "number"}, 0),
        ({"type": "boolean"}, False),
        ({"type": ["null", "string"]}, ""),
        ({"enum": ["b", "a"]}, "b"),
        ({"const": 7}, 7),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [0, 0]),
        ({"anyOf": [{"type": "null"}, {"type": "integer"}]}, None),
        ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["b"]}, {"b": 0}),
        ({"properties": {"a": {"type": "BOOLEAN"}}}, {"a": False}),
    ],
)
def test_smallest_json(schema: dict[str, Any], value: Any) -> None:
    assert smallest_json(schema) == value


# --- what is recorded --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "value"),
    [("x-api-key", KEY), ("Authorization", f"Bearer {KEY}"), ("x-goog-api-key", KEY)],
)
def test_secret_headers_are_redacted(serve: Serve, header: str, value: str) -> None:
    p = serve()
    _post(p, "/v1/messages", {"model": "m", "messages": []}, {header: value, "X-Other": "kept"})
    (rec,) = p.requests
    headers = {k.lower(): v for k, v in rec.headers.items()}  # urllib capitalizes the names
    assert headers[header.lower()] == REDACTED
    assert headers["x-other"] == "kept"
    assert KEY not in json.dumps(rec.to_dict())


def test_a_key_in_the_url_is_redacted(serve: Serve) -> None:
    # the Gemini API also takes its key as ?key=
    p = serve()
    _post(p, f"/v1beta/models/gemini-x:generateContent?key={KEY}&alt=json", GEMINI_ASK)
    (rec,) = p.requests
    assert rec.path == "/v1beta/models/gemini-x:generateContent?key=<redacted>&alt=json"
    assert KEY not in json.dumps(rec.to_dict())


def test_on_request_sees_each_request(serve: Serve) -> None:
    seen: list[Recorded] = []
    p = serve(on_request=seen.append)
    _post(p, "/v1beta/models/gemini-x:countTokens", GEMINI_ASK)
    assert [(r.api, r.main, r.body) for r in seen] == [("gemini", False, GEMINI_ASK)]


# --- count_request on recorded bodies ----------------------------------------------------------

REMINDER = "<system-reminder>\nThe date is 2026-11-29. Do not mention this reminder.\n</system-reminder>"
SYSTEM = "You are a careful coding agent. Keep answers short."
MCP_SEARCH = {
    "name": "mcp__myserver__search",
    "description": "Search the archive.",
    "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
}
DEFERRED = {**READ, "name": "NotebookEdit", "defer_loading": True}


@pytest.fixture(scope="module")
def tok() -> Any:
    return get_tokenizer(None)


def test_count_anthropic_request(serve: Serve, tok: Any) -> None:
    p = serve()
    messages = [
        {"role": "user", "content": [{"type": "text", "text": REMINDER}, {"type": "text", "text": "Find the bug."}]},
    ]
    ask = {"model": "claude-x", "max_tokens": 2048, "system": [{"type": "text", "text": SYSTEM}], "messages": messages}
    client = _anthropic(p)
    client.messages.create(tools=[READ, MCP_SEARCH, DEFERRED], **ask)  # type: ignore[list-item,arg-type]
    client.messages.create(tools=[READ, MCP_SEARCH], **ask)  # type: ignore[list-item,arg-type]
    with_deferred, without = (count_request(r.api, r.body, tok) for r in p.requests)

    assert with_deferred.regions == {
        "system": tok.count(SYSTEM),
        "tools": count_tool_schemas([READ], tok),
        "mcp": count_tool_schemas([MCP_SEARCH], tok),
        "skills": 0,
        "reminders": tok.count(REMINDER),
        "messages": with_deferred.regions["messages"],
    }
    # the same figures, pinned (cl100k_base): a change in the accounting shows here
    assert with_deferred.regions == {
        "system": 11, "tools": 28, "mcp": 33, "skills": 0, "reminders": 27, "messages": 11,
    }
    assert with_deferred.mcp_servers == {"myserver": 33}
    assert [t["kind"] for t in with_deferred.tools] == ["built-in", "mcp:myserver", "deferred"]
    assert with_deferred.deferred == ["NotebookEdit"]
    assert with_deferred.deferred_tokens == count_tool_schemas([DEFERRED], tok) > 0
    assert with_deferred.total == without.total == sum(without.regions.values())
    assert (with_deferred.max_tokens, with_deferred.model, with_deferred.messages) == (2048, "claude-x", 1)
    assert with_deferred.transcript is not None
    assert [u.content for u in with_deferred.transcript.units] == ["Find the bug."]


def test_count_responses_request(serve: Serve, tok: Any) -> None:
    p = serve()
    mcp = {**EXEC, "name": "mcp__myserver__search"}
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": SYSTEM}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Find the bug."}]},
    ]
    _openai(p).responses.create(model="gpt-x", input=items, tools=[EXEC, mcp], max_output_tokens=500)  # type: ignore[arg-type,list-item]
    (rec,) = p.requests
    rc = count_request(rec.api, rec.body, tok)
    assert rc.regions["system"] == tok.count(SYSTEM)
    assert rc.regions["reminders"] == tok.count("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>")
    assert rc.regions["tools"] == count_tool_schemas([EXEC], tok)
    assert rc.mcp_servers == {"myserver": count_tool_schemas([mcp], tok)}
    assert (rc.messages, rc.max_tokens) == (1, 500)
    assert rc.regions["messages"] > 0


def test_count_chat_request(serve: Serve, tok: Any) -> None:
    p = serve()
    mcp = {"type": "function", "function": {**CHAT_EXEC["function"], "name": "mcp__myserver__search"}}
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": REMINDER},
        {"role": "user", "content": "Find the bug."},
    ]
    _openai(p).chat.completions.create(model="gpt-x", messages=messages, tools=[CHAT_EXEC, mcp], max_tokens=64)  # type: ignore[arg-type,list-item]
    (rec,) = p.requests
    rc = count_request(rec.api, rec.body, tok)
    assert rc.regions["system"] == tok.count(SYSTEM)
    assert rc.regions["reminders"] == tok.count(REMINDER)
    assert rc.regions["tools"] == count_tool_schemas([CHAT_EXEC], tok)
    assert rc.mcp_servers == {"myserver": count_tool_schemas([mcp], tok)}
    assert (rc.messages, rc.max_tokens) == (1, 64)


def test_count_chat_request_with_system_parts(serve: Serve, tok: Any) -> None:
    # a system message may be a list of text parts: its text is counted, not its JSON
    p = serve()
    messages = [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
        {"role": "user", "content": "Find the bug."},
    ]
    _openai(p).chat.completions.create(model="gpt-x", messages=messages, tools=[CHAT_EXEC])  # type: ignore[arg-type,list-item]
    rc = count_request("chat", p.requests[0].body, tok)
    assert rc.regions["system"] == tok.count(SYSTEM)


def test_count_chat_request_with_reminder_parts(serve: Serve, tok: Any) -> None:
    # Qwen Code sends its reminders as text parts of the message that holds the prompt
    p = serve()
    parts = [{"type": "text", "text": REMINDER}, {"type": "text", "text": "Find the bug."}]
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": parts}]
    _openai(p).chat.completions.create(model="gpt-x", messages=messages, tools=[CHAT_EXEC])  # type: ignore[arg-type,list-item]
    rc = count_request("chat", p.requests[0].body, tok)
    assert rc.regions["reminders"] == tok.count(REMINDER)
    assert rc.transcript is not None
    assert [u.content for u in rc.transcript.units] == ["Find the bug."]


def test_count_gemini_request(serve: Serve, tok: Any) -> None:
    p = serve()
    mcp = {"name": "mcp__myserver__search", "description": "Search.", "parameters": {"type": "OBJECT"}}
    context = "<session_context>\nThe date is 2026-11-29.\n</session_context>"
    ask = {
        "systemInstruction": {"role": "user", "parts": [{"text": SYSTEM}]},
        "contents": [{"role": "user", "parts": [{"text": context}, {"text": "Find the bug."}]}],
        "tools": [{"functionDeclarations": [*GEMINI_TOOLS[0]["functionDeclarations"], mcp]}],
        "generationConfig": {"maxOutputTokens": 99},
    }
    _sse(p, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", ask)
    (rec,) = p.requests
    rc = count_request(rec.api, rec.body, tok)
    decl = GEMINI_TOOLS[0]["functionDeclarations"][0]
    assert rc.regions["system"] == tok.count(SYSTEM)
    assert rc.regions["reminders"] == tok.count(context)
    assert rc.regions["tools"] == count_tool_schemas([{"type": "function", "function": decl}], tok)
    assert rc.mcp_servers == {"myserver": count_tool_schemas([{"type": "function", "function": mcp}], tok)}
    assert (rc.messages, rc.max_tokens) == (1, 99)


def test_count_request_names_the_known_apis(tok: Any) -> None:
    with pytest.raises(ValueError, match="no request counter for the 'other' API"):
        count_request("other", {}, tok)
