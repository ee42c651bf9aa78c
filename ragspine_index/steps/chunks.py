"""Stage 2, ``chunks``: the versioned SQLite chunk store, updated incrementally, and its checks."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import chain
from pathlib import Path
from typing import Any, Iterator, Sequence

from ragspine_core import schema
from ragspine_core.records import Chunk, is_restricted

from ragspine_index.artifacts import sha256_json
from ragspine_index.chunk_store import ChunkStore
from ragspine_index.chunking import SemanticChunker, build_chunks, chunker_signature, make_chunker
from ragspine_index.chunking.semantic_embedding import SentenceEmbeddings
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.library_settings import chunker_kwargs, resolve_library_settings
from ragspine_index.publish import release_withheld, withdraw_reclassified, withhold_unclassified
from ragspine_index.source_documents.model import SourceDocument
from ragspine_index.step_api import CheckSpec, StepContext, StepResult, outcome
from ragspine_index.workers import batches, ordered_map

@dataclass(frozen=True, slots=True)
class ChunkUpdate:
    """What an incremental chunking pass did, and a hash of the resulting active set."""

    library_id: str
    store_path: str
    chunker: str
    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]
    unchanged: int
    kept_on_error: tuple[str, ...]
    rechunked_identical: int
    chunks_written: int
    n_active_chunks: int
    n_active_docs: int
    active_hash: str
    #: Documents of failing files that may now be RESTRICTED: withdrawn, not kept.
    withdrawn_on_error: tuple[str, ...] = ()
    #: Of those, the documents whose sensitivity itself is in doubt
    #: (:attr:`DocumentSet.doubt_paths`): no published snapshot serves them
    #: (``publish.withhold_unclassified``) until a run reads their file again.
    in_doubt: tuple[str, ...] = ()
    #: Which of the doc ids above are (or were, before this pass) RESTRICTED: reports
    #: show them as a count only.
    restricted: tuple[str, ...] = ()
    #: The semantic chunker only: which embedder drew the boundaries ("" otherwise), and
    #: how many sentence windows were embedded now vs. served from the cache.
    boundary_embedder: str = ""
    sentences_embedded: int = 0
    sentences_from_cache: int = 0

    def shown(self, doc_ids: Sequence[str]) -> list[str]:
        """``doc_ids`` without the RESTRICTED ones (for the UI and logs)."""
        hidden = set(self.restricted)
        return [d for d in doc_ids if d not in hidden]

    def without_restricted_ids(self) -> "ChunkUpdate":
        """The update as it may be stored outside the data plane (Dagster's step outputs):
        the id lists keep only open documents and ``restricted`` is emptied. Downstream
        steps read the chunk store, never these lists."""
        shown: dict[str, Any] = {name: tuple(self.shown(getattr(self, name))) for name in _ID_LISTS}
        return replace(self, **shown, restricted=())


_ID_LISTS = ("added", "changed", "removed", "kept_on_error", "withdrawn_on_error", "in_doubt")


def update_chunk_store(docs: DocumentSet, store_path: Path, *, run_id: str = "",
                       sentences: SentenceEmbeddings | None = None) -> ChunkUpdate:
    """Re-chunk only documents whose content hash (or chunker) changed; withdraw removed ones.

    A document whose source file failed to parse this time keeps its previous chunks
    (bad input loses nothing) — unless the file may now be RESTRICTED
    (:attr:`DocumentSet.withdraw_paths`): then its chunks are withdrawn (fail closed).

    ``sentences`` binds the semantic chunker's embedder per document (without it the
    offline lexical embedder is used); other chunkers ignore it.
    """
    cfg = docs.config
    if sentences is None:
        sentences = SentenceEmbeddings(None, docs.library_id)
    # the chunker as open documents get it (its version names the boundary embedder); the
    # signature adds non-default settings, so changing one re-chunks like a new version
    chunker = sentences.bind(make_chunker(cfg.chunker, **chunker_kwargs(cfg)))
    chunker_id = f"{chunker.name}@{chunker_signature(chunker)}"
    added: list[str] = []
    changed: list[str] = []
    removed: list[str] = []
    kept: list[str] = []
    withdrawn: list[str] = []
    in_doubt: list[str] = []
    unchanged = 0
    rechunked_identical = 0
    written = 0
    with ChunkStore(store_path) as store:
        known = store.document_hashes()
        known_chunkers = store.document_chunkers()
        source_paths = {r["doc_id"]: r["source_path"] for r in store.execute_read(
            f"SELECT doc_id, source_path FROM {schema.DOCUMENT_TABLE} WHERE active = 1")}
        restricted = store.restricted_doc_ids()
        restricted |= {d.doc_id for d in docs.documents if is_restricted(d.sensitivity)}
        sentences.purge_documents(restricted)  # reclassification is retroactive
        seen = set()
        todo: list[tuple[SourceDocument, Any, str]] = []
        for doc in docs.documents:
            seen.add(doc.doc_id)
            doc_chunker = sentences.chunker_for(chunker, doc)
            doc_version = chunker_signature(doc_chunker)
            if known.get(doc.doc_id) == doc.content_hash and known_chunkers.get(doc.doc_id) == f"{doc_chunker.name}@{doc_version}":
                unchanged += 1
                continue
            todo.append((doc, doc_chunker, doc_version))
        contextual = getattr(cfg, "contextual", True)
        if isinstance(chunker, SemanticChunker):  # its embedder lives in this process (and its cache)
            built: Iterator[list[Chunk]] = (build_chunks(d, c, contextual=contextual) for d, c, _ in todo)
        else:  # a large library is chunked by worker processes, in document order (workers.py)
            jobs = [([d for d, _, _ in part], chunker, contextual) for part in batches(todo, DOCS_PER_TASK)]
            built = chain.from_iterable(ordered_map(_chunk_documents, jobs, min_items=MIN_TASKS_IN_WORKERS))
        for start in range(0, len(todo), DOCS_PER_TRANSACTION):
            with store.transaction():  # one commit per block of documents, not per document
                for doc, doc_chunker, doc_version in todo[start:start + DOCS_PER_TRANSACTION]:
                    chunks = next(built)
                    n = store.replace_doc_chunks(
                        doc.doc_id, chunks, doc.valid_as_of, content_hash=doc.content_hash, source_path=doc.source_path,
                        run_id=run_id, chunker=doc_chunker.name, chunker_version=doc_version,
                    )
                    if n == 0 and doc.doc_id in known:
                        # a new chunker version produced byte-identical chunks: nothing changes downstream
                        rechunked_identical += 1
                        unchanged += 1
                        continue
                    written += n
                    (changed if doc.doc_id in known else added).append(doc.doc_id)
        failing = set(docs.error_paths)
        withdraw = set(docs.withdraw_paths)
        doubt = set(docs.doubt_paths)
        for doc_id in sorted(set(known) - seen):
            src = source_paths.get(doc_id, "").split("#", 1)[0]
            if src in failing and src not in withdraw:
                kept.append(doc_id)
                continue
            store.replace_doc_chunks(doc_id, [], run_id=run_id)
            (withdrawn if src in withdraw else removed).append(doc_id)
            if src in doubt:
                in_doubt.append(doc_id)
        rows = store.execute_read(
            f"SELECT chunk_id, version FROM {schema.CHUNK_TABLE} WHERE active = 1 ORDER BY chunk_id")
        n_docs = store.execute_read(f"SELECT COUNT(DISTINCT doc_id) FROM {schema.CHUNK_TABLE} WHERE active = 1")[0][0]
    return ChunkUpdate(
        library_id=docs.library_id,
        store_path=str(store_path),
        chunker=chunker_id,
        added=tuple(added),
        changed=tuple(changed),
        removed=tuple(removed),
        unchanged=unchanged,
        kept_on_error=tuple(kept),
        withdrawn_on_error=tuple(withdrawn),
        in_doubt=tuple(in_doubt),
        restricted=tuple(sorted(restricted)),
        rechunked_identical=rechunked_identical,
        chunks_written=written,
        n_active_chunks=len(rows),
        n_active_docs=int(n_docs),
        active_hash=sha256_json([[r[0], r[1]] for r in rows]),
        boundary_embedder=sentences.source(chunker) if isinstance(chunker, SemanticChunker) else "",
        sentences_embedded=sentences.embedded,
        sentences_from_cache=sentences.reused,
    )


#: Documents per worker task, and tasks needed before chunking runs in workers.
DOCS_PER_TASK = 500
MIN_TASKS_IN_WORKERS = 8
#: Documents written per chunk-store transaction (a crash loses at most this block: the
#: next run re-chunks those documents, whose stored hashes are still the old ones).
DOCS_PER_TRANSACTION = 2000


def _chunk_documents(job: tuple[list[SourceDocument], Any, bool]) -> list[list[Chunk]]:
    docs, chunker, contextual = job
    return [build_chunks(d, chunker, contextual=contextual) for d in docs]


def verify_chunks(docs: DocumentSet, store_path: Path) -> dict[str, list[str]]:
    """Check the chunk invariants; returns problems by check name (empty lists = pass)."""
    bodies = {d.doc_id: d.body for d in docs.documents}
    restricted = {d.doc_id for d in docs.documents if is_restricted(d.sensitivity)}
    problems: dict[str, list[str]] = {"substring": [], "unique_ids": [], "locators": []}
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            f"SELECT chunk_id, doc_id, text, start_char, end_char FROM {schema.CHUNK_TABLE} WHERE active = 1")
    seen: set[str] = set()
    for r in rows:
        if r["chunk_id"] in seen:
            problems["unique_ids"].append(r["chunk_id"])
        seen.add(r["chunk_id"])
        body = bodies.get(r["doc_id"])
        if body is None:
            continue  # kept from an earlier run while its file is unreadable
        if r["start_char"] < 0 or r["end_char"] > len(body) or r["start_char"] >= r["end_char"]:
            owner = "a RESTRICTED document" if r["doc_id"] in restricted else r["doc_id"]
            problems["locators"].append(f"{r['chunk_id']} span {r['start_char']}-{r['end_char']} outside {owner}")
        elif body[r["start_char"]:r["end_char"]] != r["text"]:
            owner = "a RESTRICTED document" if r["doc_id"] in restricted else r["doc_id"]
            problems["substring"].append(f"{r['chunk_id']} ({owner} {r['start_char']}-{r['end_char']})")
    return problems


# --------------------------------------------------------------------------------- step
SUBSTRING = CheckSpec("chunk_text_is_substring_of_source", blocking=True,
                      description="every active chunk's text is the exact span of its source it points at")
UNIQUE_IDS = CheckSpec("chunk_ids_unique", blocking=True, description="no two active chunks share an id")
CHUNK_CHECKS = (SUBSTRING, UNIQUE_IDS)


def chunk_outcomes(docs: DocumentSet, store_path: Path):
    problems = verify_chunks(docs, store_path)
    bad = problems["substring"] + problems["locators"]
    dup = problems["unique_ids"]
    return (
        outcome(SUBSTRING, not bad, {"violations": bad},
                f"{len(bad)} chunk(s) are not the span of their source they point at: {', '.join(bad[:5])}"),
        outcome(UNIQUE_IDS, not dup, {"duplicates": dup}, f"{len(dup)} duplicate chunk id(s): {', '.join(dup[:5])}"),
    )


def chunks_step(ctx: StepContext, documents: DocumentSet) -> StepResult:
    """Re-chunk what changed, then verify the active chunks (both checks block publication)."""
    store = ctx.paths.chunk_store
    backend = None
    if documents.config.chunker == SemanticChunker.name and getattr(documents.config, "boundary_embedder", None) != "lexical":
        # the semantic chunker draws boundaries with the backend chunk_embeddings uses
        backend = ctx.backend(resolve_library_settings(documents, embedding=ctx.embedding).embedding_spec)
    with SentenceEmbeddings(backend, documents.library_id, ctx.cache_path) as sentences:
        update = update_chunk_store(documents, store, run_id=ctx.run_id, sentences=sentences)
    if update.boundary_embedder:
        ctx.log(f"chunks: semantic boundaries by {update.boundary_embedder}; sentence windows "
                f"{update.sentences_embedded} embedded, {update.sentences_from_cache} from cache")
    ctx.log(f"chunks: {update.n_active_chunks} active ({len(update.added)} added, {len(update.changed)} changed, "
            f"{update.unchanged} unchanged docs)")
    if update.restricted:
        # reclassification is retroactive, from the moment the store knows it: no snapshot keeps
        # serving as open what is RESTRICTED now while the rest of this run builds (or if it fails)
        withdrawn = withdraw_reclassified(ctx.paths)
        if withdrawn:
            ctx.log(f"chunks: withdrew {len(withdrawn)} published snapshot(s) ({', '.join(withdrawn)}): they served as "
                    "open text that is RESTRICTED now; the library serves again when this run publishes")
    if update.in_doubt:
        # classification fails closed: a file whose sensitivity itself is in doubt is not served
        # from any snapshot either (the current one included) until a run reads it again
        held = withhold_unclassified(ctx.paths, set(update.in_doubt))
        if held:
            ctx.log(f"chunks: withheld {len(held)} published snapshot(s) ({', '.join(held)}): they serve "
                    f"{len(update.in_doubt)} document(s) whose file failed to parse with its sensitivity in doubt; "
                    "the library serves again when this run publishes, and they do once the files are read again")
    released, removed = release_withheld(ctx.paths, (d.doc_id for d in documents.documents))
    if released or removed:
        ctx.log(f"chunks: {len(released)} withheld snapshot(s) released ({', '.join(released)}), {len(removed)} removed "
                "for good (they served what is RESTRICTED now): every document they were withheld for was read again")
    return StepResult(update, chunk_outcomes(documents, store))
