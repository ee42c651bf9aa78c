"""The seam into an agent: RESTRICTED-free, fully cited snippet dicts.

On this path RESTRICTED rows are removed from the candidate mask *before* any channel
ranks them (``include_restricted=False``), so the ranks and fused scores a caller sees
are computed as if RESTRICTED chunks did not exist: a score cannot reveal how many of
them outranked a visible hit. The RESTRICTED strip before snippets are built stays as a
last guard (RESTRICTED exit #2); exit #1 is the listwise reranker, which never shows
RESTRICTED text to the judge.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from .fusion import DEFAULT_RRF_K
from .glossary import Glossary, GlossaryQueryRewriter
from .library import open_library
from .records import RESTRICTED_SENSITIVITY, Hit, sort_hits, to_snippet
from .retriever import HybridRetriever, MultiIndexRetriever, RetrievalConfig, check_top_k


class SearchIndex(Protocol):
    def search(self, query: str, *, filters: Any = None, top_k: int = 10, include_restricted: bool = True) -> list[Hit]: ...


class NarrativeIndex:
    """Retriever + optional multi-query rewriter + optional reranking, in that order."""

    def __init__(self, retriever: SearchIndex, *, rewriter: GlossaryQueryRewriter | None = None, reranker: Any | None = None, judge: Any | None = None, rerank_top_n: int = 10, rrf_k: int = DEFAULT_RRF_K) -> None:
        self.retriever = retriever
        self.rewriter = rewriter
        self.reranker = reranker
        self.judge = judge
        self.rerank_top_n = rerank_top_n
        self.rrf_k = rrf_k

    def search(self, query: str, *, filters: Any = None, top_k: int = 10, include_restricted: bool = False) -> list[Hit]:
        """Hits for the narrative path: RESTRICTED removed before ranking unless asked for."""
        queries = self.rewriter.rewrite(query) if self.rewriter else [query]
        # every variant (and the reranker) sees a deep list: RRF over shallow lists is unstable
        depth = max(top_k, 50) if (len(queries) > 1 or self.reranker or self.judge) else top_k
        if len(queries) == 1:
            hits = self.retriever.search(query, filters=filters, top_k=depth, include_restricted=include_restricted)
        else:
            fused: dict[tuple[str, str], float] = {}
            best: dict[tuple[str, str], Hit] = {}
            for q in queries:
                variant_hits = self.retriever.search(q, filters=filters, top_k=depth, include_restricted=include_restricted)
                for rank, h in enumerate(variant_hits, start=1):
                    key = (h.chunk.library_id, h.chunk_id)
                    fused[key] = fused.get(key, 0.0) + 1.0 / (self.rrf_k + rank)
                    best.setdefault(key, h)
            hits = sort_hits([best[k].with_score(v, fused=v) for k, v in fused.items()])[:depth]
        if self.reranker is not None:
            hits = self.reranker.rank(query, hits, top_n=self.rerank_top_n)
        elif self.judge is not None:
            from .rerank.listwise import listwise_rerank

            hits = listwise_rerank(query, hits, self.judge, top_n=self.rerank_top_n)
        return hits[:top_k]


class NarrativeIndexRetriever:
    """``retrieve(query, filters=None, top_k=50) -> list[dict]`` for the agent."""

    def __init__(self, index: SearchIndex, *, retry_without_filters: bool = True) -> None:
        self.index = index
        self.retry_without_filters = retry_without_filters

    def retrieve(self, query: str, *, filters: Mapping[str, Any] | None = None, top_k: int = 50) -> list[dict]:
        """Cited, RESTRICTED-free snippet dicts, best first.

        Raises:
            ConfigError: ``top_k`` is negative or not an integer.
        """
        top_k = check_top_k(top_k)
        snippets = self._open_snippets(query, filters or None, top_k)
        if not snippets and filters and self.retry_without_filters:
            snippets = self._open_snippets(query, None, top_k)
        return snippets

    def _open_snippets(self, query: str, filters: Mapping[str, Any] | None, top_k: int) -> list[dict]:
        """Snippets of the top ``top_k`` hits; RESTRICTED rows never entered the ranking."""
        results = self.index.search(query, filters=filters, top_k=top_k, include_restricted=False)
        # RESTRICTED exit #2 (a last guard): dropped before any snippet dict exists
        open_hits = [r for r in results if str(r.chunk.sensitivity).upper() != RESTRICTED_SENSITIVITY]
        return [to_snippet(r) for r in open_hits[:top_k]]


def build_narrative_retriever(
    libraries: str | os.PathLike | Sequence[str | os.PathLike],
    provider: Any | None = None,
    *,
    embedding_backend: Any | None | str = "env",
    reranker: Any | None | str = "env",
    mode: str | None = None,
    glossary: Glossary | None | str = "auto",
) -> NarrativeIndexRetriever:
    """Wire the default chain over one or more published libraries.

    Defaults (read from the environment here and nowhere deeper): retrieval mode from
    ``RAGSPINE_RETRIEVAL_MODE`` (``auto``), embedding backend from ``RAGSPINE_EMBEDDING``
    (``auto``: the model the index was built with when installed, else BM25 only),
    reranker from ``RAGSPINE_RERANKER`` (unset: the LLM listwise judge over the top 10
    when a ``provider`` is given, else none). ``reranker=None`` or ``RAGSPINE_RERANKER=none`` means no
    reranker and no call to the provider. Glossary multi-query uses the
    glossary published with each library.
    """
    paths = [libraries] if isinstance(libraries, (str, os.PathLike)) else list(libraries)
    mode = mode or os.environ.get("RAGSPINE_RETRIEVAL_MODE", "auto")
    config = RetrievalConfig(mode=mode)
    retrievers: dict[str, HybridRetriever] = {}
    glossary_obj: Glossary | None = None
    for p in paths:
        lib = open_library(p)
        backend = embedding_backend
        if backend == "env":
            backend = backend_for_library(lib, config.mode)
        retrievers[lib.library_id] = HybridRetriever(lib, embedding_backend=backend, config=config)
        if glossary == "auto" and glossary_obj is None:
            gpath = lib.snapshot_dir / "glossary.json"
            if gpath.is_file():
                glossary_obj = Glossary.load(gpath)
    if isinstance(glossary, Glossary):
        glossary_obj = glossary
    base: SearchIndex = next(iter(retrievers.values())) if len(retrievers) == 1 else MultiIndexRetriever(retrievers)
    if reranker == "env":
        from .rerank import make_reranker

        # unset RAGSPINE_RERANKER: the LLM judge when a provider was given, else none;
        # an explicit "none" means no reranker and no network call at all
        default = "listwise" if provider is not None else "none"
        reranker = make_reranker(os.environ.get("RAGSPINE_RERANKER", "").strip() or default, provider=provider)
    judge = None
    local = reranker
    if reranker is not None and getattr(reranker, "is_listwise", False):
        local, judge = None, getattr(reranker, "judge", reranker)
    rewriter = GlossaryQueryRewriter(glossary_obj) if glossary_obj and glossary_obj.concepts else None
    return NarrativeIndexRetriever(NarrativeIndex(base, rewriter=rewriter, reranker=local, judge=judge))


def backend_for_library(library: Any, mode: str, spec: str | None = None) -> Any | None:
    """The embedding backend that matches ``library``'s index, or None for BM25 only.

    ``spec`` (default ``RAGSPINE_EMBEDDING``, else ``auto``): ``none`` disables the dense
    channel; ``auto`` re-creates the backend recorded in the manifest when its extra is
    installed and silently falls back to BM25 when it is not.
    """
    from .retriever import LEXICAL_MODES, normalize_mode

    if normalize_mode(mode) in LEXICAL_MODES:
        return None
    emb = library.manifest.get("embedding")
    if not emb:
        return None
    spec = (spec or os.environ.get("RAGSPINE_EMBEDDING") or os.environ.get("RAGSPINE_EMBEDDING_BACKEND") or "auto").lower()
    if spec == "none":
        return None
    from .dense.embedding import make_embedding_backend

    backend_spec = emb.get("backend", spec)
    try:
        return make_embedding_backend(backend_spec, model_dir=emb.get("model_dir") or None)
    except ImportError:
        if spec == "auto" and normalize_mode(mode) == "auto":
            return None
        raise
