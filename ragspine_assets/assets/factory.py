"""The Dagster assets, made from ``indexing.pipeline.STEPS``: one asset per step, one factory.

:func:`asset_for` turns a :class:`~ragspine_index.pipeline.Step` into an asset of
the same name: its inputs are the step's ``inputs`` (lineage), its checks the step's
``checks`` (blocking as declared), its code version the step's; the body builds the
:class:`~ragspine_index.step_api.StepContext`, calls the step
(:func:`~._util.run_asset_step`: a failed blocking check becomes a ``dg.Failure``), yields
one ``Output`` with a data version and UI metadata, then one ``AssetCheckResult`` per
outcome. A new ``Step`` in ``STEPS`` is a new asset with no other edit; how it shows in the
UI (description, group, kinds, metadata) comes from :data:`VIEWS` when it has an entry
there, else from :func:`default_view` (its function's docstring, the ``indexing`` group,
its value's ``content_hash`` and ``artifact_paths()``).

``chunk_embeddings`` also has a graph-backed form (plan -> one step per shard -> merge,
:mod:`.embeddings_fanout`), which ``definitions.assets_for`` puts in its place when
``RAGSPINE_EMBEDDING_SHARDS`` >= 2.
"""

import time
import typing
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import dagster as dg

from ragspine_core.records import RESTRICTED_SENSITIVITY

from ragspine_index.artifacts import LibraryPaths, sha256_json
from ragspine_index.steps.index_text import read_index_text
from ragspine_index.pipeline import STEPS, Step
from ragspine_assets.partitions import libraries_partitions
from ragspine_assets.resources import RagspineConfig
from ragspine_assets.assets._util import check_results, check_specs, is_restricted, md_list, md_table, run_asset_step, withheld_note

#: ``metadata(value, paths, seconds)``: the materialization's UI metadata. Only what may be
#: shown: never a RESTRICTED document's id, title or text (counts only).
Metadata = Callable[[Any, LibraryPaths, float], Mapping[str, Any]]


@dataclass(frozen=True)
class AssetView:
    """How one step's asset shows in Dagster, and what is genuinely special about it."""

    description: str
    group: str = "indexing"
    kinds: frozenset[str] = frozenset()
    metadata: Metadata = lambda value, paths, seconds: {}
    #: The data version of the step's value (``None``: Dagster's default).
    data_version: Callable[[Any], Optional[str]] = lambda value: None
    #: The asset's output from the step's value (``index_manifest`` outputs a small dict).
    output: Callable[[Any], Any] = lambda value: value
    #: Raised before the step runs, e.g. a missing library folder as a ``dg.Failure``.
    precheck: Optional[Callable[[LibraryPaths], None]] = None
    #: The step may call the ``summarizer_llm`` resource (``StepContext.make_llm``).
    llm: bool = False
    #: Owners and tags of the asset (none today).
    owners: tuple[str, ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)


def _hash_version(attribute: str) -> Callable[[Any], str]:
    return lambda value: getattr(value, attribute)[:32]


def default_view(step: Step) -> AssetView:
    """A step without an entry in :data:`VIEWS`: its function's docstring, the ``indexing``
    group, the value's ``content_hash`` (data version) and ``artifact_paths()``."""
    doc = (step.function.__doc__ or "").strip().split("\n\n", 1)[0]
    description = " ".join(doc.split()) or f"The {step.name} step of the index pipeline."

    def metadata(value: Any, paths: LibraryPaths, seconds: float) -> dict:
        found: dict[str, Any] = {}
        if isinstance(getattr(value, "content_hash", None), str):
            found["content_hash"] = value.content_hash
        if callable(getattr(value, "artifact_paths", None)):
            for name, path in sorted(value.artifact_paths().items()):
                found[f"artifact_{name}"] = dg.MetadataValue.path(str(path))
        found["seconds"] = round(seconds, 3)
        return found

    def data_version(value: Any) -> Optional[str]:
        content_hash = getattr(value, "content_hash", None)
        return content_hash[:32] if isinstance(content_hash, str) and content_hash else None

    return AssetView(description, metadata=metadata, data_version=data_version)


# --------------------------------------------------------------------- the views of STEPS
def _documents_precheck(paths: LibraryPaths) -> None:
    if not paths.raw.is_dir():
        raise dg.Failure(f"library folder {paths.raw} does not exist; create it or remove the partition "
                         f"{paths.library_id!r}")


