"""One query pipeline: channels, stages, fusion and ``explain`` that capabilities plug into.

* :mod:`.channels` — :class:`Channel` (the declared abilities and their defaults),
  :func:`register_channel` (the :data:`CHANNELS` registry), the built-in ``bm25`` and
  ``vector`` channels;
* :mod:`.runner` — :class:`QueryPipeline` (an explicit list of stages run by one loop),
  :func:`~ragspine_query.pipeline.runner.stages_of`;
* :mod:`.stages` — :class:`Stage`, the built-in stages, :func:`core_stages`;
* :mod:`.state` — :class:`QueryState` (what one run carries), :class:`SearchResult`,
  :class:`Snippets`;
* :mod:`.plugins` — the :data:`TRANSFORMS` and :data:`POSTPROCESSORS` registries (built-ins
  and plug-ins, each a :class:`Plugin` factory; ``always`` entries run in every pipeline,
  the others when a spec names them), :func:`register_transform_factory`,
  :func:`register_postprocessor_factory`;
* :mod:`.trace` — tracing through a context variable (:func:`current_tracer`, :func:`tracing`;
  :data:`NULL_TRACER` when nobody explains);
* :mod:`.explain` — the frozen :class:`Explain` trace (``to_rows()``, ``format_table()``).
"""

from ragspine_query.pipeline.channels import (CHANNELS, Channel, ChannelContext, DenseChannel, LexicalChannel, PluginChannel, register_channel,
                                              registered_channels, unregister_channel)
from ragspine_query.pipeline.explain import Candidate, Explain, StageTrace
from ragspine_query.pipeline.runner import QueryPipeline
from ragspine_query.pipeline.stages import (
    CutStage,
    GateStage,
    PipelineStage,
    PostprocessStage,
    RerankStage,
    RestrictedStripStage,
    RetrieveStage,
    Stage,
    TransformStage,
    VariantGateStage,
    core_stages,
)
from ragspine_query.pipeline.state import QueryState, SearchResult, Snippets
from ragspine_query.pipeline.plugins import (POSTPROCESSORS, TRANSFORMS, Plugin, PostProcessor, PostprocessorContext, Transform, TransformContext,
                                             register_postprocessor, register_postprocessor_factory, register_transform,
                                             register_transform_factory, registered_postprocessors, registered_transforms,
                                             unregister_postprocessor, unregister_transform)
from ragspine_query.pipeline.trace import NULL_TRACER, current_tracer, tracing

__all__ = [
    "CHANNELS", "NULL_TRACER", "POSTPROCESSORS", "Plugin", "PostprocessorContext", "TRANSFORMS", "TransformContext",
    "register_postprocessor_factory", "register_transform_factory", "PluginChannel", "Candidate", "Channel", "ChannelContext", "CutStage", "DenseChannel", "Explain", "GateStage", "LexicalChannel",
    "PipelineStage", "PostProcessor", "PostprocessStage", "QueryPipeline", "QueryState", "RerankStage",
    "RestrictedStripStage", "RetrieveStage", "SearchResult", "Snippets", "Stage", "StageTrace", "Transform",
    "TransformStage", "VariantGateStage", "core_stages", "current_tracer", "register_channel", "tracing",
    "register_postprocessor", "register_transform", "registered_channels", "registered_postprocessors",
    "registered_transforms", "unregister_channel", "unregister_postprocessor", "unregister_transform",
]
