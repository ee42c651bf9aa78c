"""Reclassification purges every derived store (issue 28 item 7).

When a document is RESTRICTED now — or was withdrawn while RESTRICTED, or its text moved
to a RESTRICTED document under another ``doc_id`` — text derived from it while it was
open must not stay in any store outside the data plane (docs/security.md lists the data
plane). After each publication, :func:`purge_derived` removes, for the library's
*RESTRICTED lineage* (:func:`restricted_lineage`):

* ``cache/summaries.sqlite``: every summary built (directly or through other summaries)
  from a lineage text, and in ``cache/embeddings.sqlite`` the vectors of those summaries
  (summary-tree node vectors are cached by the node text's hash);
* ``cache/embeddings.sqlite``: every model's vector of a lineage index text, and the
  ``entity:<name>`` vectors of names that no current graph of this library still has
  (a guessed name could otherwise be confirmed from its hash);
* ``cache/openie.sqlite``: the triples extracted from a lineage text;
* ``work/{embeddings,ann,summary_tree,relation_graph}``: every folder the current
  publication does not use.

Everything is keyed by content and history (the chunk store keeps every version with its
sensitivity), never by ``doc_id`` alone.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pyarrow.parquet as pq

from ragspine_core import schema

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.chunk_store import ChunkStore
from ragspine_index.fingerprints import derived_from_restricted

#: Work folders that hold derived text or vectors, purged when the publication does not use them.
DERIVED_WORK_KINDS = ("embeddings", "ann", "summary_tree", "relation_graph")
_T = schema.CHUNK_TABLE


@dataclass(frozen=True, slots=True)
class Lineage:
    """Chunk texts (and their index texts) that are, or were, text of what is RESTRICTED now."""

    texts: frozenset[str] = frozenset()
    index_texts: frozenset[str] = frozenset()
    titles: frozenset[str] = field(default_factory=frozenset)

    def __bool__(self) -> bool:
        return bool(self.texts)


def restricted_lineage(store_path: Path) -> Lineage:
    """Every version of every document RESTRICTED now (active, or withdrawn while
    RESTRICTED), plus every version of any other document derived from that RESTRICTED
    text (moved and edited: a whole normalised sentence, or a near duplicate by shingles,
    that no open chunk has now; :func:`~.fingerprints.derived_from_restricted`)."""
    if not Path(store_path).is_file():
        return Lineage()
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            f"SELECT c.doc_id, c.version, c.text, c.index_text, c.title, c.active, upper(trim(c.sensitivity)) AS s, "
            f"(SELECT MAX(x.version) FROM {_T} x WHERE x.doc_id = c.doc_id) AS last FROM {_T} c")
    # RESTRICTED now: the document's latest version is RESTRICTED (active, or withdrawn as such)
    docs = {r["doc_id"] for r in rows if r["s"] == "RESTRICTED" and r["version"] == r["last"]}
    if not docs:
        return Lineage()
    restricted_texts = [r["text"] for r in rows if r["doc_id"] in docs and r["s"] == "RESTRICTED"]
    chosen = [r for r in rows if r["doc_id"] in docs]
    others = [r for r in rows if r["doc_id"] not in docs and not r["active"]]
    if others:
        derived = derived_from_restricted(
            [r["text"] for r in others], restricted_texts,
            lambda: [r["text"] for r in rows if r["active"] and r["s"] != "RESTRICTED"])
        chosen += [r for r, hit in zip(others, derived) if hit]
    return Lineage(frozenset(r["text"] for r in chosen), frozenset(r["index_text"] for r in chosen),
                   frozenset(r["title"] for r in chosen if r["title"]))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _labels(graph_dir: Path) -> set[str]:
    try:
        nodes = pq.read_table(graph_dir / "nodes.parquet", columns=["kind", "label"]).to_pydict()
    except (OSError, ValueError, KeyError):
        return set()
    return {str(lab) for k, lab in zip(nodes["kind"], nodes["label"]) if k == "entity" and lab}


def _graph_dirs(paths: LibraryPaths) -> Iterable[Path]:
    root = paths.work / "relation_graph"
    if root.is_dir():
        yield from (d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    sub = schema.ARTIFACT_REGISTRY["relation_graph"].path
    if paths.snapshots.is_dir():
        yield from (d / sub for d in paths.snapshots.iterdir() if not d.name.startswith(".") and (d / sub).is_dir())


def purge_derived(paths: LibraryPaths, cache_dir: Path, *, keep: Iterable[Path] = ()) -> dict[str, int]:
    """Purge what the library's RESTRICTED lineage left in caches and work folders (see the
    module docstring); ``keep``: folders the current publication uses. Returns counts."""
    from ragspine_index.steps.chunk_embeddings import EmbeddingCache, text_hash
    from ragspine_index.raptor.summarizers import SummaryCache, text_sha

    lineage = restricted_lineage(paths.chunk_store)
    counts = {"summaries": 0, "vectors": 0, "openie": 0, "work_folders": 0}
    if not lineage:
        return counts
    cache_dir = Path(cache_dir)
    keep_dirs = {Path(k).resolve() for k in keep}
    # names in graphs this purge removes (work folders not kept) and not in a graph still used
    current_labels: set[str] = set()
    stale_labels: set[str] = set()
    for d in _graph_dirs(paths):
        (current_labels if d.resolve() in keep_dirs or d.parent.parent == paths.snapshots else stale_labels).update(_labels(d))
    summaries: list[str] = []
    if (cache_dir / "summaries.sqlite").is_file():
        with SummaryCache(cache_dir / "summaries.sqlite") as cache:
            counts["summaries"] = cache.purge_members(sorted({text_sha(t) for t in lineage.texts}), summaries)
    openie_names: set[str] = set()
    if (cache_dir / "openie.sqlite").is_file():
        conn = sqlite3.connect(cache_dir / "openie.sqlite", timeout=60)
        try:
            hashes = sorted({_sha(t) for t in lineage.texts})
            with conn:
                for i in range(0, len(hashes), 500):
                    part = hashes[i:i + 500]
                    marks = ",".join("?" * len(part))
                    for (triples,) in conn.execute(f"SELECT triples FROM openie_cache WHERE text_hash IN ({marks})", part):
                        for t in json.loads(triples):
                            openie_names.update(str(x) for x in (t[0], t[2]))
                    counts["openie"] += conn.execute(f"DELETE FROM openie_cache WHERE text_hash IN ({marks})", part).rowcount
        except sqlite3.OperationalError:
            pass  # no openie table yet
        finally:
            conn.close()
    if (cache_dir / "embeddings.sqlite").is_file():
        names = (stale_labels | openie_names | lineage.titles) - current_labels
        doomed = ({text_hash(t) for t in lineage.index_texts} | {text_hash(s) for s in summaries}
                  | {text_hash("entity:" + n) for n in names})
        vectors = EmbeddingCache(cache_dir / "embeddings.sqlite")
        try:
            counts["vectors"] = vectors.purge(sorted(doomed))
        finally:
            vectors.close()
    for kind in DERIVED_WORK_KINDS:
        root = paths.work / kind
        if not root.is_dir():
            continue
        for d in root.iterdir():
            if d.is_dir() and not d.name.startswith(".") and d.resolve() not in keep_dirs:
                shutil.rmtree(d, ignore_errors=True)
                counts["work_folders"] += 1
    return counts


__all__ = ["DERIVED_WORK_KINDS", "Lineage", "purge_derived", "restricted_lineage"]
