"""The query pipeline's result types and the state one run carries from stage to stage:
:class:`SearchResult`, :class:`Snippets`, :class:`QueryState` (the stages are in
:mod:`.stages`, the loop that runs them in :mod:`.runner`)."""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

from ragspine_core.records import Hit, hits_to_frame
from ragspine_query.pipeline.explain import Explain


_R = TypeVar("_R")


def dropped_filter_records(predicates: Any, origin: str, why: str) -> tuple[dict[str, Any], ...]:
    """``{field, op, value, origin, why}`` of each dropped predicate (``origin``: ``caller`` or
    ``extracted``): what :attr:`SearchResult.dropped_filters` holds."""
    from ragspine_query.filters import parse_filters

    preds = parse_filters(predicates) if predicates else ()
    return tuple({"field": p.field, "op": p.op, "value": list(p.value) if isinstance(p.value, tuple) else p.value,
                  "origin": origin, "why": why} for p in preds)


class _ResultList(list[Any]):
    """What :class:`SearchResult` and :class:`Snippets` carry beside their items (one definition for both)."""

    __slots__ = ("explain", "refusal", "tier", "confidence", "needs_refinement", "filters", "dropped_filters")

    def __init__(self, items: Sequence[Any] = (), explain: Explain | None = None, refusal: Any = None) -> None:
        super().__init__(items)
        self.explain = explain
        self.refusal = refusal
        self.tier: str | None = None
        self.confidence: Any = None
        self.needs_refinement: bool | None = None
        self.filters: Any = None
        self.dropped_filters: tuple[dict[str, Any], ...] = ()

    def carry(self: _R, other: Any) -> _R:
        """Copy ``other``'s tier, confidence, needs_refinement, filters and dropped filters onto this result."""
        for name in ("tier", "confidence", "needs_refinement", "filters"):
            value = getattr(other, name, None)
            if value is not None:
                setattr(self, name, value)
        dropped = tuple(getattr(other, "dropped_filters", ()) or ())
        if dropped:
            setattr(self, "dropped_filters", tuple(getattr(self, "dropped_filters", ())) + dropped)
        return self

    def to_frame(self) -> Any:
        """A pandas DataFrame with provenance columns (see :func:`hits_to_frame`)."""
        return hits_to_frame(self)


class SearchResult(_ResultList):
    """A list of :class:`Hit` (best first) plus ``explain`` (when asked for) and ``to_frame()``.

    ``refusal`` is a :class:`~ragspine_core.gate.Refusal` (why nothing was retrieved: a
    competitor query, an ungroundable one) or None; a refused result holds no hits.

    Through a query pipeline (:func:`~ragspine_query.builder.build_pipeline`)
    every result also carries ``tier`` (the retrieval tier that ran: ``direct``,
    ``semantic``, ``multi_hop``, ``global``, ``multi_part``), ``confidence`` (a
    :class:`~ragspine_query.assessment.Confidence`: grade ``high|medium|low`` and score),
    ``needs_refinement``, ``filters`` (the extracted filters' outcome, or None) and
    ``dropped_filters``: every filter a fallback or retry dropped to produce this result, as
    dicts ``{field, op, value, origin: caller | extracted, why}`` (empty when none was).
    """

    __slots__ = ()

    def __init__(self, hits: Sequence[Hit] = (), explain: Explain | None = None, refusal: Any = None) -> None:
        super().__init__(hits, explain, refusal)


class Snippets(_ResultList):
    """A list of snippet dicts plus ``explain`` (when asked for), ``refusal``, ``tier``,
    ``confidence``, ``needs_refinement``, ``filters``, ``dropped_filters`` (see :class:`SearchResult`) and ``to_frame()``."""

    __slots__ = ()

    def __init__(self, snippets: Sequence[Any] = (), explain: Explain | None = None, refusal: Any = None) -> None:  # Snippet records or dicts
        super().__init__(snippets, explain, refusal)


# -- the state one run of the stage list carries ------------------------------------------
class QueryState:
    """What one run of a pipeline's stage list carries from stage to stage.

    ``query``, ``caller_filters`` (the filters this run was asked for), ``filters`` (what
    retrieval applies: the caller's, plus extracted predicates), ``top_k``,
    ``include_restricted``, ``extract`` (whether filter extraction may run), then what
    stages fill in: ``variants``, ``tier``, ``hits``, ``refusal``, ``applied_filters``,
    ``extraction`` (the predicates a filter stage applied, for its fallback),
    ``confidence``, ``needs_refinement`` and ``dropped_filters`` (see :class:`SearchResult`).

    A stage that must run the stages before it again (the filter fallback, corrective
    retrieval) calls :meth:`rerun`; the pipeline sets what that runs.
    """

    __slots__ = ("query", "caller_filters", "filters", "top_k", "include_restricted", "extract", "variants", "tier",
                 "hits", "refusal", "applied_filters", "extraction", "confidence", "needs_refinement", "dropped_filters",
                 "_rerun")

    def __init__(self, query: Any, filters: Any, top_k: int, include_restricted: bool, *, extract: bool = True,
                 tier: str | None = None) -> None:
        self.query = query
        self.caller_filters = filters
        self.filters = filters
        self.top_k = top_k
        self.include_restricted = include_restricted
        self.extract = extract
        self.variants: list[Any] = [query]
        self.tier = tier
        self.hits: list[Hit] = []
        self.refusal: Any = None
        self.applied_filters: Any = None
        self.extraction: Any = None
        self.confidence: Any = None
        self.needs_refinement: bool | None = None
        self.dropped_filters: tuple[dict[str, Any], ...] = ()
        self._rerun: Callable[..., "QueryState"] | None = None

    def rerun(self, query: Any, filters: Any, *, extract: bool = True, after: Any = None) -> "QueryState":
        """A fresh run of the stages before the current one (after stage ``after`` when
        given) for ``query`` and ``filters``: its final state."""
        if self._rerun is None:
            raise RuntimeError("rerun() is only available while a pipeline runs its stages")
        return self._rerun(query, filters, extract, after)

    def result(self, explain: Explain | None = None) -> SearchResult:
        """The state as a :class:`SearchResult` (hits, refusal, tier, confidence, filters)."""
        res = SearchResult(self.hits, explain, self.refusal)
        res.tier = self.tier
        res.confidence = self.confidence
        res.needs_refinement = self.needs_refinement
        res.filters = self.applied_filters
        res.dropped_filters = tuple(self.dropped_filters)
        return res
