"""The LLM seam: an ``LLMProvider`` protocol and an OpenAI-compatible chat provider.

``OpenAICompatibleProvider`` speaks the ``/v1/chat/completions`` wire format that vLLM,
llama.cpp's server, Ollama and hosted OpenAI-style APIs all accept. Transport, timeouts
and retries are the shared :class:`~ragspine_core.net.openai_http.OpenAIHttpClient`
(the embeddings backend uses the same one).

Configuration comes in as values: the constructor, or :meth:`OpenAICompatibleProvider.from_settings`
with a :class:`~ragspine_core.settings.Settings` built at an edge (``from_env`` is that
shortcut; the variables are listed in ``docs/configuration.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ragspine_core.errors import ConfigError, ProviderError
from ragspine_core.net.openai_http import OpenAIHttpClient, excerpt, openai_endpoint

if TYPE_CHECKING:
    from ragspine_core.settings import Settings

#: The variables behind :meth:`OpenAICompatibleProvider.from_settings` (see ``ENV_VARS``).
ENV_BASE_URL = "RAGSPINE_LLM_BASE_URL"
ENV_MODEL = "RAGSPINE_LLM_MODEL"
ENV_API_KEY = "RAGSPINE_LLM_API_KEY"
ENV_API_KEY_FALLBACK = "OPENAI_API_KEY"


@runtime_checkable
class LLMProvider(Protocol):
    """Anything that answers a list of chat messages with one text completion."""

    def chat(
        self,
        messages: list[dict],
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
    ) -> None:
        self.url = chat_completions_url(base_url)
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"LLM model name must be a non-empty string, got {model!r}")
        retry = {"timeout_s": timeout_s, "max_retries": max_retries, "backoff_s": backoff_s, "max_retry_after_s": max_retry_after_s}
        self._client = OpenAIHttpClient(self.url, api_key=api_key, what="LLM request", **retry)
        self.base_url = base_url.strip()
        self.model = model.strip()
        self._api_key = api_key or None
        self.timeout_s = self._client.timeout_s
        self.max_retries = self._client.max_retries
        self.backoff_s = self._client.backoff_s

    @classmethod
    def from_settings(cls, settings: "Settings", **overrides) -> "OpenAICompatibleProvider":
        """Build a provider from ``settings.llm_base_url`` / ``llm_model`` / ``llm_api_key``.

        ``overrides`` (``timeout_s``, ``max_retries``, ``backoff_s``, ``max_retry_after_s``)
        pass through to the constructor.

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
        return cls(base_url, model, api_key=settings.llm_api_key.strip() or None, **overrides)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> "OpenAICompatibleProvider":
        """:meth:`from_settings` on ``Settings.from_env(environ)`` (default ``os.environ``).

        The API key is ``RAGSPINE_LLM_API_KEY``, else ``OPENAI_API_KEY``, else none.
        """
        from ragspine_core.settings import Settings

        return cls.from_settings(Settings.from_env(environ), **overrides)

    def __repr__(self) -> str:  # never show the key
        key = "set" if self._api_key else "none"
        return f"OpenAICompatibleProvider(url={self.url!r}, model={self.model!r}, api_key={key})"

    def chat(
        self,
        messages: list[dict],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> str:
        """Send ``messages`` to the server and return ``choices[0].message.content``.

        Raises:
            ProviderError: retries exhausted, a non-retryable HTTP status, or an
                unusable response body; the message names the URL and the problem.
        """
        payload: dict = {
            "model": self.model,
            "messages": list(messages),
            "temperature": float(temperature),
            "stream": False,
        }
        if max_tokens is not None:
            payload["max_tokens"] = int(max_tokens)
        return self._extract_content(self._client.post(payload))

    def _extract_content(self, raw: bytes) -> str:
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
            return content
        raise ProviderError(f"LLM response from {self.url} {problem}; body starts {excerpt(raw)}")
