"""Community themes of the relation graph (GraphRAG-style global answers) and the ``community`` channel.

The ``relation_graph`` artifact holds Louvain communities of its entities, each with an
extractive summary quoted from its member chunks (``communities.parquet``; writer:
``ragspine_index.graph.community_detection``). Here:

* :func:`community_themes` — a library's themes (best first: by a query's terms, else by
  size), each with its summary and the snippets of exactly the chunks the summary quotes
  (``citations``; a summary is a synthesis, never cited itself);
* :class:`CommunityChannel` (``community``) — the chunks of the communities a query's
  terms match, for the adaptive ``global`` tier (:mod:`ragspine_query.tiers`): the quoted
  chunks first, then the other member chunks. It is on demand: only a query the tier
  sends to it runs it.

Nothing RESTRICTED can appear: a community is built from open chunks only (the asset's
blocking check re-verifies every quote), and the channel and the themes drop any row the
snapshot marks RESTRICTED.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragspine_query.pipeline.channels import Channel, ChannelContext, OnDemandChannel, register_builtin_channel
from ragspine_core.text.tokenize import tokenize
from ragspine_core.graph.artifact import COMMUNITIES_FILE

__all__ = ["CommunityChannel", "CommunityTheme", "community_themes", "load_communities"]


@dataclass(frozen=True, slots=True)
class CommunityTheme:
    """One community as a theme: title (its most connected entities), summary (quoted from
    its member chunks; a synthesis, shown, never cited) and ``citations``: the snippets of
    exactly the chunks the summary quotes."""

    community_id: int
    title: str
    summary: str
    n_entities: int
    n_chunks: int
    score: float
    citations: tuple[dict[str, Any], ...]
    is_synthesis: bool = True


def load_communities(library: Any) -> dict[str, list[Any]] | None:
    """The snapshot's ``communities.parquet`` as columns, or None (no graph, or built without)."""
    d = library.artifact_path("relation_graph")
    if d is None or not (d / COMMUNITIES_FILE).is_file():
        return None
    import pyarrow.parquet as pq

    t = pq.read_table(d / COMMUNITIES_FILE).to_pydict()
    return t if t.get("community_id") else None


class _Scorer:
    """BM25-style term scores of a query against each community's title + summary."""

    def __init__(self, com: dict[str, list[Any]], analyzer: Any = None) -> None:
        self.tokens = analyzer if analyzer is not None else tokenize
        self.docs = [Counter(self.tokens(f"{t} {s}")) for t, s in zip(com["title"], com["summary"])]
        self.lens = np.asarray([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avg = float(self.lens.mean()) if len(self.docs) else 1.0
        df = Counter(w for d in self.docs for w in d)
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}

    def scores(self, query: str, k1: float = 1.2, b: float = 0.75) -> np.ndarray:
        out = np.zeros(len(self.docs), dtype=np.float64)
        for w in set(self.tokens(query)):
            idf = self.idf.get(w)
            if idf is None:
                continue
            for i, d in enumerate(self.docs):
                tf = d.get(w, 0)
                if tf:
                    out[i] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * self.lens[i] / max(self.avg, 1e-9)))
        return out


def _row_of(library: Any) -> dict[str, int]:
    return {cid: i for i, cid in enumerate(library.chunk_ids())}


