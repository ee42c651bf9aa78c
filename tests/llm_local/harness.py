"""A real model behind the LLM seams: llama.cpp's server with the packaged Gemma 3 270M
(extra ``llm-local``), started once per session on a free loopback port, behind a
recording proxy that can *shape* what the model is asked, so that its real replies come
back malformed (prose instead of the asked-for form), partial (cut at a tiny
``max_tokens``), empty (cut by stop strings), repeated, in another language, or too late for the client's deadline.

The proxy records every request body the features sent (before shaping) for the
RESTRICTED scan, and every reply the model gave. The tests skip, saying why, only where
the extra is not installed.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: feature -> how many times a real model reply sent it down its documented fallback
FALLBACKS: Counter = Counter()
#: feature -> how many times a real model reply was used as asked (no fallback)
USED: Counter = Counter()
#: features whose tests ran this session
RAN: set = set()

#: what the shaped requests ask instead of the feature's own system prompt
SHAPES = {
    "prose": "You are a poet. Whatever the user writes, answer with a two-line poem about the sea.",
    "zh": "你只用中文回答，不用英文。用中文重写用户的话。",
    "repeat": "Reply with exactly this text and nothing else: [1] > [1] > [0] > [0]",
}


@dataclass
class Exchange:
    sent: bytes  # the request body as the feature sent it
    shape: str
    status: int = 0
    reply: bytes = b""
    seconds: float = 0.0


@dataclass
class ShapingProxy:
    """A loopback proxy in front of the model server (see the module docstring)."""

    upstream: str  # http://127.0.0.1:PORT (no /v1)
    slow_s: float = 0.0
    shape: str = "pass"
    exchanges: list[Exchange] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                with urllib.request.urlopen(proxy.upstream + self.path, timeout=10) as r:
                    body = r.read()
                self._send(200, body)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                ex = Exchange(raw, proxy.shape)
                with proxy._lock:
                    proxy.exchanges.append(ex)
                body = proxy._shaped(raw, ex.shape)
                t0 = time.monotonic()
                req = urllib.request.Request(proxy.upstream + self.path, data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=300) as r:
                        ex.status, ex.reply = r.status, r.read()
                except urllib.error.HTTPError as err:
                    ex.status, ex.reply = err.code, err.read()
                ex.seconds = time.monotonic() - t0
                if ex.shape == "slow":
                    time.sleep(proxy.slow_s)
                try:
                    self._send(ex.status, ex.reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client's deadline passed first (the "slow" shape)

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @staticmethod
    def _shaped(raw: bytes, shape: str) -> bytes:
        if shape in ("pass", "slow"):
            return raw
        body = json.loads(raw)
        if shape == "short":
            body["max_tokens"] = 2
        elif shape == "cut":  # the server stops at the first vowel or space: an empty or near-empty reply
            body["stop"] = list("aeiouAEIOU \n")
        else:
            msgs = body["messages"]
            system = {"role": "system", "content": SHAPES[shape]}
            body["messages"] = [system, *msgs[1:]] if msgs and msgs[0].get("role") == "system" else [system, *msgs]
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @contextlib.contextmanager
    def shaping(self, shape: str, slow_s: float = 0.0):
        self.shape, self.slow_s = shape, slow_s
        try:
            yield self
        finally:
            self.shape, self.slow_s = "pass", 0.0

    def answered(self, since: int = 0, wait_s: float = 120.0) -> list[Exchange]:
        """Exchanges since index ``since`` that the real model answered (HTTP 200), waiting
        (at most ``wait_s``) for replies still being computed — the client of a "slow"
        exchange gave up at its deadline, the model's reply comes later."""
        stop = time.monotonic() + wait_s
        while True:
            with self._lock:
                pending = [e for e in self.exchanges[since:] if e.status == 0]
                done = [e for e in self.exchanges[since:] if e.status == 200]
            if not pending or time.monotonic() >= stop:
                return done
            time.sleep(0.1)

    def mark(self) -> int:
        with self._lock:
            return len(self.exchanges)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()




def record(feature: str, fell_back: bool) -> None:
    RAN.add(feature)
    (FALLBACKS if fell_back else USED)[feature] += 1


#: the most completion tokens a test call asks for: a 270M model on 2 cores, seconds per call
TEST_MAX_TOKENS = 24
