"""Tokenizers shared by index time and query time.

The spec tokenizer (``spec``): lowercase; ASCII alphanumeric runs are words; runs of CJK
characters emit every unigram and every adjacent bigram (so BM25 works for Chinese
without a segmenter). Every other character separates tokens.

The optional ``english`` analyzer keeps the CJK behaviour byte-for-byte and additionally
drops English stop words and Snowball-stems ASCII words (needs PyStemmer, extra
``english``). The analyzer is chosen per library at build time and recorded in the
manifest, so the query side always tokenizes exactly like the index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

from ragspine_core.errors import ConfigError, MissingExtraError
from ragspine_core.text.language import CJK_CHAR_CLASS, cjk_share

SPEC_TOKENIZER_VERSION = "1"
ENGLISH_ANALYZER_VERSION = "1"

#: ``resolve_auto_analyzer`` picks ``english`` when at least this share of the word
#: characters is not CJK (i.e. ``cjk_share <= 0.8``).
ENGLISH_ANALYZER_MIN_NON_CJK_SHARE = 0.2

# CJK runs: the one definition of CJK characters, :mod:`ragspine_core.text.language`.
_TOKEN_RE = re.compile(rf"[a-z0-9]+|[{CJK_CHAR_CLASS}]+")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into spec tokens (ASCII words + CJK unigrams and bigrams).

    >>> tokenize("Acme 营收下滑")
    ['acme', '营', '营收', '收', '收下', '下', '下滑', '滑']
    """
    lowered = text.lower()
    if lowered.isascii():  # only ASCII word runs can match: they are the tokens
        return _TOKEN_RE.findall(lowered)
    out: list[str] = []
    append = out.append
    for run in _TOKEN_RE.findall(lowered):
        if run[0] < "\u0080":
            append(run)
            continue
        n = len(run)
        for i in range(n):
            append(run[i])
            if i + 1 < n:
                append(run[i : i + 2])
    return out


# A compact English stop-word list (function words only; content words are kept).
ENGLISH_STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just me more most my myself no nor not of off on once
    only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you
    your yours yourself yourselves s t don""".split()
)


@dataclass(frozen=True, slots=True)
class Analyzer:
    """A named, versioned text -> tokens function recorded in the index manifest."""

    name: str
    version: str
    fn: Callable[[str], list[str]]

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def __call__(self, text: str) -> list[str]:
        return self.fn(text)

    def many(self, texts: Iterable[str]) -> list[list[str]]:
        return [self.fn(t) for t in texts]


def _english_fn() -> Callable[[str], list[str]]:
    try:
        import Stemmer  # PyStemmer
    except ImportError as exc:  # pragma: no cover - exercised via sys.modules patch
        raise MissingExtraError("The 'english' analyzer", "english", "Stemmer (PyStemmer)") from exc
    stemmer = Stemmer.Stemmer("english")
    stem_word = stemmer.stemWord
    stops = ENGLISH_STOP_WORDS
    cache: dict[str, str] = {}

    def analyze(text: str) -> list[str]:
        out: list[str] = []
        for tok in tokenize(text):
            if tok[0] < "\u0080":
                if tok in stops:
                    continue
                s = cache.get(tok)
                if s is None:
                    s = stem_word(tok)
                    if len(cache) < 500_000:
                        cache[tok] = s
                out.append(s)
            else:
                out.append(tok)
        return out

    return analyze


ANALYZER_NAMES = ("spec", "english")


def english_available() -> bool:
    try:
        import Stemmer  # noqa: F401
    except ImportError:
        return False
    return True


def make_analyzer(name: str) -> Analyzer:
    """Build an analyzer by name (``spec`` or ``english``); ids look like ``english@1``."""
    base = name.split("@", 1)[0].strip().lower()
    if base == "spec":
        return Analyzer("spec", SPEC_TOKENIZER_VERSION, tokenize)
    if base == "english":
        return Analyzer("english", ENGLISH_ANALYZER_VERSION, _english_fn())
    raise ConfigError(f"unknown analyzer {name!r}; allowed: {', '.join(ANALYZER_NAMES)} (or 'auto' at build time)")


def analyzer_from_id(analyzer_id: str) -> Analyzer:
    """Re-create the analyzer recorded in a manifest, refusing an unknown version."""
    name, _, version = analyzer_id.partition("@")
    analyzer = make_analyzer(name)
    if version and version != analyzer.version:
        raise ConfigError(
            f"index was built with analyzer {analyzer_id!r} but this reader has "
            f"{analyzer.id!r}; re-materialize the bm25_index asset"
        )
    return analyzer


def resolve_auto_analyzer(sample_texts: Iterable[str]) -> str:
    """Pick the analyzer a library gets by default from its text.

    ``english`` when a meaningful share (>= 20%) of the word characters are not CJK
    (see :func:`ragspine_core.text.language.cjk_share`) and PyStemmer is installed;
    ``spec`` otherwise. CJK tokens are identical under both.
    """
    sample = "\n".join(t[:2000] for t, _ in zip(sample_texts, range(2000)))
    if not sample.strip():
        return "spec"
    if 1.0 - cjk_share(sample) >= ENGLISH_ANALYZER_MIN_NON_CJK_SHARE and english_available():
        return "english"
    return "spec"