def community_themes(library: Any, query: str | None = None, *, top_n: int = 5) -> list[CommunityTheme]:
    """The library's community themes, best first (see the module docstring); ``[]`` when
    the snapshot has none. With ``query``, the communities its terms match (the library's
    analyzer: stemmed), by score; when none matches (or no query), the largest."""
    from ragspine_core.records import Hit, to_snippet

    com = load_communities(library)
    if com is None:
        return []
    n = len(com["community_id"])
    s = _Scorer(com, getattr(library, "analyzer", None)).scores(query) if query else np.zeros(n)
    if query and (s > 0).any():
        order = [i for i in np.lexsort((np.arange(n), -s)).tolist() if s[i] > 0]
    else:  # no query, or no community matches its words: the largest communities
        s = np.asarray(com["size"], dtype=np.float64)
        order = np.lexsort((np.arange(n), -s)).tolist()
    rows = _row_of(library)
    restricted = library.restricted_mask()
    themes = []
    for i in order:
        cite_rows = [rows[c] for c in com["citations"][i] if c in rows]
        if not cite_rows or any(restricted[r] for r in cite_rows):
            continue
        chunks = library.chunks_by_rows(cite_rows)
        cites = []
        for ch in chunks:
            snippet = to_snippet(Hit(ch, float(s[i]), {"community": float(s[i]), "fused": float(s[i])}))
            snippet["via"] = f"community:{int(com['community_id'][i])}"
            cites.append(snippet)
        themes.append(CommunityTheme(int(com["community_id"][i]), com["title"][i], com["summary"][i], int(com["size"][i]),
                                     len(com["member_chunks"][i]), float(s[i]), tuple(cites)))
        if len(themes) >= top_n:
            break
    return themes


class CommunityChannel(Channel):
    """Ranks chunk rows by the score of the communities the query matches (quoted chunks first)."""

    name = "community"

    def __init__(self, library: Any, *, top_communities: int = 3) -> None:
        com = load_communities(library)
        self.library = library
        self.top_communities = top_communities
        self._com = com
        self._scorer = _Scorer(com, getattr(library, "analyzer", None)) if com is not None else None
        rows = _row_of(library) if com is not None else {}
        self._quoted = [[rows[c] for c in cs if c in rows] for cs in (com or {}).get("citations", [])]
        self._members = [[rows[c] for c in cs if c in rows] for cs in (com or {}).get("member_chunks", [])]
        self.default_weight = 1.0

    def search(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if self._scorer is None or depth <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        s = self._scorer.scores(query)
        order = [i for i in np.lexsort((np.arange(len(s)), -s)).tolist() if s[i] > 0][: self.top_communities]
        restricted = self.library.restricted_mask()
        best: dict[int, float] = {}
        for rank, i in enumerate(order):
            # a community's quoted chunks, then its other members, each below the one before
            ranked = self._quoted[i] + sorted(set(self._members[i]) - set(self._quoted[i]))
            for j, r in enumerate(ranked):
                if restricted[r] or (allowed is not None and not allowed[r]):
                    continue
                score = float(s[i]) / (1.0 + rank) / (1.0 + 0.1 * j)
                if score > best.get(r, 0.0):
                    best[r] = score
        if not best:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        rows = np.asarray(sorted(best), dtype=np.int64)
        scores = np.asarray([best[r] for r in rows.tolist()], dtype=np.float32)
        keep = np.lexsort((rows, -scores))[:depth]
        return rows[keep], scores[keep]

    def describe(self, query: str, depth: int = 0, allowed: np.ndarray | None = None) -> str:
        if self._scorer is None:
            return "no communities in this snapshot"
        s = self._scorer.scores(query)
        top = [i for i in np.lexsort((np.arange(len(s)), -s)).tolist() if s[i] > 0][: self.top_communities]
        return "communities: " + (", ".join(f"{self._com['title'][i]} ({s[i]:.2f})" for i in top) or "none matched")  # type: ignore[index]


def _community_factory(ctx: ChannelContext) -> "OnDemandChannel | None":
    if ctx.active_mode == "vector" or ctx.library.artifact_path("relation_graph") is None:
        return None
    from ragspine_query.graph.graph_channel import graph_withheld

    if graph_withheld(ctx):  # communities are the graph's: withheld from a caller below an open row
        return None
    # only the global tier's queries run it (opened on first use)
    return OnDemandChannel("community", lambda: CommunityChannel(ctx.library) if load_communities(ctx.library) else None)


register_builtin_channel("community", _community_factory)
