"""Every output channel, randomized, against a library built without the RESTRICTED documents
(issue 37).

Two data roots are built from the same generated files: the bundled sample (its four
RESTRICTED Markdown notes marked in front matter) plus RESTRICTED files marked in every place
issue 37 lists (the converted files of :mod:`tests.formats.marked` — DOCX watermark, headers,
footers, text box, content control, tracked change, ``LabelInfo.xml``; XLSX print headers;
PPTX master and layout; PDF XMP, ``/Stamp``, comment, a non-string ``/Classification``; HTML
``<title>`` — plus a Markdown banner in English and in Chinese, a sidecar of another letter
case and a folder ``[defaults]``), each carrying a unique marker and naming glossary entities
and metrics so the relation graph and summary tree would pick them up if they leaked. The
second data root is built without the RESTRICTED files. Nothing binary is committed.

Seeded random queries (markers, RESTRICTED words, open words, fingerprints) then go through
every channel, in every mode (``auto``, ``hybrid``, ``bm25``, ``vector``, ``graph``) with the
summary-tree channel off, collapsed and traversal:

* the Python API (:func:`~ragspine_query.agent_api.build_narrative_retriever`, the object
  ``POST /v1/search`` and ``ragspine query --json --explain`` print: results, tier,
  confidence, needs_refinement, explain rows);
* the CLI (``ragspine query`` in process, text, ``--json``, ``--explain``; ``--global``
  themes), and a few real ``ragspine query`` subprocesses;
* ``ragspine serve`` on loopback (``POST /v1/search`` with an INTERNAL key, explained, and
  a PUBLIC key), and its log;
* ``ragspine graph`` (rollup, peers, derivation) over every glossary entity and metric;
* the summary tree (node texts, collapsed and traversal snippets, global themes).

Each output is scanned for fingerprints (a marker, or a 32-character window of a RESTRICTED
title or body found in no open document; a fingerprint the query itself quotes is skipped,
since outputs may echo the query) and compared with the same call on the library built
without the RESTRICTED files: every rank, score, confidence, tier, ``needs_refinement``
and every count and score in ``explain`` must be identical (only stage times may differ).

Run the full measurement with ``python -m tests.leak.channels_37 --queries 5000``; the CI
test (tests/leak/test_channels_37.py) runs a seeded subset.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ragspine_core.records import RESTRICTED_SENSITIVITY

MODES = ("auto", "hybrid", "bm25", "vector", "graph")
TREES = ("off", "collapsed", "traversal")
WINDOW = 32
FILTERS: list[dict | None] = [None, None, None, {"language": "en"}, {"language": "zh"},
                              {"sensitivity": "PUBLIC"}, {"sensitivity": "RESTRICTED"},
                              {"entity": {"in": ["ACME_CN", "ACME_US", "ACME_EU"]}},
                              {"period": {"between": ["2024Q1", "2025Q4"]}}]


def marked_body(marker: str, n: int) -> str:
    """The body of a RESTRICTED file: its marker next to glossary entities, metrics and periods."""
    return (f"# {marker} tender for Acme China\n\n"
            f"The {marker} tender lifts Acme China revenue by {n + 7} million euros in 2024Q3; "
            f"Globex and Huaxin bid against {marker} holdings for the Suzhou factory.\n\n"
            f"- Acme Europe headcount grows with the {marker} programme\n"
            f"- Operating profit of Acme US falls while {marker} pricing applies\n")


def restricted_files() -> tuple[dict[str, bytes], list[str]]:
    """Every RESTRICTED file of the run (relative path → bytes) and its markers."""
    from tests.formats import marked

    files: dict[str, bytes] = {}
    markers: list[str] = []
    for n, (name, suffix, make) in enumerate(marked.MARKED):
        marker = f"zq{n:02d}secretmarker"
        markers.append(marker)
        original = marked.BODY
        marked.BODY = marked_body(marker, n)
        try:
            files[f"marked/{name}.{suffix}"] = make()
        finally:
            marked.BODY = original
    text_marked = {
        "banner-en.md": "HIGHLY CONFIDENTIAL - ACME GROUP\n\n{body}",
        "banner-privileged.md": "Privileged & Confidential\n\n{body}",
        "banner-zh.md": "商业秘密\n\n{body}",
        "banner-company.txt": "Company Confidential (Project Kestrel)\n\n{body}",
    }
    for k, (name, template) in enumerate(sorted(text_marked.items()), start=len(markers)):
        marker = f"zq{k:02d}secretmarker"
        markers.append(marker)
        files[f"marked/{name}"] = template.format(body=marked_body(marker, k)).encode()
    k = len(markers)
    marker = f"zq{k:02d}secretmarker"
    markers.append(marker)
    files["marked/sidecar-case.TXT"] = marked_body(marker, k).encode()
    files["marked/sidecar-case.txt.META.toml"] = b'sensitivity = "RESTRICTED"\n'
    files["hr/_library.toml"] = b'[defaults]\nsensitivity = "RESTRICTED"\n'
    for ext in ("md", "txt", "jsonl", "csv"):
        k = len(markers)
        marker = f"zq{k:02d}secretmarker"
        markers.append(marker)
        body = marked_body(marker, k)
        if ext == "jsonl":
            content = json.dumps({"doc_id": f"hr-rows-{k}", "title": f"{marker} rows", "text": body}) + "\n"
        elif ext == "csv":
            content = f"entity,metric,value,note\nAcme China,revenue,{k},{marker} holdings bid\n"
        else:
            content = body
        files[f"hr/folder-default.{ext}"] = content.encode()
    return files, markers


#: Files the ingest withdraws with a located error instead of indexing them RESTRICTED.
WITHDRAWN = {"marked/banner-company.txt", "marked/banner-en.md", "marked/banner-privileged.md", "marked/banner-zh.md",
             "marked/sidecar-case.TXT", "marked/sidecar-case.txt.META.toml"}


@dataclass
class Pair:
    """The two data roots: ``with_secret`` holds the RESTRICTED files, ``without`` does not."""

    with_secret: Path
    without: Path
    raw: Path
    markers: list[str]
    prints: list[str]
    restricted_docs: set[str]
    build_seconds: float


def build_pair(root: Path) -> Pair:
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from tests.conftest import RESTRICTED_MARKERS, copy_sample_data

    secret, markers = restricted_files()
    arts: dict[str, Path] = {}
    errors: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    for name in ("with", "without"):
        data = copy_sample_data(root / name / "data")
        raw = data / "raw" / "sample"
        if name == "with":
            for rel, content in secret.items():
                (raw / rel).parent.mkdir(parents=True, exist_ok=True)
                (raw / rel).write_bytes(content)
        else:  # the sample's RESTRICTED notes go too
            for p in sorted(raw.rglob("*.md")):
                if re.search(r"^sensitivity:\s*RESTRICTED", p.read_text(encoding="utf-8"), re.M):
                    p.unlink()
        paths = LibraryPaths("sample", raw, data / "artifacts" / "sample")
        res = build_library(paths, embedding="deterministic", cache_path=data / "cache" / "embeddings.sqlite",
                            glossary_path=data / "glossary.toml")
        # a banner in a text file and a sidecar of another letter case withdraw their file
        # (an error naming it, fail closed); nothing else may fail
        assert all(e.split(" ", 1)[0] in WITHDRAWN for e in res.docs.errors), res.docs.errors
        errors[name] = list(res.docs.errors)
        arts[name] = paths.root
    from ragspine_query.library import open_library

    with open_library(arts["with"]) as lib:
        rows = lib.execute_read("SELECT DISTINCT doc_id, sensitivity FROM narrative_chunk")
    restricted = {d for d, s in rows if s.upper() == RESTRICTED_SENSITIVITY}
    with open_library(arts["without"]) as lib:
        open_docs = {r[0] for r in lib.execute_read("SELECT DISTINCT doc_id FROM narrative_chunk")}
    assert not restricted & open_docs and {d for d, _ in rows} - restricted == open_docs, \
        "both libraries hold the same open documents; every added file is RESTRICTED"
    assert len(errors["with"]) == len(WITHDRAWN) and not errors["without"], errors
    all_markers = [*markers, *RESTRICTED_MARKERS.values()]
    prints = fingerprints(root / "with" / "data" / "raw" / "sample", all_markers)
    Scanner(prints)("the ingest's errors", "\n".join(errors["with"]))
    return Pair(arts["with"], arts["without"], root / "with" / "data" / "raw" / "sample", all_markers,
                prints, restricted,
                time.perf_counter() - t0)


def fingerprints(raw: Path, markers: list[str]) -> list[str]:
    """Markers, plus 32-character windows of RESTRICTED titles and bodies absent from open documents."""
    from ragspine_index.source_documents.parse_library import parse_library

    parsed = parse_library(raw)
    open_text = " ".join("\n".join(d.title + "\n" + d.body for d in parsed.documents
                                   if d.sensitivity != RESTRICTED_SENSITIVITY).lower().split())
    out = {m.lower() for m in markers}
    for d in parsed.documents:
        if d.sensitivity != RESTRICTED_SENSITIVITY:
            continue
        for text in (d.title, d.body):
            flat = " ".join(text.lower().split())
            for start in range(0, max(len(flat) - WINDOW, 1), WINDOW // 2):
                piece = flat[start:start + WINDOW]
                if len(piece) == WINDOW and piece not in open_text:
                    out.add(piece)
    return sorted(out)


class Leak(AssertionError):
    pass


@dataclass
class Report:
    queries: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    compared_hits: int = 0
    explain_rows: int = 0
    #: explained stages compared, ``stage:name`` → how many (the tree and graph stages among them)
    stages: dict[str, int] = field(default_factory=dict)
    answered: int = 0
    fingerprints: int = 0
    seconds: float = 0.0

    def count(self, channel: str) -> None:
        self.calls[channel] = self.calls.get(channel, 0) + 1


class Scanner:
    def __init__(self, prints: list[str]) -> None:
        self.prints = prints

    def __call__(self, where: str, text: str, query: str = "") -> None:
        low = text.lower()
        flat = " ".join(low.split())
        q = " ".join(query.lower().split())
        found = [p for p in self.prints if (p in low or p in flat) and " ".join(p.split()) not in q]
        if found:
            raise Leak(f"RESTRICTED fingerprint in {where} (query {query!r}): {found[0]!r}")


_MS_TOTAL = re.compile(r"\(\d+(?:\.\d+)? ms in stages\)")
#: a row of Explain.format_table: step, stage, name (may hold spaces), ms (3 decimals), count
_MS_ROW = re.compile(r"^( *\d+ \S+ +.*?) +\d+\.\d{3} +(\d+  )", re.M)


def canonical_text(out: str) -> str:
    """CLI text with the explain table's stage times blanked (the one thing allowed to differ)."""
    return _MS_ROW.sub(r"\1 # \2", _MS_TOTAL.sub("", out))


