"""The transform and post-processor registries: every one, built-in or plug-in, is a named entry.

An entry of :data:`TRANSFORMS` / :data:`POSTPROCESSORS` is a :class:`Plugin`: a factory
(``build(context) -> transform``) plus two declared abilities:

* ``always`` — the rule for when it runs. An entry runs in a pipeline when the spec
  names it (``--transform``, ``RAGSPINE_TRANSFORMS``, ``--postprocessor``,
  ``RAGSPINE_POSTPROCESSOR``, ``QueryIntelligence(transforms=…)``); an ``always`` entry
  also runs when the spec does not name it, after everything the pipeline lists (what
  :func:`register_transform` / :func:`register_postprocessor` have always done). An
  always-entry that the spec names runs once, where the spec puts it. Built-ins are never
  ``always``: they run only when named.
* ``takes_arg`` (post-processors) — whether ``name:ARG`` is accepted (``mmr:0.7``).

The built-ins (``normalize, decompose, step_back, fusion, hyde`` and ``mmr,
lost_in_middle, compress``) are registered by :mod:`ragspine_query.transforms` and
:mod:`ragspine_query.postprocess` with their canonical order (0, 1, 2, …) and
``builtin=True``; plug-ins land after them by ``order`` then name. So the names a spec
accepts, the "allowed" list of an error and ``--help`` all come from the registry.

    register_transform("mine", fn)                            # runs in every pipeline (as before)
    register_transform("mine", fn, always=False)              # runs when named: --transform mine
    register_transform_factory("mine", lambda ctx: Mine(ctx.provider))        # when named
    register_postprocessor_factory("cap", lambda ctx: Cap(int(ctx.arg or 3)), takes_arg=True)

This module imports nothing from the rest of the query floor, so the modules that own the
built-ins can register them without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generic, Protocol, TypeVar, runtime_checkable

from ragspine_core.records import Hit
from ragspine_core.registry import PLUGIN_ORDER, Registry
from ragspine_query.source import Source

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

#: MMR's default λ (relevance weight) when neither ``mmr:λ`` nor ``RAGSPINE_MMR_LAMBDA`` sets one.
DEFAULT_MMR_LAMBDA = 0.7

T = TypeVar("T")
C = TypeVar("C")


@runtime_checkable
class Transform(Protocol):
    """``variants -> variants``: the current query variants (first = the user's query) to new ones."""

    def __call__(self, variants: list[str]) -> list[str]: ...


@runtime_checkable
class PostProcessor(Protocol):
    """``(query, hits) -> hits`` over the deep, reranked list (may reorder or drop hits)."""

    def __call__(self, query: str, hits: list[Hit]) -> list[Hit]: ...


@dataclass(frozen=True, slots=True)
class TransformContext:
    """What a transform factory may use: the LLM ``provider`` (None offline) and
    RAG-Fusion's number of reformulations ``fusion_n``."""

    provider: LLMProvider | None = None
    fusion_n: int = 3


@dataclass(frozen=True, slots=True)
class PostprocessorContext:
    """What a post-processor factory may use: ``source`` (the retriever searched, e.g. for
    MMR's chunk vectors; None when a configuration is only being validated), the
    configured ``mmr_lambda``, ``arg`` (the text after ``:`` in the spec item, lower-cased;
    ``""`` when none) and ``item`` (the item as written, for error messages)."""

    source: Source | None = None
    mmr_lambda: float = DEFAULT_MMR_LAMBDA
    arg: str = ""
    item: str = ""


@dataclass(frozen=True, slots=True)
class Plugin(Generic[C, T]):
    """One registry entry: ``build(context) -> item`` and its declared abilities (see the module)."""

    build: Callable[[C], T]
    always: bool = False
    takes_arg: bool = False


def _plugin_check(kind: str) -> Callable[[str, Any], None]:
    def check(name: str, entry: Any) -> None:
        if not isinstance(entry, Plugin) or not callable(entry.build):
            raise TypeError(f"{kind} {name!r} must be registered as a Plugin with a callable build")
    return check


#: Every query transform by ``(order, name)``: the built-ins, then plug-ins.
TRANSFORMS: Registry[Plugin[TransformContext, Transform]] = Registry("transform", check=_plugin_check("transform"))
#: Every post-processor by ``(order, name)``: the built-ins, then plug-ins.
POSTPROCESSORS: Registry[Plugin[PostprocessorContext, PostProcessor]] = Registry("post-processor", check=_plugin_check("post-processor"))


def _fixed(fn: T) -> Callable[[Any], T]:
    def build(ctx: Any) -> T:
        return fn
    return build


def register_transform(name: str, fn: Transform, *, replace: bool = False, order: int = PLUGIN_ORDER,
                       always: bool = True) -> Transform:
    """Register ``fn(variants) -> variants`` as ``name``. ``always`` (the default, as
    before): it runs in every query pipeline built afterwards (after its listed
    transforms; registered ones by ``order``, then name); ``always=False``: only when a
    spec names it (``--transform name``).

    Raises:
        ConfigError: ``name`` is registered already and ``replace`` is false.
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"transform {name!r} must be callable")
    TRANSFORMS.register(name, Plugin(_fixed(fn), always=always), order=order, replace=replace)
    return fn


def register_transform_factory(name: str, factory: Callable[[TransformContext], Transform], *, replace: bool = False,
                               order: int = PLUGIN_ORDER, always: bool = False) -> Callable[[TransformContext], Transform]:
    """Register ``factory(TransformContext) -> transform`` as ``name``: built per pipeline with
    the pipeline's provider; runs when a spec names it (``always=True``: in every pipeline)."""
    if not callable(factory):
        raise TypeError(f"transform factory {name!r} must be callable")
    TRANSFORMS.register(name, Plugin(factory, always=always), order=order, replace=replace)
    return factory


def register_postprocessor(name: str, fn: PostProcessor, *, replace: bool = False, order: int = PLUGIN_ORDER,
                           always: bool = True) -> PostProcessor:
    """Register ``fn(query, hits) -> hits`` as ``name``. ``always`` (the default, as
    before): it runs after reranking in every query pipeline built afterwards (after its
    listed post-processors; registered ones by ``order``, then name); ``always=False``:
    only when a spec names it (``--postprocessor name``).

    Raises:
        ConfigError: ``name`` is registered already and ``replace`` is false.
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"post-processor {name!r} must be callable")
    POSTPROCESSORS.register(name, Plugin(_fixed(fn), always=always), order=order, replace=replace)
    return fn


def register_postprocessor_factory(name: str, factory: Callable[[PostprocessorContext], PostProcessor], *, replace: bool = False,
                                   order: int = PLUGIN_ORDER, always: bool = False,
                                   takes_arg: bool = False) -> Callable[[PostprocessorContext], PostProcessor]:
    """Register ``factory(PostprocessorContext) -> post-processor`` as ``name``: built per
    pipeline with its source; runs when a spec names it (``always=True``: in every
    pipeline); ``takes_arg``: ``name:ARG`` is accepted and ``ARG`` is ``ctx.arg``."""
    if not callable(factory):
        raise TypeError(f"post-processor factory {name!r} must be callable")
    POSTPROCESSORS.register(name, Plugin(factory, always=always, takes_arg=takes_arg), order=order, replace=replace)
    return factory


def unregister_transform(name: str) -> None:
    """Remove a plug-in transform (a no-op when absent; built-ins cannot be removed)."""
    TRANSFORMS.unregister(name)


def unregister_postprocessor(name: str) -> None:
    """Remove a plug-in post-processor (a no-op when absent; built-ins cannot be removed)."""
    POSTPROCESSORS.unregister(name)


def registered_transforms() -> tuple[str, ...]:
    """The plug-in transforms (not the built-ins), by ``(order, name)``; every name a spec
    accepts is ``TRANSFORMS.names()``."""
    return tuple(e.name for e in TRANSFORMS.entries() if not e.builtin)


def registered_postprocessors() -> tuple[str, ...]:
    """The plug-in post-processors (not the built-ins), by ``(order, name)``; every name a
    spec accepts is ``POSTPROCESSORS.names()``."""
    return tuple(e.name for e in POSTPROCESSORS.entries() if not e.builtin)


def lookup(registry: Registry[Any], name: str) -> str | None:
    """The registered name ``name`` spells, compared case-insensitively (None when none)."""
    if name in registry:
        return name
    folded = name.lower()
    return next((n for n in registry.names() if n.lower() == folded), None)


def always_transforms(ctx: TransformContext | None = None, *, named: tuple[str, ...] | frozenset[str] = ()) -> list[tuple[str, Transform]]:
    """The ``(name, transform)`` of every ``always`` entry a spec did not name (``named``), by ``(order, name)``."""
    c = ctx if ctx is not None else TransformContext()
    return [(e.name, e.item.build(c)) for e in TRANSFORMS.entries() if e.item.always and e.name not in named]


def always_postprocessors(ctx: PostprocessorContext | None = None, *,
                          named: tuple[str, ...] | frozenset[str] = ()) -> list[tuple[str, PostProcessor]]:
    """The ``(name, post-processor)`` of every ``always`` entry a spec did not name (``named``), by ``(order, name)``."""
    c = ctx if ctx is not None else PostprocessorContext()
    return [(e.name, e.item.build(c)) for e in POSTPROCESSORS.entries() if e.item.always and e.name not in named]


__all__ = ["DEFAULT_MMR_LAMBDA", "POSTPROCESSORS", "Plugin", "PostProcessor", "PostprocessorContext", "TRANSFORMS", "Transform",
           "TransformContext", "always_postprocessors", "always_transforms", "lookup", "register_postprocessor",
           "register_postprocessor_factory", "register_transform", "register_transform_factory", "registered_postprocessors",
           "registered_transforms", "unregister_postprocessor", "unregister_transform"]
