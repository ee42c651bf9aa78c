"""How the relation graph is built: :class:`GraphConfig` (validated)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ragspine_core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class GraphConfig:
    """How the relation graph is built (validated)."""

    #: ``auto``: synonym edges when an embedding backend exists and the graph has at most
    #: ``max_synonym_entities`` entities; ``on`` / ``off`` force it.
    synonyms: Literal["auto", "on", "off"] = "auto"
    synonym_threshold: float = 0.92
    max_synonym_entities: int = 5000
    max_cooccur_entities: int = 12
    #: Entities in more than this share of the chunks carry no signal (and make hubs).
    max_entity_df_share: float = 0.05
    #: Also mine frequent CJK n-gram terms from running text (boundary-cut, in >= 2 documents).
    #: Off: CJK names come from the glossary, titles, headings, metadata and quoted/《》 spans
    #: only (mined terms were 0.57 precise on the sample's hand labels, docs/graph-labels.tsv).
    cjk_mined_terms: bool = False
    #: Louvain communities of the entities with one extractive summary each (``.communities``):
    #: ``auto`` builds them when networkx is importable and the graph has at most
    #: ``max_community_entities`` entities; ``on`` / ``off`` force it.
    communities: Literal["auto", "on", "off"] = "auto"
    max_community_entities: int = 20000
    #: The ``co_occurs`` edges (the ``cooccurrence`` relation extractor): off leaves the base
    #: graph (entities, about/mentions, glossary relations, synonyms) byte-identical whatever
    #: the chunks' co-occurrences (communities are detected from them either way).
    cooccurrence: bool = True

    def __post_init__(self) -> None:
        if self.synonyms not in ("auto", "on", "off"):
            raise ConfigError(f"synonyms must be one of auto, on, off; got {self.synonyms!r}")
        if not 0.0 < self.synonym_threshold <= 1.0:
            raise ConfigError(f"synonym_threshold must be in (0, 1], got {self.synonym_threshold}")
        if self.max_cooccur_entities < 2 or self.max_synonym_entities < 0:
            raise ConfigError("max_cooccur_entities must be >= 2 and max_synonym_entities >= 0")
        if self.communities not in ("auto", "on", "off"):
            raise ConfigError(f"communities must be one of auto, on, off; got {self.communities!r}")
        if not 0.0 < self.max_entity_df_share <= 1.0:
            raise ConfigError(f"max_entity_df_share must be in (0, 1], got {self.max_entity_df_share}")