def canonical(obj: Any) -> Any:
    """A result object with explain rows' ``ms`` dropped."""
    if isinstance(obj, dict):
        return {k: canonical(v) for k, v in obj.items() if k != "ms"}
    if isinstance(obj, list):
        return [canonical(v) for v in obj]
    return obj


def _differ(where: str, query: str, got: Any, want: Any) -> None:
    if got != want:
        import difflib

        def lines(x: Any) -> list[str]:
            return (x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, indent=1, default=str)).splitlines()

        diff = [d for d in difflib.unified_diff(lines(want), lines(got), "without", "with", n=2, lineterm="")]
        raise Leak(f"{where} differs from the library without the RESTRICTED documents (query {query!r}):\n"
                   + "\n".join(d[:300] for d in diff[:40]))


def random_queries(pair: Pair, n: int, seed: int) -> list[str]:
    from ragspine_query.library import open_library

    with open_library(pair.with_secret) as lib:
        rows = lib.execute_read("SELECT text, sensitivity FROM narrative_chunk")
    secret_words = sorted({w for t, s in rows if s.upper() == RESTRICTED_SENSITIVITY for w in re.findall(r"\w{3,}", t)})
    open_words = sorted({w for t, s in rows if s.upper() != RESTRICTED_SENSITIVITY for w in re.findall(r"\w{3,}", t)})
    rng = random.Random(seed)
    fixed = ["Acme China revenue 2024Q3", "tender holdings Suzhou factory", "confidential", "restricted",
             "Globex Huaxin bid", "Acme Europe headcount programme", "商业秘密", "Operating profit Acme US pricing"]
    out = fixed[:n]
    while len(out) < n:
        kind = rng.random()
        if kind < 0.12:
            out.append(rng.choice(pair.markers))
        elif kind < 0.2:
            out.append(rng.choice(pair.prints))
        else:
            pool = secret_words if kind < 0.6 else open_words
            words = [rng.choice(pool) for _ in range(rng.randint(1, 5))]
            if rng.random() < 0.4:
                words.append(rng.choice(pair.markers))
            out.append(" ".join(words))
    return out


