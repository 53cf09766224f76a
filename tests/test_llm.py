"""The LLM summarizer client against a local chat-completions server on 127.0.0.1."""

from __future__ import annotations

import email.utils
import json
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from chatserver import SUMMARY, ChatServer, Reply, completion

from ctxkit.errors import LLMError, UsageError
from ctxkit.model import ToolCall, Unit
from ctxkit.summarizers.llm import (
    DEFAULT_URL,
    SECTIONS,
    LLMSettings,
    _retry_after,
    handover_prompt,
    settings_from_env,
    summarize_llm,
)

UNITS = [
    Unit(id="u0", role="system", content="You are a coding agent."),
    Unit(id="u1", role="user", content="Fix the login test."),
    Unit(
        id="u2",
        role="assistant",
        content="Running the tests.",
        tool_calls=[
            ToolCall(id="c1", name="bash", arguments='{"cmd": "pytest tests/test_login.py"}')
        ],
    ),
    Unit(
        id="u3",
        role="tool",
        type="tool_result",
        content="AssertionError: expected 200, got 401",
        tool_call_id="c1",
        name="bash",
    ),
]


def settings(url: str, **kw: Any) -> LLMSettings:
    return LLMSettings(url=url, model="test-model", api_key="sk-test", **kw)


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


# --------------------------------------------------------------------------- the protocol


def test_success_posts_a_chat_completion(serve: Callable[..., ChatServer]) -> None:
    server = serve(lambda n: Reply())
    sleeps = Sleeps()
    out = summarize_llm(
        UNITS, settings(server.url, max_tokens=321), target_tokens=250, sleep=sleeps
    )
    assert out == SUMMARY
    assert sleeps == []
    [req] = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["headers"]["Content-Type"] == "application/json"
    body = req["json"]
    assert body["model"] == "test-model"
    assert body["max_tokens"] == 321
    assert body["temperature"] == 0
    assert body["messages"] == handover_prompt(UNITS, None, 250)


def test_no_key_sends_no_authorization(serve: Callable[..., ChatServer]) -> None:
    server = serve(lambda n: Reply())
    s = LLMSettings(url=server.url + "/", model="m", api_key=None)
    assert summarize_llm(UNITS, s) == SUMMARY
    assert "Authorization" not in server.requests[0]["headers"]
    assert server.requests[0]["path"] == "/v1/chat/completions"


def test_content_parts_are_joined(serve: Callable[..., ChatServer]) -> None:
    parts = [{"type": "text", "text": "## Goal\n"}, {"type": "text", "text": "done"}]
    server = serve(lambda n: Reply(body=completion(parts)))
    assert summarize_llm(UNITS, settings(server.url)) == "## Goal\ndone"


# --------------------------------------------------------------------------- failures and retries


def test_slow_server_times_out_and_gives_up(serve: Callable[..., ChatServer]) -> None:
    server = serve(lambda n: Reply(delay_s=10.0))
    sleeps = Sleeps()
    with pytest.raises(LLMError) as e:
        summarize_llm(UNITS, settings(server.url, timeout_s=0.2, max_attempts=2), sleep=sleeps)
    assert len(server.requests) == 2
    assert sleeps == [0.5]
    assert str(e.value) == (
        f"LLM endpoint {server.url}/chat/completions failed after 2 attempts: no answer within 0.2 s"
    )


def test_429_then_success_honours_retry_after(serve: Callable[..., ChatServer]) -> None:
    script = {0: Reply(status=429, body={"error": "slow down"}, headers={"Retry-After": "3"})}
    server = serve(lambda n: script.get(n, Reply()))
    sleeps = Sleeps()
    assert summarize_llm(UNITS, settings(server.url), sleep=sleeps) == SUMMARY
    assert len(server.requests) == 2
    assert sleeps == [3.0]  # the server's wait, above the 0.5 s backoff


def test_retry_after_is_capped_by_max_delay(serve: Callable[..., ChatServer]) -> None:
    script = {0: Reply(status=429, headers={"Retry-After": "120"}), 1: Reply(status=503)}
    server = serve(lambda n: script.get(n, Reply()))
    sleeps = Sleeps()
    out = summarize_llm(UNITS, settings(server.url, max_delay_s=8.0), sleep=sleeps)
    assert out == SUMMARY
    assert sleeps == [8.0, 1.0]
    assert len(server.requests) == 3


