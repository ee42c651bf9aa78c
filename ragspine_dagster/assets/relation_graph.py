import dataclasses

import dagster as dg

from ragspine_index.steps.chunks import ChunkUpdate
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.pipeline import STEP_BY_NAME
from ragspine_index.steps.relation_graph import RelationGraphRef
from ragspine_index.step_api import BlockingCheckError
from ragspine_dagster.partitions import libraries_partitions
from ragspine_dagster.resources import RagspineConfig
from ragspine_dagster.assets._util import check_results, check_specs, md_table, step_context

STEP = STEP_BY_NAME["relation_graph"]
RELATION_GRAPH_CODE_VERSION = STEP.code_version


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=RELATION_GRAPH_CODE_VERSION,
    group_name="indexing",
    kinds={"parquet", "numpy"},
    check_specs=check_specs(STEP),
    description="Typed entity/chunk graph (glossary, metadata, titles, offline extractor; mentions, co_occurs, glossary "
                "relations, synonyms; Louvain communities with extractive, cited summaries; with graph_extractor = \"llm\" also OpenIE triples from the llm resource, stamped "
                "model-derived/unverified) with CSR walk arrays for personalized PageRank; RESTRICTED chunks never read; "
                "none above graph_max_chunks open chunks.",
)
def relation_graph(context: dg.AssetExecutionContext, ragspine: RagspineConfig, chunks: ChunkUpdate,
                   index_text: IndexTextRef, documents: DocumentSet):
    llm = ragspine.summarizer_llm  # the llm resource, used only when _library.toml sets graph_extractor = "llm"
    ctx = dataclasses.replace(step_context(context, ragspine), make_llm=llm.make if llm is not None else None)
    try:
        result = STEP.function(ctx, chunks=chunks, index_text=index_text, documents=documents)
    except BlockingCheckError as exc:
        raise dg.Failure(str(exc)) from exc
    ref: RelationGraphRef = result.value
    # labels only from the glossary and non-RESTRICTED text (the blocking check re-verifies it)
    yield dg.Output(
        ref,
        data_version=dg.DataVersion(ref.content_hash[:32]),
        metadata={
            **{f"nodes_{k}": int(v) for k, v in sorted(ref.node_counts.items())},
            **{f"edges_{k}": int(v) for k, v in sorted(ref.edge_counts.items())},
            "top_entities_by_degree": md_table(["entity", "degree"], list(ref.top_entities)),
            "neighbourhood_of_most_connected": dg.MetadataValue.md(f"```mermaid\n{ref.neighbourhood_mermaid}\n```"
                                                                   if ref.neighbourhood_mermaid else "_empty graph_"),
            "communities": ref.communities_count,
            "largest_communities": md_table(["theme (top entities)", "entities", "member chunks", "summary (quoted)", "cites"],
                                            [list(c) for c in ref.communities]) if ref.communities
            else dg.MetadataValue.md(f"_none: {ref.communities_note or 'no community of 3+ entities'}_"),
            "synonym_edges_built": ref.synonyms_built,
            "restricted_chunks_skipped": ref.restricted_chunks_skipped,
            "reused": ref.reused,
            "seconds": round(ref.seconds, 3),
            "llm_calls": ref.llm_calls,
            "llm_cached": ref.llm_cached,
            **({"note": ref.note} if ref.note else {}),
            "directory": dg.MetadataValue.path(ref.directory or "(none)"),
        },
    )
    yield from check_results(result)
