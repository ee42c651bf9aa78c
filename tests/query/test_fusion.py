"""Tier 1: Reciprocal Rank Fusion, k = 60, ranks from 1 (Cormack et al. 2009)."""

from __future__ import annotations

import pytest

from ragspine_query.fusion import DEFAULT_RRF_K, rrf_fuse, rrf_order


def test_default_rrf_k_is_sixty():
    assert DEFAULT_RRF_K == 60


def test_rrf_golden_values_rank_starts_at_one():
    fused = rrf_fuse([["a", "b", "c"], ["b", "a"]])
    assert fused == {
        "a": pytest.approx(1 / 61 + 1 / 62),
        "b": pytest.approx(1 / 62 + 1 / 61),
        "c": pytest.approx(1 / 63),
    }
    assert fused["c"] == 1 / 63


def test_rrf_golden_ordering_across_three_lists():
    rankings = [["d1", "d2", "d3", "d4"], ["d3", "d1"], ["d5", "d3"]]
    fused = rrf_fuse(rankings)
    # d3: 1/63 + 1/61 + 1/62 ; d1: 1/61 + 1/62 ; d5: 1/61 ; d2: 1/62 ; d4: 1/64
    assert rrf_order(fused) == ["d3", "d1", "d5", "d2", "d4"]
    assert fused["d3"] == pytest.approx(1 / 63 + 1 / 61 + 1 / 62)


def test_rrf_ties_break_by_id_ascending():
    fused = rrf_fuse([["b", "a"], ["a", "b"], ["z"], ["c"]])
    # a and b tie at 1/61 + 1/62; z and c tie at 1/61
    assert rrf_order(fused) == ["a", "b", "c", "z"]


def test_rrf_custom_k_and_depth():
    fused = rrf_fuse([["x", "y", "z"]], rrf_k=0, depth=2)
    assert fused == {"x": 1.0, "y": 0.5}


def test_rrf_rejects_negative_k():
    with pytest.raises(ValueError, match="rrf_k"):
        rrf_fuse([["a"]], rrf_k=-1)


def test_rrf_of_nothing_is_empty():
    assert rrf_fuse([]) == {}
    assert rrf_order({}) == []


# -- language-aware fusion plans ----------------------------------------------------------

import numpy as np  # noqa: E402

from ragspine_query.fusion import FUSION_POLICIES, MixedLanguagePolicy, fuse_mixed_languages, plan_fusion  # noqa: E402
from ragspine_core.text.language import LanguageProfile  # noqa: E402

EN_LIB = LanguageProfile.from_labels(["en"] * 99 + ["zh"])
ZH_LIB = LanguageProfile.from_labels(["zh"] * 99 + ["en"])
ZH_LIB_SOME_EN = LanguageProfile.from_labels(["zh"] * 95 + ["en"] * 5)
MIXED_LIB = LanguageProfile.from_labels(["en"] * 70 + ["zh"] * 30)


@pytest.mark.parametrize("qlang, profile, case", [
    ("en", EN_LIB, "same-language:en"),
    ("zh", ZH_LIB, "same-language:zh"),
    ("en", ZH_LIB, "cross-lingual"),
    ("zh", EN_LIB, "cross-lingual"),
    ("zh", MIXED_LIB, "mixed:zh"),
    ("en", MIXED_LIB, "mixed:en"),
    ("en", ZH_LIB_SOME_EN, "minority-language"),
])
def test_plan_case_follows_query_and_library_language(qlang, profile, case):
    plan = plan_fusion(qlang, profile, ["bm25", "vector"])
    assert plan.case == case and plan.query_language == qlang
    policy = FUSION_POLICIES[case]
    assert plan.rrf_k == policy.rrf_k and plan.mixed == policy.mixed
    assert dict(plan.weights) == dict(policy.weights) and (plan.method, plan.depth) == (policy.method, policy.depth)
    assert case.split(":")[0] in plan.describe() and plan.reason in plan.describe()


def test_plan_directions_cross_lingual_leans_dense_chinese_leans_bm25():
    cross = plan_fusion("zh", EN_LIB, ["bm25", "vector"])
    assert cross.weight("vector") > cross.weight("bm25")
    zh = plan_fusion("zh", ZH_LIB, ["bm25", "vector"])
    assert zh.weight("bm25") > zh.weight("vector")
    codes = plan_fusion("en", ZH_LIB_SOME_EN, ["bm25", "vector"])  # e.g. a product code against Chinese titles
    assert codes.weight("bm25") > codes.weight("vector")
    mixed = plan_fusion("en", MIXED_LIB, ["bm25", "vector"])
    # the other language's rows, which BM25 cannot match, are ranked by the dense channel
    assert mixed.method == "mixed" and mixed.mixed.other_dense > 0 and mixed.mixed.earn > 0


