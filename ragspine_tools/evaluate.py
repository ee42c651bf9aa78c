"""``ragspine eval``: index a BEIR-format dataset through the production pipeline and score it.

The corpus becomes a library (one ``corpus.jsonl`` under ``<out>/raw/<name>/``) that is
built by :func:`ragspine_index.pipeline.build_library` — the same functions, in the
same order, that the Dagster assets call. The built index is cached under a key made of
the corpus hash and the pipeline's code versions, so a second run with the same inputs
skips the build. Queries go through :mod:`ragspine_query`; chunk hits aggregate to their
document by max score; metrics follow trec_eval conventions (see ``ragspine_tools.eval``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ragspine_core.errors import ConfigError, DatasetError, QueryError
from ragspine_tools.eval.beir import query_types  # noqa: F401  (ragspine eval's per-kind figures; its home is the dataset reader)

DEFAULT_EVAL_ROOT = Path("data") / "eval"
EVAL_DEPTH = 100
#: ``--reranker`` reorders this many of the top hits (the pipeline's ``rerank_top_n``)
EVAL_RERANK_DEPTH = 100


def _say(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def code_versions() -> dict[str, str]:
    """The pipeline's code versions (no Dagster import needed)."""
    from ragspine_core import schema
    from ragspine_core.text.tokenize import ENGLISH_ANALYZER_VERSION, SPEC_TOKENIZER_VERSION

    from ragspine_index.chunking import CHUNKER_VERSIONS
    from ragspine_index.pipeline import CODE_VERSIONS

    return {
        # every step's code version: a changed step rebuilds the cached evaluation index
        "steps": ",".join(f"{k}@{v}" for k, v in sorted(CODE_VERSIONS.items())),
        "schema": str(schema.SCHEMA_VERSION),
        "chunkers": ",".join(f"{k}@{v}" for k, v in sorted(CHUNKER_VERSIONS.items())),
        "tokenizer": f"spec@{SPEC_TOKENIZER_VERSION},english@{ENGLISH_ANALYZER_VERSION}",
        # 2: honours the corpus's sensitivity field; 3: `auto` embeds English corpora with MiniLM + e5;
        # 4: `auto` picks the model by chunk share (both languages: MiniLM + e5 + USE)
        "eval_library": "4",
    }


