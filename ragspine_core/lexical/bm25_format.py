"""BM25's parameters and the arrays of one index, as both sides see them (the files' layout is
:mod:`ragspine_core.schema`; the weighting is in :mod:`ragspine_core.lexical.bm25`'s docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragspine_core import schema
from ragspine_core.errors import ConfigError


DEFAULT_BM25_K1 = 1.5


DEFAULT_BM25_B = 0.75


@dataclass(frozen=True, slots=True)
class BM25Params:
    """BM25 free parameters, validated on construction."""

    k1: float = DEFAULT_BM25_K1
    b: float = DEFAULT_BM25_B
    #: ``(language, k1)`` pairs: when given, each row is weighted with the statistics
    #: (``N``, ``df``, ``avgdl``) of the rows of its own language and that language's
    #: ``k1`` (a row of another language counts with the first); empty: one set for all.
    k1_by_language: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.k1) and self.k1 >= 0):
            raise ConfigError(f"BM25 k1 must be a finite number >= 0, got {self.k1!r}")
        for language, k1 in self.k1_by_language:
            if not (isinstance(k1, (int, float)) and math.isfinite(k1) and k1 >= 0):
                raise ConfigError(f"BM25 k1 of language {language!r} must be a finite number >= 0, got {k1!r}")
        if not (math.isfinite(self.b) and 0.0 <= self.b <= 1.0):
            raise ConfigError(f"BM25 b must be within [0, 1], got {self.b!r}")


@dataclass(frozen=True, slots=True)
class BM25Arrays:
    """The in-memory form of a BM25 index (what is written to / read from disk)."""

    tokens: list[str]  # sorted vocabulary; token id = position
    indptr: np.ndarray  # int64[V+1]
    postings: np.ndarray  # int32[nnz]
    impacts: np.ndarray  # float32[nnz]
    max_impact: np.ndarray  # float32[V]
    doc_lengths: np.ndarray  # int32[n_rows]
    params: BM25Params
    avgdl: float

    @property
    def n_rows(self) -> int:
        return int(self.doc_lengths.shape[0])


#: Weight of the document-level BM25 field blended into each chunk's lexical score (the
#: ``bm25_blend`` artifact the writer builds and the retriever's default ``doc_weight``).
#: Tuned on SciFact *train* (see docs/evaluation.md); 0 disables the document field.
DEFAULT_DOC_WEIGHT = 2.0


def idf(df: np.ndarray, n_rows: int) -> np.ndarray:
    """Lucene's non-negative BM25 IDF, float64."""
    df = df.astype(np.float64)
    return np.log1p((n_rows - df + 0.5) / (df + 0.5))


def check_bm25_arrays(directory: Path, arrays: BM25Arrays) -> None:
    """Bound-check a loaded index once (``ragspine_core.integrity``): offsets monotone and
    spanning the postings, every posting a row below ``n_rows``, the expected dtypes, so
    neither the numpy paths nor the compiled kernel can index outside an array.

    Raises:
        IndexCorruptError: one line naming the damaged file.
    """
    from ragspine_core.integrity import check_array, check_csr

    check_csr(directory, schema.BM25_INDPTR, arrays.indptr, schema.BM25_POSTINGS, arrays.postings,
              n_ptr=len(arrays.tokens) + 1, upper=arrays.n_rows)
    check_array(directory, schema.BM25_IMPACTS, arrays.impacts, kind="f", length=arrays.postings.shape[0])
    check_array(directory, schema.BM25_MAX_IMPACT, arrays.max_impact, kind="f", length=len(arrays.tokens))
