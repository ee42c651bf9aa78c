"""The shipped router over three libraries: glossary entities and library profiles, the
seed's fallback to every library, and the CLI's --library options using it."""

from __future__ import annotations

import json

import pytest

from ragspine_tools.query_command import main as query_main
from ragspine_core.errors import ConfigError
from ragspine_core.glossary import Glossary
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.library import Library, open_library
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_query.router import LibraryProfile, ProfileRouter, make_router
from tests.conftest import REPO_ROOT
from tests.query.qi_library import shared_split

GLOSSARY = Glossary.load(REPO_ROOT / "data" / "glossary.toml")


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    return shared_split(tmp_path_factory)


@pytest.fixture(scope="module")
def router(libs):
    return ProfileRouter({n: LibraryProfile.of(open_library(p)) for n, p in libs.items()}, GLOSSARY)


def test_profiles_come_from_open_rows(libs):
    cn = LibraryProfile.of(open_library(libs["cn"]))
    assert "ACME_CN" in cn.entities and "ACME_US" not in cn.entities and cn.languages == {"zh"} and cn.dense
    us = LibraryProfile.of(open_library(libs["us_eu"]))
    assert {"ACME_US", "ACME_EU"} <= us.entities and "zh" not in us.languages
    # a manifest's declared profile wins over the columns
    lib = open_library(libs["us_eu"])
    declared = Library(lib.snapshot_dir, {**lib.manifest, "profile": {"entities": ["X"], "languages": "en", "topics": []}})
    assert LibraryProfile.of(declared).entities == {"X"} and LibraryProfile.of(declared).languages == {"en"}
    assert LibraryProfile.of(declared).untagged == {"topics"}  # a declared profile without topics cannot rule a topic out


def holding(router, entity):
    return [n for n, p in router.profiles.items() if entity in p.entities]


def test_routes_by_entity_in_either_language_and_topic(router):
    # cn and group hold .txt files without an entity field: a named entity cannot rule them out
    untagged = sorted(n for n, p in router.profiles.items() if "entities" in p.untagged)
    assert untagged == ["cn", "group"] and "entities" not in router.profiles["us_eu"].untagged
    cn = holding(router, "ACME_CN")
    assert "cn" in cn and "us_eu" not in cn  # (the press releases of `group` name Acme China too)
    assert router("Why did Acme China revenue fall?") == sorted(set(cn) | set(untagged)) == ["cn", "group"]
    assert router("艾克美中国为什么营收下滑？") == ["cn", "group"]
    assert router("Acme US and Acme Europe margins") == ["cn", "group", "us_eu"]  # us_eu holds them; cn is untagged
    libs, why = router.decide("Acme US and Acme Europe margins")
    assert "untagged rows, searched: cn" in why
    # a parent entity reaches the libraries of its subsidiaries
    assert router("Acme Group revenue by unit") == ["cn", "group", "us_eu"]
    libs, why = router.decide("What does the anti-bribery policy say about gifts?")
    assert libs == ["cn", "group", "us_eu"] and "every library" in why
    # a topic alone is a low-confidence route: every library
    libs, why = router.decide("supply chain localisation")
    assert libs == ["cn", "group", "us_eu"] and "low-confidence" in why


def test_a_library_without_the_profile_field_is_never_skipped():
    """The issue's case: a second library whose files carry no topic (nor entity) holds the answer."""
    tagged = LibraryProfile("sample", entities=frozenset({"ACME_ENERGY"}), topics=frozenset({"risk"}))
    bare = LibraryProfile("second", untagged=frozenset({"entities", "topics"}))
    r = ProfileRouter({"sample": tagged, "second": bare}, GLOSSARY)
    assert r("cobalt supply risk") == ["sample", "second"]  # topic only: every library
    assert r("Acme Energy cobalt supply risk") == ["sample", "second"]  # the untagged library is searched
    full = LibraryProfile("us", entities=frozenset({"ACME_US"}), topics=frozenset({"legal"}))
    assert ProfileRouter({"sample": tagged, "us": full}, GLOSSARY)("Acme Energy cobalt supply risk") == ["sample"]


def test_cli_several_libraries_use_the_router_and_fall_back(libs, capsys):
    args = ["query", str(libs["cn"]), "Why did Acme China revenue fall in the third quarter?", "--library", str(libs["us_eu"]),
            "--library", str(libs["group"]), "--top-k", "5"]
    assert query_main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out and "us_eu" not in {s["library_id"] for s in out}  # us_eu is fully tagged and holds no ACME_CN
    assert query_main([*args, "--explain"]) == 0
    text = capsys.readouterr().out
    assert "ProfileRouter" in text and "entities ACME_CN" in text
    # routing off: every library is searched
    assert query_main([*args, "--json", "--router", "all", "--top-k", "30"]) == 0
    assert len({s["library_id"] for s in json.loads(capsys.readouterr().out)}) > 1
    # no entity or topic named: every library (the seed's fallback)
    assert query_main(["query", str(libs["cn"]), "gifts to public officials", "--library", str(libs["us_eu"]), "--library",
                       str(libs["group"]), "--explain", "--top-k", "3"]) == 0
    assert "every library" in capsys.readouterr().out


def test_python_api_router_failure_falls_back_to_every_library(libs):
    paths = [libs["cn"], libs["us_eu"], libs["group"]]

    def broken(query):
        raise RuntimeError("router down")

    r = build_narrative_retriever(paths, reranker=None, router=broken, intelligence=QueryIntelligence(filters="off"))
    res = r.retrieve("Acme China revenue", top_k=40, explain=True)
    assert len({s["library_id"] for s in res}) == 3
    routed = build_narrative_retriever(paths, reranker=None, intelligence=QueryIntelligence(filters="off"))
    assert {s["library_id"] for s in routed.retrieve("Acme China revenue", top_k=40)} <= {"cn", "group"}
    with pytest.raises(ConfigError, match="unknown router"):
        make_router("sideways", {})
