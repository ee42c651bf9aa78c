"""A real local ``/v1/chat/completions`` server for tests (stdlib ``http.server``).

It listens on 127.0.0.1 with an OS-chosen port, answers the way an OpenAI-compatible
server does, and records every request it receives (raw body, parsed JSON, path,
headers) so a test can assert on exactly what left the process.

Behaviours, one per request in order (the last one repeats):

* ``"ok"``       — 200 with ``choices[0].message.content`` = ``reply(request)``
* ``"500"``      — HTTP 500
* ``"429"``      — HTTP 429 (rate limited)
* ``"400"``      — HTTP 400 (not retryable)
* ``"garbage"``  — HTTP 200 whose body is not JSON
* ``"no_content"`` — HTTP 200 JSON without ``choices``
* ``"slow"``     — sleeps ``slow_s`` seconds, then answers like ``"ok"``
* ``"partial"``  — 200 whose content ranks only the first half of the candidates

The default ``reply`` ranks the ``[k]`` candidates found in the last user message in
reverse order (``[n-1] > … > [0]``), which differs from identity for n >= 2.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BEHAVIOURS = ("ok", "500", "429", "400", "garbage", "no_content", "slow", "partial")

_CANDIDATE_ID = re.compile(r"^\[(\d+)\]", re.MULTILINE)


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    raw_body: bytes
    json_body: dict | None


def candidate_count(request_json: dict | None) -> int:
    """How many ``[k]`` passages the last user message of a chat request lists."""
    if not request_json:
        return 0
    users = [m for m in request_json.get("messages", []) if m.get("role") == "user"]
    if not users:
        return 0
    ids = {int(m) for m in _CANDIDATE_ID.findall(str(users[-1].get("content", "")))}
    return len(ids)


def reverse_ranking(request_json: dict | None) -> str:
    n = candidate_count(request_json)
    return " > ".join(f"[{i}]" for i in reversed(range(n)))


def partial_ranking(request_json: dict | None) -> str:
    """The reverse ranking cut after its first half (at least one id)."""
    n = candidate_count(request_json)
    keep = max(1, n // 2)
    return " > ".join(f"[{i}]" for i in list(reversed(range(n)))[:keep])


def completion_body(content: str, model: str = "local-test") -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-local",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
        }
    ).encode("utf-8")


@dataclass
class LocalChatServer:
    """Context manager running the server on a background thread."""

    behaviours: Sequence[str] | str = "ok"
    reply: Callable[[dict | None], str] = reverse_ranking
    slow_s: float = 1.0
    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.behaviours, str):
            self.behaviours = [self.behaviours]
        unknown = [b for b in self.behaviours if b not in BEHAVIOURS]
        if unknown or not self.behaviours:
            raise ValueError(f"unknown behaviours {unknown!r}; allowed: {BEHAVIOURS}")
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> "LocalChatServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    parsed = json.loads(raw.decode("utf-8"))
                except ValueError:
                    parsed = None
                behaviour = server._record(
                    RecordedRequest(self.path, dict(self.headers.items()), raw, parsed)
                )
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, b'{"error": "not found"}')
                    return
                try:
                    server._answer(self, behaviour, parsed)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout); nothing to answer

            def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # -- what tests use ----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "use the server as a context manager"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def set_behaviours(self, behaviours: Sequence[str] | str) -> None:
        """Replace the behaviour script and forget recorded requests."""
        behaviours = [behaviours] if isinstance(behaviours, str) else list(behaviours)
        unknown = [b for b in behaviours if b not in BEHAVIOURS]
        if unknown or not behaviours:
            raise ValueError(f"unknown behaviours {unknown!r}; allowed: {BEHAVIOURS}")
        with self._lock:
            self.behaviours = behaviours
            self.requests.clear()

    def all_raw_bodies(self) -> bytes:
        with self._lock:
            return b"\n".join(r.raw_body for r in self.requests)

    # -- internals ---------------------------------------------------------------------
    def _record(self, request: RecordedRequest) -> str:
        with self._lock:
            index = len(self.requests)
            self.requests.append(request)
            return self.behaviours[min(index, len(self.behaviours) - 1)]

    def _answer(self, handler, behaviour: str, parsed: dict | None) -> None:
        if behaviour == "slow":
            time.sleep(self.slow_s)
            behaviour = "ok"
        if behaviour == "ok":
            handler._send(200, completion_body(self.reply(parsed)))
        elif behaviour == "partial":
            handler._send(200, completion_body(partial_ranking(parsed)))
        elif behaviour == "garbage":
            handler._send(200, b"<html>this is not json", content_type="text/html")
        elif behaviour == "no_content":
            handler._send(200, b'{"id": "x", "object": "chat.completion"}')
        else:
            status = int(behaviour)
            handler._send(status, json.dumps({"error": {"message": f"scripted {status}"}}).encode())


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connection refused)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
