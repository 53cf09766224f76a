"""An LLM summarizer client for any OpenAI-compatible chat-completions endpoint (stdlib only).

`summarize_llm` sends our own handover prompt (goal, decisions, files, errors, open items, next
step; the previous summary rolled forward) and returns the summary text. Transient failures
(429, 5xx, timeouts, refused connections) are retried with exponential backoff; anything else,
or running out of attempts, raises `LLMError`. Falling back to the extractive summarizer is the
caller's job.

The API key goes to the configured origin (scheme, host, port) only: a redirect to another
origin is refused, never followed with the key. Every message this module raises has the key,
anything shaped like `sk-...` or a bearer token, and the user:password part of URLs redacted,
and a summary that echoes the key (a misbehaving endpoint) has it redacted before it reaches
the output, the archive or a report. The key is found by its own value, whatever its shape, and
so is any run of 8 of its characters (an excerpt cut through it).

    >>> from ctxkit.summarizers.llm import settings_from_env
    >>> settings = settings_from_env("http://127.0.0.1:8000/v1", "qwen2.5-7b-instruct")
    >>> settings.url, settings.model
    ('http://127.0.0.1:8000/v1', 'qwen2.5-7b-instruct')

Then `summarize_llm(units, settings, previous_summary=None, target_tokens=300)` asks that server
for the summary of `units` and returns its text.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from ctxkit.errors import LLMError, UsageError
from ctxkit.model import Unit
from ctxkit.summarizers.sections import SECTIONS  # one list of sections, offline and LLM alike

DEFAULT_URL = "http://127.0.0.1:8000/v1"
DEFAULT_MODEL = "gpt-4o-mini"
UNIT_CHARS = 2000  # tool output and long messages are shown head + tail
MAX_PROMPT_CHARS = 60_000  # keeps the request inside a small summarizer model's window
REQUEST_CHARS = 20_000  # a user request is quoted whole up to here; beyond, it is a pasted dump
RETRY_STATUSES = frozenset({408, 409, 425, 429}) | frozenset(range(500, 600))

SYSTEM_PROMPT = """You write handover notes for an AI coding agent whose conversation is being \
compacted. Another instance of the agent will continue the task from your note alone, so keep \
every fact it needs and nothing else.

Write Markdown with exactly these sections, in this order (the offline summaries' own, which `ctxkit fidelity` checks claim by claim):
{sections}

Rules:
- Quote the user's requests verbatim, in double quotes, under the primary request.
- Files and code: every file path, command, identifier and URL that matters, with what was done
  to it. Say a file was edited, created or deleted only where a tool call in the conversation
  wrote it; a file that was only read, listed or run was read, listed or run.
- Errors and fixes: the exact error line, quoted, only for a result that failed (an error flag, a
  non-zero exit code, an error message); call an error fixed only where a later result shows it.
- Task list: each item with the status its latest update gave it; an item is done only where the
  conversation marks it done.
- Put each fact under its own section; write "none" under a section with nothing to say.
- When an earlier summary is given, roll it forward: keep what still holds, update what changed.
- Do not invent anything that is not in the conversation or the earlier summary.
- Stay under {target_tokens} tokens."""


_SECTIONS = "\n".join(f"## {title}" for title in SECTIONS)


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to call the summarizer model; retry figures come from `retry_policies`."""

    url: str
    model: str
    api_key: str | None = field(repr=False)  # never in a repr, a log line or a traceback
    timeout_s: float = 30
    max_attempts: int = 3
    backoff_base_s: float = 0.5
    max_delay_s: float = 8.0
    max_tokens: int = 600

    def endpoint(self) -> str:
        """The chat-completions URL (accepts a base URL with or without /chat/completions)."""
        base = self.url.rstrip("/")
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"


def settings_from_env(url: str | None, model: str | None, **overrides: Any) -> LLMSettings:
    """Settings from flags and the environment: key from CTXKIT_LLM_API_KEY, then OPENAI_API_KEY."""
    api_key = os.environ.get("CTXKIT_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY") or None
    settings = LLMSettings(
        url=url or os.environ.get("CTXKIT_LLM_URL") or DEFAULT_URL,
        model=model or os.environ.get("CTXKIT_LLM_MODEL") or DEFAULT_MODEL,
        api_key=api_key,
    )
    try:
        settings = replace(settings, **overrides)
    except TypeError as e:
        raise UsageError(f"unknown LLM setting: {e}") from e
    if not settings.url.startswith(("http://", "https://")):
        raise UsageError(
            f"--llm-url must start with http:// or https://, got {redact(settings.url)!r}"
        )
    if settings.max_attempts < 1:
        raise UsageError(f"max attempts must be at least 1, got {settings.max_attempts}")
    if settings.timeout_s <= 0:
        raise UsageError(f"timeout must be positive, got {settings.timeout_s}")
    return settings


# --------------------------------------------------------------------------- secrets

REDACTED = "[redacted]"
_SECRET_SHAPES = (
    (re.compile(r"sk-[A-Za-z0-9_\-]{4,}"), "sk-" + REDACTED),
    (re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+"), r"\g<1>" + REDACTED),
    # user:password@ in any URL
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@]+@"), r"\g<1>" + REDACTED + "@"),
)


FRAGMENT_CHARS = 8  # this many characters of a secret in a row count as the secret


def redact(text: str, *secrets: str | None) -> str:
    """`text` with each secret, `sk-...` keys, bearer tokens and URL userinfo replaced.

    Example: `redact("bad key sk-abc123xyz", None)` gives `"bad key sk-[redacted]"`.
    """
    text = redact_secrets(text, *secrets)
    for pattern, replacement in _SECRET_SHAPES:
        text = pattern.sub(replacement, text)
    return text


def redact_secrets(text: str, *secrets: str | None) -> str:
    """`text` with each secret replaced by its value, and with every run of `FRAGMENT_CHARS` or
    more of its characters (the head or tail of an excerpt cut through it, a partial echo).

        >>> redact_secrets("key abcdefgh12345678 and ...12345678", "abcdefgh12345678")
        'key [redacted] and ...[redacted]'
    """
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, REDACTED)
        if len(secret) < FRAGMENT_CHARS:
            continue
        grams = {secret[i : i + FRAGMENT_CHARS] for i in range(len(secret) - FRAGMENT_CHARS + 1)}
        spans: list[list[int]] = []
        for i in range(len(text) - FRAGMENT_CHARS + 1):
            if text[i : i + FRAGMENT_CHARS] in grams:
                if spans and i <= spans[-1][1]:
                    spans[-1][1] = i + FRAGMENT_CHARS
                else:
                    spans.append([i, i + FRAGMENT_CHARS])
        for start, end in reversed(spans):
            text = text[:start] + REDACTED + text[end:]
    return text


