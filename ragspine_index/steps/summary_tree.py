"""Stage ``summary_tree``: a RAPTOR tree of cluster summaries over the non-RESTRICTED chunks.

RAPTOR (Sarthi et al., "RAPTOR: Recursive Abstractive Processing for Tree-Organized
Retrieval", ICLR 2024): embed the leaves; per level, partition a big level globally first
(a mixture fitted on a seeded sample, then every node assigned to its likeliest
component: the cost stays about linear in the level's size); then, inside each part, reduce the vectors' dimension,
cluster them with a Gaussian mixture whose number of components is chosen by BIC, with
soft membership (a node may join a second cluster whose posterior is at least
``soft_threshold``); split any cluster whose members exceed the summarizer's token budget
again (the same way, recursively; lopsided splits fold their one- and two-member parts
into the nearest sibling that still fits); summarize each cluster; embed the summaries
with the chunks' embedding backend; repeat on the summaries until a level is small.
Re-builds are incremental: clusters of the published tree whose members are unchanged are
kept (:func:`build_summary_tree`, ``previous``).

Everything is seeded and deterministic: PCA with fixed signs instead of UMAP (UMAP is
not installed and is not bit-stable across machines), a diagonal-covariance mixture
fitted by EM from a deterministic farthest-point start, ties broken by index. Node ids are content
hashes of (summarizer, level, member ids).

A library without embeddings (BM25 only) gets a tree on the deterministic hashed-lexical
vectors of :class:`ragspine_core.dense.deterministic.DeterministicEmbeddingBackend`
(recorded as the tree's ``vector_kind``; the leaves' vectors are stored with the tree so
the query side ranks leaves and nodes in the same space).

RESTRICTED chunks are never leaves: their text never reaches a summarizer, a node or an
LLM request. Sentences of RESTRICTED chunks that occur in no open chunk are removed from
any open text before summarizing (so a summary cannot even repeat a shared sentence's
RESTRICTED twin), and the blocking check ``no_restricted_text_in_nodes`` verifies no node
text contains one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ragspine_core import schema
from ragspine_core.errors import ConfigError
from ragspine_core.records import is_restricted

from ragspine_index.artifacts import LibraryPaths, sha256_json, write_once
from ragspine_index.chunk_store import ChunkStore, count_active_chunks
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.chunk_embeddings import EmbeddingCache, EmbeddingRef, text_hash
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.library_settings import resolve_library_settings
from ragspine_index.step_api import CheckSpec, StepContext, StepResult, outcome
from ragspine_index.fingerprints import contains_fingerprint, norm_sentence, tree_fingerprints
from ragspine_index.raptor.summarizers import Summarizer, SummaryCache, make_summarizer, split_sentences, text_sha

__all__ = ["LEXICAL_VECTOR_DIM", "SUMMARY_TREE_CHECKS", "SUMMARY_TREE_VERSION", "Leaves", "SummaryTreeRef", "TreeParams",
           "build_summary_tree", "cluster_level", "restricted_fingerprints", "summary_tree_step", "verify_summary_tree"]

#: The artifact's format (``tree.json`` ``version``; what ``ragspine_query.tree`` reads).
SUMMARY_TREE_VERSION = "1"
#: Part of every tree's content hash: bump when the same input must build a different tree
#: (2: global + local clustering, one EM start).
SUMMARY_TREE_BUILD = "2"
#: Dimension of the hashed-lexical vectors of a tree over a BM25-only library.
LEXICAL_VECTOR_DIM = 256


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


def _warm_clusters(previous: Sequence[tuple[str, ...]], ids: Sequence[str], vecs: np.ndarray, tokens: Sequence[int],
                   params: TreeParams, level_no: int) -> list[tuple[int, ...]]:
    """Previous clusters whose members all still exist, plus fresh clusters of the rest."""
    pos = {x: i for i, x in enumerate(ids)}
    kept = sorted({tuple(sorted(pos[m] for m in members)) for members in previous
                   if members and all(m in pos for m in members)})
    if not kept:
        return cluster_level(vecs, tokens, params, seed=params.seed + level_no)
    covered = {i for c in kept for i in c}
    rest = np.asarray([i for i in range(len(ids)) if i not in covered], dtype=np.int64)
    fresh = cluster_level(np.asarray(vecs)[rest], [tokens[i] for i in rest], params, seed=params.seed + level_no) if rest.size else []
    return sorted(set(kept) | {tuple(sorted(int(rest[j]) for j in c)) for c in fresh})


def previous_clusters(tree_dir: Path, *, summarizer_id: str, vector_kind: str, params: TreeParams) -> dict[int, list[tuple[str, ...]]]:
    """Level -> member ids of each cluster of a published tree built with the same settings ({} otherwise)."""
    try:
        meta = json.loads((tree_dir / schema.TREE_META).read_text(encoding="utf-8"))
        if (meta.get("version") != SUMMARY_TREE_VERSION or meta.get("build_version") != SUMMARY_TREE_BUILD
                or meta.get("summarizer_id") != summarizer_id
                or meta.get("vector_kind") != vector_kind or meta.get("params") != asdict(params)):
            return {}
        table = pq.read_table(tree_dir / schema.TREE_NODES, columns=["level", "member_ids"])
    except (OSError, ValueError, KeyError, pa.ArrowInvalid):
        return {}
    out: dict[int, list[tuple[str, ...]]] = {}
    for level, members in zip(table.column("level").to_pylist(), table.column("member_ids").to_pylist()):
        out.setdefault(int(level), []).append(tuple(members))
    return out


# ---------------------------------------------------------------------------- leaves
@dataclass(frozen=True, slots=True)
class Leaves:
    """The non-RESTRICTED chunks a tree is built over, in snapshot row order."""

    rows: np.ndarray  # int32 chunk rows, ascending
    chunk_ids: tuple[str, ...]
    doc_ids: tuple[str, ...]
    texts: tuple[str, ...]


def restricted_fingerprints(restricted_texts: Sequence[str], open_texts: Sequence[str]) -> list[str]:
    """Texts that must never appear in a node: each RESTRICTED chunk's sentences
    (normalised: NFKC, case folded, white space collapsed, closing punctuation dropped,
    >= 16 characters) that occur nowhere in open text, not even inside an open sentence
    (:func:`~.fingerprints.tree_fingerprints`: shared or quoted text is not RESTRICTED
    information, and the check must not turn open wording into a publish signal)."""
    return tree_fingerprints(restricted_texts, open_texts)


def _scrub(text: str, blocked: set[str]) -> str:
    """``text`` without its sentences that are RESTRICTED fingerprints (usually unchanged)."""
    if not blocked:
        return text
    parts = split_sentences(text)
    kept = [s for s in parts if norm_sentence(s) not in blocked]
    return text if len(kept) == len(parts) else " ".join(kept)


# ------------------------------------------------------------------------------ build
@dataclass(frozen=True, slots=True)
class SummaryTreeRef:
    """A built tree (content-addressed under ``work/summary_tree``) and what it took."""

    directory: str | None
    content_hash: str
    summarizer_id: str
    vector_kind: str
    n_leaves: int
    nodes_per_level: tuple[int, ...]
    mean_cluster_size: float
    compression_ratio: float
    llm_calls: int
    llm_cached: int
    seconds: float
    #: The top level, for the UI preview: (node_id, covered leaves, text excerpt).
    top_level: tuple[tuple[str, int, str], ...] = ()
    note: str = ""
    restricted_skipped: int = 0
    reused: bool = False

    @property
    def levels(self) -> int:
        return len(self.nodes_per_level)

    def artifact_paths(self) -> dict[str, Path]:
        """Artifact name (``schema.ARTIFACT_REGISTRY``) -> directory (none when no tree was built)."""
        return {"summary_tree": Path(self.directory)} if self.directory else {}


@dataclass
class _Level:
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    children: list[tuple[int, ...]] = field(default_factory=list)  # leaf positions (level 1) or node indices
    leaves: list[tuple[int, ...]] = field(default_factory=list)  # covered leaf positions
    vectors: np.ndarray | None = None


def build_summary_tree(paths: LibraryPaths, leaves: Leaves, leaf_vectors: np.ndarray, *,
                       embed: Callable[[list[str]], np.ndarray], vector_kind: str, summarizer: Summarizer,
                       summary_cache_path: Path | None, params: TreeParams = TreeParams(),
                       blocked: Sequence[str] = (), input_hash: str, store_leaf_vectors: bool = False,
                       previous: dict[int, list[tuple[str, ...]]] | None = None,
                       progress: Callable[[str], None] | None = None) -> SummaryTreeRef:
    """Build the tree over ``leaves`` (their vectors in ``leaf_vectors``) and write the artifact.

    ``embed(texts)`` embeds summaries in the leaves' space (L2-normalised rows);
    ``blocked`` are RESTRICTED fingerprints (:func:`restricted_fingerprints`);
    ``input_hash`` identifies everything the tree depends on: an existing tree with the
    same hash is reused (no summarizer call at all). LLM summaries go through the
    :class:`~.summarizers.SummaryCache` at ``summary_cache_path``.

    ``previous`` (level -> member ids of each cluster, from the published tree built with
    the same settings) makes the build incremental: a previous cluster whose members all
    still exist unchanged (ids are content hashes) is kept as it is, and only the rest of
    the level is clustered afresh — so editing one document re-summarizes the clusters it
    touched and their ancestors, not the whole library (a global mixture would re-partition
    everything). Without it the tree is the pure function of the input.
    """
    t0 = time.perf_counter()
    h = sha256_json([SUMMARY_TREE_VERSION, SUMMARY_TREE_BUILD, input_hash, summarizer.id, vector_kind, asdict(params)])
    target = paths.work_dir("summary_tree", h)
    meta_path = target / schema.TREE_META
    if meta_path.is_file():
        return _ref_from_meta(target, json.loads(meta_path.read_text(encoding="utf-8")), h, time.perf_counter() - t0)
    blocked_set = set(blocked)
    leaf_texts = [_scrub(t, blocked_set) for t in leaves.texts]
    cache = SummaryCache(summary_cache_path) if (summarizer.is_llm and summary_cache_path is not None) else None
    calls = cached = 0
    levels: list[_Level] = []
    cur_vecs = np.asarray(leaf_vectors, dtype=np.float32)
    cur_texts = leaf_texts
    cur_ids = list(leaves.chunk_ids)
    cur_leaves: list[tuple[int, ...]] = [(i,) for i in range(len(leaf_texts))]
    try:
        while len(cur_texts) >= 2 and len(levels) < params.max_levels:
            level_no = len(levels) + 1
            tokens = [approx_tokens(t) for t in cur_texts]
            with one_blas_thread():
                clusters = _warm_clusters((previous or {}).get(level_no, []), cur_ids, cur_vecs, tokens, params, level_no)
            if len(clusters) >= len(cur_texts):
                break  # nothing merged: a level would only copy the one below
            lvl = _Level()
            for members in clusters:
                texts = [cur_texts[m] for m in members]
                if cache is not None:
                    before = cache.hits
                    summary = cache.summarize(summarizer, texts)
                    if cache.hits > before:
                        cached += 1
                    else:
                        calls += 1
                else:
                    summary = summarizer.summarize(texts)
                    calls += int(summarizer.is_llm)
                summary = _scrub(summary, blocked_set)
                lvl.ids.append("n" + sha256_json([summarizer.id, level_no, [cur_ids[m] for m in members]])[:24])
                lvl.texts.append(summary)
                lvl.children.append(members)
                lvl.leaves.append(tuple(sorted({leaf for m in members for leaf in cur_leaves[m]})))
            lvl.vectors = np.asarray(embed(lvl.texts), dtype=np.float32).reshape(len(lvl.texts), -1)
            levels.append(lvl)
            if progress:
                progress(f"summary tree level {level_no}: {len(lvl.ids)} nodes from {len(cur_texts)}")
            cur_vecs, cur_texts, cur_ids, cur_leaves = lvl.vectors, lvl.texts, lvl.ids, lvl.leaves
            if len(cur_texts) <= params.top_size:
                break
    finally:
        if cache is not None:
            cache.close()
    meta = _write_tree(target, leaves, leaf_vectors if store_leaf_vectors else None, levels, summarizer_id=summarizer.id,
                       vector_kind=vector_kind, params=params, llm_calls=calls, llm_cached=cached)
    return _ref_from_meta(target, meta, h, time.perf_counter() - t0, llm_calls=calls, llm_cached=cached, reused=False)


def _write_tree(target: Path, leaves: Leaves, leaf_vectors: np.ndarray | None, levels: list[_Level], *, summarizer_id: str,
                vector_kind: str, params: TreeParams, llm_calls: int, llm_cached: int) -> dict[str, Any]:
    offsets = np.cumsum([0] + [len(lvl.ids) for lvl in levels])
    ids, level_col, texts, n_leaves, doc_col, member_col = [], [], [], [], [], []
    children_flat: list[int] = []
    children_ptr = [0]
    leaves_flat: list[int] = []
    leaves_ptr = [0]
    vectors = []
    child_chars = node_chars = 0
    sizes: list[int] = []
    for li, lvl in enumerate(levels):
        below_texts = leaves.texts if li == 0 else levels[li - 1].texts
        for nid, text, ch, lv in zip(lvl.ids, lvl.texts, lvl.children, lvl.leaves):
            ids.append(nid)
            level_col.append(li + 1)
            texts.append(text)
            n_leaves.append(len(lv))
            doc_col.append(sorted({leaves.doc_ids[i] for i in lv}))
            member_col.append([leaves.chunk_ids[c] for c in ch] if li == 0 else [levels[li - 1].ids[c] for c in ch])
            # level 1 points at chunk rows, higher levels at node indices of the level below
            if li == 0:
                children_flat.extend(int(leaves.rows[c]) for c in ch)
            else:
                children_flat.extend(int(offsets[li - 1] + c) for c in ch)
            children_ptr.append(len(children_flat))
            leaves_flat.extend(int(leaves.rows[i]) for i in lv)
            leaves_ptr.append(len(leaves_flat))
            child_chars += sum(len(below_texts[c]) for c in ch)
            node_chars += len(text)
            sizes.append(len(ch))
        vectors.append(lvl.vectors)
    dim = int(levels[0].vectors.shape[1]) if levels else int(np.asarray(leaf_vectors).shape[1]) if leaf_vectors is not None else 0
    node_vectors = np.concatenate(vectors).astype(np.float32) if vectors else np.zeros((0, dim), np.float32)
    top = [(ids[i], n_leaves[i], texts[i][:300]) for i in range(len(ids)) if level_col[i] == len(levels)]
    meta = {
        "version": SUMMARY_TREE_VERSION,
        "build_version": SUMMARY_TREE_BUILD,
        "summarizer_id": summarizer_id,
        "vector_kind": vector_kind,
        "dim": dim,
        "params": asdict(params),
        "n_leaves": int(len(leaves.rows)),
        "nodes_per_level": [len(lvl.ids) for lvl in levels],
        "mean_cluster_size": round(float(np.mean(sizes)), 4) if sizes else 0.0,
        "compression_ratio": round(child_chars / node_chars, 4) if node_chars else 0.0,
        "build": {"llm_calls": llm_calls, "llm_cached": llm_cached},
        "leaf_vectors": leaf_vectors is not None,
        "top_level": [list(t) for t in top],
    }

    def build(tmp: Path) -> None:
        table = pa.table({"node_id": ids, "level": pa.array(level_col, pa.int32()), "text": texts,
                          "n_leaves": pa.array(n_leaves, pa.int32()), "doc_ids": pa.array(doc_col, pa.list_(pa.string())),
                          "member_ids": pa.array(member_col, pa.list_(pa.string()))})
        pq.write_table(table, tmp / schema.TREE_NODES)
        np.save(tmp / schema.TREE_NODE_VECTORS, node_vectors)
        np.save(tmp / schema.TREE_CHILDREN_INDPTR, np.asarray(children_ptr, np.int64))
        np.save(tmp / schema.TREE_CHILDREN, np.asarray(children_flat, np.int32))
        np.save(tmp / schema.TREE_LEAVES_INDPTR, np.asarray(leaves_ptr, np.int64))
        np.save(tmp / schema.TREE_LEAVES, np.asarray(leaves_flat, np.int32))
        np.save(tmp / schema.TREE_LEAF_ROWS, np.asarray(leaves.rows, np.int32))
        if leaf_vectors is not None:
            np.save(tmp / schema.TREE_LEAF_VECTORS, np.asarray(leaf_vectors, np.float32))
        (tmp / schema.TREE_META).write_text(json.dumps(meta, ensure_ascii=False, sort_keys=True, indent=1), encoding="utf-8")

    write_once(target, build)
    return meta


def _ref_from_meta(target: Path, meta: dict[str, Any], h: str, seconds: float, *, llm_calls: int = 0, llm_cached: int = 0,
                   reused: bool = True) -> SummaryTreeRef:
    return SummaryTreeRef(
        str(target), h, meta["summarizer_id"], meta["vector_kind"], int(meta["n_leaves"]), tuple(meta["nodes_per_level"]),
        float(meta["mean_cluster_size"]), float(meta["compression_ratio"]), llm_calls, llm_cached, seconds,
        tuple((str(a), int(b), str(c)) for a, b, c in meta["top_level"]), reused=reused)


def verify_summary_tree(ref: SummaryTreeRef, fingerprints: Sequence[str], restricted_rows: set[int]) -> dict[str, int]:
    """``{"nodes_with_restricted_text": n, "restricted_leaves": n}`` (both must be 0).

    A node's text is normalised like the fingerprints (:func:`~.fingerprints.norm_text`);
    ``fingerprints`` come from :func:`restricted_fingerprints`, so they occur in no open
    text and a node can hold one only by repeating RESTRICTED text it was never given.
    """
    if not ref.directory:
        return {"nodes_with_restricted_text": 0, "restricted_leaves": 0}
    d = Path(ref.directory)
    texts = pq.read_table(d / schema.TREE_NODES, columns=["text"]).column("text").to_pylist()
    bad_nodes = sum(1 for t in texts if contains_fingerprint(t, fingerprints)) if fingerprints else 0
    covered = set(np.load(d / schema.TREE_LEAVES).tolist()) | set(np.load(d / schema.TREE_LEAF_ROWS).tolist())
    return {"nodes_with_restricted_text": bad_nodes, "restricted_leaves": len(covered & restricted_rows)}


# ------------------------------------------------------------------------------- step
NO_RESTRICTED_TEXT_IN_NODES = CheckSpec(
    "no_restricted_text_in_nodes", blocking=True,
    description="no node text contains text of a RESTRICTED chunk, and no RESTRICTED chunk is a leaf of the tree")
SUMMARY_TREE_CHECKS = (NO_RESTRICTED_TEXT_IN_NODES,)


def _restricted_chunk_texts(store_path: Path) -> list[str]:
    """The text of every version of every chunk of a document that is RESTRICTED now."""
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            f"SELECT DISTINCT text FROM {schema.CHUNK_TABLE} WHERE doc_id IN (SELECT DISTINCT doc_id FROM "
            f"{schema.CHUNK_TABLE} WHERE active = 1 AND upper(sensitivity) = 'RESTRICTED')")
    return [r[0] for r in rows]


def _forget_restricted(paths: LibraryPaths, summary_cache_path: Path, restricted_texts: Sequence[str], keep: Path | None) -> int:
    """Reclassification is retroactive: delete cached summaries built from a text that is
    RESTRICTED now, and every older tree work directory (published snapshots keep their own copy)."""
    purged = 0
    if restricted_texts and Path(summary_cache_path).exists():
        with SummaryCache(summary_cache_path) as cache:
            purged = cache.purge_members([text_sha(t) for t in restricted_texts])
    root = paths.work / "summary_tree"
    if root.is_dir():
        for d in root.iterdir():
            if d.is_dir() and (keep is None or d.resolve() != keep.resolve()) and not d.name.startswith(".tmp-"):
                shutil.rmtree(d, ignore_errors=True)
    return purged


def _read_leaves(store_path: Path) -> tuple[Leaves, list[str], set[int]]:
    """Open chunks as leaves (snapshot rows), RESTRICTED texts, RESTRICTED rows."""
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            f"SELECT chunk_id, doc_id, text, sensitivity FROM {schema.CHUNK_TABLE} WHERE active = 1 ORDER BY chunk_id")
    keep = [i for i, r in enumerate(rows) if not is_restricted(r["sensitivity"])]
    restricted_rows = {i for i, r in enumerate(rows) if is_restricted(r["sensitivity"])}
    leaves = Leaves(np.asarray(keep, dtype=np.int32), tuple(rows[i]["chunk_id"] for i in keep),
                    tuple(rows[i]["doc_id"] for i in keep), tuple(rows[i]["text"] for i in keep))
    return leaves, [rows[i]["text"] for i in sorted(restricted_rows)], restricted_rows


def _cached_embed(backend: Any, cache_path: Path) -> Callable[[list[str]], np.ndarray]:
    """Embed summaries with the chunks' backend through the shared embedding cache."""
    def embed(texts: list[str]) -> np.ndarray:
        hashes = [text_hash(t) for t in texts]
        cache = EmbeddingCache(cache_path)
        try:
            found = cache.get_many(backend.model_id, sorted(set(hashes)))
            missing = sorted({h for h in hashes if h not in found})
            by_hash = dict(zip(hashes, texts))
            for i in range(0, len(missing), 256):
                part = missing[i:i + 256]
                vecs = np.asarray(backend.embed([by_hash[x] for x in part], kind="passage"), dtype=np.float32)
                items = list(zip(part, vecs))
                cache.put_many(backend.model_id, items)
                found.update(dict(items))
        finally:
            cache.close()
        return np.stack([found[x] for x in hashes]) if hashes else np.zeros((0, int(backend.dim)), np.float32)
    return embed


