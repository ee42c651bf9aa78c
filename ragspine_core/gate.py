"""The security gate (docs/query-intelligence.md, "The gate"): a query about a glossary competitor is refused before retrieval.

:class:`CompetitorGate` runs first in the query pipeline: the user's query is checked
before any transform (so no LLM ever sees it), and every generated variant (glossary
synonyms, HyDE probes, RAG-Fusion variants, sub-questions, step-back questions) is
checked again before it is retrieved; a refused variant is dropped and ``explain`` says
so. A refused query gives a :class:`Refusal` — a structured reason — on the result's
``refusal`` attribute, not a silent empty list.

Matching is on :func:`~ragspine_core.text.normalize.normalize_query` forms (width, case and
whitespace folded) of every surface name of every ``competitor = true`` entity. Names
in scripts written with spaces between words (Latin, Cyrillic, …) must match whole
words ("Globex" does not match "Globexian"); names in scripts without spaces (Chinese,
Japanese) match as substrings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from ragspine_core.text.normalize import normalize_query
from ragspine_core.glossary import Glossary


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a query was not answered.

    ``kind``: ``competitor`` (the gate) or ``low_confidence`` (corrective retrieval found
    nothing that grounds an answer). ``reason`` is a sentence for a person; ``entities``
    the glossary ids involved; ``query`` the text that was refused.
    """

    kind: str
    reason: str
    query: str = ""
    entities: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "reason": self.reason, "query": self.query, "entities": list(self.entities)}


def _spaced(name: str) -> bool:
    """Whether ``name`` is written in a script that separates words with spaces."""
    return all(not ("\u3040" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" or "\uf900" <= ch <= "\ufaff") for ch in name)


class CompetitorGate:
    """Refuse any text that names a competitor entity of the glossary.

    Args:
        glossary: the glossary whose ``competitor = true`` entities are refused.
        extra_names: more surface names to refuse (mapping name -> entity id).
    """

    def __init__(self, glossary: Glossary, *, extra_names: dict[str, str] | None = None) -> None:
        names: dict[str, str] = {}
        for c in glossary.concepts:
            if c.kind == "entity" and c.competitor:
                for n in (*c.names, c.id):
                    key = normalize_query(n)
                    if key:
                        names.setdefault(key, c.id)
        for n, cid in (extra_names or {}).items():
            names.setdefault(normalize_query(n), cid)
        self._names = names
        spaced = sorted((n for n in names if _spaced(n)), key=lambda n: (-len(n), n))
        self._word = re.compile(r"(?<!\w)(" + "|".join(re.escape(n) for n in spaced) + r")(?!\w)") if spaced else None
        self._substr = sorted((n for n in names if not _spaced(n)), key=lambda n: (-len(n), n))

    @property
    def active(self) -> bool:
        """Whether the glossary names any competitor (an inactive gate refuses nothing)."""
        return bool(self._names)

    def competitors_in(self, text: str) -> tuple[str, ...]:
        """The competitor entity ids ``text`` names (sorted, unique)."""
        norm = normalize_query(text)
        found: set[str] = set()
        if self._word is not None:
            found.update(self._names[m.group(1)] for m in self._word.finditer(norm))
        found.update(self._names[n] for n in self._substr if n in norm)
        return tuple(sorted(found))

    def check(self, query: str) -> Refusal | None:
        """A :class:`Refusal` when ``query`` (or any per-channel text it carries, e.g. a
        HyDE probe) names a competitor; None when it may be retrieved."""
        texts: Iterable[str] = (str(query), *getattr(query, "channel_texts", {}).values())
        ids = tuple(sorted({cid for t in texts for cid in self.competitors_in(t)}))
        if not ids:
            return None
        return Refusal("competitor", f"the query names competitor entit{'y' if len(ids) == 1 else 'ies'} "
                       f"{', '.join(ids)} (glossary competitor = true); competitor information is not retrieved",
                       str(query), ids)


__all__ = ["CompetitorGate", "Refusal"]