def _excerpt(body: bytes, limit: int, *secrets: str | None) -> str:
    """The first `limit` characters of a body, redacted before it is cut (a cut through the key
    would leave a piece that no longer matches it)."""
    text = redact(body.decode("utf-8", "replace"), *secrets)
    return text if len(text) <= limit else text[:limit] + "..."


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the port filled in for http and https."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


# --------------------------------------------------------------------------- the prompt


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters left out ...]\n{text[-tail:]}"


def _render(unit: Unit, limit: int) -> str:
    label = unit.role if unit.type == "message" else f"{unit.role} {unit.type}"
    if unit.name:
        label += f" {unit.name}"
    is_request = unit.role == "user" and unit.type not in ("tool_result", "summary", "placeholder")
    body = _shorten(unit.content, REQUEST_CHARS if is_request else limit)
    lines = [f"[{label}]", body] if body else [f"[{label}]"]
    for call in unit.tool_calls:
        lines.append(f"-> call {call.name}({_shorten(call.arguments, limit // 4)})")
    return "\n".join(lines)


def handover_prompt(
    units: Sequence[Unit], previous_summary: str | None, target_tokens: int
) -> list[dict[str, str]]:
    """Chat messages asking for a handover note of `units`, rolling `previous_summary` forward."""
    limit = UNIT_CHARS
    while True:
        rendered = [_render(u, limit) for u in units]
        # shrink the non-request parts until the prompt fits, but never below a useful glimpse
        if sum(len(r) for r in rendered) <= MAX_PROMPT_CHARS or limit <= 200:
            break
        limit //= 2
    parts: list[str] = []
    if previous_summary and previous_summary.strip():
        parts.append(
            f"Earlier summary (roll it forward):\n<summary>\n{previous_summary.strip()}\n</summary>"
        )
    parts.append(
        "Conversation to summarize:\n<conversation>\n" + "\n\n".join(rendered) + "\n</conversation>"
    )
    parts.append(
        f"Write the handover note now, sections {', '.join(SECTIONS)}, under {target_tokens} tokens."
    )
    return [
        {"role": "system", "content": SYSTEM_PROMPT.format(target_tokens=target_tokens, sections=_SECTIONS)},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


# --------------------------------------------------------------------------- the call


class _Retryable(Exception):
    """A failure worth another attempt; `retry_after_s` when the server said how long to wait."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta seconds or an HTTP date); None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _CrossOriginRedirect(Exception):
    def __init__(self, code: int, url: str) -> None:
        super().__init__(f"HTTP {code} to {url}")
        self.code = code
        self.url = url


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect within the endpoint's origin (307/308 keep the POST); refuses one to
    another origin, which urllib would follow with the Authorization header, https to http too."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        if origin(newurl) != origin(req.full_url):
            raise _CrossOriginRedirect(code, newurl)
        if code in (307, 308):
            return urllib.request.Request(
                newurl, data=req.data, headers=dict(req.header_items()), method=req.get_method()
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameOriginRedirects)


def _post(settings: LLMSettings, payload: bytes) -> bytes:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    request = urllib.request.Request(
        settings.endpoint(), data=payload, headers=headers, method="POST"
    )
    try:
        with _OPENER.open(request, timeout=settings.timeout_s) as response:
            body: bytes = response.read()
            return body
    except _CrossOriginRedirect as e:
        raise LLMError(
            f"LLM endpoint {settings.endpoint()} redirects (HTTP {e.code}) to another origin, "
            f"{e.url}; not followed, so the API key stays with the endpoint: set --llm-url to "
            "the address that answers"
        ) from None
    except urllib.error.HTTPError as e:
        detail = _excerpt(e.read(1 << 16), 300, settings.api_key).strip() if e.fp else ""
        message = f"HTTP {e.code} {e.reason}" + (f": {detail}" if detail else "")
        if e.code in RETRY_STATUSES:
            raise _Retryable(message, _retry_after(e.headers.get("Retry-After"))) from e
        raise LLMError(f"LLM endpoint {settings.endpoint()} refused the request: {message}") from e
    except TimeoutError as e:
        raise _Retryable(f"no answer within {settings.timeout_s:g} s") from e
    except urllib.error.URLError as e:
        if isinstance(e.reason, (TimeoutError, socket.timeout)):
            raise _Retryable(f"no answer within {settings.timeout_s:g} s") from e
        raise _Retryable(f"cannot connect: {e.reason}") from e
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        raise _Retryable(f"connection failed: {type(e).__name__}: {e}") from e


def _content(body: bytes, endpoint: str, secret: str | None = None) -> str:
    """The assistant text of a chat-completions answer, or LLMError naming what is wrong."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise LLMError(
            f"LLM endpoint {endpoint} answered with a body that is not JSON "
            f"(starts with {_excerpt(body, 60, secret)!r})"
        ) from e
    try:
        message = data["choices"][0]["message"]
        content = message["content"]
    except (KeyError, IndexError, TypeError) as e:
        raise LLMError(
            f"LLM endpoint {endpoint} answered without choices[0].message.content "
            f"(starts with {_excerpt(body, 60, secret)!r})"
        ) from e
    if isinstance(content, list):  # some servers send content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str) or not content.strip():
        raise LLMError(f"LLM endpoint {endpoint} answered with an empty summary")
    return content.strip()