def _documents_metadata(docs: Any, paths: LibraryPaths, seconds: float) -> dict:
    sens = Counter(d.sensitivity for d in docs.documents)
    langs = Counter(d.language for d in docs.documents)
    return {
        "library": paths.library_id,
        "raw_dir": dg.MetadataValue.path(str(paths.raw)),
        "documents": len(docs.documents),
        "parse_errors": len(docs.errors),
        "skipped_files": len(docs.skipped),
        "characters": sum(len(d.body) for d in docs.documents),
        "by_sensitivity": dict(sorted(sens.items())),
        "by_language": dict(sorted(langs.items())),
        "errors": md_list(docs.errors),
        "notes": md_list(docs.notes),
        # RESTRICTED documents appear only in the counts: no id, title or text of theirs
        # reaches the event log; open ones by id (no title: the log outlives a reclassification)
        "preview": md_table(["doc_id", "entity", "period", "sensitivity"],
                            [(d.doc_id, d.entity, d.period, d.sensitivity)
                             for d in docs.documents if not is_restricted(d.sensitivity)],
                            note=withheld_note(sens.get(RESTRICTED_SENSITIVITY, 0), "document")),
    }


def _chunks_metadata(update: Any, paths: LibraryPaths, seconds: float) -> dict:
    return {
        "chunk_store": dg.MetadataValue.path(str(paths.chunk_store)),
        "chunker": update.chunker,
        "documents_added": len(update.added),
        "documents_changed": len(update.changed),
        "documents_removed": len(update.removed),
        "documents_unchanged": update.unchanged,
        "documents_rechunked_identical": update.rechunked_identical,
        "documents_kept_on_parse_error": len(update.kept_on_error),
        "documents_withdrawn_on_parse_error": len(update.withdrawn_on_error),
        # of those, files whose sensitivity itself is in doubt: published snapshots serving them are withheld
        **({"documents_sensitivity_in_doubt": len(update.in_doubt)} if update.in_doubt else {}),
        "chunks_written": update.chunks_written,
        "active_chunks": update.n_active_chunks,
        "active_documents": update.n_active_docs,
        "active_hash": update.active_hash,
        # the semantic chunker only: which embedder drew the boundaries
        **({"boundary_embedder": update.boundary_embedder, "sentence_windows_embedded": update.sentences_embedded,
            "sentence_windows_from_cache": update.sentences_from_cache} if update.boundary_embedder else {}),
        # RESTRICTED documents are counted, never named
        "changed_documents": md_list(
            update.shown(update.added) + update.shown(update.changed)
            + [f"(removed) {d}" for d in update.shown(update.removed)]
            + [f"(withdrawn: failed to parse and may be RESTRICTED now) {d}" for d in update.shown(update.withdrawn_on_error)]
            + ([withheld_note(n, "document")] if (n := len(set(update.restricted) & set(
                update.added + update.changed + update.removed + update.withdrawn_on_error))) else [])),
    }


def _index_text_metadata(ref: Any, paths: LibraryPaths, seconds: float) -> dict:
    table = read_index_text(ref)
    # ids and sizes of the first open chunks, never their text: the event log outlives a
    # reclassification, and text shown today may be RESTRICTED tomorrow (issue 37)
    preview = [
        (c, len(t)) for c, t, s in zip(table.column("chunk_id").to_pylist(), table.column("index_text").to_pylist(),
                                       table.column("sensitivity").to_pylist())
        if not is_restricted(s)
    ][:5]
    return {
        "path": dg.MetadataValue.path(ref.path),
        "rows": ref.n_rows,
        "restricted_rows": ref.n_restricted,
        "content_hash": ref.content_hash,
        "preview": md_table(["chunk_id", "characters"], [(c[:12], n) for c, n in preview],
                            note=withheld_note(ref.n_restricted, "chunk")),
    }


def _bm25_metadata(ref: Any, paths: LibraryPaths, seconds: float) -> dict:
    return {
        "directory": dg.MetadataValue.path(ref.directory),
        "analyzer": ref.analyzer,
        "seconds": round(seconds, 3),
        **{k: v for k, v in ref.stats.items()},
    }


def embedding_metadata(ref: Any) -> dict:
    """The ``chunk_embeddings`` materialization metadata (the one-step and the fanned-out asset alike)."""
    return {
        "backend": ref.backend or "none",
        "model_id": ref.model_id or "none (BM25 only)",
        "dim": ref.dim,
        "vectors": ref.count,
        "embedded": ref.embedded,
        "reused_from_cache": ref.reused,
        "restricted_skipped": ref.skipped_restricted,
        "restricted_vectors_purged_from_cache": ref.purged_restricted,
        "seconds": round(ref.seconds, 3),
        "directory": dg.MetadataValue.path(ref.directory or "-"),
    }


