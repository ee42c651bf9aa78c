"""Post-processing after the rerank and before the RESTRICTED strip (docs/query-intelligence.md, "Post-processing").

* ``mmr`` — Maximal Marginal Relevance over the stored chunk vectors (λ configurable);
* ``lost_in_middle`` — best hits at both ends of the context;
* ``compress`` — extractive compression into ``prompt_text`` (citations unchanged).

:func:`make_postprocessor` builds a chain from a spec such as ``"mmr,lost_in_middle"``
(``RAGSPINE_POSTPROCESSOR``, ``--postprocessor``); ``mmr:0.5`` sets λ. Each is an entry
of the :data:`~ragspine_query.pipeline.plugins.POSTPROCESSORS` registry (a factory taking
the source, λ and the ``:arg``), registered here with its order, so a plug-in registered
with ``always=False`` (or by
:func:`~ragspine_query.pipeline.plugins.register_postprocessor_factory`) is selected by name the same way.
"""

from __future__ import annotations

from typing import Any

from ragspine_core.errors import ConfigError
from ragspine_query.pipeline.plugins import DEFAULT_MMR_LAMBDA, POSTPROCESSORS, Plugin, PostprocessorContext, lookup
from ragspine_query.postprocess.compress import ExtractiveCompressor, compress_text
from ragspine_query.postprocess.lost_in_middle import LostInMiddlePostProcessor, lost_in_middle_order
from ragspine_query.postprocess.mmr import MMRPostProcessor, VectorLookup, mmr_order
from ragspine_query.source import Source

#: The built-in post-processors, in their registry order (plug-ins come after them).
POSTPROCESSOR_NAMES: tuple[str, ...] = ("mmr", "lost_in_middle", "compress")
_ALIASES = {"litm": "lost_in_middle", "lost-in-the-middle": "lost_in_middle", "lost_in_the_middle": "lost_in_middle",
            "compression": "compress"}


def _mmr(ctx: PostprocessorContext) -> MMRPostProcessor:
    lam = ctx.mmr_lambda
    if ctx.arg:
        try:
            lam = float(ctx.arg)
        except ValueError:
            raise ConfigError(f"bad MMR lambda {ctx.arg!r} in {ctx.item!r}; write e.g. mmr:0.7") from None
    return MMRPostProcessor(VectorLookup.of_source(ctx.source) if ctx.source is not None else None, lam=lam)


_BUILTINS: dict[str, Plugin[PostprocessorContext, Any]] = {
    "mmr": Plugin(_mmr, takes_arg=True),
    "lost_in_middle": Plugin(lambda ctx: LostInMiddlePostProcessor()),
    "compress": Plugin(lambda ctx: ExtractiveCompressor()),
}
for _order, _name in enumerate(POSTPROCESSOR_NAMES):
    POSTPROCESSORS.register(_name, _BUILTINS[_name], order=_order, builtin=True, replace=_name in POSTPROCESSORS)


def postprocessor_names() -> tuple[str, ...]:
    """Every name a post-processor spec accepts: the built-ins, then plug-ins."""
    return POSTPROCESSORS.names()


def make_postprocessor(spec: str | None, *, source: Source | None = None, mmr_lambda: float = DEFAULT_MMR_LAMBDA) -> list[tuple[str, Any]]:
    """The ``(name, post-processor)`` chain for ``spec`` (comma-separated, in the given order;
    ``""``/``none`` → none): each named entry of the
    :data:`~ragspine_query.pipeline.plugins.POSTPROCESSORS` registry, built with ``source``
    (a retriever: gives MMR its chunk vectors) and ``mmr_lambda``; ``mmr:λ`` overrides
    ``mmr_lambda``. Names are compared case-insensitively; a plug-in's name is accepted too.

    Raises:
        ConfigError: an unknown name, an argument to one that takes none, or a bad λ (the
            message lists the allowed forms).
    """
    out: list[tuple[str, Any]] = []
    for raw in str(spec or "").split(","):
        item = raw.strip().lower()
        if not item or item == "none":
            continue
        name, _, arg = item.partition(":")
        found = lookup(POSTPROCESSORS, _ALIASES.get(name, name))
        entry = POSTPROCESSORS.get(found) if found is not None else None
        if entry is None or (arg and not entry.takes_arg):
            raise ConfigError(f"unknown post-processor {raw.strip()!r}; allowed: {', '.join(POSTPROCESSORS.names())} "
                              "(comma-separated; mmr:LAMBDA) or none")
        assert found is not None
        ctx = PostprocessorContext(source=source, mmr_lambda=mmr_lambda, arg=arg, item=raw.strip())
        out.append((found, entry.build(ctx)))
    return out


__all__ = ["DEFAULT_MMR_LAMBDA", "ExtractiveCompressor", "LostInMiddlePostProcessor", "MMRPostProcessor", "POSTPROCESSOR_NAMES",
           "VectorLookup", "compress_text", "lost_in_middle_order", "make_postprocessor", "mmr_order",
           "postprocessor_names"]
