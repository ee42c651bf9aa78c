"""Exact cosine search: a pure chunked top-k over an embedding matrix, and a small in-process store.

:func:`top_k_cosine` is the query-side hot path: it scans a (possibly memory-mapped)
matrix of unit rows block by block, so memory stays bounded by ``chunk_size`` rows no
matter how large the index is, and it never loops over rows in Python.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from ragspine_core.errors import ConfigError, EmbeddingModelMismatchError, FilterError
from ragspine_core.runtime.kernels import query_kernels
from ragspine_core.dense.backend import l2_normalize

_EMPTY_ROWS = np.zeros(0, dtype=np.int64)
_EMPTY_SCORES = np.zeros(0, dtype=np.float32)
_NO_IDS = np.zeros(0, dtype=np.int64)


def _check_top_k(k: int, name: str = "k") -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ConfigError(f"{name} must be an integer >= 0, got {k!r}")


def _tie_inclusive_top(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best scores plus every score tied with the k-th best.

    Keeping the ties lets the caller break them on a secondary key exactly; plain
    ``argpartition`` would pick an arbitrary subset of a tied group.
    """
    n = scores.shape[0]
    if n <= k:
        return np.arange(n)
    threshold = np.partition(scores, n - k)[n - k]
    return np.flatnonzero(scores >= threshold)


