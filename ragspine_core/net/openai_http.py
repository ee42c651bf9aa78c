"""The one HTTP client for OpenAI-compatible servers (chat completions and embeddings).

Standard library only (``urllib``), so the default install needs no HTTP dependency.
One rule set for every endpoint:

* Each attempt has a socket timeout of ``timeout_s``.
* HTTP 429, HTTP 5xx, timeouts, refused/reset connections and replies cut short are
  retried up to ``max_retries`` times. Before retry ``k`` (0-based) the client sleeps
  ``backoff_s * 2**k``, or the server's ``Retry-After`` when that is longer (seconds or
  an HTTP date, capped at ``max_retry_after_s``).
* Any other 4xx fails at once (it would fail the same way again), and so does a 200
  whose body is not JSON.
* A :class:`~ragspine_core.errors.ProviderError` names the URL and the problem and may
  quote the start of the *server's* reply, but never the request text: any request
  string that the reply echoes is withheld from the message.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from ragspine_core.errors import ConfigError, ProviderError

#: Statuses worth another attempt besides every 5xx.
RATE_LIMITED = 429
#: The longest ``Retry-After`` the client obeys, by default (seconds).
RETRY_AFTER_CAP_S = 30.0
#: How much of a server's reply an error message quotes.
EXCERPT_CHARS = 200
_WITHHELD = "[request text withheld]"
#: Request strings shorter than this are not searched for in replies (too common to tell).
_MIN_WITHHELD_CHARS = 4


def openai_endpoint(base_url: str, path: str, *, what: str = "server") -> str:
    """The full URL of ``/v1/<path>`` for a server given as its root, ``…/v1`` or the endpoint.

    >>> openai_endpoint("http://h:8000/v1/", "embeddings")
    'http://h:8000/v1/embeddings'
    >>> openai_endpoint("http://h:8000/v1/chat/completions", "chat/completions")
    'http://h:8000/v1/chat/completions'

    Raises:
        ConfigError: ``base_url`` is not an http:// or https:// URL.
    """
    if not isinstance(base_url, str) or not base_url.strip().lower().startswith(("http://", "https://")):
        raise ConfigError(
            f"{what} base_url must be an http:// or https:// URL, got {base_url!r}; "
            f"set it to the server root, e.g. 'http://127.0.0.1:8000/v1'"
        )
    url = base_url.strip().rstrip("/")
    if url.endswith("/" + path):
        return url
    if url.endswith("/v1"):
        return f"{url}/{path}"
    return f"{url}/v1/{path}"


def retry_after_seconds(value: str | None, *, cap_s: float = RETRY_AFTER_CAP_S, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (capped at ``cap_s``), or ``None``.

    Accepts delta-seconds (``"2"``, also ``"0.5"``) and an HTTP date; anything else,
    a negative or a non-finite value gives ``None`` (plain back-off applies).
    """
    if not value or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        current = datetime.now(timezone.utc).timestamp() if now is None else now
        seconds = max(0.0, when.timestamp() - current)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, cap_s)


def excerpt(body: Any, *, withhold: tuple[str, ...] = (), limit: int = EXCERPT_CHARS) -> str:
    """The start of a reply (bytes, text or JSON value) for an error message, quoted.

    Any string of ``withhold`` (the request's texts) found in it is replaced by a marker.
    """
    if isinstance(body, bytes):
        text = body.decode("utf-8", errors="replace")
    elif isinstance(body, str):
        text = body
    else:
        text = json.dumps(body, ensure_ascii=False, default=str)
    for secret in sorted(withhold, key=len, reverse=True):
        for piece in _echo_forms(secret):
            text = text.replace(piece, _WITHHELD)
    text = text.strip()
    if len(text) > limit:
        text = text[:limit] + "…"
    return repr(text)


def _echo_forms(secret: str) -> Iterator[str]:
    """How a server may echo a request string: whole, JSON-escaped, or its start."""
    for form in (secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]):
        if len(form) >= _MIN_WITHHELD_CHARS:
            yield form
            for n in (64, 32, 16):
                if len(form) > n:
                    yield form[:n]


def request_texts(payload: Any) -> tuple[str, ...]:
    """Every string in a request payload except the model name and message roles."""
    found: list[str] = []

    def walk(value: Any, key: str | None) -> None:
        if isinstance(value, str):
            if key not in ("model", "role") and len(value) >= _MIN_WITHHELD_CHARS:
                found.append(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, key)

    walk(payload, None)
    return tuple(dict.fromkeys(found))


