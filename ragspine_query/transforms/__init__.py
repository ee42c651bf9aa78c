"""Query transforms: the user's query → the variants the pipeline retrieves and fuses.

Each is a :class:`~ragspine_query.pipeline.stages.Transform` (``variants -> variants``)
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
says so. :func:`make_transforms` builds a chain from a spec such as ``"hyde,fusion"``
(``RAGSPINE_TRANSFORMS``; ``--transform`` on the CLI).
"""

from __future__ import annotations

from typing import Any

from ragspine_core.errors import ConfigError
from ragspine_query.transforms.transform import ChannelQuery, Variants, ask_llm, with_channels
from ragspine_query.transforms.decompose import DecomposeTransform, split_question
from ragspine_query.transforms.hyde import HyDETransform
from ragspine_query.transforms.query_normalize import NormalizeTransform
from ragspine_query.transforms.rag_fusion import RagFusionTransform
from ragspine_query.transforms.step_back import StepBackTransform, abstract_query

#: Names accepted by :func:`make_transforms`, in the order they run whatever the spec's order.
TRANSFORM_NAMES: tuple[str, ...] = ("normalize", "decompose", "step_back", "fusion", "hyde")
_ALIASES = {"stepback": "step_back", "step-back": "step_back", "rag_fusion": "fusion", "rag-fusion": "fusion",
            "decomposition": "decompose", "norm": "normalize"}


def parse_transform_spec(spec: str | None) -> tuple[str, ...]:
    """``"hyde, fusion"`` → ``("fusion", "hyde")`` (canonical order); ``""``/``none`` → ``()``.

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
        name = _ALIASES.get(name, name)
        if name not in TRANSFORM_NAMES:
            raise ConfigError(f"unknown query transform {raw.strip()!r}; allowed: {', '.join(TRANSFORM_NAMES)} (comma-separated) or none")
        names.append(name)
    return tuple(n for n in TRANSFORM_NAMES if n in names)


def make_transforms(spec: str | tuple[str, ...] | None, *, provider: Any | None = None, fusion_n: int = 3) -> list[tuple[str, Any]]:
    """The ``(name, transform)`` chain for ``spec`` (see :func:`parse_transform_spec`)."""
    names = parse_transform_spec(spec) if not isinstance(spec, tuple) else parse_transform_spec(",".join(spec))
    build = {
        "normalize": lambda: NormalizeTransform(),
        "decompose": lambda: DecomposeTransform(provider),
        "step_back": lambda: StepBackTransform(provider),
        "fusion": lambda: RagFusionTransform(provider, n=fusion_n),
        "hyde": lambda: HyDETransform(provider),
    }
    return [(n, build[n]()) for n in names]


__all__ = ["ChannelQuery", "DecomposeTransform", "HyDETransform", "NormalizeTransform", "RagFusionTransform",
           "StepBackTransform", "TRANSFORM_NAMES", "Variants", "abstract_query", "ask_llm", "make_transforms",
           "parse_transform_spec", "split_question", "with_channels"]
