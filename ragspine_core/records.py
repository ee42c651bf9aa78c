"""Frozen records passed between stages (dicts only at the snippet edge)."""

from __future__ import annotations

import warnings
from dataclasses import FrozenInstanceError, dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Mapping, cast, Sequence

RESTRICTED_SENSITIVITY = "RESTRICTED"
SENSITIVITIES = ("PUBLIC", "INTERNAL", "RESTRICTED")


def is_restricted(sensitivity: object) -> bool:
    """Whether a sensitivity value (a chunk's, a document's, a column cell) is RESTRICTED."""
    return str(sensitivity).strip().upper() == RESTRICTED_SENSITIVITY
DEFAULT_SENSITIVITY = "INTERNAL"

#: The metadata fields every document and chunk carries (besides ``extra``).
METADATA_FIELDS = (
    "doc_id",
    "title",
    "source_locator",
    "entity",
    "topic",
    "geography",
    "period",
    "language",
    "sensitivity",
    "valid_as_of",
)


#: The fragment keys a converted file's chunk locator may carry (``…#page=4&chars=…``; ``part``: an
#: e-mail's MIME part, ``mail.eml#part=2&page=3``; ``chapter``: an EPUB's spine item).
LOCATION_KEYS = ("part", "chapter", "page", "end_page", "slide", "end_slide", "sheet", "cells", "anchor")


