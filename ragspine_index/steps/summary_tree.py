"""Stage ``summary_tree``: a RAPTOR tree of cluster summaries over the non-RESTRICTED chunks.

RAPTOR (Sarthi et al., "RAPTOR: Recursive Abstractive Processing for Tree-Organized
Retrieval", ICLR 2024): embed the leaves; per level, partition a big level globally first
(a mixture fitted on a seeded sample, then every node assigned to its likeliest
component: the cost stays about linear in the level's size); then, inside each part, reduce the vectors' dimension,
cluster them with a Gaussian mixture whose number of components is chosen by BIC, with
soft membership (a node may join a second cluster whose posterior is at least
``soft_threshold``); split any cluster whose members exceed the summarizer's token budget
again (the same way, recursively; lopsided splits fold their one- and two-member parts
into the nearest sibling that still fits); summarize each cluster; give each node a
vector in the leaves' space; repeat on the nodes until a level is small. A node's vector
is the centroid of the leaves it covers (``TreeParams.node_vectors = "centroid"``: no
model runs; each embedding model's block of the row normalised apart) for extractive
summaries, which are sentences of those leaves anyway; LLM summaries (and the
hashed-lexical tree) are embedded instead. Embedding the extractive summaries with the
default ensemble was 27 % of a default ingest's CPU, for the same retrieval quality
(docs/benchmarks.md, "Ingest cost per step").
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

import dataclasses
import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ragspine_core import schema
from ragspine_core.errors import ConfigError
from ragspine_core.records import is_restricted

from ragspine_index.artifacts import LibraryPaths, intact_snapshot_part, reusable_work_output, sha256_json, write_once
from ragspine_index.chunk_store import ChunkStore, count_active_chunks
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.chunk_embeddings import EmbeddingCache, EmbeddingRef, text_hash
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.library_settings import resolve_library_settings
from ragspine_index.step_api import CheckSpec, StepContext, StepResult, outcome
from ragspine_index.fingerprints import contains_fingerprint, norm_sentence, tree_fingerprints
from ragspine_index.raptor.clustering import TreeParams, approx_tokens, cluster_level, one_blas_thread
from ragspine_index.raptor.summarizers import Summarizer, SummaryCache, make_summarizer, split_sentences, text_sha

__all__ = ["LEXICAL_VECTOR_DIM", "SUMMARY_TREE_CHECKS", "SUMMARY_TREE_VERSION", "Leaves", "SummaryTreeRef", "TreeParams",
           "build_summary_tree", "centroid_vectors", "cluster_level", "restricted_fingerprints", "summary_tree_step",
           "vector_blocks", "verify_summary_tree"]

#: The artifact's format (``tree.json`` ``version``; what ``ragspine_query.tree`` reads).
SUMMARY_TREE_VERSION = "1"
#: Part of every tree's content hash: bump when the same input must build a different tree
#: (2: global + local clustering, one EM start).
SUMMARY_TREE_BUILD = "2"
#: Dimension of the hashed-lexical vectors of a tree over a BM25-only library.
LEXICAL_VECTOR_DIM = 256


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


def centroid_vectors(leaf_vectors: np.ndarray, covered: Sequence[Sequence[int]],
                     blocks: Sequence[tuple[int, int, float]] | None = None) -> np.ndarray:
    """Node vectors as centroids: row ``i`` is the mean of ``leaf_vectors[covered[i]]``,
    each column block ``(start, stop, scale)`` made a vector of norm ``scale`` again (an
    ensemble row is its models' unit vectors side by side, each scaled by ``1/sqrt(n)``:
    :class:`~ragspine_core.dense.ensemble.EnsembleEmbeddingBackend`), so a node's cosine
    with a query is, like a leaf's, the mean of the models' cosines. ``blocks`` default:
    the whole row, norm 1. A block whose mean is zero stays zero. Deterministic: float64
    sums in member order."""
    x = np.asarray(leaf_vectors, dtype=np.float32)
    dim = int(x.shape[1]) if x.ndim == 2 else 0
    out = np.zeros((len(covered), dim), dtype=np.float32)
    for i, members in enumerate(covered):
        if len(members):
            out[i] = x[np.asarray(members, dtype=np.int64)].astype(np.float64).mean(axis=0)
    for start, stop, scale in (blocks or ((0, dim, 1.0),)):
        norms = np.linalg.norm(out[:, start:stop], axis=1, keepdims=True)
        out[:, start:stop] = np.where(norms > 0, out[:, start:stop] * (np.float32(scale) / np.maximum(norms, 1e-12)), 0.0)
    return out


def vector_blocks(backend: Any) -> tuple[tuple[int, int, float], ...]:
    """``(start, stop, scale)`` of each model's columns in ``backend``'s rows (one block of
    norm 1 for a single model; each part of an ensemble at ``1/sqrt(n)``)."""
    parts = tuple(getattr(backend, "parts", ()) or ())
    if parts:
        scale = 1.0 / float(np.sqrt(len(parts)))
        return tuple((int(p.start), int(p.stop), scale) for p in parts)
    return ((0, int(backend.dim), 1.0),)


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
                       progress: Callable[[str], None] | None = None,
                       blocks: Sequence[tuple[int, int, float]] | None = None) -> SummaryTreeRef:
    """Build the tree over ``leaves`` (their vectors in ``leaf_vectors``) and write the artifact.

    ``embed(texts)`` embeds summaries in the leaves' space (L2-normalised rows) when
    ``params.node_vectors`` is ``summary``; with ``centroid`` (the default) a node's vector
    is :func:`centroid_vectors` of the leaves it covers (``blocks``: the models' column
    blocks, :func:`vector_blocks`) and ``embed`` is not called;
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
    if reusable_work_output(target) and meta_path.is_file():  # checked against its record first
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
            if params.node_vectors == "centroid":
                lvl.vectors = centroid_vectors(leaf_vectors, lvl.leaves, blocks)
            else:
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
                       vector_kind=vector_kind, params=params, llm_calls=calls, llm_cached=cached,
                       llm_fallbacks=int(getattr(summarizer, "fallbacks", 0)))
    if progress and summarizer.is_llm:  # the build-side fallbacks, as tree.json records them
        progress(f"summary tree: {calls} LLM summary call(s), {cached} cached, {meta['build']['llm_fallbacks']} "
                 "unusable reply(ies) replaced by the extractive summary")
    return _ref_from_meta(target, meta, h, time.perf_counter() - t0, llm_calls=calls, llm_cached=cached, reused=False)


