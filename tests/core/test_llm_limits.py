"""The chat client's streaming and limits against a real loopback HTTP server: streamed
completions assembled (and a stream cut short refused), a hard deadline per call that a
trickling reply cannot outlive, retries bounded by it, a token cap, bounded concurrency."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragspine_core.errors import ConfigError, ProviderError
from ragspine_core.llm import FEATURE_MAX_TOKENS, OpenAICompatibleProvider, feature_max_tokens
from ragspine_core.settings import Settings

MESSAGES = [{"role": "user", "content": "say hi"}]


class SSEServer:
    """``mode``: stream (pieces, then [DONE]) | cut (pieces, no end) | trickle (one piece per
    ``gap_s``, forever) | hold (answers after ``gap_s``) | json (a plain completion)."""

    def __init__(self, mode: str = "stream", pieces=("Hel", "lo", " there"), gap_s: float = 0.0) -> None:
        self.mode, self.pieces, self.gap_s = mode, list(pieces), gap_s
        self.bodies: list[dict] = []
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

    def __enter__(self) -> "SSEServer":
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with srv._lock:
                    srv.bodies.append(body)
                    srv.active += 1
                    srv.peak = max(srv.peak, srv.active)
                self.counted = True
                try:
                    srv.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    srv.leave(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def leave(self, h: BaseHTTPRequestHandler) -> None:
        """The request stops counting as active (once). A held answer leaves *before* its bytes
        are written: the client may send its next request the moment it has read them, before
        this handler's thread runs again, and that must not read as a third concurrent call."""
        with self._lock:
            if getattr(h, "counted", False):
                h.counted = False  # type: ignore[attr-defined]
                self.active -= 1

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        if self.mode in ("json", "hold"):
            if self.mode == "hold":
                time.sleep(self.gap_s)
            self.leave(h)
            out = json.dumps({"choices": [{"message": {"content": "".join(self.pieces)}}],
                              "usage": {"prompt_tokens": 5, "completion_tokens": 3}}).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(out)))
            h.end_headers()
            h.wfile.write(out)
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()

        def event(obj) -> None:
            h.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            h.wfile.flush()

        if self.mode == "trickle":
            while True:
                event({"choices": [{"delta": {"content": "x"}, "finish_reason": None}]})
                time.sleep(self.gap_s)
        for p in self.pieces:
            event({"choices": [{"delta": {"content": p}, "finish_reason": None}]})
        if self.mode == "stream":
            event({"choices": [{"delta": {}, "finish_reason": "stop"}]})
            h.wfile.write(b"data: [DONE]\n\n")
        h.close_connection = True


def test_a_streamed_completion_is_assembled_and_asked_for():
    with SSEServer("stream") as srv:
        p = OpenAICompatibleProvider(srv.base_url, "m", stream=True, timeout_s=5)
        assert p.chat(MESSAGES, max_tokens=feature_max_tokens("step_back")) == "Hello there"
        assert srv.bodies[0]["stream"] is True and srv.bodies[0]["max_tokens"] == FEATURE_MAX_TOKENS["step_back"]
        assert p.usage["calls"] == 1 and p.usage["completion_tokens"] == 3  # no usage event: the pieces are counted


def test_a_stream_cut_short_is_an_error_not_a_truncated_answer():
    with SSEServer("cut") as srv:
        p = OpenAICompatibleProvider(srv.base_url, "m", stream=True, timeout_s=5, max_retries=1, backoff_s=0.01)
        with pytest.raises(ProviderError, match="cut short"):
            p.chat(MESSAGES)


def test_the_deadline_stops_a_reply_that_trickles_forever():
    with SSEServer("trickle", gap_s=0.1) as srv:
        # each piece arrives well within the socket timeout: only the deadline can stop it
        p = OpenAICompatibleProvider(srv.base_url, "m", stream=True, timeout_s=5, deadline_s=1.0, max_retries=3)
        t0 = time.monotonic()
        with pytest.raises(ProviderError, match="deadline of 1 s"):
            p.chat(MESSAGES)
        elapsed = time.monotonic() - t0
        assert elapsed < 1.6, elapsed
        assert len(srv.bodies) == 1  # a call past its deadline is not retried


def test_the_deadline_bounds_retries_of_a_slow_server():
    with SSEServer("hold", gap_s=3.0) as srv:
        p = OpenAICompatibleProvider(srv.base_url, "m", timeout_s=0.4, deadline_s=1.0, max_retries=10, backoff_s=0.05)
        t0 = time.monotonic()
        with pytest.raises(ProviderError) as info:
            p.chat(MESSAGES)
        assert time.monotonic() - t0 < 1.5
        assert 1 <= len(srv.bodies) <= 3, len(srv.bodies)  # far fewer than 11 attempts
        assert "attempt(s)" in str(info.value)


def test_concurrency_is_bounded_per_endpoint():
    with SSEServer("hold", gap_s=0.3) as srv:
        p = OpenAICompatibleProvider(srv.base_url, "m", timeout_s=5, max_concurrency=2)
        threads = [threading.Thread(target=p.chat, args=(MESSAGES,)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        assert len(srv.bodies) == 6 and srv.peak == 2
        assert p.usage == {"calls": 6, "prompt_tokens": 30, "completion_tokens": 18}


def test_limits_come_from_settings_and_bad_values_are_named():
    s = Settings(llm_base_url="http://127.0.0.1:9/v1", llm_model="m", llm_stream="on", llm_deadline_s="7.5",
                 llm_max_tokens="33", llm_concurrency="3")
    p = OpenAICompatibleProvider.from_settings(s)
    assert (p.stream, p.deadline_s, p.max_tokens_cap, p.max_concurrency) == (True, 7.5, 33, 3)
    with pytest.raises(ConfigError, match="RAGSPINE_LLM_DEADLINE_S"):
        OpenAICompatibleProvider.from_settings(Settings(llm_base_url="http://h/v1", llm_model="m", llm_deadline_s="soon"))
    with pytest.raises(ConfigError, match="RAGSPINE_LLM_CONCURRENCY"):
        OpenAICompatibleProvider.from_settings(Settings(llm_base_url="http://h/v1", llm_model="m", llm_concurrency="0"))


def test_the_attempt_timeout_comes_from_settings():
    """RAGSPINE_LLM_TIMEOUT_S: a slow local model whose replies take longer than the 30 s
    default can be waited for (within the deadline); a bad value is named."""
    assert OpenAICompatibleProvider.from_settings(Settings(llm_base_url="http://h/v1", llm_model="m")).timeout_s == 30.0
    s = Settings.from_env({"RAGSPINE_LLM_BASE_URL": "http://h/v1", "RAGSPINE_LLM_MODEL": "m", "RAGSPINE_LLM_TIMEOUT_S": "300"})
    assert OpenAICompatibleProvider.from_settings(s).timeout_s == 300.0
    with pytest.raises(ConfigError, match="RAGSPINE_LLM_TIMEOUT_S"):
        OpenAICompatibleProvider.from_settings(Settings(llm_base_url="http://h/v1", llm_model="m", llm_timeout_s="-1"))
