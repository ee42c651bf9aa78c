"""The multi-library router that ships: glossary entities and library profiles.

The seed: "For multiple libraries, MultiIndexRetriever asks a router for library IDs,
runs each selected index independently, and fuses the ranked lists with RRF … If
routing fails, the safe availability fallback searches every configured library."

:class:`LibraryProfile` is what a library holds: its ``entities``, ``languages``,
``topics`` and ``geographies``. It is read from the manifest's ``profile`` key when the
snapshot has one, else from the snapshot's metadata columns — of the open rows only, so
a profile (and a routing decision shown in ``explain``) never reveals what RESTRICTED
documents are about.

:class:`ProfileRouter` scores each library for a query: +2 when it holds a glossary
entity the query names (a parent entity also matches the libraries of its
subsidiaries), +1 when it holds a topic the query names (``supply_chain`` matches
"supply chain"). Only a named entity narrows the route: the libraries that hold it are
searched, **and every library with open rows lacking an entity** (the profile cannot rule
it out: an untagged memo may be about that entity). A topic alone is a low-confidence
signal (topics are coarse and often missing): every library is searched. When no library
holds the entity — or the router fails — every library is (the seed's fallback). A library with no row in the query's
language and no dense channel (it could not match the query at all) is left out unless
that would leave nothing.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ragspine_core.text.normalize import normalize_query

if TYPE_CHECKING:
    from ragspine_core.glossary import Glossary

ROUTER_MODES = ("profile", "all")


@dataclass(frozen=True, slots=True)
class LibraryProfile:
    """What one library holds (open rows only)."""

    library_id: str
    entities: frozenset[str] = frozenset()
    languages: frozenset[str] = frozenset()
    topics: frozenset[str] = frozenset()
    geographies: frozenset[str] = frozenset()
    dense: bool = False
    #: the profile fields (``entities``, ``topics``) some open row has no value for: a query
    #: naming an entity (topic) cannot rule this library out, so it is searched
    untagged: frozenset[str] = frozenset()

    @classmethod
    def of(cls, library: Any) -> "LibraryProfile":
        """The profile of a published library: the manifest's ``profile`` when present,
        else its open rows' ``entity``, ``language``, ``topic`` and ``geography`` values."""
        dense = library.embedding_model_id is not None
        declared = library.manifest.get("profile")
        if isinstance(declared, Mapping):
            def vals(key: str) -> frozenset[str]:
                v = declared.get(key) or ()
                return frozenset(str(x) for x in ([v] if isinstance(v, str) else v) if str(x))
            missing = frozenset(k for k in ("entities", "topics") if not vals(k))
            return cls(library.library_id, vals("entities"), vals("languages"), vals("topics"), vals("geographies"), dense,
                       missing)
        open_rows = ~library.restricted_mask()

        def values(field: str) -> frozenset[str]:
            col = library.column(field)
            return frozenset(str(v) for v in set(col[open_rows].tolist()) if v) if col.size else frozenset()

        def lacks(field: str) -> bool:  # some open row has no value (or the library has no such column)
            col = library.column(field)
            return not col.size or bool((col[open_rows] == "").any())

        langs = values("language") or frozenset({"en"})
        untagged = frozenset(k for k, f in (("entities", "entity"), ("topics", "topic")) if lacks(f))
        return cls(library.library_id, values("entity"), langs, values("topic"), values("geography"), dense, untagged)


def _word_pattern(phrases: Iterable[str]) -> re.Pattern[str] | None:
    alts = sorted({p for p in phrases if p}, key=lambda p: (-len(p), p))
    return re.compile(r"(?<!\w)(" + "|".join(re.escape(p) for p in alts) + r")(?!\w)") if alts else None