def test_500_forever_gives_up_after_max_attempts(serve: Callable[..., ChatServer]) -> None:
    server = serve(lambda n: Reply(status=500, body=b"internal error"))
    sleeps = Sleeps()
    s = settings(server.url, max_attempts=5, backoff_base_s=0.5, max_delay_s=3.0)
    with pytest.raises(LLMError) as e:
        summarize_llm(UNITS, s, sleep=sleeps)
    assert len(server.requests) == 5
    assert sleeps == [0.5, 1.0, 2.0, 3.0]  # base * 2**attempt, capped at max_delay
    assert "failed after 5 attempts: HTTP 500" in str(e.value)
    assert "internal error" in str(e.value)


def test_single_attempt_does_not_sleep(serve: Callable[..., ChatServer]) -> None:
    server = serve(lambda n: Reply(status=502))
    sleeps = Sleeps()
    with pytest.raises(LLMError, match="failed after 1 attempt: HTTP 502"):
        summarize_llm(UNITS, settings(server.url, max_attempts=1), sleep=sleeps)
    assert sleeps == [] and len(server.requests) == 1


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<html>gateway</html>", "a body that is not JSON (starts with '<html>gateway</html>')"),
        (b'{"choices": []}', "without choices[0].message.content"),
        (json.dumps(completion("   ")).encode(), "an empty summary"),
        (json.dumps(completion(None)).encode(), "an empty summary"),
    ],
)
def test_malformed_body_fails_without_retry(
    serve: Callable[..., ChatServer], body: bytes, problem: str
) -> None:
    server = serve(lambda n: Reply(body=body))
    sleeps = Sleeps()
    with pytest.raises(LLMError) as e:
        summarize_llm(UNITS, settings(server.url), sleep=sleeps)
    assert problem in str(e.value)
    assert str(e.value).startswith(f"LLM endpoint {server.url}/chat/completions answered")
    assert len(server.requests) == 1 and sleeps == []


def test_client_error_is_not_retried(serve: Callable[..., ChatServer]) -> None:
    server = serve(lambda n: Reply(status=401, body={"error": {"message": "bad key"}}))
    with pytest.raises(LLMError) as e:
        summarize_llm(UNITS, settings(server.url), sleep=Sleeps())
    assert len(server.requests) == 1
    assert "refused the request: HTTP 401 Unauthorized" in str(e.value)
    assert "bad key" in str(e.value)


def test_connection_refused_is_retried() -> None:
    with socket.socket() as s:  # a port that was free a moment ago and has no listener now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    with pytest.raises(LLMError, match="failed after 3 attempts: cannot connect"):
        summarize_llm(UNITS, settings(f"http://127.0.0.1:{port}/v1"), sleep=sleeps)
    assert sleeps == [0.5, 1.0]


def test_retry_after_parsing() -> None:
    assert _retry_after("2.5") == 2.5
    assert _retry_after(None) is None
    assert _retry_after("soon") is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (_retry_after(future) or 0) <= 31
    assert _retry_after(email.utils.formatdate(0, usegmt=True)) == 0.0


