"""The LLM seam: an ``LLMProvider`` protocol and an OpenAI-compatible chat provider.

``OpenAICompatibleProvider`` speaks the ``/v1/chat/completions`` wire format that vLLM,
llama.cpp's server, Ollama and hosted OpenAI-style APIs all accept. Transport, timeouts
and retries are the shared :class:`~ragspine_core.net.openai_http.OpenAIHttpClient`
(the embeddings backend uses the same one).

Configuration comes in as values: the constructor, or :meth:`OpenAICompatibleProvider.from_settings`
with a :class:`~ragspine_core.settings.Settings` built at an edge
(``OpenAICompatibleProvider.from_settings(Settings.from_env())``; the variables are listed
in ``docs/configuration.md``). Nothing here reads the environment.
"""

from __future__ import annotations

import json
import threading
from typing import Any, TYPE_CHECKING, Protocol, runtime_checkable

from ragspine_core.errors import ConfigError, ProviderError
from ragspine_core.net.openai_http import (
    DEFAULT_DEADLINE_S,
    DEFAULT_MAX_CONCURRENCY,
    OpenAIHttpClient,
    excerpt,
    openai_endpoint,
)

if TYPE_CHECKING:
    from ragspine_core.settings import Settings

#: The variables behind :meth:`OpenAICompatibleProvider.from_settings` (see ``ENV_VARS``).
ENV_BASE_URL = "RAGSPINE_LLM_BASE_URL"
ENV_MODEL = "RAGSPINE_LLM_MODEL"
ENV_API_KEY = "RAGSPINE_LLM_API_KEY"
ENV_API_KEY_FALLBACK = "OPENAI_API_KEY"

#: The completion tokens each LLM feature asks for (its budget per call). A provider's
#: ``max_tokens_cap`` (``RAGSPINE_LLM_MAX_TOKENS``) bounds them all; a call that names no
#: budget gets the cap.
FEATURE_MAX_TOKENS: dict[str, int] = {
    "listwise": 64,      # "[2] > [0] > [1] ..." for the top 10
    "hyde": 300,         # a 3-5 sentence passage
    "step_back": 80,     # one question
    "decompose": 60,     # per sub-question (x max_subquestions)
    "filters": 120,      # a small JSON object
    "tiers": 8,          # one word
    "grader": 8,         # one word
    "rewrite": 80,       # one query
    "fusion": 60,        # per reformulation
    "openie": 512,       # JSON triples of one chunk
    "raptor": 256,       # one summary paragraph
}
DEFAULT_MAX_TOKENS_CAP = 512


def feature_max_tokens(feature: str, *, times: int = 1) -> int:
    """The completion-token budget of one call of ``feature`` (see :data:`FEATURE_MAX_TOKENS`)."""
    return FEATURE_MAX_TOKENS[feature] * max(1, int(times))


@runtime_checkable
class LLMProvider(Protocol):
    """Anything that answers a list of chat messages with one text completion."""

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> str:
        """Return the assistant's reply to ``messages`` (``[{"role", "content"}, ...]``).

        Raises:
            ProviderError: the provider failed or answered something unusable.
        """
        ...


def chat_completions_url(base_url: str) -> str:
    """The full chat-completions endpoint for a server's base URL.

    Accepts ``http://host:8000``, ``http://host:8000/v1`` or the full
    ``http://host:8000/v1/chat/completions`` (a trailing slash is ignored).

    Raises:
        ConfigError: ``base_url`` is not an http:// or https:// URL.
    """
    return openai_endpoint(base_url, "chat/completions", what="LLM")


