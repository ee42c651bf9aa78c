"""Sentence embeddings for the semantic chunker at chunking time: backend, cache, fallback.

The chunks step binds the library's embedding backend (the one the ``chunk_embeddings``
step uses) to the :class:`~.semantic.SemanticChunker` through :class:`SentenceEmbeddings`:

* without a backend (spec ``none``) every document uses the offline
  :class:`~.semantic.LexicalEmbedder`;
* a RESTRICTED document always uses the :class:`~.semantic.LexicalEmbedder`: its text is
  never sent to a backend (which may be a remote server) and no vector of it is stored;
* other documents' windows go through the backend, memoised in the run and cached across
  runs by (model id, sha256 of the text) in a ``semantic_sentence_cache`` table next to
  the chunk-embedding cache. Each cached vector records which (library, document) asked
  for it, so when a document becomes RESTRICTED its sentence vectors are deleted
  (:meth:`SentenceEmbeddings.purge_documents`): reclassification is retroactive here too.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from ragspine_core.records import is_restricted

from ragspine_index.chunking.semantic import LexicalEmbedder, SemanticChunker

if TYPE_CHECKING:
    from ragspine_index.source_documents.model import SourceDocument


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SentenceVectorCache:
    """(model id, text hash) -> float32 vector, with the (library, document) owners of each."""

    def __init__(self, path: Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")  # a cache: a lost commit only costs a re-embed
        with self._conn:
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS semantic_sentence_cache (model_id TEXT NOT NULL, text_hash TEXT NOT NULL, "
                "vector BLOB NOT NULL, PRIMARY KEY (model_id, text_hash))")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS semantic_sentence_owner (library_id TEXT NOT NULL, doc_id TEXT NOT NULL, "
                "text_hash TEXT NOT NULL, PRIMARY KEY (library_id, doc_id, text_hash))")

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(hashes), 500):
            part = list(hashes[i:i + 500])
            q = (f"SELECT text_hash, vector FROM semantic_sentence_cache WHERE model_id = ? "
                 f"AND text_hash IN ({','.join('?' * len(part))})")
            for h, blob in self._conn.execute(q, [model_id, *part]):
                out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def record(self, model_id: str, library_id: str, doc_id: str, new: Sequence[tuple[str, np.ndarray]],
               owned: Iterable[str]) -> None:
        """Store the ``new`` vectors and note that ``doc_id`` asked for every text in ``owned``."""
        with self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO semantic_sentence_cache (model_id, text_hash, vector) VALUES (?,?,?)",
                [(model_id, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in new])
            self._conn.executemany(
                "INSERT OR IGNORE INTO semantic_sentence_owner (library_id, doc_id, text_hash) VALUES (?,?,?)",
                [(library_id, doc_id, h) for h in sorted(set(owned))])

    def purge_documents(self, library_id: str, doc_ids: Iterable[str]) -> int:
        """Delete every model's vectors of texts these documents asked for; returns rows deleted."""
        deleted = 0
        with self._conn:
            for doc_id in sorted(set(doc_ids)):
                hashes = [r[0] for r in self._conn.execute(
                    "SELECT text_hash FROM semantic_sentence_owner WHERE library_id = ? AND doc_id = ?", (library_id, doc_id))]
                for i in range(0, len(hashes), 500):
                    part = hashes[i:i + 500]
                    deleted += self._conn.execute(
                        f"DELETE FROM semantic_sentence_cache WHERE text_hash IN ({','.join('?' * len(part))})", part).rowcount
                self._conn.execute(
                    "DELETE FROM semantic_sentence_owner WHERE library_id = ? AND doc_id = ?", (library_id, doc_id))
        return deleted

    def close(self) -> None:
        self._conn.close()


@dataclass(frozen=True, slots=True)
class _DocumentEmbedder:
    """One open document's view of :class:`SentenceEmbeddings` (a ``SentenceEmbedder``)."""

    owner: SentenceEmbeddings
    doc_id: str

    @property
    def model_id(self) -> str:
        return self.owner.model_id

    def embed_sentences(self, texts: Sequence[str]) -> np.ndarray:
        return self.owner.embed_for(self.doc_id, texts)


