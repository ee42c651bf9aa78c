"""Tier 1: the shared tokenizer and the optional English analyzer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine_core.errors import ConfigError
from ragspine_core.text.tokenize import analyzer_from_id, make_analyzer, resolve_auto_analyzer, tokenize


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Acme 营收下滑", ["acme", "营", "营收", "收", "收下", "下", "下滑", "滑"]),
        ("Revenue FELL in Q3-2024!", ["revenue", "fell", "in", "q3", "2024"]),
        ("USD 11.9bn", ["usd", "11", "9bn"]),
        ("snake_case and-dash", ["snake", "case", "and", "dash"]),
        ("第五条", ["第", "第五", "五", "五条", "条"]),
        ("数据出境，第五条", ["数", "数据", "据", "据出", "出", "出境", "境", "第", "第五", "五", "五条", "条"]),
        ("中", ["中"]),
        ("中a文", ["中", "a", "文"]),  # an ASCII letter splits the CJK run: no 中文 bigram
        ("艾克美中国2024年", ["艾", "艾克", "克", "克美", "美", "美中", "中", "中国", "国", "2024", "年"]),
        ("", []),
        ("  ,.;!?  ", []),
    ],
)
def test_tokenize_exact_examples(text, expected):
    assert tokenize(text) == expected


def test_tokenize_lowercases_ascii_words():
    assert tokenize("ACME Acme aCmE") == ["acme", "acme", "acme"]


def test_non_ascii_letters_outside_cjk_separate_tokens():
    # only ASCII alphanumerics form words; "é" and "ï" are separators
    assert tokenize("café naïve") == ["caf", "na", "ve"]


def test_kana_and_hangul_runs_emit_unigrams_and_bigrams():
    assert tokenize("アイウ 한국") == ["ア", "アイ", "イ", "イウ", "ウ", "한", "한국", "국"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("营收下滑毛利季度")), min_size=1, max_size=12))
def test_cjk_run_yields_every_unigram_and_adjacent_bigram(run):
    n = len(run)
    expected = []
    for i in range(n):
        expected.append(run[i])
        if i + 1 < n:
            expected.append(run[i : i + 2])
    assert tokenize(run) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_tokens_are_lowercase_ascii_words_or_short_cjk_grams(text):
    for tok in tokenize(text):
        if tok[0] < "\u0080":
            assert tok.isascii() and tok.isalnum() and tok == tok.lower()
        else:
            assert 1 <= len(tok) <= 2 and tok in text


def test_tokenize_is_deterministic_and_pure():
    text = "Acme Europe 营收 Q3 2024"
    assert tokenize(text) == tokenize(text)


def test_english_analyzer_stems_and_drops_stop_words():
    pytest.importorskip("Stemmer")
    english = make_analyzer("english")
    assert english.id == "english@1"
    assert english("The revenues were declining in Q3") == ["revenu", "declin", "q3"]
    assert english("revenue") == english("revenues")


def test_english_analyzer_keeps_cjk_tokens_identical_to_spec():
    pytest.importorskip("Stemmer")
    english = make_analyzer("english")
    text = "艾克美中国 数据出境 第五条"
    assert english(text) == tokenize(text)
    mixed = "Acme China 营收下滑 because of price wars"
    cjk = [t for t in tokenize(mixed) if t[0] >= "\u0080"]
    assert [t for t in english(mixed) if t[0] >= "\u0080"] == cjk


def test_spec_analyzer_is_the_tokenizer():
    spec = make_analyzer("spec")
    assert spec.id == "spec@1"
    assert spec("Acme 营收") == tokenize("Acme 营收")


def test_unknown_analyzer_lists_allowed_names():
    with pytest.raises(ConfigError, match="spec, english"):
        make_analyzer("porter")


def test_analyzer_from_manifest_id_refuses_other_version():
    assert analyzer_from_id("spec@1").id == "spec@1"
    with pytest.raises(ConfigError, match="bm25_index"):
        analyzer_from_id("spec@99")


def test_auto_analyzer_choice_follows_the_text():
    assert resolve_auto_analyzer(["艾克美中国营收下滑，毛利率下降。" * 5]) == "spec"
    assert resolve_auto_analyzer([]) == "spec"
    pytest.importorskip("Stemmer")
    assert resolve_auto_analyzer(["Acme Europe revenue declined in the third quarter."]) == "english"