# --------------------------------------------------------------------------- settings and prompt


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CTXKIT_LLM_API_KEY", "OPENAI_API_KEY", "CTXKIT_LLM_URL", "CTXKIT_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    s = settings_from_env(None, "small")
    assert (s.url, s.model, s.api_key) == (DEFAULT_URL, "small", None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert settings_from_env(None, "m").api_key == "sk-openai"
    monkeypatch.setenv("CTXKIT_LLM_API_KEY", "sk-ctxkit")
    monkeypatch.setenv("CTXKIT_LLM_URL", "http://10.0.0.5:9000/v1")
    s = settings_from_env(None, "m", timeout_s=5, max_attempts=7)
    assert (s.api_key, s.url, s.timeout_s, s.max_attempts) == (
        "sk-ctxkit",
        "http://10.0.0.5:9000/v1",
        5,
        7,
    )
    assert settings_from_env("https://api.example.com/v1", "m").url == "https://api.example.com/v1"


def test_settings_from_env_rejects_bad_values() -> None:
    with pytest.raises(UsageError, match="must start with http"):
        settings_from_env("localhost:8000", "m")
    with pytest.raises(UsageError, match="unknown LLM setting"):
        settings_from_env(None, "m", retries=3)
    with pytest.raises(UsageError, match="at least 1"):
        settings_from_env(None, "m", max_attempts=0)
    with pytest.raises(UsageError, match="timeout must be positive"):
        settings_from_env(None, "m", timeout_s=0)


def test_endpoint_spellings() -> None:
    for url in ("http://h/v1", "http://h/v1/", "http://h/v1/chat/completions"):
        assert settings(url).endpoint() == "http://h/v1/chat/completions"


def test_handover_prompt_sections_and_content() -> None:
    system, user = handover_prompt(UNITS, None, 300)
    assert system["role"] == "system" and user["role"] == "user"
    headings = [line for line in system["content"].splitlines() if line.startswith("## ")]
    assert headings == [f"## {s}" for s in SECTIONS]
    assert "under 300 tokens" in system["content"]
    assert "verbatim" in system["content"]
    # what the claim checker holds a summary to (issue 38), asked of the model in so many words
    rules = " ".join(system["content"].split())
    assert "edited, created or deleted only where a tool call in the conversation wrote it" in rules
    assert "done only where the conversation marks it done" in rules
    assert "only for a result that failed" in rules
    assert "Claude Code" not in rules  # the sections are ctxkit's own, not Claude Code's nine
    assert "[user]\nFix the login test." in user["content"]
    assert '-> call bash({"cmd": "pytest tests/test_login.py"})' in user["content"]
    assert "[tool tool_result bash]\nAssertionError: expected 200, got 401" in user["content"]
    assert "Earlier summary" not in user["content"]


def test_handover_prompt_rolls_the_previous_summary_forward() -> None:
    _, user = handover_prompt(UNITS, '## Goal\n"Fix the login test."', 300)
    assert user["content"].startswith(
        'Earlier summary (roll it forward):\n<summary>\n## Goal\n"Fix the login test."\n</summary>'
    )


def test_handover_prompt_quotes_requests_whole_and_shortens_tool_output() -> None:
    request = "Please refactor: " + "step " * 3000
    log = "ERROR line\n" * 5000
    units = [
        Unit(id="u1", role="user", content=request),
        Unit(id="u2", role="tool", type="tool_result", content=log, tool_call_id="c1"),
    ]
    _, user = handover_prompt(units, None, 300)
    assert request in user["content"]
    assert log not in user["content"]
    assert "characters left out" in user["content"]
    assert len(user["content"]) < len(request) + 3000


def test_handover_prompt_shortens_a_pasted_dump_in_a_request() -> None:
    dump = "Here is the log:\n" + "0123456789" * 10_000
    _, user = handover_prompt([Unit(id="u1", role="user", content=dump)], None, 300)
    assert dump[:1000] in user["content"]
    assert dump[-1000:] in user["content"]
    assert "characters left out" in user["content"]
    assert len(user["content"]) < 21_000


# --------------------------------------------------------------------------- the key stays home

SECRET = "sk-proj-4f8Qz1xTopSecretValue9"
ODD_KEY = "corp-token-7c1e99-not-sk-shaped"


def keyed(url: str, key: str = SECRET, **kw: Any) -> LLMSettings:
    return LLMSettings(url=url, model="m", api_key=key, max_attempts=1, **kw)


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_refused_with_the_key_unsent(
    serve: Callable[..., ChatServer], code: int
) -> None:
    other = serve(lambda n: Reply())  # another port: another origin
    target = other.url + "/chat/completions"
    here = serve(lambda n: Reply(status=code, body=b"moved", headers={"Location": target}))
    with pytest.raises(LLMError) as err:
        summarize_llm(UNITS, keyed(here.url), sleep=Sleeps())
    assert other.requests == []
    assert len(here.requests) == 1
    message = str(err.value)
    assert f"redirects (HTTP {code}) to another origin, {target}; not followed" in message
    assert SECRET not in message and err.value.__cause__ is None


def test_https_to_http_and_other_ports_are_other_origins() -> None:
    from ctxkit.summarizers.llm import origin

    assert origin("https://api.example.com/v1") != origin("http://api.example.com/v1")
    assert origin("https://API.example.com/v1") == origin("https://api.example.com:443/x")
    assert origin("http://127.0.0.1/v1") == origin("http://127.0.0.1:80/")
    assert origin("http://127.0.0.1:8000/v1") != origin("http://127.0.0.1:8001/v1")


def test_a_same_origin_307_is_followed_with_the_post_and_the_key(
    serve: Callable[..., ChatServer],
) -> None:
    server = serve(
        lambda n: (
            Reply(status=307, body=b"", headers={"Location": "/v2/chat/completions"})
            if n == 0
            else Reply()
        )
    )
    assert summarize_llm(UNITS, keyed(server.url), sleep=Sleeps()) == SUMMARY
    second = server.requests[1]
    assert second["method"] == "POST" and second["path"] == "/v2/chat/completions"
    assert second["json"]["model"] == "m"
    assert second["headers"]["Authorization"] == f"Bearer {SECRET}"


@pytest.mark.parametrize("status", [401, 500])
@pytest.mark.parametrize("key", [SECRET, ODD_KEY])
def test_an_error_body_that_echoes_the_key_is_redacted(
    serve: Callable[..., ChatServer], status: int, key: str
) -> None:
    body = json.dumps(
        {"error": f"bad key {key}; header was Bearer {key}; also saw sk-live-abcdef123456"}
    ).encode()
    server = serve(lambda n: Reply(status=status, body=body))
    warnings: list[str] = []
    from ctxkit.summarizers import make_summarizer

    summarize = make_summarizer("llm", llm_settings=keyed(server.url, key), warn=warnings.append)
    text = summarize(UNITS, 200, None)  # falls back to the extractive summarizer
    assert text and len(warnings) == 1
    with pytest.raises(LLMError) as err:
        summarize_llm(UNITS, keyed(server.url, key), sleep=Sleeps())
    for message in (str(err.value), warnings[0]):
        assert key not in message and "abcdef123456" not in message
        assert "[redacted]" in message
    assert err.value.__cause__ is None


def test_userinfo_in_the_url_is_redacted() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LLMError) as err:
        summarize_llm(UNITS, keyed(f"http://alice:hunter2@127.0.0.1:{port}/v1"), sleep=Sleeps())
    assert "hunter2" not in str(err.value) and "alice" not in str(err.value)
    assert "http://[redacted]@127.0.0.1" in str(err.value)
    with pytest.raises(UsageError) as usage:
        settings_from_env("ftp://bob:pw-123@example.com/v1", "m")
    assert "pw-123" not in str(usage.value)


