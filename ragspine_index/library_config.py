"""The ``_library.toml`` schema: :class:`LibraryConfig`, per-library build settings, and
:func:`load_library_config`, which reads and validates it."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ragspine_core.dense.embedding import EmbeddingSpec
from ragspine_core.errors import ConfigError
from ragspine_core.lexical.bm25_format import BM25Params

from ragspine_index.chunking import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS, Chunker, chunker_names, chunker_params, make_chunker
from ragspine_index.converters.files import DEFAULTS_TABLE
from ragspine_index.library_config_guard import describe_keys, read_config_bytes, scrub_values

LIBRARY_CONFIG_FILE = "_library.toml"
ANALYZERS = ("auto", "spec", "english")


@dataclass(frozen=True, slots=True)
class LibraryConfig:
    """Per-library build settings, read from the optional ``_library.toml``.

    Raises ``ConfigError`` (listing the allowed values) for any invalid value.
    """

    chunker: str = "paragraph"
    max_chars: int = DEFAULT_CHUNK_CHARS
    overlap_chars: int = DEFAULT_OVERLAP_CHARS
    analyzer: str = "auto"
    #: The library's embedding backend: a name of ``ragspine_core.dense.embedding.EMBEDDING_BACKENDS``
    #: (a built-in or a registered plug-in; ``auto``: the run-level choice). It replaces
    #: only the backend of the run's ``EmbeddingSpec`` (model folder, endpoint and key stay).
    embedding: str = "auto"
    contextual: bool = True
    #: Chunker-specific settings (unset: the chunker's default), validated against the
    #: chosen chunker by :func:`check_chunker_options`.
    parent_max_chars: int | None = None
    window: int | None = None
    breakpoint_percentile: float | None = None
    embed_window: int | None = None
    boundary_embedder: str | None = None
    #: The summary tree's summarizer: ``extractive`` (offline), ``llm`` (the llm resource) or ``none`` (no tree).
    summarizer: str = "extractive"
    #: The summary tree is built only up to this many open chunks (0: no limit): the
    #: largest measured build (100k synthetic leaves: ~3 min, ~1 GB peak; docs/summary_tree.md);
    #: a larger library opts in.
    tree_max_leaves: int = 100_000
    #: The relation graph is built only up to this many open chunks (0: no limit); a larger
    #: library gets no graph (``--mode graph`` says so) until it raises this (docs/evaluation.md: build cost).
    graph_max_chunks: int = 200_000
    #: The relation graph's extra extractor: ``offline`` (the deterministic one only) or
    #: ``llm`` (also OpenIE triples from the ``llm`` resource, stamped model-derived/unverified).
    graph_extractor: str = "offline"
    #: The relation-extractor slot of the relation graph (docs/graph.md): ``none`` (the base
    #: graph only: entities, about/mentions, glossary relations, synonyms), ``cooccurrence``
    #: (also ``co_occurs`` edges between a chunk's most specific entities) or ``llm`` (also
    #: OpenIE triples from the ``llm`` resource, stamped model-derived/unverified, both
    #: endpoints screened by the competitor gate).
    relation_extractor: str = "cooccurrence"
    #: Build the ANN index (``ragspine_core.dense.ann``) once the library holds this many
    #: vectors (``0``: never); unset: the run-level ``RAGSPINE_ANN_MIN_VECTORS`` (200,000).
    ann_min_vectors: int | None = None
    #: BM25's ``k1`` and ``b`` for both lexical fields of this library (unset: ``b`` 0.75 and
    #: ``k1`` by language, :func:`~.library_settings.bm25_params_for`; docs/evaluation.md).
    bm25_k1: float | None = None
    bm25_b: float | None = None

    def __post_init__(self) -> None:
        for name in ("bm25_k1", "bm25_b"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"{name} must be a number, got {value!r}")
        BM25Params(float(self.bm25_k1 or 0.0), float(self.bm25_b or 0.0))  # the ranges (k1 >= 0, 0 <= b <= 1)
        if self.ann_min_vectors is not None and (isinstance(self.ann_min_vectors, bool) or not isinstance(self.ann_min_vectors, int)
                                                 or self.ann_min_vectors < 0):
            raise ConfigError(f"ann_min_vectors must be an integer >= 0 (0: never build the ANN index), got {self.ann_min_vectors!r}")
        if self.summarizer not in ("extractive", "llm", "none"):
            raise ConfigError(f"unknown summarizer {self.summarizer!r}; allowed: extractive, llm, none")
        if isinstance(self.tree_max_leaves, bool) or not isinstance(self.tree_max_leaves, int) or self.tree_max_leaves < 0:
            raise ConfigError(f"tree_max_leaves must be an integer >= 0 (0: no limit), got {self.tree_max_leaves!r}")
        if isinstance(self.graph_max_chunks, bool) or not isinstance(self.graph_max_chunks, int) or self.graph_max_chunks < 0:
            raise ConfigError(f"graph_max_chunks must be an integer >= 0 (0: no limit), got {self.graph_max_chunks!r}")
        if self.graph_extractor not in ("offline", "llm"):
            raise ConfigError(f"unknown graph_extractor {self.graph_extractor!r}; allowed: offline, llm")
        if self.relation_extractor not in ("none", "cooccurrence", "llm"):
            raise ConfigError(f"unknown relation_extractor {self.relation_extractor!r}; allowed: none, cooccurrence, llm")
        for name in ("chunker", "analyzer", "embedding"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
            object.__setattr__(self, name, value.strip().lower())
        if self.chunker not in chunker_names():  # the built-ins and registered chunkers
            raise ConfigError(f"unknown chunker {self.chunker!r}; allowed: {', '.join(chunker_names())}")
        EmbeddingSpec(backend=self.embedding)  # an unknown backend: the message lists the choices
        if self.analyzer not in ANALYZERS:
            raise ConfigError(f"unknown analyzer {self.analyzer!r}; allowed: {', '.join(ANALYZERS)}")
        for name in ("max_chars", "overlap_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be an integer, got {value!r}")
        if self.max_chars <= 0:
            raise ConfigError(f"max_chars must be > 0, got {self.max_chars}")
        if not 0 <= self.overlap_chars < self.max_chars:
            raise ConfigError(
                f"overlap_chars must satisfy 0 <= overlap_chars < max_chars ({self.max_chars}), "
                f"got {self.overlap_chars}"
            )
        if not isinstance(self.contextual, bool):
            raise ConfigError(f"contextual must be true or false, got {self.contextual!r}")
        check_chunker_options(self)

    def make_chunker(self) -> Chunker:
        """The configured chunker with this library's budget and chunker settings."""
        return make_chunker(self.chunker, **chunker_kwargs(self))


