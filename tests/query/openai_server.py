"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 (stdlib only), for client tests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def vector_for(text: str) -> list[float]:
    """What the fake server embeds ``text`` to: a 4-d vector derived from its length."""
    n = len(text)
    return [float(n), 1.0, float(n % 3), 2.0]


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # a client that timed out is expected here
        pass


class EmbeddingServer:
    """A stdlib HTTP server on 127.0.0.1 that answers scripted responses, then a good one.

    ``script`` entries are ``(status, body_bytes_or_obj, headers)`` or a callable taking the
    request JSON; once it is exhausted every request gets a correct embeddings response
    (with ``data`` in reverse order to prove the client sorts by ``index``).
    """

    def __init__(self) -> None:
        self.script: list = []
        self.requests: list[dict] = []
        self.delay_s = 0.0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                server.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                if server.delay_s:
                    time.sleep(server.delay_s)
                if server.script:
                    status, payload, headers = server.script.pop(0)
                else:
                    data = [{"object": "embedding", "index": i, "embedding": vector_for(t)} for i, t in enumerate(body["input"])]
                    status, payload, headers = 200, {"object": "list", "data": data[::-1], "model": body["model"]}, {}
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                truncate = headers.pop("X-Test-Truncate", None) is not None
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                # A truncated reply promises more bytes than it sends, then hangs up.
                self.send_header("Content-Length", str(len(raw) + (100 if truncate else 0)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(raw)
                if truncate:
                    self.close_connection = True

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    def __enter__(self) -> "EmbeddingServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
