"""Stage 5 fanned out: one library's embedding split into shards that run as separate steps.

``chunk_embeddings`` (:func:`~.embeddings.embeddings_step`) embeds a library in one step of
one process. With ``RAGSPINE_EMBEDDING_SHARDS`` = N >= 2 the Dagster asset of the same
name is a graph instead (``ragspine_assets.assets.embeddings_fanout``): these three plain
functions, each a step the executor may send to any worker.

1. :func:`plan_embedding_shards` purges the cached vectors of RESTRICTED texts (exactly
   as the serial step does, before anything is read from the cache), finds the texts the
   cache lacks, cuts their sorted list into the serial build's blocks of
   :data:`~.embeddings.EMBED_BLOCK` and deals whole, contiguous runs of blocks to at most
   N shards (never more shards than blocks; at least one).
2. :func:`embed_shard` (one step per shard, on any worker) embeds its blocks and writes
   the vectors into the shared embedding cache (SQLite in WAL mode with a 60 s busy
   timeout, so steps in several processes can fill it at once).
3. :func:`merge_embedding_shards` reads every row's vector from the cache (it builds the
   backend: an ensemble's rows are assembled from its part models' entries) and writes the
   one ``embeddings`` artifact (and the ANN index, in this step, when the library wants
   one), with the serial step's checks.

Every ``backend.embed`` call gets the same texts in the same order as in a serial build,
so the merged artifact is byte-identical to it (same content hash, same snapshot id) given
workers on the same runtime. (A vector's last bits can depend on the CPU's instruction
set: workers on different CPU generations may differ from a serial build there, as two
serial builds on those machines would.)

Nothing here imports Dagster.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ragspine_core.errors import RagspineError
from ragspine_core.records import is_restricted

from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.chunk_embeddings import (EMBED_BLOCK, EmbeddingCache, assemble_embeddings, embed_block,
                         embedding_input, embedding_step_result, library_ann_config, missing_hashes, no_backend_ref,
                         purge_restricted_vectors, text_hash)
from ragspine_index.steps.index_text import IndexTextRef, read_index_text
from ragspine_index.library_settings import resolve_library_settings
from ragspine_index.step_api import Progress, StepContext, StepResult

__all__ = ["EmbeddingShard", "ShardPlan", "ShardResult", "embed_shard", "fanout_metadata", "merge_embedding_shards",
           "plan_embedding_shards", "shard_count", "shard_summary", "split_blocks"]


@dataclass(frozen=True, slots=True)
class EmbeddingShard:
    """One shard's work: whole blocks of the library's missing texts."""

    index: int
    #: How many shards the library's embedding was split into.
    of: int
    #: The resolved embedding spec and the model id the planner saw (a worker must agree).
    spec: str
    model_id: str | None
    #: The number of the shard's first block in the serial build.
    first_block: int
    #: The index-text row of each text to embed, in the serial build's order (sorted by hash).
    rows: tuple[int, ...] = ()

    @property
    def blocks(self) -> int:
        return -(-len(self.rows) // EMBED_BLOCK)


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """What the planner found; the merge step reports it."""

    spec: str
    model_id: str | None
    dim: int
    #: Vectors the artifact holds (non-RESTRICTED rows) and their distinct texts.
    rows: int
    texts: int
    #: Distinct texts already in the cache, and those the shards embed.
    cached: int
    missing: int
    skipped_restricted: int
    purged_restricted: int
    shards: tuple[EmbeddingShard, ...]
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class ShardResult:
    """What one shard did, and where it ran (host, process, Celery worker when there is one)."""

    index: int
    texts: int
    blocks: int
    seconds: float
    host: str
    pid: int
    worker: str = ""


def shard_count(requested: int, missing: int) -> int:
    """Shards for ``missing`` texts: at most ``requested``, at most one per block, at least one."""
    blocks = -(-missing // EMBED_BLOCK)
    return max(1, min(int(requested), blocks))


def split_blocks(blocks: int, shards: int) -> list[range]:
    """``blocks`` block numbers in ``shards`` contiguous runs whose sizes differ by at most one."""
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    size, extra = divmod(blocks, shards)
    out, start = [], 0
    for k in range(shards):
        stop = start + size + (1 if k < extra else 0)
        out.append(range(start, stop))
        start = stop
    return out


def plan_embedding_shards(ctx: StepContext, index_text: IndexTextRef, documents: DocumentSet, shards: int) -> ShardPlan:
    """Purge RESTRICTED vectors, find the missing texts and deal their blocks to <= ``shards`` shards."""
    t0 = time.perf_counter()
    resolved = resolve_library_settings(documents, embedding=ctx.embedding).embedding_spec
    spec = resolved.backend  # the plan names the backend; each shard's worker has the rest of the spec
    inp = embedding_input(index_text, ctx.paths.chunk_store)
    purged = purge_restricted_vectors(ctx.cache_path, inp.purge)
    backend = ctx.backend(resolved)
    distinct = len(set(inp.hashes))
    if backend is None:
        return ShardPlan(spec, None, 0, len(inp.rows), distinct, 0, 0, inp.skipped, purged,
                         (EmbeddingShard(0, 1, spec, None, 0),), time.perf_counter() - t0)
    cache = EmbeddingCache(ctx.cache_path)
    try:
        _, missing = missing_hashes(cache, backend, inp.hashes)
    finally:
        cache.close()
    row_of = dict(zip(inp.hashes, inp.rows))
    n = shard_count(shards, len(missing))
    planned = []
    for k, blocks in enumerate(split_blocks(-(-len(missing) // EMBED_BLOCK), n)):
        part = missing[blocks.start * EMBED_BLOCK:blocks.stop * EMBED_BLOCK]
        planned.append(EmbeddingShard(k, n, spec, backend.model_id, blocks.start, tuple(row_of[h] for h in part)))
    ctx.log(f"planned {n} shard(s) for {len(missing)} new texts ({distinct - len(missing)} of {distinct} cached)")
    return ShardPlan(spec, backend.model_id, int(backend.dim), len(inp.rows), distinct, distinct - len(missing),
                     len(missing), inp.skipped, purged, tuple(planned), time.perf_counter() - t0)


def _celery_worker() -> str:
    """The Celery worker's node name when this step runs in a Celery task, else ``""``."""
    celery = sys.modules.get("celery")
    if celery is None:
        return ""
    try:
        task = celery.current_task
        return str(task.request.hostname or "") if task is not None else ""
    except Exception:  # no task context
        return ""


