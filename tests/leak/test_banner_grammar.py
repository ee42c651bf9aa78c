"""The banner grammar (issue 37): common phrasings of a restricted-type banner, English and
Chinese, are markings wherever the marking rules read a line; prose and financial names
that mention the words are not."""

from __future__ import annotations

import pytest

from ragspine_index.source_documents.parse_library import parse_library
from ragspine_index.source_documents.sensitivity import first_marking, is_banner
from ragspine_tools.bench.bench_banners import BANNERS, NOT_BANNERS, accept_rates

ISSUE_BANNERS = ("HIGHLY CONFIDENTIAL", "PRIVILEGED & CONFIDENTIAL", "DRAFT - CONFIDENTIAL", "Company Confidential",
                 "Confidential (Project X)", "Restricted distribution", "商业秘密", "保密", "仅限董事会")


@pytest.mark.parametrize("banner", BANNERS)
def test_every_banner_of_the_corpus_is_read_as_restricted(banner):
    assert is_banner(banner)
    assert first_marking([("line 1", banner, "body")], restricted_only=True) == "line 1"


@pytest.mark.parametrize("line", NOT_BANNERS)
def test_prose_and_names_that_mention_the_words_are_not_markings(line):
    assert not is_banner(line)
    assert first_marking([("line 1", line, "body")], restricted_only=True) is None


def test_the_measured_rates():
    assert accept_rates() == {"banners": 1.0, "placed": 1.0, "false_positives": 0.0}


@pytest.mark.parametrize("banner", ISSUE_BANNERS)
def test_a_markdown_first_line_banner_withdraws_the_document(tmp_path, banner):
    (tmp_path / "a.md").write_text(f"{banner}\n\n# Tender\n\nSix electric cranes for the terminal.\n", encoding="utf-8")
    result = parse_library(tmp_path)
    assert not result.documents and result.errors[0].field == "sensitivity"


@pytest.mark.parametrize("banner", ISSUE_BANNERS)
def test_a_banner_under_an_internal_sensitivity_is_a_conflict(tmp_path, banner):
    (tmp_path / "a.md").write_text(f"---\nsensitivity: INTERNAL\n---\n{banner}\n\nSix cranes.\n", encoding="utf-8")
    result = parse_library(tmp_path)
    assert not result.documents and result.errors[0].field == "sensitivity"


@pytest.mark.parametrize("banner", ISSUE_BANNERS)
def test_a_docx_header_banner_makes_it_restricted(tmp_path, banner):
    pytest.importorskip("docx", reason="the 'formats' extra")
    from ragspine_index.converters import writers

    (tmp_path / "a.docx").write_bytes(writers.write_docx("# Tender\n\nSix electric cranes.\n", header=banner))
    result = parse_library(tmp_path)
    assert not result.errors and [d.sensitivity for d in result.documents] == ["RESTRICTED"]


def test_an_sec_filing_hidden_xbrl_header_is_not_a_marking(tmp_path):
    """Inline XBRL: a hidden ix:header names us-gaap:RestrictedStockMember; no marking."""
    page = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>Form 10-Q</title></head><body>'
            '<div style="display:none"><ix:header><ix:resources><xbrli:context id="c1"><xbrli:segment>'
            '<xbrldi:explicitMember dimension="us-gaap:AwardTypeAxis">us-gaap:RestrictedStockMember'
            '</xbrldi:explicitMember></xbrli:segment></xbrli:context></ix:resources></ix:header></div>'
            '<p>us-gaap:RestrictedStockMember</p><h1>Quarterly report</h1><p>Revenue rose 4% in the quarter.</p>'
            '<p>Restricted stock units vested in March.</p></body></html>')
    (tmp_path / "10q.html").write_text(page, encoding="utf-8")
    result = parse_library(tmp_path)
    assert not result.errors and [d.sensitivity for d in result.documents] == ["INTERNAL"]
