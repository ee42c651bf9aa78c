"""Hybrid retrieval over one published library, and RRF routing over several.

Order of operations (SPEC §7): metadata predicates (and, on the narrative path that
feeds snippets and prompts, "not RESTRICTED") → candidate mask; BM25 (chunk field
blended with the document field) and, when a dense channel is active, exact cosine over
the surviving rows only; Reciprocal Rank Fusion; deterministic ties by ``chunk_id``
(rows are assigned in ``chunk_id`` order, so ties break on row ascending).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from .errors import ConfigError, EmbeddingModelMismatchError
from .filters import Predicate, combined_mask, parse_filters
from .fusion import DEFAULT_RRF_K
from .lexical.bm25 import top_k_rows
from .library import Library
from .records import Hit, sort_hits

RetrievalMode = Literal["auto", "hybrid", "vector", "bm25", "lexical", "economy"]
RETRIEVAL_MODES: tuple[str, ...] = ("auto", "hybrid", "vector", "bm25", "lexical", "economy")
LEXICAL_MODES = frozenset({"bm25", "lexical", "economy"})

#: Weight of the document-level BM25 field blended into each chunk's lexical score.
#: Tuned on SciFact *train* (see docs/evaluation.md); 0 disables the document field.
DEFAULT_DOC_WEIGHT = 2.0
_MASK_CACHE_SIZE = 32


def check_top_k(top_k: Any) -> int:
    """``top_k`` as an int, or :class:`ConfigError` for a negative or non-integer value."""
    if isinstance(top_k, bool):
        top_k = None
    try:
        value = operator.index(top_k)
    except TypeError:
        value = -1
    if value < 0:
        raise ConfigError(f"top_k must be a whole number >= 0, got {top_k!r}; e.g. --top-k 5")
    return value


def normalize_mode(mode: str | None) -> str:
    m = (mode or "auto").strip().lower()
    if m not in RETRIEVAL_MODES:
        raise ConfigError(f"unknown retrieval mode {mode!r}; allowed: {', '.join(RETRIEVAL_MODES)}")
    return m


@dataclass(frozen=True, slots=True)
class RetrievalConfig:
    """Knobs of one retriever (validated)."""

    mode: str = "auto"
    depth: int = 100
    rrf_k: int = DEFAULT_RRF_K
    doc_weight: float = DEFAULT_DOC_WEIGHT

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", normalize_mode(self.mode))
        if self.depth <= 0:
            raise ConfigError(f"depth must be > 0, got {self.depth}")
        if self.rrf_k < 0:
            raise ConfigError(f"rrf_k must be >= 0, got {self.rrf_k}")
        if not (math.isfinite(self.doc_weight) and self.doc_weight >= 0):
            raise ConfigError(f"doc_weight must be a finite number >= 0, got {self.doc_weight}")


class HybridRetriever:
    """BM25 (+ dense) retrieval over one library with metadata pre-filtering."""

    def __init__(self, library: Library, *, embedding_backend: Any | None = None, config: RetrievalConfig = RetrievalConfig()) -> None:
        self.library = library
        self.config = config
        mode = config.mode
        emb_model = library.embedding_model_id
        if mode in LEXICAL_MODES:
            embedding_backend = None
        elif mode in ("hybrid", "vector"):
            if embedding_backend is None or emb_model is None:
                raise ConfigError(
                    f"retrieval mode {mode!r} needs a dense channel: the library "
                    f"{library.library_id!r} has {'no embeddings (materialize chunk_embeddings with an embedding backend)' if emb_model is None else 'embeddings'}"
                    f"{'' if embedding_backend is not None else ' and no embedding backend was given (pip install ragspine[embed-onnx] or set RAGSPINE_EMBEDDING)'}"
                )
        elif emb_model is None:  # auto without vectors in the index
            embedding_backend = None
        if embedding_backend is not None and getattr(embedding_backend, "model_id", None) != emb_model:
            raise EmbeddingModelMismatchError(
                f"query embedding model {getattr(embedding_backend, 'model_id', None)!r} differs from the model "
                f"the index was built with ({emb_model!r}); use the same backend (RAGSPINE_EMBEDDING) or "
                "re-materialize chunk_embeddings"
            )
        self.embedding_backend = embedding_backend
        # the snapshot is immutable, so a predicate tuple always yields the same mask
        self._masks: dict[tuple[tuple[Predicate, ...], bool], np.ndarray | None] = {}

    @property
    def library_id(self) -> str:
        return self.library.library_id

    @property
    def active_mode(self) -> str:
        """``hybrid``, ``vector`` or ``bm25`` — what actually runs."""
        if self.embedding_backend is None:
            return "bm25"
        return "vector" if self.config.mode == "vector" else "hybrid"

    # -- channels --------------------------------------------------------------------
    def allowed_mask(
        self, filters: Mapping[str, Any] | Sequence[Predicate] | None, *, include_restricted: bool = True
    ) -> np.ndarray | None:
        """Rows satisfying every predicate (None = every row); the last few masks are reused.

        With ``include_restricted=False`` RESTRICTED rows are removed too, *before* any
        channel ranks: visible ranks and fused scores then say nothing about them.
        """
        preds = parse_filters(filters, allowed_fields=self.library.filter_fields())
        key = (preds, include_restricted)
        if key in self._masks:
            return self._masks[key]
        mask: np.ndarray | None = None
        if preds:
            cols = {p.field: self.library.column(p.field) for p in preds}
            mask = combined_mask(preds, cols, self.library.n_chunks)
        if not include_restricted:
            restricted = self.library.restricted_mask()
            if restricted.any():
                mask = ~restricted if mask is None else (mask & ~restricted)
        if mask is not None:
            mask.setflags(write=False)
        if len(self._masks) >= _MASK_CACHE_SIZE:
            self._masks.pop(next(iter(self._masks)), None)
        self._masks[key] = mask
        return mask

    def lexical(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        lib = self.library
        tokens = lib.analyzer(query)
        rows, scores = lib.bm25.score_terms(lib.bm25.term_ids(tokens))
        if rows.size and self.config.doc_weight > 0:
            drows, dscores = lib.bm25_doc.score_terms(lib.bm25_doc.term_ids(tokens))
            if drows.size:
                doc_scores = np.zeros(lib.bm25_doc.n_rows, dtype=np.float32)
                doc_scores[drows] = dscores
                scores = scores + np.float32(self.config.doc_weight) * doc_scores[lib.row_doc[rows]]
        if allowed is not None and rows.size:
            keep = allowed[rows]
            rows, scores = rows[keep], scores[keep]
        return top_k_rows(rows, scores, depth)

    def dense(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        from .dense.vector_store import top_k_cosine

        emb = self.library.embeddings()
        if emb is None or self.embedding_backend is None:
            return top_k_rows(np.zeros(0, np.int64), np.zeros(0, np.float32), 0)
        qv = np.asarray(self.embedding_backend.embed([query], kind="query"), dtype=np.float32)[0]
        subset = None
        if allowed is not None:
            subset = np.flatnonzero(allowed[np.asarray(emb.rows)])
        idx, scores = top_k_cosine(emb.vectors, qv, depth, rows=subset)
        return np.asarray(emb.rows)[idx].astype(np.int64), np.asarray(scores, dtype=np.float32)

    # -- public verbs ----------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        filters: Mapping[str, Any] | Sequence[Predicate] | None = None,
        top_k: int = 10,
        include_restricted: bool = True,
    ) -> list[Hit]:
        """Top-``top_k`` hits.

        ``include_restricted=True`` (the default, for evaluation and admin use) keeps
        RESTRICTED hits, which must be stripped at the exits; ``False`` removes them
        before ranking, as the narrative path (snippets, prompts) does.

        Raises:
            ConfigError: ``top_k`` is negative.
        """
        top_k = check_top_k(top_k)
        if top_k == 0:
            return []
        allowed = self.allowed_mask(filters, include_restricted=include_restricted)
        if allowed is not None and not allowed.any():
            return []
        depth = max(self.config.depth, top_k)
        lists: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if self.active_mode != "vector":
            lists["bm25"] = self.lexical(query, depth, allowed)
        if self.active_mode != "bm25":
            lists["vector"] = self.dense(query, depth, allowed)
        fused: dict[int, float] = {}
        channel: dict[int, dict[str, float]] = {}
        for name, (rows, scores) in lists.items():
            for rank, (r, s) in enumerate(zip(rows.tolist(), scores.tolist()), start=1):
                fused[r] = fused.get(r, 0.0) + 1.0 / (self.config.rrf_k + rank)
                channel.setdefault(r, {})[name] = float(s)
        order = sorted(fused, key=lambda r: (-fused[r], r))[:top_k]
        chunks = self.library.chunks_by_rows(order)
        hits = [
            Hit(chunk=c, score=fused[r], scores={"bm25": channel[r].get("bm25", 0.0), "vector": channel[r].get("vector", 0.0), "fused": fused[r]})
            for r, c in zip(order, chunks)
        ]
        return sort_hits(hits)

    def batch_search(self, queries: Sequence[str], *, filters=None, top_k: int = 10, include_restricted: bool = True) -> list[list[Hit]]:
        return [self.search(q, filters=filters, top_k=top_k, include_restricted=include_restricted) for q in queries]


Router = Callable[[str], Sequence[str]]


class MultiIndexRetriever:
    """Route a query to libraries, search each independently, fuse with RRF.

    If the router raises or returns nothing usable, every library is searched (the safe
    availability fallback). Hits keep their ``library_id``.
    """

    def __init__(self, retrievers: Mapping[str, HybridRetriever], *, router: Router | None = None, rrf_k: int = DEFAULT_RRF_K) -> None:
        if not retrievers:
            raise ConfigError("MultiIndexRetriever needs at least one library")
        self.retrievers = dict(sorted(retrievers.items()))
        self.router = router
        self.rrf_k = rrf_k

    def route(self, query: str) -> list[str]:
        if self.router is None:
            return list(self.retrievers)
        try:
            chosen = [lib for lib in self.router(query) if lib in self.retrievers]
        except Exception:  # routing failure must not lose availability
            chosen = []
        return chosen or list(self.retrievers)

    def search(self, query: str, *, filters=None, top_k: int = 10, include_restricted: bool = True) -> list[Hit]:
        top_k = check_top_k(top_k)
        fused: dict[tuple[str, str], float] = {}
        best: dict[tuple[str, str], Hit] = {}
        for lib in self.route(query):
            hits = self.retrievers[lib].search(query, filters=filters, top_k=max(top_k, 50), include_restricted=include_restricted)
            for rank, h in enumerate(hits, start=1):
                key = (lib, h.chunk_id)
                fused[key] = fused.get(key, 0.0) + 1.0 / (self.rrf_k + rank)
                best[key] = h
        order = sorted(fused, key=lambda k: (-fused[k], k[1], k[0]))[:top_k]
        return [best[k].with_score(fused[k], fused=fused[k]) for k in order]
