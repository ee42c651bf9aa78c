
from collections import Counter

import dagster as dg

from ..indexing.steps import DocumentSet, load_documents
from ..partitions import libraries_partitions
from ..resources import RagspineConfig
from ragspine_query.records import RESTRICTED_SENSITIVITY

from ._util import is_restricted, md_list, md_table, withheld_note

DOCUMENTS_CODE_VERSION = "1"


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=DOCUMENTS_CODE_VERSION,
    group_name="indexing",
    kinds={"python"},
    check_specs=[dg.AssetCheckSpec("documents_parse_cleanly", asset="documents")],
    description="Raw files under data/raw/<library>/ parsed and validated (front matter, .jsonl); bad files reported, not fatal.",
)
def documents(context: dg.AssetExecutionContext, ragspine: RagspineConfig):
    library_id = context.partition_key
    paths = ragspine.library_paths(library_id)
    if not paths.raw.is_dir():
        raise dg.Failure(f"library folder {paths.raw} does not exist; create it or remove the partition {library_id!r}")
    # saved under the library's artifacts: the step output that Dagster pickles is a reference
    docs: DocumentSet = load_documents(paths.raw, library_id).save(paths)
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
            # RESTRICTED documents appear only in the counts: no id, title or text of theirs
            # reaches the event log
            "preview": md_table(["doc_id", "title", "entity", "period", "sensitivity"],
                                [(d.doc_id, d.title, d.entity, d.period, d.sensitivity)
                                 for d in docs.documents if not is_restricted(d.sensitivity)],
                                note=withheld_note(sens.get(RESTRICTED_SENSITIVITY, 0), "document")),
        },
    )
    yield dg.AssetCheckResult(
        check_name="documents_parse_cleanly",
        passed=not docs.errors,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"errors": md_list(docs.errors), "count": len(docs.errors)},
    )
