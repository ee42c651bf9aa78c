"""The leak suite: RESTRICTED text never leaves, wherever text can go (issue 9).

One library is built from the sample (four RESTRICTED documents, each with a marker)
plus RESTRICTED files that are broken on purpose, so their parse errors travel too. It
is ingested by the real ``ragspine ingest`` (Dagster, in a subprocess, with vectors from
the deterministic backend), then:

* the ingest's stdout and stderr, every file of the Dagster instance (event log, run
  storage, step outputs), the published ``manifest.json`` and ``history.jsonl``, and the
  embedding cache are scanned;
* 10,000+ seeded random queries run through every exit: snippets and their JSON, the
  multi-library router, glossary multi-query, a local reranker, a recording listwise
  judge (its prompts), and the real HTTP provider against a local chat server (the raw
  request bodies), with Python logging captured at DEBUG;
* 30 seeded random ingests through the plain pipeline functions (the ones the assets
  call) mutate RESTRICTED files and scan the manifest, the parse errors and the cache.

A *fingerprint* is a marker or a 32-character window of a RESTRICTED document (title or
body) that occurs in no open document. The chunk tables, the parsed-documents work file
and the lexical vocabulary are the library's own data plane: RESTRICTED text is indexed
lexically there on purpose and is not scanned as an exit.

As new artifacts land (summary trees, the relation graph), add them to ``EXIT_FILES``; the
whole data root outside the documented data plane is scanned too (issue 28).
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.source_documents.parse_library import parse_library
from ragspine_index.steps.chunk_embeddings import text_hash
from ragspine_index.pipeline import build_library
from ragspine_query.library import open_library
from ragspine_query.agent_api import NarrativeIndexRetriever, build_narrative_retriever
from ragspine_query.builder import PipelineSpec, build_pipeline
from ragspine_query.rerank.listwise import ListwiseReranker
from ragspine_core.records import RESTRICTED_SENSITIVITY
from ragspine_query.rerank import LexicalMaxSimReranker
from ragspine_query.retriever import HybridRetriever, MultiIndexRetriever, RetrievalConfig
from tests.conftest import PYTHON, REPO_ROOT, RESTRICTED_MARKERS, copy_sample_data, python_env


from tests.query.rerank.llm_server import LocalChatServer

pytestmark = pytest.mark.slow

SEED = 20261130
N_QUERIES = 10_000
N_HTTP_QUERIES = 150
N_RANDOM_INGESTS = 30
WINDOW = 32
EXTRA_MARKER = "RESTRICTED-MARKER-ECHO"

#: RESTRICTED files that fail to parse: their errors reach metadata, checks, the manifest.
BROKEN_RESTRICTED = {
    "broken/ws-key.md": f"---\nsensitivity: RESTRICTED\n{EXTRA_MARKER} secret key: value\n---\nbody {EXTRA_MARKER}\n",
    "broken/no-colon.md": f"---\nsensitivity: RESTRICTED\n{EXTRA_MARKER} merger line without colon\n---\nbody\n",
    "broken/bad-date.md": f"---\nsensitivity: RESTRICTED\nvalid_as_of: {EXTRA_MARKER}\n---\n# {EXTRA_MARKER} title\n\nbody\n",
    "broken/list-text.jsonl": json.dumps({"doc_id": "lt", "sensitivity": "RESTRICTED", "text": [EXTRA_MARKER, "merger"]}) + "\n",
    "broken/bad-sens.md": f"---\nsensitivity: RESTRICTED {EXTRA_MARKER}\n---\nbody {EXTRA_MARKER}\n",
}


def add_restricted_formats(raw: Path) -> dict[str, str]:
    """A RESTRICTED PDF, DOCX and HTML (marked by sidecar, document property and a banner;
    issue 25), when the ``formats`` extra and reportlab are installed: doc_id → marker."""
    try:
        import docx  # noqa: F401
        import pypdf  # noqa: F401
        import reportlab  # noqa: F401
    except ImportError:
        return {}
    from tests.formats.library import write_restricted_formats

    return write_restricted_formats(raw)


def fingerprints(raw: Path, extra_markers: tuple[str, ...] = ()) -> list[str]:
    """Markers, plus 32-character windows of RESTRICTED titles and bodies absent from open documents."""
    parsed = parse_library(raw)
    open_text = "\n".join(d.title + "\n" + d.body for d in parsed.documents if d.sensitivity != RESTRICTED_SENSITIVITY)
    out = set(RESTRICTED_MARKERS.values()) | {EXTRA_MARKER} | set(extra_markers)
    for d in parsed.documents:
        if d.sensitivity != RESTRICTED_SENSITIVITY:
            continue
        for text in (d.title, d.body):
            flat = " ".join(text.split())
            for start in range(0, max(len(flat) - WINDOW, 1), WINDOW // 2):
                piece = flat[start:start + WINDOW]
                if len(piece) == WINDOW and piece not in " ".join(open_text.split()):
                    out.add(piece)
    assert len(out) > 100, "the fingerprint set is meaningful"
    return sorted(out)


class Scanner:
    def __init__(self, prints: list[str]) -> None:
        self.prints = prints
        self.needles = [p.encode("utf-8") for p in prints]
        self.scanned = 0

    def text(self, where: str, text: str) -> None:
        self.scanned += 1
        flat = " ".join(text.split())
        found = [p for p in self.prints if p in text or p in flat]
        assert not found, f"RESTRICTED fingerprint(s) in {where}: {len(found)} (first {found[0][:12]}…)"

    def blob(self, where: str, data: bytes) -> None:
        self.scanned += 1
        found = [n for n in self.needles if n in data]
        assert not found, f"RESTRICTED fingerprint(s) in {where}: {len(found)}"


@pytest.fixture(scope="module")
def leak_library(tmp_path_factory):
    pytest.importorskip("dagster")
    root = tmp_path_factory.mktemp("leak")
    data = copy_sample_data(root / "data")
    raw = data / "raw" / "sample"
    for rel, text in BROKEN_RESTRICTED.items():
        (raw / rel).parent.mkdir(parents=True, exist_ok=True)
        (raw / rel).write_text(text, encoding="utf-8")
    formats = add_restricted_formats(raw)
    home = root / "dagster_home"
    env = python_env(DAGSTER_HOME=str(home), RAGSPINE_EMBEDDING="deterministic")
    proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "ingest", str(raw)], cwd=root,
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]  # published; the broken files are listed
    return {"root": root, "data": data, "raw": raw, "home": home, "stdout": proc.stdout, "stderr": proc.stderr,
            "art": data / "artifacts" / "sample", "prints": fingerprints(raw, tuple(formats.values())),
            "formats": formats}


def test_ingest_exits_hold_no_restricted_text(leak_library):
    lib = leak_library
    scan = Scanner(lib["prints"])
    scan.text("ingest stdout", lib["stdout"])
    scan.text("ingest stderr", lib["stderr"])
    assert "broken/ws-key.md" in lib["stdout"] + lib["stderr"], "the failed files are named"
    for path in sorted(lib["home"].rglob("*")):
        if path.is_file():
            scan.blob(f"Dagster instance file {path.relative_to(lib['home'])}", path.read_bytes())
    art = lib["art"]
    manifest = json.loads((art / "current" / "manifest.json").read_text(encoding="utf-8"))
    assert len(manifest["errors"]) >= len(BROKEN_RESTRICTED)
    scan.text("manifest.json", json.dumps(manifest, ensure_ascii=False))
    scan.text("history.jsonl", (art / "history.jsonl").read_text(encoding="utf-8"))
    # vectors: none for a RESTRICTED row, none of a RESTRICTED text in the shared cache
    with open_library(art) as opened:
        restricted = opened.restricted_mask()
        emb = opened.embeddings()
        assert emb is not None and restricted.any()
        # the RESTRICTED PDF, DOCX and HTML are indexed, as RESTRICTED (so every scan covers them)
        indexed = {r[0]: r[1] for r in opened.execute_read("SELECT doc_id, sensitivity FROM narrative_chunk")}
        assert all(indexed.get(doc_id) == RESTRICTED_SENSITIVITY for doc_id in lib["formats"]), lib["formats"]
        assert not restricted[np.asarray(emb.rows)].any()
        texts = [r[0] for r in opened.execute_read("SELECT index_text FROM narrative_chunk WHERE upper(sensitivity) = 'RESTRICTED'")]
        # the summary tree: no RESTRICTED leaf, no RESTRICTED text in a node, a theme or its citations
        tree = opened.summary_tree()
        assert tree is not None and tree.n_nodes and not restricted[tree.leaves].any()
        for i, node_text in enumerate(tree.texts):
            scan.text(f"summary node {tree.node_ids[i]}", node_text)
        for path in sorted((art / "current" / "summary_tree").iterdir()):
            scan.blob(f"summary tree file {path.name}", path.read_bytes())
        # the relation graph: no RESTRICTED chunk node, no label/alias from RESTRICTED text
        graph = opened.relation_graph()
        assert graph is not None and (np.asarray(graph.chunk_node)[restricted] == -1).all()
        for path in sorted((art / "current" / "relation_graph").iterdir()):
            scan.blob(f"relation graph file {path.name}", path.read_bytes())
            if path.suffix == ".parquet":
                import pyarrow.parquet as pq

                scan.text(f"relation graph table {path.name}", json.dumps(pq.read_table(path).to_pydict(), ensure_ascii=False))
        from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend
        from ragspine_query.tree import TreeRetriever, global_overview

        backend = DeterministicEmbeddingBackend(emb.dim)
        for theme in global_overview(opened, "board decision merger pricing workforce", top_n=10, embedding_backend=backend):
            scan.text(f"theme {theme.node_id}", json.dumps([theme.summary, *theme.citations], ensure_ascii=False))
        for mode in ("collapsed", "traversal"):
            tree_retriever = TreeRetriever(opened, config=mode, embedding_backend=backend)
            for q in [*RESTRICTED_MARKERS.values(), "board minutes merger", "workforce plan layoffs", "pricing action"]:
                scan.text(f"tree {mode} snippets", json.dumps(tree_retriever.snippets(q, top_k=10), ensure_ascii=False))
    conn = sqlite3.connect(lib["data"] / "cache" / "embeddings.sqlite")
    cached = {r[0] for r in conn.execute("SELECT text_hash FROM embedding_cache")}
    conn.close()
    assert cached and not ({text_hash(t) for t in texts} & cached)
    assert scan.scanned > 10


def test_no_file_of_the_data_root_outside_the_data_plane_holds_restricted_text(leak_library):
    """Every file of the data root (caches, work folders, snapshots) is scanned, except the
    data-plane files docs/security.md lists (issue 28 item 7)."""
    import fnmatch
    import os

    from tests.leak.test_data_root_scan import data_plane

    allowed = data_plane()
    scan = Scanner(leak_library["prints"])
    data = leak_library["data"]
    for folder, _dirs, files in os.walk(data, followlinks=False):
        for name in files:
            path = Path(folder) / name
            rel = path.relative_to(data).as_posix()
            if path.is_symlink() or rel.startswith("raw/") or any(fnmatch.fnmatchcase(rel, pat) for pat in allowed):
                continue
            scan.blob(f"data root file {rel}", path.read_bytes())
    assert scan.scanned > 20


def _random_queries(rng: random.Random, lib_dir: Path, prints: list[str]) -> list[str]:
    with open_library(lib_dir) as opened:
        rows = opened.execute_read("SELECT text, sensitivity FROM narrative_chunk")
    secret_words = sorted({w for r in rows if r[1] == RESTRICTED_SENSITIVITY for w in re.findall(r"\w+", r[0])})
    open_words = sorted({w for r in rows if r[1] != RESTRICTED_SENSITIVITY for w in re.findall(r"\w+", r[0])})
    markers = sorted(RESTRICTED_MARKERS.values())
    out = []
    for _ in range(N_QUERIES):
        kind = rng.random()
        if kind < 0.1:
            out.append(rng.choice(markers))
        elif kind < 0.2:
            out.append(rng.choice(prints))
        else:
            n = rng.randint(1, 6)
            pool = secret_words if kind < 0.7 else open_words
            words = [rng.choice(pool) for _ in range(n)] + ([rng.choice(open_words)] if rng.random() < 0.5 else [])
            out.append(" ".join(words))
    return out


FILTERS = [None, {"language": "zh"}, {"language": "en"}, {"sensitivity": "RESTRICTED"}, {"sensitivity": {"ne": "PUBLIC"}},
           {"entity": {"in": ["ACME_CN", "ACME_US", "ACME_EU"]}}, {"period": {"between": ["2024Q1", "2025Q4"]}}]


class RecordingJudge:
    """A listwise judge that keeps every candidate passage it is shown and reverses them.

    The query is the user's own text (it may quote a fingerprint on purpose), so only the
    passages, which come from the index, are scanned.
    """

    def __init__(self) -> None:
        self.seen: list[str] = []

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        self.seen.append("\n".join(candidates))
        return list(reversed(range(len(candidates))))


def test_ten_thousand_random_queries_leak_nothing(leak_library, tmp_path, caplog):
    from ragspine_core.dense.embedding import make_embedding_backend

    caplog.set_level(logging.DEBUG)
    lib, prints = leak_library, leak_library["prints"]
    scan = Scanner(prints)
    rng = random.Random(SEED)
    art = lib["art"]
    # a second library: the same sample, published under another name (multi-library routing)
    other = tmp_path / "other"
    shutil.copytree(art, other, symlinks=True)
    queries = _random_queries(rng, art, prints)
    backend = make_embedding_backend("deterministic")
    judge = RecordingJudge()
    with open_library(art) as a, open_library(other) as b:
        retrievers = {
            mode: HybridRetriever(a, embedding_backend=None if mode == "bm25" else backend, config=RetrievalConfig(mode=mode))
            for mode in ("bm25", "hybrid", "vector", "graph")
        }
        multi = MultiIndexRetriever({"a": retrievers["hybrid"],
                                     "b": HybridRetriever(b, embedding_backend=backend, config=RetrievalConfig(mode="hybrid"))})
        glossary_path = art / "current" / "glossary.json"
        from ragspine_core.glossary import Glossary, GlossaryQueryRewriter

        rewriter = GlossaryQueryRewriter(Glossary.load(glossary_path))
        bare = PipelineSpec(intelligence=None)  # the retrieval stages alone

        def exit_of(source, *, glossary=None, reranker=None):
            return NarrativeIndexRetriever(build_pipeline(source, bare, glossary=glossary, reranker=reranker))

        exits = [
            exit_of(retrievers["bm25"]),
            exit_of(retrievers["hybrid"], glossary=rewriter.glossary),  # glossary multi-query variants
            exit_of(retrievers["vector"]),
            exit_of(multi, reranker=LexicalMaxSimReranker(weighted=True)),
            exit_of(retrievers["hybrid"], reranker=ListwiseReranker(judge)),
            exit_of(retrievers["graph"]),  # seed labels reach the explain trace
        ]
        answered = traced = 0
        restricted_ids = {r[0] for r in a.execute_read(
            "SELECT chunk_id FROM narrative_chunk WHERE upper(sensitivity) = 'RESTRICTED'")}
        for i, q in enumerate(queries):
            explain = i % 20 == 0  # the --explain trace is an exit too
            snippets = exits[i % len(exits)].retrieve(q, filters=rng.choice(FILTERS), top_k=rng.randint(1, 30),
                                                      explain=explain)
            answered += bool(snippets)
            assert all(s["sensitivity"] != RESTRICTED_SENSITIVITY for s in snippets)
            scan.text(f"snippets of query #{i}", json.dumps([s.to_dict() for s in snippets], ensure_ascii=False))
            if explain:
                rows = snippets.explain.to_rows()
                traced += len(rows)
                assert not restricted_ids & {str(r.get("chunk_id")) for r in rows}, f"a RESTRICTED chunk in explain #{i}"
                # the trace repeats the user's own query (it may quote a fingerprint on purpose):
                # everything else in it comes from the index and is scanned
                shown = json.dumps([{k: v for k, v in r.items() if k != "query"} for r in rows], ensure_ascii=False)
                scan.text(f"explain of query #{i}", shown + snippets.explain.format_table().replace(q, ""))
    assert answered > N_QUERIES // 2, "most queries return something: the scan is not vacuous"
    assert traced > 100, "explain traces were scanned"
    assert len(judge.seen) > 100
    for k, prompt in enumerate(judge.seen):
        scan.text(f"judge prompt #{k}", prompt)
    scan.text("Python logs", caplog.text)
    assert scan.scanned >= N_QUERIES


def test_llm_provider_requests_and_cli_output_leak_nothing(leak_library, tmp_path):
    lib, prints = leak_library, leak_library["prints"]
    scan = Scanner(prints)
    rng = random.Random(SEED + 1)
    # the user's query is sent to the judge as typed: keep queries that quote no fingerprint,
    # so anything fingerprinted in a request body came from the index
    queries = [q for q in _random_queries(rng, lib["art"], prints) if not any(p in q for p in prints)][:N_HTTP_QUERIES]
    from ragspine_core.llm import OpenAICompatibleProvider

    with LocalChatServer("ok") as server:
        provider = OpenAICompatibleProvider(base_url=server.base_url, model="local-test")
        retriever = build_narrative_retriever(lib["art"], provider, embedding_backend=None, mode="bm25",
                                              reranker="listwise")  # the judge is opt-in: named
        for i, q in enumerate(queries):
            scan.text(f"http snippets #{i}", json.dumps([s.to_dict() for s in retriever.retrieve(q, top_k=10)], ensure_ascii=False))
        assert len(server.requests) > N_HTTP_QUERIES // 2
        scan.blob("LLM request bodies", server.all_raw_bodies())
        for q in queries[:6]:
            for extra in ([], ["--json"]):
                proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "query", str(lib["art"]), q, "--mode", "bm25",
                                       "--top-k", "20", *extra], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                                      env=python_env(RAGSPINE_LLM_BASE_URL=server.base_url, RAGSPINE_LLM_MODEL="local-test",
                                                     RAGSPINE_RERANKER="listwise"))
                assert proc.returncode == 0, proc.stderr
                scan.text("CLI stdout", proc.stdout)
                scan.text("CLI stderr", proc.stderr)
        scan.blob("LLM request bodies (CLI)", server.all_raw_bodies())


def test_graph_llm_extractor_prompts_and_graph_leak_nothing(leak_library, tmp_path):
    """``graph_extractor = "llm"``: the OpenIE prompts (raw request bodies) and the graph the
    model's triples build hold no RESTRICTED fingerprint; the model echoes names it was sent."""
    from ragspine_core.llm import OpenAICompatibleProvider

    scan = Scanner(leak_library["prints"])
    raw = tmp_path / "raw" / "sample"
    shutil.copytree(leak_library["raw"], raw)
    (raw / "_library.toml").write_text('graph_extractor = "llm"\nsummarizer = "none"\n', encoding="utf-8")

    def echo_triples(req):  # every capitalised word pair of the passage becomes a triple
        names = re.findall(r"[A-Z][\w-]+ [A-Z][\w-]+", req["messages"][-1]["content"])[:6]
        return json.dumps({"triples": [[names[0], "with", n] for n in names[1:]]})

    with LocalChatServer("ok", reply=echo_triples) as server:
        make_llm = lambda: OpenAICompatibleProvider(server.base_url, "local-test", timeout_s=10, max_retries=0)  # noqa: E731
        res = build_library(LibraryPaths("sample", raw, tmp_path / "art" / "sample"), embedding="none",
                            cache_path=tmp_path / "cache" / "e.sqlite", make_llm=make_llm)
        assert server.requests, "the extractor ran"
        scan.blob("OpenIE request bodies", server.all_raw_bodies())
    graph_dir = Path(res.snapshot_dir) / "relation_graph"
    import pyarrow.parquet as pq

    assert "model_relation" in set(pq.read_table(graph_dir / "edges.parquet").column("type").to_pylist())
    for path in sorted(graph_dir.iterdir()):
        scan.blob(f"relation graph file {path.name}", path.read_bytes())
        if path.suffix == ".parquet":
            scan.text(f"relation graph table {path.name}", json.dumps(pq.read_table(path).to_pydict(), ensure_ascii=False))


