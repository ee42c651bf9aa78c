"""Who may pass ``include_restricted=True`` (issue 37), and long-lived retrievers after a
reclassification.

``include_restricted=True`` is the default of :meth:`HybridRetriever.search` and
:meth:`MultiIndexRetriever.search` (evaluation and admin use). It must never reach a
user-facing edge: the CLI has no such option, ``POST /v1/search`` refuses the field, the
MCP tool does not declare it, the agent API's ``retrieve`` and ``build_narrative_retriever``
do not take it, and no product module outside the query library's own pass-throughs
passes anything but ``False``. A retriever, pipeline or cached pipeline that stays open
across a publish that marks a document RESTRICTED stops serving it — a cached result
included.
"""

from __future__ import annotations

import ast
import inspect

import pytest

from ragspine_query import library as library_module
from ragspine_query.agent_api import NarrativeIndexRetriever, build_narrative_retriever
from ragspine_query.cache import ScopedCache
from ragspine_query.library import open_library
from ragspine_query.retriever import HybridRetriever, MultiIndexRetriever, RetrievalConfig
from tests.conftest import REPO_ROOT
from tests.leak.test_reclassification_history import OPEN_NOTE, Lib, doc

#: Modules of the query library that forward a caller's ``include_restricted`` unchanged.
PASS_THROUGH = {"ragspine_query/retriever.py", "ragspine_query/pipeline/stages.py", "ragspine_query/corrective.py",
                "ragspine_query/tree/tree_channel.py"}
PRODUCT = ("ragspine_core", "ragspine_index", "ragspine_query", "ragspine_assets", "ragspine_tools")


def _include_restricted_arguments() -> list[tuple[str, int, str]]:
    out = []
    for package in PRODUCT:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    for kw in node.keywords:
                        if kw.arg == "include_restricted":
                            out.append((path.relative_to(REPO_ROOT).as_posix(), node.lineno, ast.unparse(kw.value)))
                elif isinstance(node, ast.Dict):
                    for key in node.keys:
                        if isinstance(key, ast.Constant) and key.value == "include_restricted":
                            out.append((path.relative_to(REPO_ROOT).as_posix(), node.lineno, "dict key"))
    return out


def test_no_product_module_passes_include_restricted_but_false_outside_the_pass_throughs():
    found = _include_restricted_arguments()
    assert found, "the audit sees the calls"
    bad = [(p, line, v) for p, line, v in found if v != "False" and p not in PASS_THROUGH]
    assert not bad, f"include_restricted set to something other than False at {bad}"
    # the pass-throughs forward a variable, never a literal True
    assert not [f for f in found if f[2] == "True"]
    # the edges themselves pass it only as False, or not at all
    edges = [f for f in found if f[0].startswith(("ragspine_tools/", "ragspine_query/agent_api.py"))]
    assert all(v == "False" for _, _, v in edges), edges


def test_the_agent_api_takes_no_include_restricted():
    for fn in (NarrativeIndexRetriever.retrieve, build_narrative_retriever):
        params = inspect.signature(fn).parameters
        assert "include_restricted" not in params
        assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()), fn


