"""The retrieval modes a query can run in, and their one spelling check."""

from __future__ import annotations

from typing import Literal

from ragspine_core.errors import ConfigError

RetrievalMode = Literal["auto", "hybrid", "vector", "bm25", "lexical", "economy", "graph"]
#: ``graph``: the default's channels fused as the default fuses them (the language-aware
#: plan), then that ranking and the relation-graph PPR channel's fused by weighted RRF
RETRIEVAL_MODES: tuple[str, ...] = ("auto", "hybrid", "vector", "bm25", "lexical", "economy", "graph")
LEXICAL_MODES = frozenset({"bm25", "lexical", "economy"})


def normalize_mode(mode: str | None) -> str:
    m = (mode or "auto").strip().lower()
    if m not in RETRIEVAL_MODES:
        raise ConfigError(f"unknown retrieval mode {mode!r}; allowed: {', '.join(RETRIEVAL_MODES)}")
    return m
