"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint.

Works with OpenAI itself and with local servers that speak the same protocol (vLLM,
llama.cpp server, Ollama, text-embeddings-inference). Transport, timeouts and retries
are the shared :class:`~ragspine_core.net.openai_http.OpenAIHttpClient` (stdlib only),
the same client the chat provider uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ragspine_core.errors import ConfigError, ProviderError
from ragspine_core.dense.backend import BaseEmbeddingBackend, EmbeddingKind, check_batch_size

_PROBE_TEXT = "dimension probe"


def embeddings_url(base_url: str) -> str:
    """The embeddings endpoint for ``base_url``, given with or without a trailing ``/v1``.

    >>> embeddings_url("http://localhost:8000/v1/")
    'http://localhost:8000/v1/embeddings'
    """
    from ragspine_core.net.openai_http import openai_endpoint  # http.client and ssl load with the backend, not the package

    return openai_endpoint(base_url, "embeddings", what="embedding")


class OpenAIEmbeddingBackend(BaseEmbeddingBackend):
    """An :class:`EmbeddingBackend` that POSTs ``{"model", "input"}`` to ``/v1/embeddings``.

    Parameters:
        base_url: server root, e.g. ``http://localhost:8000`` or ``https://api.openai.com/v1``.
        model: the model name the server expects.
        api_key: sent as ``Authorization: Bearer …`` when given.
        timeout_s: per-request timeout.
        max_retries: extra attempts after a 429, a 5xx, a timeout or a connection error;
            back-off doubles from ``backoff_s`` (a longer ``Retry-After`` wins, capped at
            ``max_retry_after_s``); see :class:`~ragspine_core.net.openai_http.OpenAIHttpClient`.
        batch_size: texts per request when :meth:`embed` is not given one.
        dim: the expected vector size; when ``None`` the constructor sends one probe
            request to learn it (so a wrong URL or model fails here, not mid-indexing).
        backoff_s: first back-off delay.
        max_retry_after_s: the longest ``Retry-After`` obeyed, seconds.

    Raises:
        ProviderError: on an HTTP 4xx (other than 429), on retries exhausted, or on a
            response that is not a well-formed embedding list of the right length
            (also from the constructor's probe when ``dim`` is ``None``).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 30,
        max_retries: int = 2,
        batch_size: int = 64,
        *,
        dim: int | None = None,
        backoff_s: float = 0.5,
        max_retry_after_s: float = 30.0,
    ) -> None:
        if not model or not isinstance(model, str):
            raise ConfigError("OpenAI embedding backend needs a model name (set RAGSPINE_EMBEDDING_MODEL)")
        check_batch_size(batch_size)
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ConfigError(f"dim must be a positive integer or None, got {dim!r}")
        self.url = embeddings_url(base_url)
        from ragspine_core.net.openai_http import OpenAIHttpClient

        self._client = OpenAIHttpClient(self.url, api_key=api_key, what=f"embedding request (model {model!r})",
                                        timeout_s=timeout_s, max_retries=max_retries, backoff_s=backoff_s,
                                        max_retry_after_s=max_retry_after_s)
        self.model = model
        self.model_id = f"openai:{model}"
        self.timeout_s = self._client.timeout_s
        self.max_retries = self._client.max_retries
        self.batch_size = batch_size
        self.backoff_s = self._client.backoff_s
        self._dim = dim
        if dim is None:
            self._embed_batch([_PROBE_TEXT])
        self.dim: int = self._dim  # type: ignore[assignment]

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIEmbeddingBackend(url={self.url!r}, model={self.model!r})"

    def _embed_batch(self, batch: list[str], kind: EmbeddingKind = "passage") -> np.ndarray:
        """One request of ``batch`` texts (``embed()`` sends ``batch_size`` per request,
        default the constructor's). ``kind`` is accepted for interface parity; the endpoint
        has no query/passage mode."""
        payload = self._client.post_json({"model": self.model, "input": batch})
        vectors = self._parse(payload, expected=len(batch))
        if self._dim is None:
            self._dim = vectors.shape[1]
        elif vectors.shape[1] != self._dim:
            raise ProviderError(
                f"{self.url} returned {vectors.shape[1]}-d embeddings for model {self.model!r}, "
                f"expected {self._dim}-d; check that the server serves the model the index was built with"
            )
        return vectors

    def _parse(self, payload: Any, *, expected: int) -> np.ndarray:
        from ragspine_core.net.openai_http import excerpt

        where = f"embedding response from {self.url}"
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise ProviderError(f"{where} has no 'data' list ({excerpt(payload)}); expected the OpenAI embeddings format")
        if len(data) != expected:
            raise ProviderError(f"{where} holds {len(data)} embeddings for {expected} inputs; the server dropped or added items")
        slots: list[np.ndarray | None] = [None] * expected
        for position, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise ProviderError(f"{where}: data[{position}] has no 'embedding' field")
            index = item.get("index", position)
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < expected or slots[index] is not None:
                raise ProviderError(f"{where}: data[{position}] has index {index!r}; indices must be 0..{expected - 1}, each once")
            try:
                vector = np.asarray(item["embedding"])
            except (ValueError, TypeError):  # ragged nested lists
                vector = np.asarray([], dtype=object)
            if vector.ndim != 1 or vector.size == 0 or vector.dtype.kind not in "iuf":
                raise ProviderError(
                    f"{where}: data[{position}].embedding is not a non-empty list of numbers "
                    f"(got {excerpt(item['embedding'])}); base64 encoding is not supported"
                )
            vector = vector.astype(np.float32)
            if not np.all(np.isfinite(vector)):
                raise ProviderError(f"{where}: data[{position}].embedding contains NaN or infinity")
            slots[index] = vector
        dims = {v.shape[0] for v in slots if v is not None}
        if len(dims) != 1:
            raise ProviderError(f"{where} mixes embedding sizes {sorted(dims)} in one response")
        return np.stack(slots)  # type: ignore[arg-type]
