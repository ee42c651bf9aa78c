"""Several embedding models as one vector space: each row is the models' vectors side by side.

An :class:`EnsembleEmbeddingBackend` embeds a text with every part model and concatenates
the unit vectors, each scaled by ``1/sqrt(n)``, so the row is a unit vector again and its
cosine with a query is the mean of the parts' cosines. The index stores one matrix (one
cache entry per text, one ANN index); at query time the retriever runs one dense channel
per part (:class:`~ragspine_query.pipeline.channels.DenseChannel` with ``part``), each
scoring its own columns, so fusion sees every model's ranking separately: on SciFact
*train*, BM25 + MiniLM + multilingual-e5 as three min–max normalised rankings beat BM25 +
one averaged-cosine ranking (docs/evaluation.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ragspine_core.errors import ConfigError
from ragspine_core.dense.backend import BaseEmbeddingBackend, EmbeddingBackend, EmbeddingKind


@dataclass(frozen=True, slots=True)
class EnsemblePart:
    """One model of an ensemble: its channel ``name``, its ``backend`` and its columns."""

    name: str
    backend: EmbeddingBackend
    start: int
    stop: int


class EnsembleEmbeddingBackend(BaseEmbeddingBackend):
    """Concatenated unit vectors of several backends (``dim`` = the sum of theirs).

    Parameters:
        parts: ``(name, backend)`` pairs, at least two, names unique; the first part's
            channel keeps the plain name ``vector``, the others are ``vector:<name>``.

    Raises:
        ConfigError: fewer than two parts, or a repeated name.
    """

    def __init__(self, parts: Sequence[tuple[str, EmbeddingBackend]]) -> None:
        if len(parts) < 2:
            raise ConfigError(f"an embedding ensemble needs at least two models, got {len(parts)}")
        names = [n for n, _ in parts]
        if len(set(names)) != len(names):
            raise ConfigError(f"ensemble part names must be unique, got {names}")
        out, start = [], 0
        for name, backend in parts:
            out.append(EnsemblePart(name, backend, start, start + int(backend.dim)))
            start += int(backend.dim)
        self.parts: tuple[EnsemblePart, ...] = tuple(out)
        self.dim = start
        self.model_id = "ensemble(" + " + ".join(p.backend.model_id for p in self.parts) + ")"
        self._scale = np.float32(1.0 / math.sqrt(len(self.parts)))
        #: each part is a unit row scaled by 1/sqrt(n): the row is a unit row as assembled
        self.normalize_output = False

    def _embed_items(self, texts: list[str], kind: EmbeddingKind, batch_size: int) -> np.ndarray:
        """Embed ``texts`` with every part (each part's rows are unit rows already)."""
        return self.assemble([p.backend.embed(texts, kind=kind, batch_size=batch_size) for p in self.parts])

    def assemble(self, part_vectors: Sequence[np.ndarray]) -> np.ndarray:
        """The ensemble rows from each part's own vectors of the same texts (in part order).

        What :meth:`embed` returns, bit for bit, when given what the parts' ``embed`` gave:
        the indexing step caches vectors per part model and assembles rows with this, so
        a library whose ensemble gains or loses a model re-embeds only with that model.
        """
        if len(part_vectors) != len(self.parts):
            raise ConfigError(f"this ensemble has {len(self.parts)} models, got vectors of {len(part_vectors)}")
        out = np.empty((len(part_vectors[0]), self.dim), dtype=np.float32)
        for p, vectors in zip(self.parts, part_vectors):
            out[:, p.start : p.stop] = np.asarray(vectors, dtype=np.float32) * self._scale
        return out