def test_query_intelligence_prompts_leak_nothing(leak_library):
    """Every new prompt (HyDE, RAG-Fusion, step-back, decomposition, the LLM tier classifier,
    the CRAG grader and rewrite) and the compressed prompt_text, over seeded random queries."""
    from ragspine_query.intelligence import QueryIntelligence
    from ragspine_core.llm import OpenAICompatibleProvider

    lib, prints = leak_library, leak_library["prints"]
    scan = Scanner(prints)
    rng = random.Random(SEED + 3)
    queries = [q for q in _random_queries(rng, lib["art"], prints) if not any(p in q for p in prints)][:25]
    qi = QueryIntelligence(transforms="normalize,decompose,step_back,fusion,hyde", tiers="llm", corrective="llm",
                           postprocessor="mmr,lost_in_middle,compress")
    with LocalChatServer("ok", reply=lambda req: "ambiguous\nboard merger pricing") as server:
        provider = OpenAICompatibleProvider(base_url=server.base_url, model="local-test", max_retries=0)
        retriever = build_narrative_retriever(lib["art"], provider, embedding_backend=None, mode="bm25", reranker=None, intelligence=qi)
        for i, q in enumerate(queries):
            out = retriever.retrieve(q, top_k=10, explain=i % 5 == 0)
            scan.text(f"intelligence snippets #{i}", json.dumps([s.to_dict() for s in out], ensure_ascii=False))
            if out.explain is not None:
                scan.text(f"intelligence explain #{i}", out.explain.format_table(per_stage=50))
        systems = {json.loads(r.raw_body)["messages"][0]["content"][:30] for r in server.requests}
        assert len(systems) >= 6, systems  # every kind of prompt was sent
        scan.blob("query-intelligence LLM request bodies", server.all_raw_bodies())


