"""Frozen records passed between stages (dicts only at the snippet edge)."""

from __future__ import annotations

from dataclasses import dataclass, field

RESTRICTED_SENSITIVITY = "RESTRICTED"
SENSITIVITIES = ("PUBLIC", "INTERNAL", "RESTRICTED")
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
        return str(self.sensitivity).upper() == RESTRICTED_SENSITIVITY

    @property
    def locator(self) -> str:
        """Citation locator: ``source_locator#chars=start-end``."""
        base = self.source_locator or self.doc_id
        return f"{base}#chars={self.start}-{self.end}"

    def metadata(self) -> dict[str, str]:
        out = {name: getattr(self, name) for name in METADATA_FIELDS}
        out.update(dict(self.extra))
        return out


@dataclass(frozen=True, slots=True)
class Hit:
    """A scored chunk. ``scores`` maps channel name (``bm25``, ``vector``, ``fused``…) to score."""

    chunk: Chunk
    score: float
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def chunk_id(self) -> str:
        return self.chunk.chunk_id

    def with_score(self, score: float, **channel_scores: float) -> "Hit":
        merged = dict(self.scores)
        merged.update(channel_scores)
        return Hit(chunk=self.chunk, score=score, scores=merged)


def sort_hits(hits: list[Hit]) -> list[Hit]:
    """Deterministic order: score descending, ties by ``chunk_id`` ascending."""
    return sorted(hits, key=lambda h: (-h.score, h.chunk.chunk_id))


def to_snippet(hit: Hit) -> dict:
    """The snippet dict of SPEC §12: text, provenance, metadata, sensitivity, scores.

    Callers must have dropped RESTRICTED hits already; this refuses them as a last guard.
    """
    c = hit.chunk
    if c.is_restricted:
        raise ValueError(f"refusing to build a snippet for RESTRICTED chunk {c.chunk_id}")
    snippet = {
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
    if c.parent_text:
        snippet["prompt_text"] = c.parent_text
    return snippet
