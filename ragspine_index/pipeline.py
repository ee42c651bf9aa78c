"""The index pipeline, declared once: the steps, in asset order, and the orchestrator.

Every Dagster asset is made from its :class:`Step` by one factory
(``ragspine_assets/assets/factory.py``);
:func:`build_library` runs the same steps in the same order without Dagster (evaluation,
benchmarks, notebooks) and stops, like a Dagster run, when a blocking check fails.
Adding an artifact: a stage module with a step whose value has ``artifact_paths()``, one
``schema.register_artifact`` call, and one :class:`Step` here; its asset needs no other
edit (docs/architecture.md).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ragspine_core.dense.embedding import EmbeddingSpec

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.chunking import CHUNKER_VERSIONS
from ragspine_index.steps.chunks import CHUNK_CHECKS, ChunkUpdate, chunks_step
from ragspine_index.converters import CONVERTER_VERSIONS
from ragspine_index.steps.documents import DOCUMENTS_CHECKS, DocumentSet, documents_step
from ragspine_index.steps.chunk_embeddings import EMBEDDING_CHECKS, EmbeddingRef, embeddings_step
from ragspine_index.steps.index_text import IndexTextRef, index_text_step
from ragspine_index.steps.bm25_index import Bm25Ref, bm25_step
from ragspine_index.steps.index_manifest import manifest_step
from ragspine_index.publish import DEFAULT_KEEP_SNAPSHOTS, serving_now
from ragspine_index.locks import claim_library, release_library
from ragspine_index.repair import call_step
from ragspine_index.steps.relation_graph import RELATION_GRAPH_CHECKS, RELATION_GRAPH_VERSION, relation_graph_step
from ragspine_index.step_api import BlockingCheckError, CheckSpec, StepContext, StepResult
from ragspine_index.step_meter import measure_step
from ragspine_index.steps.summary_tree import SUMMARY_TREE_CHECKS, summary_tree_step


@dataclass(frozen=True, slots=True)
class Step:
    """One stage: the asset of the same name (made by ``assets/factory.py``) calls
    ``function`` and reports ``checks``."""

    name: str
    function: Callable[..., StepResult]
    #: Upstream step names, passed as keyword arguments of the same names.
    inputs: tuple[str, ...] = ()
    checks: tuple[CheckSpec, ...] = ()
    #: Names in ``schema.ARTIFACT_REGISTRY`` this step's output carries into the snapshot.
    artifacts: tuple[str, ...] = ()
    #: The asset's code version (bump it when the step's output changes for the same input).
    code_version: str = "1"


#: The chunk asset's code version carries every chunker's version, so changing a chunker
#: marks chunks and everything downstream unsynced in the UI.
#: A converter's version is part of both: a converter change shows as unsynced in Dagster.
_CONVERTERS = ",".join(f"{k}@{v}" for k, v in sorted(CONVERTER_VERSIONS.items()))
DOCUMENTS_CODE_VERSION = f"1+{_CONVERTERS}"
CHUNKS_CODE_VERSION = "1+" + ",".join(f"{k}@{v}" for k, v in sorted(CHUNKER_VERSIONS.items())) + f"+{_CONVERTERS}"

STEPS: tuple[Step, ...] = (
    Step("documents", documents_step, (), DOCUMENTS_CHECKS, code_version=DOCUMENTS_CODE_VERSION),
    Step("chunks", chunks_step, ("documents",), CHUNK_CHECKS, code_version=CHUNKS_CODE_VERSION),
    Step("index_text", index_text_step, ("chunks",)),
    Step("bm25_index", bm25_step, ("index_text", "documents"), artifacts=("bm25", "bm25_doc", "bm25_blend", "bm25_public"),
         code_version="5"),  # 2: bm25_blend; 3: k1 by language (library_settings.bm25_params_for); 4: statistics per language in mixed libraries; 5: bm25_public (statistics over the PUBLIC rows)
    Step("chunk_embeddings", embeddings_step, ("index_text", "documents"), EMBEDDING_CHECKS, artifacts=("embeddings", "ann"),
         code_version="2"),  # 2: the ann artifact for libraries above AnnConfig.min_vectors
    Step("summary_tree", summary_tree_step, ("index_text", "chunk_embeddings", "documents"), SUMMARY_TREE_CHECKS,
         artifacts=("summary_tree",), code_version="2"),
    Step("relation_graph", relation_graph_step, ("chunks", "index_text", "documents"), RELATION_GRAPH_CHECKS,
         artifacts=("relation_graph",), code_version=RELATION_GRAPH_VERSION),
    Step("index_manifest", manifest_step, ("documents", "chunks", "index_text", "bm25_index", "chunk_embeddings",
                                           "summary_tree", "relation_graph"),
         artifacts=("chunks", "glossary")),
)
STEP_BY_NAME: dict[str, Step] = {s.name: s for s in STEPS}
#: Recorded in every manifest (part of the snapshot id).
CODE_VERSIONS: dict[str, str] = {s.name: s.code_version for s in STEPS}


def run_step(step: Step, ctx: StepContext, values: Mapping[str, Any]) -> StepResult:
    """Run one step on the upstream ``values``; raise when one of its blocking checks fails."""
    with measure_step(step.name):  # `ragspine bench --ingest` (a no-op otherwise)
        result = call_step(step, ctx, {name: values[name] for name in step.inputs})  # names the step, locates SQLite damage
    failed = result.failed_blocking()
    if failed:
        first = failed[0]
        raise BlockingCheckError(
            f"blocking check {step.name}.{first.name} failed"
            + (f": {first.message}" if first.message else "")
            + (f" (also failed: {', '.join(c.name for c in failed[1:])})" if failed[1:] else "")
            + f"; nothing was published, {serving_now(ctx.paths)}",
            step=step.name, check=first.name)
    return result


# ------------------------------------------------------------------ the whole pipeline
@dataclass(frozen=True, slots=True)
class BuildResult:
    docs: DocumentSet
    chunks: ChunkUpdate
    index_text: IndexTextRef
    bm25: Bm25Ref
    embeddings: EmbeddingRef
    snapshot_id: str
    snapshot_dir: str
    timings: dict


def build_library(paths: LibraryPaths, *, embedding: EmbeddingSpec | str = "none", cache_path: Path, run_id: str = "local",
                  code_versions: Mapping[str, str] | None = None, glossary_path: Path | None = None,
                  keep: int = DEFAULT_KEEP_SNAPSHOTS, progress: Callable[[str], None] | None = None,
                  make_backend: Callable[[str], Any] | None = None,
                  make_llm: Callable[[], Any] | None = None, ann: Any = None) -> BuildResult:
    """Run :data:`STEPS` in order (documents → … → index_manifest), exactly as a Dagster run.

    ``embedding`` is the run-level :class:`~ragspine_core.dense.embedding.EmbeddingSpec`
    (the caller, an edge, builds it from the settings it read: ``ragspine eval`` passes
    ``EmbeddingSpec.from_settings(settings, backend=...)``); a bare backend name is a spec
    of that name alone (no model folder, endpoint or key; nothing here reads the
    environment). The steps' worker processes and OCR languages are this process's
    :func:`~ragspine_index.machine.configure_machine` (the caller's edge sets them; the
    defaults otherwise). A library's
    ``_library.toml`` ``embedding`` wins (:func:`~.library_settings.resolve_library_settings`,
    shared with the assets).
    ``glossary_path`` is published as the snapshot's glossary when it exists.
    ``make_llm()`` gives the LLM provider of a library whose ``summarizer`` is ``llm``.
    ``ann`` (an ``AnnConfig``) sets when the embeddings step builds the ANN index.
    ``code_versions`` default to the assets' (:data:`CODE_VERSIONS`), so the same input
    gives the same snapshot id as ``ragspine ingest``.

    Raises:
        BlockingCheckError: a blocking check failed (the message names it); nothing was
            published and ``current`` keeps serving the previous snapshot.
    """
    ctx = StepContext(paths=paths, cache_path=Path(cache_path), run_id=run_id, embedding=EmbeddingSpec.coerce(embedding),
                      make_backend=make_backend, glossary_path=glossary_path, keep=keep,
                      code_versions=dict(CODE_VERSIONS if code_versions is None else code_versions),
                      log=progress or (lambda msg: None), make_llm=make_llm, ann=ann)
    values: dict[str, Any] = {}
    timings: dict[str, float] = {}
    claim = f"{run_id}-{os.getpid()}" if run_id == "local" else run_id  # one writer per library (locks.py)
    claim_library(paths, claim, step="documents")
    try:
        for step in STEPS:
            t0 = time.perf_counter()
            values[step.name] = run_step(step, ctx, values).value
            timings[step.name] = time.perf_counter() - t0
    finally:
        release_library(paths, claim)
    published = values["index_manifest"]
    return BuildResult(values["documents"], values["chunks"], values["index_text"], values["bm25_index"],
                       values["chunk_embeddings"], published.snapshot_id, published.snapshot_dir, timings)
