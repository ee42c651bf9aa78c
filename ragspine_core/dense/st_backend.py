"""A thin backend over ``sentence-transformers`` for users who already run torch.

RAGSpine never installs torch; this exists so a model the user has on disk in
sentence-transformers layout can be used as is. ``sentence_transformers`` is imported
only on construction, and models load from a local directory only (no hub download).
"""

from __future__ import annotations

import os
from pathlib import Path
import numpy as np

from ragspine_core.errors import ConfigError, MissingExtraError
from ragspine_core.dense.backend import BaseEmbeddingBackend, EmbeddingKind

#: The extra name the MissingExtraError points at.
SENTENCE_TRANSFORMERS_EXTRA = "sentence-transformers"


class SentenceTransformersBackend(BaseEmbeddingBackend):
    """An :class:`EmbeddingBackend` over ``SentenceTransformer(model_dir)``.

    Parameters:
        model_dir: a local sentence-transformers model directory (``modules.json`` etc.).
        model_id: the vector-space name; default ``sentence-transformers:<directory name>``.
        device: torch device (``cpu``, ``cuda``…); default lets sentence-transformers pick.
        query_prefix / passage_prefix: prepended to queries / passages.

    Raises:
        MissingExtraError: ``sentence_transformers`` is not installed.
        ConfigError: ``model_dir`` is not a directory.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        model_id: str | None = None,
        device: str | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingExtraError("The sentence-transformers embedding backend", SENTENCE_TRANSFORMERS_EXTRA, "sentence_transformers") from exc
        root = Path(model_dir).expanduser()
        if not root.is_dir():
            raise ConfigError(
                f"sentence-transformers model directory {root} does not exist; pass a local model "
                "directory (RAGSpine does not download models)"
            )
        self._model = SentenceTransformer(str(root), device=device)
        self.model_id = model_id or f"sentence-transformers:{root.resolve().name}"
        self.dim = int(self._model.get_sentence_embedding_dimension())
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix

    def _embed_items(self, texts: list[str], kind: EmbeddingKind, batch_size: int) -> np.ndarray:
        """All texts to ``SentenceTransformer.encode`` (which batches by ``batch_size``)."""
        prefix = self.query_prefix if kind == "query" else self.passage_prefix
        vectors = self._model.encode(
            [prefix + t for t in texts],
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