MUTATIONS = [
    lambda t: t.replace("sensitivity: RESTRICTED", "Sensitivity: RESTRICTED"),
    lambda t: t.replace("---\n", "--- \n", 1),
    lambda t: t.replace("sensitivity: RESTRICTED", "sensitivity: RESTRICTED\nsensitivity: PUBLIC"),
    lambda t: t.replace("sensitivity: RESTRICTED", "sensitivity: restricted"),
    lambda t: t.replace("sensitivity: RESTRICTED", "sensitivity : RESTRICTED"),
    lambda t: t.replace("sensitivity: RESTRICTED", "sensitivity: RESTRICTED # keep"),
    lambda t: t.replace("sensitivity: RESTRICTED", "sensitivity: 'RESTRICTED\""),
    lambda t: t.replace("valid_as_of:", "valid as of:"),
    lambda t: "\n" + t,
    lambda t: "\ufeff" + t,
    lambda t: t.replace("\n", "\r\n"),
    lambda t: t.replace("sensitivity: RESTRICTED", "sensitivity:\tRESTRICTED"),
    lambda t: t.replace("sensitivity: RESTRICTED", "SENSITIVITY: RESTRICTED"),
    lambda t: t.replace("sensitivity: RESTRICTED", "sensitivity: ＲＥＳＴＲＩＣＴＥＤ"),
    lambda t: t,
]