def summary_tree_step(ctx: StepContext, index_text: IndexTextRef, chunk_embeddings: EmbeddingRef,
                      documents: DocumentSet) -> StepResult:
    """Build the library's summary tree (``_library.toml`` ``summarizer``: extractive by default).

    With vectors, the tree lives in their space (summaries embedded by the same backend,
    through the embedding cache); without (a BM25-only library), in the hashed-lexical
    space of :data:`LEXICAL_VECTOR_DIM` dimensions.
    """
    name = (getattr(documents.config, "summarizer", "extractive") or "extractive").strip().lower()
    params = TreeParams()
    llm = ctx.make_llm() if (name == "llm" and getattr(ctx, "make_llm", None) is not None) else None
    summarizer = make_summarizer(name, llm=llm, max_chars=params.summary_chars)
    max_leaves = int(getattr(documents.config, "tree_max_leaves", 0) or 0)
    if summarizer is not None and max_leaves:  # decided on counts, before reading a million texts
        n_open, n_restricted = count_active_chunks(ctx.paths.chunk_store)
        if n_open > max(max_leaves, params.top_size):  # too big for a default build: the library opts in
            _forget_restricted(ctx.paths, Path(ctx.cache_path).parent / "summaries.sqlite",
                               _restricted_chunk_texts(ctx.paths.chunk_store), None)
            ref = SummaryTreeRef(None, sha256_json(["too-big", max_leaves, index_text.content_hash]), summarizer.id,
                                 "none", n_open, (), 0.0, 0.0, 0, 0, 0.0,
                                 note=f"no tree: {n_open} open chunks, more than tree_max_leaves={max_leaves}; "
                                      "raise tree_max_leaves in _library.toml (0: no limit) to build it",
                                 restricted_skipped=n_restricted)
            return StepResult(ref, (outcome(NO_RESTRICTED_TEXT_IN_NODES, True, {"nodes_with_restricted_text": 0}),))
    leaves, restricted_texts, restricted_rows = _read_leaves(ctx.paths.chunk_store)
    if summarizer is None:
        _forget_restricted(ctx.paths, Path(ctx.cache_path).parent / "summaries.sqlite",
                           _restricted_chunk_texts(ctx.paths.chunk_store), None)
        ref = SummaryTreeRef(None, sha256_json(["none", index_text.content_hash]), "none", "none", len(leaves.rows), (),
                             0.0, 0.0, 0, 0, 0.0, note="no tree: the library's _library.toml sets summarizer = \"none\"",
                             restricted_skipped=len(restricted_rows))
        return StepResult(ref, (outcome(NO_RESTRICTED_TEXT_IN_NODES, True, {"nodes_with_restricted_text": 0}),))
    if len(leaves.rows) <= params.top_size:  # a handful of chunks already is a small top level
        _forget_restricted(ctx.paths, Path(ctx.cache_path).parent / "summaries.sqlite",
                           _restricted_chunk_texts(ctx.paths.chunk_store), None)
        ref = SummaryTreeRef(None, sha256_json(["small", index_text.content_hash]), summarizer.id, "none", len(leaves.rows),
                             (), 0.0, 0.0, 0, 0, 0.0, note=f"no tree: {len(leaves.rows)} open chunk(s), at most "
                             f"top_size={params.top_size}", restricted_skipped=len(restricted_rows))
        return StepResult(ref, (outcome(NO_RESTRICTED_TEXT_IN_NODES, True, {"nodes_with_restricted_text": 0}),))
    blocked = restricted_fingerprints(restricted_texts, leaves.texts) if restricted_texts else []
    if chunk_embeddings.directory:
        d = Path(chunk_embeddings.directory)
        emb_rows = np.load(d / schema.EMB_ROWS)
        if not np.array_equal(emb_rows, leaves.rows):
            raise ConfigError("the chunk embeddings do not cover exactly the open chunks; re-materialize chunk_embeddings "
                              "and summary_tree together")
        leaf_vectors = np.load(d / schema.EMB_VECTORS)
        spec = resolve_library_settings(documents, embedding=ctx.embedding).embedding
        backend = ctx.backend(spec)
        if backend is None or backend.model_id != chunk_embeddings.model_id:
            raise ConfigError(f"the summary tree needs the chunks' embedding model {chunk_embeddings.model_id!r} to embed "
                              f"its summaries; configure that backend ({spec!r}) and re-materialize")
        embed = _cached_embed(backend, ctx.cache_path)
        vector_kind = f"embedding:{chunk_embeddings.model_id}"
        vec_hash = chunk_embeddings.content_hash
        store_leaf_vectors = False
    else:
        from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend

        lexical = DeterministicEmbeddingBackend(dim=LEXICAL_VECTOR_DIM)
        embed = lambda texts: np.asarray(lexical.embed(list(texts), kind="passage"), dtype=np.float32)  # noqa: E731
        leaf_vectors = embed(list(leaves.texts)) if len(leaves.texts) else np.zeros((0, LEXICAL_VECTOR_DIM), np.float32)
        vector_kind = f"lexical:{lexical.model_id}"
        vec_hash = "lexical"
        store_leaf_vectors = True
    input_hash = sha256_json([index_text.content_hash, vec_hash, sha256_json(list(leaves.texts)), blocked])
    summary_cache = Path(ctx.cache_path).parent / "summaries.sqlite"
    previous = previous_clusters(ctx.paths.current / schema.SUMMARY_TREE_DIR, summarizer_id=summarizer.id,
                                 vector_kind=vector_kind, params=params)
    ref = build_summary_tree(ctx.paths, leaves, leaf_vectors, embed=embed, vector_kind=vector_kind, summarizer=summarizer,
                             summary_cache_path=summary_cache, params=params,
                             blocked=blocked, input_hash=input_hash, store_leaf_vectors=store_leaf_vectors,
                             previous=previous, progress=ctx.log)
    ref = dataclasses.replace(ref, restricted_skipped=len(restricted_rows))
    _forget_restricted(ctx.paths, summary_cache, _restricted_chunk_texts(ctx.paths.chunk_store), Path(ref.directory))
    found = verify_summary_tree(ref, blocked, restricted_rows)
    bad = found["nodes_with_restricted_text"] + found["restricted_leaves"]
    return StepResult(ref, (
        outcome(NO_RESTRICTED_TEXT_IN_NODES, not bad, found,
                f"{found['nodes_with_restricted_text']} node(s) contain RESTRICTED text and "
                f"{found['restricted_leaves']} RESTRICTED chunk(s) are leaves"),
    ))
