"""Stage 4, ``bm25_index``: build and write the chunk-level and document-level BM25 arrays."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from ragspine_core import schema
from ragspine_core.lexical.bm25_build import RowCounts, blend_bm25_arrays, build_bm25_from_counts, count_rows
from ragspine_core.lexical.bm25_format import DEFAULT_DOC_WEIGHT, BM25Arrays, BM25Params
from ragspine_core.records import is_restricted
from ragspine_core.text.tokenize import Analyzer, analyzer_from_id, make_analyzer, resolve_auto_analyzer

from ragspine_index.artifacts import LibraryPaths, sha256_json, write_once
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.index_text import IndexTextRef, read_index_text
from ragspine_index.step_api import StepContext, StepResult
from ragspine_index.workers import batches, ordered_map


def write_bm25_arrays(directory: Path, arrays: BM25Arrays, analyzer_id: str, **extra_params: float) -> None:
    """Write one BM25 index directory (the layout of :mod:`ragspine_core.schema`)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / schema.BM25_VOCAB).write_text(json.dumps({"tokens": arrays.tokens}, ensure_ascii=False), encoding="utf-8")
    np.save(directory / schema.BM25_INDPTR, arrays.indptr)
    np.save(directory / schema.BM25_POSTINGS, arrays.postings)
    np.save(directory / schema.BM25_IMPACTS, arrays.impacts)
    np.save(directory / schema.BM25_MAX_IMPACT, arrays.max_impact)
    params = {
        "k1": arrays.params.k1,
        "b": arrays.params.b,
        "avgdl": arrays.avgdl,
        "n_rows": arrays.n_rows,
        "vocab_size": len(arrays.tokens),
        "nnz": int(arrays.postings.shape[0]),
        "analyzer": analyzer_id,
        **({"k1_by_language": [list(x) for x in arrays.params.k1_by_language]} if arrays.params.k1_by_language else {}),
        **extra_params,
    }
    (directory / schema.BM25_PARAMS).write_text(json.dumps(params, indent=2, sort_keys=True), encoding="utf-8")


