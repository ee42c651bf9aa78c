"""Retrieval channels: anything that ranks a library's rows for a query.

A channel has a ``name`` and ``search(query, depth, allowed) -> (rows int64, scores
float32)``, best first, ties by row ascending, honouring ``allowed`` (a bool mask over
rows, None = every row). The library's built-in channels are ``bm25`` (chunk field +
``doc_weight`` × document field) and ``vector`` (exact cosine), then ``tree``, ``graph``
and ``community`` (registered by :mod:`ragspine_query.tree` and :mod:`ragspine_query.graph`);
a new one is added with :func:`register_channel` — the retriever asks every registered
factory, in the order of :data:`CHANNELS` (a :class:`~ragspine_core.registry.Registry`:
built-ins at their declared places, :data:`BUILTIN_CHANNEL_ORDER`, then plug-ins by
``order`` and name; never import order), for a channel over its library, and fuses
whatever they return. A channel that
reaches rows through something else (the ``tree`` channel: a summary node answered by
its leaves) declares ``reaches_via = True`` and offers ``search_with_via(query, depth,
allowed) -> (rows, scores, vias)``; the retriever then calls it instead and keeps each
row's ``via`` on the hit.

A channel's abilities are declared, never probed: :class:`Channel` declares each with
its default — ``on_demand`` (runs only for queries that name it), ``reaches_via``,
``default_weight``, ``fusion_rrf_k`` (the RRF k its mode fuses with), ``languages`` and
``cross_lingual`` (what the language-aware fusion needs), ``search_with_via`` and
``describe`` (what ``explain`` says of a search; None: nothing) — and every built-in
channel subclasses it and declares what differs. A registered channel that does not
subclass :class:`Channel` is adapted once, where the channels are built
(:class:`PluginChannel`: the abilities it declares, the defaults for the others).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, cast

import numpy as np

from ragspine_core.lexical.bm25 import search_blend_index, search_blended, terms_all_own
from ragspine_core.registry import PLUGIN_ORDER, Registry


class Channel:
    """Ranks a library's rows for a query. Subclass it and give ``name`` and ``search``;
    the abilities below are declared here with their defaults (override what differs)."""

    #: the channel's name: its key in ``scores``, ``channel_weights`` and ``explain``
    name: str = ""
    #: runs only for the queries that name it (a :class:`~ragspine_query.transforms.transform.ChannelQuery`)
    on_demand: bool = False
    #: reaches rows through something else (summary nodes): the retriever calls :meth:`search_with_via`
    reaches_via: bool = False
    #: its fusion weight unless ``RetrievalConfig.channel_weights`` names it
    default_weight: float = 1.0
    #: the RRF k its mode fuses with (``graph`` mode), None: the configuration's
    fusion_rrf_k: int | None = None
    #: the languages its model serves (None: every language)
    languages: tuple[str, ...] | None = None
    #: built for cross-lingual retrieval (a text and its translation land close)
    cross_lingual: bool = False

    def search(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``(rows int64, scores float32)``, best first, ties by row, only ``allowed`` rows."""
        raise NotImplementedError(f"{type(self).__name__} must define search(query, depth, allowed)")

    def search_with_via(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        """``search`` plus each row's ``via`` (``""``: reached directly)."""
        rows, scores = self.search(query, depth, allowed)
        return rows, scores, ("",) * int(rows.shape[0])

    def describe(self, query: str, depth: int = 0, allowed: np.ndarray | None = None) -> str | None:
        """What ``explain`` says of this channel's search for ``query`` (None: nothing)."""
        return None


class PluginChannel(Channel):
    """A registered channel that does not subclass :class:`Channel`, with its abilities
    read once: what it declares (``on_demand``, ``reaches_via``, ``search_with_via``,
    ``describe``, ``default_weight``, …), the defaults otherwise. ``inner`` is the channel."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        for ability in ("on_demand", "reaches_via", "default_weight", "fusion_rrf_k", "languages", "cross_lingual"):
            declared = getattr(inner, ability, _UNSET)
            if declared is not _UNSET:
                setattr(self, ability, declared)
        self._search = inner.search
        self._with_via = getattr(inner, "search_with_via", None) if self.reaches_via else None
        self._describe = getattr(inner, "describe", None)

    def search(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        return cast("tuple[np.ndarray, np.ndarray]", self._search(query, depth, allowed))

    def search_with_via(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        if self._with_via is not None:
            return cast("tuple[np.ndarray, np.ndarray, tuple[str, ...]]", self._with_via(query, depth, allowed))
        return Channel.search_with_via(self, query, depth, allowed)

    def describe(self, query: str, depth: int = 0, allowed: np.ndarray | None = None) -> str | None:
        return self._describe(query, depth, allowed) if self._describe is not None else None


def as_channel(channel: Any) -> Channel:
    """``channel`` itself when it subclasses :class:`Channel`, else a :class:`PluginChannel` over it."""
    return channel if isinstance(channel, Channel) else PluginChannel(channel)


@dataclass(frozen=True, slots=True)
class ChannelContext:
    """What a channel factory may use: the library, the retriever's config, the mode that
    actually runs (``bm25``/``hybrid``/``vector``) and the query embedding backend."""

    library: Any
    config: Any
    active_mode: str
    embedding_backend: Any | None


_UNSET: Any = object()

ChannelFactory = Callable[[ChannelContext], Any]


def _must_be_callable(name: str, factory: Any) -> None:
    if not callable(factory):
        raise TypeError(f"channel {name!r} needs a factory: a callable ctx -> Channel | list[Channel] | None, got {factory!r}")


#: Every channel factory, by name: a retriever's channels come in this registry's order.
CHANNELS: Registry[ChannelFactory] = Registry("channel", check=_must_be_callable)

#: The built-in channels' places (the order a retriever lists, traces and fuses them in).
BUILTIN_CHANNEL_ORDER: dict[str, int] = {"bm25": 0, "vector": 10, "tree": 20, "graph": 30, "community": 40}


def register_channel(name: str, factory: ChannelFactory, *, replace: bool = False, order: int = PLUGIN_ORDER) -> ChannelFactory:
    """Add a channel: ``factory(ctx) -> Channel | None`` (None: not for this library/mode;
    a list adds several channels, as the models of an embedding ensemble do).

    Retrievers built afterwards include it, after the built-ins (by ``order``, then
    name); its weight in the fusion is ``RetrievalConfig.channel_weights.get(name,
    channel.default_weight)``. Replacing a built-in (``replace=True``) keeps its place.

    Raises:
        ConfigError: ``name`` is registered already and ``replace`` is false.
        TypeError: ``factory`` is not callable.
    """
    return CHANNELS.register(name, factory, order=order, replace=replace)


def register_builtin_channel(name: str, factory: ChannelFactory) -> ChannelFactory:
    """Register one of RAGSpine's own channels at its :data:`BUILTIN_CHANNEL_ORDER` place
    (idempotent: re-importing its module keeps the place)."""
    return CHANNELS.register(name, factory, order=BUILTIN_CHANNEL_ORDER[name], replace=True, builtin=True)


def unregister_channel(name: str) -> None:
    """Remove a plug-in channel (a no-op when absent).

    Raises:
        ConfigError: ``name`` is a built-in channel.
    """
    CHANNELS.unregister(name)


def registered_channels() -> tuple[str, ...]:
    """The registered channel names, in the order retrievers use them."""
    return CHANNELS.names()


def build_channels(ctx: ChannelContext) -> list[Channel]:
    """Every registered factory's channels for ``ctx``, in registry order (each a :class:`Channel`)."""
    out: list[Channel] = []
    for factory in CHANNELS:
        ch = factory(ctx)
        if isinstance(ch, list):
            out.extend(as_channel(c) for c in ch)
        elif ch is not None:
            out.append(as_channel(ch))
    return out


class OnDemandChannel(Channel):
    """A channel that runs only for the queries that name it, built on first use.

    The adaptive tiers (:mod:`ragspine_query.tiers`) send a multi-hop question to the
    ``graph`` channel and a library-wide one to the ``tree`` channel; in the default
    modes those channels stay out of every other query's fusion, and the snapshot's
    artifact is opened only when a query asks for it. A query selects it with a
    :class:`~ragspine_query.transforms.transform.ChannelQuery` whose ``channels`` name it.
    """

    on_demand = True
    reaches_via = True  # the inner channel's vias, or "" per row

    def __init__(self, name: str, build: Callable[[], Any], default_weight: float = 1.0) -> None:
        self.name = name
        self.default_weight = float(default_weight)
        self._build = build
        self._channel: Channel | None = None
        self._built = False

    def _get(self) -> "Channel | None":
        if not self._built:
            built = self._build()
            self._channel, self._built = (None if built is None else as_channel(built)), True
        return self._channel

    def search(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        ch = self._get()
        return _empty() if ch is None else ch.search(query, depth, allowed)

    def search_with_via(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        """``search`` plus each row's ``via`` (the inner channel's, e.g. the tree's node ids; else ``""``)."""
        ch = self._get()
        if ch is not None and ch.reaches_via:
            return ch.search_with_via(query, depth, allowed)
        rows, scores = _empty() if ch is None else ch.search(query, depth, allowed)
        return rows, scores, ("",) * int(rows.shape[0])

    def describe(self, query: str, depth: int = 0, allowed: np.ndarray | None = None) -> str | None:
        ch = self._get()
        said = ch.describe(query, depth, allowed) if ch is not None else None
        return "on demand: " + (said if said is not None else "built for this query")


def selects(query: Any, channel: Any) -> bool:
    """Whether ``channel`` runs for ``query``: always, unless it is on demand and the
    query does not name it."""
    if not channel.on_demand:
        return True
    named = getattr(query, "channels", None)
    return named is not None and channel.name in named


def _empty() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(0, np.int64), np.zeros(0, np.float32)


class LexicalChannel(Channel):
    """BM25 over the chunk field blended with the document field (exact, pruned)."""

    name = "bm25"

    def __init__(self, library: Any, doc_weight: float, stats: Any = None) -> None:
        self.library = library
        self.doc_weight = float(doc_weight)
        #: the indexes it scores with (``stats``, e.g. :meth:`~ragspine_query.library.Library.lexical_for`
        #: a caller's ceiling, else the library's own)
        self.stats = lex = library if stats is None else stats
        self._analyze = getattr(lex.analyzer, "fn", lex.analyzer)  # one call less per query
        self._row_doc = np.asarray(lex.row_doc)  # a plain view: memmap slicing is slow
        blend = getattr(lex, "bm25_blend", None)
        # the index-time blend serves only the weight it was built with
        self._blend = blend if blend is not None and getattr(lex, "bm25_blend_weight", None) == self.doc_weight else None
        self._own: Any = np.asarray(lex.bm25_blend_own) if self._blend is not None else None
        self._all_own = terms_all_own(self._blend, self._own) if self._blend is not None else None  # type: ignore[arg-type]

    def search(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        tokens = self._analyze(query)
        if self._blend is not None:  # the precomputed blend: one sparse pass (None: a frequent term)
            found = search_blend_index(self._blend, self._own, tokens, depth, allowed=allowed, all_own=self._all_own)
            if found is not None:
                return found
        lib = self.stats
        return search_blended(lib.bm25, lib.bm25_doc, self._row_doc, tokens, depth,
                              doc_weight=self.doc_weight, allowed=allowed)


class DenseChannel(Channel):
    """Cosine between the query embedding and the library's vectors (allowed rows only).

    Exact scan, or the snapshot's ANN index (``ann`` artifact, built above a size threshold)
    when present and its engine is installed; ``allowed`` is honoured exactly either way
    (:func:`ragspine_core.dense.ann.search_dense`: over-fetch and filter, exact fallback).

    With ``part`` (one model of an :class:`~ragspine_core.dense.ensemble.EnsembleEmbeddingBackend`)
    the query is embedded by that model alone and placed in its columns, zeros elsewhere:
    the dot product with a row is then that model's cosine over ``sqrt(n)``, so the same
    matrix and ANN index rank by one model. Scores are scaled back to the model's cosine.
    The first part keeps the name ``vector``; the others are ``vector:<part name>``.
    """

    name = "vector"

    def __init__(self, library: Any, backend: Any, part: Any = None) -> None:
        self.library = library
        self.backend = backend
        self.part = part
        if part is not None and part.start > 0:
            self.name = f"vector:{part.name}"
        #: the languages the model serves (None: every language; e.g. MiniLM is English-only)
        model = part.backend if part is not None else backend
        self.languages = getattr(model, "languages", None)
        #: the model is built for cross-lingual retrieval (a text and its translation land close)
        self.cross_lingual = bool(getattr(model, "cross_lingual", False))
        self._ann: Any = _UNSET
        self._rows_of: tuple[Any, np.ndarray, bool] | None = None

    def search(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        from ragspine_core.dense.ann import ann_for_library, search_dense
        from ragspine_core.dense.query_vectors import query_vectors

        emb = self.library.embeddings()
        if emb is None or self.backend is None:
            return _empty()
        # embedded once per model and text in this process (prefetched for all variants by
        # HybridRetriever.prefetch_queries): ragspine_core.dense.query_vectors
        if self.part is None:
            qv = query_vectors(self.backend, [query])[0]
            scale = 1.0
        else:
            qv = np.zeros(emb.dim, dtype=np.float32)
            qv[self.part.start : self.part.stop] = query_vectors(self.part.backend, [query])[0]
            scale = float(np.sqrt(len(self.backend.parts)))
        rows, identity = self._rows(emb)
        mask = None if allowed is None else (allowed if identity else allowed[rows])
        ann = self._ann
        if ann is _UNSET:  # opened once per library (ann_for_library): remembered here, no lock per query
            ann = self._ann = ann_for_library(self.library)
        idx, scores = search_dense(emb.vectors, qv, depth, ann, mask)
        scores = np.asarray(scores, dtype=np.float32)
        return (np.asarray(idx).astype(np.int64, copy=False) if identity else rows[idx].astype(np.int64),
                scores if scale == 1.0 else scores * np.float32(scale))

    @property
    def model(self) -> Any:
        """The backend that embeds this channel's query (the part's model in an ensemble)."""
        return self.part.backend if self.part is not None else self.backend

    def _rows(self, emb: Any) -> tuple[np.ndarray, bool]:
        """The matrix's chunk rows (a plain array) and whether they are simply 0..n-1, the
        chunk rows themselves (every chunk has a vector): then no row mapping is needed."""
        got = self._rows_of
        if got is None or got[0] is not emb:
            rows = np.asarray(emb.rows).view(np.ndarray)
            n = getattr(self.library, "n_chunks", -1)
            identity = rows.shape[0] == n and bool(np.array_equal(rows, np.arange(n)))
            got = self._rows_of = (emb, rows, identity)
        return got[1], got[2]


def dense_channels(library: Any, backend: Any) -> list[DenseChannel]:
    """One :class:`DenseChannel` per model of ``backend`` (one for a single model)."""
    parts = getattr(backend, "parts", None)
    if not parts:
        return [DenseChannel(library, backend)]
    return [DenseChannel(library, backend, part) for part in parts]


def _bm25_factory(ctx: ChannelContext) -> Channel | None:
    if ctx.active_mode == "vector":
        return None
    # a caller's ceiling: BM25 statistics over the rows it may see (Library.lexical_for)
    ceiling = getattr(ctx.config, "max_sensitivity", None)
    lexical_for = getattr(ctx.library, "lexical_for", None)
    stats = lexical_for(ceiling) if (ceiling is not None and lexical_for is not None) else None
    return LexicalChannel(ctx.library, ctx.config.doc_weight, stats)


def _vector_factory(ctx: ChannelContext) -> list[DenseChannel] | None:
    """The dense channel, or one per model of an embedding ensemble."""
    if ctx.active_mode == "bm25" or ctx.embedding_backend is None:
        return None
    return dense_channels(ctx.library, ctx.embedding_backend)


register_builtin_channel("bm25", _bm25_factory)
register_builtin_channel("vector", _vector_factory)
