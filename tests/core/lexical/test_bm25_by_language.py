"""BM25 statistics per language in a library that mixes English and Chinese.

An English row of a mixed library must score exactly as in a library of the English
rows alone (its ``N``, ``df``, ``avgdl`` and ``k1``): adding an unrelated collection in
another language changes no same-language BM25 score. The Chinese rows likewise keep a
Chinese library's ``k1``. RESTRICTED rows still count in no statistics.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_index.library_config import LibraryConfig
from ragspine_index.library_settings import FUSION_BM25_K1, bm25_params_for
from ragspine_core.errors import ConfigError
from ragspine_core.lexical.bm25 import DEFAULT_BM25_K1, BM25Arrays, BM25Params, build_bm25_arrays

EN = [["acme", "europe", "revenue", "fell", "third", "quarter"], ["revenue", "growth", "acme", "energy"],
      ["sodium", "ion", "battery", "plant", "acme", "energy", "revenue", "revenue"]]
ZH = [["营", "收", "营收"], ["电", "池", "电池", "工", "厂"], ["acme", "中", "国"]]
BY_LANGUAGE = BM25Params(DEFAULT_BM25_K1, 0.75, k1_by_language=(("en", FUSION_BM25_K1), ("zh", DEFAULT_BM25_K1)))


def impacts_of(arrays: BM25Arrays, token: str) -> dict[int, float]:
    t = arrays.tokens.index(token)
    lo, hi = int(arrays.indptr[t]), int(arrays.indptr[t + 1])
    return dict(zip(arrays.postings[lo:hi].tolist(), arrays.impacts[lo:hi].tolist()))


def test_each_languages_rows_score_as_in_a_library_of_that_language_alone():
    mixed = build_bm25_arrays(EN + ZH, BY_LANGUAGE, row_languages=["en"] * 3 + ["zh"] * 3)
    english = build_bm25_arrays(EN, BM25Params(FUSION_BM25_K1, 0.75))
    chinese = build_bm25_arrays(ZH, BM25Params(DEFAULT_BM25_K1, 0.75))
    for token in {t for row in EN for t in row}:
        got = {r: v for r, v in impacts_of(mixed, token).items() if r < 3}
        assert got == impacts_of(english, token), token  # bit for bit
    for token in {t for row in ZH for t in row}:
        got = {r - 3: v for r, v in impacts_of(mixed, token).items() if r >= 3}
        assert got == impacts_of(chinese, token), token
    # one set of statistics for all rows gives other English scores (the shorter Chinese
    # rows lower avgdl): the per-language build is what makes the test above pass
    shared = build_bm25_arrays(EN + ZH, BM25Params(FUSION_BM25_K1, 0.75))
    assert {r: v for r, v in impacts_of(shared, "revenue").items() if r < 3} != impacts_of(english, "revenue")


def test_restricted_rows_count_in_no_languages_statistics():
    secret = ["revenue"] * 20
    rows = EN + [secret] + ZH
    langs = ["en"] * 4 + ["zh"] * 3
    open_rows = np.array([True, True, True, False, True, True, True])
    mixed = build_bm25_arrays(rows, BY_LANGUAGE, stat_rows=open_rows, row_languages=langs)
    english = build_bm25_arrays(EN, BM25Params(FUSION_BM25_K1, 0.75))
    got = {r: v for r, v in impacts_of(mixed, "revenue").items() if r < 3}
    assert got == impacts_of(english, "revenue")


def test_row_languages_must_match_the_rows():
    with pytest.raises(ValueError, match="row_languages has 2 entries for 6 BM25 rows"):
        build_bm25_arrays(EN + ZH, BY_LANGUAGE, row_languages=["en", "zh"])
    with pytest.raises(ConfigError, match="k1 of language 'zh'"):
        BM25Params(k1_by_language=(("zh", -1.0),))


def test_a_mixed_library_gets_statistics_per_language_unless_it_sets_k1():
    mixed = {"en": 0.7, "zh": 0.3}
    params = bm25_params_for(LibraryConfig(), "minilm+e5+multilingual", mixed)
    assert params.k1_by_language == (("en", FUSION_BM25_K1), ("zh", DEFAULT_BM25_K1))
    assert params.k1 == FUSION_BM25_K1  # the first group's: what the manifest shows as k1
    # MiniLM (+ e5) ranks the English rows whatever the ensemble: the English rows get 0.2
    assert bm25_params_for(LibraryConfig(), "minilm+e5", mixed).k1_by_language == params.k1_by_language
    # another model ranks the English rows: the English rows keep the classic k1
    assert bm25_params_for(LibraryConfig(), "multilingual", mixed).k1_by_language == (
        ("en", DEFAULT_BM25_K1), ("zh", DEFAULT_BM25_K1))
    # one language (or a minority under the threshold): one set of statistics, as before
    assert bm25_params_for(LibraryConfig(), "minilm+e5", {"en": 0.95, "zh": 0.05}) == BM25Params(FUSION_BM25_K1, 0.75)
    assert bm25_params_for(LibraryConfig(), "multilingual", {"zh": 1.0}) == BM25Params(DEFAULT_BM25_K1, 0.75)
    # the library's own bm25_k1 is one k1 for every row
    assert bm25_params_for(LibraryConfig(bm25_k1=0.9), "minilm+e5+multilingual", mixed) == BM25Params(0.9, 0.75)
