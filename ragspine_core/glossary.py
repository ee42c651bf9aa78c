"""Glossary (entities, metrics, synonyms, competitors) and the rule-based multi-query rewriter."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspine_core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Concept:
    """An entity or metric with its surface names."""

    id: str
    kind: str  # "entity" | "metric"
    names: tuple[str, ...]
    competitor: bool = False
    parent: str = ""
    peers: tuple[str, ...] = ()
    derived_from: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Glossary:
    concepts: tuple[Concept, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "<glossary>") -> "Glossary":
        out: list[Concept] = []
        for kind, key in (("entity", "entities"), ("metric", "metrics")):
            for i, item in enumerate(data.get(key, []) or []):
                if not isinstance(item, dict) or not item.get("id"):
                    raise ConfigError(f"{source}: {key}[{i}] needs an 'id' (got {item!r})")
                names = item.get("names", [])
                if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                    raise ConfigError(f"{source}: {key}[{i}].names must be a list of strings")
                out.append(
                    Concept(
                        id=str(item["id"]),
                        kind=kind,
                        names=tuple(dict.fromkeys(n for n in names if n.strip())),
                        competitor=bool(item.get("competitor", False)),
                        parent=str(item.get("parent", "")),
                        peers=tuple(item.get("peers", []) or ()),
                        derived_from=tuple(item.get("derived_from", []) or ()),
                    )
                )
        return cls(tuple(out))

    @classmethod
    def load(cls, path: str | Path) -> "Glossary":
        p = Path(path)
        try:
            if p.suffix == ".toml":
                data = tomllib.loads(p.read_text(encoding="utf-8"))
            else:
                data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read glossary {p}: {exc}") from exc
        return cls.from_dict(data, source=str(p))

    def to_dict(self) -> dict[str, Any]:
        ents = [c for c in self.concepts if c.kind == "entity"]
        mets = [c for c in self.concepts if c.kind == "metric"]

        def d(c: Concept) -> dict[str, Any]:
            return {
                "id": c.id, "names": list(c.names), "competitor": c.competitor, "parent": c.parent,
                "peers": list(c.peers), "derived_from": list(c.derived_from),
            }

        return {"entities": [d(c) for c in ents], "metrics": [d(c) for c in mets]}

    def competitors(self) -> frozenset[str]:
        return frozenset(c.id for c in self.concepts if c.competitor)


class GlossaryQueryRewriter:
    """Deterministic multi-query expansion from glossary synonyms (no LLM).

    The original query is always first; each variant swaps one matched surface name for
    another name of the same concept. At most ``max_queries`` queries are returned.
    """

    def __init__(self, glossary: Glossary, *, max_queries: int = 5) -> None:
        if max_queries < 1:
            raise ConfigError(f"max_queries must be >= 1, got {max_queries}")
        self.glossary = glossary
        self.max_queries = max_queries

    def rewrite(self, query: str) -> list[str]:
        out = [query]
        if self.max_queries == 1:
            return out
        low = query.lower()
        for concept in self.glossary.concepts:
            # longest matching name first so "Acme China" wins over "Acme"
            for name in sorted(concept.names, key=lambda n: (-len(n), n)):
                pos = low.find(name.lower())
                if pos < 0:
                    continue
                for alt in concept.names:
                    if alt.lower() == name.lower():
                        continue
                    variant = query[:pos] + alt + query[pos + len(name) :]
                    if variant not in out:
                        out.append(variant)
                    if len(out) >= self.max_queries:
                        return out
                break
        return out
