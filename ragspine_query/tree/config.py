"""How retrieval uses a library's RAPTOR summary tree (no heavy imports: the retriever imports it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ragspine_core.errors import ConfigError

TreeMode = Literal["off", "collapsed", "traversal"]
TREE_MODES: tuple[str, ...] = ("off", "collapsed", "traversal")
#: The default, chosen by measurement (docs/evaluation.md, "Summary tree"): a lexical tree
#: with BM25 lowered nDCG@10 on SciFact and HotpotQA dev; a MiniLM tree with hybrid gave no
#: significant gain on SciFact train or test and a significant loss on HotpotQA dev (and
#: ~1.5-1.8x the query time), so it is opt-in.
DEFAULT_TREE_MODE = "off"


@dataclass(frozen=True, slots=True)
class TreeConfig:
    """The ``tree`` channel's settings.

    * ``mode``: ``off`` (no tree channel), ``collapsed`` (nodes and leaves ranked together
      in one list, RAPTOR's best variant) or ``traversal`` (top-down beam search from
      the top level).
    * ``leaves_per_node``: a node hit is answered with at most this many of the leaf
      chunks it covers, the best by the query.
    * ``beam``: nodes kept per level in traversal.
    """

    mode: str = DEFAULT_TREE_MODE
    leaves_per_node: int = 2
    beam: int = 5

    def __post_init__(self) -> None:
        m = (self.mode or "off").strip().lower() if isinstance(self.mode, str) else self.mode
        if m not in TREE_MODES:
            raise ConfigError(f"unknown tree mode {self.mode!r}; allowed: {', '.join(TREE_MODES)}")
        object.__setattr__(self, "mode", m)
        for name in ("leaves_per_node", "beam"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"tree {name} must be an integer >= 1, got {v!r}")

    @classmethod
    def of(cls, value: "TreeConfig | str | None") -> "TreeConfig":
        """A config from a config or a mode name (``None``: the default)."""
        if isinstance(value, TreeConfig):
            return value
        return cls(mode=value or DEFAULT_TREE_MODE)
