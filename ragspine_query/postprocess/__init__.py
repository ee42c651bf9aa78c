"""Post-processing after the rerank and before the RESTRICTED strip (docs/query-intelligence.md, "Post-processing").

* ``mmr`` — Maximal Marginal Relevance over the stored chunk vectors (λ configurable);
* ``lost_in_middle`` — best hits at both ends of the context;
* ``compress`` — extractive compression into ``prompt_text`` (citations unchanged).

:func:`make_postprocessor` builds a chain from a spec such as ``"mmr,lost_in_middle"``
(``RAGSPINE_POSTPROCESSOR``, ``--postprocessor``); ``mmr:0.5`` sets λ.
"""

from __future__ import annotations

from typing import Any

from ragspine_core.errors import ConfigError
from ragspine_query.postprocess.compress import ExtractiveCompressor, compress_text
from ragspine_query.postprocess.lost_in_middle import LostInMiddlePostProcessor, lost_in_middle_order
from ragspine_query.postprocess.mmr import MMRPostProcessor, VectorLookup, mmr_order

POSTPROCESSOR_NAMES: tuple[str, ...] = ("mmr", "lost_in_middle", "compress")
DEFAULT_MMR_LAMBDA = 0.7
_ALIASES = {"litm": "lost_in_middle", "lost-in-the-middle": "lost_in_middle", "lost_in_the_middle": "lost_in_middle",
            "compression": "compress"}


def make_postprocessor(spec: str | None, *, source: Any | None = None, mmr_lambda: float = DEFAULT_MMR_LAMBDA) -> list[tuple[str, Any]]:
    """The ``(name, post-processor)`` chain for ``spec`` (comma-separated, in the given order;
    ``""``/``none`` → none). ``mmr:λ`` overrides ``mmr_lambda``; ``source`` (a retriever)
    gives MMR its chunk vectors.

    Raises:
        ConfigError: an unknown name or a bad λ (the message lists the allowed forms).
    """
    out: list[tuple[str, Any]] = []
    for raw in str(spec or "").split(","):
        item = raw.strip().lower()
        if not item or item == "none":
            continue
        name, _, arg = item.partition(":")
        name = _ALIASES.get(name, name)
        if name == "mmr":
            lam = mmr_lambda
            if arg:
                try:
                    lam = float(arg)
                except ValueError:
                    raise ConfigError(f"bad MMR lambda {arg!r} in {raw.strip()!r}; write e.g. mmr:0.7") from None
            out.append(("mmr", MMRPostProcessor(VectorLookup.of_source(source) if source is not None else None, lam=lam)))
        elif name == "lost_in_middle" and not arg:
            out.append(("lost_in_middle", LostInMiddlePostProcessor()))
        elif name == "compress" and not arg:
            out.append(("compress", ExtractiveCompressor()))
        else:
            raise ConfigError(f"unknown post-processor {raw.strip()!r}; allowed: {', '.join(POSTPROCESSOR_NAMES)} "
                              "(comma-separated; mmr:LAMBDA) or none")
    return out


__all__ = ["DEFAULT_MMR_LAMBDA", "ExtractiveCompressor", "LostInMiddlePostProcessor", "MMRPostProcessor", "POSTPROCESSOR_NAMES",
           "VectorLookup", "compress_text", "lost_in_middle_order", "make_postprocessor", "mmr_order"]
