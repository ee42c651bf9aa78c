"""Approximate nearest-neighbour (HNSW) index over a library's embedding matrix.

Built by the ``chunk_embeddings`` step (``ragspine_index.steps.chunk_embeddings``) when a
library holds at least :attr:`AnnConfig.min_vectors` vectors, published as the ``ann``
artifact (``schema.ANN_DIR``) next to ``embeddings/``, and searched by the dense channel
(:class:`ragspine_query.pipeline.channels.DenseChannel`). Below the threshold, or when the
engine's package is not installed (``pip install 'ragspine[ann]'``), the channel scans
exactly (:func:`~.vector_store.top_k_cosine`), so the artifact is an accelerator only.

The index holds exactly the rows of ``embeddings/vectors.npy`` (label = position in that
matrix), so RESTRICTED chunks, which never get a vector, are never in it. It is built
single-threaded with a fixed seed so that equal inputs give equal bytes.

Engine: ``usearch`` by default (memory-mapped on open: ``Index.restore(view=True)``), chosen
by ``ragspine_tools/bench/bench_ann.py`` (figures in docs/operations.md); ``faiss`` and ``hnswlib``
are supported for comparison. Parameters live in ``params.json`` inside the artifact and
are copied into the manifest's embedding entry by the writer.
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence, Callable

import numpy as np

from ragspine_core.errors import ConfigError, IndexIncompatibleError

ANN_PARAMS_FILE = "params.json"
ANN_INDEX_FILE = "index.bin"
ENGINES = ("usearch", "faiss", "hnswlib")
DEFAULT_ENGINE = "usearch"
#: Below this many vectors the exact scan is fast enough (~10 ms at 200k x 384 on one core).
DEFAULT_MIN_VECTORS = 200_000
#: A filter keeping less than this share of the rows is searched exactly over the kept rows.
MIN_ANN_SHARE = 0.05


@dataclass(frozen=True, slots=True)
class AnnParams:
    """HNSW parameters: ``m`` links per node, ``ef_construction`` / ``ef_search`` beam widths."""

    engine: str = DEFAULT_ENGINE
    m: int = 16
    ef_construction: int = 128
    ef_search: int = 128
    seed: int = 42

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigError(f"unknown ANN engine {self.engine!r}; allowed: {', '.join(ENGINES)}")
        for name in ("m", "ef_construction", "ef_search"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ConfigError(f"ANN {name} must be an integer >= 2, got {value!r}")


@dataclass(frozen=True, slots=True)
class AnnConfig:
    """When the embeddings step builds an ANN index, and with which parameters.

    ``min_vectors``: build only for libraries with at least this many vectors (``0`` = never).
    Set per build with ``build_library(ann=...)`` / ``StepContext.ann``.
    """

    min_vectors: int = DEFAULT_MIN_VECTORS
    params: AnnParams = AnnParams()
    #: Build threads; 1 (the default) gives byte-identical indexes for equal input, more
    #: build faster but the graph (and the artifact's bytes) then vary from run to run.
    build_threads: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.min_vectors, bool) or not isinstance(self.min_vectors, int) or self.min_vectors < 0:
            raise ConfigError(f"ANN min_vectors must be an integer >= 0 (0 = never build), got {self.min_vectors!r}")

    def wants(self, count: int) -> bool:
        return self.min_vectors > 0 and count >= self.min_vectors


def load_shared_libstdcxx_users_first() -> None:
    """Import the installed extensions that use the system ``libstdc++`` before ``usearch``.

    The ``usearch`` wheels link ``libstdc++`` statically and export its GNU-unique locale
    symbols, which bind process-wide even under ``RTLD_LOCAL``. An extension loaded *after*
    it that uses the shared ``libstdc++`` then initialises its locale against usearch's
    copy and the process dies with SIGSEGV inside ``import onnxruntime`` (reproduced with
    usearch 2.26 and onnxruntime 1.32: ``import usearch.index; import onnxruntime``).
    Loaded in the other order both work, so every usearch import in this package goes
    through here. A missing onnxruntime (the ``embed-onnx`` extra) is fine: nothing to
    protect.
    """
    import importlib.util

    for module in _LOAD_BEFORE_USEARCH:
        if importlib.util.find_spec(module) is not None:
            __import__(module)


#: Extensions with C++ runtimes that must be loaded before usearch (see above).
_LOAD_BEFORE_USEARCH = ("onnxruntime",)


def engine_available(engine: str) -> bool:
    """Whether the engine's package imports (the ``ann`` extra installs ``usearch``)."""
    try:
        _import(engine)
    except ImportError:
        return False
    return True


