"""The one HTTP client for OpenAI-compatible servers (chat completions and embeddings).

Standard library only (``urllib``), so the default install needs no HTTP dependency.
One rule set for every endpoint:

* Each call has a hard ``deadline_s`` (all attempts, back-off sleeps and the wait for a
  concurrency slot together): an attempt's socket timeout is ``timeout_s`` or what is
  left of the deadline, whichever is shorter, the reply is read in pieces with the
  deadline checked (and the socket's timeout cut to it) before each, and no attempt or
  sleep starts after it. A call past its deadline is not retried.
* At most ``max_concurrency`` calls to one endpoint run at once in a process (a slot is
  waited for within the deadline).
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
import threading
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
#: The longest one call may take, all attempts together, by default (seconds).
DEFAULT_DEADLINE_S = 120.0
#: Calls to one endpoint that may run at once in a process, by default.
DEFAULT_MAX_CONCURRENCY = 4
_READ_BLOCK = 65536
_SLOTS: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()
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
        deadline_s: the longest one call may take, all attempts together (> 0).
        max_concurrency: calls to this endpoint at once in this process (>= 1).

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
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
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
        if isinstance(deadline_s, bool) or not (isinstance(deadline_s, (int, float)) and deadline_s > 0):
            raise ConfigError(f"deadline_s must be a number > 0, got {deadline_s!r}")
        if isinstance(max_concurrency, bool) or not (isinstance(max_concurrency, int) and max_concurrency >= 1):
            raise ConfigError(f"max_concurrency must be an integer >= 1, got {max_concurrency!r}")
        self.url = url
        self.deadline_s = float(deadline_s)
        self.max_concurrency = max_concurrency
        with _SLOTS_LOCK:
            self._slots = _SLOTS.setdefault((url, max_concurrency), threading.BoundedSemaphore(max_concurrency))
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
        """POST ``payload`` as JSON with retries within the deadline; return the raw body of the 200 reply."""
        deadline = time.monotonic() + self.deadline_s
        if not self._slots.acquire(timeout=self.deadline_s):
            raise ProviderError(
                f"{self.what} to {self.url} found no free slot within its deadline of {self.deadline_s:g} s "
                f"({self.max_concurrency} call(s) at once already running) — raise max_concurrency or deadline_s"
            )
        try:
            return self._post_within(payload, deadline)
        finally:
            self._slots.release()

    def _post_within(self, payload: Any, deadline: float) -> bytes:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        withhold = request_texts(payload)
        attempts = self.max_retries + 1
        last_problem = ""
        tried = 0
        for attempt in range(attempts):
            if time.monotonic() >= deadline:
                break
            tried += 1
            retry_after: float | None = None
            try:
                return self._post_once(body, deadline)
            except _DeadlinePassed:
                last_problem = f"no complete reply within the call's deadline of {self.deadline_s:g} s"
                break
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
                last_problem = self._timeout_problem(deadline)
            except urllib.error.URLError as err:
                if isinstance(err.reason, TimeoutError):
                    last_problem = self._timeout_problem(deadline)
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
                left = deadline - time.monotonic()
                if delay >= left:
                    last_problem += f"; the next attempt would start after the call's deadline of {self.deadline_s:g} s"
                    break
                time.sleep(delay)
        raise ProviderError(
            f"{self.what} to {self.url} failed after {tried} attempt(s); last problem: "
            f"{last_problem} — check that the server is up and reachable, or raise "
            f"timeout_s / max_retries / deadline_s"
        )

    def _timeout_problem(self, deadline: float) -> str:
        if time.monotonic() >= deadline - 1e-3:
            return f"no complete reply within the call's deadline of {self.deadline_s:g} s"
        return f"no response within {self.timeout_s:g} s"

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

    def _post_once(self, body: bytes, deadline: float | None = None) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if deadline is None:
            deadline = time.monotonic() + self.deadline_s
        left = deadline - time.monotonic()
        if left <= 0:
            raise _DeadlinePassed()
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=min(self.timeout_s, left)) as response:
            # read in pieces: a reply that trickles (a stream, a slow server) stops at the deadline
            sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
            read = getattr(response, "read1", None) or response.read
            parts: list[bytes] = []
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _DeadlinePassed()
                if sock is not None:
                    try:
                        sock.settimeout(min(self.timeout_s, left))
                    except OSError:  # closed once the whole reply was read
                        sock = None
                try:
                    block = read(_READ_BLOCK)
                except TimeoutError:
                    if deadline - time.monotonic() <= 1e-3:
                        raise _DeadlinePassed() from None
                    raise
                if not block:
                    missing = getattr(response, "length", None)
                    if isinstance(missing, int) and missing > 0:  # the connection closed before Content-Length
                        raise http.client.IncompleteRead(b"".join(parts), missing)
                    return b"".join(parts)
                parts.append(block)

    @staticmethod
    def _error_body(err: urllib.error.HTTPError, withhold: tuple[str, ...]) -> str:
        try:
            return excerpt(err.read() or b"", withhold=withhold)
        except Exception:  # noqa: BLE001 — the body only decorates the message
            return "(body unreadable)"


class _DeadlinePassed(Exception):
    """The call's deadline passed (never retried)."""


__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_MAX_CONCURRENCY",
    "EXCERPT_CHARS",
    "OpenAIHttpClient",
    "RATE_LIMITED",
    "RETRY_AFTER_CAP_S",
    "excerpt",
    "openai_endpoint",
    "request_texts",
    "retry_after_seconds",
]
