"""Reranking: one verb (``rank``), local models and an LLM listwise judge.

Composition rule (what a retriever does with :func:`make_reranker`'s result): there is
at most one reranker per query, and it is applied once, as
``reranker.rank(query, hits, top_n=...)``, after fusion and before post-processing.
A local reranker *takes precedence* over the LLM judge by replacement, not by
stacking: when a local model is chosen (explicitly, or by ``auto`` because its folder
is configured) the judge is not built and the provider is not called for reranking.
The LLM judge is returned as a :class:`ListwiseReranker` (``is_listwise = True``, its
judge in ``.judge``) so a caller that wants ``listwise_rerank`` itself can unwrap it.

Every reranker keeps RESTRICTED hits at their positions and never hands their text to
a model or a judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ragspine_core.errors import ConfigError
from ragspine_core.registry import PLUGIN_ORDER, Registry
from ragspine_query.rerank.reranker import RERANK_CHANNEL, Reranker, language_note, passage_text, rank_by_scores
from ragspine_query.rerank.cross_encoder import CROSS_ENCODER_DIR_ENV, CrossEncoderReranker
from ragspine_query.rerank.late_interaction import (
    ColbertMaxSimReranker,
    LexicalMaxSimReranker,
    embedding_maxsim,
    maxsim_score,
    token_similarity,
    token_specificity_weight,
    weighted_maxsim_score,
)
from ragspine_query.rerank.listwise import (
    DEFAULT_TOP_N,
    ListwiseJudge,
    ListwiseReranker,
    ProviderListwiseJudge,
    build_listwise_prompt,
    listwise_rerank,
    parse_listwise_response,
)
from ragspine_query.rerank.splade import SPLADE_DIR_ENV, SpladeReranker

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider
    from ragspine_core.settings import Settings
    from ragspine_query.rerank.late_interaction import TokenEncoder

#: The variable behind ``Settings.reranker``, the default spec (see ``docs/configuration.md``).
RERANKER_ENV = "RAGSPINE_RERANKER"

#: The built-in specs (case-insensitive), in :data:`RERANKERS` order; ``ce`` is an alias of
#: ``cross_encoder``. :func:`register_reranker` adds more (:func:`registered_rerankers`).
RERANKER_CHOICES = ("none", "auto", "listwise", "cross_encoder", "ce", "colbert", "maxsim", "splade")

__all__ = [
    "CROSS_ENCODER_DIR_ENV",
    "DEFAULT_TOP_N",
    "RERANKER_CHOICES",
    "RERANKER_ENV",
    "RERANKERS",
    "RERANK_CHANNEL",
    "SPLADE_DIR_ENV",
    "ColbertMaxSimReranker",
    "CrossEncoderReranker",
    "LexicalMaxSimReranker",
    "ListwiseJudge",
    "ListwiseReranker",
    "ProviderListwiseJudge",
    "Reranker",
    "RerankerContext",
    "SpladeReranker",
    "build_listwise_prompt",
    "embedding_maxsim",
    "language_note",
    "listwise_rerank",
    "make_reranker",
    "maxsim_score",
    "parse_listwise_response",
    "passage_text",
    "rank_by_scores",
    "register_reranker",
    "registered_rerankers",
    "token_similarity",
    "token_specificity_weight",
    "unregister_reranker",
    "weighted_maxsim_score",
]


@dataclass(frozen=True, slots=True)
class RerankerContext:
    """What a reranker factory may use: the ``settings`` (model folders: ``cross_encoder_dir``,
    ``splade_dir``) and the LLM ``provider`` (None when none was given)."""

    settings: "Settings"
    provider: "LLMProvider | None" = None


#: ``ctx -> Reranker | None`` (None: keep the fused order).
RerankerFactory = Callable[[RerankerContext], "Reranker | None"]


def _must_be_callable(name: str, factory: Any) -> None:
    if not callable(factory):
        raise TypeError(f"reranker {name!r} needs a factory: a callable ctx -> Reranker | None, got {factory!r}")


#: Every reranker spec :func:`make_reranker` accepts, by name (lower case).
RERANKERS: Registry[RerankerFactory] = Registry("reranker", check=_must_be_callable)


def register_reranker(name: str, factory: RerankerFactory, *, replace: bool = False, order: int = PLUGIN_ORDER) -> RerankerFactory:
    """Make ``name`` (case-insensitive) a reranker spec of :func:`make_reranker`,
    ``--reranker`` and ``RAGSPINE_RERANKER``: ``factory(ctx) -> Reranker | None`` with a
    :class:`RerankerContext`.

    Raises:
        ConfigError: ``name`` is registered already and ``replace`` is false.
        TypeError: ``factory`` is not callable.
    """
    return RERANKERS.register(name.strip().lower(), factory, order=order, replace=replace)


def unregister_reranker(name: str) -> None:
    """Remove a registered reranker (a no-op when absent); a built-in one cannot be removed."""
    RERANKERS.unregister(name.strip().lower())


def registered_rerankers() -> tuple[str, ...]:
    """Every accepted spec, built-ins first (in :data:`RERANKER_CHOICES` order)."""
    return RERANKERS.names()


def make_reranker(
    spec: str | None = None,
    *,
    provider: "LLMProvider | None" = None,
    settings: "Settings | None" = None,
) -> Reranker | None:
    """Build the reranker named by ``spec`` (default: ``settings.reranker``, else ``none``):
    the factory registered under that name in :data:`RERANKERS`.

    Built-in specs (case-insensitive):

    * ``none`` → ``None`` (keep the fused order).
    * ``listwise`` → :class:`ListwiseReranker` over :class:`ProviderListwiseJudge(provider)`.
    * ``cross_encoder`` / ``ce`` → :class:`CrossEncoderReranker` on
      ``settings.cross_encoder_dir`` (``RAGSPINE_CROSS_ENCODER_DIR``).
    * ``colbert`` → :class:`ColbertMaxSimReranker` on the packaged MiniLM token encoder
      (serves English only: Chinese queries and candidates are left in place).
    * ``maxsim`` → :class:`LexicalMaxSimReranker` (weighted; no model needed).
    * ``splade`` → :class:`SpladeReranker` on ``settings.splade_dir`` (``RAGSPINE_SPLADE_DIR``).
    * ``auto`` → the cross-encoder if a cross-encoder folder is set, else the
      listwise judge if a provider is given, else ``None``.

    Others are added with :func:`register_reranker`.

    A local model chosen here wins over the LLM judge: ``provider`` is then ignored
    (see the module docstring for how a retriever applies the result).

    Configuration: pass ``settings`` (a :class:`~ragspine_core.settings.Settings` built
    once at an edge, ``Settings.from_env()``). Without it, the defaults (``Settings()``):
    nothing here reads the environment.

    Raises:
        ConfigError: unknown spec (the message lists the allowed values), ``listwise``
            without a provider, or a model folder that is unset or incomplete.
        MissingExtraError: the chosen model needs onnxruntime/tokenizers and they are absent.
    """
    if settings is None:
        from ragspine_core.settings import Settings

        settings = Settings()
    raw = spec if spec is not None else settings.reranker
    name = str(raw).strip().lower() or "none"
    if name not in RERANKERS:
        source = "spec" if spec is not None else RERANKER_ENV
        raise ConfigError(f"unknown reranker {raw!r} (from {source}); allowed: {', '.join(RERANKERS.names())}")
    return RERANKERS.get(name)(RerankerContext(settings, provider))


def _cross_encoder_dir(ctx: RerankerContext) -> str | None:
    return ctx.settings.cross_encoder_dir.strip() or None


def _auto(ctx: RerankerContext) -> Reranker | None:
    if _cross_encoder_dir(ctx):
        return CrossEncoderReranker(_cross_encoder_dir(ctx))
    return ListwiseReranker(ProviderListwiseJudge(ctx.provider)) if ctx.provider is not None else None


def _listwise(ctx: RerankerContext) -> Reranker:
    if ctx.provider is None:
        raise ConfigError(
            "reranker 'listwise' needs an LLM provider: pass provider=... (e.g. "
            "OpenAICompatibleProvider.from_settings(Settings.from_env())), or choose a local reranker: "
            "cross_encoder, colbert, maxsim, splade"
        )
    return ListwiseReranker(ProviderListwiseJudge(ctx.provider))


def _cross_encoder(ctx: RerankerContext) -> Reranker:
    return CrossEncoderReranker(_cross_encoder_dir(ctx))


_BUILTIN_RERANKERS: dict[str, RerankerFactory] = {
    "none": lambda ctx: None,
    "auto": _auto,
    "listwise": _listwise,
    "cross_encoder": _cross_encoder,
    "ce": _cross_encoder,
    "colbert": lambda ctx: ColbertMaxSimReranker(_packaged_token_encoder(), languages=("en",)),
    "maxsim": lambda ctx: LexicalMaxSimReranker(weighted=True),
    "splade": lambda ctx: SpladeReranker(ctx.settings.splade_dir.strip() or None),
}
for _i, _name in enumerate(RERANKER_CHOICES):
    RERANKERS.register(_name, _BUILTIN_RERANKERS[_name], order=10 * _i, builtin=True)


def _packaged_token_encoder() -> TokenEncoder:
    """The packaged MiniLM as a token encoder, imported only when ColBERT is chosen."""
    try:
        from ragspine_core.dense.minilm_onnx import OnnxEmbeddingBackend
    except ImportError as err:
        if getattr(err, "name", "") in ("onnxruntime", "tokenizers"):
            from ragspine_core.errors import MissingExtraError

            raise MissingExtraError("ColBERT reranking", "embed-onnx", str(err.name)) from err
        raise
    return OnnxEmbeddingBackend.packaged_minilm()