def build_library_bm25(
    directory: Path,
    *,
    chunk_texts: Sequence[str],
    chunk_doc_rows: Sequence[int],
    doc_ids: Sequence[str],
    doc_texts: Sequence[str],
    analyzer: Analyzer,
    params: BM25Params = BM25Params(),
    open_chunks: Sequence[bool] | None = None,
    open_docs: Sequence[bool] | None = None,
    chunk_languages: Sequence[str] | None = None,
    doc_languages: Sequence[str] | None = None,
    public_chunks: Sequence[bool] | None = None,
    public_docs: Sequence[bool] | None = None,
) -> dict:
    """Write ``bm25/`` (one row per chunk), ``bm25_doc/`` (one row per document) and
    ``bm25_blend/`` (one row per chunk, impacts = chunk + ``DEFAULT_DOC_WEIGHT`` × document
    field, see :func:`~ragspine_core.lexical.bm25.blend_bm25_arrays`).

    ``open_chunks`` / ``open_docs`` (bool per row): the rows whose terms and lengths make
    the BM25 statistics (``N``, ``df``, ``avgdl``) of each field. The library passes its
    open (not RESTRICTED) rows, so no RESTRICTED text changes an open row's score
    (:func:`~ragspine_core.lexical.bm25.build_bm25_from_counts`).
    ``chunk_languages`` / ``doc_languages``: each row's language, used when
    ``params.k1_by_language`` keeps each language's statistics apart.
    ``public_chunks`` / ``public_docs`` (bool per row): the PUBLIC rows. When some open row
    is not PUBLIC (an INTERNAL document), the same three indexes are written again under
    ``bm25_public/`` with statistics over the PUBLIC rows alone: what a caller whose ceiling
    is PUBLIC is scored with, so no INTERNAL text moves a score it sees (docs/serving.md).

    Returns summary statistics for materialization metadata.
    """
    # texts are tokenized and counted in blocks (by worker processes for a large library,
    # workers.py); only the postings are kept (bounded memory), merged in row order
    chunk_mask = None if open_chunks is None else np.asarray(open_chunks, dtype=bool)
    doc_mask = None if open_docs is None else np.asarray(open_docs, dtype=bool)
    pub_chunks = None if public_chunks is None else np.asarray(public_chunks, dtype=bool)
    pub_docs = None if public_docs is None else np.asarray(public_docs, dtype=bool)
    # per-ceiling statistics are needed when the PUBLIC rows are not the open rows
    per_ceiling = pub_chunks is not None and pub_docs is not None and not (
        np.array_equal(pub_chunks, chunk_mask if chunk_mask is not None else np.ones_like(pub_chunks))
        and np.array_equal(pub_docs, doc_mask if doc_mask is not None else np.ones_like(pub_docs)))
    chunk_counts: Iterable[RowCounts] = _counted(chunk_texts, analyzer)
    doc_counts: Iterable[RowCounts] = _counted(doc_texts, analyzer)
    if per_ceiling:  # counted once, built twice
        chunk_counts, doc_counts = list(chunk_counts), list(doc_counts)
    row_doc = np.asarray(chunk_doc_rows, dtype=np.int32)
    chunk_arrays = _write_field_indexes(directory, chunk_counts, doc_counts, row_doc, doc_ids, analyzer, params,
                                        chunk_mask, doc_mask, chunk_languages, doc_languages)
    if per_ceiling:
        _write_field_indexes(directory / schema.BM25_PUBLIC_DIR, chunk_counts, doc_counts, row_doc, doc_ids, analyzer,
                             params, pub_chunks, pub_docs, chunk_languages, doc_languages)
    return {
        "k1": params.k1,
        "b": params.b,
        **({"k1_by_language": dict(params.k1_by_language)} if params.k1_by_language else {}),
        "chunk_rows": chunk_arrays.n_rows,
        "doc_rows": len(doc_ids),
        "vocab_size": len(chunk_arrays.tokens),
        "postings": int(chunk_arrays.postings.shape[0]),
        "tokens": int(chunk_arrays.doc_lengths.sum()),
        "avgdl": round(chunk_arrays.avgdl, 3),
        "public_stats": bool(per_ceiling),
    }


def _write_field_indexes(directory: Path, chunk_counts: Iterable[RowCounts], doc_counts: Iterable[RowCounts],
                         row_doc: np.ndarray, doc_ids: Sequence[str], analyzer: Analyzer, params: BM25Params,
                         chunk_mask: np.ndarray | None, doc_mask: np.ndarray | None,
                         chunk_languages: Sequence[str] | None, doc_languages: Sequence[str] | None) -> BM25Arrays:
    """``bm25/``, ``bm25_doc/`` and ``bm25_blend/`` under ``directory``, statistics over the masked rows."""
    chunk_arrays = build_bm25_from_counts(chunk_counts, params, stat_rows=chunk_mask, row_languages=chunk_languages)
    doc_arrays = build_bm25_from_counts(doc_counts, params, stat_rows=doc_mask, row_languages=doc_languages)
    write_bm25_arrays(directory / schema.BM25_DIR, chunk_arrays, analyzer.id)
    np.save(directory / schema.BM25_DIR / schema.BM25_ROW_DOC, row_doc)
    write_bm25_arrays(directory / schema.BM25_DOC_DIR, doc_arrays, analyzer.id)
    (directory / schema.BM25_DOC_DIR / schema.BM25_DOC_IDS).write_text(json.dumps(list(doc_ids), ensure_ascii=False), encoding="utf-8")
    blend, own = blend_bm25_arrays(chunk_arrays, doc_arrays, row_doc.astype(np.int64), DEFAULT_DOC_WEIGHT)
    write_bm25_arrays(directory / schema.BM25_BLEND_DIR, blend, analyzer.id, doc_weight=DEFAULT_DOC_WEIGHT)
    np.save(directory / schema.BM25_BLEND_DIR / schema.BM25_BLEND_OWN, own)
    return chunk_arrays


