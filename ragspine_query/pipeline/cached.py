"""``CachedPipeline(p, cache)``: ``p``'s stage list with its whole runs cached (the cache
itself, its keys and purges, are :mod:`ragspine_query.cache`)."""

from __future__ import annotations

from typing import Any

from ragspine_query.cache import ScopedCache, scope_of
from ragspine_query.pipeline.runner import QueryPipeline, stages_of


class CachedPipeline(QueryPipeline):
    """``pipeline``'s stage list with its whole runs cached by scope + normalised query +
    arguments (a pipeline that is not a :class:`QueryPipeline` runs as one stage).

    The cache is a property of the pipeline (:class:`QueryPipeline` ``cache``), not a
    wrapper around it: :func:`~ragspine_query.builder.build_pipeline` sets it
    directly. A cached result is returned as a fresh :class:`SearchResult` (same hits,
    same refusal); with ``explain=True`` its trace is one ``cache`` stage saying it was a hit.
    """

    def __init__(self, pipeline: Any, cache: ScopedCache[Any], *, variant: str = "") -> None:
        self.pipeline = pipeline
        source, stages = stages_of(pipeline)
        self._init_from(source, stages, cache=cache, variant=variant)
        if source is None:  # the scope of whatever the pipeline searches
            self.scope = scope_of(pipeline)

    def key(self, query: str, filters: Any, top_k: int, include_restricted: bool) -> str:
        return self.cache_key(query, filters, top_k, include_restricted)


__all__ = ["CachedPipeline"]
