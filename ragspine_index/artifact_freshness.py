"""Publication re-verifies every derived artifact against the current chunks (issue 28).

``index_manifest`` publishes whatever ``chunk_embeddings``, ``summary_tree`` and
``relation_graph`` values it is handed. In a partial Dagster run (say ``documents,
chunks, index_text, bm25_index, index_manifest``) those are the *previous*
materializations, built while a since-reclassified document was open: its vector, its
sentences in tree nodes, its names as graph nodes. Their blocking checks ran against the
chunks of that earlier run, not against what is being published.

So before publishing, :func:`refresh_stale_artifacts` re-derives ``index_text`` and the
BM25 arrays from the chunk store (content-addressed: the existing folders when current)
and re-checks each derived artifact against them, whether or not its asset ran:

* vectors: built from exactly the open rows' current index text (their content hash is
  recomputed), and no vector of a RESTRICTED row;
* summary tree: its leaves are exactly the open rows, no node repeats RESTRICTED text
  (the tree fingerprints of the chunk store as it is now) and no node cites a document
  that is RESTRICTED now;
* relation graph: it has the current rows, no chunk node or edge on a RESTRICTED row and
  every entity label found in open text it is linked to (``verify_relation_graph`` on
  the current chunks).

A stale artifact is rebuilt here by its own step (content-addressed: cheap when nothing
changed), its blocking checks honoured; if it is still not current, publication is
blocked with a message naming the asset to materialize.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pyarrow.parquet as pq

from ragspine_core import schema
from ragspine_core.records import is_restricted

from ragspine_index.artifacts import sha256_json
from ragspine_index.chunk_store import ChunkStore
from ragspine_index.steps.index_text import IndexTextRef, read_index_text
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


def _raise_if_failed(name: str, result: Any) -> Any:
    failed = result.failed_blocking()
    if failed:
        first = failed[0]
        raise BlockingCheckError(
            f"blocking check {name}.{first.name} failed while index_manifest rebuilt a stale {name}"
            + (f": {first.message}" if first.message else "") + "; nothing was published",
            step=name, check=first.name)
    return result.value


@dataclass(frozen=True, slots=True)
class Refreshed:
    """The values :func:`refresh_stale_artifacts` hands to publication."""

    index_text: IndexTextRef
    bm25_index: Any
    chunk_embeddings: Any
    more: dict[str, Any]
    rebuilt: tuple[str, ...]


def refresh_stale_artifacts(ctx: StepContext, *, documents: Any, chunks: Any, index_text: IndexTextRef, bm25_index: Any,
                            chunk_embeddings: Any, more: Mapping[str, Any], glossary_path: Path | None) -> Refreshed:
    """Every artifact current for this publication, stale ones rebuilt by their own step
    (``rebuilt`` names them). ``index_text`` and the BM25 arrays are content-addressed:
    re-deriving them from the chunk store finds the existing folders when they are current.

    Raises:
        BlockingCheckError: a rebuilt artifact failed its blocking check, or is still not
            current (the message names the asset to materialize); nothing is published.
    """
    from ragspine_index.steps.chunk_embeddings import embeddings_step
    from ragspine_index.steps.relation_graph import relation_graph_step
    from ragspine_index.steps.summary_tree import summary_tree_step

    from ragspine_index.steps.index_text import export_index_text
    from ragspine_index.steps.bm25_index import build_bm25
    from ragspine_index.library_settings import resolve_library_settings

    store = Path(chunks.store_path)
    more = dict(more)
    rebuilt: list[str] = []
    current_text = export_index_text(ctx.paths, store)
    if current_text.content_hash != index_text.content_hash:
        index_text = current_text
        rebuilt.append("index_text")
    params = resolve_library_settings(documents, embedding=ctx.embedding).bm25
    current_bm25 = build_bm25(ctx.paths, index_text, documents, params=params)
    if current_bm25.content_hash != getattr(bm25_index, "content_hash", None):
        bm25_index = current_bm25
        rebuilt.append("bm25_index")
    if rebuilt:
        ctx.log(f"index_manifest: {', '.join(rebuilt)} rebuilt for the chunks being published")
    if embeddings_problem(chunk_embeddings, index_text):
        ctx.log("index_manifest: chunk_embeddings is stale for these chunks; rebuilding it")
        chunk_embeddings = _raise_if_failed("chunk_embeddings", embeddings_step(ctx, index_text=index_text, documents=documents))
        rebuilt.append("chunk_embeddings")
    tree = more.get("summary_tree")
    if tree is not None and ("chunk_embeddings" in rebuilt or summary_tree_problem(tree, index_text, store)):
        ctx.log("index_manifest: summary_tree is stale for these chunks; rebuilding it")
        more["summary_tree"] = _raise_if_failed("summary_tree", summary_tree_step(
            ctx, index_text=index_text, chunk_embeddings=chunk_embeddings, documents=documents))
        rebuilt.append("summary_tree")
    graph = more.get("relation_graph")
    if graph is not None and relation_graph_problem(graph, index_text, store, glossary_path):
        ctx.log("index_manifest: relation_graph is stale for these chunks; rebuilding it")
        more["relation_graph"] = _raise_if_failed("relation_graph", relation_graph_step(
            ctx, chunks=chunks, index_text=index_text, documents=documents))
        rebuilt.append("relation_graph")
    problems = [p for p in (
        embeddings_problem(chunk_embeddings, index_text),
        summary_tree_problem(more.get("summary_tree"), index_text, store),
        relation_graph_problem(more.get("relation_graph"), index_text, store, glossary_path),
    ) if p]
    if problems:
        raise BlockingCheckError(
            f"blocking check index_manifest.{ARTIFACTS_CURRENT} failed: {'; '.join(problems)}. Materialize "
            "chunk_embeddings, summary_tree and relation_graph together with index_manifest (or run `ragspine ingest`); "
            "nothing was published", step="index_manifest", check=ARTIFACTS_CURRENT)
    return Refreshed(index_text, bm25_index, chunk_embeddings, more, tuple(rebuilt))


__all__ = ["ARTIFACTS_CURRENT", "Refreshed", "embeddings_problem", "refresh_stale_artifacts", "relation_graph_problem",
           "summary_tree_problem"]
