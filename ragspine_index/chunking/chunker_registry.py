"""The ``Chunker`` protocol, the chunker registry (:data:`CHUNKERS`, a
:class:`~ragspine_core.registry.Registry`) and :func:`make_chunker`."""

from __future__ import annotations

import dataclasses
import inspect
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ragspine_core.errors import ConfigError
from ragspine_core.registry import PLUGIN_ORDER, Registry

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


def _settings(cls: type) -> tuple[str, ...]:
    if not dataclasses.is_dataclass(cls):  # a plug-in that is a plain class: its keyword parameters
        return tuple(p.name for p in inspect.signature(cls).parameters.values()
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    # a field marked ``setting=False`` (the semantic chunker's embedder) is bound in code
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("setting", True))


def _check_chunker(name: str, cls: type) -> None:
    """A chunker class must build with its defaults, carry its registered ``name`` and a
    ``version``, and take the budget every library passes (``max_chars``, ``overlap_chars``)."""
    if not isinstance(cls, type):
        raise ConfigError(f"chunker {name!r}: register the chunker class, got {type(cls).__name__}")
    if name != name.strip().lower():
        raise ConfigError(f"a chunker name is lower case without spaces, got {name!r}")
    try:
        default = cls()
    except TypeError as exc:
        raise ConfigError(f"chunker {name!r}: {cls.__name__}() must build with its defaults ({exc})") from None
    if getattr(default, "name", None) != name or not isinstance(getattr(default, "version", None), str) \
            or not callable(getattr(default, "chunk", None)):
        raise ConfigError(f"chunker {name!r}: {cls.__name__} must have name = {name!r}, a version string and a "
                          "chunk(doc) method (the Chunker protocol)")
    missing = [p for p in ("max_chars", "overlap_chars") if p not in _settings(cls)]
    if missing:
        raise ConfigError(f"chunker {name!r}: {cls.__name__} must take {' and '.join(missing)} (every library passes its budget)")


#: Every chunker by name: the built-ins (in the order of :data:`CHUNKER_NAMES`), then the
#: classes given to :func:`register_chunker`. ``_library.toml`` ``chunker`` selects one.
CHUNKERS: Registry[type] = Registry("chunker", check=_check_chunker)
_BUILTIN_CHUNKERS: tuple[Any, ...] = (
    ParagraphChunker,
    LayoutChunker,
    ParentChildChunker,
    SentenceWindowChunker,
    LawsChunker,
    QAChunker,
    BookChunker,
    SemanticChunker,
)
for _order, _cls in enumerate(_BUILTIN_CHUNKERS):
    CHUNKERS.register(_cls.name, _cls, order=_order * 10, builtin=True)
del _order, _cls

#: Built-in chunker name → version of the chunker with its defaults (``semantic``: with its
#: offline embedder; bound to a backend its version names that model instead). The chunk
#: asset's ``code_version`` and the manifest include these values. A registered chunker
#: is not listed (so registering one changes no snapshot id); its version reaches the
#: chunk store through :func:`chunker_signature`, and a new version re-chunks the library.
CHUNKER_VERSIONS: dict[str, str] = {name: cls().version for name, cls in CHUNKERS.items()}
#: The built-in chunker names; :func:`chunker_names` adds the registered ones.
CHUNKER_NAMES: tuple[str, ...] = tuple(CHUNKER_VERSIONS)


def register_chunker(cls: type, *, order: int = PLUGIN_ORDER, replace: bool = False) -> type:
    """Make the chunker class ``cls`` selectable by its ``name`` (``_library.toml``
    ``chunker = "<name>"``; :func:`make_chunker`). Usable as a class decorator.

    ``cls`` is best a frozen dataclass like the built-ins: its fields are its settings
    (``max_chars`` and ``overlap_chars`` at least), each with a default; ``version``
    changes whenever its output does; ``chunk(doc)`` returns spans of ``doc.body``.

    Raises:
        ConfigError: the class does not meet that contract (the message says how), or
            its name is taken (pass ``replace=True`` to replace a registered one).
    """
    CHUNKERS.register(getattr(cls, "name", ""), cls, order=order, replace=replace)
    return cls


def chunker_names() -> tuple[str, ...]:
    """Every selectable chunker: the built-ins in :data:`CHUNKER_NAMES` order, then plug-ins."""
    return CHUNKERS.names()


def chunker_params(name: str) -> tuple[str, ...]:
    """The keyword parameters :func:`make_chunker` accepts for chunker ``name``."""
    return _settings(_chunker_class(name))


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
        name: one of :func:`chunker_names` (case-insensitive): a built-in of
            :data:`CHUNKER_NAMES` or a registered chunker.
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


def _chunker_class(name: str) -> Any:
    key = str(name).strip().lower()
    if key not in CHUNKERS:
        raise ConfigError(f"unknown chunker {name!r}; allowed: {', '.join(chunker_names())}")
    return CHUNKERS.get(key)
