"""Query transforms: the user's query → the variants the pipeline retrieves and fuses.

Each is a :class:`~ragspine_query.pipeline.plugins.Transform` (``variants -> variants``)
that returns :class:`~.base.Variants` with a note ``explain`` shows:

===============  =================================================  =====================
name             what it adds                                       without an LLM
===============  =================================================  =====================
``normalize``    width/whitespace-normalised variants               (no LLM needed)
``decompose``    sub-questions, fused by RRF                        rule-based splitter
``step_back``    a more generic question, fused by RRF              drops years/figures
``fusion``       RAG-Fusion: N reformulations, fused by RRF         skipped, with a note
``hyde``         a hypothetical passage for the dense channel only  skipped, with a note
===============  =================================================  =====================

An LLM failure never fails a query: the transform degrades to the plain query and
says so. Each is an entry of the :data:`~ragspine_query.pipeline.plugins.TRANSFORMS`
registry (a factory taking the provider and ``fusion_n``), registered here with its
order; :func:`make_transforms` builds a chain from a spec such as ``"hyde,fusion"``
(``RAGSPINE_TRANSFORMS``; ``--transform`` on the CLI) by looking the names up there, so
a plug-in registered with ``always=False`` (or by
:func:`~ragspine_query.pipeline.plugins.register_transform_factory`) is selected the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ragspine_core.errors import ConfigError
from ragspine_query.pipeline.plugins import TRANSFORMS, Plugin, TransformContext, lookup
from ragspine_query.transforms.transform import ChannelQuery, Variants, ask_llm, with_channels
from ragspine_query.transforms.decompose import DecomposeTransform, split_question
from ragspine_query.transforms.hyde import HyDETransform
from ragspine_query.transforms.query_normalize import NormalizeTransform
from ragspine_query.transforms.rag_fusion import RagFusionTransform
from ragspine_query.transforms.step_back import StepBackTransform, abstract_query

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

#: The built-in transforms, in the order they run whatever the spec's order (their registry
#: order: 0, 1, 2, …; plug-ins registered with ``register_transform`` run after them).
TRANSFORM_NAMES: tuple[str, ...] = ("normalize", "decompose", "step_back", "fusion", "hyde")
_ALIASES = {"stepback": "step_back", "step-back": "step_back", "rag_fusion": "fusion", "rag-fusion": "fusion",
            "decomposition": "decompose", "norm": "normalize"}

_BUILTIN_FACTORIES: dict[str, Callable[[TransformContext], Any]] = {
    "normalize": lambda ctx: NormalizeTransform(),
    "decompose": lambda ctx: DecomposeTransform(ctx.provider),
    "step_back": lambda ctx: StepBackTransform(ctx.provider),
    "fusion": lambda ctx: RagFusionTransform(ctx.provider, n=ctx.fusion_n),
    "hyde": lambda ctx: HyDETransform(ctx.provider),
}
for _order, _name in enumerate(TRANSFORM_NAMES):
    TRANSFORMS.register(_name, Plugin(_BUILTIN_FACTORIES[_name]), order=_order, builtin=True, replace=_name in TRANSFORMS)


def transform_names() -> tuple[str, ...]:
    """Every name a transform spec accepts, in the order they run: the built-ins, then plug-ins."""
    return TRANSFORMS.names()


def parse_transform_spec(spec: str | None) -> tuple[str, ...]:
    """``"hyde, fusion"`` → ``("fusion", "hyde")`` (the registry's order); ``""``/``none`` → ``()``.

    Names are compared case-insensitively; a registered plug-in's name is accepted too.

    Raises:
        ConfigError: an unknown name (the message lists the allowed ones).
    """
    if spec is None:
        return ()
    names = []
    for raw in str(spec).split(","):
        name = raw.strip().lower()
        if not name or name == "none":
            continue
        found = lookup(TRANSFORMS, _ALIASES.get(name, name))
        if found is None:
            raise ConfigError(f"unknown query transform {raw.strip()!r}; allowed: {', '.join(TRANSFORMS.names())} (comma-separated) or none")
        names.append(found)
    return tuple(n for n in TRANSFORMS.names() if n in names)


def make_transforms(spec: str | tuple[str, ...] | None, *, provider: LLMProvider | None = None, fusion_n: int = 3) -> list[tuple[str, Any]]:
    """The ``(name, transform)`` chain for ``spec`` (see :func:`parse_transform_spec`): each
    named registry entry built with the ``provider`` and ``fusion_n``."""
    names = parse_transform_spec(spec) if not isinstance(spec, tuple) else parse_transform_spec(",".join(spec))
    ctx = TransformContext(provider=provider, fusion_n=fusion_n)
    return [(n, TRANSFORMS.get(n).build(ctx)) for n in names]


__all__ = ["ChannelQuery", "DecomposeTransform", "HyDETransform", "NormalizeTransform", "RagFusionTransform",
           "StepBackTransform", "TRANSFORM_NAMES", "Variants", "abstract_query", "ask_llm", "make_transforms",
           "parse_transform_spec", "split_question", "transform_names", "with_channels"]
