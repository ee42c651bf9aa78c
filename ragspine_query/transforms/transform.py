"""What every query transform shares: per-channel query text, notes, and a safe LLM call.

* :class:`ChannelQuery` — a query variant (a ``str``) that may carry a different text for
  some channels (HyDE: the hypothetical document for ``vector``, the original for
  ``bm25``) and may restrict which channels run (the adaptive tiers). The retriever asks
  ``query.for_channel(name)``: a text, or None to skip that channel.
* :class:`Variants` — the list a transform returns, with a ``note`` that ``explain``
  shows (why it was skipped, how it degraded).
* :func:`ask_llm` — one chat call that never raises: an LLM failure is a note, and the
  transform degrades to the plain query.

Prompts hold the user's query (and, for step-back/decomposition, nothing else): no
transform ever sends index text to an LLM.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Any, Iterable

from ragspine_core.llm import feature_max_tokens
from ragspine_core.text.language import detect_language

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

#: The longest variant a transform may produce (the seed's AgentCRAGMaxQueryRunes).
MAX_QUERY_CHARS = 320
#: The longest hypothetical document HyDE keeps.
MAX_PROBE_CHARS = 2000


class ChannelQuery(str):
    """A query variant that may carry per-channel text and a channel selection.

    Args:
        text: what the lexical channel (and any channel without an override) searches.
        channel_texts: channel name -> the text that channel searches instead.
        channels: the channels that may run (None: every channel of the retriever).
        origin: which transform made it (shown in ``explain``).
        pinned: later transforms (the tiers) must not change the channel selection.
        language: the language the fusion is planned for ("" = detected from the text);
            a variant keeps the language of the user's query, whatever script it adds.
        language_only: rank only rows in ``language`` (a variant must not bring rows of
            another language into the ranking on its own).
    """

    channel_texts: dict[str, str]
    channels: frozenset[str] | None
    origin: str
    pinned: bool
    language: str
    language_only: bool

    def __new__(cls, text: str, *, channel_texts: dict[str, str] | None = None, channels: Iterable[str] | None = None,
                origin: str = "", pinned: bool = False, language: str = "", language_only: bool = False) -> "ChannelQuery":
        obj = super().__new__(cls, str(text))
        obj.channel_texts = dict(channel_texts or {})
        obj.channels = frozenset(channels) if channels is not None else None
        obj.origin = origin
        obj.pinned = pinned
        obj.language = str(language or "")
        obj.language_only = bool(language_only)
        return obj

    def for_channel(self, name: str) -> str | None:
        """The text channel ``name`` searches, or None when it must not run for this query."""
        if self.channels is not None and name not in self.channels:
            return None
        if name in self.channel_texts:
            return self.channel_texts[name]
        # a part of an ensemble ("vector:e5") searches what its kind ("vector") was given: HyDE's probe
        # reaches every dense model, not only the first
        return self.channel_texts.get(name.split(":", 1)[0], str(self))

    def replace(self, **changes: Any) -> "ChannelQuery":  # type: ignore[override]  # a ChannelQuery's fields, not str.replace
        args: dict[str, Any] = {"channel_texts": self.channel_texts, "channels": self.channels, "origin": self.origin, "pinned": self.pinned,
                "language": self.language, "language_only": self.language_only}
        args.update(changes)
        return ChannelQuery(str(self), **args)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (str subclasses with attributes need this)
        return (_rebuild, (str(self), self.channel_texts, self.channels, self.origin, self.pinned, self.language, self.language_only))


def _rebuild(text: str, channel_texts: dict[str, str] | None, channels: Iterable[str] | None, origin: str, pinned: bool,
             language: str = "", language_only: bool = False) -> ChannelQuery:
    return ChannelQuery(text, channel_texts=channel_texts, channels=channels, origin=origin, pinned=pinned,
                        language=language, language_only=language_only)


def in_language_of(variant: str, language: str, *, only: bool = True) -> "ChannelQuery":
    """``variant`` planned in ``language`` and ranking only rows in that language: a
    query variant (glossary alias, rewrite, sub-question) keeps the user's query's
    language, so an alias in another script cannot import another language's rows
    (``only=False``: planned in ``language`` but ranking every row)."""
    if isinstance(variant, ChannelQuery):
        return variant.replace(language=language, language_only=only)
    return ChannelQuery(variant, language=language, language_only=only)


def with_channels(query: str, channels: Iterable[str] | None, *, origin: str = "") -> str:
    """``query`` restricted to ``channels`` (keeps the per-channel texts it already has)."""
    if isinstance(query, ChannelQuery):
        return query if query.pinned else query.replace(channels=None if channels is None else frozenset(channels))
    return ChannelQuery(query, channels=channels, origin=origin)


class Variants(list[Any]):
    """A transform's output: the query variants (first = the user's query), a ``note`` and,
    from the adaptive tiers, the ``tier`` that runs (recorded on the result)."""

    __slots__ = ("note", "tier")

    def __init__(self, variants: Iterable[str] = (), note: str = "", tier: str = "") -> None:
        super().__init__(variants)
        self.note = note
        self.tier = tier


def ask_llm(provider: LLMProvider | None, system: str, user: str, *, max_tokens: int = 256) -> tuple[str | None, str]:
    """One chat call; returns ``(reply, "")`` or ``(None, note)`` — never raises.

    Any failure (HTTP error after retries, timeout, unusable body, an exception of any
    kind from a plugin provider) becomes a note naming the error type only.
    """
    if provider is None:
        return None, "no LLM provider configured: skipped"
    try:
        reply = provider.chat([{"role": "system", "content": system}, {"role": "user", "content": user}],
                              temperature=0.0, max_tokens=max_tokens)
    except Exception as exc:  # an LLM failure degrades to the plain query, never fails it
        return None, f"LLM failed ({type(exc).__name__}): plain query"
    if not isinstance(reply, str) or not reply.strip():
        return None, "LLM answered nothing usable: plain query"
    return reply, ""


def other_language(query: str, text: str) -> bool:
    """Whether an LLM's ``text`` is in another language than the user's ``query`` (the
    script test of :func:`~ragspine_core.text.language.detect_language`): a reply a model
    wrote in the wrong language is not used as a variant of the query."""
    return detect_language(str(text)) != detect_language(str(query))


def same_language_lines(query: str, lines: list[str]) -> tuple[list[str], str]:
    """``lines`` in the query's language, and a note when some were dropped for their language."""
    kept = [line for line in lines if not other_language(query, line)]
    dropped = len(lines) - len(kept)
    return kept, (f"{dropped} LLM line(s) in another language dropped" if dropped else "")


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|\(\d+\)|q\d*[:.)]|question\s*\d*[:.)])\s*", re.IGNORECASE)


