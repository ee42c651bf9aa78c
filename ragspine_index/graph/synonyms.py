"""Synonym edges of the relation graph: which two entity names may be joined (never two
numbers, dates, periods or amounts; a Dice overlap of their characters) and the pairs
whose embeddings are close enough."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np


from ragspine_index.graph.entities import is_attribute


CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


_DIGITS = re.compile(r"[\d〇零一二三四五六七八九十百千万两]+")


_NON_ALNUM = re.compile(r"[\W_]+")


def synonym_allowed(a: str, b: str) -> bool:
    """Whether two entity names may be joined by an embedding ``synonym`` edge: neither is an
    attribute (a number, date, period or amount), their numbers agree (``PowerFlex 5`` is not
    ``PowerFlex 7``, ``第二季度`` not ``第三季度``), one spelling holds the other (``Korea`` /
    ``South Korea``, ``Inverter`` / ``Inverters``: not ``启航计划`` / ``领航计划``, two programmes)
    and they share most of their spelling (character-bigram Dice >= 0.5) — not two neighbours
    in an embedding space that cannot read the script."""
    if is_attribute(a) or is_attribute(b):
        return False
    if _DIGITS.findall(a) != _DIGITS.findall(b):
        return False
    na, nb = (_NON_ALNUM.sub("", unicodedata.normalize("NFKC", x).casefold()) for x in (a, b))
    if not na or not nb or (na not in nb and nb not in na):
        return False
    return _dice(a, b) >= 0.5


def _dice(a: str, b: str) -> float:
    def grams(s: str) -> Counter:
        s = "".join(unicodedata.normalize("NFKC", s).casefold().split())
        return Counter(s[i:i + 2] for i in range(len(s) - 1)) if len(s) > 1 else Counter(s)

    ga_, gb = grams(a), grams(b)
    total = sum(ga_.values()) + sum(gb.values())
    return 2.0 * sum((ga_ & gb).values()) / total if total else 0.0


def synonym_pairs(names: Sequence[str], backend: Any, *, threshold: float, cache_path: Path | None = None) -> list[tuple[int, int]]:
    """Index pairs ``(i < j)`` of names whose embeddings have cosine >= ``threshold`` (HippoRAG's synonym edges).

    Name vectors come from (and go to) the embedding cache when ``cache_path`` is given.
    """
    if len(names) < 2:
        return []
    from ragspine_index.steps.chunk_embeddings import EmbeddingCache, text_hash

    hashes = [text_hash("entity:" + n) for n in names]
    vecs: dict[str, np.ndarray] = {}
    cache = EmbeddingCache(cache_path) if cache_path is not None else None
    try:
        if cache is not None:
            vecs = cache.get_many(backend.model_id, sorted(set(hashes)))
        missing = sorted({(h, n) for h, n in zip(hashes, names) if h not in vecs})
        if missing:
            new = np.asarray(backend.embed([n for _, n in missing], kind="query"), dtype=np.float32)
            items = [(h, v) for (h, _), v in zip(missing, new)]
            vecs.update(dict(items))
            if cache is not None:
                cache.put_many(backend.model_id, items)
    finally:
        if cache is not None:
            cache.close()
    m = np.stack([vecs[h] for h in hashes]).astype(np.float32)
    m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    out: list[tuple[int, int]] = []
    for start in range(0, len(names), 1024):
        sims = m[start:start + 1024] @ m.T
        ii, jj = np.nonzero(sims >= threshold)
        out.extend((int(i) + start, int(j)) for i, j in zip(ii, jj) if int(i) + start < int(j))
    return sorted(out)