def _write_tree(target: Path, leaves: Leaves, leaf_vectors: np.ndarray | None, levels: list[_Level], *, summarizer_id: str,
                vector_kind: str, params: TreeParams, llm_calls: int, llm_cached: int, llm_fallbacks: int = 0) -> dict[str, Any]:
    offsets = np.cumsum([0] + [len(lvl.ids) for lvl in levels])
    ids, level_col, texts, n_leaves, doc_col, member_col = [], [], [], [], [], []
    children_flat: list[int] = []
    children_ptr = [0]
    leaves_flat: list[int] = []
    leaves_ptr = [0]
    vectors: list[Any] = []
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
    dim = int(cast(np.ndarray, levels[0].vectors).shape[1]) if levels else int(np.asarray(leaf_vectors).shape[1]) if leaf_vectors is not None else 0
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
        "build": {"llm_calls": llm_calls, "llm_cached": llm_cached, "llm_fallbacks": llm_fallbacks},
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


def restricted_chunk_texts(store_path: Path) -> list[str]:
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


def read_leaves(store_path: Path) -> tuple[Leaves, list[str], set[int]]:
    """Open chunks as leaves (snapshot rows), RESTRICTED texts, RESTRICTED rows."""
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            f"SELECT chunk_id, doc_id, text, sensitivity FROM {schema.CHUNK_TABLE} WHERE active = 1 ORDER BY chunk_id")
    keep = [i for i, r in enumerate(rows) if not is_restricted(r["sensitivity"])]
    restricted_rows = {i for i, r in enumerate(rows) if is_restricted(r["sensitivity"])}
    leaves = Leaves(np.asarray(keep, dtype=np.int32), tuple(rows[i]["chunk_id"] for i in keep),
                    tuple(rows[i]["doc_id"] for i in keep), tuple(rows[i]["text"] for i in keep))
    return leaves, [rows[i]["text"] for i in sorted(restricted_rows)], restricted_rows