def prepare_library(dataset_dir: Path, out_root: Path, *, quiet: bool = False, chunker: str = "paragraph",
                    chunker_options: dict[str, Any] | None = None, embedding: str = "auto", settings: Any | None = None):
    """Write the corpus as a raw library folder keyed by corpus hash + code versions.

    A ``chunker`` other than the default (or any ``chunker_options``: other ``_library.toml``
    keys such as ``breakpoint_percentile``) is written to the library's ``_library.toml``
    and is part of the key; so is an ``embedding`` that names a model (not ``auto`` or
    ``none``), so that each model's index is cached apart and never served for another;
    so is the chat model of a build that asks for one (``settings``: the edge's, default the
    :class:`~ragspine_core.settings.Settings` defaults).

    A judged set over a raw library folder (its ``library.toml``) is ingested as it is; with a
    ``chunker`` or ``chunker_options``, from a copy of its files (hard links) under
    ``out_root`` whose ``_library.toml`` is the library's own with those keys set over it
    (the ``--chunker`` default ``paragraph`` leaves the library's own chunker).
    """
    from ragspine_index.artifacts import LibraryPaths, link_or_copy, sha256_file, sha256_json
    from ragspine_index.library_config import LIBRARY_CONFIG_FILE

    library_set = _library_set(dataset_dir)
    if library_set is not None:  # the corpus is a raw library folder, ingested as it is
        raw_dir = library_set["library"]
        files = sorted(p for p in raw_dir.rglob("*") if p.is_file())
        model = _named_model(embedding)
        glossary = library_set.get("glossary")
        merged = _overlay_config(raw_dir, chunker, chunker_options or {})
        overlay = _config_toml({k: merged[k] for k in sorted(merged)}) if merged is not None else ""
        key = sha256_json([[str(p.relative_to(raw_dir)), sha256_file(p)] for p in files]
                          + [code_versions()] + ([{"embedding": model}] if model else [])
                          + ([{"library_toml": overlay}] if merged is not None else [])
                          + (_build_llm_key(raw_dir, None, settings) if merged is None
                             else _build_llm_key(None, merged, settings))
                          + ([{"glossary": sha256_file(glossary)}] if glossary and glossary.is_file() else []))[:16]
        lib_root = out_root / f"{dataset_dir.name.replace('_', '-')}-{key}"
        if merged is None:
            return LibraryPaths(raw_dir.name, raw_dir, lib_root / "artifacts" / raw_dir.name)
        # --chunker / --library-option over a raw library: a copy of its files (hard links
        # where the file system allows) with the merged _library.toml; the library's own
        # folder is never written
        raw = lib_root / "raw" / raw_dir.name
        if not (raw / ".complete").exists():
            _say(f"linking {raw_dir} under {raw} with the given library options", quiet)
            shutil.rmtree(raw, ignore_errors=True)
            # links stay links (the walk judges them as in the library itself)
            shutil.copytree(raw_dir, raw, symlinks=True, copy_function=link_or_copy,
                            ignore=lambda d, names: [LIBRARY_CONFIG_FILE] if Path(d) == raw_dir else [])
            (raw / LIBRARY_CONFIG_FILE).write_text(overlay, encoding="utf-8")
            (raw / ".complete").write_text(key)
        return LibraryPaths(raw_dir.name, raw, lib_root / "artifacts" / raw_dir.name)
    corpus = dataset_dir / "corpus.jsonl"
    if not corpus.is_file():
        raise DatasetError(f"{corpus} is missing: a BEIR dataset folder needs corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
    library_toml = _library_toml(chunker, chunker_options or {})
    model = _named_model(embedding)
    glossary = dataset_glossary(dataset_dir)
    key = sha256_json([sha256_file(corpus), code_versions()] + ([library_toml] if library_toml else [])
                      + ([{"embedding": model}] if model else [])
                      + (_build_llm_key(None, chunker_options or {}, settings))
                      + ([{"glossary": sha256_file(glossary)}] if glossary else []))[:16]
    name = dataset_dir.name.replace("_", "-")
    lib_root = out_root / f"{name}-{key}"
    raw = lib_root / "raw" / name
    paths = LibraryPaths(name, raw, lib_root / "artifacts" / name)
    marker = raw / ".complete"
    if not marker.exists():
        _say(f"writing corpus of {dataset_dir.name} as a library under {raw}", quiet)
        raw.mkdir(parents=True, exist_ok=True)
        from ragspine_tools.eval.beir import iter_corpus_jsonl

        with open(raw / "corpus.jsonl", "w", encoding="utf-8") as fh:
            for doc in iter_corpus_jsonl(corpus):
                text = doc.text if doc.text.strip() else doc.title
                # the corpus's own marking is honoured (validated, fail-closed, by the parser);
                # an unmarked evaluation document is PUBLIC
                fh.write(json.dumps({"doc_id": doc.doc_id, "title": doc.title, "text": text,
                                     "sensitivity": doc.sensitivity or "PUBLIC"}, ensure_ascii=False) + "\n")
        if library_toml:
            (raw / "_library.toml").write_text(library_toml, encoding="utf-8")
        marker.write_text(key)
    return paths


def _library_set(dataset_dir: Path) -> dict[str, Path] | None:
    """``library`` (and ``glossary``) of a judged set over a raw library folder
    (:data:`ragspine_tools.eval.beir.LIBRARY_FILE`), resolved against the set's folder; None
    for a plain BEIR folder."""
    import tomllib

    from ragspine_tools.eval.beir import LIBRARY_FILE

    path = dataset_dir / LIBRARY_FILE
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: not valid TOML ({exc}); write library = \"<raw library folder>\"") from None
    out: dict[str, Path] = {}
    for key in ("library", "glossary"):
        value = data.get(key)
        if value is None and key == "glossary":
            continue
        if not isinstance(value, str) or not value.strip():
            raise DatasetError(f"{path}: {key} must be a path relative to {dataset_dir} (e.g. library = \"../../raw/sample\")")
        out[key] = (dataset_dir / value).resolve()
    if not out["library"].is_dir():
        raise DatasetError(f"{path}: library folder {str(out['library'])!r} does not exist")
    return out


def dataset_glossary(dataset_dir: Path) -> Path | None:
    """The glossary a judged set is evaluated with: its ``library.toml``'s ``glossary``, or a
    ``glossary.toml`` in the set's folder; the queries then run with glossary multi-query
    and the competitor gate, as ``ragspine query`` does on a library published with it."""
    library_set = _library_set(dataset_dir)
    if library_set is not None and "glossary" in library_set:
        return library_set["glossary"]
    own = dataset_dir / "glossary.toml"
    return own if own.is_file() else None


def _named_model(embedding: str) -> str | None:
    """The canonical embedding spec when ``embedding`` names a model, else None (``auto``, ``none``)."""
    from ragspine_core.dense.embedding import canonical_embedding_spec

    spec = canonical_embedding_spec(embedding)
    return None if spec in ("auto", "none") else spec


def _library_toml(chunker: str, options: dict[str, Any]) -> str:
    """The ``_library.toml`` an evaluation library gets ("" for the default chunker)."""
    if chunker == "paragraph" and not options:
        return ""
    return _config_toml({"chunker": chunker, **dict(sorted(options.items()))})


