"""Communities of the relation graph's entities and one grounded, extractive summary each.

Louvain modularity communities (Blondel et al., 2008; ``networkx.community.louvain_communities``
with a fixed seed, so a build is deterministic) over the entity–entity edges
(``co_occurs``, the glossary relations, ``synonym``, ``model_relation``; weights summed),
as GraphRAG's global search uses communities. Per community (at least
``min_size`` entities):

* **members**: its entities, and its member chunks — the open chunks linked (``about`` /
  ``mentions``) to at least two of its entities (to one, when none is linked to two);
* **summary**: extractive, built only from the member chunks: the ``sentences`` sentences
  naming the most member entities (at most one per chunk; ties by chunk id, then
  position), in chunk order;
* **citations**: exactly the member chunks whose sentences the summary quotes.

Only non-RESTRICTED chunks are given to this module (the graph builder skips RESTRICTED
ones before anything reads them); the relation graph's blocking check re-verifies that
every summary sentence occurs in the text of a chunk it cites.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping, Sequence

#: The seed of Louvain's node order (fixed: the same graph gives the same communities).
LOUVAIN_SEED = 26
_SENTENCE_END = frozenset(".!?。！？；;\"”)）")
_SENTENCE = re.compile(r"(?<=[.!?。！？；])\s+|(?<=[。！？；])|\n+")


@dataclass(frozen=True, slots=True)
class Community:
    """One community: its entities (node ids), title, member chunks, summary and citations."""

    community_id: int
    entity_nodes: tuple[int, ...]
    title: str
    member_chunks: tuple[str, ...]
    summary: str
    citations: tuple[str, ...]
    #: the summary's sentences, ``quotes[i]`` quoted from chunk ``citations[i]``
    quotes: tuple[str, ...] = ()


def sentences(text: str) -> list[str]:
    """A chunk's sentences (markdown markers stripped), in order."""
    out = []
    for s in _SENTENCE.split(text):
        s = s.strip(" \t-*#>")
        # a sentence: not a table row, and it ends like one (a heading or a label is no summary)
        if len(s) >= 12 and "|" not in s and s[-1] in _SENTENCE_END:
            out.append(s)
    return out


def detect_communities(n_entities: int, edges: Sequence[tuple[int, int, float]], *, seed: int = LOUVAIN_SEED,
                       resolution: float = 1.0) -> list[list[int]]:
    """Louvain communities of the entity graph (``edges`` between entity node ids, weights
    summed), each sorted, largest first (ties by the smallest node id)."""
    import networkx as nx

    g = nx.Graph()
    for a, b, w in edges:
        if a == b or not (0 <= a < n_entities and 0 <= b < n_entities):
            continue
        if g.has_edge(a, b):
            g[a][b]["weight"] += float(w)
        else:
            g.add_edge(a, b, weight=float(w))
    if g.number_of_edges() == 0:
        return []
    found = nx.community.louvain_communities(g, weight="weight", resolution=resolution, seed=seed)
    return sorted((sorted(int(n) for n in c) for c in found), key=lambda c: (-len(c), c[0]))


def build_communities(groups: Sequence[Sequence[int]], *, labels: Sequence[str], entity_chunks: Mapping[int, Sequence[str]],
                      chunk_text: Mapping[str, str], degree: Mapping[int, float], min_size: int = 3,
                      n_sentences: int = 3, max_summary_chars: int = 600) -> list[Community]:
    """One :class:`Community` per group of at least ``min_size`` entities (see the module docstring).

    ``entity_chunks``: entity node -> the open chunk ids it is linked to; ``chunk_text``:
    chunk id -> text (open chunks only); ``degree``: entity node -> weighted degree (for the title).
    """
    out: list[Community] = []
    for group in groups:
        if len(group) < min_size:
            continue
        hits: dict[str, set[int]] = defaultdict(set)
        for e in group:
            for cid in entity_chunks.get(e, ()):
                if cid in chunk_text:
                    hits[cid].add(e)
        if not hits:
            continue
        need = 2 if any(len(v) >= 2 for v in hits.values()) else 1
        members = sorted(cid for cid, es in hits.items() if len(es) >= need)
        names = sorted({labels[e] for e in group if labels[e]}, key=lambda n: (-len(n), n))
        low = [(n, n.casefold()) for n in names]
        scored = []
        for cid in members:
            best = None
            for pos, sent in enumerate(sentences(chunk_text[cid])):
                s = sent.casefold()
                named = sum(1 for _, n in low if n in s)
                if named and (best is None or named > best[0]):
                    best = (named, pos, sent)
            if best is not None:
                scored.append((-best[0], cid, best[1], best[2]))
        scored.sort()
        chosen = sorted(scored[:n_sentences], key=lambda t: (t[1], t[2]))
        parts: list[str] = []
        cites: list[str] = []
        used = 0
        for _, cid, _, sent in chosen:
            if parts and used + len(sent) > max_summary_chars:
                break
            parts.append(sent)
            cites.append(cid)
            used += len(sent) + 1
        top = sorted(group, key=lambda e: (-float(degree.get(e, 0.0)), e))[:3]
        title = " · ".join(labels[e] for e in top)
        out.append(Community(len(out), tuple(group), title, tuple(members), " ".join(parts), tuple(cites), tuple(parts)))
    return out