def reply_lines(reply: str, *, limit: int) -> list[str]:
    """Non-empty lines of an LLM reply, list markers stripped, quotes trimmed, deduplicated,
    at most ``limit``, each cut to :data:`MAX_QUERY_CHARS`. A line without a letter or digit
    (``---``, ``?``, ``…``: a real model writes them) is no query and is dropped: searched,
    it would fail the whole query."""
    out: list[str] = []
    for line in reply.splitlines():
        text = _BULLET.sub("", line).strip().strip('"').strip("'").strip()
        if not text or text.endswith(":") or not any(unicodedata.category(ch)[0] in "LN" for ch in text):
            continue
        text = text[:MAX_QUERY_CHARS]
        if text.casefold() not in {o.casefold() for o in out}:
            out.append(text)
        if len(out) >= limit:
            break
    return out


def merge(variants: list[str], new: Iterable[str]) -> list[str]:
    """``variants`` followed by each new text not already there (case-insensitive)."""
    seen = {str(v).casefold() for v in variants}
    out = list(variants)
    for v in new:
        if str(v).casefold() not in seen:
            seen.add(str(v).casefold())
            out.append(v)
    return out


__all__ = ["ChannelQuery", "MAX_PROBE_CHARS", "MAX_QUERY_CHARS", "Variants", "ask_llm", "feature_max_tokens", "merge",
           "other_language", "reply_lines", "same_language_lines", "with_channels"]
