"""What a query pipeline searches: the :class:`Source` protocol, and the one place that says
which libraries (and which channels) are behind a source.

Both retrievers implement :class:`Source`: :class:`~ragspine_query.retriever.HybridRetriever`
(one library; it is its own :class:`LibraryRetriever`) and
:class:`~ragspine_query.retriever.MultiIndexRetriever` (its retrievers, by library).
A stage that needs the libraries behind its source (the cache scope, filter extraction's
values, MMR's vectors, the confidence features, the tiers' channels) asks
:func:`retrievers_of` / :func:`libraries_of` / :func:`channels_of`; a source that is
neither retriever (a test double with ``search`` only) has none behind it.

This module names only the floors below the pipeline (the library, the channels, the hit
record), so every module of the pipeline can import it without a cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

if TYPE_CHECKING:
    import numpy as np

    from ragspine_core.records import Hit
    from ragspine_query.library import Library
    from ragspine_query.pipeline.channels import Channel


class Source(Protocol):
    """What the query pipeline's stages search: ``search(query, *, filters, top_k,
    include_restricted, explain)`` returning hits best first (a
    :class:`~ragspine_query.pipeline.state.SearchResult`), and the one-library retrievers
    behind it by library id."""

    @property
    def library_retrievers(self) -> Mapping[str, LibraryRetriever]: ...

    def search(self, query: str, *, filters: Any = None, top_k: int = 10, include_restricted: bool = True,
               explain: bool = False) -> list[Hit]: ...


class LibraryRetriever(Source, Protocol):
    """A :class:`Source` over one library: the library it reads, the channels it built, the
    rows a query's filters allow."""

    @property
    def library(self) -> Library: ...

    @property
    def channels(self) -> Sequence[Channel]: ...

    def allowed_mask(self, filters: Any, *, include_restricted: bool = True) -> np.ndarray | None:
        """Rows the filters allow (None = every row), RESTRICTED ones removed unless ``include_restricted``."""
        ...

    def hidden_mask(self) -> np.ndarray:
        """Rows never ranked for this retriever's caller (RESTRICTED, and above its ceiling)."""
        ...


def retrievers_of(source: object) -> list[LibraryRetriever]:
    """The one-library retrievers behind ``source`` (a multi-index's in library order; a
    single retriever itself); none for a source that is neither retriever."""
    behind: Mapping[str, LibraryRetriever] | None = getattr(source, "library_retrievers", None)
    return list(behind.values()) if behind is not None else []


def libraries_of(source: object) -> list[Library]:
    """The libraries behind ``source`` (see :func:`retrievers_of`)."""
    return [r.library for r in retrievers_of(source)]


def follow(source: object) -> bool:
    """Have ``source`` follow its libraries' ``current`` snapshots now
    (:class:`~ragspine_query.library.Follower`; a retriever also does at each search): the
    query pipeline calls it before its first stage, so the stages that read the retrievers
    (the tiers' channels, the router's profiles, the grader's weights, the cache key) see
    the reopened library on the first query after a repair, not one query later. An error
    is left for the search, which raises it located; True when a library was reopened."""
    own = getattr(source, "follow", None)
    if own is None:
        return False
    from ragspine_core.errors import RagspineError

    try:
        return bool(own())
    except RagspineError:
        return False


def channels_of(source: object) -> list[Channel]:
    """The channels the retrievers behind ``source`` built, library by library."""
    return [c for r in retrievers_of(source) for c in r.channels]


__all__ = ["LibraryRetriever", "Source", "channels_of", "follow", "libraries_of", "retrievers_of"]
