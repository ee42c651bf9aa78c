"""RAPTOR's clustering, the numerics of the ``summary_tree`` step (the step itself, with the
scrubbing, the cache and the Parquet output, is :mod:`ragspine_index.steps.summary_tree`).

Per level: partition a big level globally first (a mixture fitted on a seeded sample, then
every node assigned to its likeliest component, so the cost stays about linear in the
level's size); inside each part, reduce the vectors' dimension (PCA with fixed signs),
cluster with a diagonal-covariance Gaussian mixture whose number of components is chosen by
BIC, with soft membership (a node may join a second cluster whose posterior is at least
``soft_threshold``); split any cluster whose members exceed the summarizer's token budget
again, recursively, folding lopsided splits' one- and two-member parts into the nearest
sibling that still fits. Everything is seeded and deterministic (ties broken by index).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ragspine_core.errors import ConfigError

__all__ = ["NODE_VECTORS", "TreeParams", "approx_tokens", "cluster_level", "one_blas_thread"]


#: The ways a tree node gets its vector (:attr:`TreeParams.node_vectors`).
NODE_VECTORS = ("centroid", "summary")


@dataclass(frozen=True, slots=True)
class TreeParams:
    """How the tree is built (validated; part of the tree's content hash)."""

    #: Tokens of summarizer input per cluster (a bigger cluster is split again).
    token_budget: int = 3000
    #: Members per cluster at most (a bigger cluster is split again).
    max_members: int = 10
    #: Stop after a level with at most this many nodes.
    top_size: int = 6
    max_levels: int = 4
    #: Dimensions kept by the PCA before the mixture (RAPTOR uses 10 with UMAP).
    reduce_dim: int = 10
    #: Most mixture components tried per split (BIC picks among 1..max_k).
    max_k: int = 8
    #: A node joins a second cluster when its posterior there is at least this (RAPTOR: 0.1).
    soft_threshold: float = 0.1
    #: Clusters one node may belong to on one level (1 = hard clustering).
    max_memberships: int = 2
    #: BIC is computed on a seeded sample of at most this many points.
    bic_sample: int = 1500
    em_iters: int = 40
    #: EM restarts of the chosen mixture (the likeliest fit is kept). Measured on 5,000
    #: synthetic leaves: 4 restarts cost 2.3x the time of 1 for the same cluster purity
    #: (0.619 vs 0.616); an incremental re-build keeps unchanged clusters anyway.
    n_init: int = 1
    #: A set of more nodes than this is first partitioned globally (RAPTOR's global
    #: clustering): PCA and a mixture fitted on a seeded sample, every node assigned to
    #: its likeliest component in one vectorised pass; the local, budget-driven splits
    #: then run inside each part. Bounds the cost of a level to ~linear in its size.
    block_size: int = 1500
    #: Points the global stage's PCA and mixture are fitted on (a seeded sample).
    global_sample: int = 6000
    seed: int = 224
    #: The extractive summary's length budget (characters).
    summary_chars: int = 600
    #: How a node gets its vector: ``centroid`` (the mean of the vectors of the leaves it
    #: covers, each embedding model's block made a unit block again; no model runs) or
    #: ``summary`` (its summary text embedded by the chunks' backend). Embedding the
    #: summaries was ~27 % of a default ingest's CPU (issue 40); the step uses ``summary``
    #: for LLM summaries (abstractive text) and for the hashed-lexical tree.
    node_vectors: str = "centroid"

    def __post_init__(self) -> None:
        for name in ("token_budget", "max_members", "top_size", "max_levels", "reduce_dim", "max_k", "max_memberships",
                     "bic_sample", "em_iters", "n_init", "summary_chars", "block_size", "global_sample"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"summary tree {name} must be an integer >= 1, got {v!r}")
        if self.max_members < 2:
            raise ConfigError(f"summary tree max_members must be >= 2, got {self.max_members}")
        if self.block_size < 4 * self.max_members:
            raise ConfigError(f"summary tree block_size must be >= 4 * max_members ({4 * self.max_members}), "
                              f"got {self.block_size}")
        if not 0 < self.soft_threshold <= 1:
            raise ConfigError(f"summary tree soft_threshold must be in (0, 1], got {self.soft_threshold!r}")
        if self.node_vectors not in NODE_VECTORS:
            raise ConfigError(f"summary tree node_vectors must be one of {', '.join(NODE_VECTORS)}, got {self.node_vectors!r}")


def approx_tokens(text: str) -> int:
    """A tokenizer-free token count: CJK characters count one each, other words ~1.3 each."""
    cjk = sum(1 for ch in text if "\u3400" <= ch <= "\u9fff")
    words = len(text.split())
    return max(1, cjk + int(words * 1.3))


# ------------------------------------------------------------------------- clustering
def _reduce(x: np.ndarray, dim: int, seed: int = 0) -> np.ndarray:
    """PCA to ``dim`` dimensions with fixed component signs (deterministic), float64
    (:func:`_pca_basis`: exact for small inputs, seeded randomized for wide ones)."""
    x = np.asarray(x, dtype=np.float64)
    xc = x - x.mean(axis=0)
    n, d = xc.shape
    dim = max(1, min(dim, n - 1, d))
    return xc @ _pca_basis(xc, dim, seed)


def _log_gauss(x: np.ndarray, means: np.ndarray, var: np.ndarray, logw: np.ndarray) -> np.ndarray:
    inv = 1.0 / var
    quad = (x * x) @ inv.T - 2.0 * x @ (means * inv).T + np.sum(means * means * inv, axis=1)
    return -0.5 * (quad + np.sum(np.log(2.0 * np.pi * var), axis=1)) + logw


def _lse(a: np.ndarray) -> np.ndarray:
    m = a.max(axis=1, keepdims=True)
    return (m + np.log(np.exp(a - m).sum(axis=1, keepdims=True)))[:, 0]


def _init_centres(x: np.ndarray, k: int) -> np.ndarray:
    """Deterministic, stable starting means: the point nearest the centroid, then greedy
    farthest points (Gonzalez 1985). Unlike a sampled k-means++ start, a small change to
    one point rarely changes the picks, so an edited document re-clusters locally."""
    d2 = np.sum((x - x.mean(axis=0)) ** 2, axis=1)
    picks = [int(np.argmin(d2))]
    d2 = np.sum((x - x[picks[0]]) ** 2, axis=1)
    for _ in range(1, k):
        picks.append(int(np.argmax(d2)))
        d2 = np.minimum(d2, np.sum((x - x[picks[-1]]) ** 2, axis=1))
    return x[picks]


@dataclass(frozen=True, slots=True)
class _Gmm:
    means: np.ndarray
    var: np.ndarray
    logw: np.ndarray
    loglik: float

    def log_resp(self, x: np.ndarray) -> np.ndarray:
        lp = _log_gauss(x, self.means, self.var, self.logw)
        return lp - _lse(lp)[:, None]


def _fit_gmm(x: np.ndarray, k: int, seed: int, iters: int, init: _Gmm | None = None) -> _Gmm:
    """A diagonal-covariance Gaussian mixture fitted by EM (deterministic farthest-point start)."""
    n, d = x.shape
    reg = 1e-6 + 1e-3 * float(x.var(axis=0).mean())
    if init is None:
        means = _init_centres(x, k)
        var = np.tile(x.var(axis=0) + reg, (k, 1))
        logw = np.full(k, -np.log(k))
    else:
        means, var, logw = init.means, init.var, init.logw
    prev = -np.inf
    ll = -np.inf
    for _ in range(iters):
        lp = _log_gauss(x, means, var, logw)
        norm = _lse(lp)
        ll = float(norm.sum())
        resp = np.exp(lp - norm[:, None])
        nk = resp.sum(axis=0) + 1e-10
        logw = np.log(nk / n)
        means = (resp.T @ x) / nk[:, None]
        var = np.maximum((resp.T @ (x * x)) / nk[:, None] - means * means, 0.0) + reg
        if ll - prev < 1e-4 * max(1.0, abs(ll)):
            break
        prev = ll
    return _Gmm(means, var, logw, ll)


def _refine(x: np.ndarray, g: _Gmm, params: TreeParams, seed: int) -> _Gmm:
    """The best of ``n_init`` fits with the chosen number of components (seeded k-means++
    starts besides the farthest-point one): the likelier optimum is also the one a small
    edit of the library moves least."""
    k = g.means.shape[0]
    best = g
    for r in range(1, params.n_init):
        cand = _fit_gmm(x, k, seed + 104729 * r, params.em_iters,
                        init=_start(x, _kmeanspp(x, k, np.random.default_rng(seed + 104729 * r))))
        if cand.loglik > best.loglik + 1e-9:
            best = cand
    return best


def _kmeanspp(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    n = x.shape[0]
    picks = [int(rng.integers(n))]
    d2 = np.sum((x - x[picks[0]]) ** 2, axis=1)
    for _ in range(1, k):
        total = float(d2.sum())
        i = int(rng.integers(n)) if total <= 0 else int(np.searchsorted(np.cumsum(d2), rng.random() * total))
        picks.append(min(i, n - 1))
        d2 = np.minimum(d2, np.sum((x - x[picks[-1]]) ** 2, axis=1))
    return x[picks]


def _start(x: np.ndarray, means: np.ndarray) -> _Gmm:
    k = means.shape[0]
    reg = 1e-6 + 1e-3 * float(x.var(axis=0).mean())
    return _Gmm(means, np.tile(x.var(axis=0) + reg, (k, 1)), np.full(k, -np.log(k)), -np.inf)


def _bic(g: _Gmm, n: int) -> float:
    k, d = g.means.shape
    return -2.0 * g.loglik + (k * 2 * d + k - 1) * np.log(n)


def _best_gmm(x: np.ndarray, params: TreeParams, seed: int, k_min: int = 1) -> _Gmm:
    """The mixture with the lowest BIC among ``k_min``..``1.5·k_min`` components (at least
    one more, at most ``max_k``; on a seeded sample), refitted on all points."""
    n = x.shape[0]
    sample = x
    if n > params.bic_sample:
        idx = np.sort(np.random.default_rng(seed).choice(n, params.bic_sample, replace=False))
        sample = x[idx]
    best: tuple[float, int, _Gmm] | None = None
    k_hi = max(1, min(params.max_k, k_min + max(1, k_min // 2), sample.shape[0] // 2))
    for k in range(min(k_min, k_hi), k_hi + 1):
        g = _fit_gmm(sample, k, seed + k, params.em_iters)
        b = _bic(g, sample.shape[0])
        if best is None or b < best[0] - 1e-9:
            best = (b, k, g)
    assert best is not None
    g = best[2]
    if sample is not x:  # a few EM steps on every point from the sample's fit
        g = _fit_gmm(x, best[1], seed, 5, init=g)
    return g


def _merge_small(groups: list[tuple[np.ndarray, np.ndarray]], vecs: np.ndarray, tok: np.ndarray,
                 params: TreeParams) -> list[tuple[np.ndarray, np.ndarray]]:
    """Fold parts smaller than ``max_members // 3`` into their nearest sibling (centroid
    cosine) when the union still fits the budget: a mixture's lopsided split would
    otherwise leave many one- and two-member clusters (poor compression)."""
    small = max(2, params.max_members // 3)
    groups = list(groups)
    while True:
        order = sorted(range(len(groups)), key=lambda i: (groups[i][0].size, int(groups[i][0][0])))
        merged = False
        for i in order:
            if groups[i][0].size >= small or len(groups) < 3:
                break
            ci = vecs[groups[i][0]].mean(axis=0)
            best, best_sim = -1, -np.inf
            for j, (g, _) in enumerate(groups):
                union = np.union1d(g, groups[i][0])
                if j == i or union.size > params.max_members or int(tok[union].sum()) > params.token_budget:
                    continue
                cj = vecs[g].mean(axis=0)
                sim = float(ci @ cj) / (float(np.linalg.norm(ci) * np.linalg.norm(cj)) or 1.0)
                if sim > best_sim + 1e-12:
                    best, best_sim = j, sim
            if best < 0:
                continue
            a, b = groups[best], groups[i]
            members = np.concatenate([a[0], b[0]])
            flags = np.concatenate([a[1], b[1]])
            members, first = np.unique(members, return_index=True)  # a node in both keeps one membership
            groups[best] = (members, flags[first])
            groups.pop(i)
            merged = True
            break
        if not merged:
            return groups


def _kmeans_start(x: np.ndarray, k: int, seed: int, iters: int = 8) -> _Gmm:
    """A mixture start from seeded k-means++ and a few Lloyd steps (ties: lowest index)."""
    means = _kmeanspp(x, k, np.random.default_rng(seed))
    for _ in range(iters):
        d2 = (x * x).sum(axis=1)[:, None] - 2.0 * x @ means.T + (means * means).sum(axis=1)[None, :]
        lab = np.argmin(d2, axis=1)
        counts = np.bincount(lab, minlength=k)
        sums = np.zeros_like(means)
        np.add.at(sums, lab, x)
        nz = counts > 0
        means = means.copy()
        means[nz] = sums[nz] / counts[nz, None]
    return _start(x, means)


def _global_parts(vecs: np.ndarray, idx: np.ndarray, params: TreeParams, seed: int) -> list[np.ndarray]:
    """RAPTOR's global clustering, made linear: split ``idx`` (more than ``block_size``
    nodes) into parts of about ``block_size``.

    A PCA to ``reduce_dim`` and a diagonal mixture (BIC among ``k0``, ``1.5·k0`` and
    ``2·k0`` components, ``k0 = ceil(n / block_size)``; k-means++ start) are fitted on a
    seeded sample of at most ``global_sample`` nodes; every node then goes to its
    likeliest component (hard: a partition, so no node is summarized twice at this
    stage). Parts are in ascending member order; a degenerate fit halves along the
    first principal component.
    """
    n = idx.size
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(n, params.global_sample, replace=False)) if n > params.global_sample else np.arange(n)
    xs = vecs[idx[sample]]
    mean = xs.mean(axis=0)
    dim = max(1, min(params.reduce_dim, xs.shape[0] - 1, xs.shape[1]))
    basis = _pca_basis(xs - mean, dim, seed)
    xr = (xs - mean) @ basis
    k0 = -(-n // params.block_size)
    best: tuple[float, _Gmm] | None = None
    for k in sorted({k0, max(k0, (3 * k0) // 2), 2 * k0}):
        k = min(k, xr.shape[0] // 4)
        if k < 2:
            continue
        g = _fit_gmm(xr, k, seed + k, params.em_iters, init=_kmeans_start(xr, k, seed + k))
        b = _bic(g, xr.shape[0])
        if best is None or b < best[0] - 1e-9:
            best = (b, g)
    labels = np.empty(n, dtype=np.int64)
    full = None
    if best is not None:
        g = best[1]
        for lo in range(0, n, 16384):  # bounded memory: the posteriors of 16k nodes at a time
            xb = (vecs[idx[lo:lo + 16384]] - mean) @ basis
            labels[lo:lo + 16384] = np.argmax(_log_gauss(xb, g.means, g.var, g.logw), axis=1)
        parts = [np.flatnonzero(labels == c) for c in range(g.means.shape[0])]
        parts = [q for q in parts if q.size]
        if len(parts) >= 2:
            return [idx[q] for q in parts]
    full = (vecs[idx] - mean) @ basis[:, :1]
    order = np.lexsort((idx, full[:, 0]))
    return [np.sort(idx[order[: n // 2]]), np.sort(idx[order[n // 2:]])]


def _pca_basis(xc: np.ndarray, dim: int, seed: int) -> np.ndarray:
    """The top ``dim`` principal directions of centred ``xc`` (columns), fixed signs."""
    n, d = xc.shape
    if min(n, d) <= 4 * dim or n <= 2 * d:  # exact thin SVD: cheap while one side is small
        comps = np.linalg.svd(xc, full_matrices=False)[2][:dim].T
    elif d <= 512:  # many points, few dimensions: the d x d covariance's eigenvectors
        w, v = np.linalg.eigh(xc.T @ xc)
        comps = v[:, np.argsort(-w, kind="stable")[:dim]]
    else:
        omega = np.random.default_rng(seed).standard_normal((d, dim + 8))
        q = np.linalg.qr(xc @ omega)[0]
        for _ in range(2):
            q = np.linalg.qr(xc @ (xc.T @ q))[0]
        comps = np.linalg.svd(q.T @ xc, full_matrices=False)[2][:dim].T
    signs = np.sign(comps[np.argmax(np.abs(comps), axis=0), np.arange(comps.shape[1])])
    signs[signs == 0] = 1.0
    return comps * signs


def cluster_level(vectors: np.ndarray, tokens: Sequence[int], params: TreeParams, *, seed: int | None = None) -> list[tuple[int, ...]]:
    """Clusters of one level's nodes (member indices, ascending; clusters sorted).

    A set of more than ``block_size`` nodes is first partitioned globally
    (:func:`_global_parts`: a mixture fitted on a seeded sample, every node assigned in
    one vectorised pass). A set within the token budget and ``max_members`` is one
    cluster; a bigger one is
    split by the BIC-chosen Gaussian mixture over its PCA-reduced vectors (at least two
    components), each node joining its most likely component and, softly, a second one
    whose posterior is >= ``soft_threshold`` (at most ``max_memberships`` clusters per
    node on a level); each part is split again while it is too big. Deterministic for a
    given ``seed`` (default ``params.seed``).
    """
    vecs = np.asarray(vectors, dtype=np.float64)
    tok = np.asarray(tokens, dtype=np.int64)
    n = vecs.shape[0]
    if n == 0:
        return []
    base_seed = params.seed if seed is None else seed
    memberships = np.ones(n, dtype=np.int64)
    out: list[tuple[int, ...]] = []
    # an explicit stack (not recursion): deep splits of a huge level cannot overflow
    stack: list[tuple[np.ndarray, np.ndarray, int]] = [(np.arange(n), np.zeros(n, dtype=bool), 0)]
    while stack:
        idx, soft, depth = stack.pop()
        if int(tok[idx].sum()) <= params.token_budget and idx.size <= params.max_members:
            out.append(tuple(sorted(int(i) for i in idx)))
            continue
        if idx.size <= 2:
            out.extend((int(i),) for i in sorted(idx.tolist()))
            continue
        split_seed = base_seed + 7919 * depth + int(idx[0])
        if idx.size > params.block_size:  # global stage: parts of about block_size, then local splits
            for part in reversed(_global_parts(vecs, idx, params, split_seed)):
                stack.append((part, soft[np.searchsorted(idx, part)], depth + 1))
            continue
        # few points cannot support many dimensions: the mixture would overfit and over-split
        x = _reduce(vecs[idx], min(params.reduce_dim, max(2, idx.size // 6)), split_seed)
        # BIC chooses among partitions that can fit the budget: from the fewest parts
        # that could hold the tokens (and members) up to half as many again
        need = max(2, -(-int(tok[idx].sum()) // params.token_budget), -(-idx.size // params.max_members))
        g = _best_gmm(x, params, split_seed, k_min=need)
        if g.means.shape[0] < 2:
            g = _fit_gmm(x, 2, split_seed, params.em_iters)
        g = _refine(x, g, params, split_seed)
        log_resp = g.log_resp(x)
        hard = np.argmax(log_resp, axis=1)
        parts = [np.flatnonzero(hard == c) for c in range(g.means.shape[0])]
        parts = [p for p in parts if p.size]
        if len(parts) < 2:  # a degenerate fit: halve along the first principal component
            order = np.lexsort((idx, x[:, 0]))
            parts = [np.sort(order[: idx.size // 2]), np.sort(order[idx.size // 2:])]
            groups = [(idx[p], soft[p]) for p in parts]
        else:
            k = g.means.shape[0]
            comp_of = np.full(k, -1, dtype=np.int64)
            used = [c for c in range(k) if np.any(hard == c)]
            comp_of[used] = np.arange(len(used))
            # soft membership, vectorised: a node's second likeliest component, when its
            # posterior reaches soft_threshold (idx holds each node once, so this equals
            # the node-by-node rule)
            resp = np.exp(log_resp)
            resp[np.arange(idx.size), hard] = -1.0
            second = np.argmax(resp, axis=1)
            join = ((resp[np.arange(idx.size), second] >= params.soft_threshold) & ~soft
                    & (memberships[idx] < params.max_memberships) & (comp_of[second] >= 0))
            memberships[idx[join]] += 1
            extra: list[list[int]] = [[] for _ in parts]
            for j in np.flatnonzero(join).tolist():
                extra[int(comp_of[second[j]])].append(j)
            groups = []
            for p, e in zip(parts, extra):
                members = np.concatenate([p, np.asarray(e, dtype=np.int64)]) if e else p
                flags = np.concatenate([soft[p], np.ones(len(e), dtype=bool)]) if e else soft[p]
                if members.size >= idx.size:  # soft members must not stop the split from shrinking
                    members, flags = p, soft[p]
                order = np.argsort(idx[members], kind="stable")
                groups.append((idx[members][order], flags[order]))
        groups = _merge_small(groups, vecs, tok, params)
        for g_idx, g_soft in reversed(groups):
            stack.append((g_idx, g_soft, depth + 1))
    return sorted(set(out))


def one_blas_thread() -> contextlib.AbstractContextManager:
    """BLAS limited to one thread while a level is clustered (``threadpoolctl``, in the
    ``pipeline`` extra; a no-op without it). Clustering is thousands of small matrix
    products, where OpenBLAS's worker threads spin more than they compute: 20,000
    synthetic leaves took 223 s wall / 94 s CPU with the default threads and 41 s / 14 s
    with one (2 shared cores)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")
