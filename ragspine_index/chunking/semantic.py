"""Semantic chunker: cut where the meaning shifts, within the paragraph chunker's budget.

The idea is Kamradt's "semantic chunking" (2024): embed the sentences of a document and
place a breakpoint at the gaps whose similarity is unusually low for that document. The
gap similarity here is a block comparison, as in TextTiling (Hearst, 1997): the window of
``embed_window`` sentences ending at the gap against the window of ``embed_window``
sentences starting after it. A gap is a breakpoint when its cosine similarity is at or
below the ``breakpoint_percentile``-th percentile of the document's gap similarities.

The algorithm, on a body of text:

1. Units are sentences: paragraphs (blank lines), then ``SENTENCE_ENDERS``, and a sentence
   longer than ``max_chars`` is hard-cut into pieces — the same splitter as the paragraph
   and sentence-window chunkers.
2. Each gap between consecutive units gets a similarity (above); the windows are
   contiguous substrings of the body, embedded once per distinct text.
3. Units are packed in order into chunks of at most ``max_chars``: a chunk closes at every
   breakpoint (no overlap across a topic shift) and when the next unit would not fit;
   after such a size cut the next chunk starts at the earliest unit of the previous chunk
   inside its last ``overlap_chars`` that still leaves it within budget (else at the unit
   that did not fit), so packed chunks overlap as in the paragraph chunker.

Every chunk is ``body[start:end]`` (trimmed, never empty, at most ``max_chars``) and the
chunks cover every non-whitespace character. The spans depend on the embedder, so the
chunker's ``version`` names it: ``"1+<model id>"``. Without a configured embedding
backend the offline :class:`LexicalEmbedder` (hashed TF-IDF) is used.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar, Protocol, Sequence, runtime_checkable

import numpy as np

from ragspine_core.text.tokenize import tokenize

from ragspine_index.chunking.paragraph import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS, hard_cut, paragraph_spans, sentence_spans
from ragspine_index.chunking.spans import ChunkSpan, validate_budget

if TYPE_CHECKING:
    from ragspine_index.source_documents.model import SourceDocument

#: Gaps whose similarity is at or below this percentile of the document's gaps become
#: breakpoints. This and the window were chosen on SciFact *train* (BM25, lexical
#: boundaries; the sweep is in docs/evaluation.md, "Chunkers").
DEFAULT_BREAKPOINT_PERCENTILE = 10.0
#: Sentences on each side of a gap that are embedded together.
DEFAULT_EMBED_WINDOW = 2
#: The algorithm's version; the chunker's ``version`` appends the embedder's model id.
SEMANTIC_ALGORITHM_VERSION = "1"
#: Where boundary vectors come from: the library's embedding backend (falling back to
#: lexical without one), or always the offline lexical embedder (fast, no model).
BOUNDARY_EMBEDDERS: tuple[str, ...] = ("library", "lexical")


@runtime_checkable
class SentenceEmbedder(Protocol):
    """Embeds sentence windows for the semantic chunker; rows L2-normalised float32."""

    @property
    def model_id(self) -> str: ...

    def embed_sentences(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class LexicalEmbedder:
    """The offline fallback: hashed TF-IDF vectors of the spec tokens, IDF over the batch.

    Deterministic and dependency-free; it sees shared words, not meaning. Tokens come from
    :func:`ragspine_core.text.tokenize.tokenize` (words and CJK uni/bigrams), are hashed
    with CRC-32 into ``dim`` buckets, weighted ``(1 + ln tf) * ln(1 + N / df)`` with ``N``
    and ``df`` counted over the texts of one call (a document's windows), so words every
    sentence shares weigh little.
    """

    dim: int = 1024

    def __post_init__(self) -> None:
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 8:
            raise ValueError(f"LexicalEmbedder dim must be an integer >= 8, got {self.dim!r}")

    @property
    def model_id(self) -> str:
        return f"lexical-tfidf-v1-d{self.dim}"

    def embed_sentences(self, texts: Sequence[str]) -> np.ndarray:
        counts = [Counter(tokenize(t)) for t in texts]
        df: Counter[str] = Counter()
        for c in counts:
            df.update(c.keys())
        n = len(texts)
        buckets: dict[str, int] = {}
        out = np.zeros((n, self.dim), dtype=np.float64)
        for row, c in enumerate(counts):
            for token in sorted(c):  # a fixed order: float sums are order-dependent
                b = buckets.get(token)
                if b is None:
                    b = buckets[token] = zlib.crc32(token.encode("utf-8")) % self.dim
                out[row, b] += (1.0 + math.log(c[token])) * math.log(1.0 + n / df[token])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out.astype(np.float32)


def _check_percentile(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 100.0:
        raise ValueError(
            f"breakpoint_percentile must be a number in [0, 100] (0 = no semantic breakpoints), got {value!r}")


@dataclass(frozen=True, slots=True)
class SemanticChunker:
    """Sentences packed within ``max_chars``, cut at low-similarity gaps (module docstring).

    Parameters:
        max_chars, overlap_chars: the paragraph chunker's budget.
        breakpoint_percentile: gaps below this percentile (0–100) of the document's gap
            similarities are cut; 0 never cuts on meaning (pure sentence packing).
        embed_window: sentences on each side of a gap embedded together (>= 1).
        boundary_embedder: ``"library"`` (the library's embedding backend, bound by the
            chunks step) or ``"lexical"`` (always :class:`LexicalEmbedder`).
        embedder: a :class:`SentenceEmbedder`; not a library setting (the chunks step
            binds the library's embedding backend, :mod:`.semantic_embedding`).
    """

    max_chars: int = DEFAULT_CHUNK_CHARS
    overlap_chars: int = DEFAULT_OVERLAP_CHARS
    breakpoint_percentile: float = DEFAULT_BREAKPOINT_PERCENTILE
    embed_window: int = DEFAULT_EMBED_WINDOW
    boundary_embedder: str = "library"
    embedder: SentenceEmbedder = field(default_factory=LexicalEmbedder, metadata={"setting": False})

    name: ClassVar[str] = "semantic"

    def __post_init__(self) -> None:
        validate_budget(self.max_chars, self.overlap_chars)
        _check_percentile(self.breakpoint_percentile)
        w = self.embed_window
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise ValueError(f"embed_window must be an integer >= 1 (sentences on each side of a gap), got {w!r}")
        if self.boundary_embedder not in BOUNDARY_EMBEDDERS:
            raise ValueError(
                f"boundary_embedder must be one of {', '.join(BOUNDARY_EMBEDDERS)}, got {self.boundary_embedder!r}")
        if not isinstance(self.embedder, SentenceEmbedder):
            raise ValueError(f"embedder must have model_id and embed_sentences(texts), got {type(self.embedder).__name__}")

    @property
    def version(self) -> str:
        """``"<algorithm>+<embedder model id>"``: other vectors give other spans."""
        return f"{SEMANTIC_ALGORITHM_VERSION}+{self.embedder.model_id}"

    def with_embedder(self, embedder: SentenceEmbedder) -> SemanticChunker:
        """The same settings with another embedder."""
        return replace(self, embedder=embedder)

    def units(self, text: str) -> list[tuple[int, int]]:
        """Sentence ranges (hard-cut to ``max_chars``) of the whole body, in order."""
        out: list[tuple[int, int]] = []
        for p_start, p_end in paragraph_spans(text):
            for s_start, s_end in sentence_spans(text, p_start, p_end):
                out.extend(hard_cut(text, s_start, s_end, self.max_chars))
        return out

    def gap_similarities(self, text: str, units: Sequence[tuple[int, int]]) -> np.ndarray:
        """Cosine similarity across each gap ``g`` (between unit ``g`` and ``g + 1``)."""
        n = len(units)
        if n < 2:
            return np.zeros(0, dtype=np.float64)
        w = self.embed_window
        left = [text[units[max(0, g - w + 1)][0] : units[g][1]] for g in range(n - 1)]
        right = [text[units[g + 1][0] : units[min(n - 1, g + w)][1]] for g in range(n - 1)]
        distinct = list(dict.fromkeys(left + right))
        vectors = np.asarray(self.embedder.embed_sentences(distinct), dtype=np.float64)
        if vectors.shape[0] != len(distinct):
            raise ValueError(
                f"embedder {self.embedder.model_id} returned {vectors.shape[0]} vectors for {len(distinct)} texts")
        row = {t: i for i, t in enumerate(distinct)}
        a = vectors[[row[t] for t in left]]
        b = vectors[[row[t] for t in right]]
        return np.einsum("ij,ij->i", a, b)

    def breakpoints(self, similarities: np.ndarray) -> set[int]:
        """Gaps whose similarity is at or below the configured percentile.

        Gaps tied at the threshold all break (a lexical embedder gives many gaps with
        no shared word, similarity 0), unless every gap ties: a document whose gaps are
        all alike has no shift to cut at.
        """
        if similarities.size == 0 or self.breakpoint_percentile <= 0:
            return set()
        threshold = float(np.percentile(similarities, float(self.breakpoint_percentile)))
        if threshold >= float(similarities.max()):
            return set()
        return {int(g) for g in np.flatnonzero(similarities <= threshold)}

    def split(self, text: str) -> list[ChunkSpan]:
        """Chunk a raw body."""
        units = self.units(text)
        if not units:
            return []
        cuts = self.breakpoints(self.gap_similarities(text, units))
        ranges: list[tuple[int, int]] = []
        first = 0
        for i in range(1, len(units)):
            if i - 1 in cuts:
                ranges.append((units[first][0], units[i - 1][1]))
                first = i
            elif units[i][1] - units[first][0] > self.max_chars:
                ranges.append((units[first][0], units[i - 1][1]))
                first = self._overlap_unit(units, first, i)
        ranges.append((units[first][0], units[-1][1]))
        return [ChunkSpan(a, b, text[a:b]) for a, b in ranges]

    def _overlap_unit(self, units: Sequence[tuple[int, int]], first: int, nxt: int) -> int:
        """The unit the chunk after a size cut starts at (see the module docstring, step 3)."""
        prev_end = units[nxt - 1][1]
        for j in range(first + 1, nxt):
            if units[j][0] >= prev_end - self.overlap_chars and units[nxt][1] - units[j][0] <= self.max_chars:
                return j
        return nxt

    def chunk(self, doc: SourceDocument) -> list[ChunkSpan]:
        """Chunk ``doc.body``."""
        return self.split(doc.body)
