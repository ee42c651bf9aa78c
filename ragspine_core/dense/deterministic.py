"""An offline, dependency-free embedding backend built on signed feature hashing.

It is not a semantic model: texts that share tokens get similar vectors, nothing more.
It exists so tests and air-gapped demos exercise the whole dense path deterministically.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ragspine_core.errors import ConfigError
from ragspine_core.text.tokenize import tokenize
from ragspine_core.dense.backend import BaseEmbeddingBackend, EmbeddingKind

# Salting the hash keeps these buckets independent of any other sha256 use of the same token.
_SALT = b"ragspine-deterministic-hash-v1\x00"
# A memo of token -> (bucket, sign) per backend instance; capped so a huge corpus
# cannot grow it without bound.
_MEMO_LIMIT = 200_000


class DeterministicEmbeddingBackend(BaseEmbeddingBackend):
    """Signed feature-hash embeddings of the spec tokens (Weinberger et al. 2009).

    Each token of :func:`ragspine_core.text.tokenize.tokenize` is hashed with salted
    sha256 (stable across processes and machines, unlike Python's ``hash``) to a bucket
    and a sign; the bucket counts are damped with ``log1p`` and the vector is
    L2-normalised. An empty text (no tokens) embeds to the zero vector.

    A text with tokens whose signed counts cancel in every bucket (two tokens of one
    bucket with opposite signs, e.g. ``"synthetic"`` and ``"document"`` at ``dim=64``, and
    nothing else left) would embed to the zero vector too, which scores 0 against every
    query and which the build's ``vectors_finite_and_normalised`` check refuses; such a row
    is hashed again with the next salt until its counts do not cancel (:meth:`_rehashed`;
    the same text always gets the same vector, query or passage). Every other row is
    unchanged, so the model id stays ``v1``.

    Parameters:
        dim: vector dimension (>= 8).
    """

    def __init__(self, dim: int = 64) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise ConfigError(f"deterministic embedding dim must be an integer >= 8, got {dim!r}")
        self.dim = dim
        self.model_id = f"deterministic-hash-v1-d{dim}"
        self._memo: dict[str, tuple[int, float]] = {}

    def _bucket(self, token: str) -> tuple[int, float]:
        hit = self._memo.get(token)
        if hit is not None:
            return hit
        digest = hashlib.sha256(_SALT + token.encode("utf-8")).digest()
        bucket = int.from_bytes(digest[:8], "little") % self.dim
        sign = 1.0 if digest[8] & 1 else -1.0
        if len(self._memo) < _MEMO_LIMIT:
            self._memo[token] = (bucket, sign)
        return bucket, sign

    def _rehashed(self, tokens: list[str]) -> np.ndarray:
        """Signed counts of ``tokens`` under the next salts (1, 2, ...) until one does not cancel
        everywhere; the unsigned counts after 8 (a text with tokens never embeds to zero)."""
        row = np.zeros(self.dim, dtype=np.float64)
        for attempt in range(1, 9):
            row[:] = 0.0
            for token in tokens:
                digest = hashlib.sha256(_SALT + attempt.to_bytes(1, "little") + token.encode("utf-8")).digest()
                row[int.from_bytes(digest[:8], "little") % self.dim] += 1.0 if digest[8] & 1 else -1.0
            if row.any():
                return row
        for token in tokens:
            row[self._bucket(token)[0]] += 1.0
        return row

    def _embed_items(self, texts: list[str], kind: EmbeddingKind, batch_size: int) -> np.ndarray:
        """All texts at once (``kind`` and ``batch_size`` do not change the result)."""
        # signed counts per (row, bucket), summed in token order (whole numbers: exact)
        cells: dict[tuple[int, int], float] = {}
        get, bucket_of = cells.get, self._bucket
        tokens_per_row: list[list[str]] = []
        for row, text in enumerate(texts):
            tokens = tokenize(text)
            tokens_per_row.append(tokens)
            for token in tokens:
                bucket, sign = bucket_of(token)
                key = (row, bucket)
                cells[key] = get(key, 0.0) + sign
        counts = np.zeros((len(texts), self.dim), dtype=np.float64)
        if len(cells) <= 32:  # a query: a few cells, set one by one (cheaper than any vectorised call)
            for key, value in cells.items():
                counts[key] = value
        else:
            at = np.array(list(cells), dtype=np.intp)
            counts[at[:, 0], at[:, 1]] = np.fromiter(cells.values(), dtype=np.float64, count=len(cells))
        for zero in np.flatnonzero(~counts.any(axis=1)).tolist():
            if tokens_per_row[zero]:  # tokens whose signs cancelled in every bucket
                counts[zero] = self._rehashed(tokens_per_row[zero])
        # log1p on the magnitude damps repeated tokens (sublinear tf) and keeps the sign;
        # embed() L2-normalises the rows
        damped = np.sign(counts) * np.log1p(np.abs(counts))
        return damped.astype(np.float32)