class ProfileRouter:
    """``router(query) -> library ids`` for :class:`~ragspine_query.retriever.MultiIndexRetriever`.

    Args:
        profiles: library id → :class:`LibraryProfile`.
        glossary: entity names (every language) → ids; competitor entities included (the
            gate refuses such queries before routing; routing never widens anything).
    """

    def __init__(self, profiles: Mapping[str, LibraryProfile], glossary: "Glossary | None" = None) -> None:
        self._glossary = glossary
        self._retrievers: dict[str, Any] = {}
        self._keys: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._index(profiles)

    @classmethod
    def over(cls, retrievers: Mapping[str, Any], glossary: "Glossary | None" = None) -> "ProfileRouter":
        """The router of ``retrievers``' libraries that keeps their profiles current: a library a
        retriever reopened (:class:`~ragspine_query.library.Follower`: a repair, a prune, a
        quarantine) or whose rows a newer snapshot withholds (its generation) is profiled
        again before the next decision (:func:`~ragspine_query.library.library_key`)."""
        from ragspine_query.library import library_key

        router = cls({lib: LibraryProfile.of(r.library) for lib, r in retrievers.items()}, glossary)
        router._retrievers = dict(retrievers)
        router._keys = {lib: library_key(r.library) for lib, r in retrievers.items()}
        return router

    def _follow(self) -> None:
        """Profile again the libraries whose key changed since they were profiled."""
        if not self._retrievers:
            return
        from ragspine_query.library import library_key

        keys = {lib: library_key(r.library) for lib, r in self._retrievers.items()}
        if keys != self._keys:
            with self._lock:
                stale = [lib for lib in keys if keys[lib] != self._keys.get(lib)]
                if stale:
                    self._index({**self.profiles, **{lib: LibraryProfile.of(self._retrievers[lib].library) for lib in stale}})
                    self._keys = keys

    def _index(self, profiles: Mapping[str, LibraryProfile]) -> None:
        glossary = self._glossary
        self.profiles = dict(sorted(profiles.items()))
        names: dict[str, str] = {}
        children: dict[str, set[str]] = {}
        if glossary is not None:
            for c in glossary.concepts:
                if c.kind != "entity":
                    continue
                for n in (*c.names, c.id):
                    key = normalize_query(n)
                    if key:
                        names.setdefault(key, c.id)
                if c.parent:
                    children.setdefault(c.parent, set()).add(c.id)
        self._names = names
        self._children = children
        spaced = [n for n in names if all(not ("\u3040" <= ch <= "\u9fff") for ch in n)]
        self._entity_word = _word_pattern(spaced)
        self._entity_sub = sorted((n for n in names if n not in set(spaced)), key=lambda n: (-len(n), n))
        topics = {t for p in self.profiles.values() for t in p.topics}
        self._topic_of = {normalize_query(t.replace("_", " ")): t for t in topics}
        self._topic_word = _word_pattern(self._topic_of)

    def entities_in(self, query: str) -> frozenset[str]:
        """Glossary entity ids ``query`` names, with the subsidiaries of a named parent."""
        q = normalize_query(query)
        found: set[str] = set()
        if self._entity_word is not None:
            found.update(self._names[m.group(1)] for m in self._entity_word.finditer(q))
        found.update(self._names[n] for n in self._entity_sub if n in q)
        for e in list(found):
            found.update(self._children.get(e, ()))
        return frozenset(found)

    def topics_in(self, query: str) -> frozenset[str]:
        q = normalize_query(query)
        if self._topic_word is None:
            return frozenset()
        return frozenset(self._topic_of[m.group(1)] for m in self._topic_word.finditer(q))

    def decide(self, query: str) -> tuple[list[str], str]:
        """``(library ids, reason)``; every library with a reason saying why, on no signal."""
        from ragspine_core.text.language import detect_language

        self._follow()
        ents, topics = self.entities_in(query), self.topics_in(query)
        scores = {lib: 2 * bool(p.entities & ents) + bool(p.topics & topics) for lib, p in self.profiles.items()}
        if not ents:  # a topic alone is a low-confidence route (topics are coarse and often untagged)
            why = ("the query names only a topic (" + ",".join(sorted(topics)) + "): a low-confidence route") if topics else \
                "the query names no glossary entity"
            return list(self.profiles), f"every library ({why})"
        # an entity named: the libraries that hold it, and every library with rows lacking an entity
        # (it cannot be ruled out: an untagged memo may be about that entity)
        unknown = [lib for lib, p in self.profiles.items() if "entities" in p.untagged and not (p.entities & ents)]
        chosen = [lib for lib, p in self.profiles.items() if p.entities & ents or lib in unknown]
        if not [lib for lib in chosen if lib not in unknown]:
            return list(self.profiles), "every library (no library profile holds an entity the query names)"
        lang = detect_language(str(query))
        able = [lib for lib in chosen if lang in self.profiles[lib].languages or self.profiles[lib].dense]
        chosen = able or chosen
        parts = []
        if ents:
            parts.append("entities " + ",".join(sorted(ents)))
        if topics:
            parts.append("topics " + ",".join(sorted(topics)))
        return chosen, (f"by {' and '.join(parts)}: " + ", ".join(f"{lib}={scores[lib]}" for lib in chosen if lib not in unknown)
                        + (f"; untagged rows, searched: {', '.join(lib for lib in chosen if lib in unknown)}"
                           if any(lib in unknown for lib in chosen) else ""))

    def __call__(self, query: str) -> list[str]:
        return self.decide(query)[0]


def make_router(mode: str | None, retrievers: Mapping[str, Any], glossary: "Glossary | None" = None) -> ProfileRouter | None:
    """The router of ``mode`` (``profile`` or ``all`` = none) over ``retrievers``' libraries."""
    from ragspine_core.errors import ConfigError

    m = (mode or "profile").strip().lower()
    if m in ("all", "off", "none"):
        return None
    if m != "profile":
        raise ConfigError(f"unknown router {mode!r}; allowed: {', '.join(ROUTER_MODES)}")
    return ProfileRouter.over(retrievers, glossary)


__all__ = ["LibraryProfile", "ProfileRouter", "ROUTER_MODES", "make_router"]