def _import(engine: str) -> Any:
    try:
        if engine == "usearch":
            load_shared_libstdcxx_users_first()
            from usearch.index import Index

            return Index
        if engine == "faiss":
            import faiss

            return faiss
        import hnswlib

        return hnswlib
    except ImportError:
        package = {"usearch": "usearch", "faiss": "faiss-cpu", "hnswlib": "hnswlib"}[engine]
        raise ImportError(f"the {engine} ANN engine needs the {package} package: pip install 'ragspine[ann]' "
                          f"(or {package}); without it the exact scan is used") from None


def build_ann_index(vectors: np.ndarray, directory: Path, params: AnnParams = AnnParams(), *, threads: int = 1) -> dict[str, Any]:
    """Write an inner-product HNSW index of ``vectors`` (unit rows) into ``directory``.

    Labels are row positions. ``threads=1`` (the default) keeps the build deterministic.
    Returns the params dict written to ``params.json``.

    Raises:
        ImportError: the engine's package is not installed (the message names it).
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = vectors.shape
    directory = Path(directory)
    target = directory / ANN_INDEX_FILE
    lib = _import(params.engine)
    if params.engine == "usearch":
        index = lib(ndim=dim, metric="ip", dtype="f32", connectivity=params.m,
                    expansion_add=params.ef_construction, expansion_search=params.ef_search)
        step = 65536
        for s in range(0, n, step):
            index.add(np.arange(s, min(s + step, n), dtype=np.uint64), vectors[s:s + step], threads=threads)
        index.save(str(target))
    elif params.engine == "faiss":
        lib.omp_set_num_threads(threads)
        index = lib.IndexHNSWFlat(dim, params.m, lib.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = params.ef_construction
        index.add(vectors)
        lib.write_index(index, str(target))
    else:
        index = lib.Index(space="ip", dim=dim)
        index.init_index(max_elements=max(n, 1), M=params.m, ef_construction=params.ef_construction,
                         random_seed=params.seed)
        index.add_items(vectors, np.arange(n), num_threads=threads)
        index.save_index(str(target))
    meta = {**asdict(params), "count": int(n), "dim": int(dim), "metric": "ip", "file": ANN_INDEX_FILE}
    (directory / ANN_PARAMS_FILE).write_text(json.dumps(meta, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    return meta


#: Per row of the indexed matrix, a 16-byte key of what its vector was made from (the
#: embedding cache's text hash): what an update matches old rows to new ones by.
ROW_KEYS_FILE = "row_keys.npy"
#: An index is updated in place of a full build while the rows changed since its last full
#: build (removed + added) stay within this share of the rows: HNSW recall degrades as
#: deleted nodes pile up, so past it the next build starts afresh.
MAX_UPDATE_SHARE = 0.10
#: Keys of moved rows are parked at ``key + _PARK`` during a renumbering (above any row).
_PARK = 1 << 40


def row_keys(text_hashes: Sequence[str]) -> np.ndarray:
    """The :data:`ROW_KEYS_FILE` array for rows whose vectors come from these hex hashes."""
    return np.array([bytes.fromhex(h[:32]) for h in text_hashes], dtype="S16")


@dataclass(frozen=True, slots=True)
class AnnDelta:
    """How the rows of a new matrix relate to the rows of an indexed one."""

    kept_old: np.ndarray  # old positions of rows present in both (same key), ...
    kept_new: np.ndarray  # ... and their new positions
    removed: np.ndarray  # old positions with no new row
    added: np.ndarray  # new positions with no old row

    @property
    def changed(self) -> int:
        return int(self.removed.size + self.added.size)


def ann_delta(old_keys: np.ndarray, new_keys: np.ndarray) -> AnnDelta:
    """Match rows by key (equal keys pair up in row order: duplicates are a multiset)."""
    free: dict[bytes, list[int]] = {}
    for i, key in enumerate(old_keys.tolist()):
        free.setdefault(key, []).append(i)
    for rows in free.values():
        rows.reverse()  # pop() then yields them in ascending order
    kept_old: list[int] = []
    kept_new: list[int] = []
    added: list[int] = []
    for j, key in enumerate(new_keys.tolist()):
        same = free.get(key)
        if same:
            kept_old.append(same.pop())
            kept_new.append(j)
        else:
            added.append(j)
    removed = sorted(i for rows in free.values() for i in rows)
    as_array: Callable[[list[int]], np.ndarray] = lambda xs: np.asarray(xs, dtype=np.int64)  # noqa: E731
    return AnnDelta(as_array(kept_old), as_array(kept_new), as_array(removed), as_array(added))


def update_ann_index(previous: Path, delta: AnnDelta, vectors: np.ndarray, directory: Path, *,
                     threads: int = 1) -> dict[str, Any]:
    """Write into ``directory`` the usearch index of ``previous`` brought to ``vectors``.

    Rows in ``delta.removed`` are deleted, kept rows are renumbered to their new positions
    (labels stay row positions, so readers are unchanged) and ``delta.added`` rows are
    inserted. ``previous`` is only read. The result is deterministic for a given previous
    index and delta (``threads=1``), but it is not the bytes a full build of ``vectors``
    gives. Returns the params dict written to ``params.json`` (with ``rows_changed_since_full``).
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = vectors.shape
    previous, directory = Path(previous), Path(directory)
    prev = json.loads((previous / ANN_PARAMS_FILE).read_text(encoding="utf-8"))
    if prev.get("engine") != "usearch" or int(prev.get("dim", -1)) != dim:
        raise ValueError(f"{previous}: only a usearch index of the same dimension can be updated")
    index = _import("usearch").restore(str(previous / ANN_INDEX_FILE), view=False)
    u64: Callable[[np.ndarray], np.ndarray] = lambda xs: np.asarray(xs, dtype=np.uint64)  # noqa: E731
    if delta.removed.size:
        index.remove(u64(delta.removed))
    moved = delta.kept_old != delta.kept_new
    if moved.any():  # via parking keys, so that no new key collides with an old one mid-way
        index.rename(u64(delta.kept_old[moved]), u64(delta.kept_old[moved] + _PARK))
        index.rename(u64(delta.kept_old[moved] + _PARK), u64(delta.kept_new[moved]))
    if delta.added.size:
        index.add(u64(delta.added), vectors[delta.added], threads=threads)
    if len(index) != n:
        raise ValueError(f"updated ANN index holds {len(index)} vectors, expected {n}")
    index.save(str(directory / ANN_INDEX_FILE))
    keep = ("engine", "m", "ef_construction", "ef_search", "seed", "metric", "file")
    meta = {**{k: prev[k] for k in keep if k in prev}, "count": int(n), "dim": int(dim),
            "rows_changed_since_full": int(prev.get("rows_changed_since_full", 0)) + delta.changed}
    (directory / ANN_PARAMS_FILE).write_text(json.dumps(meta, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    return meta


class AnnIndex:
    """An opened ANN artifact: ``search(query, k)`` -> (vector positions, approximate scores)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        try:
            self.meta = json.loads((self.directory / ANN_PARAMS_FILE).read_text(encoding="utf-8"))
            self.params = AnnParams(**{k: self.meta[k] for k in ("engine", "m", "ef_construction", "ef_search", "seed")})
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise IndexIncompatibleError(f"{self.directory}: unreadable ANN params ({exc}); "
                                         "re-materialize the chunk_embeddings asset") from None
        self.count, self.dim = int(self.meta["count"]), int(self.meta["dim"])
        self.engine = self.params.engine
        self._ef = self.params.ef_search
        self._lock = threading.Lock()
        lib = _import(self.engine)
        path = str(self.directory / ANN_INDEX_FILE)
        if self.engine == "usearch":
            self._index = lib.restore(path, view=True)  # memory-mapped
            if self._index is None:
                raise IndexIncompatibleError(f"{path}: not a usearch index; re-materialize the chunk_embeddings asset")
        elif self.engine == "faiss":
            self._index = lib.read_index(path, lib.IO_FLAG_MMAP | lib.IO_FLAG_READ_ONLY)
        else:
            self._index = lib.Index(space="ip", dim=self.dim)
            self._index.load_index(path, max_elements=self.count)
            self._index.set_num_threads(1)
        self._faiss = lib if self.engine == "faiss" else None

    def set_ef(self, ef: int) -> None:
        """The default search beam (raised per call to at least ``k``)."""
        self._ef = int(ef)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``k`` approximate nearest rows (positions in the vector matrix) and their scores."""
        k = min(int(k), self.count)
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        ef = max(self._ef, k)
        if self.engine == "usearch":
            with self._lock:  # expansion_search is index state
                self._index.expansion_search = ef
                found = self._index.search(q[0], k, threads=1)
            keys = np.asarray(found.keys, dtype=np.int64)
            scores = 1.0 - np.asarray(found.distances, dtype=np.float32)  # usearch "ip" distance = 1 - dot
        elif self.engine == "faiss":
            params = self._faiss.SearchParametersHNSW(efSearch=ef)  # type: ignore[union-attr]  # set with engine "faiss"
            dist, labels = self._index.search(q, k, params=params)
            keys, scores = labels[0].astype(np.int64), dist[0].astype(np.float32)
        else:
            with self._lock:
                self._index.set_ef(ef)
                labels, dist = self._index.knn_query(q, k=k)
            keys, scores = labels[0].astype(np.int64), (1.0 - dist[0]).astype(np.float32)
        ok = keys >= 0
        return keys[ok], scores[ok]

    def close(self) -> None:
        self._index = None


_OPEN: "weakref.WeakKeyDictionary[Any, AnnIndex | None]" = weakref.WeakKeyDictionary()
_OPEN_LOCK = threading.Lock()


def ann_for_library(library: Any) -> AnnIndex | None:
    """The library's ANN index, opened once per :class:`~ragspine_query.library.Library`.

    None when the snapshot has no ``ann`` artifact or its engine is not installed (the
    caller then scans exactly); an index whose size disagrees with the embedding matrix
    is refused (IndexIncompatibleError).
    """
    with _OPEN_LOCK:
        try:
            return _OPEN[library]
        except KeyError:
            pass
        except TypeError:  # not weak-referenceable: do not cache
            return _open(library)
        index = _open(library)
        _OPEN[library] = index
        return index


def _open(library: Any) -> AnnIndex | None:
    path = library.artifact_path("ann")
    if path is None:
        return None
    try:
        meta = json.loads((Path(path) / ANN_PARAMS_FILE).read_text(encoding="utf-8"))
        engine = str(meta["engine"])
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise IndexIncompatibleError(f"{path}: unreadable ANN params ({exc}); "
                                     "re-materialize the chunk_embeddings asset") from None
    if engine not in ENGINES:
        raise IndexIncompatibleError(f"{path}: unknown ANN engine {engine!r} (this reader knows {', '.join(ENGINES)}); "
                                     "upgrade ragspine or re-materialize the chunk_embeddings asset")
    if not engine_available(engine):
        return None
    index = AnnIndex(Path(path))
    emb = library.embeddings()
    if emb is None or index.count != emb.vectors.shape[0] or index.dim != emb.vectors.shape[1]:
        raise IndexIncompatibleError(f"{path}: the ANN index ({index.count} x {index.dim}) does not match the "
                                     "embedding matrix; re-materialize the chunk_embeddings asset")
    return index


def search_dense(vectors: np.ndarray, query: np.ndarray, k: int, index: AnnIndex | None,
                 allowed: np.ndarray | None = None, *, overfetch: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` vector positions by cosine, through ``index`` when given, else exactly.

    ``allowed`` (bool per vector position, or None) is honoured exactly: the ANN is asked
    for ``overfetch`` x k candidates divided by the allowed share, the disallowed ones are
    dropped, and when fewer than ``k`` survive the allowed rows are scanned exactly instead.
    A filter that keeps under ``MIN_ANN_SHARE`` of the rows (or at most ``overfetch`` x k
    rows) goes straight to the exact scan of those rows. Scores are recomputed exactly for the returned rows and ties
    broken by position, so results are deterministic and scores comparable to the exact scan.
    """
    from ragspine_core.dense.vector_store import top_k_cosine

    subset = None if allowed is None else np.flatnonzero(allowed)
    if index is None or k <= 0:
        return top_k_cosine(vectors, query, k, rows=subset)
    n = vectors.shape[0]
    share = 1.0 if subset is None else subset.size / max(n, 1)
    if subset is not None and (subset.size <= overfetch * k or share < MIN_ANN_SHARE):
        return top_k_cosine(vectors, query, k, rows=subset)  # a selective filter: the subset scan is cheap
    want = min(n, int(np.ceil(overfetch * k / max(share, 1e-9))))
    keys, _ = index.search(query, want)
    if allowed is not None:
        keys = keys[allowed[keys]]
    if keys.size < k and (subset is None or keys.size < subset.size):
        return top_k_cosine(vectors, query, k, rows=subset)
    keys = np.unique(keys)  # ascending: sequential gather from a memory map
    scores = (np.asarray(vectors[keys], dtype=np.float32) @ np.asarray(query, dtype=np.float32)).astype(np.float32)
    order = np.lexsort((keys, -scores))[:k]
    return keys[order].astype(np.int64), scores[order]