def test_redact() -> None:
    from ctxkit.summarizers.llm import redact

    assert redact("key sk-abc123xyz and Bearer zzz.yyy", None) == (
        "key sk-[redacted] and Bearer [redacted]"
    )
    assert redact("token=hush-hush!", "hush-hush") == "token=[redacted]!"
    assert redact("see https://u:p@h.example/x and http://h.example/") == (
        "see https://[redacted]@h.example/x and http://h.example/"
    )
    assert redact("nothing secret here", "") == "nothing secret here"


def test_a_summary_that_echoes_the_key_is_redacted(serve: Callable[..., ChatServer]) -> None:
    # the key comes back in the summary (an endpoint that echoes its headers): it would reach
    # the output, the archive, the report and the HTML
    server = serve(lambda n: Reply(body=completion(f"## Goal\nkey {ODD_KEY}, head {ODD_KEY[:9]}")))
    text = summarize_llm(UNITS, keyed(server.url, ODD_KEY), sleep=Sleeps())
    assert text == "## Goal\nkey [redacted], head [redacted]"


@pytest.mark.parametrize("cut", [3, 9, 14, 20, 27])
def test_an_error_excerpt_cut_through_the_key_shows_none_of_it(
    serve: Callable[..., ChatServer], cut: int
) -> None:
    # the excerpt is 300 characters: the key starts `cut` characters before its end
    body = json.dumps({"error": "x" * (300 - 13 - cut) + ODD_KEY + " is not valid"}).encode()
    server = serve(lambda n: Reply(status=401, body=body))
    with pytest.raises(LLMError) as err:
        summarize_llm(UNITS, keyed(server.url, ODD_KEY), sleep=Sleeps())
    message = str(err.value)
    assert "[reda" in message  # the excerpt is cut after the redaction, maybe through its mark
    for i in range(len(ODD_KEY) - 7):
        assert ODD_KEY[i : i + 8] not in message


@pytest.mark.parametrize("body", ["<html>{pad}{key}</html>", '{{"note": "{pad}{key}"}}'])
def test_a_bad_200_body_excerpt_shows_none_of_the_key(
    serve: Callable[..., ChatServer], body: str
) -> None:
    text = body.format(pad="y" * 40, key=ODD_KEY).encode()
    server = serve(lambda n: Reply(body=text))
    with pytest.raises(LLMError) as err:
        summarize_llm(UNITS, keyed(server.url, ODD_KEY), sleep=Sleeps())
    assert ODD_KEY[:8] not in str(err.value) and "[redacted]" in str(err.value)


def test_the_key_is_not_in_the_settings_repr() -> None:
    assert ODD_KEY not in repr(keyed("http://127.0.0.1:9/v1", ODD_KEY))