class Channels:
    """Callers of every channel on one library, opened once (as a long-lived process would)."""

    def __init__(self, art: Path) -> None:
        from ragspine_core.settings import Settings

        self.art = art
        self.settings = Settings.from_env()
        self._retrievers: dict[tuple[str, str], Any] = {}

    def retriever(self, mode: str, tree: str):
        key = (mode, tree)
        if key not in self._retrievers:
            from ragspine_query.agent_api import build_narrative_retriever

            settings = dataclasses.replace(self.settings, tree=tree)
            self._retrievers[key] = build_narrative_retriever(self.art, reranker=None, mode=mode, settings=settings)
        return self._retrievers[key]

    def api(self, query: str, mode: str, tree: str, filters, top_k: int, explain: bool) -> dict:
        from ragspine_tools.query_command import result_object

        out = self.retriever(mode, tree).retrieve(query, filters=filters, top_k=top_k, explain=explain)
        return json.loads(json.dumps(result_object(out, explain), ensure_ascii=False))  # as printed

    def cli(self, argv: list[str]) -> tuple[int, str, str]:
        from ragspine_tools.query_command import main

        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(argv)
        except SystemExit as exc:  # argparse refused the command line
            raise Leak(f"ragspine {' '.join(argv)}: {err.getvalue()[-500:]}") from exc
        return rc, out.getvalue(), err.getvalue()


