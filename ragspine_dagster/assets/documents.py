
from collections import Counter

import dagster as dg

from ragspine_core.records import RESTRICTED_SENSITIVITY

from ragspine_index.steps.documents import DocumentSet
from ragspine_index.pipeline import STEP_BY_NAME
from ragspine_dagster.partitions import libraries_partitions
from ragspine_dagster.resources import RagspineConfig
from ragspine_dagster.assets._util import check_results, check_specs, is_restricted, md_list, md_table, run_asset_step, withheld_note

STEP = STEP_BY_NAME["documents"]
DOCUMENTS_CODE_VERSION = STEP.code_version


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=DOCUMENTS_CODE_VERSION,
    group_name="indexing",
    kinds={"python"},
    check_specs=check_specs(STEP),
    description="Raw files under data/raw/<library>/ parsed and validated (front matter, .jsonl); bad files reported, not fatal.",
)
def documents(context: dg.AssetExecutionContext, ragspine: RagspineConfig):
    library_id = context.partition_key
    paths = ragspine.library_paths(library_id)
    if not paths.raw.is_dir():
        raise dg.Failure(f"library folder {paths.raw} does not exist; create it or remove the partition {library_id!r}")
    # saved under the library's artifacts: the step output that Dagster pickles is a reference
    result = run_asset_step(STEP, context, ragspine)
    docs: DocumentSet = result.value
    sens = Counter(d.sensitivity for d in docs.documents)
    langs = Counter(d.language for d in docs.documents)
    yield dg.Output(
        docs,
        data_version=dg.DataVersion(docs.content_hash[:32]),
        metadata={
            "library": library_id,
            "raw_dir": dg.MetadataValue.path(str(paths.raw)),
            "documents": len(docs.documents),
            "parse_errors": len(docs.errors),
            "skipped_files": len(docs.skipped),
            "characters": sum(len(d.body) for d in docs.documents),
            "by_sensitivity": dict(sorted(sens.items())),
            "by_language": dict(sorted(langs.items())),
            "errors": md_list(docs.errors),
            "notes": md_list(docs.notes),
            # RESTRICTED documents appear only in the counts: no id, title or text of theirs
            # reaches the event log
            "preview": md_table(["doc_id", "title", "entity", "period", "sensitivity"],
                                [(d.doc_id, d.title, d.entity, d.period, d.sensitivity)
                                 for d in docs.documents if not is_restricted(d.sensitivity)],
                                note=withheld_note(sens.get(RESTRICTED_SENSITIVITY, 0), "document")),
        },
    )
    yield from check_results(result)
