"""``ragspine query`` (search a published library) and ``ragspine graph`` (typed, cited questions
over its relation graph) from the shell — no Dagster needed."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import TYPE_CHECKING, Sequence

from ragspine_core.errors import RagspineError
from ragspine_core.settings import Settings
from ragspine_query.filters import parse_filter_arg

if TYPE_CHECKING:
    from ragspine_query.builder import PipelineSpec


def _top_k_arg(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {value!r}")
    return number


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\n``, ``\\x1b``), so one field stays on one line."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(text))


def add_query_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from ragspine_query.postprocess import postprocessor_names
    from ragspine_query.transforms import transform_names

    # the registries' names (built-ins, then plug-ins imported so far; --plugin ones are accepted too)
    post_names = ",".join(f"{n}[:LAMBDA]" if n == "mmr" else n for n in postprocessor_names())
    p = sub.add_parser("query", help="search one or more published libraries", description=(
        "Search published libraries. LIBRARY_DIR is data/artifacts/<library> (or data/raw/<library>, "
        "or a snapshot directory). Repeat --library to search several libraries fused by RRF."))
    p.add_argument("library_dir", help="published library directory")
    p.add_argument("text", help="the query")
    p.add_argument("--library", action="append", default=[], help="another library to search (multi-index RRF)")
    p.add_argument("--top-k", type=_top_k_arg, default=5, help="results to return (a whole number >= 0; default 5)")
    p.add_argument("--filter", action="append", default=[], metavar="FIELD=OP:VALUE",
                   help="metadata predicate, e.g. entity=eq:ACME_CN, period=between:2024Q1,2024Q4 (repeatable; AND)")
    p.add_argument("--mode", default=None, help="auto|hybrid|vector|bm25|lexical|economy|graph (graph: BM25 + dense + relation-graph PPR) (default RAGSPINE_RETRIEVAL_MODE or auto)")
    p.add_argument("--reranker", default=None, help="none|maxsim|colbert|cross_encoder|splade|listwise|auto (default RAGSPINE_RERANKER or none)")
    p.add_argument("--json", action="store_true", help="print a JSON list of snippet dicts")
    p.add_argument("--explain", action="store_true",
                   help="also show, per pipeline stage, the candidates, their ranks and scores, and the time spent "
                        "(with --json: an object {results, explain})")
    p.add_argument("--transform", default=None, metavar="LIST",
                   help=f"query transforms {','.join(transform_names())} or a --plugin's (default RAGSPINE_TRANSFORMS or none)")
    p.add_argument("--postprocessor", default=None, metavar="LIST",
                   help=f"post-processors {post_names} or a --plugin's (default RAGSPINE_POSTPROCESSOR or none)")
    p.add_argument("--tiers", default=None,
                   help="adaptive tiers off|rules|llm, or force one: direct|semantic|multi_hop|global|multi_part "
                        "(default RAGSPINE_TIERS or off)")
    p.add_argument("--corrective", default=None,
                   help="corrective retrieval off|relevance|dynamic|static|llm (on = relevance; default RAGSPINE_CORRECTIVE or off)")
    p.add_argument("--filters", default=None, dest="filter_extraction",
                   help="automatic filter extraction off|rules|llm, applied as a preference (default RAGSPINE_FILTER_EXTRACTION or off)")
    p.add_argument("--router", default=None,
                   help="several libraries: profile (route by glossary entities and library profiles) | all (default RAGSPINE_ROUTER or profile)")
    p.add_argument("--relax-filters", action="store_true",
                   help="let an empty (or, with --corrective, low-confidence) result be retried without your --filter "
                        "predicates (default: they are a constraint); the output lists any filter dropped")
    p.add_argument("--no-gate", action="store_true", help="do not refuse queries naming a glossary competitor (default RAGSPINE_GATE or on)")
    p.add_argument("--tree", default=None, choices=("collapsed", "traversal", "off"),
                   help="summary-tree channel fused with the others (default RAGSPINE_TREE or off); --explain shows its node hits")
    p.add_argument("--global", dest="global_themes", action="store_true",
                   help="answer with the library's themes instead of ranked chunks: the relation graph's community "
                        "summaries and the summary tree's top themes, ranked by the query, each with the chunks it cites")
    p.add_argument("--decay-half-life", type=float, default=None, metavar="DAYS",
                   help="time-decayed RRF on valid_as_of, half-life in days (default RAGSPINE_DECAY_HALF_LIFE_DAYS or 0 = off)")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (it may register channels, transforms, post-processors); repeatable")
    return p


def add_graph_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``ragspine graph rollup|peers|derived``: typed questions over the relation graph, answered with cited facts."""
    p = sub.add_parser("graph", help="typed questions over the relation graph: roll-up, peers, derivation (cited)",
                       description=("Walk the glossary relations of a published library (subsidiary_of, peer_of, derived_from) "
                                    "and cite the open chunks that state every fact. RESTRICTED chunks are never read."))
    gsub = p.add_subparsers(dest="question", required=True)
    for name, subject, help_text in (
            ("rollup", "parent", "every subsidiary of PARENT (transitively) and, with --metric, each one's cited facts"),
            ("peers", "entity", "the peers of ENTITY and, with --metric, the cited facts of each"),
            ("derived", "metric", "what METRIC is derived from (transitively) and, with --entity, the cited facts of each metric")):
        q = gsub.add_parser(name, help=help_text, description=help_text)
        q.add_argument("library_dir", help="published library directory (data/artifacts/<library> or a snapshot)")
        q.add_argument(subject, help=f"glossary {'metric' if subject == 'metric' else 'entity'} id or name")
        if name == "derived":
            q.add_argument("--entity", default="", help="the entity whose facts to cite (glossary id or name)")
        else:
            q.add_argument("--metric", default="", help="the metric to cite facts for (glossary id or name), e.g. revenue")
        q.add_argument("--period", default="", help="a period prefix, e.g. 2024 or 2024Q3")
        q.add_argument("--facts", type=_top_k_arg, default=3, help="facts per entity or metric (default 3)")
        q.add_argument("--no-gate", action="store_true",
                       help="also give the facts of competitor entities (default: the security gate withholds them)")
        q.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    return p


