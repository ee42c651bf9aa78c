"""Publication re-verifies every derived artifact against the current chunks (issue 28).

``index_manifest`` publishes whatever ``chunk_embeddings``, ``summary_tree`` and
``relation_graph`` values it is handed. In a partial Dagster run (say ``documents,
chunks, index_text, bm25_index, index_manifest``) those are the *previous*
materializations, built while a since-reclassified document was open: its vector, its
sentences in tree nodes, its names as graph nodes. Their blocking checks ran against the
chunks of that earlier run, not against what is being published.

So before publishing, :func:`verify_upstream` checks each upstream artifact against
the chunk store as it is now, whether or not its asset ran (nothing is built here):

* ``index_text``: its content hash is the one of the active chunks now (a stale one makes
  every artifact built on it stale);
* ``bm25_index``: its content hash is the one of this index text and these documents;
* vectors: built from exactly the open rows' current index text (their content hash is
  recomputed), and no vector of a RESTRICTED row;
* summary tree: its leaves are exactly the open rows, no node repeats RESTRICTED text
  (the tree fingerprints of the chunk store as it is now) and no node cites a document
  that is RESTRICTED now; stale vectors make it stale too;
* relation graph: it has the current rows, no chunk node or edge on a RESTRICTED row and
  every entity label found in open text it is linked to (``verify_relation_graph`` on
  the current chunks).

A stale artifact blocks publication (``index_manifest.artifacts_current``, a
:class:`StaleUpstreamError` naming the stale assets); Dagster re-materializes them in a
run of their own, visible in the UI (``ragspine_assets/stale.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pyarrow.parquet as pq

from ragspine_core import schema
from ragspine_core.records import is_restricted

from ragspine_index.artifacts import sha256_json
from ragspine_index.chunk_store import ChunkStore
from ragspine_index.library_settings import resolve_library_settings
from ragspine_index.publish import serving_now
from ragspine_index.steps.bm25_index import bm25_content_hash
from ragspine_index.steps.index_text import IndexTextRef, index_text_hash, read_index_text
from ragspine_index.step_api import BlockingCheckError, StepContext

#: The guard's name in ``BlockingCheckError.check``.
ARTIFACTS_CURRENT = "artifacts_current"


def _open_rows(index_text: IndexTextRef) -> tuple[np.ndarray, list[str], list[str]]:
    table = read_index_text(index_text)
    sens = table.column("sensitivity").to_pylist()
    texts = table.column("index_text").to_pylist()
    rows = np.asarray([i for i, s in enumerate(sens) if not is_restricted(s)], dtype=np.int64)
    return rows, sens, texts


def embeddings_problem(ref: Any, index_text: IndexTextRef) -> str | None:
    """Why the vectors ``ref`` are not those of this publication's chunks (None: they are)."""
    from ragspine_index.steps.chunk_embeddings import text_hash

    if ref is None or not getattr(ref, "directory", None):
        return None  # no vectors: nothing can leak through them
    if not Path(ref.directory).is_dir():
        return "chunk_embeddings points at a work folder that was removed"
    rows, sens, texts = _open_rows(index_text)
    expected = sha256_json([ref.model_id, index_text.content_hash, sha256_json([text_hash(texts[r]) for r in rows])])
    if ref.content_hash != expected:
        return "chunk_embeddings was built from other chunks than the ones being published"
    written = np.load(Path(ref.directory) / schema.EMB_ROWS)
    if not np.array_equal(written.astype(np.int64), rows) or any(is_restricted(sens[int(r)]) for r in written):
        return "chunk_embeddings does not hold exactly the vectors of the open chunks"
    return None


def summary_tree_problem(ref: Any, index_text: IndexTextRef, store_path: Path) -> str | None:
    """Why the summary tree ``ref`` may not be published with these chunks (None: it may)."""
    from ragspine_index.steps.summary_tree import restricted_chunk_texts, restricted_fingerprints, verify_summary_tree

    if ref is None or not getattr(ref, "directory", None):
        return None
    d = Path(ref.directory)
    if not d.is_dir():
        return "summary_tree points at a work folder that was removed"
    rows, sens, _ = _open_rows(index_text)
    if not np.array_equal(np.load(d / schema.TREE_LEAF_ROWS).astype(np.int64), rows):
        return "summary_tree was built over other chunks than the open ones being published"
    with ChunkStore(store_path) as store:
        open_texts = [r[0] for r in store.execute_read(
            f"SELECT text FROM {schema.CHUNK_TABLE} WHERE active = 1 AND upper(trim(sensitivity)) != 'RESTRICTED'")]
        restricted_docs = store.restricted_doc_ids()
    prints = restricted_fingerprints(restricted_chunk_texts(store_path), open_texts)
    restricted_rows = {i for i, s in enumerate(sens) if is_restricted(s)}
    found = verify_summary_tree(ref, prints, restricted_rows)
    if found["nodes_with_restricted_text"] or found["restricted_leaves"]:
        return "summary_tree holds text or leaves of documents that are RESTRICTED now"
    nodes = pq.read_table(d / schema.TREE_NODES)
    if "doc_ids" in nodes.column_names and restricted_docs:
        if any(doc in restricted_docs for ids in nodes.column("doc_ids").to_pylist() for doc in (ids or ())):
            return "summary_tree cites documents that are RESTRICTED now"
    return None