def _filter_args(filters: dict | None) -> list[str]:
    args: list[str] = []
    for fld, spec in (filters or {}).items():
        if isinstance(spec, str):
            args += ["--filter", f"{fld}={spec}"]
        else:
            for op, value in spec.items():
                args += ["--filter", f"{fld}={op}:{','.join(value) if isinstance(value, list) else value}"]
    return args


def check_tree(pair: Pair, scan: Scanner, report: Report) -> None:
    """The summary tree: no RESTRICTED leaf, no fingerprint in a node; the same nodes with or without."""
    from ragspine_query.library import open_library

    trees = []
    for art in (pair.with_secret, pair.without):
        with open_library(art) as lib:
            tree = lib.summary_tree()
            assert tree is not None and tree.n_nodes, "the summary tree was built"
            restricted = lib.restricted_mask()
            assert not restricted[tree.leaves].any()
            for i, text in enumerate(tree.texts):
                scan(f"summary node {tree.node_ids[i]}", text)
                report.count("tree_node")
            trees.append(sorted(tree.texts))
    _differ("the summary tree's node texts", "", trees[0], trees[1])


def check_graph_cli(pair: Pair, scan: Scanner, report: Report, a: Channels, b: Channels, limit: int | None) -> None:
    """``ragspine graph`` rollup/peers/derivation over glossary entities and metrics, text and --json."""
    from ragspine_core.glossary import Glossary

    glossary = Glossary.load(pair.with_secret / "current" / "glossary.json")
    entities = sorted(c.id for c in glossary.concepts if c.kind == "entity")
    metrics = sorted(c.id for c in glossary.concepts if c.kind == "metric")
    calls: list[list[str]] = []
    for e in entities:
        for m in ["", *metrics]:
            calls.append(["rollup", "{art}", e, "--metric", m] if m else ["rollup", "{art}", e])
            calls.append(["peers", "{art}", e, "--metric", m, "--period", "2024"] if m else ["peers", "{art}", e])
    for m in metrics:
        for e in ["", *entities]:
            calls.append(["derived", "{art}", m, "--entity", e] if e else ["derived", "{art}", m])
    random.Random(7).shuffle(calls)
    for call in calls[:limit]:
        for fmt in ([], ["--json"]):
            outs = []
            for ch in (a, b):
                argv = ["graph", *[str(ch.art) if x == "{art}" else x for x in call], *fmt]
                rc, out, err = ch.cli(argv)
                scan(f"ragspine {' '.join(argv[:3])}", out + err)
                outs.append((rc, out.replace(str(ch.art), "{art}"), err.replace(str(ch.art), "{art}")))
            report.count("graph_cli_json" if fmt else "graph_cli_text")
            _differ(f"ragspine graph {' '.join(call)} {' '.join(fmt)}", "", outs[0], outs[1])


def run(pair: Pair, n_queries: int, *, seed: int = 37, cli_every: int = 8, global_every: int = 25,
        subprocess_queries: int = 4, graph_calls: int | None = 40, serve_every: int = 0,
        progress: Callable[[str], None] = lambda s: None) -> Report:
    """The randomized run; raises :class:`Leak` on the first fingerprint or difference.

    ``serve_every`` > 0 also sends every that-many-th query to ``ragspine serve`` (one real
    service per library on loopback) as ``POST /v1/search``, with an INTERNAL key (with
    ``explain``) and a PUBLIC one, and scans the services' logs."""
    with contextlib.ExitStack() as stack:
        services = stack.enter_context(_services(pair)) if serve_every else None
        return _run(pair, n_queries, seed, cli_every, global_every, subprocess_queries, graph_calls, serve_every,
                    services, progress)


