"""The LLM seam: an ``LLMProvider`` protocol and an OpenAI-compatible HTTP client.

``OpenAICompatibleProvider`` speaks the ``/v1/chat/completions`` wire format that vLLM,
llama.cpp's server, Ollama and hosted OpenAI-style APIs all accept. It uses only the
standard library (``urllib``), so the default install needs no HTTP dependency.

Environment variables are read in exactly one place, :meth:`OpenAICompatibleProvider.from_env`.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from ragspine_query.errors import ConfigError, ProviderError

#: Environment variables read by :meth:`OpenAICompatibleProvider.from_env`.
ENV_BASE_URL = "RAGSPINE_LLM_BASE_URL"
ENV_MODEL = "RAGSPINE_LLM_MODEL"
ENV_API_KEY = "RAGSPINE_LLM_API_KEY"
ENV_API_KEY_FALLBACK = "OPENAI_API_KEY"

#: HTTP statuses worth another attempt: rate limiting and server-side failures.
_RETRYABLE_STATUS_FLOOR = 500
_RATE_LIMITED = 429

#: How much of an unusable response body an error message quotes.
_EXCERPT_CHARS = 200


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
    """
    url = base_url.strip().rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    return url + "/v1/chat/completions"


def _excerpt(body: bytes | str) -> str:
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    text = text.strip()
    if len(text) > _EXCERPT_CHARS:
        text = text[:_EXCERPT_CHARS] + "…"
    return repr(text)


class OpenAICompatibleProvider:
    """An :class:`LLMProvider` for any server exposing ``POST /v1/chat/completions``.

    Failures that may pass (HTTP 429, HTTP 5xx, timeouts, refused or dropped
    connections) are retried up to ``max_retries`` times, sleeping
    ``backoff_s * 2**attempt`` between attempts. Any other 4xx fails at once, and so
    does a 200 whose body is not JSON or lacks ``choices[0].message.content`` — those
    would fail the same way again.

    Args:
        base_url: server root, ``…/v1`` or the full endpoint (see :func:`chat_completions_url`).
        model: the model name the server expects in the request body.
        api_key: sent as ``Authorization: Bearer …`` when given; local servers need none.
        timeout_s: per-attempt socket timeout, seconds (> 0).
        max_retries: extra attempts after the first (>= 0).
        backoff_s: first sleep between attempts, doubled each time (>= 0).

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
    ) -> None:
        if not isinstance(base_url, str) or not base_url.strip().lower().startswith(("http://", "https://")):
            raise ConfigError(
                f"LLM base_url must be an http:// or https:// URL, got {base_url!r}; "
                f"set it to the server root, e.g. 'http://127.0.0.1:8000/v1'"
            )
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"LLM model name must be a non-empty string, got {model!r}")
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ConfigError(f"timeout_s must be a number > 0, got {timeout_s!r}")
        if not (isinstance(max_retries, int) and not isinstance(max_retries, bool) and max_retries >= 0):
            raise ConfigError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if not (isinstance(backoff_s, (int, float)) and backoff_s >= 0):
            raise ConfigError(f"backoff_s must be a number >= 0, got {backoff_s!r}")
        self.base_url = base_url.strip()
        self.url = chat_completions_url(self.base_url)
        self.model = model.strip()
        self._api_key = api_key or None
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> "OpenAICompatibleProvider":
        """Build a provider from ``RAGSPINE_LLM_BASE_URL`` / ``RAGSPINE_LLM_MODEL``.

        The API key comes from ``RAGSPINE_LLM_API_KEY``, else ``OPENAI_API_KEY``, else
        none. ``environ`` defaults to ``os.environ``; ``overrides`` (``timeout_s``,
        ``max_retries``, ``backoff_s``) pass through to the constructor.

        Raises:
            ConfigError: the base URL or the model variable is unset.
        """
        env = os.environ if environ is None else environ
        base_url = env.get(ENV_BASE_URL, "").strip()
        model = env.get(ENV_MODEL, "").strip()
        missing = [name for name, value in ((ENV_BASE_URL, base_url), (ENV_MODEL, model)) if not value]
        if missing:
            raise ConfigError(
                f"cannot configure the LLM provider: {' and '.join(missing)} not set; "
                f"export {ENV_BASE_URL} (e.g. http://127.0.0.1:8000/v1) and {ENV_MODEL} "
                f"(the model name your server serves)"
            )
        api_key = env.get(ENV_API_KEY, "").strip() or env.get(ENV_API_KEY_FALLBACK, "").strip() or None
        return cls(base_url, model, api_key=api_key, **overrides)

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
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        raw = self._post_with_retries(body)
        return self._extract_content(raw)

    def _post_with_retries(self, body: bytes) -> bytes:
        attempts = self.max_retries + 1
        last_problem = ""
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.backoff_s * (2 ** (attempt - 1)))
            try:
                return self._post_once(body)
            except urllib.error.HTTPError as err:
                try:
                    detail = _excerpt(err.read() or b"")
                except OSError:
                    detail = "(body unreadable)"
                last_problem = f"HTTP {err.code} {err.reason}: {detail}"
                if err.code != _RATE_LIMITED and err.code < _RETRYABLE_STATUS_FLOOR:
                    raise ProviderError(
                        f"LLM request to {self.url} failed with {last_problem}; "
                        f"this status is not retried — check the model name, the API key "
                        f"and the request"
                    ) from err
            except TimeoutError:
                last_problem = f"no response within {self.timeout_s:g} s"
            except urllib.error.URLError as err:
                if isinstance(err.reason, TimeoutError):
                    last_problem = f"no response within {self.timeout_s:g} s"
                else:
                    last_problem = f"connection failed: {err.reason}"
            except OSError as err:  # connection reset / dropped mid-response
                last_problem = f"connection failed: {err}"
        raise ProviderError(
            f"LLM request to {self.url} failed after {attempts} attempt(s); last problem: "
            f"{last_problem} — check that the server is up and reachable, or raise "
            f"timeout_s / max_retries"
        )

    def _post_once(self, body: bytes) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return response.read()

    def _extract_content(self, raw: bytes) -> str:
        try:
            parsed = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ProviderError(
                f"LLM response from {self.url} is not JSON ({err}); body starts {_excerpt(raw)}"
            ) from err
        choices = parsed.get("choices") if isinstance(parsed, dict) else None
        if not isinstance(choices, list) or not choices:
            raise ProviderError(
                f"LLM response from {self.url} has no 'choices' list; body starts {_excerpt(raw)}"
            )
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise ProviderError(
                f"LLM response from {self.url} lacks a string choices[0].message.content; "
                f"body starts {_excerpt(raw)}"
            )
        return content