#: Texts per counting task, and tasks needed before counting runs in worker processes.
TEXTS_PER_TASK = 5000
MIN_TASKS_IN_WORKERS = 8


def _counted(texts: Sequence[str], analyzer: Analyzer) -> Iterator[RowCounts]:
    jobs = [(analyzer.id, part) for part in batches(texts, TEXTS_PER_TASK)]
    return ordered_map(_count_texts, jobs, min_items=MIN_TASKS_IN_WORKERS)


def _count_texts(job: tuple[str, Sequence[str]]) -> RowCounts:
    analyzer_id, texts = job
    analyzer = _analyzer(analyzer_id)
    return count_rows(analyzer(t) for t in texts)


@functools.lru_cache(maxsize=4)
def _analyzer(analyzer_id: str) -> Analyzer:  # one per worker process, not one per task
    return analyzer_from_id(analyzer_id)


@dataclass(frozen=True, slots=True)
class Bm25Ref:
    directory: str
    content_hash: str
    analyzer: str
    stats: dict = field(default_factory=dict)

    def artifact_paths(self) -> dict[str, Path]:
        """Artifact name (``schema.ARTIFACT_REGISTRY``) -> what publication copies."""
        out = {"bm25": Path(self.directory) / schema.BM25_DIR, "bm25_doc": Path(self.directory) / schema.BM25_DOC_DIR,
               "bm25_blend": Path(self.directory) / schema.BM25_BLEND_DIR}
        if (Path(self.directory) / schema.BM25_PUBLIC_DIR).is_dir():  # per-ceiling statistics (INTERNAL rows present)
            out["bm25_public"] = Path(self.directory) / schema.BM25_PUBLIC_DIR
        return out


def resolve_analyzer(docs: DocumentSet) -> str:
    """The library's analyzer id; ``auto`` decides from the open documents only (a
    RESTRICTED document must not change how open text is tokenized and scored)."""
    spec = (getattr(docs.config, "analyzer", "auto") or "auto").lower()
    if spec == "auto":
        shown = [d.body for d in docs.documents if not is_restricted(d.sensitivity)]
        return resolve_auto_analyzer(shown or [d.body for d in docs.documents])
    return spec


@dataclass(frozen=True, slots=True)
class _Bm25Plan:
    """What :func:`build_bm25` builds from, and its content hash (the work folder's name)."""

    content_hash: str
    analyzer: Analyzer
    chunk_ids: list
    texts: list
    doc_of_chunk: list
    doc_ids: list
    doc_row: dict
    doc_texts: list
    open_chunks: list
    open_docs: list
    public_chunks: list
    public_docs: list
    languages: tuple | None