def _overlay_config(raw_dir: Path, chunker: str, options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``_library.toml`` of a raw library with ``--chunker`` (when not the default
    ``paragraph``) and ``--library-option`` keys set over its own; None when neither is given.

    Raises:
        ConfigError: the library's own ``_library.toml`` cannot be read as ingest reads it.
    """
    from ragspine_index.library_config import read_library_toml

    if chunker == "paragraph" and not options:
        return None
    merged = read_library_toml(raw_dir)
    if chunker != "paragraph":
        merged["chunker"] = chunker
    merged.update(options)
    return merged


def _config_toml(config: Mapping[str, Any]) -> str:
    """``config`` (top-level keys, in the order given, then tables of scalars or lists, sorted)
    as ``_library.toml`` text; JSON's literals are TOML's for strings, numbers, booleans and arrays."""
    def value(v: Any) -> str:  # UTF-8 as it is (a JSON surrogate-pair escape is not valid TOML)
        return json.dumps(v, ensure_ascii=False)

    tables = {k: v for k, v in config.items() if isinstance(v, Mapping)}
    lines = [f"{k} = {value(v)}" for k, v in config.items() if k not in tables]
    for name, table in sorted(tables.items()):
        lines.append(f"[{name}]")
        for k, v in sorted(table.items()):
            if isinstance(v, Mapping):
                raise ConfigError(f"_library.toml: [{name}] {k} is a nested table, which --library-option cannot "
                                  "rewrite; evaluate a copy of the library with the options in its _library.toml")
            lines.append(f"{value(k)} = {value(v)}")
    return "\n".join(lines) + "\n"


def _build_llm_key(raw_dir: Path | None, options: Mapping[str, Any] | None = None,
                   settings: Any | None = None) -> list[dict[str, str]]:
    """The chat model of a library whose build asks for one (``summarizer``,
    ``relation_extractor`` or ``graph_extractor`` = ``llm``, from ``raw_dir``'s
    ``_library.toml`` or from ``options``), as a part of the cache key, so that an index
    built with one model is never served for another; empty for a deterministic build."""
    from ragspine_core.settings import Settings

    if raw_dir is not None:
        from ragspine_index.library_config import load_library_config

        config = load_library_config(raw_dir)
        options = {k: getattr(config, k) for k in ("summarizer", "relation_extractor", "graph_extractor")}
    if not any(str((options or {}).get(k, "")) == "llm" for k in ("summarizer", "relation_extractor", "graph_extractor")):
        return []
    settings = settings if settings is not None else Settings()
    return [{"build_llm": settings.llm_model, "build_llm_max_tokens": str(settings.llm_max_tokens)}]


def _build_llm_factory(settings: Any | None = None) -> Callable[[], Any]:
    """``make_llm`` of the build, as ``ragspine ingest`` has it: the provider the
    ``RAGSPINE_LLM_*`` settings name, or None when none is (a library that asks for an LLM
    then fails with the step's message naming the setting)."""
    from ragspine_core.llm import OpenAICompatibleProvider
    from ragspine_core.settings import Settings

    chosen = settings if settings is not None else Settings()

    def make() -> Any:
        return OpenAICompatibleProvider.from_settings(chosen) if chosen.llm_base_url.strip() else None

    return make


def ensure_index(paths, *, embedding: str, quiet: bool = False, glossary_path: Path | None = None,
                 settings: Any | None = None) -> dict[str, Any]:
    """Build (or reuse) the published index; returns the manifest. ``settings`` (the edge's,
    default the :class:`~ragspine_core.settings.Settings` defaults) complete the embedding spec."""
    from ragspine_query.library import read_manifest, resolve_snapshot_dir

    from ragspine_index.pipeline import build_library

    from ragspine_core.dense.embedding import EmbeddingSpec, canonical_embedding_spec
    from ragspine_core.settings import Settings

    want = canonical_embedding_spec(embedding)
    try:
        manifest = read_manifest(resolve_snapshot_dir(paths.root))
        built = (manifest.get("embedding") or {}).get("backend")
        # an index with vectors serves BM25 runs too; a named model must be the one it was built with
        if want == "none" or (built is not None and want in ("auto", built)):
            _say(f"reusing cached index {manifest['snapshot_id']} ({manifest['counts']['chunks']} chunks)", quiet)
            return manifest
    except Exception:
        pass
    t0 = time.perf_counter()
    # the edge's model folder, endpoint, key and e5 engine complete the spec
    spec = EmbeddingSpec.from_settings(settings if settings is not None else Settings(), backend=embedding)
    res = build_library(paths, embedding=spec, cache_path=paths.root.parent.parent.parent / "cache" / "embeddings.sqlite",
                        run_id="eval", code_versions=code_versions(), progress=lambda m: _say(m, quiet),
                        glossary_path=glossary_path, make_llm=_build_llm_factory(settings))
    _say(f"indexed in {time.perf_counter() - t0:.1f}s: " + ", ".join(f"{k} {v:.1f}s" for k, v in res.timings.items()), quiet)
    return read_manifest(Path(res.snapshot_dir))


@dataclass(frozen=True, slots=True)
class ModeResult:
    mode: str
    reranker: str
    metrics: dict[str, Any]
    per_query_ndcg: dict[str, float]
    seconds_per_query: float
    run_path: str
    #: per-query metrics at every cut-off of the report's nDCG@k curve (an ``EvalReport``),
    #: and the run itself (query id → document id → score), for ``--report``
    eval_report: Any = None
    run: Mapping[str, Mapping[str, float]] | None = None
    #: ``--llm-features``: the LLM feature this run switched on ("" when not asked; ``off``: none)
    feature: str = ""

    @property
    def label(self) -> str:
        """The run's name in tables and comparisons: mode, reranker, LLM feature."""
        return self.mode + ("" if self.reranker in ("", "none") else f"+{self.reranker}") + (f"+{self.feature}" if self.feature else "")


def query_documents(index, query: str, *, reranker=None, depth: int = EVAL_DEPTH,
                    rerank_depth: int = EVAL_RERANK_DEPTH) -> tuple[Any, dict[str, float]]:
    """One query as ``ragspine eval`` scores it: ``(result, {doc_id: score})``.

    ``index.search`` over the top ``max(3 × depth, rerank_depth)`` chunks, RESTRICTED ones
    never entering the ranking (``result``: what the search returned, with its confidence and
    refusal when it is a :class:`~ragspine_query.pipeline.state.SearchResult`); ``reranker``
    (optional) reorders the top ``rerank_depth`` hits; chunks aggregate to their document by
    their best rank, and the document run scores the top ``depth`` documents by rank (the
    evaluated order is exactly the order a user sees). The bench tools call this too
    (``ragspine_tools.bench.query_fields``), so they rank as ``ragspine eval`` does."""
    from ragspine_tools.eval.metrics import aggregate_chunk_hits_to_docs

    result = index.search(query, top_k=max(depth * 3, rerank_depth), include_restricted=False)
    hits = list(result)
    if reranker is not None:
        hits = reranker.rank(query, hits[:rerank_depth], top_n=rerank_depth) + hits[rerank_depth:]
    best = aggregate_chunk_hits_to_docs([(h.chunk.doc_id, -float(pos)) for pos, h in enumerate(hits)], depth=depth)
    ordered = sorted(best, key=lambda d: -best[d])
    return result, {d: float(depth + 1 - r) for r, d in enumerate(ordered, 1)}


def run_queries(retriever, dataset, *, reranker=None, depth: int = EVAL_DEPTH, quiet: bool = False, rerank_depth: int = EVAL_RERANK_DEPTH,
                live_progress: bool = True, observe: Callable[[Any], None] | None = None,
                on_result: Callable[[str, Any], None] | None = None) -> tuple[dict[str, dict[str, float]], float]:
    """Run every query through ``retriever.search`` (``ragspine eval`` passes the narrative
    index that ``ragspine query`` uses); ``reranker`` (optional) reorders the top
    ``rerank_depth`` hits afterwards, for a caller that evaluates a bare retriever.
    ``observe`` (optional) is given each query's trace (an
    :class:`~ragspine_query.pipeline.explain.Explain`: what each stage did, and its time);
    ``on_result`` (optional) each query's id and search result (its confidence, refusal).

    A live ``queries done/total (rate, ETA)`` line on stderr when it is a terminal and
    ``live_progress`` (off for ``--json``), one summary line otherwise."""
    from ragspine_query.pipeline.trace import tracing

    from ragspine_assets.progress import TerminalProgress, wants_terminal_progress

    run: dict[str, dict[str, float]] = {}
    qids = dataset.query_ids
    t0 = time.perf_counter()
    meter = TerminalProgress("  queries", len(qids), sys.stderr, unit="queries",
                             enabled=live_progress and wants_terminal_progress(sys.stderr, quiet=quiet))
    for i, qid in enumerate(qids, 1):
        query = dataset.queries[qid]
        # what a user is shown: RESTRICTED chunks never enter the ranking
        try:
            with tracing(observe is not None) as tracer:
                result, run[qid] = query_documents(retriever, query, reranker=reranker, depth=depth, rerank_depth=rerank_depth)
                if on_result is not None:
                    on_result(qid, result)
                if observe is not None:
                    observe(tracer.freeze(query))
        except QueryError as exc:  # the product's query limits apply to evaluation too
            raise DatasetError(f"query {qid!r} of the dataset is refused: {exc}") from exc
        meter.update(i)
    meter.close()
    if qids and not meter.enabled:
        _say(f"  queries {len(qids)}/{len(qids)} ({(time.perf_counter() - t0) / len(qids) * 1000:.1f} ms/query)", quiet)
    return run, (time.perf_counter() - t0) / max(len(qids), 1)


def sample_queries(dataset, max_queries: int):
    """The first ``max_queries`` judged queries by SHA-256 of their id: a deterministic
    sample for screening (0 = every query)."""
    import dataclasses
    import hashlib

    if max_queries < 0:
        raise ConfigError(f"--max-queries must be >= 0 (0 = every query), got {max_queries}")
    if not max_queries or max_queries >= len(dataset.queries):
        return dataset
    keep = sorted(dataset.queries, key=lambda q: hashlib.sha256(q.encode("utf-8")).hexdigest())[:max_queries]
    return dataclasses.replace(dataset, queries={q: dataset.queries[q] for q in keep}, qrels={q: dataset.qrels[q] for q in keep})


def fusion_summary(retriever, dataset) -> dict[str, Any] | None:
    """How the language-aware default fused these queries: per case, the number of
    queries, the weights, ``rrf_k`` and the reason (None when the mode is forced)."""
    out: dict[str, Any] = {}
    for qid in dataset.query_ids:
        plan = retriever.fusion_plan(dataset.queries[qid])
        if plan is None:
            return None
        entry = out.setdefault(plan.case, {**plan.to_dict(), "queries": 0})
        entry["queries"] += 1
    return dict(sorted(out.items()))


#: the judged set's questions that no open document answers (no qrels), e.g. ``data/eval/sample``
UNANSWERABLE_FILES = ("unanswerable.jsonl", "extra-unanswerable.jsonl")


def unanswerable_questions(dataset_dir: Path) -> list[dict[str, Any]]:
    """The dataset folder's unanswerable questions (``{"_id", "text", "kind"?}`` lines of
    :data:`UNANSWERABLE_FILES`; none when it has neither file)."""
    out = []
    for name in UNANSWERABLE_FILES:
        path = dataset_dir / name
        if path.is_file():
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if line.strip():
                    q = json.loads(line)
                    if not isinstance(q, dict) or not isinstance(q.get("text"), str) or "_id" not in q:
                        raise DatasetError(f"{path}:{n}: an unanswerable question needs \"_id\" and \"text\"")
                    out.append(q)
    return out


def refusal_summary(index, answerable: Mapping[str, Any], unanswerable: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How the run's confidence and corrective loop treat answerable and unanswerable questions.

    ``answerable``: query id → the search result of each judged question (as run);
    ``unanswerable`` questions are searched here the same way (:func:`query_documents`).
    Returns, per side, the questions and how many were refused (``refusal`` set: the
    corrective loop's ``low_confidence``, or the gate's), the unanswerable ones also by
    ``kind``; and ``confidence_auroc``, P(an answerable question's confidence score > an
    unanswerable one's), ties half — left out when a result carries no confidence."""
    def scores(results: Sequence[Any]) -> list[float] | None:
        confs = [getattr(r, "confidence", None) for r in results]
        return [float(c.score) for c in confs if c is not None] if all(c is not None for c in confs) else None

    una = []
    for q in unanswerable:
        try:
            una.append(query_documents(index, str(q["text"]))[0])
        except QueryError as exc:
            raise DatasetError(f"unanswerable question {q['_id']!r} of the dataset is refused: {exc}") from exc
    ans = list(answerable.values())
    by_kind: dict[str, list[int]] = {}
    for q, r in zip(unanswerable, una):
        tally = by_kind.setdefault(str(q.get("kind") or "unanswerable"), [0, 0])
        tally[0] += getattr(r, "refusal", None) is not None
        tally[1] += 1
    out: dict[str, Any] = {
        "answerable": {"questions": len(ans), "refused": sum(getattr(r, "refusal", None) is not None for r in ans)},
        "unanswerable": {"questions": len(una), "refused": sum(getattr(r, "refusal", None) is not None for r in una),
                         "by_kind": {k: {"questions": v[1], "refused": v[0]} for k, v in sorted(by_kind.items())}},
    }
    pos, neg = scores(ans), scores(una)
    if pos and neg:
        wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
        out["confidence_auroc"] = round(wins / (len(pos) * len(neg)), 4)
    return out


def evaluate_dataset(dataset_dir: Path, *, split: str = "test", qrels_file: str | None = None, modes: Sequence[str] = ("auto",), reranker: str = "none", out: Path | None = None, embedding: str = "auto", quiet: bool = False, live_progress: bool = True, chunker: str = "paragraph", chunker_options: dict[str, Any] | None = None, tree: str = "off", max_queries: int = 0, multi_query: bool | None = None, llm_features: Sequence[str] = (), corrective: str | None = None, settings: Any | None = None) -> list[ModeResult]:
    """``tree``: the summary-tree channel (``off`` | ``collapsed`` | ``traversal``), fused with the mode's channels.
    ``llm_features``: per mode, one run per LLM query feature switched on alone (``off``: none;
    :mod:`ragspine_tools.llm_features`), through the provider the ``RAGSPINE_LLM_*``
    settings name; each run's metrics carry ``llm`` (attempts, used, partial, fallbacks,
    fallback rate, ms per attempt, calls and tokens).
    ``max_queries``: evaluate a deterministic sample of that many queries (:func:`sample_queries`; 0 = all).
    ``multi_query``: glossary multi-query variants on/off (None: the user's default,
    ``RAGSPINE_MULTI_QUERY``); the gate uses the glossary either way.
    ``corrective``: the corrective loop (``off | relevance | dynamic | static | llm``; None:
    the user's default, ``RAGSPINE_CORRECTIVE``). When it is given, each run's metrics carry
    ``refusals`` (:func:`refusal_summary`) over the judged questions and the folder's
    unanswerable ones (:data:`UNANSWERABLE_FILES`).

    ``settings``: the user's defaults, read by the edge (``ragspine eval``:
    ``Settings.from_env()``; default the :class:`~ragspine_core.settings.Settings` defaults);
    every mode runs :func:`~ragspine_query.builder.build_pipeline` with the
    :class:`~ragspine_query.builder.PipelineSpec` they describe, as ``ragspine query`` does."""
    from ragspine_tools.eval.beir import load_beir
    from ragspine_tools.eval.metrics import evaluate_run, write_trec_run
    from ragspine_tools.eval.report import CURVE_KS
    from ragspine_query.library import open_library
    from ragspine_query.backends import backend_for_library
    from ragspine_query.builder import PipelineSpec, build_pipeline
    from ragspine_query.retriever import HybridRetriever
    from ragspine_core.settings import Settings

    dataset = sample_queries(load_beir(dataset_dir, split, qrels_file=qrels_file), max_queries)
    out_root = Path(out) if out else DEFAULT_EVAL_ROOT
    paths = prepare_library(Path(dataset_dir), out_root, quiet=quiet, chunker=chunker, chunker_options=chunker_options,
                            embedding=embedding, settings=settings)
    # a named model is built even for BM25-only runs: its library's BM25 parameters follow the model
    named = _named_model(embedding) is not None
    needs_dense = (named or any(m in ("auto", "hybrid", "vector", "graph") for m in modes)) and embedding != "none"
    # the user's defaults (RAGSPINE_* as `ragspine query` reads them); --tree overrides the tree channel
    settings = dataclasses.replace(settings if settings is not None else Settings(), tree=tree)
    ensure_index(paths, embedding=embedding if needs_dense else "none", quiet=quiet, glossary_path=dataset_glossary(Path(dataset_dir)),
                 settings=settings)
    lib = open_library(paths.root)
    rr = None
    if reranker and reranker != "none":
        from ragspine_query.rerank import make_reranker

        rr = make_reranker(reranker, settings=settings)
    unanswerable: list[dict[str, Any]] = []
    if corrective is not None:
        settings = dataclasses.replace(settings, corrective=corrective)
        unanswerable = unanswerable_questions(Path(dataset_dir))
    user_spec = PipelineSpec.from_settings(settings)
    features = list(llm_features) or [""]
    provider_for = _llm_provider_factory(settings, features)
    results = []
    opened: list = []
    try:
        for mode, feature in [(m, f) for m in modes for f in features]:
            backend = backend_for_library(lib, mode, spec=embedding, settings=settings)
            spec = user_spec.replace(mode=mode, rerank_top_n=EVAL_RERANK_DEPTH)
            if multi_query is not None:
                spec = spec.replace(multi_query=multi_query)
            rerank: Any = rr
            tally = provider = None
            if feature:
                from ragspine_tools.llm_features import FeatureTally, feature_chain

                provider = provider_for(feature)
                qi, provider, judge, top_n = feature_chain(feature, spec.intelligence, provider, settings)
                spec = spec.replace(intelligence=qi, rerank_top_n=top_n or EVAL_RERANK_DEPTH)
                rerank = judge if judge is not None else rr
                tally = FeatureTally(feature) if feature != "off" else None
            # exactly what `ragspine query` runs: the gate, glossary multi-query (with the glossary
            # published with the library), variant fusion, the language plan; --mode forces the channels
            pipeline = build_pipeline(paths.root, spec, settings=settings, provider=provider, embedding_backend=backend,
                                      reranker=rerank)
            # over one library the pipeline's source is that library's retriever
            retriever = pipeline.source
            assert isinstance(retriever, HybridRetriever)
            opened.append(retriever.library)
            _say(f"[{dataset_dir.name} {split}{'/' + qrels_file if qrels_file else ''}] mode={mode} (runs {retriever.active_mode}) reranker={reranker}"
                 + (f" llm feature={feature}" if feature else "") + f": {len(dataset.query_ids)} queries", quiet)
            answered: dict[str, Any] = {}
            run, spq = run_queries(pipeline, dataset, quiet=quiet, live_progress=live_progress, observe=tally,
                                   on_result=answered.__setitem__ if corrective is not None else None)
            report = evaluate_run(run, dataset.qrels, ks=CURVE_KS)
            run_dir = paths.root.parent.parent / "runs"
            run_dir.mkdir(parents=True, exist_ok=True)
            run_name = (f"{paths.library_id}-{qrels_file or split}-{mode}-{reranker}" + ("" if tree == "off" else f"-tree-{tree}")
                        + ("" if multi_query is None else "-multi-query" if multi_query else "-no-multi-query")
                        + (f"-llm-{feature}" if feature else "") + (f"-corrective-{corrective}" if corrective is not None else ""))
            run_path = run_dir / f"{run_name}.trec"
            write_trec_run(run_path, run, run_name)
            metrics = {**report.to_dict(), "mode": mode, "active_mode": retriever.active_mode, "reranker": reranker,
                       "analyzer": lib.manifest["tokenizer"]["analyzer"], "embedding_model": lib.embedding_model_id if retriever.active_mode != "bm25" else None,
                       "bm25": {k: lib.manifest["bm25"][k] for k in ("k1", "b") if k in lib.manifest.get("bm25", {})},  # the library's k1/b
                       "ms_per_query": round(spq * 1000, 2), "tree": tree, "dataset": dataset_dir.name, "split": split, "qrels": qrels_file or split,
                       "max_queries": max_queries, "multi_query": multi_query}
            fusion = fusion_summary(retriever, dataset)
            if fusion is not None:  # auto: the language-aware weights each query got, and why
                metrics["fusion"] = fusion
            if corrective is not None:
                metrics["corrective"] = settings.corrective
                metrics["refusals"] = refusal_summary(pipeline, answered, unanswerable)
            types = query_types(Path(dataset_dir))
            if types:  # e.g. HotpotQA bridge / comparison
                metrics["by_type"] = report.by_group(types)
            if feature:
                metrics["llm_feature"] = feature
                if tally is not None:
                    metrics["llm"] = {**tally.to_dict(dict(provider.usage) if provider is not None else None),
                                      "model": getattr(provider, "model", None)}
            results.append(ModeResult(mode, reranker, metrics, report.metric("ndcg@10"), spq, str(run_path), report, run, feature))
            if feature:  # a long LLM run says its figures as each configuration ends
                _say(f"  {results[-1].label}: nDCG@10 {metrics['ndcg@10']:.4f} R@100 {metrics['recall@100']:.4f} "
                     f"MRR@10 {metrics['mrr@10']:.4f} {metrics['ms_per_query']:.0f} ms/query"
                     + (f"; llm {json.dumps(metrics['llm'])}" if metrics.get("llm") else ""), quiet)
    finally:
        for opened_lib in opened:
            opened_lib.close()
        lib.close()
    return results


def _llm_provider_factory(settings: Any, features: Sequence[str]) -> Callable[[str], Any]:
    """``feature -> provider``: a fresh provider per feature (its ``usage`` counts that run
    alone) from the ``RAGSPINE_LLM_*`` settings; checked up front when a feature needs one.

    Raises:
        ConfigError: an LLM feature is asked for and ``RAGSPINE_LLM_BASE_URL`` / ``RAGSPINE_LLM_MODEL`` are not set.
    """
    from ragspine_core.llm import OpenAICompatibleProvider

    if any(f not in ("", "off") for f in features):
        OpenAICompatibleProvider.from_settings(settings)  # names the missing variables

    def make(feature: str) -> Any:
        return None if feature in ("", "off") else OpenAICompatibleProvider.from_settings(settings)

    return make


def write_eval_report(out_dir: Path, dataset_dir: Path, results: Sequence[ModeResult], *, split: str = "test",
                      qrels_file: str | None = None) -> Path:
    """Write the HTML report of ``results`` (see :mod:`ragspine_tools.eval.report`); returns its path.

    Document titles come from the corpus; a RESTRICTED document is never shown.

    Raises:
        ValueError: a result without its ``eval_report`` and ``run`` (``evaluate_dataset``'s carry both).
    """
    from ragspine_tools.eval.beir import load_beir
    from ragspine_tools.eval.report import ModeRun, ReportData, write_report

    dataset = load_beir(dataset_dir, split, qrels_file=qrels_file)
    modes = []
    for r in results:
        m = r.metrics
        label = r.label
        if r.eval_report is None or r.run is None:
            raise ValueError(f"the {label} result has no per-query report and run to draw the HTML report from; "
                             "pass the results evaluate_dataset returned (they carry both)")
        details = {"runs": m.get("active_mode", ""), "analyzer": m.get("analyzer", ""), "model": m.get("embedding_model") or ""}
        modes.append(ModeRun(label, r.eval_report, r.run, ms_per_query=r.seconds_per_query * 1000, details=details))
    data = ReportData(
        title=f"ragspine eval: {dataset_dir.name} ({qrels_file or split})",
        subtitle=f"{len(dataset.queries)} judged queries, {len(dataset.corpus)} documents; document-level metrics; "
                 f"first mode ({modes[0].label}) is the baseline",
        modes=tuple(modes), queries=dataset.queries, qrels=dataset.qrels,
        docs={d.doc_id: (d.title or d.doc_id, d.sensitivity or "PUBLIC") for d in dataset.corpus.values()})
    return write_report(out_dir, data)


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset_dir", help="BEIR-format folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    p.add_argument("--split", default="test")
    p.add_argument("--qrels", default=None, help="qrels file stem when it differs from the split (e.g. test-monolingual)")
    p.add_argument("--mode", default="auto", help="retrieval mode(s), comma-separated: auto,bm25,hybrid,vector,graph (default auto: what a user gets)")
    p.add_argument("--reranker", default="none", help="none|maxsim|colbert|cross_encoder|splade")
    p.add_argument("--embedding", default="auto", help="embedding backend for the dense channel (default auto, as for a user)")
    p.add_argument("--out", default=None, help=f"where the cached library, runs and report go (default {DEFAULT_EVAL_ROOT})")
    p.add_argument("--chunker", default="paragraph", help="chunker of the evaluation library (default paragraph)")
    p.add_argument("--library-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a _library.toml key of the evaluation library, e.g. breakpoint_percentile=25 or "
                        "summarizer=none (repeatable; see docs/configuration.md); for a judged set over a raw "
                        "library folder, set over the library's own _library.toml in a linked copy")
    p.add_argument("--tree", default="off", help="summary-tree channel fused with each mode: off|collapsed|traversal (default off)")
    p.add_argument("--multi-query", default=None, choices=("on", "off"),
                   help="glossary multi-query variants on|off (default: RAGSPINE_MULTI_QUERY, as `ragspine query`)")
    p.add_argument("--max-queries", type=int, default=0, metavar="N",
                   help="evaluate a deterministic sample of N queries (by SHA-256 of the id), for screening (default 0: all)")
    p.add_argument("--llm-features", default=None, metavar="LIST",
                   help="per mode, one run per LLM query feature switched on alone, comma-separated, the first the "
                        "baseline: off,hyde,step_back,decompose,filters,grader,listwise (the provider: RAGSPINE_LLM_BASE_URL, "
                        "RAGSPINE_LLM_MODEL and the RAGSPINE_LLM_* limits; docs/llm-providers.md); each run reports the "
                        "feature's attempts, fallbacks and ms per attempt")
    p.add_argument("--corrective", default=None, metavar="MODE",
                   help="corrective loop off|relevance|dynamic|static|llm (default RAGSPINE_CORRECTIVE); given, the "
                        "output adds refusals: answerable and unanswerable questions refused (the folder's "
                        "unanswerable.jsonl / extra-unanswerable.jsonl) and the confidence's AUROC")
    p.add_argument("--json", action="store_true", help="print one JSON object (a list when several modes are given)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--report", default=None, metavar="DIR",
                   help="also write a self-contained HTML report (DIR/index.html: metrics, bootstrap intervals, "
                        "nDCG@k curves, per-query scatter, the queries where the modes disagree most)")


def _parse_options(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--library-option {item!r} is not KEY=VALUE (e.g. breakpoint_percentile=25)")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def run_eval_cli(args: argparse.Namespace) -> int:
    from ragspine_core.settings import Settings
    from ragspine_tools.eval.metrics import paired_bootstrap

    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    if not modes:
        raise ConfigError("--mode needs at least one mode")
    features: list[str] = []
    if getattr(args, "llm_features", None):
        from ragspine_tools.llm_features import parse_features

        features = parse_features(args.llm_features)
    results = evaluate_dataset(Path(args.dataset_dir), split=args.split, qrels_file=args.qrels, modes=modes,
                               reranker=args.reranker, out=Path(args.out) if args.out else None,
                               embedding=args.embedding, quiet=args.quiet, live_progress=not args.json, chunker=args.chunker,
                               chunker_options=_parse_options(args.library_option), tree=args.tree,
                               max_queries=args.max_queries,
                               multi_query=None if args.multi_query is None else args.multi_query == "on",
                               llm_features=features, corrective=getattr(args, "corrective", None),
                               settings=Settings.from_env())  # the edge: the environment, read once
    if len(results) > 1:
        base = results[0]
        for r in results[1:]:
            bs = paired_bootstrap(base.per_query_ndcg, r.per_query_ndcg)
            r.metrics[f"ndcg@10_vs_{base.label if base.feature else base.mode}"] = {"difference": round(bs.mean_difference, 4), "ci95": [round(bs.ci_low, 4), round(bs.ci_high, 4)], "p": round(bs.p_value, 4)}
    if args.report:
        path = write_eval_report(Path(args.report), Path(args.dataset_dir), results, split=args.split, qrels_file=args.qrels)
        _say(f"report: {path}", args.quiet)
    if args.json:
        payload = [r.metrics for r in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, ensure_ascii=False))
        return 0
    print(f"{'mode':8} {'runs':7} {'reranker':10} {'nDCG@10':>8} {'R@100':>7} {'MRR@10':>7} {'queries':>7} {'ms/q':>7}"
          + ("  llm feature" if features else ""))
    for r in results:
        m = r.metrics
        print(f"{r.mode:8} {m['active_mode']:7} {r.reranker:10} {m['ndcg@10']:8.4f} {m['recall@100']:7.4f} {m['mrr@10']:7.4f} {m['n_queries']:7d} {m['ms_per_query']:7.2f}"
              + (f"  {r.feature}" if r.feature else ""))
        if m.get("llm"):
            ll = m["llm"]
            rate = "-" if ll["fallback_rate"] is None else f"{ll['fallback_rate']:.1%}"
            print(f"         llm {ll['feature']}: {ll['attempts']} attempts, {ll['used']} used, {ll['partial']} partial, "
                  f"{ll['fallback']} fell back ({rate}); {ll['ms_per_attempt']} ms per attempt; "
                  f"{ll.get('llm_calls', 0)} calls, {ll.get('prompt_tokens', 0)}+{ll.get('completion_tokens', 0)} tokens")
        for k, v in m.items():
            if k.startswith("ndcg@10_vs_"):
                print(f"         {k}: {v['difference']:+.4f} (95% CI {v['ci95'][0]:+.4f}..{v['ci95'][1]:+.4f}, p={v['p']})")
        for kind, km in (m.get("by_type") or {}).items():
            print(f"         {kind}: nDCG@10 {km['ndcg@10']:.4f} ({km['n_queries']} queries)")
        if m.get("refusals"):
            rf = m["refusals"]
            a, u = rf["answerable"], rf["unanswerable"]
            print(f"         corrective {m['corrective']}: refused {a['refused']}/{a['questions']} answerable, "
                  f"{u['refused']}/{u['questions']} unanswerable ("
                  + ", ".join(f"{k} {v['refused']}/{v['questions']}" for k, v in u["by_kind"].items()) + ")"
                  + (f"; confidence AUROC {rf['confidence_auroc']:.4f}" if "confidence_auroc" in rf else ""))
        for case, f in (m.get("fusion") or {}).items():
            if f.get("mixed"):
                how = " ".join(f"{n}={w:g}" for n, w in f["mixed"].items())
            else:
                how = " ".join(f"{n}={w:g}" for n, w in f["weights"].items()) + f" k={f['rrf_k']:g}"
            print(f"         fusion {case}: {f['queries']} queries, {f['method']} {how} ({f['reason']})")
        print(f"         run file: {r.run_path}")
    return 0