def _has_fragment_fields(locator: str) -> bool:
    """Whether ``locator`` has a ``#key=value`` fragment naming a place in a converted file."""
    _, sep, fragment = locator.partition("#")
    return bool(sep) and any(part.partition("=")[0] in LOCATION_KEYS for part in fragment.split("&"))


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable span of a document.

    ``text`` is a contiguous substring of the document body: ``body[start:end] == text``.
    ``index_text`` is what is tokenized and embedded (contextual header + text); it is
    never cited.
    """

    chunk_id: str
    library_id: str
    doc_id: str
    ordinal: int
    text: str
    start: int
    end: int
    title: str = ""
    source_locator: str = ""
    entity: str = ""
    topic: str = ""
    geography: str = ""
    period: str = ""
    language: str = ""
    sensitivity: str = DEFAULT_SENSITIVITY
    valid_as_of: str = ""
    chunker: str = "paragraph"
    chunker_version: str = "1"
    heading: str = ""
    parent_id: str = ""
    parent_text: str = ""
    extra: tuple[tuple[str, str], ...] = ()
    index_text: str = ""
    version: int = 1

    @property
    def is_restricted(self) -> bool:
        return is_restricted(self.sensitivity)

    @property
    def locator(self) -> str:
        """Citation locator: ``source_locator#chars=start-end``; a converted file's chunk
        already names its place in ``source_locator`` (``q3.pdf#page=4``), which then
        gives ``q3.pdf#page=4&chars=start-end``."""
        base = self.source_locator or self.doc_id
        return f"{base}{'&' if _has_fragment_fields(base) else '#'}chars={self.start}-{self.end}"

    @property
    def location(self) -> dict[str, str]:
        """Where in the original file the chunk is, from its locator's fragment:
        ``{"page": "4"}`` (PDF; ``end_page`` when it runs on), ``{"slide": "2"}`` (PPTX),
        ``{"sheet": "Q3", "cells": "A5:F9"}`` (XLSX), ``{"anchor": "revenue"}`` (HTML/DOCX
        heading); ``{}`` for Markdown, text and JSONL documents."""
        base = self.source_locator
        if not _has_fragment_fields(base):
            return {}
        from urllib.parse import unquote

        out = {}
        for part in base.split("#", 1)[1].split("&"):
            key, eq, value = part.partition("=")
            if eq and key in LOCATION_KEYS:
                out[key] = unquote(value)
        return out

    def metadata(self) -> dict[str, str]:
        out = {name: getattr(self, name) for name in METADATA_FIELDS}
        out.update(dict(self.extra))
        return out


class Hit:
    """A scored chunk. ``scores`` maps channel name (``bm25``, ``vector``, ``fused``…) to score.

    ``via`` is the summary-tree node a chunk was reached through (``""`` otherwise): a
    node hit of the ``tree`` channel is answered with its best leaf chunks, and the node
    (a synthesis, never cited) is recorded here.

    Frozen: ``chunk``, ``chunk_id``, ``score``, ``scores``, ``via`` (and ``row``, the
    snapshot row a retriever found it at, None otherwise) are read-only; ``with_score``
    makes a new hit. Two hits are equal when their chunk, score, scores and via are; a hit
    pickles as a plain hit. The one type of every hit: a retriever's hits are this class
    too, with their fields read lazily from the ranking that made them (an internal
    detail: the chunks of one result load together, in one read, when one is first used).
    """

    __slots__ = ("_chunk", "_score", "_scores", "_via", "_row", "_src", "_pos")
    _chunk: Chunk
    _score: float
    _scores: dict[str, float]
    _via: str
    _row: int | None
    _src: "_Fused | _Ranking | None"  # the result it was read from (None: the fields above)
    _pos: int

    def __init__(self, chunk: Chunk, score: float, scores: dict[str, float] | None = None, via: str = "") -> None:
        _set(self, "_chunk", chunk)
        _set(self, "_score", score)
        _set(self, "_scores", {} if scores is None else scores)
        _set(self, "_via", via)
        _set(self, "_row", None)
        _set(self, "_src", None)

    # -- fields: stored, or read from the ranking the hit belongs to --------------------
    @property
    def chunk(self) -> Chunk:
        src = self._src
        return self._chunk if src is None else src.chunk(self._pos)

    @property
    def chunk_id(self) -> str:
        src = self._src
        return self._chunk.chunk_id if src is None else src.chunk_id(self._pos)

    @property
    def score(self) -> float:
        src = self._src
        return self._score if src is None else src.score(self._pos)

    @property
    def scores(self) -> dict[str, float]:
        src = self._src
        return self._scores if src is None else src.scores(self._pos)

    @property
    def via(self) -> str:
        src = self._src
        return self._via if src is None else src.via(self._pos)

    @property
    def row(self) -> int | None:
        """The hit's row in its library snapshot (a retriever's hit), else None."""
        src = self._src
        return self._row if src is None else src.rows[self._pos]

    def with_score(self, score: float, **channel_scores: float) -> "Hit":
        merged = dict(self.scores)
        merged.update(channel_scores)
        return Hit(chunk=self.chunk, score=score, scores=merged, via=self.via)

    # -- a frozen value ----------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hit):
            return NotImplemented
        return (self.chunk, self.score, self.scores, self.via) == (other.chunk, other.score, other.scores, other.via)

    def __hash__(self) -> int:  # as a frozen dataclass's: unhashable while ``scores`` is a dict
        return hash((self.chunk, self.score, self.scores, self.via))

    def __repr__(self) -> str:
        return f"Hit(chunk={self.chunk!r}, score={self.score!r}, scores={self.scores!r}, via={self.via!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_hit, (self.chunk, self.score, self.scores, self.via, self.row))


_set = object.__setattr__
_new_hit = object.__new__


def _restore_hit(chunk: Chunk, score: float, scores: dict[str, float], via: str, row: int | None) -> Hit:
    hit = Hit(chunk, score, scores, via)
    _set(hit, "_row", row)
    return hit


def _sourced(src: "_Rows", pos: int) -> Hit:
    """The ``pos``-th hit of ``src``: two stores, every field read from ``src`` on use."""
    hit = _new_hit(Hit)
    _set(hit, "_src", src)
    _set(hit, "_pos", pos)
    return hit


class _Rows:
    """What the hits of one result share: their rows (best first) and the chunks of those
    rows, loaded together in one read (``load(rows)``) when one hit's chunk is first used."""

    __slots__ = ("_load", "rows", "_chunks")

    def __init__(self, load: Callable[[list[int]], list[Chunk]], rows: list[int]) -> None:
        self._load, self.rows = load, rows
        self._chunks: list[Chunk] | None = None

    def chunk(self, pos: int) -> Chunk:
        if self._chunks is None:
            self._chunks = self._load(self.rows)
        return self._chunks[pos]


class _Fused(_Rows):
    """A fused result: each hit's chunk id, score, scores and via known, its chunk lazy."""

    __slots__ = ("_ids", "_scores", "_dicts", "_vias")

    def __init__(self, load: Callable[[list[int]], list[Chunk]], rows: list[int], chunk_ids: list[str], scores: list[float],
                 channel_scores: list[dict[str, float]], vias: list[str] | None) -> None:
        _Rows.__init__(self, load, rows)
        self._ids, self._scores, self._dicts, self._vias = chunk_ids, scores, channel_scores, vias

    def chunk_id(self, pos: int) -> str:
        return self._ids[pos]

    def score(self, pos: int) -> float:
        return self._scores[pos]

    def scores(self, pos: int) -> dict[str, float]:
        return self._dicts[pos]

    def via(self, pos: int) -> str:
        return "" if self._vias is None else self._vias[pos]


class _Ranking(_Rows):
    """One channel's ranking fused alone (weighted RRF of one list): hit ``pos`` scores
    ``weight / (rrf_k + pos + 1)``; its scores dict is made on first use (then the same dict)."""

    __slots__ = ("_ids", "_channel", "_channel_scores", "_weight", "_rrf_k", "_dicts")

    def __init__(self, load: Callable[[list[int]], list[Chunk]], rows: list[int], ids: Any, channel: str,
                 channel_scores: list[float], weight: float, rrf_k: float) -> None:
        _Rows.__init__(self, load, rows)
        self._ids, self._channel, self._channel_scores = ids, channel, channel_scores
        self._weight, self._rrf_k = weight, rrf_k
        self._dicts: list[dict[str, float] | None] = [None] * len(rows)

    def chunk_id(self, pos: int) -> str:
        return cast("str", self._ids[self.rows[pos]])

    def score(self, pos: int) -> float:
        return self._weight / (self._rrf_k + pos + 1)

    def scores(self, pos: int) -> dict[str, float]:
        d = self._dicts[pos]
        if d is None:
            d = {"bm25": 0.0, "vector": 0.0}
            d[self._channel] = self._channel_scores[pos]
            d["fused"] = self.score(pos)
            self._dicts[pos] = d
        return d

    def via(self, pos: int) -> str:
        return ""


def lazy_hits(load: Callable[[list[int]], list[Chunk]], rows: list[int], chunk_ids: list[str], scores: list[float],
              channel_scores: list[dict[str, float]], vias: list[str] | None = None) -> list[Hit]:
    """Hits for ``rows`` whose chunks ``load(rows)`` reads together, on first access
    (``vias``: each hit's :attr:`Hit.via`, default none)."""
    src = _Fused(load, rows, chunk_ids, scores, channel_scores, vias)
    return [_sourced(src, i) for i in range(len(rows))]


def ranked_hits(load: Callable[[list[int]], list[Chunk]], rows: list[int], ids: Any, channel: str, channel_scores: list[float], *,
                weight: float, rrf_k: float) -> list[Hit]:
    """The hits of one channel's ranking (``rows`` best first), fused as weighted RRF of
    one list: hit ``i`` scores ``weight / (rrf_k + i + 1)``. ``ids[row]`` is a row's
    chunk id; chunks load together on first access (``load(rows)``). Creating a hit costs
    two attribute stores, so a search that returns ten hits does not pay for dicts and
    ids nobody reads."""
    src = _Ranking(load, rows, ids, channel, channel_scores, weight, rrf_k)
    return [_sourced(src, i) for i in range(len(rows))]


#: Columns of :func:`hits_to_frame`, in order (channel scores follow).
FRAME_COLUMNS = ("rank", "score", "doc_id", "title", "locator", "library_id", "chunk_id", "sensitivity",
                 "entity", "topic", "geography", "period", "language", "valid_as_of", "text")


def hits_to_frame(hits: Sequence[Any]) -> "Any":
    """A pandas DataFrame of ``hits`` (or snippet dicts) with provenance columns.

    Columns: rank, score, doc_id, title, locator, library_id, chunk_id, sensitivity, the
    metadata fields, text, then one column per channel score (bm25, vector, fused, …).

    Raises:
        MissingExtraError: pandas is not installed.
    """
    try:
        import pandas as pd
    except ImportError as exc:
        from ragspine_core.errors import MissingExtraError

        raise MissingExtraError("hits_to_frame (a DataFrame of results)", "notebook", "pandas") from exc
    rows = []
    for rank, h in enumerate(hits, start=1):
        if isinstance(h, (dict, Snippet)):  # a snippet (the record or a plain dict): read as a dict
            d = h.to_dict() if isinstance(h, Snippet) else h
            rec = {c: d.get(c, "") for c in FRAME_COLUMNS[2:]}
            scores = d.get("scores", {})
            score = scores.get("fused", 0.0)
        else:
            c = h.chunk
            rec = {name: getattr(c, name) for name in FRAME_COLUMNS[2:]}
            scores, score = h.scores, h.score
        rows.append({"rank": rank, "score": float(score), **rec, **{k: float(v) for k, v in scores.items()}})
    cols = list(FRAME_COLUMNS) + sorted({k for r in rows for k in r} - set(FRAME_COLUMNS))
    return pd.DataFrame(rows, columns=cols)


def sort_hits(hits: list[Hit]) -> list[Hit]:
    """Deterministic order: score descending, ties by ``chunk_id`` ascending."""
    return sorted(hits, key=lambda h: (-h.score, h.chunk.chunk_id))


def _freeze(value: Any) -> Any:
    """A read-only copy: a dict as a read-only mapping, a list as a tuple (recursively)."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    """What :func:`_freeze` took: plain dicts and lists again (what JSON writes)."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


#: The keys every snippet has, in the order :func:`to_snippet` writes them.
SNIPPET_KEYS = ("text", "doc_id", "title", "source_locator", "locator", "chunk_id", "library_id", "entity", "topic",
                "geography", "period", "language", "valid_as_of", "sensitivity", "span", "chunker", "heading",
                "metadata", "scores")
#: The keys a snippet has only sometimes: ``location``/``page`` (a converted file's chunk),
#: ``prompt_text`` (a parent text), ``via`` (reached through a summary-tree node or a
#: community); ``tier``/``confidence``/``needs_refinement`` (the agent seam's assessment).
SNIPPET_OPTIONAL_KEYS = ("location", "page", "prompt_text", "via", "tier", "confidence", "needs_refinement")


@dataclass(frozen=True, slots=True)
class Snippet:
    """One cited, RESTRICTED-free snippet, a frozen record: ``snippet.text``, ``.chunk_id``,
    ``.locator``, ``.scores`` … (see :func:`to_snippet` for every field).

    :meth:`to_dict` gives the plain dict (what ``json.dumps`` writes, the same keys in the
    same order as :func:`to_snippet`'s dict); the JSON edges (``ragspine query --json``,
    ``ragspine serve``, ``ragspine mcp``) write it. The containers are read-only
    (``metadata``, ``scores``, ``location``, ``confidence`` are read-only mappings, ``span``
    a tuple). An optional field that is absent (``location``, ``page``, ``prompt_text``,
    ``via``; ``tier``, ``confidence``, ``needs_refinement`` outside the agent seam) reads as
    None and is left out of :meth:`to_dict` (``present`` names the optional fields it has, in
    order). Reading it by key (``snippet["text"]``, ``snippet.get("via")``) is deprecated in
    favour of the attributes and warns (``DeprecationWarning``).
    """

    text: str
    doc_id: str
    title: str
    source_locator: str
    locator: str
    chunk_id: str
    library_id: str
    entity: str
    topic: str
    geography: str
    period: str
    language: str
    valid_as_of: str
    sensitivity: str
    span: tuple[int, int]
    chunker: str
    heading: str
    metadata: Mapping[str, Any]
    scores: Mapping[str, float]
    location: Mapping[str, Any] | None = None
    page: int | None = None
    prompt_text: str | None = None
    via: str | None = None
    tier: str | None = None
    confidence: Mapping[str, Any] | None = None
    needs_refinement: bool | None = None
    #: the optional fields this snippet has (set even when their value is None), in order
    present: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if is_restricted(self.sensitivity):
            raise ValueError(f"refusing to build a snippet for RESTRICTED chunk {self.chunk_id}")
        unknown = [k for k in self.present if k not in SNIPPET_OPTIONAL_KEYS]
        if unknown:
            raise ValueError(f"present names {unknown}, which are not optional snippet fields {SNIPPET_OPTIONAL_KEYS}")
        for name in ("span", "metadata", "scores", "location", "confidence"):
            object.__setattr__(self, name, _freeze(getattr(self, name)))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Snippet":
        """The snippet of a snippet dict (:func:`to_snippet`'s, or :meth:`to_dict`'s).

        Raises:
            ValueError: a key every snippet has is missing, or a key is not a snippet field
                (each named).
        """
        missing = [k for k in SNIPPET_KEYS if k not in data]
        unknown = [k for k in data if k not in SNIPPET_KEYS and k not in SNIPPET_OPTIONAL_KEYS]
        if missing or unknown:
            raise ValueError(f"not a snippet dict: missing {missing}, unknown {unknown}")
        present = tuple(k for k in data if k in SNIPPET_OPTIONAL_KEYS)
        return cls(**{k: data[k] for k in SNIPPET_KEYS}, **{k: data[k] for k in present}, present=present)

    def with_fields(self, **changes: Any) -> "Snippet":
        """A copy with ``changes`` (an optional field given here becomes present, after those
        it had)."""
        present = self.present + tuple(k for k in changes if k in SNIPPET_OPTIONAL_KEYS and k not in self.present)
        return replace(self, **changes, present=present)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict of every field it has: :func:`to_snippet`'s keys and order, plain
        dicts and lists (what the JSON edges write)."""
        return {k: _thaw(getattr(self, k)) for k in SNIPPET_KEYS + self.present}

    def __getitem__(self, key: str) -> Any:
        warnings.warn(f"reading a snippet by key is deprecated: use snippet.{key} (or snippet.to_dict()[{key!r}])",
                      DeprecationWarning, stacklevel=2)
        return self.to_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        warnings.warn(f"reading a snippet by key is deprecated: use snippet.{key}", DeprecationWarning, stacklevel=2)
        return self.to_dict().get(key, default)

    def __contains__(self, key: object) -> bool:
        warnings.warn(f"reading a snippet by key is deprecated: test snippet.{key} is not None, or key in snippet.present",
                      DeprecationWarning, stacklevel=2)
        return isinstance(key, str) and key in self.to_dict()

    #: not a sequence: ``for x in snippet`` is a mistake (iterate ``to_dict()``)
    __iter__ = None


def to_snippet(hit: Hit) -> dict[str, Any]:
    """The snippet dict an agent gets: text, provenance, metadata, sensitivity, scores (the
    agent seam returns it as a frozen :class:`Snippet`, ``Snippet.from_dict``).

    Callers must have dropped RESTRICTED hits already; this refuses them as a last guard.
    """
    c = hit.chunk
    if c.is_restricted:
        raise ValueError(f"refusing to build a snippet for RESTRICTED chunk {c.chunk_id}")
    snippet: dict[str, Any] = {
        "text": c.text,
        "doc_id": c.doc_id,
        "title": c.title,
        "source_locator": c.source_locator,
        "locator": c.locator,
        "chunk_id": c.chunk_id,
        "library_id": c.library_id,
        "entity": c.entity,
        "topic": c.topic,
        "geography": c.geography,
        "period": c.period,
        "language": c.language,
        "valid_as_of": c.valid_as_of,
        "sensitivity": c.sensitivity,
        "span": [c.start, c.end],
        "chunker": f"{c.chunker}@{c.chunker_version}",
        "heading": c.heading,
        "metadata": dict(c.extra),
        "scores": {
            "bm25": float(hit.scores.get("bm25", 0.0)),
            "vector": float(hit.scores.get("vector", 0.0)),
            "fused": float(hit.scores.get("fused", hit.score)),
            **{k: float(v) for k, v in hit.scores.items() if k not in ("bm25", "vector", "fused")},
        },
    }
    location = c.location
    if location:  # a converted file's chunk: the page/slide/sheet+cells/heading it quotes
        snippet["location"] = location
        if "page" in location:
            snippet["page"] = int(location["page"])
    if c.parent_text:
        snippet["prompt_text"] = c.parent_text
    if hit.via:  # reached through a summary-tree node: the node id (the citation stays this chunk's span)
        snippet["via"] = hit.via
    return snippet