def test_the_cli_has_no_include_restricted_option(tmp_path, capsys):
    from ragspine_tools.query_command import main

    with pytest.raises(SystemExit) as exc:
        main(["query", str(tmp_path), "merger", "--include-restricted"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --include-restricted" in capsys.readouterr().err


def test_the_http_request_and_the_mcp_tool_refuse_the_field():
    pytest.importorskip("fastapi")
    from pydantic import ValidationError

    from ragspine_tools.serve.app import SearchBody
    from ragspine_tools.serve.service import SearchService

    with pytest.raises(ValidationError, match="include_restricted"):  # POST /v1/search answers 422
        SearchBody.model_validate({"query": "merger", "include_restricted": True})
    # the MCP tool and the HTTP route both call SearchService.search, which has no such parameter
    params = inspect.signature(SearchService.search).parameters
    assert "include_restricted" not in params
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    source = (REPO_ROOT / "ragspine_tools" / "serve" / "mcp_server.py").read_text(encoding="utf-8")
    assert "include_restricted" not in source and "service.search(caller," in source


@pytest.fixture
def reclassified(tmp_path, monkeypatch):
    """A library whose ``supplier`` note is PUBLIC when the callers open it; ``mark()``
    publishes a snapshot that marks it RESTRICTED."""
    monkeypatch.setattr(library_module, "RECHECK_SECONDS", 0.0, raising=False)
    lib = Lib(tmp_path)
    lib.write("supplier.md", doc("PUBLIC"))
    lib.write("garden2.md", OPEN_NOTE.replace("benches", "benches near the Quillfeather supplier sign"))
    lib.build()

    def change(how: str = "marked") -> None:
        if how == "marked":
            lib.write("supplier.md", doc("RESTRICTED"))
        else:
            (lib.raw / "supplier.md").unlink()
        lib.build()

    lib.mark = change
    return lib


QUERY = "Quillfeather supplier"


def _doc_ids(hits) -> set[str]:
    return {h.chunk.doc_id if hasattr(h, "chunk") else h["doc_id"] for h in hits}


def test_a_long_lived_hybrid_and_multi_index_retriever_recheck_after_a_reclassification(reclassified):
    with open_library(reclassified.paths.root) as opened:
        single = HybridRetriever(opened, config=RetrievalConfig(mode="bm25"))
        multi = MultiIndexRetriever({"lib": single})
        for r in (single, multi):
            assert "supplier" in _doc_ids(r.search(QUERY, top_k=10, include_restricted=False))
        reclassified.mark()
        for r in (single, multi):
            assert "supplier" not in _doc_ids(r.search(QUERY, top_k=10, include_restricted=False))
            # the admin default still reads the old snapshot's rows (it is not an edge)
            assert "supplier" in _doc_ids(r.search(QUERY, top_k=10))


@pytest.mark.parametrize("change", ["marked", "deleted"])
def test_a_cached_long_lived_retriever_does_not_serve_a_cached_result_of_a_withdrawn_document(reclassified, change):
    """Before the fix the cache key was the snapshot id alone, so the result cached before the
    publish was served after it, the reclassified document in it."""
    cache = ScopedCache(capacity=64, ttl_s=3600)
    retriever = build_narrative_retriever(reclassified.paths.root, reranker=None, mode="bm25", glossary=None,
                                          embedding_backend=None, cache=cache)
    assert "supplier" in _doc_ids(retriever.retrieve(QUERY, top_k=10))
    assert "supplier" in _doc_ids(retriever.retrieve(QUERY, top_k=10))  # from the cache
    assert cache.hits >= 1
    reclassified.mark(change)
    served = _doc_ids(retriever.retrieve(QUERY, top_k=10))
    assert "supplier" not in served
    if change == "deleted":  # the old snapshot stays servable: the rest still answers
        assert "garden2" in served


def test_a_long_lived_retrievers_confidence_forgets_a_withdrawn_document(reclassified):
    """The confidence's open-row IDF is recomputed when a newer snapshot withholds rows:
    after the publish, a retriever opened before it grades a query as one opened after it
    (before the fix the withdrawn document's rows still weighed in the term weights)."""
    def confidence(retriever, query):
        return retriever.retrieve(query, top_k=5)[0]["confidence"]

    queries = ("Quillfeather supplier benches", "garden benches spring", "supplier review office")
    old = build_narrative_retriever(reclassified.paths.root, reranker=None, mode="bm25", glossary=None,
                                    embedding_backend=None)
    before = [confidence(old, q) for q in queries]
    reclassified.mark("deleted")
    fresh = build_narrative_retriever(reclassified.paths.root, reranker=None, mode="bm25", glossary=None,
                                      embedding_backend=None)
    after = [confidence(fresh, q) for q in queries]
    assert after != before, "the withdrawn document changed the open statistics (the test can tell)"
    assert [confidence(old, q) for q in queries] == after
