"""Tier 1: the glossary and the rule-based multi-query rewriter."""

from __future__ import annotations

import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.glossary import Glossary, GlossaryQueryRewriter

GLOSSARY = Glossary.from_dict({
    "entities": [
        {"id": "ACME_CN", "names": ["Acme China", "Acme CN", "艾克美中国"]},
        {"id": "GLOBEX", "names": ["Globex", "环球公司"], "competitor": True},
    ],
    "metrics": [
        {"id": "REVENUE", "names": ["revenue", "sales", "营收", "营业收入"]},
    ],
})


def test_original_query_always_first():
    rewriter = GlossaryQueryRewriter(GLOSSARY)
    for q in ("why did Acme China revenue fall", "nothing to expand here", ""):
        assert rewriter.rewrite(q)[0] == q


def test_rewrites_swap_synonyms_of_matched_concepts():
    out = GlossaryQueryRewriter(GLOSSARY, max_queries=10).rewrite("why did Acme China revenue fall")
    assert out == [
        "why did Acme China revenue fall",
        "why did Acme CN revenue fall",
        "why did 艾克美中国 revenue fall",
        "why did Acme China sales fall",
        "why did Acme China 营收 fall",
        "why did Acme China 营业收入 fall",
    ]


def test_max_queries_caps_the_list_including_the_original():
    out = GlossaryQueryRewriter(GLOSSARY, max_queries=3).rewrite("why did Acme China revenue fall")
    assert len(out) == 3 and out[0] == "why did Acme China revenue fall"


def test_max_queries_one_returns_only_the_original():
    assert GlossaryQueryRewriter(GLOSSARY, max_queries=1).rewrite("Acme China revenue") == ["Acme China revenue"]


def test_default_max_queries_is_five():
    out = GlossaryQueryRewriter(GLOSSARY).rewrite("why did Acme China revenue fall")
    assert len(out) == 5


def test_no_match_yields_only_the_original():
    assert GlossaryQueryRewriter(GLOSSARY).rewrite("weather in Oslo") == ["weather in Oslo"]


def test_rewriter_is_deterministic_and_has_no_duplicates():
    r = GlossaryQueryRewriter(GLOSSARY, max_queries=10)
    a, b = r.rewrite("艾克美中国 营收"), r.rewrite("艾克美中国 营收")
    assert a == b and len(set(a)) == len(a)


def test_invalid_max_queries_is_a_config_error():
    with pytest.raises(ConfigError, match="max_queries"):
        GlossaryQueryRewriter(GLOSSARY, max_queries=0)


def test_competitors_are_listed():
    assert GLOSSARY.competitors() == frozenset({"GLOBEX"})


def test_glossary_round_trips_through_dict():
    assert Glossary.from_dict(GLOSSARY.to_dict()) == GLOSSARY


def test_sample_glossary_loads_from_toml(repo_root):
    g = Glossary.load(repo_root / "data" / "glossary.toml")
    ids = {c.id for c in g.concepts}
    assert {"ACME_GROUP", "ACME_CN", "GLOBEX"} <= ids
    assert "GLOBEX" in g.competitors()


def test_glossary_entry_without_id_is_rejected():
    with pytest.raises(ConfigError, match="needs an 'id'"):
        Glossary.from_dict({"entities": [{"names": ["x"]}]})