def _summary_tree_metadata(ref: Any, paths: LibraryPaths, seconds: float) -> dict:
    per_level = ", ".join(f"L{i}: {n}" for i, n in enumerate(ref.nodes_per_level, start=1)) or "-"
    # the top level's nodes and sizes, never their summaries: the event log outlives a
    # reclassification of the documents they summarise (issue 37)
    preview = md_table(["node", "leaves"], [list(t)[:2] for t in ref.top_level], limit=8,
                       note=ref.note or f"{ref.restricted_skipped} RESTRICTED chunk(s) are never clustered")
    return {
        "levels": ref.levels,
        "nodes_per_level": per_level,
        "nodes": sum(ref.nodes_per_level),
        "leaves": ref.n_leaves,
        "mean_cluster_size": round(ref.mean_cluster_size, 3),
        "compression_ratio": round(ref.compression_ratio, 3),
        "summarizer_id": ref.summarizer_id,
        "vector_kind": ref.vector_kind,
        "llm_calls_made": ref.llm_calls,
        "llm_calls_cached": ref.llm_cached,
        "reused_unchanged_tree": ref.reused,
        "build_seconds": round(ref.seconds, 3),
        "restricted_chunks_excluded": ref.restricted_skipped,
        "top_level_preview": preview,
        "directory": dg.MetadataValue.path(ref.directory or "-"),
    }


def _relation_graph_metadata(ref: Any, paths: LibraryPaths, seconds: float) -> dict:
    # counts and sizes only: the event log outlives a reclassification, and an entity label
    # may be text of a document (a title, a heading) that is RESTRICTED tomorrow (issue 37);
    # `ragspine graph` shows the labels, read from the current snapshot
    return {
        **{f"nodes_{k}": int(v) for k, v in sorted(ref.node_counts.items())},
        **{f"edges_{k}": int(v) for k, v in sorted(ref.edge_counts.items())},
        "top_entity_degrees": [int(d) for _, d in ref.top_entities],
        "communities": ref.communities_count,
        "largest_communities": md_table(["community", "entities", "member chunks"],
                                        [[i + 1, *list(c)[1:3]] for i, c in enumerate(ref.communities)]) if ref.communities
        else dg.MetadataValue.md(f"_none: {ref.communities_note or 'no community of 3+ entities'}_"),
        "synonym_edges_built": ref.synonyms_built,
        "restricted_chunks_skipped": ref.restricted_chunks_skipped,
        "reused": ref.reused,
        "seconds": round(ref.seconds, 3),
        "llm_calls": ref.llm_calls,
        "llm_cached": ref.llm_cached,
        **({"note": ref.note} if ref.note else {}),
        "directory": dg.MetadataValue.path(ref.directory or "(none)"),
    }


def _manifest_metadata(published: Any, paths: LibraryPaths, seconds: float) -> dict:
    manifest = published.manifest
    return {
        "snapshot_id": published.snapshot_id,
        "previous_snapshot_id": published.previous_snapshot_id or "-",
        "changed": published.changed,
        "pinned_to": published.pinned_to or "-",
        "snapshot_dir": dg.MetadataValue.path(published.snapshot_dir),
        "documents": manifest["counts"]["documents"],
        "chunks": manifest["counts"]["chunks"],
        "restricted_chunks": manifest["counts"]["restricted_chunks"],
        "embedded_chunks": manifest["counts"]["embedded_chunks"],
        "analyzer": manifest["tokenizer"]["analyzer"],
        "chunker": f"{manifest['chunker']['name']}@{manifest['chunker']['version']}",
        "embedding_model": (manifest["embedding"] or {}).get("model_id", "none"),
        "artifact_sets": ", ".join(sorted(manifest.get("artifact_sets", {}))),
        "bytes": sum(a["bytes"] for a in manifest["artifacts"].values()),
        "manifest_hash": sha256_json(manifest)[:16],
    }


EMBEDDINGS_DESCRIPTION = ("float32 L2-normalised vectors of non-RESTRICTED chunks' index text, cached by (model id, "
                          "text hash); the backend comes from the ragspine resource's embedding_backend (a library's "
                          "_library.toml wins).")