def test_plan_leaves_plugin_channels_alone_and_needs_both_builtins():
    plan = plan_fusion("en", EN_LIB, ["bm25", "vector", "graph"])
    assert "graph" not in dict(plan.weights) and plan.weight("graph", 0.7) == 0.7
    single = plan_fusion("en", EN_LIB, ["bm25"])
    assert single.case == "single-channel" and dict(single.weights) == {"bm25": 1.0}


def test_plan_to_dict_is_what_the_eval_json_shows():
    d = plan_fusion("zh", MIXED_LIB, ["bm25", "vector"]).to_dict()
    assert d["case"] == "mixed:zh" and d["method"] == "mixed" and set(d["mixed"]) >= {"earn", "margin", "depth"}
    assert set(d["weights"]) == {"bm25", "vector"} and "zh" in d["reason"]


ROW_LANG = np.array(["en", "en", "en", "zh", "zh"])


def _mixed(policy, bm25, dense, served=None):
    return fuse_mixed_languages([("bm25", *bm25), ("vector", *dense)], row_language=ROW_LANG, query_language="en",
                                policy=policy, channel_languages={"vector": served})


def test_other_language_rows_stay_below_a_same_language_answer_that_bm25_and_dense_agree_on():
    # an English question whose answer (row 0) is English: the Chinese row 3 is topically close
    # (cosine 0.55) but farther than the answer (0.6); it must not be ranked first
    bm25 = (np.array([0, 1, 2]), np.array([9.0, 4.0, 1.0]))
    dense = (np.array([0, 3, 1, 4, 2]), np.array([0.60, 0.55, 0.40, 0.30, 0.20]))
    rows, fused = _mixed(MixedLanguagePolicy(earn=1.0, margin=0.02), bm25, dense)
    assert rows[0] == 0 and list(rows).index(3) > 0
    assert np.all(np.diff(fused) <= 0)


def test_an_other_language_row_closer_than_every_same_language_row_earns_the_top():
    # a cross-language question: the only answer (row 3, Chinese) is the dense channel's clear
    # best; without the earned credit, the English rows that BM25 half-matches would win
    bm25 = (np.array([1, 2]), np.array([5.0, 4.5]))
    dense = (np.array([3, 1, 2, 4, 0]), np.array([0.80, 0.45, 0.40, 0.30, 0.10]))
    without, _ = _mixed(MixedLanguagePolicy(earn=0.0), bm25, dense)
    earned, _ = _mixed(MixedLanguagePolicy(earn=1.0, margin=0.05), bm25, dense)
    assert without[0] == 1 and earned[0] == 3


def test_a_one_language_model_never_ranks_the_other_language():
    # MiniLM declares languages={"en"}: its cosines to Chinese rows are not used, and a
    # Chinese query does not use it at all
    bm25 = (np.array([0]), np.array([1.0]))
    dense = (np.array([3, 0, 4]), np.array([0.9, 0.5, 0.4]))
    rows, _ = _mixed(MixedLanguagePolicy(), bm25, dense, served=frozenset({"en"}))
    assert set(rows.tolist()) == {0}
    zh_rows, _ = fuse_mixed_languages([("vector", *dense)], row_language=ROW_LANG, query_language="zh",
                                      policy=MixedLanguagePolicy(), channel_languages={"vector": frozenset({"en"})})
    assert zh_rows.size == 0


def test_english_plan_is_a_convex_combination_over_a_fixed_depth():
    plan = plan_fusion("en", EN_LIB, ["bm25", "vector"])
    assert plan.method == "convex" and plan.depth == 300 and "convex min-max depth=300" in plan.describe()


def test_weighted_score_fusion_by_hand():
    from ragspine_query.fusion import weighted_score_fusion

    bm25 = (np.array([3, 1, 2]), np.array([10.0, 6.0, 2.0]))   # normalised 1.0, 0.5, 0.0
    dense = (np.array([2, 4]), np.array([0.9, 0.5]))            # normalised 1.0, 0.0
    rows, fused = weighted_score_fusion([bm25, dense], weights=[1.0, 2.0])
    # 2: 0.0 + 2.0 ; 3: 1.0 ; 1: 0.5 ; 4: 0.0 — ties (none here) by row
    assert rows.tolist() == [2, 3, 1, 4] and fused.tolist() == pytest.approx([2.0, 1.0, 0.5, 0.0])
    # depth cuts before normalising; equal scores normalise to 1.0; empty rankings are skipped
    rows, fused = weighted_score_fusion([bm25, (np.array([5, 6]), np.array([0.3, 0.3])), (np.array([], int), np.array([]))],
                                        weights=[1.0, 1.0, 1.0], depth=2)
    assert rows.tolist() == [3, 5, 6, 1] and fused.tolist() == pytest.approx([1.0, 1.0, 1.0, 0.0])
    empty_rows, empty = weighted_score_fusion([], weights=[])
    assert empty_rows.size == 0 and empty.size == 0