def relation_graph_problem(ref: Any, index_text: IndexTextRef, store_path: Path, glossary_path: Path | None) -> str | None:
    """Why the relation graph ``ref`` may not be published with these chunks (None: it may)."""
    from ragspine_core.glossary import Glossary

    from ragspine_index.graph.graph_input import read_graph_chunks
    from ragspine_index.graph.verify import verify_relation_graph

    if ref is None or not getattr(ref, "directory", None):
        return None
    if not Path(ref.directory).is_dir():
        return "relation_graph points at a work folder that was removed"
    chunks = read_graph_chunks(store_path)
    if len(chunks) != index_text.n_rows:
        return "relation_graph was built over other chunks than the ones being published"
    glossary = Glossary.load(glossary_path) if glossary_path is not None else None
    found = verify_relation_graph(Path(ref.directory), chunks, glossary)
    if any(found.values()):
        return "relation_graph has nodes, edges or names from chunks that are RESTRICTED now or changed since it was built"
    return None


#: The upstream assets publication verifies, in step order.
VERIFIED_ASSETS = ("index_text", "bm25_index", "chunk_embeddings", "summary_tree", "relation_graph")


class StaleUpstreamError(BlockingCheckError):
    """``index_manifest.artifacts_current`` failed: ``stale`` names the upstream assets to
    re-materialize (in step order) before this library can be published."""

    def __init__(self, message: str, *, stale: tuple[str, ...]) -> None:
        super().__init__(message, step="index_manifest", check=ARTIFACTS_CURRENT)
        self.stale = stale


def stale_upstream(ctx: StepContext, *, documents: Any, chunks: Any, index_text: IndexTextRef, bm25_index: Any,
                   chunk_embeddings: Any, more: Mapping[str, Any], glossary_path: Path | None) -> dict[str, str]:
    """``{asset: why}`` of the upstream artifacts that are not those of the chunks being
    published, in step order (empty: every one is current). Nothing is built or written.

    A stale ``index_text`` makes every artifact built on it stale; stale vectors make the
    summary tree stale (its node vectors are centroids of the leaf vectors).
    """
    store = Path(chunks.store_path)
    found: dict[str, str] = {}
    if index_text_hash(store) != index_text.content_hash or not Path(index_text.path).is_file():
        found["index_text"] = "index_text was built from other chunks than the ones being published"
        built_on_it = {"bm25_index": bm25_index, "chunk_embeddings": chunk_embeddings, **dict(more)}
        for name in (*VERIFIED_ASSETS[1:], *sorted(set(built_on_it) - set(VERIFIED_ASSETS))):
            if built_on_it.get(name) is not None:
                found[name] = f"{name} was built on that index_text"
        return found
    params = resolve_library_settings(documents, embedding=ctx.embedding).bm25
    if bm25_content_hash(index_text, documents, params=params) != getattr(bm25_index, "content_hash", None):
        found["bm25_index"] = "bm25_index was built from other index text than the one being published"
    problem = embeddings_problem(chunk_embeddings, index_text)
    if problem:
        found["chunk_embeddings"] = problem
    tree = more.get("summary_tree")
    if tree is not None:
        problem = summary_tree_problem(tree, index_text, store)
        if problem or "chunk_embeddings" in found:
            found["summary_tree"] = problem or "summary_tree was built on the stale chunk_embeddings"
    problem = relation_graph_problem(more.get("relation_graph"), index_text, store, glossary_path)
    if problem:
        found["relation_graph"] = problem
    return found


def verify_upstream(ctx: StepContext, *, documents: Any, chunks: Any, index_text: IndexTextRef, bm25_index: Any,
                    chunk_embeddings: Any, more: Mapping[str, Any], glossary_path: Path | None) -> None:
    """Publication's blocking check ``artifacts_current``: every upstream artifact is the
    one of the chunks being published, whether or not its asset ran in this run.

    Publication rebuilds nothing: a stale asset is re-materialized as a Dagster run of its
    own (``ragspine_assets.stale``: the ``stale_upstream_sensor`` launches a run of exactly
    the stale assets and ``index_manifest``), so every rebuild shows in the UI.

    Raises:
        StaleUpstreamError: the stale assets, named; nothing is published and the previous
            snapshot keeps serving.
    """
    stale = stale_upstream(ctx, documents=documents, chunks=chunks, index_text=index_text, bm25_index=bm25_index,
                           chunk_embeddings=chunk_embeddings, more=more, glossary_path=glossary_path)
    if not stale:
        return
    names = tuple(stale)
    raise StaleUpstreamError(
        f"blocking check index_manifest.{ARTIFACTS_CURRENT} failed for library {ctx.paths.library_id!r}: "
        f"{'; '.join(dict.fromkeys(stale.values()))}. Stale upstream: {', '.join(names)}. "
        f"stale_upstream_sensor launches a run of exactly {', '.join(names)} and index_manifest for this library "
        f"(or materialize them with index_manifest in the Dagster UI, or run `ragspine ingest`); nothing was "
        f"published, {serving_now(ctx.paths)}", stale=names)


__all__ = ["ARTIFACTS_CURRENT", "StaleUpstreamError", "VERIFIED_ASSETS", "embeddings_problem", "relation_graph_problem",
           "stale_upstream", "summary_tree_problem", "verify_upstream"]
