"""The one CJK definition and language detector, and that every consumer uses it."""

from __future__ import annotations

import pytest

from ragspine_core.dense.embedding import CJK_MULTILINGUAL_THRESHOLD
from ragspine_core.text import tokenize as tokenize_module
from ragspine_core.text.language import (
    MULTILINGUAL_EMBEDDING_THRESHOLD,
    ZH_LANGUAGE_THRESHOLD,
    cjk_share,
    detect_language,
    is_cjk,
)
from ragspine_core.text.tokenize import tokenize


@pytest.mark.parametrize("ch", ["营", "㐀", "豈", "あ", "カ", "한"])
def test_cjk_is_ideographs_kana_and_hangul(ch):
    assert is_cjk(ch)
    assert tokenize(ch) == [ch]  # the tokenizer emits exactly these as CJK unigrams


@pytest.mark.parametrize("ch", ["a", "é", "Ж", "7", "，", "𠀀"])
def test_other_characters_are_not_cjk(ch):
    assert not is_cjk(ch)


@pytest.mark.parametrize(
    "text, share",
    [
        ("", 0.0),
        ("!!! ...", 0.0),
        ("营收增长 revenue", 4 / 11),
        ("营收 revenue growth rate", 2 / 19),
        ("café 营收", 2 / 6),  # non-ASCII letters are word characters too
        ("收益は増加した", 1.0),  # Japanese: kanji + kana
        ("매출 감소", 1.0),  # Korean
        ("2024年", 1 / 5),  # digits count as word characters
    ],
)
def test_cjk_share(text, share):
    assert cjk_share(text) == pytest.approx(share)


def test_detect_language_uses_the_zh_threshold():
    assert detect_language("营收 revenue growth rate") == "en"
    assert detect_language("营收增长 revenue") == "zh"
    assert detect_language("!!! ...") == "en"
    assert detect_language("收益は増加した") == "zh"
    # 3 of 10 word characters: exactly the threshold
    assert cjk_share("营收增 abcdefg") == pytest.approx(ZH_LANGUAGE_THRESHOLD)
    assert detect_language("营收增 abcdefg") == "zh"
    assert detect_language("营收 abcdefgh") == "en"
    assert detect_language("营收 abcdefgh", threshold=0.2) == "zh"


def test_consumers_share_the_detector_and_thresholds():
    assert tokenize_module.cjk_share is cjk_share
    assert CJK_MULTILINGUAL_THRESHOLD == MULTILINGUAL_EMBEDDING_THRESHOLD == 0.2
    assert ZH_LANGUAGE_THRESHOLD == 0.3


def test_parsing_detect_language_is_the_shared_one():
    parsing = pytest.importorskip("ragspine_index.source_documents.model")
    assert parsing.CJK_LANGUAGE_THRESHOLD == ZH_LANGUAGE_THRESHOLD
    for text in ("营收 revenue growth rate", "营收增长 revenue", "매출 감소 report", "收益は増加した"):
        assert parsing.detect_language(text) == detect_language(text)


# -- library language profiles --------------------------------------------------------------

from ragspine_core.text.language import MIXED_LIBRARY_THRESHOLD, LanguageProfile  # noqa: E402


def test_language_profile_counts_majority_and_mixing():
    p = LanguageProfile.from_labels(["zh", "en", "zh", "", "zh"])
    assert p.counts == (("zh", 3), ("en", 2)) and p.total == 5 and p.majority == "zh"
    assert p.share("en") == pytest.approx(0.4) and p.mixed and p.describe() == "zh 60% en 40%"
    few = LanguageProfile.from_labels(["zh"] * 95 + ["en"] * 4)
    assert few.share("en") < MIXED_LIBRARY_THRESHOLD and not few.mixed
    at = LanguageProfile.from_labels(["en"] * 9 + ["zh"])
    assert at.mixed  # exactly the threshold mixes


def test_empty_profile_is_english_and_not_mixed():
    p = LanguageProfile.from_labels([])
    assert p.majority == "en" and not p.mixed and p.total == 0 and p.share("zh") == 0.0 and p.describe() == "empty"
