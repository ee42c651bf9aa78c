"""The ``Chunker`` protocol, the chunker registry and :func:`make_chunker`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ragspine_core.errors import ConfigError

from ragspine_index.chunking.paragraph import ParagraphChunker
from ragspine_index.chunking.semantic import SemanticChunker
from ragspine_index.chunking.sentence_window import SentenceWindowChunker
from ragspine_index.chunking.spans import ChunkSpan
from ragspine_index.chunking.structured import BookChunker, LawsChunker, LayoutChunker, ParentChildChunker, QAChunker

if TYPE_CHECKING:
    from ragspine_index.source_documents.model import SourceDocument

DEFAULT_CHUNKER = "paragraph"


@runtime_checkable
class Chunker(Protocol):
    """Cuts a document body into spans. ``version`` changes whenever the output does."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    def chunk(self, doc: SourceDocument) -> list[ChunkSpan]: ...


_CHUNKER_CLASSES: tuple[type, ...] = (
    ParagraphChunker,
    LayoutChunker,
    ParentChildChunker,
    SentenceWindowChunker,
    LawsChunker,
    QAChunker,
    BookChunker,
    SemanticChunker,
)
_BY_NAME: dict[str, type] = {cls.name: cls for cls in _CHUNKER_CLASSES}

#: Chunker name → version of the chunker with its defaults (``semantic``: with its offline
#: embedder; bound to a backend its version names that model instead). A chunk asset's
#: ``code_version`` should include this value.
CHUNKER_VERSIONS: dict[str, str] = {cls.name: cls().version for cls in _CHUNKER_CLASSES}
CHUNKER_NAMES: tuple[str, ...] = tuple(CHUNKER_VERSIONS)


def chunker_params(name: str) -> tuple[str, ...]:
    """The keyword parameters :func:`make_chunker` accepts for chunker ``name``."""
    return _settings(_chunker_class(name))


def _settings(cls: type) -> tuple[str, ...]:
    # a field marked ``setting=False`` (the semantic chunker's embedder) is bound in code
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("setting", True))


def chunker_signature(chunker: Chunker) -> str:
    """``chunker.version`` plus every setting that differs from the chunker's default.

    ``"1"`` for a default paragraph chunker, ``"1;max_chars=300,overlap_chars=40"`` for a
    narrower one: the chunk store compares and records this, so changing a setting in
    ``_library.toml`` re-chunks the library like a new chunker version does.
    """
    cls = type(chunker)
    if not dataclasses.is_dataclass(cls):  # a chunker outside the registry: its version alone
        return chunker.version
    default = cls()
    changed = [f"{k}={getattr(chunker, k)}" for k in _settings(cls) if getattr(chunker, k) != getattr(default, k)]
    return chunker.version + (";" + ",".join(changed) if changed else "")


def make_chunker(name: str = DEFAULT_CHUNKER, **params: Any) -> Chunker:
    """Build a chunker by name with its budget parameters.

    Parameters:
        name: one of :data:`CHUNKER_NAMES` (case-insensitive).
        params: ``max_chars`` and ``overlap_chars`` for every chunker;
            ``parent_max_chars`` for ``parent_child`` and ``qa``; ``window`` for
            ``sentence_window``; ``breakpoint_percentile`` and ``embed_window`` for
            ``semantic`` (whose embedder is bound with ``with_embedder``).

    Raises:
        ConfigError: unknown name or parameter (the message lists the allowed ones).
        ValueError: a parameter value out of range (the message names it).
    """
    cls = _chunker_class(name)
    allowed = _settings(cls)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ConfigError(
            f"chunker {cls.name!r} does not take {', '.join(map(repr, unknown))}; "
            f"allowed parameters: {', '.join(allowed)}"
        )
    return cls(**params)


def _chunker_class(name: str) -> type:
    key = str(name).strip().lower()
    try:
        return _BY_NAME[key]
    except KeyError:
        raise ConfigError(f"unknown chunker {name!r}; allowed: {', '.join(CHUNKER_NAMES)}") from None