class OpenAIHttpClient:
    """POSTs JSON to one OpenAI-compatible endpoint with timeouts and retries.

    Args:
        url: the full endpoint (see :func:`openai_endpoint`).
        api_key: sent as ``Authorization: Bearer …`` when given; never shown by ``repr``.
        timeout_s: per-attempt socket timeout, seconds (> 0).
        max_retries: extra attempts after the first (>= 0).
        backoff_s: first sleep between attempts, doubled each time (>= 0).
        max_retry_after_s: the longest ``Retry-After`` obeyed (>= 0).
        what: how messages name the request, e.g. ``"LLM request"``.

    Raises:
        ConfigError: an argument is out of range.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_retry_after_s: float = RETRY_AFTER_CAP_S,
        what: str = "request",
    ) -> None:
        if isinstance(timeout_s, bool) or not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ConfigError(f"timeout_s must be a number > 0, got {timeout_s!r}")
        if isinstance(max_retries, bool) or not (isinstance(max_retries, int) and max_retries >= 0):
            raise ConfigError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if isinstance(backoff_s, bool) or not (isinstance(backoff_s, (int, float)) and backoff_s >= 0):
            raise ConfigError(f"backoff_s must be a number >= 0, got {backoff_s!r}")
        if isinstance(max_retry_after_s, bool) or not (
            isinstance(max_retry_after_s, (int, float)) and max_retry_after_s >= 0
        ):
            raise ConfigError(f"max_retry_after_s must be a number >= 0, got {max_retry_after_s!r}")
        self.url = url
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.what = what
        self._api_key = api_key or None

    def __repr__(self) -> str:  # never show the key
        key = "set" if self._api_key else "none"
        return f"OpenAIHttpClient(url={self.url!r}, api_key={key})"

    def post_json(self, payload: Any) -> Any:
        """POST ``payload`` as JSON and return the decoded JSON reply (see the module rules).

        Raises:
            ProviderError: retries exhausted, a non-retryable status, or a reply that is
                not JSON.
        """
        raw = self.post(payload)
        return self.decode_json(raw, withhold=request_texts(payload))

    def post(self, payload: Any) -> bytes:
        """POST ``payload`` as JSON with retries; return the raw body of the 200 reply."""
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        withhold = request_texts(payload)
        attempts = self.max_retries + 1
        last_problem = ""
        for attempt in range(attempts):
            retry_after: float | None = None
            try:
                return self._post_once(body)
            except urllib.error.HTTPError as err:
                last_problem = f"HTTP {err.code} {err.reason}: {self._error_body(err, withhold)}"
                if err.code != RATE_LIMITED and err.code < 500:
                    raise ProviderError(
                        f"{self.what} to {self.url} failed with {last_problem}; this status is not "
                        f"retried — check the model name, the API key and the base URL"
                    ) from err
                header = err.headers.get("Retry-After") if err.headers else None
                retry_after = retry_after_seconds(header, cap_s=self.max_retry_after_s)
            except TimeoutError:
                last_problem = f"no response within {self.timeout_s:g} s"
            except urllib.error.URLError as err:
                if isinstance(err.reason, TimeoutError):
                    last_problem = f"no response within {self.timeout_s:g} s"
                else:
                    last_problem = f"connection failed: {err.reason}"
            except http.client.HTTPException as err:  # e.g. IncompleteRead: the reply was cut short
                last_problem = f"reply cut short: {type(err).__name__}"
            except OSError as err:  # connection reset / dropped mid-response
                last_problem = f"connection failed: {err}"
            if attempt + 1 < attempts:
                delay = self.backoff_s * (2**attempt)
                if retry_after is not None:
                    delay = max(delay, retry_after)
                time.sleep(delay)
        raise ProviderError(
            f"{self.what} to {self.url} failed after {attempts} attempt(s); last problem: "
            f"{last_problem} — check that the server is up and reachable, or raise "
            f"timeout_s / max_retries"
        )

    def decode_json(self, raw: bytes, *, withhold: tuple[str, ...] = ()) -> Any:
        """Parse a reply body, or raise a :class:`ProviderError` saying it is not JSON."""
        try:
            return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        except (UnicodeDecodeError, ValueError) as err:
            raise ProviderError(
                f"{self.what} response from {self.url} is not JSON ({type(err).__name__}); body starts "
                f"{excerpt(raw, withhold=withhold)} — check that base_url points at an "
                f"OpenAI-compatible server"
            ) from err

    def _post_once(self, body: bytes) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return response.read()

    @staticmethod
    def _error_body(err: urllib.error.HTTPError, withhold: tuple[str, ...]) -> str:
        try:
            return excerpt(err.read() or b"", withhold=withhold)
        except Exception:  # noqa: BLE001 — the body only decorates the message
            return "(body unreadable)"


__all__ = [
    "EXCERPT_CHARS",
    "OpenAIHttpClient",
    "RATE_LIMITED",
    "RETRY_AFTER_CAP_S",
    "excerpt",
    "openai_endpoint",
    "request_texts",
    "retry_after_seconds",
]
