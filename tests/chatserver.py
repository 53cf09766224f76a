"""A local chat-completions server for tests: 127.0.0.1 only, bounded, stops with its test."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SUMMARY = '## Goal\n"Fix the login test."\n## Decisions\nnone'


@dataclass
class Reply:
    status: int = 200
    body: bytes | dict[str, Any] = field(default_factory=lambda: completion(SUMMARY))
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def completion(text: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
    }


class ChatServer:
    """A chat-completions server whose n-th answer comes from `script(n)`; records every request."""

    def __init__(self, script: Callable[[int], Reply]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()  # set on stop, so slow handlers end at once
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # where a client that follows a 302 ends up
                self.do_POST()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                n = len(outer.requests)
                outer.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers),
                        "json": body,
                    }
                )
                reply = outer.script(n)
                if reply.delay_s:
                    outer.release.wait(reply.delay_s)
                data = (
                    reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                )
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