def cached_embed(backend: Any, cache_path: Path) -> Callable[[list[str]], np.ndarray]:
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
    make_llm = getattr(ctx, "make_llm", None)
    llm = make_llm() if (name == "llm" and make_llm is not None) else None
    summarizer = make_summarizer(name, llm=llm, max_chars=params.summary_chars)
    max_leaves = int(getattr(documents.config, "tree_max_leaves", 0) or 0)
    if summarizer is not None and max_leaves:  # decided on counts, before reading a million texts
        n_open, n_restricted = count_active_chunks(ctx.paths.chunk_store)
        if n_open > max(max_leaves, params.top_size):  # too big for a default build: the library opts in
            _forget_restricted(ctx.paths, Path(ctx.cache_path).parent / "summaries.sqlite",
                               restricted_chunk_texts(ctx.paths.chunk_store), None)
            ref = SummaryTreeRef(None, sha256_json(["too-big", max_leaves, index_text.content_hash]), summarizer.id,
                                 "none", n_open, (), 0.0, 0.0, 0, 0, 0.0,
                                 note=f"no tree: {n_open} open chunks, more than tree_max_leaves={max_leaves}; "
                                      "raise tree_max_leaves in _library.toml (0: no limit) to build it",
                                 restricted_skipped=n_restricted)
            return StepResult(ref, (outcome(NO_RESTRICTED_TEXT_IN_NODES, True, {"nodes_with_restricted_text": 0}),))
    leaves, restricted_texts, restricted_rows = read_leaves(ctx.paths.chunk_store)
    if summarizer is None:
        _forget_restricted(ctx.paths, Path(ctx.cache_path).parent / "summaries.sqlite",
                           restricted_chunk_texts(ctx.paths.chunk_store), None)
        ref = SummaryTreeRef(None, sha256_json(["none", index_text.content_hash]), "none", "none", len(leaves.rows), (),
                             0.0, 0.0, 0, 0, 0.0, note="no tree: the library's _library.toml sets summarizer = \"none\"",
                             restricted_skipped=len(restricted_rows))
        return StepResult(ref, (outcome(NO_RESTRICTED_TEXT_IN_NODES, True, {"nodes_with_restricted_text": 0}),))
    if len(leaves.rows) <= params.top_size:  # a handful of chunks already is a small top level
        _forget_restricted(ctx.paths, Path(ctx.cache_path).parent / "summaries.sqlite",
                           restricted_chunk_texts(ctx.paths.chunk_store), None)
        ref = SummaryTreeRef(None, sha256_json(["small", index_text.content_hash]), summarizer.id, "none", len(leaves.rows),
                             (), 0.0, 0.0, 0, 0, 0.0, note=f"no tree: {len(leaves.rows)} open chunk(s), at most "
                             f"top_size={params.top_size}", restricted_skipped=len(restricted_rows))
        return StepResult(ref, (outcome(NO_RESTRICTED_TEXT_IN_NODES, True, {"nodes_with_restricted_text": 0}),))
    blocked = restricted_fingerprints(restricted_texts, leaves.texts) if restricted_texts else []
    blocks: tuple[tuple[int, int, float], ...] | None = None
    if chunk_embeddings.directory:
        d = Path(chunk_embeddings.directory)
        emb_rows = np.load(d / schema.EMB_ROWS)
        if not np.array_equal(emb_rows, leaves.rows):
            raise ConfigError("the chunk embeddings do not cover exactly the open chunks; re-materialize chunk_embeddings "
                              "and summary_tree together")
        leaf_vectors = np.load(d / schema.EMB_VECTORS)
        spec = resolve_library_settings(documents, embedding=ctx.embedding).embedding_spec
        backend = ctx.backend(spec)
        if backend is None or backend.model_id != chunk_embeddings.model_id:
            raise ConfigError(f"the summary tree needs the chunks' embedding model {chunk_embeddings.model_id!r} to embed "
                              f"its summaries; configure that backend ({spec.backend!r}) and re-materialize")
        embed = cached_embed(backend, ctx.cache_path)
        blocks = vector_blocks(backend)
        if summarizer.is_llm:  # abstractive text: its own embedding says what the node is about
            params = dataclasses.replace(params, node_vectors="summary")
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
        params = dataclasses.replace(params, node_vectors="summary")  # hashing a summary costs nothing
        store_leaf_vectors = True
    input_hash = sha256_json([index_text.content_hash, vec_hash, sha256_json(list(leaves.texts)), blocked])
    summary_cache = Path(ctx.cache_path).parent / "summaries.sqlite"
    serving = ctx.paths.current
    previous = previous_clusters(serving / schema.SUMMARY_TREE_DIR, summarizer_id=summarizer.id,
                                 vector_kind=vector_kind, params=params) \
        if intact_snapshot_part(serving, schema.SUMMARY_TREE_DIR) else {}  # a damaged tree is never reused
    ref = build_summary_tree(ctx.paths, leaves, leaf_vectors, embed=embed, vector_kind=vector_kind, summarizer=summarizer,
                             summary_cache_path=summary_cache, params=params,
                             blocked=blocked, input_hash=input_hash, store_leaf_vectors=store_leaf_vectors,
                             previous=previous, progress=ctx.log, blocks=blocks)
    ref = dataclasses.replace(ref, restricted_skipped=len(restricted_rows))
    _forget_restricted(ctx.paths, summary_cache, restricted_chunk_texts(ctx.paths.chunk_store),
                       Path(cast(str, ref.directory)))
    found = verify_summary_tree(ref, blocked, restricted_rows)
    bad = found["nodes_with_restricted_text"] + found["restricted_leaves"]
    return StepResult(ref, (
        outcome(NO_RESTRICTED_TEXT_IN_NODES, not bad, found,
                f"{found['nodes_with_restricted_text']} node(s) contain RESTRICTED text and "
                f"{found['restricted_leaves']} RESTRICTED chunk(s) are leaves"),
    ))
