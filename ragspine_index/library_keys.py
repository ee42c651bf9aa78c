"""The ``_library.toml`` keys, documented once.

What each key means is written here, once; its default comes from
:class:`~ragspine_index.library_config.LibraryConfig` (or, for a chunker setting, from the
chunker that takes it) and the chunkers it applies to from the chunker registry. The table
in ``docs/configuration.md`` is generated from these (``python -m ragspine_index.library_keys
--write docs/configuration.md``), and a test fails when the two disagree or a key of
``LibraryConfig`` has no entry here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ragspine_core.settings import generated_doc_main

from ragspine_index.chunking import CHUNKER_NAMES, CHUNKERS, chunker_params
from ragspine_index.library_config import CHUNKER_OPTION_KEYS, LibraryConfig


@dataclass(frozen=True, slots=True)
class LibraryKey:
    """One row of the table: the key (or keys documented together) and what it means.

    ``default``: the default as documented when the code's value does not say it (a
    computed default); empty: taken from the code.
    """

    keys: tuple[str, ...]
    meaning: str
    default: str = ""


_CHUNKERS = ", ".join(f"`{n}`" for n in CHUNKER_NAMES)

#: Every ``_library.toml`` key, in the order the table lists them.
LIBRARY_KEYS: tuple[LibraryKey, ...] = (
    LibraryKey(("chunker",), f"{_CHUNKERS}, or a chunker registered with `ragspine_index.chunking.register_chunker`"),
    LibraryKey(("max_chars",), "the most characters one chunk holds (> 0)"),
    LibraryKey(("overlap_chars",), "characters a packed chunk repeats from the one before (`0 <= overlap_chars < max_chars`)"),
    LibraryKey(("parent_max_chars",), "the most characters of the generation-only parent window (`>= max_chars`)"),
    LibraryKey(("window",), "sentences on each side of a sentence in its parent window (`>= 0`)"),
    LibraryKey(("breakpoint_percentile",),
               "a gap between sentences is cut when its similarity is at or below this percentile (0–100) of the "
               "document's gaps; `0` = no semantic cuts (plain sentence packing)"),
    LibraryKey(("embed_window",), "sentences on each side of a gap embedded together (`>= 1`)"),
    LibraryKey(("boundary_embedder",),
               "`library`: the library's embedding backend draws the boundaries (the offline lexical embedder when "
               "the spec is `none`); `lexical`: always the offline hashed TF-IDF embedder (no model, fast)"),
    LibraryKey(("analyzer",), "BM25 analyzer: `auto`, `spec`, `english`"),
    LibraryKey(("embedding",),
               "this library's embedding backend (replaces the backend of the run's spec, `RAGSPINE_EMBEDDING`, when "
               "not `auto`; the model folder, endpoint and key stay the run's); a built-in name or one registered "
               "with `ragspine_core.dense.register_embedding_backend`; `auto`: MiniLM + multilingual-e5 for an "
               "English library (under 2 % CJK characters, with the `e5` extra), MiniLM alone up to 20 %, "
               "USE-multilingual from 20 %"),
    LibraryKey(("contextual",), "prepend the context header to the index text"),
    LibraryKey(("summarizer",), "the summary tree's summarizer: `extractive`, `llm`, `none` (no tree; `docs/summary_tree.md`)"),
    LibraryKey(("tree_max_leaves",),
               "build the summary tree only up to this many open chunks (`0`: no limit); a larger library gets no "
               "tree, and the asset says why, until it raises this (build cost: `docs/summary_tree.md`)"),
    LibraryKey(("graph_max_chunks",),
               "build the relation graph (`--mode graph`) only up to this many open chunks (`0`: no limit); a larger "
               "library gets no graph, and the asset says why, until it raises this (build cost: `docs/evaluation.md`)"),
    LibraryKey(("graph_extractor",),
               "the relation graph's entity/relation extractor: `offline` (deterministic only) or `llm` (also OpenIE "
               "triples from the LLM of `RAGSPINE_LLM_BASE_URL`, cached by chunk hash, edges stamped "
               "model-derived/unverified; RESTRICTED chunks never sent)"),
    LibraryKey(("relation_extractor",),
               "the relation graph's relation-extractor slot (`docs/graph.md`): `none` (the base graph: entities, "
               "about/mentions, glossary relations, synonyms), `cooccurrence` (also `co_occurs` edges between a "
               "chunk's most specific entities) or `llm` (also OpenIE triples from the LLM, both endpoints screened "
               "by the competitor gate; `graph_extractor = \"llm\"` is `cooccurrence` + `llm`)"),
    LibraryKey(("ann_min_vectors",),
               "build the ANN index (`docs/scaling.md`) once the library has this many vectors (`0`: never); unset: "
               "`RAGSPINE_ANN_MIN_VECTORS` (200,000)"),
    LibraryKey(("bm25_k1", "bm25_b"),
               "BM25's term-frequency saturation and length normalisation for both lexical fields (chunk and "
               "document), `k1 >= 0`, `0 <= b <= 1`; they change the `bm25` mode too (measurements: "
               "`docs/evaluation.md`); the manifest and the eval JSON record the values used",
               default="(unset): `k1` 0.2 when the library is embedded with the ONNX MiniLM or MiniLM + e5 (English), "
                       "else 1.5; a library that mixes English and Chinese (each ≥ 10 % of its chunks) keeps each "
                       "language's statistics (`N`, `df`, `avgdl`) apart, with `k1` 0.2 for its English rows under "
                       "MiniLM + e5 + USE and 1.5 for its Chinese rows; `b` 0.75"),
)

TABLE_BEGIN = ("<!-- _library.toml table: generated by `python -m ragspine_index.library_keys --write "
               "docs/configuration.md`; do not edit -->")
TABLE_END = "<!-- end of _library.toml table -->"


def _toml(value: object) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def key_default(key: str) -> str:
    """The documented default of ``key``: ``LibraryConfig``'s, or for a chunker setting
    (unset in ``LibraryConfig``) the default of the first built-in chunker that takes it."""
    value = {f.name: f.default for f in dataclasses.fields(LibraryConfig)}[key]
    if value is None and key in CHUNKER_OPTION_KEYS:
        taker = next(CHUNKERS.get(n) for n in CHUNKER_NAMES if key in chunker_params(n))
        value = getattr(taker(), key)
    return _toml(value)


def applies_to(key: str) -> str:
    """The built-in chunkers a key tunes (``every chunker`` for the budget), ``–`` for a library key."""
    if key in ("max_chars", "overlap_chars"):
        return "every chunker"
    if key in CHUNKER_OPTION_KEYS:
        return ", ".join(f"`{n}`" for n in CHUNKER_NAMES if key in chunker_params(n))
    return "–"


def library_keys_markdown() -> str:
    """The ``_library.toml`` table of ``docs/configuration.md`` (markers included)."""
    lines = [TABLE_BEGIN, "| key | default | applies to | meaning |", "| --- | --- | --- | --- |"]
    for row in LIBRARY_KEYS:
        first = row.keys[0]
        default = row.default or key_default(first)
        lines.append(f"| {', '.join(f'`{k}`' for k in row.keys)} | {default} | {applies_to(first)} | {row.meaning} |")
    lines.append(TABLE_END)
    return "\n".join(lines)


__all__ = ["LIBRARY_KEYS", "LibraryKey", "applies_to", "key_default", "library_keys_markdown"]


if __name__ == "__main__":  # print the docs table, or --write docs/configuration.md
    raise SystemExit(generated_doc_main(library_keys_markdown(), prog="python -m ragspine_index.library_keys"))