class OpenAICompatibleProvider:
    """An :class:`LLMProvider` for any server exposing ``POST /v1/chat/completions``.

    Transport follows :class:`~ragspine_core.net.openai_http.OpenAIHttpClient`: HTTP
    429, 5xx, timeouts, refused or dropped connections are retried up to
    ``max_retries`` times, sleeping ``backoff_s * 2**attempt`` (or the server's
    ``Retry-After``, capped at ``max_retry_after_s``) between attempts. Any other 4xx
    fails at once, and so does a 200 whose body is not JSON or lacks
    ``choices[0].message.content`` — those would fail the same way again.

    Args:
        base_url: server root, ``…/v1`` or the full endpoint (see :func:`chat_completions_url`).
        model: the model name the server expects in the request body.
        api_key: sent as ``Authorization: Bearer …`` when given; local servers need none.
        timeout_s: per-attempt socket timeout, seconds (> 0).
        max_retries: extra attempts after the first (>= 0).
        backoff_s: first sleep between attempts, doubled each time (>= 0).
        max_retry_after_s: the longest ``Retry-After`` obeyed, seconds (>= 0).
        deadline_s: the hard limit of one :meth:`chat` call, all attempts together (> 0).
        max_concurrency: :meth:`chat` calls to this endpoint at once in this process (>= 1).
        stream: ask for a streamed completion (server-sent events, assembled here).
        max_tokens_cap: the most completion tokens any call asks for (>= 1); a call's own
            ``max_tokens`` (the feature's budget) is cut to it, and a call without one gets it.

    ``usage`` counts calls and the tokens the server reported (``usage`` of the reply; a
    streamed reply that reports none counts its pieces as completion tokens).

    Raises:
        ConfigError: an argument is out of range.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_retry_after_s: float = 30.0,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        stream: bool = False,
        max_tokens_cap: int = DEFAULT_MAX_TOKENS_CAP,
    ) -> None:
        self.url = chat_completions_url(base_url)
        if isinstance(max_tokens_cap, bool) or not (isinstance(max_tokens_cap, int) and max_tokens_cap >= 1):
            raise ConfigError(f"max_tokens_cap must be an integer >= 1, got {max_tokens_cap!r}")
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"LLM model name must be a non-empty string, got {model!r}")
        self._client = OpenAIHttpClient(self.url, api_key=api_key, what="LLM request", timeout_s=timeout_s,
                                        max_retries=max_retries, backoff_s=backoff_s, max_retry_after_s=max_retry_after_s,
                                        deadline_s=deadline_s, max_concurrency=max_concurrency)
        self.stream = bool(stream)
        self.max_tokens_cap = max_tokens_cap
        self.deadline_s = self._client.deadline_s
        self.max_concurrency = self._client.max_concurrency
        self.usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self._usage_lock = threading.Lock()
        self.base_url = base_url.strip()
        self.model = model.strip()
        self._api_key = api_key or None
        self.timeout_s = self._client.timeout_s
        self.max_retries = self._client.max_retries
        self.backoff_s = self._client.backoff_s

    @classmethod
    def from_settings(cls, settings: "Settings", **overrides: Any) -> "OpenAICompatibleProvider":
        """Build a provider from ``settings.llm_base_url`` / ``llm_model`` / ``llm_api_key``.

        ``settings.llm_stream`` / ``llm_deadline_s`` / ``llm_timeout_s`` / ``llm_max_tokens`` / ``llm_concurrency``
        (``RAGSPINE_LLM_STREAM``, ``…_DEADLINE_S``, ``…_TIMEOUT_S``, ``…_MAX_TOKENS``, ``…_CONCURRENCY``) set
        streaming and the limits; ``overrides`` (any constructor argument) win.

        Raises:
            ConfigError: the base URL or the model is not set (the message names the variables).
        """
        base_url, model = settings.llm_base_url.strip(), settings.llm_model.strip()
        missing = [name for name, value in ((ENV_BASE_URL, base_url), (ENV_MODEL, model)) if not value]
        if missing:
            raise ConfigError(
                f"cannot configure the LLM provider: {' and '.join(missing)} not set; "
                f"export {ENV_BASE_URL} (e.g. http://127.0.0.1:8000/v1) and {ENV_MODEL} "
                f"(the model name your server serves)"
            )
        limits = _limits_of(settings)
        limits.update(overrides)
        return cls(base_url, model, api_key=settings.llm_api_key.strip() or None, **limits)

    def __repr__(self) -> str:  # never show the key
        key = "set" if self._api_key else "none"
        return f"OpenAICompatibleProvider(url={self.url!r}, model={self.model!r}, api_key={key})"

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> str:
        """Send ``messages`` to the server and return ``choices[0].message.content``.

        Raises:
            ProviderError: retries exhausted, a non-retryable HTTP status, or an
                unusable response body; the message names the URL and the problem.
        """
        cap = self.max_tokens_cap if max_tokens is None else min(int(max_tokens), self.max_tokens_cap)
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": float(temperature),
            "stream": self.stream,
            "max_tokens": max(1, cap),
        }
        raw = self._client.post(payload)
        text, usage = self._extract_stream(raw) if self.stream else self._extract_content(raw)
        with self._usage_lock:
            self.usage["calls"] += 1
            for key in ("prompt_tokens", "completion_tokens"):
                self.usage[key] += int(usage.get(key) or 0)
        return text

    def _extract_content(self, raw: bytes) -> tuple[str, dict[str, Any]]:
        parsed = self._client.decode_json(raw)
        choices = parsed.get("choices") if isinstance(parsed, dict) else None
        message = None
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(choices, list) or not choices:
            problem = "has no 'choices' list"
        elif not isinstance(content, str):
            problem = "lacks a string choices[0].message.content"
        else:
            usage = parsed.get("usage") if isinstance(parsed.get("usage"), dict) else {}
            return content, usage
        raise ProviderError(f"LLM response from {self.url} {problem}; body starts {excerpt(raw)}")

    def _extract_stream(self, raw: bytes) -> tuple[str, dict[str, Any]]:
        """Assemble a streamed reply: ``data: {json}`` events (``choices[0].delta.content``)
        up to ``data: [DONE]``. A stream without [DONE] or a ``finish_reason`` was cut short."""
        pieces: list[str] = []
        usage: dict[str, Any] = {}
        finished = done = False
        text = raw.decode("utf-8", errors="replace")
        for line in text.splitlines():
            line = line.strip()
            if not line.startswith("data:"):
                continue  # blank separators, ": keep-alive" comments, "event:" lines
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            try:
                event = json.loads(data)
            except ValueError:
                raise ProviderError(f"LLM stream from {self.url} holds an event that is not JSON; "
                                    f"body starts {excerpt(raw)}") from None
            if isinstance(event, dict) and isinstance(event.get("usage"), dict):
                usage = event["usage"]
            choices = event.get("choices") if isinstance(event, dict) else None
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                continue
            delta = choices[0].get("delta") or choices[0].get("message") or {}
            piece = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(piece, str):
                pieces.append(piece)
            if choices[0].get("finish_reason"):
                finished = True
        if not (done or finished):
            raise ProviderError(f"LLM stream from {self.url} ended without [DONE] or a finish_reason (cut short); "
                                f"body starts {excerpt(raw)}")
        if not usage:
            usage = {"completion_tokens": len(pieces)}
        return "".join(pieces), usage


def _limits_of(settings: "Settings") -> dict[str, Any]:
    """The constructor arguments the ``RAGSPINE_LLM_*`` limit variables set (parsed and
    checked by :class:`~ragspine_core.settings.Settings`)."""
    return {"stream": settings.llm_stream, "deadline_s": settings.llm_deadline_s,
            "timeout_s": settings.llm_timeout_s,
            "max_tokens_cap": settings.llm_max_tokens, "max_concurrency": settings.llm_concurrency}
