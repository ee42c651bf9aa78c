"""``GraphStore``: personalized PageRank over a weighted graph, and the in-process store.

Personalized PageRank (Page et al. 1999; Haveliwala 2002), as HippoRAG (Gutiérrez et al.,
NeurIPS 2024) uses it for multi-hop retrieval: the walk restarts at the seed nodes with
probability ``1 - damping``; the transition from a node follows its out-edges in
proportion to their weights; a node without out-edges (dangling) hands its mass back to
the seeds. This is the definition of ``networkx.pagerank(G, alpha=damping,
personalization=seeds)``, so :class:`~ragspine_core.graph.networkx_store.NetworkXGraphStore`
returns the same vector (a parity test checks it to 1e-6 on random graphs).
"""

from __future__ import annotations

import math
from typing import Mapping, Protocol, runtime_checkable, cast, TYPE_CHECKING

import numpy as np

from ragspine_core.errors import ConfigError

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

DEFAULT_DAMPING = 0.5
DEFAULT_TOL = 1e-8
DEFAULT_MAX_ITER = 100


@runtime_checkable
class GraphStore(Protocol):
    """A read-only weighted graph over node ids ``0..n_nodes-1`` that ranks by PPR."""

    @property
    def n_nodes(self) -> int: ...

    def neighbors(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """``(node ids, weights)`` of the out-edges of ``node`` (ids ascending)."""
        ...

    def personalized_pagerank(self, seeds: Mapping[int, float], *, damping: float = DEFAULT_DAMPING,
                              tol: float = DEFAULT_TOL, max_iter: int = DEFAULT_MAX_ITER) -> np.ndarray:
        """The stationary distribution (float64, sums to 1) of the walk restarting at ``seeds``."""
        ...


def check_ppr_args(seeds: Mapping[int, float], n_nodes: int, damping: float, max_iter: int) -> np.ndarray:
    """The personalization vector of ``seeds`` (normalised), or :class:`ConfigError`."""
    if not (0.0 <= damping < 1.0) or not math.isfinite(damping):
        raise ConfigError(f"damping must be in [0, 1), got {damping!r} (HippoRAG uses 0.5)")
    if max_iter <= 0:
        raise ConfigError(f"max_iter must be > 0, got {max_iter}")
    p = np.zeros(n_nodes, dtype=np.float64)
    for node, w in seeds.items():
        if not (0 <= int(node) < n_nodes):
            raise ConfigError(f"seed node {node} is outside the graph (0..{n_nodes - 1})")
        if not (math.isfinite(w) and w >= 0):
            raise ConfigError(f"seed weight of node {node} must be a finite number >= 0, got {w!r}")
        p[int(node)] += float(w)
    total = p.sum()
    if total <= 0:
        raise ConfigError("personalized PageRank needs at least one seed with a weight > 0")
    return cast("np.ndarray", p / total)


class InProcessGraphStore:
    """CSR arrays in memory (or memory-mapped), PPR by power iteration with numpy.

    Uses ``scipy.sparse`` for the matrix-vector product when it is importable (the same
    arithmetic, several times faster); numpy's ``bincount`` otherwise. Built once per
    graph and reused for every query (no per-query allocation beyond two vectors).
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray, *, use_scipy: bool | None = None) -> None:
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.indices = np.asarray(indices, dtype=np.int64)
        self.weights = np.asarray(weights, dtype=np.float64)
        n = self.indptr.shape[0] - 1
        if n < 0 or self.indices.shape != self.weights.shape or int(self.indptr[-1]) != self.indices.shape[0]:
            raise ConfigError("CSR arrays disagree: indptr[-1] must equal len(indices) == len(weights)")
        if self.weights.size and (not np.isfinite(self.weights).all() or (self.weights < 0).any()):
            raise ConfigError("edge weights must be finite and >= 0")
        self._n = n
        self._rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.indptr))
        out = np.bincount(self._rows, weights=self.weights, minlength=n) if n else np.zeros(0)
        self.dangling = out <= 0
        self._pdata = np.where(out[self._rows] > 0, self.weights / np.where(out > 0, out, 1.0)[self._rows], 0.0)
        self._pt = None
        if use_scipy is not False:
            try:
                import scipy.sparse as sp

                # P^T: x @ P == P^T @ x; built from the (row, col) pairs, duplicates summed
                self._pt = sp.csr_matrix((self._pdata, (self.indices, self._rows)), shape=(n, n))
            except ImportError:
                if use_scipy:
                    raise
        self.backend = "scipy" if self._pt is not None else "numpy"

    @classmethod
    def from_edges(cls, n_nodes: int, src: ArrayLike, dst: ArrayLike, weights: ArrayLike, *, undirected: bool = True, use_scipy: bool | None = None) -> "InProcessGraphStore":
        """A store from edge lists (both directions when ``undirected``); parallel edges stay separate entries."""
        indptr, indices, w = edges_to_csr(n_nodes, src, dst, weights, undirected=undirected)
        return cls(indptr, indices, w, use_scipy=use_scipy)

    @property
    def n_nodes(self) -> int:
        return cast("int", self._n)

    def neighbors(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = int(self.indptr[node]), int(self.indptr[node + 1])
        return self.indices[a:b], self.weights[a:b]

    def _step(self, x: np.ndarray) -> np.ndarray:
        if self._pt is not None:
            return cast("np.ndarray", self._pt @ x)
        return np.bincount(self.indices, weights=x[self._rows] * self._pdata, minlength=self._n)

    def personalized_pagerank(self, seeds: Mapping[int, float], *, damping: float = DEFAULT_DAMPING,
                              tol: float = DEFAULT_TOL, max_iter: int = DEFAULT_MAX_ITER) -> np.ndarray:
        """Power iteration from the seeds; stops when the L1 change is below ``n_nodes * tol``
        (networkx's criterion). Raises :class:`ConfigError` for bad arguments."""
        p = check_ppr_args(seeds, self._n, damping, max_iter)
        x = p.copy()
        dangling = self.dangling
        any_dangling = bool(dangling.any())
        for _ in range(max_iter):
            prev = x
            x = self._step(prev)
            if any_dangling:
                x += prev[dangling].sum() * p
            x = damping * x + (1.0 - damping) * p
            if np.abs(x - prev).sum() < self._n * tol:
                break
        return x


def edges_to_csr(n_nodes: int, src: ArrayLike, dst: ArrayLike, weights: ArrayLike, *, undirected: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR ``(indptr int64, indices int32, weights float32)`` of an edge list, neighbours ascending."""
    s = np.asarray(src, dtype=np.int64)
    d = np.asarray(dst, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    if undirected:
        s, d, w = np.concatenate([s, d]), np.concatenate([d, s]), np.concatenate([w, w])
    order = np.lexsort((d, s))
    s, d, w = s[order], d[order], w[order]
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(s, minlength=n_nodes), out=indptr[1:])
    return indptr, d.astype(np.int32), w.astype(np.float32)