def test_thirty_random_ingests_leak_nothing(leak_library, tmp_path, caplog):
    """Random RESTRICTED mutations, ingested twice each (fresh, then incremental)."""
    caplog.set_level(logging.DEBUG)
    prints = leak_library["prints"]
    scan = Scanner(prints)
    rng = random.Random(SEED + 2)
    sample = REPO_ROOT / "data" / "raw" / "sample"
    secret_files = sorted(p for p in sample.rglob("*.md") if "sensitivity: RESTRICTED" in p.read_text(encoding="utf-8"))
    open_files = sorted(p for p in sample.rglob("*.md") if p not in secret_files)
    assert len(secret_files) == 4
    cache = tmp_path / "cache" / "embeddings.sqlite"
    for n in range(N_RANDOM_INGESTS):
        raw = tmp_path / f"run{n}" / "raw" / f"lib{n}"
        raw.mkdir(parents=True)
        for p in rng.sample(open_files, 4):
            shutil.copy2(p, raw / p.name)
        for p in secret_files:
            text = p.read_text(encoding="utf-8")
            for mutate in rng.sample(MUTATIONS, rng.randint(0, 3)):
                text = mutate(text)
            (raw / p.name).write_text(text, encoding="utf-8", newline="")
        paths = LibraryPaths(f"lib{n}", raw, tmp_path / f"run{n}" / "artifacts" / f"lib{n}")
        for attempt in range(2):
            res = build_library(paths, embedding="deterministic", cache_path=cache, run_id=f"r{n}.{attempt}")
            scan.text(f"ingest {n} errors", "\n".join(res.docs.errors))
            scan.text(f"ingest {n} manifest", (Path(res.snapshot_dir) / "manifest.json").read_text(encoding="utf-8"))
            assert not any(d.sensitivity != RESTRICTED_SENSITIVITY and any(m in d.body for m in RESTRICTED_MARKERS.values())
                           for d in res.docs.documents), f"ingest {n}: a RESTRICTED file was indexed as open"
            with open_library(paths.root) as opened:
                texts = [r[0] for r in opened.execute_read("SELECT index_text FROM narrative_chunk WHERE upper(sensitivity) = 'RESTRICTED'")]
            conn = sqlite3.connect(cache)
            cached = {r[0] for r in conn.execute("SELECT text_hash FROM embedding_cache")}
            conn.close()
            assert not ({text_hash(t) for t in texts} & cached)
            if attempt == 0:  # the incremental run: one secret file's marking is mutated again
                victim = rng.choice(secret_files)
                (raw / victim.name).write_text(rng.choice(MUTATIONS)(victim.read_text(encoding="utf-8")), encoding="utf-8")
    scan.text("Python logs", caplog.text)