def embed_shard(ctx: StepContext, index_text: IndexTextRef, shard: EmbeddingShard, *, batch_size: int = 32) -> ShardResult:
    """Embed the shard's blocks into the shared cache (the vectors travel through it).

    Raises:
        RagspineError: a planned row is RESTRICTED in this index text (never embedded), or
            this worker's backend has another model id than the planner's (the message
            says to give every worker the same embedding settings).
    """
    t0 = time.perf_counter()
    where: dict[str, Any] = dict(host=socket.gethostname(), pid=os.getpid(), worker=_celery_worker())
    if not shard.rows:
        return ShardResult(shard.index, 0, 0, time.perf_counter() - t0, **where)
    table = read_index_text(index_text)
    sens = table.column("sensitivity").to_pylist()
    if any(is_restricted(sens[r]) for r in shard.rows):
        raise RagspineError(f"embedding shard {shard.index + 1}/{shard.of} lists a RESTRICTED row; nothing was embedded "
                            "by this shard — re-materialize chunk_embeddings")
    backend = ctx.backend(shard.spec)
    if backend is None or backend.model_id != shard.model_id:
        raise RagspineError(
            f"embedding shard {shard.index + 1}/{shard.of}: this worker's backend for {shard.spec!r} is "
            f"{getattr(backend, 'model_id', None)!r}, the planner's was {shard.model_id!r}; give every worker the same "
            "RAGSPINE_EMBEDDING* settings and model files")
    all_texts = table.column("index_text").to_pylist()
    texts = [all_texts[r] for r in shard.rows]
    hashes = [text_hash(t) for t in texts]
    cache = EmbeddingCache(ctx.cache_path)
    try:
        for i in range(0, len(texts), EMBED_BLOCK):
            embed_block(backend, cache, texts[i:i + EMBED_BLOCK], hashes[i:i + EMBED_BLOCK], batch_size=batch_size)
            ctx.progress(Progress(f"shard {shard.index + 1}/{shard.of}: embedded", min(i + EMBED_BLOCK, len(texts)),
                                  len(texts), "new texts"))
    finally:
        cache.close()
    return ShardResult(shard.index, len(texts), shard.blocks, time.perf_counter() - t0, **where)