def run_graph(args: argparse.Namespace) -> int:
    from ragspine_query.graph.questions import derivation, peers, rollup
    from ragspine_query.library import open_library

    gate = not args.no_gate
    with open_library(args.library_dir) as lib:
        lib.ensure_verified()  # the large files' background check (library.py)
        if args.question == "rollup":
            answer = rollup(lib, args.parent, args.metric, args.period, gate=gate, facts_per_subject=args.facts)
        elif args.question == "peers":
            answer = peers(lib, args.entity, args.metric, args.period, gate=gate, facts_per_subject=args.facts)
        else:
            answer = derivation(lib, args.metric, args.entity, args.period, gate=gate, facts_per_subject=args.facts)
    if args.json:
        print(json.dumps(answer.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(printable_block(answer.format_text()))
    return 0


def load_plugins(modules: Sequence[str]) -> None:
    """Import each plugin module (by dotted name); a failure is a clear error."""
    import importlib

    from ragspine_core.errors import ConfigError

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # an import error of any kind: say which plugin
            raise ConfigError(f"cannot load plugin {name!r}: {type(exc).__name__}: {exc}") from exc


def run_global(args: argparse.Namespace, settings: Settings) -> int:
    """``ragspine query --global``: themes (community summaries, then summary-tree themes) with their citations.

    ``settings`` (read by the command's edge, :func:`run_query`) complete the library's
    embedding backend for the summary-tree themes."""
    from ragspine_query.graph.communities import community_themes
    from ragspine_query.library import open_library
    from ragspine_query.tree.tree_channel import global_overview

    top = args.top_k or 5
    from ragspine_query.backends import backend_for_library

    with open_library(args.library_dir) as lib:
        lib.ensure_verified()  # the large files' background check (library.py)
        communities = community_themes(lib, args.text, top_n=top)
        tree = []
        if lib.summary_tree() is not None:
            backend = backend_for_library(lib, "hybrid", settings=settings) if lib.embedding_model_id else None
            tree = global_overview(lib, args.text, top_n=top, embedding_backend=backend)
    if args.json:
        out = {"communities": [{"community_id": t.community_id, "title": t.title, "summary": t.summary,
                                "entities": t.n_entities, "member_chunks": t.n_chunks, "score": t.score,
                                "citations": list(t.citations)} for t in communities],
               "tree_themes": [{"node_id": t.node_id, "level": t.level, "summary": t.summary, "leaves": t.n_leaves,
                                "score": t.score, "citations": list(t.citations)} for t in tree]}
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    print(f"themes: {printable(args.text)}")
    if not communities and not tree:
        print("  (no theme matches: the snapshot has no community or summary-tree theme for these words)")
    for i, t in enumerate(communities, 1):
        print(f"[community {i}] {printable(t.title)}  ({t.n_entities} entities, {t.n_chunks} member chunks, score {t.score:.3f})")
        print(textwrap.indent(textwrap.fill(printable(t.summary), 100), "    "))
        for c in t.citations:
            print(f"    cites {printable(c['chunk_id'][:12])} {printable(c['title'])} ({printable(c['locator'])})")
    for i, node in enumerate(tree, 1):
        body = " ".join(node.summary.split())
        print(f"[tree theme {i}] node {printable(node.node_id)} level {node.level} ({node.n_leaves} chunks, score {node.score:.3f})")
        print(textwrap.indent(textwrap.fill(printable(body[:400]) + ("…" if len(body) > 400 else ""), 100), "    "))
        for c in node.citations:
            print(f"    cites {printable(c['chunk_id'][:12])} {printable(c['title'])} ({printable(c['locator'])})")
    return 0


def query_spec(args: argparse.Namespace, settings: Settings) -> "PipelineSpec":
    """The pipeline ``ragspine query`` runs: ``settings`` (``RAGSPINE_*``) with the command's
    options on top (``--mode``, ``--reranker``, ``--transform``, ``--postprocessor``,
    ``--tiers``, ``--corrective``, ``--filters``, ``--router``, ``--relax-filters``,
    ``--no-gate``, ``--tree``, ``--decay-half-life``)."""
    from ragspine_query.builder import PipelineSpec

    changes = {k: v for k, v in (("mode", args.mode),
                                 ("reranker", getattr(args, "reranker", None)),
                                 ("transforms", getattr(args, "transform", None)),
                                 ("postprocessor", getattr(args, "postprocessor", None)),
                                 ("tiers", getattr(args, "tiers", None)),
                                 ("corrective", getattr(args, "corrective", None)),
                                 ("filters", getattr(args, "filter_extraction", None)),
                                 ("router", getattr(args, "router", None)),
                                 ("tree", getattr(args, "tree", None)),
                                 ("decay_half_life_days", getattr(args, "decay_half_life", None))) if v is not None}
    if getattr(args, "no_gate", False):
        changes["gate"] = False
    changes["relax_filters"] = bool(getattr(args, "relax_filters", False))
    return PipelineSpec.from_settings(settings).replace(**changes)


def run_query(args: argparse.Namespace) -> int:
    from ragspine_query.limits import check_query
    from ragspine_query.agent_api import build_narrative_retriever

    check_query(args.text)  # before any index is opened
    load_plugins(getattr(args, "plugin", []) or [])
    settings = Settings.from_env()  # the one read of the environment for this command
    if getattr(args, "global_themes", False):
        return run_global(args, settings)
    explain = bool(getattr(args, "explain", False))
    preds = [parse_filter_arg(f) for f in args.filter]
    filters: dict = {}
    for pr in preds:
        filters.setdefault(pr.field, {})[pr.op] = list(pr.value) if isinstance(pr.value, tuple) else pr.value
    provider = None
    if settings.llm_base_url:  # an OpenAI-compatible server for the listwise judge
        from ragspine_core.llm import OpenAICompatibleProvider

        provider = OpenAICompatibleProvider.from_settings(settings)
    retriever = build_narrative_retriever([args.library_dir, *args.library], provider, settings=settings,
                                          spec=query_spec(args, settings))
    snippets = retriever.retrieve(args.text, filters=filters or None, top_k=args.top_k, explain=explain)
    refusal = getattr(snippets, "refusal", None)
    from ragspine_query.agent_api import result_assessment

    assessment = result_assessment(snippets)
    applied = getattr(snippets, "filters", None)
    dropped = list(getattr(snippets, "dropped_filters", ()) or ())
    if args.json:
        if explain or refusal is not None or dropped:  # an object whenever a filter was dropped
            print(json.dumps(result_object(snippets, explain), ensure_ascii=False, indent=2))
        else:
            print(json.dumps([s.to_dict() for s in snippets], ensure_ascii=False, indent=2))
        return 0
    print(f"query: {printable(args.text)}")
    conf = assessment["confidence"]
    shown_conf = "{} ({:.2f})".format(conf["grade"], conf["score"]) if conf else "-"
    refine = assessment["needs_refinement"]
    print(f"  tier={assessment['tier'] or '-'} confidence={shown_conf} "
          f"needs_refinement={'-' if refine is None else 'yes' if refine else 'no'}")
    if applied is not None and applied.predicates:
        print(f"  filters ({applied.outcome}): {printable('; '.join(p.describe() for p in applied.predicates))}")
    for d in dropped:
        value = ",".join(d["value"]) if isinstance(d["value"], list) else d["value"]
        print(f"  filter dropped ({'your --filter' if d['origin'] == 'caller' else 'extracted'}): "
              f"{printable(d['field'])}={d['op']}:{printable(value)} — {printable(d['why'])}")
    if refusal is not None:
        print(f"  refused ({refusal.kind}): {printable(refusal.reason)}")
    elif not snippets:
        print("  (no results)")
    for i, s in enumerate(snippets, 1):
        sc = s.scores
        print(f"[{i}] {printable(s.title)} — {printable(s.library_id)}:{printable(s.doc_id)}  ({printable(s.locator)})")
        print(f"    entity={printable(s.entity) or '-'} period={printable(s.period) or '-'} sensitivity={s.sensitivity} "
              f"fused={sc['fused']:.4f} bm25={sc['bm25']:.3f} vector={sc['vector']:.3f}")
        if s.via:  # found through a summary-tree node; the citation is still this chunk's span
            print(f"    via summary node {printable(s.via)}")
        body = " ".join(s.text.split())
        print(textwrap.indent(textwrap.fill(body[:300] + ("…" if len(body) > 300 else ""), 100), "    "))
    if explain and snippets.explain is not None:
        print()
        print(printable_block(snippets.explain.format_table()))
    return 0


def result_object(snippets, explain: bool) -> dict:
    """The JSON object ``ragspine query --json --explain`` prints, and ``POST /v1/search``
    returns: ``results`` (the snippet dicts), ``tier``, ``confidence``, ``needs_refinement``,
    and ``filters`` / ``dropped_filters`` / ``refusal`` / ``explain`` when the result has them."""
    from ragspine_query.agent_api import result_assessment

    out: dict = {"results": [s.to_dict() for s in snippets], **result_assessment(snippets)}
    applied = getattr(snippets, "filters", None)
    refusal = getattr(snippets, "refusal", None)
    dropped = list(getattr(snippets, "dropped_filters", ()) or ())
    if applied is not None:
        out["filters"] = applied.to_dict()
    if dropped:
        out["dropped_filters"] = dropped
    if refusal is not None:
        out["refusal"] = refusal.to_dict()
    if explain:
        assert snippets.explain is not None  # retrieve(explain=True) always sets it
        out["explain"] = snippets.explain.to_rows()
    return out


def printable_block(text: str) -> str:
    return "\n".join(printable(line) for line in text.splitlines())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the query-only CLI (``python -m ragspine_tools.query_command query …``)."""
    parser = argparse.ArgumentParser(prog="ragspine")
    sub = parser.add_subparsers(dest="command", required=True)
    add_query_parser(sub)
    add_graph_parser(sub)
    args = parser.parse_args(argv)
    try:
        return run_graph(args) if args.command == "graph" else run_query(args)
    except RagspineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # never a traceback: one located line
        from ragspine_core.failure import describe_unexpected

        print(f"error: {describe_unexpected(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
