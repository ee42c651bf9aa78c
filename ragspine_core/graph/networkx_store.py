"""A :class:`~ragspine_core.graph.store.GraphStore` over a ``networkx`` graph (extra ``[graph]``).

For interoperability (load a graph into networkx tooling, or rank an existing networkx
graph): PPR is ``networkx.pagerank(G, alpha=damping, personalization=seeds)``, the same
definition as :class:`~ragspine_core.graph.store.InProcessGraphStore`.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ragspine_core.errors import MissingExtraError
from ragspine_core.graph.store import DEFAULT_DAMPING, DEFAULT_MAX_ITER, DEFAULT_TOL, check_ppr_args


def _nx() -> Any:
    try:
        import networkx
    except ImportError as exc:
        raise MissingExtraError("the networkx graph store", "graph", "networkx") from exc
    return networkx


class NetworkXGraphStore:
    """Wraps a ``networkx.DiGraph`` whose nodes are ``0..n-1`` (parallel edges summed)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    @classmethod
    def from_csr(cls, indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray) -> "NetworkXGraphStore":
        nx = _nx()
        n = int(len(indptr) - 1)
        g = nx.DiGraph()
        g.add_nodes_from(range(n))
        for u in range(n):
            for j in range(int(indptr[u]), int(indptr[u + 1])):
                v, w = int(indices[j]), float(weights[j])
                if g.has_edge(u, v):
                    g[u][v]["weight"] += w
                else:
                    g.add_edge(u, v, weight=w)
        return cls(g)

    @property
    def n_nodes(self) -> int:
        return int(self.graph.number_of_nodes())

    def neighbors(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        items = sorted((int(v), float(d.get("weight", 1.0))) for v, d in self.graph[node].items())
        return np.asarray([v for v, _ in items], dtype=np.int64), np.asarray([w for _, w in items], dtype=np.float64)

    def personalized_pagerank(self, seeds: Mapping[int, float], *, damping: float = DEFAULT_DAMPING,
                              tol: float = DEFAULT_TOL, max_iter: int = DEFAULT_MAX_ITER) -> np.ndarray:
        nx = _nx()
        p = check_ppr_args(seeds, self.n_nodes, damping, max_iter)
        pers = {i: float(v) for i, v in enumerate(p) if v > 0}
        ranks = nx.pagerank(self.graph, alpha=damping, personalization=pers, tol=tol, max_iter=max_iter, weight="weight")
        out = np.zeros(self.n_nodes, dtype=np.float64)
        for node, v in ranks.items():
            out[int(node)] = v
        return out
