"""Which embedding backend answers a library's dense channel at query time."""

from __future__ import annotations

from typing import Any

from ragspine_core.settings import Settings
from ragspine_query.modes import LEXICAL_MODES, normalize_mode


def backend_for_library(library: Any, mode: str, spec: str | None = None, *, strict: bool = False,
                        settings: Settings | None = None) -> Any | None:
    """The embedding backend that matches ``library``'s index, or None for BM25 only.

    ``settings`` (built once at an edge, :meth:`Settings.from_env`, such as
    :func:`build_narrative_retriever`'s; default: the defaults, ``Settings()`` — nothing
    here reads the environment) complete the backend's spec
    (model folder, endpoint, key, e5 engine). ``spec`` (default: ``settings.embedding``,
    i.e. ``RAGSPINE_EMBEDDING``, else ``auto``): ``none`` disables the dense
    channel; ``auto`` re-creates the backend recorded in the manifest when its extra is
    installed and silently falls back to BM25 when it is not (``strict=True``: raises
    the ImportError/MissingExtraError instead, for a caller that reports it).
    """
    if normalize_mode(mode) in LEXICAL_MODES:
        return None
    emb = library.manifest.get("embedding")
    if not emb:
        return None
    settings = settings if settings is not None else Settings()
    spec = (spec or settings.embedding or "auto").lower()
    if spec == "none":
        return None
    from dataclasses import replace

    from ragspine_core.dense.embedding import EmbeddingSpec, shared_embedding_backend
    from ragspine_core.runtime.threads import query_threads

    backend_spec = emb.get("backend", spec)
    try:
        resolved = EmbeddingSpec.from_settings(settings, backend=backend_spec)
        if emb.get("model_dir"):
            resolved = replace(resolved, model_dir=emb["model_dir"])
        # a query-time backend: its native pools pinned (ragspine_core.runtime.threads)
        return shared_embedding_backend(resolved, threads=query_threads(settings=settings))
    except ImportError:
        if spec == "auto" and normalize_mode(mode) == "auto" and not strict:
            return None
        raise