@contextlib.contextmanager
def _services(pair: Pair):
    """``ragspine serve`` over each library, on loopback: ((base_with, base_without), keys, logs)."""
    import os
    import tempfile

    from ragspine_tools.serve.access import hash_key, new_key
    from ragspine_tools.serve.launch import running
    from tests.conftest import REPO_ROOT, python_env

    keys = {"INTERNAL": new_key(), "PUBLIC": new_key()}
    spec = [{"name": f"k-{level.lower()}", "sha256": hash_key(key), "libraries": ["*"], "max_sensitivity": level}
            for level, key in keys.items()]
    env = python_env(PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                     RAGSPINE_API_KEYS=json.dumps(spec))
    with tempfile.TemporaryDirectory(prefix="serve37-") as logs, contextlib.ExitStack() as stack:
        log_paths = [Path(logs) / "with.log", Path(logs) / "without.log"]
        bases = tuple(stack.enter_context(running("serve", [str(art), "--max-top-k", "20"], env=env, log_path=str(log)))
                      for art, log in zip((pair.with_secret, pair.without), log_paths))
        yield bases, keys, log_paths


def _run(pair: Pair, n_queries: int, seed: int, cli_every: int, global_every: int, subprocess_queries: int,
         graph_calls: int | None, serve_every: int, services, progress: Callable[[str], None]) -> Report:
    t0 = time.perf_counter()
    report = Report(fingerprints=len(pair.prints))
    scan = Scanner(pair.prints)
    a, b = Channels(pair.with_secret), Channels(pair.without)
    check_tree(pair, scan, report)
    check_graph_cli(pair, scan, report, a, b, graph_calls)
    rng = random.Random(seed)
    queries = random_queries(pair, n_queries, seed)
    for i, q in enumerate(queries):
        mode, tree = MODES[i % len(MODES)], TREES[(i // len(MODES)) % len(TREES)]
        filters = rng.choice(FILTERS)
        top_k = rng.randint(1, 15)
        explain = i % 3 == 0
        got = a.api(q, mode, tree, filters, top_k, explain)
        want = b.api(q, mode, tree, filters, top_k, explain)
        report.count(f"api:{mode}:tree={tree}")
        shown = json.dumps(got, ensure_ascii=False)
        scan(f"Python API ({mode}, tree {tree})", shown, q)
        if any(r["sensitivity"].upper() == RESTRICTED_SENSITIVITY or r["doc_id"] in pair.restricted_docs
               for r in got["results"]):
            raise Leak(f"a RESTRICTED result served (query {q!r})")
        rows = got.get("explain") or []
        if {str(r.get("chunk_id")) for r in rows} & restricted_chunk_ids(pair):
            raise Leak(f"a RESTRICTED chunk id in explain (query {q!r})")
        report.explain_rows += len(rows)
        for stage in {(r["step"], r["stage"], r["name"]) for r in rows}:
            report.stages[f"{stage[1]}:{stage[2]}"] = report.stages.get(f"{stage[1]}:{stage[2]}", 0) + 1
        _differ(f"the result object ({mode}, tree {tree}, filters {filters}, top_k {top_k}, explain {explain})",
                q, canonical(got), canonical(want))
        report.compared_hits += len(want["results"])
        report.answered += bool(want["results"])
        if i % cli_every == 0:
            fmt = [[], ["--json"], ["--explain"], ["--json", "--explain"]][(i // cli_every) % 4]
            outs = []
            for ch in (a, b):
                argv = ["query", str(ch.art), q, "--mode", mode, "--tree", tree, "--top-k", str(top_k),
                        *_filter_args(filters), *fmt]
                rc, out, err = ch.cli(argv)
                if rc != 0:
                    raise Leak(f"ragspine query failed ({rc}): {err[-500:]}")
                scan(f"ragspine query {' '.join(fmt)} ({mode}, tree {tree})", out + err, q)
                outs.append(canonical(json.loads(out)) if "--json" in fmt else canonical_text(out))
            report.count(f"cli:{'+'.join(fmt) or 'text'}")
            _differ(f"ragspine query {' '.join(fmt)} ({mode}, tree {tree})", q, outs[0], outs[1])
        if i % global_every == 0:
            outs = []
            for ch in (a, b):
                rc, out, err = ch.cli(["query", str(ch.art), q, "--global", "--json", "--top-k", str(top_k)])
                if rc != 0:
                    raise Leak(f"ragspine query --global failed ({rc}): {err[-500:]}")
                scan("ragspine query --global", out + err, q)
                outs.append(json.loads(out))
            report.count("cli:--global")
            _differ("ragspine query --global themes", q, outs[0], outs[1])
        if services is not None and i % serve_every == 0:
            _http(services, q, mode, filters, top_k, scan, report)
        report.queries += 1
        if (i + 1) % 250 == 0:
            progress(f"{i + 1}/{n_queries} queries, {time.perf_counter() - t0:.0f} s")
    for q in queries[:subprocess_queries]:
        run_subprocess(pair, q, scan, report)
    if services is not None:
        for log in services[2]:
            scan(f"ragspine serve log {log.name}", log.read_text(encoding="utf-8", errors="replace"))
    report.seconds = time.perf_counter() - t0
    return report


def _http(services, q: str, mode: str, filters, top_k: int, scan: Scanner, report: Report) -> None:
    """``POST /v1/search`` to both services, with each key; the answers must be equal."""
    import httpx

    bases, keys, _ = services
    for level, key in sorted(keys.items()):
        body = {"query": q, "mode": mode, "top_k": top_k, "filters": filters, "explain": level == "INTERNAL"}
        outs = []
        for base in bases:
            r = httpx.post(base + "/v1/search", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120)
            scan(f"POST /v1/search ({level} key)", r.text, q)
            out = r.json()
            if isinstance(out, dict):
                out.pop("snapshots", None)  # the two libraries' snapshot ids differ by construction
            outs.append((r.status_code, canonical(out)))
        report.count(f"http:{level}")
        _differ(f"POST /v1/search ({level} key, {mode})", q, outs[0], outs[1])


_RESTRICTED_IDS: dict[Path, set[str]] = {}


def restricted_chunk_ids(pair: Pair) -> set[str]:
    if pair.with_secret not in _RESTRICTED_IDS:
        from ragspine_query.library import open_library

        with open_library(pair.with_secret) as lib:
            _RESTRICTED_IDS[pair.with_secret] = {r[0] for r in lib.execute_read(
                "SELECT chunk_id FROM narrative_chunk WHERE upper(sensitivity) = 'RESTRICTED'")}
    return _RESTRICTED_IDS[pair.with_secret]


def run_subprocess(pair: Pair, q: str, scan: Scanner, report: Report) -> None:
    """The real ``ragspine query`` entry point, text and ``--json --explain``, both libraries."""
    from tests.conftest import PYTHON, python_env

    for fmt in ([], ["--json", "--explain"]):
        outs = []
        for art in (pair.with_secret, pair.without):
            proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "query", str(art), q, "--top-k", "10", *fmt],
                                  capture_output=True, text=True, timeout=180, env=python_env())
            if proc.returncode != 0:
                raise Leak(f"ragspine query subprocess failed: {proc.stderr[-500:]}")
            scan("ragspine query (subprocess)", proc.stdout + proc.stderr, q)
            outs.append(canonical(json.loads(proc.stdout)) if fmt else canonical_text(proc.stdout))
        report.count(f"subprocess:{'+'.join(fmt) or 'text'}")
        _differ(f"ragspine query (subprocess) {' '.join(fmt)}", q, outs[0], outs[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--graph-calls", type=int, default=0, help="ragspine graph calls (default 0: every combination)")
    parser.add_argument("--serve-every", type=int, default=10,
                        help="send every N-th query to ragspine serve too (two keys); 0: no service")
    parser.add_argument("--workdir", type=Path, default=None, help="where to build (default: a temporary folder)")
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="channels37-") as tmp:
        root = args.workdir or Path(tmp)
        if args.workdir and root.exists():
            shutil.rmtree(root)
        pair = build_pair(root)
        print(f"built both libraries in {pair.build_seconds:.1f} s: {len(pair.restricted_docs)} RESTRICTED documents, "
              f"{len(pair.prints)} fingerprints", flush=True)
        report = run(pair, args.queries, seed=args.seed, graph_calls=args.graph_calls or None, serve_every=args.serve_every,
                     progress=lambda s: print(s, flush=True))
    print(json.dumps(dataclasses.asdict(report), indent=2, sort_keys=True))
    print(f"0 fingerprints and 0 differences over {report.queries} queries "
          f"({sum(report.calls.values())} channel calls, {report.compared_hits} hits compared) in {report.seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
