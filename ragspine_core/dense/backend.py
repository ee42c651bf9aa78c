"""The embedding-backend contract shared by every dense backend.

Index time and query time must embed with the same backend, so the contract (and the
normalisation every backend applies) lives here, next to nothing heavier than numpy.
"""

from __future__ import annotations

from abc import ABC
from typing import Literal, Protocol, Sequence, runtime_checkable, cast

import numpy as np

from ragspine_core.errors import ConfigError, EmbeddingModelMismatchError

#: What a text is: a search query or a stored passage (some models prefix them differently).
EmbeddingKind = Literal["query", "passage"]
EMBEDDING_KINDS: tuple[str, ...] = ("query", "passage")


@runtime_checkable
class EmbeddingBackend(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    ``model_id`` names the vector space: an index built with one ``model_id`` can only be
    queried with vectors of the same ``model_id``.
    """

    model_id: str
    dim: int

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Embed passages; the list-of-lists signature."""
        ...

    def embed(
        self,
        texts: Sequence[str],
        *,
        kind: EmbeddingKind = "passage",
        batch_size: int = 32,
    ) -> np.ndarray:
        """Embed ``texts`` into a float32 array of shape ``(len(texts), dim)``, rows L2-normalised."""
        ...


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Return ``x`` (1-D or 2-D) as float32 with each row scaled to unit L2 norm.

    Rows whose norm is zero stay all-zero (no NaN, no division warning). The input is
    not modified.
    """
    arr = np.asarray(x, dtype=np.float32)
    if arr.ndim == 1:
        return cast("np.ndarray", l2_normalize(arr[None, :])[0])
    if arr.ndim != 2:
        raise ValueError(f"l2_normalize expects a 1-D or 2-D array, got shape {arr.shape}")
    # float32 accumulation: no float64 copy of a possibly huge matrix, and ample precision
    # for embedding-sized rows.
    norms = np.sqrt(np.einsum("ij,ij->i", arr, arr))
    # Dividing by 1 leaves zero rows at exactly zero instead of producing 0/0.
    if norms.shape[0] == 1:  # one query: a scalar test, not a mask
        if norms[0] == 0.0:
            norms[0] = 1.0
    else:
        norms[norms == 0.0] = 1.0
    return cast("np.ndarray", arr / norms[:, None])


def ensure_compatible(backend: EmbeddingBackend, *, model_id: str, dim: int) -> None:
    """Refuse to query an index built with another embedding model.

    Parameters:
        backend: the query-side backend.
        model_id / dim: what the index manifest recorded at build time.

    Raises:
        EmbeddingModelMismatchError: the model id or the dimension differs.
    """
    if backend.model_id != model_id or backend.dim != dim:
        raise EmbeddingModelMismatchError(
            f"the index was built with embedding model {model_id!r} ({dim}-d) but the query backend is "
            f"{backend.model_id!r} ({backend.dim}-d); set RAGSPINE_EMBEDDING to the backend the index "
            "was built with, or re-materialize the chunk_embeddings asset with the new one"
        )


def check_kind(kind: str) -> None:
    """Raise :class:`ConfigError` unless ``kind`` is ``query`` or ``passage``."""
    if kind not in EMBEDDING_KINDS:
        raise ConfigError(f"embedding kind {kind!r} is invalid; allowed: {', '.join(EMBEDDING_KINDS)}")


def check_batch_size(batch_size: int) -> None:
    """Raise :class:`ConfigError` unless ``batch_size`` is a positive integer."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")


def as_text_list(texts: Sequence[str]) -> list[str]:
    """Validate that ``texts`` is a sequence of strings (not one bare string) and list it."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not one string; wrap it in a list")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, expected str")
    return out


class BaseEmbeddingBackend(ABC):
    """The one ``embed()`` of every built-in backend: a backend implements its model call.

    :meth:`embed` is a template: it checks ``kind`` and ``batch_size`` and that ``texts``
    is a sequence of strings, returns a ``(0, dim)`` array for no texts, asks the model for
    the raw vectors and L2-normalises them once (unless :attr:`normalize_output` is off).
    The model call is one of two hooks:

    * :meth:`_embed_batch` (``texts, kind -> (len(texts), d) array``): the usual one;
      :meth:`_embed_items` calls it on consecutive batches of ``batch_size`` texts;
    * :meth:`_embed_items` (``texts, kind, batch_size -> (n, dim) array``): for a model
      that batches by itself (the ONNX encoder sorts texts by token length across the
      whole call; sentence-transformers takes the whole list).

    Also derived: :meth:`embed_texts` and :meth:`embed_query`. A subclass may still
    override :meth:`embed` as a whole.
    """

    model_id: str
    dim: int
    #: Texts per model call when :meth:`embed` is given no ``batch_size``.
    batch_size: int = 32
    #: Whether :meth:`embed` L2-normalises the model's vectors (off: the model returns unit
    #: rows itself, or its configuration asks for raw vectors).
    normalize_output: bool = True

    def embed(
        self,
        texts: Sequence[str],
        *,
        kind: EmbeddingKind = "passage",
        batch_size: int | None = None,
    ) -> np.ndarray:
        """Embed ``texts`` into a float32 ``(len(texts), dim)`` array of unit rows.

        ``kind`` (``query`` or ``passage``) picks the model's prefix where it has one;
        ``batch_size`` bounds the texts per model call (default :attr:`batch_size`).

        Raises:
            TypeError: ``texts`` is one string, or holds something that is not a string.
            ConfigError: an invalid ``kind`` or ``batch_size``.
        """
        check_kind(kind)
        size = self.batch_size if batch_size is None else batch_size
        check_batch_size(size)
        items = as_text_list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._embed_items(items, kind, size)
        return l2_normalize(vectors) if self.normalize_output else vectors

    def _embed_items(self, texts: list[str], kind: EmbeddingKind, batch_size: int) -> np.ndarray:
        """The raw vectors of ``texts`` (at least one): :meth:`_embed_batch` on consecutive
        batches of ``batch_size``, in order, as one float32 ``(n, dim)`` array."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            part = texts[start : start + batch_size]
            out[start : start + len(part)] = self._embed_batch(part, kind)
        return out

    def _embed_batch(self, texts: list[str], kind: EmbeddingKind) -> np.ndarray:
        """The model call: raw vectors of one batch of ``texts``, shape ``(len(texts), dim)``."""
        raise NotImplementedError(f"{type(self).__name__} must implement _embed_batch(texts, kind) "
                                  "(or _embed_items, or embed)")

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Embed passages and return plain Python lists (the list-of-lists signature)."""
        return cast("list[list[float]]", self.embed(texts, kind="passage").tolist())

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query into a float32 vector of shape ``(dim,)``."""
        return cast("np.ndarray", self.embed([text], kind="query")[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self.model_id!r})"
