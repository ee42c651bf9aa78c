"""The one OpenAI-compatible HTTP client, and that chat and embeddings follow the same rules.

Every test runs against a real server on 127.0.0.1 (no mocks); the retry tests run once
for the chat provider and once for the embeddings backend.
"""

from __future__ import annotations

import json
import time
from email.utils import formatdate

import pytest

from ragspine_core.dense import OpenAIEmbeddingBackend
from ragspine_core.errors import ConfigError, ProviderError
from ragspine_core.llm import OpenAICompatibleProvider
from ragspine_core.net.openai_http import (
    OpenAIHttpClient,
    excerpt,
    openai_endpoint,
    request_texts,
    retry_after_seconds,
)
from tests.query.openai_server import EmbeddingServer

SECRET = "Acme China restricted margin figures 2024"


def chat_reply(content: str = "ok") -> tuple[int, dict, dict]:
    return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}, {}


def call_chat(server: EmbeddingServer, **kwargs) -> object:
    """Send one chat request; the script's final answer must be a chat reply."""
    kwargs.setdefault("backoff_s", 0.0)
    kwargs.setdefault("timeout_s", 2.0)
    provider = OpenAICompatibleProvider(server.base_url, "m", **kwargs)
    return provider.chat([{"role": "user", "content": SECRET}])


def call_embeddings(server: EmbeddingServer, **kwargs) -> object:
    kwargs.setdefault("backoff_s", 0.0)
    kwargs.setdefault("timeout_s", 2.0)
    return OpenAIEmbeddingBackend(server.base_url, "m", dim=4, **kwargs).embed([SECRET])


CALLERS = {"chat": (call_chat, [chat_reply()]), "embeddings": (call_embeddings, [])}


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture(params=sorted(CALLERS))
def caller(request):
    """(call, tail): ``call(server, **kwargs)`` and the scripted success that ends a script."""
    return CALLERS[request.param]


@pytest.fixture()
def server():
    with EmbeddingServer() as srv:
        yield srv


# -- pure helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "base",
    ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/", "http://h:1/v1/embeddings"],
)
def test_endpoint_forms(base):
    assert openai_endpoint(base, "embeddings") == "http://h:1/v1/embeddings"


def test_endpoint_needs_a_scheme():
    with pytest.raises(ConfigError, match="http:// or https://"):
        openai_endpoint("localhost:8000", "embeddings")


@pytest.mark.parametrize(
    "value, expected",
    [("2", 2.0), (" 0 ", 0.0), ("0.5", 0.5), ("3600", 30.0), (None, None), ("", None), ("-1", None),
     ("soon", None), ("nan", None), ("inf", None)],
)
def test_retry_after_seconds(value, expected):
    assert retry_after_seconds(value) == expected


def test_retry_after_accepts_an_http_date_and_caps_it():
    now = time.time()
    assert retry_after_seconds(formatdate(now + 10, usegmt=True), now=now) == pytest.approx(10, abs=1)
    assert retry_after_seconds(formatdate(now + 999, usegmt=True), now=now, cap_s=5) == 5
    assert retry_after_seconds(formatdate(now - 60, usegmt=True), now=now) == 0.0


def test_request_texts_skip_model_and_role():
    payload = {"model": "some-model", "messages": [{"role": "user", "content": SECRET}], "input": ["abc", "longer"]}
    assert request_texts(payload) == (SECRET, "longer")


def test_excerpt_withholds_echoed_request_text_whole_escaped_or_cut():
    assert SECRET not in excerpt(f"bad input: {SECRET}", withhold=(SECRET,))
    escaped = json.dumps({"error": "你好世界，营收下滑"})
    assert "\\u4f60" not in excerpt(escaped, withhold=("你好世界，营收下滑",))
    assert SECRET[:32] not in excerpt(f"input too long: {SECRET[:32]}...", withhold=(SECRET,))


def test_client_arguments_are_checked():
    for kwargs in ({"timeout_s": 0}, {"max_retries": -1}, {"max_retries": True}, {"backoff_s": -1},
                   {"max_retry_after_s": -1}):
        with pytest.raises(ConfigError):
            OpenAIHttpClient("http://127.0.0.1:9/v1/x", **kwargs)
    assert "sk-secret" not in repr(OpenAIHttpClient("http://127.0.0.1:9/v1/x", api_key="sk-secret"))


# -- the same retry rules for chat and embeddings ----------------------------------------------


def test_retry_after_is_honoured(server, caller):
    call, tail = caller
    server.script = [(429, {"error": "slow down"}, {"Retry-After": "1"}), *tail]
    started = time.monotonic()
    call(server, max_retries=1)
    assert time.monotonic() - started >= 1.0
    assert len(server.requests) == 2


def test_retry_after_is_capped(server, caller, monkeypatch):
    import threading

    from ragspine_core.net import openai_http

    call, tail = caller
    server.script = [(503, {"error": "busy"}, {"Retry-After": "3600"}), *tail]
    asked: list[float] = []
    real_sleep, me = time.sleep, threading.get_ident()

    def spy(seconds: float) -> None:  # records what the client asks for, and still sleeps it
        if threading.get_ident() == me:
            asked.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(openai_http.time, "sleep", spy)
    call(server, max_retries=1, max_retry_after_s=0.2)
    # the cap is what is tested: the client waits 0.2 s, not the server's hour (no wall clock read)
    assert asked == [pytest.approx(0.2)]
    assert len(server.requests) == 2


def test_backoff_doubles_when_retry_after_is_shorter(server, caller):
    call, tail = caller
    server.script = [(500, {}, {"Retry-After": "0"}), (500, {}, {}), *tail]
    started = time.monotonic()
    call(server, max_retries=2, backoff_s=0.05)
    assert time.monotonic() - started >= 0.05 + 0.10
    assert len(server.requests) == 3


def test_reply_cut_short_is_retried(server, caller):
    call, tail = caller
    server.script = [(200, {"data": []}, {"X-Test-Truncate": "1"}), *tail]
    call(server)
    assert len(server.requests) == 2


def test_exhausted_retries_name_url_attempts_and_status(server, caller):
    call, _ = caller
    server.script = [(503, {"error": f"down while handling {SECRET}"}, {})] * 3
    with pytest.raises(ProviderError) as info:
        call(server, max_retries=2)
    message = str(info.value)
    assert "after 3 attempt(s)" in message and "HTTP 503" in message and server.base_url in message
    assert SECRET not in message and SECRET[:16] not in message
    assert len(server.requests) == 3


def test_other_4xx_fails_at_once_without_quoting_the_request(server, caller):
    call, _ = caller
    server.script = [(400, {"error": {"message": f"input rejected: {SECRET}"}}, {})]
    with pytest.raises(ProviderError) as info:
        call(server, max_retries=3)
    message = str(info.value)
    assert "HTTP 400" in message and "not retried" in message and "input rejected" in message
    assert SECRET not in message and SECRET[:16] not in message
    assert len(server.requests) == 1


def test_non_json_body_is_not_retried(server, caller):
    call, _ = caller
    server.script = [(200, b"<html>gateway</html>", {})]
    with pytest.raises(ProviderError, match="not JSON"):
        call(server, max_retries=3)
    assert len(server.requests) == 1
