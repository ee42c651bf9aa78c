"""Per-library settings, resolved in one place for the Dagster assets and ``build_library``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ragspine_core.dense.embedding import EmbeddingSpec, auto_backend_for_chunk_shares, canonical_embedding_spec
from ragspine_core.lexical.bm25_format import DEFAULT_BM25_B, DEFAULT_BM25_K1, BM25Params
from ragspine_core.text.language import MIXED_LIBRARY_THRESHOLD

# the chunker settings of a library config live with LibraryConfig (it validates them);
# re-exported here, where they were first defined
from ragspine_index.library_config import CHUNKER_OPTION_KEYS, check_chunker_options, chunker_kwargs, chunker_options  # noqa: F401

if TYPE_CHECKING:
    from ragspine_index.steps.documents import DocumentSet


#: BM25 ``k1`` of a library whose dense channel is the English ONNX model (MiniLM) when
#: its ``_library.toml`` sets none: a flatter term-frequency curve is what the auto mode's
#: convex fusion with that dense channel wants. Tuned on SciFact *train* (0.7399 -> 0.7489,
#: +0.009, 95% CI +0.002 ... +0.016; k1 0.15-0.3 all gain), confirmed on hotpotqa-dev, never
#: used for tuning (+0.0087, CI +0.004 ... +0.013); SciFact test, measured once after the
#: choice: auto 0.7311 -> 0.7379. The ``bm25`` mode alone loses (SciFact train -0.010, test
#: -0.016; hotpotqa -0.003) and so does the forced ``hybrid`` RRF: docs/evaluation.md.
#: ``FUSION_BM25_K1 = DEFAULT_BM25_K1`` (and a ``bm25_index`` code-version bump) reverts it.
FUSION_BM25_K1 = 0.2
#: The embedding specs whose libraries get :data:`FUSION_BM25_K1`: the English ONNX model
#: alone, and the MiniLM + multilingual-e5 ensemble (k1 0.2 again best on SciFact train
#: for its three-way fusion: 0.7562 vs 0.7534 at 1.5).
FUSION_K1_EMBEDDINGS: tuple[str, ...] = ("onnx", "minilm+e5")


@dataclass(frozen=True, slots=True)
class LibrarySettings:
    """What one library is built with (:func:`resolve_library_settings`)."""

    #: The run-level spec with this library's backend (never ``auto``): the value the
    #: steps build their backend from (``StepContext.backend``).
    embedding_spec: EmbeddingSpec
    #: The glossary TOML that is published with the snapshot, or None (no glossary).
    glossary_path: Path | None
    #: The BM25 parameters of both lexical fields (see :func:`bm25_params_for`).
    bm25: BM25Params = BM25Params()

    @property
    def embedding(self) -> str:
        """The concrete backend name (never ``auto``): ``none``, ``onnx``, ``deterministic``…"""
        return self.embedding_spec.backend


#: Characters of a document per chunk, for :func:`chunk_language_shares` (about what the
#: default paragraph chunker puts in one chunk).
CHARS_PER_CHUNK = 1200


def chunk_language_shares(docs: DocumentSet) -> dict[str, float]:
    """Each language's share of the library's chunks, estimated before chunking: every
    document counts ``max(1, len(body) // CHARS_PER_CHUNK)`` chunks of its ``language``
    label. Every open document counts (not a sample of the first ones), so a library whose
    second language comes last in the walk is seen as mixed; RESTRICTED documents do not."""
    from ragspine_core.records import is_restricted

    # open documents only: a RESTRICTED document must not change how open text is scored
    shown = [d for d in docs.documents if not is_restricted(d.sensitivity)] or list(docs.documents)
    counts: dict[str, int] = {}
    for d in shown:
        lang = getattr(d, "language", "") or "en"
        counts[lang] = counts.get(lang, 0) + max(1, len(d.body) // CHARS_PER_CHUNK)
    total = sum(counts.values())
    return {k: v / total for k, v in sorted(counts.items())} if total else {}


def resolve_embedding_spec(spec: str, docs: DocumentSet) -> str:
    """``auto`` picks by the languages of the library's chunks
    (:func:`ragspine_core.dense.embedding.auto_backend_for_chunk_shares`); a named spec
    comes back with its alias resolved (``minilm`` -> ``onnx``)."""
    s = canonical_embedding_spec(spec)
    if s != "auto":
        return s
    return auto_backend_for_chunk_shares(chunk_language_shares(docs).get("zh", 0.0))


def resolve_library_settings(docs: DocumentSet, *, embedding: EmbeddingSpec | str = "auto",
                             glossary_path: Path | str | None = None) -> LibrarySettings:
    """The settings one library is built with.

    * embedding: the run-level :class:`~ragspine_core.dense.embedding.EmbeddingSpec`
      (resource, CLI flag or argument; a bare name is a spec of that backend alone) with
      its backend replaced by the library's own ``_library.toml`` ``embedding`` when that
      is not ``auto``; ``auto`` then resolves by the library's languages.
    * glossary: ``glossary_path`` when that file exists, else none.
    """
    run = EmbeddingSpec.coerce(embedding)
    own = (getattr(docs.config, "embedding", "auto") or "auto").strip().lower()
    spec = run.with_backend(resolve_embedding_spec(run.backend if own == "auto" else own, docs))
    glossary = Path(glossary_path) if glossary_path else None
    return LibrarySettings(spec, glossary if glossary is not None and glossary.is_file() else None,
                           bm25_params_for(docs.config, spec.backend, chunk_language_shares(docs)))


#: The embedding specs of a mixed library whose *English* rows get :data:`FUSION_BM25_K1`
#: (besides :data:`FUSION_K1_EMBEDDINGS`): the ensemble that ranks them with MiniLM and
#: e5, as in an English library.
FUSION_K1_MIXED_EMBEDDINGS: tuple[str, ...] = ("minilm+e5+multilingual",)


def bm25_params_for(config: Any, embedding_spec: str, language_shares: Mapping[str, float] | None = None) -> BM25Params:
    """BM25 ``k1``/``b``: the library's ``bm25_k1``/``bm25_b`` when set; otherwise ``b`` 0.75
    and ``k1`` :data:`FUSION_BM25_K1` for a library embedded with the ONNX (MiniLM, English)
    backend or the MiniLM + e5 ensemble (:data:`FUSION_K1_EMBEDDINGS`), 1.5 for every other
    (Chinese libraries and a library without vectors, searched by BM25 alone, keep 1.5).

    A library that holds both English and Chinese (each at least
    :data:`~ragspine_core.text.language.MIXED_LIBRARY_THRESHOLD` of ``language_shares``,
    the chunk shares) and sets no ``bm25_k1`` keeps each language's statistics apart
    (``BM25Params.k1_by_language``): its English rows are weighted as in a library of its
    English documents alone (``k1`` :data:`FUSION_BM25_K1` under the MiniLM + e5 + USE
    ensemble, :data:`FUSION_K1_MIXED_EMBEDDINGS`), its Chinese rows as in a Chinese one
    (``k1`` 1.5). On mixed-dev the short Chinese titles had pulled the shared ``avgdl``
    down and with it every English chunk's score (docs/evaluation.md)."""
    k1 = getattr(config, "bm25_k1", None)
    b = getattr(config, "bm25_b", None)
    if k1 is None:
        shares = language_shares or {}
        if min(shares.get("en", 0.0), shares.get("zh", 0.0)) >= MIXED_LIBRARY_THRESHOLD:
            en_k1 = float(FUSION_BM25_K1 if embedding_spec in FUSION_K1_EMBEDDINGS + FUSION_K1_MIXED_EMBEDDINGS
                          else DEFAULT_BM25_K1)
            # ``k1`` is the first (English) group's: rows of an unlisted language count with it
            return BM25Params(en_k1, float(DEFAULT_BM25_B if b is None else b),
                              k1_by_language=(("en", en_k1), ("zh", float(DEFAULT_BM25_K1))))
        k1 = FUSION_BM25_K1 if embedding_spec in FUSION_K1_EMBEDDINGS else DEFAULT_BM25_K1
    return BM25Params(float(k1), float(DEFAULT_BM25_B if b is None else b))
