"""Per-library settings, resolved in one place for the Dagster assets and ``build_library``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragspine_query.text.tokenize import cjk_share

from .documents import DocumentSet


@dataclass(frozen=True, slots=True)
class LibrarySettings:
    #: The concrete embedding spec (never ``auto``): ``none``, ``onnx``, ``deterministic``…
    embedding: str
    #: The glossary TOML that is published with the snapshot, or None (no glossary).
    glossary_path: Path | None


def resolve_embedding_spec(spec: str, docs: DocumentSet) -> str:
    """``auto`` picks multilingual for CJK-heavy libraries, MiniLM otherwise (if installed)."""
    s = (spec or "auto").lower()
    if s != "auto":
        return s
    from ragspine_query.dense.embedding import auto_backend_for_languages

    sample = "\n".join(d.body[:2000] for d in docs.documents[:2000])
    return auto_backend_for_languages(cjk_share(sample))


def resolve_library_settings(docs: DocumentSet, *, embedding: str = "auto", glossary_path: Path | str | None = None) -> LibrarySettings:
    """The settings one library is built with.

    * embedding: the library's own ``_library.toml`` ``embedding`` when it is not
      ``auto``, else the run-level ``embedding`` (resource, CLI flag or argument);
      ``auto`` then resolves by the library's languages.
    * glossary: ``glossary_path`` when that file exists, else none.
    """
    own = (getattr(docs.config, "embedding", "auto") or "auto").strip().lower()
    spec = resolve_embedding_spec(embedding if own == "auto" else own, docs)
    glossary = Path(glossary_path) if glossary_path else None
    return LibrarySettings(spec, glossary if glossary is not None and glossary.is_file() else None)
