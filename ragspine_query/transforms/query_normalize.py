"""Query normalisation as a transform: full-width → half-width (NFKC) and whitespace
collapsed; case folding is optional (off by default: the analyzer already folds case for
BM25, while dense models can read case as signal). The result cache and the gate always
compare fully normalised forms (:func:`~ragspine_core.text.normalize.normalize_query`)."""

from __future__ import annotations

from ragspine_core.text.normalize import normalize_query
from ragspine_query.transforms.transform import ChannelQuery, Variants


class NormalizeTransform:
    """Every variant normalised (a :class:`ChannelQuery` keeps its per-channel texts, normalised too)."""

    name = "normalize"

    def __init__(self, *, casefold: bool = False) -> None:
        self.casefold = casefold

    def _one(self, v: str) -> str:
        text = normalize_query(v, casefold=self.casefold) or str(v)
        if isinstance(v, ChannelQuery):
            return ChannelQuery(text, channel_texts={k: normalize_query(t, casefold=self.casefold) for k, t in v.channel_texts.items()},
                                channels=v.channels, origin=v.origin, pinned=v.pinned)
        return text

    def __call__(self, variants: list[str]) -> Variants:
        out = [self._one(v) for v in variants]
        changed = sum(str(a) != str(b) for a, b in zip(out, variants))
        return Variants(out, f"normalize: {changed} variant(s) changed")
