"""One query pipeline: channels, stages, fusion and ``explain`` that capabilities plug into.

* :mod:`.channels` — :class:`Channel`, :func:`register_channel`, the built-in ``bm25``
  and ``vector`` channels;
* :mod:`.stages` — :class:`QueryPipeline`, :func:`register_transform`,
  :func:`register_postprocessor`, :class:`SearchResult`;
* :mod:`.explain` — the frozen :class:`Explain` trace (``to_rows()``, ``format_table()``).
"""

from ragspine_query.pipeline.channels import Channel, ChannelContext, DenseChannel, LexicalChannel, register_channel, registered_channels, unregister_channel
from ragspine_query.pipeline.explain import Candidate, Explain, StageTrace
from ragspine_query.pipeline.stages import (
    PostProcessor,
    QueryPipeline,
    SearchResult,
    Snippets,
    Transform,
    register_postprocessor,
    register_transform,
    registered_postprocessors,
    registered_transforms,
    unregister_postprocessor,
    unregister_transform,
)

__all__ = [
    "Candidate", "Channel", "ChannelContext", "DenseChannel", "Explain", "LexicalChannel", "PostProcessor",
    "QueryPipeline", "SearchResult", "Snippets", "StageTrace", "Transform", "register_channel",
    "register_postprocessor", "register_transform", "registered_channels", "registered_postprocessors",
    "registered_transforms", "unregister_channel", "unregister_postprocessor", "unregister_transform",
]
