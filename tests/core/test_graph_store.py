"""GraphStore: the in-process PPR (numpy and scipy paths) equals networkx's pagerank."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.graph.store import InProcessGraphStore, edges_to_csr

nx = pytest.importorskip("networkx", reason="the [graph] extra provides the networkx adapter")
from ragspine_core.graph.networkx_store import NetworkXGraphStore  # noqa: E402


def random_graph(seed: int, n: int, m: int):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    keep = src != dst
    w = rng.uniform(0.1, 3.0, m)
    return src[keep], dst[keep], w[keep]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("undirected", [True, False])
def test_ppr_matches_networkx_on_random_graphs(seed, undirected):
    n = 60 + 10 * seed
    src, dst, w = random_graph(seed, n, 4 * n)  # directed ones have dangling nodes
    indptr, indices, weights = edges_to_csr(n, src, dst, w, undirected=undirected)
    rng = np.random.default_rng(100 + seed)
    seeds = {int(s): float(rng.uniform(0.5, 2.0)) for s in rng.choice(n, 4, replace=False)}
    ref = NetworkXGraphStore.from_csr(indptr, indices, weights).personalized_pagerank(seeds, damping=0.5, tol=1e-12, max_iter=500)
    for use_scipy in (False, True):
        got = InProcessGraphStore(indptr, indices, weights, use_scipy=use_scipy).personalized_pagerank(
            seeds, damping=0.5, tol=1e-12, max_iter=500)
        assert np.abs(got - ref).max() < 1e-6
        assert got.sum() == pytest.approx(1.0, abs=1e-9)
    # seeds carry the most mass in a restart walk; a node nobody reaches gets none
    assert ref[max(seeds, key=seeds.get)] > np.median(ref)


def test_default_damping_parity_and_neighbors():
    src, dst, w = random_graph(7, 40, 120)
    indptr, indices, weights = edges_to_csr(40, src, dst, w)
    a = InProcessGraphStore(indptr, indices, weights)
    b = NetworkXGraphStore.from_csr(indptr, indices, weights)
    seeds = {0: 1.0, 5: 3.0}
    assert np.abs(a.personalized_pagerank(seeds, tol=1e-12) - b.personalized_pagerank(seeds, tol=1e-12)).max() < 1e-6
    ids, ws = a.neighbors(0)
    nb_ids, nb_w = b.neighbors(0)
    assert list(np.unique(ids)) == list(nb_ids)
    assert np.all(np.diff(ids) >= 0)


def test_bad_arguments_are_config_errors():
    store = InProcessGraphStore.from_edges(3, [0, 1], [1, 2], [1.0, 1.0])
    with pytest.raises(ConfigError, match="at least one seed"):
        store.personalized_pagerank({})
    with pytest.raises(ConfigError, match="damping"):
        store.personalized_pagerank({0: 1.0}, damping=1.0)
    with pytest.raises(ConfigError, match="outside the graph"):
        store.personalized_pagerank({7: 1.0})
    with pytest.raises(ConfigError, match="finite"):
        InProcessGraphStore.from_edges(2, [0], [1], [float("nan")])