def merge_embedding_shards(ctx: StepContext, index_text: IndexTextRef, documents: DocumentSet, plan: ShardPlan,
                           results: Sequence[ShardResult], *, batch_size: int = 32) -> StepResult:
    """Write the one ``embeddings`` artifact from the cache the shards filled (checks included).

    A vector the cache no longer holds (purged or replaced by another run meanwhile) is
    embedded here, and the step log says how many; every other row's vector is the one
    its shard wrote or that was cached before.

    Raises:
        RagspineError: a shard's result is missing or doubled.
    """
    t0 = time.perf_counter()
    done = sorted(r.index for r in results)
    if done != list(range(len(plan.shards))):
        raise RagspineError(f"the merge got results of shards {done}, planned {len(plan.shards)}; "
                            "re-materialize chunk_embeddings")
    inp = embedding_input(index_text, ctx.paths.chunk_store)
    if plan.model_id is None:
        return embedding_step_result(no_backend_ref(index_text, inp.skipped, plan.purged_restricted), index_text)
    backend = ctx.backend(plan.spec)  # an ensemble's rows are assembled from its parts' cache entries
    if backend is None or backend.model_id != plan.model_id:
        raise RagspineError(f"the merge step's backend for {plan.spec!r} is {getattr(backend, 'model_id', None)!r}, "
                            f"the planner's was {plan.model_id!r}; give every worker the same RAGSPINE_EMBEDDING* "
                            "settings and model files")
    cache = EmbeddingCache(ctx.cache_path)
    try:
        vectors, lost = missing_hashes(cache, backend, inp.hashes)
        if lost:
            text_of = inp.text_of()
            for i in range(0, len(lost), EMBED_BLOCK):
                part = lost[i:i + EMBED_BLOCK]
                vectors.update(embed_block(backend, cache, [text_of[h] for h in part], part, batch_size=batch_size))
            ctx.log(f"{len(lost)} vector(s) were no longer in the embedding cache; embedded them in the merge step")
    finally:
        cache.close()
    ref = assemble_embeddings(ctx.paths, index_text, inp, vectors, model_id=plan.model_id, backend_spec=plan.spec,
                              dim=plan.dim, embedded=plan.missing, purged=plan.purged_restricted,
                              ann=library_ann_config(ctx, documents), store_path=ctx.paths.chunk_store, t0=t0)
    # the work of every step of the fan-out, as the serial step reports its own
    ref = replace(ref, seconds=ref.seconds + plan.seconds + sum(r.seconds for r in results))
    return embedding_step_result(ref, index_text)


def shard_summary(plan: ShardPlan, results: Sequence[ShardResult]) -> list[tuple]:
    """One row per shard for the UI: shard, blocks, texts, seconds, where it ran."""
    by_index = {r.index: r for r in results}
    rows = []
    for s in plan.shards:
        r = by_index.get(s.index)
        rows.append((f"{s.index + 1}/{s.of}", s.blocks, len(s.rows), round(r.seconds, 3) if r else "-",
                     (r.worker or f"{r.host}:{r.pid}") if r else "-"))
    return rows


def fanout_metadata(plan: ShardPlan, results: Sequence[ShardResult]) -> dict:
    """Plain counts of the fan-out for the asset's metadata (no text, no document names)."""
    return {"shards": len(plan.shards), "texts_planned": plan.missing, "texts_cached_at_plan": plan.cached,
            "shard_workers": sorted({r.worker or f"{r.host}:{r.pid}" for r in results if r.texts})}