def top_k_cosine(
    matrix: np.ndarray,
    query: np.ndarray,
    k: int,
    rows: np.ndarray | None = None,
    chunk_size: int = 65536,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` rows of ``matrix`` by dot product with ``query`` (cosine for unit rows).

    Parameters:
        matrix: ``(n, d)`` float array of L2-normalised rows; may be ``np.load(…, mmap_mode="r")``.
        query: ``(d,)`` L2-normalised query vector.
        k: how many rows to return (fewer when fewer are searched); ``0`` returns none.
        rows: optional unique row indices to restrict the search to (e.g. rows that
            survived a metadata filter); ascending order reads a memory map sequentially.
        chunk_size: rows scored per block; bounds the transient memory to about
            ``chunk_size * d`` floats when ``rows`` gathers, ``chunk_size`` scores otherwise.

    Returns:
        ``(row_indices, scores)``: int64 and float32 arrays sorted by score descending,
        ties by row index ascending. NaN scores (from a corrupt row) rank last.

    Raises:
        EmbeddingModelMismatchError: ``query`` and ``matrix`` have different dimensions.
        ConfigError: bad ``k``, ``chunk_size``, ``rows`` or a non-finite query.
    """
    _check_top_k(k)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ConfigError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    if matrix.ndim != 2:
        raise ConfigError(f"matrix must be 2-D (n, d), got shape {matrix.shape}")
    n, d = matrix.shape
    q = np.asarray(query)
    if q.ndim != 1:
        raise ConfigError(f"query must be a 1-D vector, got shape {q.shape}")
    if q.shape[0] != d:
        raise EmbeddingModelMismatchError(
            f"query vector has {q.shape[0]} dimensions but the index vectors have {d}; "
            "embed the query with the model the index was built with"
        )
    # Score in the matrix's precision (float32 BLAS for float32 indexes); half precision
    # is upcast per block since numpy has no fast float16 matmul.
    work_dtype = np.float64 if matrix.dtype == np.float64 else np.float32
    q = q.astype(work_dtype, copy=False)
    if not np.isfinite(q).all():
        raise ConfigError("query vector contains NaN or infinity; check the embedding backend")
    if rows is not None:
        rows = np.asarray(rows)
        if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
            raise ConfigError(f"rows must be a 1-D array of integer row indices, got dtype {rows.dtype} shape {rows.shape}")
        rows = rows.astype(np.int64, copy=False)
        if rows.size and (rows.min() < 0 or rows.max() >= n):
            raise ConfigError(f"rows must lie in [0, {n}), got values in [{rows.min()}, {rows.max()}]")
    total = n if rows is None else rows.shape[0]
    if k == 0 or total == 0:
        return _EMPTY_ROWS.copy(), _EMPTY_SCORES.copy()

    best_rows = _EMPTY_ROWS
    best_scores = _EMPTY_SCORES
    if isinstance(matrix, np.memmap):  # a plain view: memmap slicing runs Python code per slice
        matrix = matrix.view(np.ndarray)
    jit = query_kernels()
    for start in range(0, total, chunk_size):
        stop = min(start + chunk_size, total)
        if rows is None:
            block = matrix[start:stop]
            block_rows = None
        else:
            block_rows = rows[start:stop]
            block = matrix[block_rows]
        if block.dtype != work_dtype:
            block = block.astype(work_dtype)
        scores = block @ q
        found = False
        if jit is not None and scores.dtype == np.float32:  # the same top-k, compiled (a NaN: numpy below)
            m = scores.shape[0]
            threshold = np.partition(scores, m - k)[m - k] if m > k else np.float32(-np.inf)
            select = jit.scores_top_k_nogil if m >= jit.nogil_min_rows else jit.scores_top_k  # see query_jit
            cand_rows, cand_scores, found = select(scores, k, threshold,
                                                   _NO_IDS if block_rows is None else np.ascontiguousarray(block_rows),
                                                   block_rows is not None, start)
            if found and start == 0 and stop == total:  # one block: that is the answer
                return cand_rows, cand_scores
        if not found:
            cand_rows, cand_scores = _block_top_k(scores, k, start, block_rows)
        if best_rows.size:
            cand_rows = np.concatenate((best_rows, cand_rows))
            cand_scores = np.concatenate((best_scores, cand_scores))
        order = np.lexsort((cand_rows, -cand_scores))[:k]
        best_rows, best_scores = cand_rows[order], cand_scores[order]
    return best_rows.astype(np.int64, copy=False), best_scores


def _block_top_k(scores: np.ndarray, k: int, start: int, block_rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The candidates of one block for the top ``k`` (ties with the k-th included), in numpy."""
    if not np.isfinite(scores).all():  # only a corrupt row: nan_to_num's fixed cost skipped otherwise
        np.nan_to_num(scores, copy=False, nan=-np.inf)
    keep = _tie_inclusive_top(scores, k)
    cand_rows = keep + start if block_rows is None else block_rows[keep]
    return cand_rows, scores[keep].astype(np.float32, copy=False)


@runtime_checkable
class VectorStore(Protocol):
    """A mutable id → vector (+ metadata) store searched by cosine similarity."""

    def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray | Sequence[Sequence[float]],
        metadata: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Insert or replace vectors (and their metadata) by id."""
        ...

    def query(
        self,
        vector: np.ndarray | Sequence[float],
        top_k: int,
        where: Mapping[str, Any] | None = None,
    ) -> list[tuple[str, float]]:
        """Return up to ``top_k`` ``(id, cosine)`` pairs, best first, ties by id ascending."""
        ...

    def delete(self, ids: Iterable[str]) -> None:
        """Remove vectors by id (unknown ids are ignored)."""
        ...

    def count(self) -> int:
        """Number of stored vectors."""
        ...


def _matches(meta: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    for field, wanted in where.items():
        if field not in meta:
            return False
        value = meta[field]
        if isinstance(wanted, (list, tuple, set, frozenset)):
            if value not in wanted:
                return False
        elif value != wanted:
            return False
    return True


class InProcessVectorStore:
    """Exact brute-force cosine search over vectors held in one float32 matrix.

    Vectors are L2-normalised on upsert (a zero vector stays zero and scores 0).
    ``where`` is an exact-match metadata filter: ``{field: value}`` or
    ``{field: [allowed, values]}``; all fields must match and a row lacking a field
    never matches. Richer predicates belong to the hybrid retriever's filter stage.

    Parameters:
        dim: vector dimension; when ``None`` it is fixed by the first upsert.
    """

    def __init__(self, dim: int | None = None) -> None:
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ConfigError(f"dim must be a positive integer or None, got {dim!r}")
        self.dim = dim
        self._ids: list[str] = []
        self._row_of: dict[str, int] = {}
        self._meta: list[dict[str, Any]] = []
        self._matrix = np.zeros((0, dim or 0), dtype=np.float32)

    def __repr__(self) -> str:
        return f"InProcessVectorStore(dim={self.dim}, count={len(self._ids)})"

    def count(self) -> int:
        """Number of stored vectors."""
        return len(self._ids)

    def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray | Sequence[Sequence[float]],
        metadata: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Insert or replace ``vectors[i]`` (and ``metadata[i]``) under ``ids[i]``.

        A repeated id within one call keeps its last occurrence. Replacing an id without
        ``metadata`` clears its old metadata.

        Raises:
            ConfigError: lengths disagree, an id is not a non-empty string, or a vector
                is not finite.
            EmbeddingModelMismatchError: the vectors' dimension differs from the store's.
        """
        if isinstance(ids, str):
            raise ConfigError("ids must be a sequence of strings, not one string; wrap it in a list")
        id_list = list(ids)
        for i, item in enumerate(id_list):
            if not isinstance(item, str) or not item:
                raise ConfigError(f"ids[{i}] must be a non-empty string, got {item!r}")
        try:
            vecs = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"vectors must be a numeric (n, dim) array: {exc}") from exc
        if vecs.ndim == 1 and vecs.size == 0:
            vecs = vecs.reshape(0, self.dim or 0)
        if vecs.ndim != 2 or vecs.shape[0] != len(id_list):
            raise ConfigError(f"vectors must have shape ({len(id_list)}, dim) to match ids, got {vecs.shape}")
        metas = [{} for _ in id_list] if metadata is None else [dict(m) for m in metadata]
        if len(metas) != len(id_list):
            raise ConfigError(f"metadata has {len(metas)} entries for {len(id_list)} ids")
        if not id_list:
            return
        if self.dim is None:
            self.dim = vecs.shape[1]
            self._matrix = np.zeros((0, self.dim), dtype=np.float32)
        if vecs.shape[1] != self.dim:
            raise EmbeddingModelMismatchError(
                f"cannot store {vecs.shape[1]}-d vectors in a {self.dim}-d store; "
                "every vector must come from the same embedding model"
            )
        if not np.all(np.isfinite(vecs)):
            raise ConfigError("vectors contain NaN or infinity; check the embedding backend")
        unit = l2_normalize(vecs)

        new_positions: dict[str, int] = {}
        for pos, item in enumerate(id_list):
            row = self._row_of.get(item)
            if row is not None:
                self._matrix[row] = unit[pos]
                self._meta[row] = metas[pos]
            else:
                new_positions[item] = pos  # dict keeps the last duplicate
        if new_positions:
            fresh = list(new_positions)
            take = np.fromiter(new_positions.values(), dtype=np.int64, count=len(fresh))
            base = len(self._ids)
            self._matrix = np.concatenate((self._matrix, unit[take]), axis=0)
            for offset, item in enumerate(fresh):
                self._row_of[item] = base + offset
                self._ids.append(item)
                self._meta.append(metas[new_positions[item]])

    def delete(self, ids: Iterable[str]) -> None:
        """Remove the given ids; unknown ids are ignored."""
        if isinstance(ids, str):
            raise ConfigError("ids must be a sequence of strings, not one string; wrap it in a list")
        doomed = {self._row_of[i] for i in ids if i in self._row_of}
        if not doomed:
            return
        keep = np.ones(len(self._ids), dtype=bool)
        keep[list(doomed)] = False
        self._matrix = self._matrix[keep]
        self._ids = [item for item, kept in zip(self._ids, keep) if kept]
        self._meta = [meta for meta, kept in zip(self._meta, keep) if kept]
        self._row_of = {item: row for row, item in enumerate(self._ids)}

    def query(
        self,
        vector: np.ndarray | Sequence[float],
        top_k: int,
        where: Mapping[str, Any] | None = None,
    ) -> list[tuple[str, float]]:
        """Return up to ``top_k`` ``(id, cosine)`` pairs: score descending, ties by id ascending.

        Raises:
            FilterError: ``where`` is not a mapping of field names.
            EmbeddingModelMismatchError: the query has the wrong dimension.
        """
        _check_top_k(top_k, "top_k")
        rows = self._filtered_rows(where)
        if top_k == 0 or not self._ids or (rows is not None and rows.size == 0):
            return []
        q = np.asarray(vector, dtype=np.float32)
        if q.ndim != 1 or q.shape[0] != self.dim:
            raise EmbeddingModelMismatchError(
                f"query vector has shape {q.shape} but the store holds {self.dim}-d vectors; "
                "embed the query with the model the store was filled with"
            )
        if not np.all(np.isfinite(q)):
            raise ConfigError("query vector contains NaN or infinity; check the embedding backend")
        q = l2_normalize(q)
        candidates = np.arange(len(self._ids)) if rows is None else rows
        scores = self._matrix[candidates] @ q
        keep = _tie_inclusive_top(scores, top_k)
        ranked = sorted(
            ((self._ids[candidates[i]], float(scores[i])) for i in keep),
            key=lambda pair: (-pair[1], pair[0]),
        )
        return ranked[:top_k]

    def _filtered_rows(self, where: Mapping[str, Any] | None) -> np.ndarray | None:
        if where is None:
            return None
        if not isinstance(where, Mapping):
            raise FilterError(f"where must be a mapping of field -> value or list of values, got {type(where).__name__}")
        for field in where:
            if not isinstance(field, str) or not field:
                raise FilterError(f"where keys must be non-empty field names, got {field!r}")
        if not where:
            return None
        return np.fromiter(
            (row for row, meta in enumerate(self._meta) if _matches(meta, where)),
            dtype=np.int64,
        )