LIBRARY_CONFIG_KEYS: tuple[str, ...] = tuple(f.name for f in fields(LibraryConfig))


def _read_library_toml(path: Path) -> tuple[dict[str, Any], bytes] | None:
    """``(the parsed TOML, its bytes)`` of the library config ``path``; None when absent.

    Raises:
        ConfigError: a link, not a regular file, unreadable, or invalid TOML (names the file).
    """
    raw = read_config_bytes(path)  # never through a link; None when absent
    if raw is None:
        return None
    try:
        return tomllib.loads(raw.decode("utf-8")), raw
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the library config: {scrub_values(str(exc), raw)}; fix the TOML syntax") from exc


def read_library_toml(raw_dir: Path | str) -> dict[str, Any]:
    """``<raw_dir>/_library.toml`` as written, its ``[defaults]`` table included, not validated
    ({} when absent); read as :func:`load_library_config` reads it (never through a link)."""
    found = _read_library_toml(Path(raw_dir) / LIBRARY_CONFIG_FILE)
    return found[0] if found is not None else {}


def load_library_config(raw_dir: Path | str) -> LibraryConfig:
    """Read ``<raw_dir>/_library.toml``; defaults when the file is absent.

    Raises:
        ConfigError: unreadable or invalid TOML, an unknown key (the allowed keys are
            listed), or an invalid value; the message names the file.
    """
    path = Path(raw_dir) / LIBRARY_CONFIG_FILE
    found = _read_library_toml(path)
    if found is None:
        return LibraryConfig()
    data, raw = found
    data.pop(DEFAULTS_TABLE, None)  # metadata defaults of converted files (converters/files.py)
    unknown = sorted(set(data) - set(LIBRARY_CONFIG_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {describe_keys(unknown)}; allowed keys: {', '.join(LIBRARY_CONFIG_KEYS)} "
            f"(and a [{DEFAULTS_TABLE}] table of metadata for converted files)"
        )
    try:
        return LibraryConfig(**data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {scrub_values(str(exc), raw, data)}") from exc


# --------------------------------------------------------------------------- chunker settings

#: ``_library.toml`` keys that tune one chunker (unset: the chunker's default), and the
#: chunkers that take each. The budget keys (``max_chars``, ``overlap_chars``) apply to all.
CHUNKER_OPTION_KEYS: tuple[str, ...] = (
    "parent_max_chars", "window", "breakpoint_percentile", "embed_window", "boundary_embedder")


def chunker_options(config: Any) -> dict[str, Any]:
    """The chunker-specific keys a library config sets (``None`` values left out)."""
    return {k: v for k in CHUNKER_OPTION_KEYS if (v := getattr(config, k, None)) is not None}


def chunker_kwargs(config: Any) -> dict[str, Any]:
    """The :func:`~.chunking.make_chunker` keyword arguments of a library config."""
    params: dict[str, Any] = {}
    if getattr(config, "max_chars", None):
        params["max_chars"] = config.max_chars
    if getattr(config, "overlap_chars", None) is not None:
        params["overlap_chars"] = config.overlap_chars
    params.update(chunker_options(config))
    return params


def check_chunker_options(config: Any) -> None:
    """Raise unless every chunker key of ``config`` applies to its chunker with a valid value.

    Raises:
        ConfigError: a key the configured chunker does not take (the message names the
            chunkers that do) or a value out of range (the message names key and value).
    """
    name = config.chunker
    allowed = chunker_params(name)
    for key, value in chunker_options(config).items():
        if key not in allowed:
            takers = [c for c in chunker_names() if key in chunker_params(c)]
            raise ConfigError(
                f"{key} = {value!r} does not apply to chunker {name!r}; it is a setting of "
                f"{', '.join(map(repr, takers))}: remove it or set chunker to one of those")
    try:
        make_chunker(name, **chunker_kwargs(config))
    except ValueError as exc:
        raise ConfigError(f"invalid chunker setting for chunker {name!r}: {exc}") from exc
