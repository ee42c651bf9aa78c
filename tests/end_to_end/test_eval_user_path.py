"""``ragspine eval`` measures what ``ragspine query`` runs: the same builder, the same
defaults (competitor gate, glossary multi-query with the glossary published with the
library, variant fusion, the language plan); ``--mode`` only forces the channels.

A tiny mixed-language BEIR set with a glossary is evaluated in-process, then every query
is asked again through the real ``ragspine query --json`` command on the library eval
built: the document order must be the same, for the default and for a forced mode.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragspine_tools.evaluate import evaluate_dataset, prepare_library
from ragspine_tools.eval.metrics import read_trec_run
from tests.conftest import python_env

DOCS = {
    "eu-q3": ("Acme Europe Q3 2024 results", "Acme Europe revenue declined 8% in the third quarter of 2024 because "
              "the Benelux distributor reduced orders and energy prices hurt industrial demand."),
    "us-q2": ("Acme US Q2 2024 results", "Acme US grew revenue 11% in the second quarter of 2024 on data-centre demand."),
    "group-risk": ("Risk register", "The group's main risks are battery cell supply, currency and a slow European market."),
    "cn-q3": ("艾克美中国第三季度", "艾克美中国2024年第三季度营收同比下降11.4%，主要受光伏逆变器价格下降影响。"),
    "cn-hr": ("员工手册", "艾克美中国员工每年享有十五天带薪年假。"),
    "globex": ("Globex note", "Globex gained market share in Europe in 2024."),
}
QUERIES = {
    "q1": "Why did Acme Europe revenue decline in Q3 2024?",
    "q2": "艾克美中国为什么营收下滑？",
    "q3": "main risks of the group",
    "q4": "How many days of annual leave do Acme China employees get?",
    "q5": "Globex market share",  # names a competitor: the gate refuses it, as `ragspine query` does
}
QRELS = [("q1", "eu-q3", 1), ("q2", "cn-q3", 1), ("q3", "group-risk", 1), ("q4", "cn-hr", 1), ("q5", "globex", 1)]
GLOSSARY = """
[[entities]]
id = "ACME_EU"
names = ["Acme Europe", "Acme EU", "艾克美欧洲"]
competitor = false

[[entities]]
id = "ACME_CN"
names = ["Acme China", "艾克美中国"]
competitor = false

[[entities]]
id = "GLOBEX"
names = ["Globex", "环球公司"]
competitor = true

[[metrics]]
id = "REVENUE"
names = ["revenue", "sales", "营收", "收入"]
"""


def _dataset(root: Path) -> Path:
    root.mkdir(parents=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for doc_id, (title, text) in DOCS.items():
            fh.write(json.dumps({"_id": doc_id, "title": title, "text": text}, ensure_ascii=False) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text in QUERIES.items():
            fh.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in QRELS))
    (root / "glossary.toml").write_text(GLOSSARY, encoding="utf-8")
    return root


def _cli_doc_order(library: Path, query: str, mode: str) -> list[str]:
    ragspine = Path(sys.executable).parent / "ragspine"  # the console script a user runs
    proc = subprocess.run([str(ragspine), "query", str(library), query, "--mode", mode, "--json", "--top-k", "50"],
                          capture_output=True, text=True, timeout=600, env=python_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    if isinstance(out, dict):  # {"results": [...], "refusal": {...}} when the gate refused the query
        out = out["results"]
    order: list[str] = []
    for snippet in out:
        if snippet["doc_id"] not in order:
            order.append(snippet["doc_id"])
    return order


def test_eval_ranks_exactly_as_ragspine_query(tmp_path):
    ds = _dataset(tmp_path / "ds")
    out = tmp_path / "eval"
    results = evaluate_dataset(ds, modes=("auto", "bm25"), embedding="deterministic", out=out, quiet=True)
    library = prepare_library(ds, out, quiet=True, embedding="deterministic").root
    assert (library / "current" / "glossary.toml").is_file() or any((library / "current").glob("glossary*"))
    for result in results:
        run = read_trec_run(result.run_path)
        for qid, text in QUERIES.items():
            evaluated = sorted(run.get(qid, {}), key=lambda d: -run[qid][d])
            shown = _cli_doc_order(library, text, result.mode)
            assert evaluated[: len(shown)] == shown, (result.mode, qid)
    # the competitor query is refused on both paths: nothing evaluated, nothing shown
    assert not read_trec_run(results[0].run_path).get("q5")
    auto = results[0].metrics
    assert auto["mode"] == "auto" and set(auto["fusion"]) == {"mixed:en", "mixed:zh"}


@pytest.mark.parametrize("mode", ["auto"])
def test_glossary_variants_keep_the_query_language(tmp_path, mode):
    """A glossary alias in another script ("艾克美欧洲" for "Acme Europe") must not bring
    Chinese rows into an English query's ranking on its own."""
    from ragspine_query.agent_api import build_narrative_retriever

    ds = _dataset(tmp_path / "ds")
    out = tmp_path / "eval"
    evaluate_dataset(ds, modes=(mode,), embedding="deterministic", out=out, quiet=True)
    library = prepare_library(ds, out, quiet=True, embedding="deterministic").root
    nr = build_narrative_retriever(library, mode=mode, reranker=None, multi_query=True)
    res = nr.index.search(QUERIES["q1"], top_k=10, explain=True)
    transforms = [s for s in res.explain.stages if s.stage == "transform"]
    assert transforms and "艾克美欧洲" in transforms[0].detail  # the alias variant was generated
    searched = [s for s in res.explain.stages if s.stage == "fuse" and s.name == "rrf(channels)"]
    assert len(searched) > 1 and all("mixed:en" in s.detail for s in searched)  # every variant planned in English
    assert res[0].chunk.doc_id == "eu-q3"
    # a short Chinese query whose alias variant reads as English ("Acme China营收"): still planned in Chinese
    zh = nr.index.search("艾克美中国营收", top_k=10, explain=True)
    variants = [s for s in zh.explain.stages if s.stage == "transform"][0].detail
    assert "Acme China营收" in variants
    planned = [s.detail for s in zh.explain.stages if s.stage == "fuse" and s.name == "rrf(channels)"]
    assert len(planned) > 1 and all("mixed:zh" in d for d in planned) and not any("mixed:en" in d for d in planned)