#: How each step of :data:`STEPS` shows in Dagster (a step missing here gets :func:`default_view`).
VIEWS: dict[str, AssetView] = {
    "documents": AssetView(
        "Raw files under data/raw/<library>/ parsed and validated (front matter, .jsonl); bad files reported, not fatal.",
        kinds=frozenset({"python"}), metadata=_documents_metadata, data_version=_hash_version("content_hash"),
        precheck=_documents_precheck),
    "chunks": AssetView(
        "Versioned SQLite chunk store; only documents whose content hash or chunker changed are re-chunked.",
        kinds=frozenset({"sqlite"}), metadata=_chunks_metadata, data_version=_hash_version("active_hash")),
    "index_text": AssetView(
        "Contextual index text (title · entity · period · heading + chunk text) of every active chunk; what BM25 and "
        "the embedder see.",
        kinds=frozenset({"parquet"}), metadata=_index_text_metadata, data_version=_hash_version("content_hash")),
    "bm25_index": AssetView(
        "Okapi BM25 (k1 1.5, b 0.75) with impacts precomputed into memory-mappable CSC arrays, chunk and document "
        "fields.",
        kinds=frozenset({"numpy"}), metadata=_bm25_metadata, data_version=_hash_version("content_hash")),
    "chunk_embeddings": AssetView(
        EMBEDDINGS_DESCRIPTION, kinds=frozenset({"onnx", "numpy"}),
        metadata=lambda ref, paths, seconds: embedding_metadata(ref), data_version=_hash_version("content_hash")),
    "summary_tree": AssetView(
        "RAPTOR summary tree over the non-RESTRICTED chunks: seeded PCA + BIC-chosen Gaussian mixture "
        "clusters within a token budget, summarized (extractive by default, or the llm resource when the "
        "library's _library.toml sets summarizer = \"llm\": the ragspine resource's summarizer_llm; cached by member "
        "texts); a node's vector is the centroid of the leaf vectors it covers (extractive summaries), or its "
        "summary embedded like the chunks (llm summaries). "
        "Node texts are syntheses: retrieval answers a node with the leaf chunks it covers.",
        kinds=frozenset({"numpy", "parquet"}), metadata=_summary_tree_metadata,
        data_version=_hash_version("content_hash"), llm=True),
    "relation_graph": AssetView(
        "Typed entity/chunk graph (glossary, metadata, titles, offline extractor; mentions, co_occurs, glossary "
        "relations, synonyms; Louvain communities with extractive, cited summaries; with graph_extractor = \"llm\" "
        "also OpenIE triples from the llm resource, stamped "
        "model-derived/unverified) with CSR walk arrays for personalized PageRank; RESTRICTED chunks never read; "
        "none above graph_max_chunks open chunks.",
        kinds=frozenset({"parquet", "numpy"}), metadata=_relation_graph_metadata,
        data_version=_hash_version("content_hash"), llm=True),
    "index_manifest": AssetView(
        "Validates the artifacts, writes the manifest and atomically publishes an immutable snapshot (current "
        "pointer swap).",
        group="publishing", kinds=frozenset({"json"}), metadata=_manifest_metadata,
        data_version=lambda published: published.snapshot_id,
        output=lambda published: {"snapshot_id": published.snapshot_id, "snapshot_dir": published.snapshot_dir,
                                  "changed": published.changed}),
}


# --------------------------------------------------------------------------- the factory
def asset_for(step: Step, view: AssetView | None = None) -> dg.AssetsDefinition:
    """The Dagster asset of ``step`` (``view``: default :data:`VIEWS`, else :func:`default_view`)."""
    view = view or VIEWS.get(step.name) or default_view(step)

    def compute(context: dg.AssetExecutionContext, ragspine: RagspineConfig, **inputs: Any):
        paths = ragspine.library_paths(context.partition_key)
        if view.precheck is not None:
            view.precheck(paths)
        t0 = time.perf_counter()
        result = run_asset_step(step, context, ragspine, llm=view.llm, **{name: inputs[name] for name in step.inputs})
        seconds = time.perf_counter() - t0
        version = view.data_version(result.value)
        yield dg.Output(view.output(result.value), data_version=dg.DataVersion(version) if version else None,
                        metadata=dict(view.metadata(result.value, paths, seconds)))
        yield from check_results(result)

    compute.__name__ = compute.__qualname__ = step.name
    compute.__doc__ = view.description
    return dg.asset(
        name=step.name,
        ins={name: dg.AssetIn(name, dagster_type=_input_type(step, name)) for name in step.inputs},
        partitions_def=libraries_partitions,
        code_version=step.code_version,
        group_name=view.group,
        kinds=set(view.kinds) or None,
        owners=list(view.owners) or None,
        tags=dict(view.tags) or None,
        check_specs=check_specs(step) or None,
        description=view.description,
    )(compute)


def _input_type(step: Step, name: str) -> Any:
    """The type the step's function declares for input ``name`` (Dagster checks it on load)."""
    try:
        hint = typing.get_type_hints(step.function).get(name)
    except Exception:  # an annotation that does not resolve: no type check
        hint = None
    return hint if isinstance(hint, type) else dg.Any


def assets_for_steps(steps: tuple[Step, ...] = STEPS) -> list[dg.AssetsDefinition]:
    """One asset per step, in step order."""
    return [asset_for(step) for step in steps]
