"""OpenAICompatibleProvider against a real HTTP server on 127.0.0.1 (no mock objects)."""

from __future__ import annotations

import json
import time

import pytest

from tests.query.rerank.llm_server import LocalChatServer, closed_port_url

from ragspine_core.errors import ConfigError, ProviderError  # noqa: E402
from ragspine_core.llm import LLMProvider, OpenAICompatibleProvider, chat_completions_url  # noqa: E402
from ragspine_core.settings import Settings  # noqa: E402

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "say hi"}]


def fixed_reply(_request) -> str:
    return "hello from the local server"


def provider_for(server: LocalChatServer, **kwargs) -> OpenAICompatibleProvider:
    kwargs.setdefault("timeout_s", 2.0)
    kwargs.setdefault("backoff_s", 0.01)
    return OpenAICompatibleProvider(server.base_url, "tiny-model", **kwargs)


def test_chat_returns_message_content_and_sends_openai_body():
    with LocalChatServer("ok", reply=fixed_reply) as server:
        provider = provider_for(server, api_key="sk-test-123")
        assert isinstance(provider, LLMProvider)
        reply = provider.chat(MESSAGES, temperature=0.3, max_tokens=17)
        assert reply == "hello from the local server"
        assert len(server.requests) == 1
        request = server.requests[0]
        assert request.path == "/v1/chat/completions"
        assert request.json_body == {
            "model": "tiny-model",
            "messages": MESSAGES,
            "temperature": 0.3,
            "stream": False,
            "max_tokens": 17,
        }
        assert request.headers["Authorization"] == "Bearer sk-test-123"
        assert request.headers["Content-Type"] == "application/json"


def test_no_api_key_sends_no_authorization_and_a_call_without_a_budget_gets_the_cap():
    with LocalChatServer("ok", reply=fixed_reply) as server:
        provider_for(server).chat(MESSAGES)
        provider_for(server, max_tokens_cap=40).chat(MESSAGES, max_tokens=300)
        request = server.requests[0]
        assert "Authorization" not in request.headers
        assert request.json_body["max_tokens"] == 512  # never an unbounded completion
        assert server.requests[1].json_body["max_tokens"] == 40  # a feature's budget is cut to the cap
        assert request.json_body["temperature"] == 0.0


def test_non_ascii_messages_arrive_intact():
    with LocalChatServer("ok", reply=lambda r: r["messages"][-1]["content"]) as server:
        assert provider_for(server).chat([{"role": "user", "content": "为什么营收下滑"}]) == "为什么营收下滑"


@pytest.mark.parametrize(
    "base, expected",
    [
        ("http://h:1", "http://h:1/v1/chat/completions"),
        ("http://h:1/", "http://h:1/v1/chat/completions"),
        ("http://h:1/v1", "http://h:1/v1/chat/completions"),
        ("http://h:1/v1/", "http://h:1/v1/chat/completions"),
        ("http://h:1/v1/chat/completions", "http://h:1/v1/chat/completions"),
        ("http://h:1/api/v1", "http://h:1/api/v1/chat/completions"),
    ],
)
def test_base_url_forms_resolve_to_the_chat_completions_endpoint(base, expected):
    assert chat_completions_url(base) == expected


def test_rate_limited_then_ok_is_retried():
    with LocalChatServer(["429", "ok"], reply=fixed_reply) as server:
        assert provider_for(server, max_retries=2).chat(MESSAGES) == "hello from the local server"
        assert len(server.requests) == 2
        assert server.requests[0].raw_body == server.requests[1].raw_body


def test_server_error_then_ok_is_retried():
    with LocalChatServer(["500", "500", "ok"], reply=fixed_reply) as server:
        assert provider_for(server, max_retries=2).chat(MESSAGES) == "hello from the local server"
        assert len(server.requests) == 3


def test_persistent_500_exhausts_retries_with_provider_error():
    with LocalChatServer("500") as server:
        provider = provider_for(server, max_retries=2)
        with pytest.raises(ProviderError) as info:
            provider.chat(MESSAGES)
        assert len(server.requests) == 3
        message = str(info.value)
        assert provider.url in message
        assert "3 attempt" in message
        assert "HTTP 500" in message


def test_backoff_grows_exponentially_between_attempts():
    with LocalChatServer("500") as server:
        provider = provider_for(server, max_retries=2, backoff_s=0.1)
        started = time.monotonic()
        with pytest.raises(ProviderError):
            provider.chat(MESSAGES)
        # sleeps 0.1 then 0.2 seconds
        assert time.monotonic() - started >= 0.3


def test_client_error_other_than_429_fails_at_once():
    with LocalChatServer("400") as server:
        provider = provider_for(server, max_retries=3)
        with pytest.raises(ProviderError) as info:
            provider.chat(MESSAGES)
        assert len(server.requests) == 1
        assert "HTTP 400" in str(info.value)
        assert "not retried" in str(info.value)


