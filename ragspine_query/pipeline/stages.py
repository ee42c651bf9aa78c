"""The query pipeline over one or more libraries, as small stages:

``gate → transform(s) → gate(variants) → channels → fuse → rerank → post-process → RESTRICTED strip → snippets``

* the **gate** (optional, :mod:`ragspine_core.gate`) refuses a query naming a glossary
  competitor before anything runs, and drops generated variants that name one; a
  refusal is ``SearchResult.refusal``, not a silent empty list;

* a **transform** turns the query into variants (the first is the query itself), e.g.
  the glossary multi-query rewriter; registered ones run after the explicit ones;
* **channels** and their fusion run inside the source (a
  :class:`~ragspine_query.retriever.HybridRetriever` or ``MultiIndexRetriever``), once
  per variant, with RESTRICTED rows already out of the candidate mask on the narrative
  path; variants are fused with :func:`~ragspine_query.fusion.weighted_rrf`;
* **rerank**: an optional local reranker, or the listwise LLM judge;
* **post-processors** (MMR, dedupe, …) see the deep list and may reorder or drop hits;
  one with ``final = True`` (lost-in-the-middle, compression) sees the final ``top_k``;
  a transform may return a list with a ``note`` and a post-processor may have a
  ``describe`` string: both show in ``explain``;
* the **RESTRICTED strip** is the last guard before snippets (anything a plugin let in
  is dropped here).

Stage kinds are protocols with registries: :func:`register_transform`,
:func:`register_postprocessor` (and :func:`~ragspine_query.pipeline.channels.register_channel`).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from ragspine_query.fusion import DEFAULT_RRF_K, weighted_rrf
from ragspine_core.records import Hit, hits_to_frame
from ragspine_core.text.language import query_language
from ragspine_query.transforms.transform import in_language_of
from ragspine_query.pipeline.explain import Explain, Tracer, hit_candidates, now


#: Whether a query variant (glossary alias, rewrite) ranks only rows in the user's query's
#: language. Every variant is *planned* in that language either way (so the mixed-language
#: fusion admits another language's rows only when they earn it). Measured on the sample's
#: judged set with glossary multi-query on: planned in the query's language and ranking
#: every row 0.8368, ranking only the query language's rows 0.8281 (docs/evaluation.md).
VARIANTS_OWN_LANGUAGE_ONLY = False


class SearchResult(list):
    """A list of :class:`Hit` (best first) plus ``explain`` (when asked for) and ``to_frame()``.

    ``refusal`` is a :class:`~ragspine_core.gate.Refusal` (why nothing was retrieved: a
    competitor query, an ungroundable one) or None; a refused result holds no hits.

    Through a query pipeline (:func:`~ragspine_query.intelligence.build_query_pipeline`)
    every result also carries ``tier`` (the retrieval tier that ran: ``direct``,
    ``semantic``, ``multi_hop``, ``global``, ``multi_part``), ``confidence`` (a
    :class:`~ragspine_query.assessment.Confidence`: grade ``high|medium|low`` and score),
    ``needs_refinement`` and ``filters`` (the extracted filters' outcome, or None).
    """

    __slots__ = ("explain", "refusal", "tier", "confidence", "needs_refinement", "filters")

    def __init__(self, hits: Sequence[Hit] = (), explain: Explain | None = None, refusal: Any = None) -> None:
        super().__init__(hits)
        self.explain = explain
        self.refusal = refusal
        self.tier: str | None = None
        self.confidence: Any = None
        self.needs_refinement: bool | None = None
        self.filters: Any = None

    def carry(self, other: Any) -> "SearchResult":
        """Copy ``other``'s tier, confidence, needs_refinement and filters onto this result."""
        for name in ("tier", "confidence", "needs_refinement", "filters"):
            value = getattr(other, name, None)
            if value is not None:
                setattr(self, name, value)
        return self

    def to_frame(self):
        """A pandas DataFrame with provenance columns (see :func:`hits_to_frame`)."""
        return hits_to_frame(self)


class Snippets(list):
    """A list of snippet dicts plus ``explain`` (when asked for), ``refusal``, ``tier``,
    ``confidence``, ``needs_refinement``, ``filters`` (see :class:`SearchResult`) and ``to_frame()``."""

    __slots__ = ("explain", "refusal", "tier", "confidence", "needs_refinement", "filters")

    def __init__(self, snippets: Sequence[dict] = (), explain: Explain | None = None, refusal: Any = None) -> None:
        super().__init__(snippets)
        self.explain = explain
        self.refusal = refusal
        self.tier: str | None = None
        self.confidence: Any = None
        self.needs_refinement: bool | None = None
        self.filters: Any = None

    carry = SearchResult.carry

    def to_frame(self):
        return hits_to_frame(self)


@runtime_checkable
class Transform(Protocol):
    """``variants -> variants``: the current query variants (first = the user's query) to new ones."""

    def __call__(self, variants: list[str]) -> list[str]: ...


@runtime_checkable
class PostProcessor(Protocol):
    """``(query, hits) -> hits`` over the deep, reranked list (may reorder or drop hits)."""

    def __call__(self, query: str, hits: list[Hit]) -> list[Hit]: ...


_TRANSFORMS: dict[str, Transform] = {}
_POSTPROCESSORS: dict[str, PostProcessor] = {}


def _register(table: dict, kind: str, name: str, fn: Any, replace: bool) -> Any:
    if not callable(fn):
        raise TypeError(f"{kind} {name!r} must be callable")
    if name in table and not replace:
        raise ValueError(f"{kind} {name!r} is already registered")
    table[name] = fn
    return fn


def register_transform(name: str, fn: Transform, *, replace: bool = False) -> Transform:
    """Run ``fn(variants) -> variants`` in every query pipeline built afterwards."""
    return _register(_TRANSFORMS, "transform", name, fn, replace)


def register_postprocessor(name: str, fn: PostProcessor, *, replace: bool = False) -> PostProcessor:
    """Run ``fn(query, hits) -> hits`` after reranking in every query pipeline built afterwards."""
    return _register(_POSTPROCESSORS, "post-processor", name, fn, replace)


def unregister_transform(name: str) -> None:
    _TRANSFORMS.pop(name, None)


def unregister_postprocessor(name: str) -> None:
    _POSTPROCESSORS.pop(name, None)


def registered_transforms() -> tuple[str, ...]:
    return tuple(_TRANSFORMS)


def registered_postprocessors() -> tuple[str, ...]:
    return tuple(_POSTPROCESSORS)


def _accepts_explain(fn: Callable) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "explain" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _is_restricted(hit: Hit) -> bool:
    return hit.chunk.is_restricted


class QueryPipeline:
    """Transforms → source (channels + fusion per variant) → variant fusion → rerank →
    post-processors → RESTRICTED strip. ``run`` returns a :class:`SearchResult`."""

    def __init__(
        self,
        source: Any,
        *,
        transforms: Sequence[tuple[str, Transform]] = (),
        reranker: Any | None = None,
        judge: Any | None = None,
        rerank_top_n: int = 10,
        rrf_k: float = DEFAULT_RRF_K,
        postprocessors: Sequence[tuple[str, PostProcessor]] = (),
        use_registered: bool = True,
        gate: Any | None = None,
    ) -> None:
        self.source = source
        #: ``gate.check(text) -> Refusal | None`` (see :mod:`ragspine_core.gate`): the user's
        #: query is checked before anything runs, every generated variant before retrieval
        self.gate = gate
        self.transforms = list(transforms) + (list(_TRANSFORMS.items()) if use_registered else [])
        self.postprocessors = list(postprocessors) + (list(_POSTPROCESSORS.items()) if use_registered else [])
        self.reranker = reranker
        self.judge = judge
        self.rerank_top_n = rerank_top_n
        self.rrf_k = rrf_k
        self._source_explains = _accepts_explain(source.search)

    def _source_search(self, q: str, filters: Any, depth: int, include_restricted: bool, tracer: Tracer | None) -> list[Hit]:
        if tracer is not None and self._source_explains:
            res = self.source.search(q, filters=filters, top_k=depth, include_restricted=include_restricted, explain=True)
            tracer.extend(getattr(res, "explain", None))
            return list(res)
        t0 = now()
        hits = self.source.search(q, filters=filters, top_k=depth, include_restricted=include_restricted)
        if tracer is not None:
            tracer.add("search", type(self.source).__name__, now() - t0, hit_candidates(hits), query=q)
        return hits

    def run(self, query: str, *, filters: Any = None, top_k: int = 10, include_restricted: bool = False, explain: bool = False) -> SearchResult:
        tracer = Tracer() if explain else None
        from ragspine_query.assessment import default_tier

        tier = default_tier(self.source)
        if self.gate is not None:
            t0 = now()
            refusal = self.gate.check(query)
            if tracer is not None:
                tracer.add("gate", type(self.gate).__name__, now() - t0, query=query,
                           detail=f"refused: {refusal.reason}" if refusal else "passed")
            if refusal is not None:
                res = SearchResult([], tracer.freeze(query) if tracer else None, refusal)
                res.tier = tier
                return res
        variants = [query]
        for name, t in self.transforms:
            t0 = now()
            out = t(variants)
            variants = list(out) or [query]
            tier = getattr(out, "tier", "") or tier  # the adaptive tiers say which tier runs
            if tracer is not None:
                note = getattr(out, "note", "")  # a transform may say why it did nothing
                tracer.add("transform", name, now() - t0, detail=" | ".join(variants) + (f" ({note})" if note else ""))
        if self.gate is not None and (len(variants) > 1 or variants[0] is not query):
            t0 = now()
            kept = [v for v in variants if self.gate.check(v) is None]
            if tracer is not None:
                tracer.add("gate", f"{type(self.gate).__name__}(variants)", now() - t0,
                           detail=f"{len(variants) - len(kept)} of {len(variants)} variants refused")
            variants = kept or [query]
        if len(variants) > 1:  # every variant is planned in the user's query's language (see in_language_of)
            lang = query_language(query)
            variants = [v if str(v) == str(query) else in_language_of(v, lang, only=VARIANTS_OWN_LANGUAGE_ONLY)
                        for v in variants]
        # every variant (and the reranker) sees a deep list: RRF over shallow lists is unstable
        deep = len(variants) > 1 or self.reranker is not None or self.judge is not None or bool(self.postprocessors)
        depth = max(top_k, 50) if deep else top_k
        if len(variants) == 1:
            hits = self._source_search(variants[0], filters, depth, include_restricted, tracer)
        else:
            per_variant: list[list[tuple[str, str]]] = []  # a list: two variants may share their text (HyDE probes)
            best: dict[tuple[str, str], Hit] = {}
            for q in variants:
                vh = self._source_search(q, filters, depth, include_restricted, tracer)
                per_variant.append([(h.chunk_id, h.chunk.library_id) for h in vh])
                for h in vh:
                    best.setdefault((h.chunk_id, h.chunk.library_id), h)
            t0 = now()
            keys, scores = weighted_rrf(per_variant, rrf_k=self.rrf_k)
            hits = [best[k].with_score(s, fused=s) for k, s in zip(keys[:depth], scores[:depth])]
            if tracer is not None:
                tracer.add("fuse", "rrf(variants)", now() - t0, hit_candidates(hits), detail=f"{len(variants)} variants, k={self.rrf_k}")
        if self.reranker is not None or self.judge is not None:
            t0 = now()
            note = ""  # what the reranker leaves alone because of its languages
            if self.reranker is not None:
                if tracer is not None:
                    from ragspine_query.rerank.reranker import language_note

                    note = language_note(self.reranker, query, hits, self.rerank_top_n)
                hits, name = self.reranker.rank(query, hits, top_n=self.rerank_top_n), type(self.reranker).__name__
            else:
                from ragspine_query.rerank.listwise import listwise_rerank

                hits, name = listwise_rerank(query, hits, self.judge, top_n=self.rerank_top_n), "listwise"
            if tracer is not None:
                tracer.add("rerank", name, now() - t0, hit_candidates(hits), detail=note)
        # deep post-processors (MMR, …) see the deep list; ``final`` ones (lost-in-the-middle,
        # compression) the top_k that is returned, so a reorder cannot push good hits past the cut
        for name, p in [x for x in self.postprocessors if not getattr(x[1], "final", False)]:
            t0 = now()
            hits = list(p(query, hits))
            if tracer is not None:
                tracer.add("postprocess", name, now() - t0, hit_candidates(hits), detail=getattr(p, "describe", ""))
        hits = hits[:top_k]
        for name, p in [x for x in self.postprocessors if getattr(x[1], "final", False)]:
            t0 = now()
            hits = list(p(query, hits))[:top_k]
            if tracer is not None:
                tracer.add("postprocess", name, now() - t0, hit_candidates(hits), detail=getattr(p, "describe", ""))
        if not include_restricted:
            t0 = now()
            kept = [h for h in hits if not _is_restricted(h)]
            if tracer is not None:
                tracer.add("restricted_strip", "mask+guard", now() - t0, hit_candidates(kept),
                           detail="RESTRICTED rows left the candidate mask before ranking; last guard")
            hits = kept
        ex = None
        if tracer is not None:
            ex = tracer.freeze(query)
            if not include_restricted:
                ex = ex.without_restricted()
        res = SearchResult(hits, ex)
        res.tier = tier
        return res
