"""Attribution of a graph fact from its evidence sentence (issue 36): entity, period, metric,
value and currency, or an abstention. Pure functions: no library needed."""

from __future__ import annotations

import re

import pytest

from ragspine_query.graph.attribution import Abstention, Attributed, attribute, find_periods, resolve_periods, title_period

ENTITIES = {"ACME_GROUP": ("Acme Group",), "ACME_CN": ("Acme China", "艾克美中国"), "ACME_US": ("Acme US",),
            "ACME_ENERGY": ("Acme Energy",), "GLOBEX": ("Globex",), "HUAXIN": ("Huaxin", "华信科技")}


def mentions(sentence):
    out = []
    for cid, names in ENTITIES.items():
        for n in names:
            out += [(m.start(), m.end(), cid) for m in re.finditer(re.escape(n), sentence)]
    return sorted(out)


def attr(sentence, metric, *, chunk_entity=None, chunk_periods=frozenset()):
    m = re.search(metric, sentence)
    assert m is not None
    return attribute(sentence, m.start(), m.end(), entities=mentions(sentence), chunk_entity=lambda: chunk_entity,
                     chunk_period=lambda: frozenset(chunk_periods))


def test_entity_is_the_one_named_before_the_metric_in_the_sentence():
    got = attr("同期，艾克美中国营业收入165.2亿元，同比下降2.2%；毛利率27.7%。", "毛利率", chunk_entity=None,
               chunk_periods={"2024"})
    assert isinstance(got, Attributed) and got.entity == "ACME_CN" and got.value.text == "27.7%"
    got = attr("A: Globex is larger, with 2024 revenue of USD 11.9 billion, but its gross margin (29.4%) is lower "
               "than Acme's.", "gross margin")
    assert isinstance(got, Attributed) and (got.entity, got.period, got.value.amount) == ("GLOBEX", "2024", 29.4)


def test_a_sentence_without_an_entity_abstains_when_its_chunk_names_several():
    s = "Its gross margin of 47.5% reflects its SCADA and asset-performance software, which is 46% of revenue."
    assert attr(s, "gross margin", chunk_entity=None, chunk_periods={"2024"}) == Abstention("entity")
    got = attr("Gross margin was 47.5% and operating margin 15.2%.", "Gross margin", chunk_entity="INITECH",
               chunk_periods={"2024"})
    assert isinstance(got, Attributed) and (got.entity, got.period) == ("INITECH", "2024")


def test_an_appositive_entity_is_not_the_subject_and_two_clauses_of_entities_abstain():
    s = ("Acme Energy, the battery and energy storage unit of Acme Group, reported first half 2025 revenue of "
         "USD 590 million, up 21.4% from USD 486 million in the first half of 2024.")
    got = attr(s, "revenue")
    assert isinstance(got, Attributed) and (got.entity, got.period, got.value.unit, got.value.amount) == (
        "ACME_ENERGY", "2025H1", "USD", 590e6)
    assert attr("Acme US grew, and Acme China too; gross margin was 30%.", "gross margin") == Abstention("entity")


@pytest.mark.parametrize("sentence,metric,period", [
    ("Acme US revenue for 2024 was USD 3,120 million, up 4.7% from USD 2,980 million in 2023.", "revenue", "2024"),
    ("2024年第三季度，艾克美中国实现营业收入37.9亿元人民币，较2023年同期的42.8亿元下降11.4%，环比第二季度的43.6亿元下降13.1%。",
     "营业收入", "2024Q3"),
    ("Acme China revenue for the third quarter of 2024 was USD 480 million.", "revenue", "2024Q3"),
    ("Acme China revenue in Q3 2024 was USD 480 million.", "revenue", "2024Q3"),
    ("2025年上半年，艾克美中国实现营业收入86.3亿元人民币，同比增长1.8%（2024年上半年为84.8亿元）。", "营业收入", "2025H1"),
])
def test_the_period_is_the_sentences_own_not_the_comparisons(sentence, metric, period):
    got = attr(sentence, metric)
    assert isinstance(got, Attributed) and got.period == period


def test_periods_a_sentence_cannot_settle_abstain():
    s = "Gross margin fell from 37% to 32% as the product mix shifted toward power electronics."
    # the chunk names 2010 and 2016: no one period for a sentence that names none
    assert attr(s, "Gross margin", chunk_entity="ACME_GROUP", chunk_periods={"2010", "2016"}) == Abstention(
        "period", "ACME_GROUP")
    got = attr(s, "Gross margin", chunk_entity="ACME_GROUP", chunk_periods={"2016"})
    assert isinstance(got, Attributed) and got.value.text == "32%" and not got.period_in_sentence
    # a yearless quarter takes the chunk's one year; "this quarter" its one quarter
    got = attr("第三季度实现营业收入37.9亿元，同比下降11.4%；毛利率25.7%。", "毛利率", chunk_entity="ACME_CN",
               chunk_periods={"2024", "2024Q3"})
    assert isinstance(got, Attributed) and got.period == "2024Q3"
    got = attr("本季度毛利率为25.7%，较上年同期的29.1%下降3.4个百分点。", "毛利率", chunk_entity="ACME_CN",
               chunk_periods={"2024Q3"})
    assert isinstance(got, Attributed) and got.period == "2024Q3" and got.value.text == "25.7%"
    # a day is no year: headcount "at 31 March 2024" is not the 2024 figure, and 31 is no value
    got = attr("Headcount at 31 March 2024 was 38,750.", "Headcount", chunk_entity="ACME_GROUP")
    assert isinstance(got, Attributed) and got.period == "2024-03-31" and got.value.amount == 38750


@pytest.mark.parametrize("sentence,metric", [
    ("2024年，服务与软件业务营收达到13.1亿元，同比增长10.2%。", "营收"),  # a segment's revenue
    ("Acme US R&D spend was USD 214 million (6.9% of revenue).", "revenue"),  # a share of it
    ("Service and software: USD 630 million, gross margin 52.4%.", "gross margin"),  # the label's figures
    ("Acme US revenue grew 4.7%.", "revenue"),  # a growth rate is no revenue
])
def test_another_metric_is_no_fact_of_this_one(sentence, metric):
    assert attr(sentence, metric, chunk_entity="ACME_US", chunk_periods={"2024"}) is None


def test_values_skip_growth_and_carry_their_currency():
    got = attr("Acme Energy revenue grew 18.0% to USD 1,260 million, gross margin 19.4%.", "revenue",
               chunk_periods={"2024"})
    assert isinstance(got, Attributed) and (got.value.text, got.value.unit, got.value.amount) == (
        "USD 1,260 million", "USD", 1260e6)
    got = attr("2024年华信科技实现营业收入312亿元，同比增长12.6%。", "营业收入")
    assert isinstance(got, Attributed) and (got.entity, got.value.unit, got.value.amount) == ("HUAXIN", "RMB", 312e8)
    assert attr("Gross margin | 31.2% | 29.4% | 47.5%", "Gross margin", chunk_entity="ACME_GROUP") == Abstention("table")


def test_period_helpers():
    assert title_period("Acme Group FY2024 results") == "2024"
    assert title_period("2024q3-note") == "2024Q3"
    assert title_period("Acme Group Fourth Quarter and Full-Year 2024 Results") == ""
    assert resolve_periods(find_periods("Between 2010 and 2016 revenue grew")) is None
    assert [p.comparison for p in find_periods("revenue for 2024, up from USD 2,980 million in 2023")] == [False, True]