def _bm25_plan(ref: IndexTextRef, docs: DocumentSet, params: BM25Params) -> _Bm25Plan:
    analyzer = make_analyzer(resolve_analyzer(docs))
    table = read_index_text(ref)
    chunk_ids = table.column("chunk_id").to_pylist()
    doc_of_chunk = table.column("doc_id").to_pylist()
    texts = table.column("index_text").to_pylist()
    sensitivity = table.column("sensitivity").to_pylist()
    open_chunks = [not is_restricted(x) for x in sensitivity]
    public_chunks = [str(x).strip().upper() == "PUBLIC" for x in sensitivity]
    doc_ids = sorted(set(doc_of_chunk))
    doc_row = {d: i for i, d in enumerate(doc_ids)}
    by_id = {d.doc_id: d for d in docs.documents}
    fallback: dict[str, list[str]] = {}
    for d, t in zip(doc_of_chunk, texts):
        if d not in by_id:
            fallback.setdefault(d, []).append(t)
    doc_texts = [
        (by_id[d].title + "\n" + by_id[d].body) if d in by_id else "\n".join(fallback.get(d, []))
        for d in doc_ids
    ]
    # a document is open when any of its chunks is (all of them are: sensitivity is per document)
    open_doc_rows = {doc_row[d] for d, shown in zip(doc_of_chunk, open_chunks) if shown}
    open_docs = [i in open_doc_rows for i in range(len(doc_ids))]
    public_doc_rows = {doc_row[d] for d, shown in zip(doc_of_chunk, public_chunks) if shown}
    public_docs = [i in public_doc_rows for i in range(len(doc_ids))]
    languages = None
    if params.k1_by_language:  # each row's language: its document's label (as the chunk store's)
        doc_language = {d: (by_id[d].language if d in by_id else "") or "en" for d in doc_ids}
        languages = ([doc_language[d] for d in doc_of_chunk], [doc_language[d] for d in doc_ids])
    key = [ref.content_hash, analyzer.id, params.k1, params.b, [sha256_json(t) for t in doc_texts],
           ["blend", 2, DEFAULT_DOC_WEIGHT], ["stats", "open-rows", "public-rows"]]
    if params.k1_by_language:
        key.append(["stats-by-language", [list(x) for x in params.k1_by_language], sha256_json(languages)])
    return _Bm25Plan(sha256_json(key), analyzer, chunk_ids, texts, doc_of_chunk, doc_ids, doc_row, doc_texts,
                     open_chunks, open_docs, public_chunks, public_docs, languages)


def bm25_content_hash(ref: IndexTextRef, docs: DocumentSet, *, params: BM25Params = BM25Params()) -> str:
    """The content hash :func:`build_bm25` would give these inputs (nothing built or written)."""
    return _bm25_plan(ref, docs, params).content_hash


def build_bm25(paths: LibraryPaths, ref: IndexTextRef, docs: DocumentSet, *, params: BM25Params = BM25Params()) -> Bm25Ref:
    """Chunk-level and document-level BM25 arrays, content-addressed under work/bm25."""
    plan = _bm25_plan(ref, docs, params)
    h, analyzer, chunk_ids, texts, doc_of_chunk = plan.content_hash, plan.analyzer, plan.chunk_ids, plan.texts, plan.doc_of_chunk
    doc_ids, doc_row, doc_texts, languages = plan.doc_ids, plan.doc_row, plan.doc_texts, plan.languages
    open_chunks, open_docs, public_chunks, public_docs = plan.open_chunks, plan.open_docs, plan.public_chunks, plan.public_docs
    target = paths.work_dir("bm25", h)
    stats: dict = {}

    def build(tmp: Path) -> None:
        built = build_library_bm25(
            tmp, chunk_texts=texts, chunk_doc_rows=[doc_row[d] for d in doc_of_chunk],
            doc_ids=doc_ids, doc_texts=doc_texts, analyzer=analyzer, params=params,
            open_chunks=open_chunks, open_docs=open_docs, public_chunks=public_chunks, public_docs=public_docs,
            chunk_languages=languages[0] if languages else None, doc_languages=languages[1] if languages else None)
        (tmp / "stats.json").write_text(json.dumps(built, sort_keys=True), encoding="utf-8")

    write_once(target, build)
    # read back what the build recorded, so a reused directory reports identical stats
    stats = json.loads((target / "stats.json").read_text(encoding="utf-8"))
    assert len(chunk_ids) == stats["chunk_rows"]
    return Bm25Ref(str(target), h, analyzer.id, stats)


# --------------------------------------------------------------------------------- step
def bm25_step(ctx: StepContext, index_text: IndexTextRef, documents: DocumentSet) -> StepResult:
    from ragspine_index.library_settings import resolve_library_settings

    # the library's bm25_k1 / bm25_b, else the per-language default (library_settings.bm25_params_for)
    ref = build_bm25(ctx.paths, index_text, documents, params=resolve_library_settings(documents, embedding=ctx.embedding).bm25)
    ctx.log(f"bm25: {ref.stats.get('vocab_size')} terms, analyzer {ref.analyzer}")
    return StepResult(ref)