def summarize_llm(
    units: Sequence[Unit],
    settings: LLMSettings,
    *,
    previous_summary: str | None = None,
    target_tokens: int = 300,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Summarize `units` with the chat-completions endpoint; retries transient failures, else LLMError.

    The error's message never holds the API key (see `redact`).
    """
    try:
        return _summarize(units, settings, previous_summary, target_tokens, sleep)
    except LLMError as e:
        # `from None`: the cause (an HTTPError, a body excerpt) would carry the secret along
        raise LLMError(redact(str(e), settings.api_key)) from None


def _summarize(
    units: Sequence[Unit],
    settings: LLMSettings,
    previous_summary: str | None,
    target_tokens: int,
    sleep: Callable[[float], None],
) -> str:
    payload = json.dumps(
        {
            "model": settings.model,
            "messages": handover_prompt(units, previous_summary, target_tokens),
            "max_tokens": settings.max_tokens,
            "temperature": 0,
        }
    ).encode("utf-8")
    endpoint = settings.endpoint()
    last = ""
    for attempt in range(settings.max_attempts):
        try:
            body = _post(settings, payload)
        except _Retryable as e:
            last = str(e)
            if attempt + 1 >= settings.max_attempts:
                break
            delay = settings.backoff_base_s * 2**attempt
            if e.retry_after_s is not None:
                delay = max(delay, e.retry_after_s)
            sleep(min(delay, settings.max_delay_s))
            continue
        return redact_secrets(_content(body, endpoint, settings.api_key), settings.api_key)
    raise LLMError(
        f"LLM endpoint {endpoint} failed after {settings.max_attempts} attempt"
        f"{'s' if settings.max_attempts != 1 else ''}: {last}"
    )