class SentenceEmbeddings:
    """Binds an embedding backend (or none) to the semantic chunker, per document.

    Parameters:
        backend: an ``EmbeddingBackend`` (``embed(texts, kind=, batch_size=)`` and
            ``model_id``), or ``None`` for the offline lexical embedder.
        library_id: owner of the cached vectors.
        cache_path: the SQLite file to cache vectors in (``None``: memo in this run only);
            opened even without a backend when it exists, to purge RESTRICTED documents.
    """

    def __init__(self, backend: Any | None, library_id: str, cache_path: Path | None = None) -> None:
        self.backend: Any = backend
        self.library_id = library_id
        self.lexical = LexicalEmbedder()
        # opened for every chunker when the file exists: a library that used the semantic
        # chunker earlier must still lose the sentence vectors of documents now RESTRICTED
        use_cache = cache_path is not None and (backend is not None or Path(cache_path).is_file())
        self._cache = SentenceVectorCache(Path(cache_path)) if use_cache and cache_path is not None else None
        self._memo: dict[str, np.ndarray] = {}
        self.embedded = 0
        self.reused = 0

    @property
    def model_id(self) -> str:
        return self.backend.model_id if self.backend is not None else self.lexical.model_id

    def source(self, chunker: SemanticChunker) -> str:
        """What the UI shows: which embedder drew the boundaries of open documents."""
        if chunker.boundary_embedder == "lexical":
            return f"{self.lexical.model_id} (boundary_embedder = \"lexical\")"
        if self.backend is None:
            return f"{self.lexical.model_id} (offline fallback: no embedding backend configured)"
        return f"{self.backend.model_id} (the library's embedding backend; RESTRICTED documents: {self.lexical.model_id})"

    def bind(self, chunker: Any) -> Any:
        """``chunker`` as an open document gets it (the version then names the model)."""
        if not isinstance(chunker, SemanticChunker):
            return chunker
        if self.backend is None or chunker.boundary_embedder == "lexical":
            return chunker.with_embedder(self.lexical)
        return chunker.with_embedder(_DocumentEmbedder(self, ""))

    def chunker_for(self, chunker: Any, doc: SourceDocument) -> Any:
        """``chunker`` bound for ``doc``; any chunker but the semantic one is returned as is."""
        if not isinstance(chunker, SemanticChunker):
            return chunker
        if self.backend is None or chunker.boundary_embedder == "lexical" or is_restricted(doc.sensitivity):
            return chunker.with_embedder(self.lexical)
        return chunker.with_embedder(_DocumentEmbedder(self, doc.doc_id))

    def purge_documents(self, doc_ids: Iterable[str]) -> int:
        """Forget the cached sentence vectors of these (now RESTRICTED) documents."""
        return self._cache.purge_documents(self.library_id, doc_ids) if self._cache is not None else 0

    def embed_for(self, doc_id: str, texts: Sequence[str]) -> np.ndarray:
        hashes = [_hash(t) for t in texts]
        missing = sorted({h for h in hashes if h not in self._memo})
        if missing and self._cache is not None:
            found = self._cache.get_many(self.backend.model_id, missing)
            self._memo.update(found)
            self.reused += len(found)
            missing = [h for h in missing if h not in found]
        if missing:
            by_hash = dict(zip(hashes, texts))
            vectors = np.asarray(self.backend.embed([by_hash[h] for h in missing], kind="passage", batch_size=64),
                                 dtype=np.float32)
            new = list(zip(missing, vectors))
            self._memo.update(new)
            self.embedded += len(new)
        else:
            new = []
        if self._cache is not None:
            self._cache.record(self.backend.model_id, self.library_id, doc_id, new, hashes)
        if not hashes:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self._memo[h] for h in hashes])

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()

    def __enter__(self) -> SentenceEmbeddings:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