def test_garbage_body_is_a_provider_error_naming_the_url():
    with LocalChatServer("garbage") as server:
        provider = provider_for(server, max_retries=2)
        with pytest.raises(ProviderError) as info:
            provider.chat(MESSAGES)
        assert len(server.requests) == 1  # a bad body is not retried
        assert provider.url in str(info.value)
        assert "not JSON" in str(info.value)


def test_missing_choices_content_is_a_provider_error_saying_what_is_missing():
    with LocalChatServer("no_content") as server:
        with pytest.raises(ProviderError) as info:
            provider_for(server).chat(MESSAGES)
        assert "choices" in str(info.value)
        assert server.base_url in str(info.value)


@pytest.mark.parametrize(
    "body",
    [
        {"choices": []},
        {"choices": [{"message": {"role": "assistant"}}]},
        {"choices": [{"message": {"role": "assistant", "content": None}}]},
        {"choices": [{"text": "legacy completion shape"}]},
        [1, 2, 3],
    ],
)
def test_malformed_completion_shapes_raise_provider_error(body):
    with LocalChatServer("ok") as server:
        provider = provider_for(server)
        with pytest.raises(ProviderError) as info:
            provider._extract_content(json.dumps(body).encode())
        assert "choices" in str(info.value)


def test_slow_server_times_out_and_retries_then_fails():
    with LocalChatServer("slow", slow_s=1.0) as server:
        provider = provider_for(server, timeout_s=0.2, max_retries=1)
        with pytest.raises(ProviderError) as info:
            provider.chat(MESSAGES)
        assert len(server.requests) == 2
        assert "no response within 0.2 s" in str(info.value)  # the timeout fired (no wall-clock bound: busy machines)


def test_slow_then_ok_recovers_on_retry():
    with LocalChatServer(["slow", "ok"], reply=fixed_reply, slow_s=1.0) as server:
        provider = provider_for(server, timeout_s=0.2, max_retries=1)
        assert provider.chat(MESSAGES) == "hello from the local server"
        assert len(server.requests) == 2


def test_connection_refused_is_retried_then_reported():
    url = closed_port_url()
    provider = OpenAICompatibleProvider(url, "m", timeout_s=0.5, max_retries=1, backoff_s=0.01)
    with pytest.raises(ProviderError) as info:
        provider.chat(MESSAGES)
    assert "2 attempt" in str(info.value)
    assert "connection failed" in str(info.value)


def test_from_env_reads_url_model_and_key():
    env = {
        "RAGSPINE_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "RAGSPINE_LLM_MODEL": "qwen",
        "RAGSPINE_LLM_API_KEY": "sk-ragspine",
        "OPENAI_API_KEY": "sk-openai",
    }
    provider = OpenAICompatibleProvider.from_settings(Settings.from_env(env), timeout_s=5.0)
    assert provider.url == "http://127.0.0.1:9/v1/chat/completions"
    assert provider.model == "qwen"
    assert provider._api_key == "sk-ragspine"
    assert provider.timeout_s == 5.0
    assert "sk-ragspine" not in repr(provider)


def test_from_env_falls_back_to_openai_api_key():
    env = {"RAGSPINE_LLM_BASE_URL": "http://x/v1", "RAGSPINE_LLM_MODEL": "m", "OPENAI_API_KEY": "sk-openai"}
    assert OpenAICompatibleProvider.from_settings(Settings.from_env(env))._api_key == "sk-openai"
    env.pop("OPENAI_API_KEY")
    assert OpenAICompatibleProvider.from_settings(Settings.from_env(env))._api_key is None


def test_from_env_names_the_missing_variables():
    with pytest.raises(ConfigError) as info:
        OpenAICompatibleProvider.from_settings(Settings.from_env({"RAGSPINE_LLM_MODEL": "m"}))
    assert "RAGSPINE_LLM_BASE_URL" in str(info.value)
    assert "RAGSPINE_LLM_MODEL not" not in str(info.value)


def test_from_env_round_trips_against_the_server():
    with LocalChatServer("ok", reply=fixed_reply) as server:
        env = {"RAGSPINE_LLM_BASE_URL": server.base_url, "RAGSPINE_LLM_MODEL": "m"}
        assert OpenAICompatibleProvider.from_settings(Settings.from_env(env), backoff_s=0.0).chat(MESSAGES) == "hello from the local server"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_url": "127.0.0.1:8000"},
        {"base_url": ""},
        {"model": " "},
        {"timeout_s": 0},
        {"max_retries": -1},
        {"max_retries": 1.5},
        {"backoff_s": -0.1},
    ],
)
def test_invalid_arguments_raise_config_error(kwargs):
    args = {"base_url": "http://127.0.0.1:8000", "model": "m", **kwargs}
    with pytest.raises(ConfigError):
        OpenAICompatibleProvider(**args)
