"""How Dagster stores step outputs: references to the library's files, never document text.

:class:`StepOutputIOManager` is the code location's ``io_manager``
(:func:`ragspine_assets.definitions.make_resources`). It keeps Dagster's filesystem layout
(``<base_dir>/<asset key>/<partition>``, op outputs under ``<base_dir>/<run id>/…``;
``base_dir`` = ``RAGSPINE_IO_DIR``, else ``DAGSTER_HOME/storage``) and applies the storage
policy in one place:

* ``DocumentSet`` (the ``documents`` output): stored as :meth:`DocumentSet.reference`, every
  field but the documents; loading reads them back from the file the step saved under the
  library's ``work/documents/`` (:meth:`DocumentSet.from_reference`). No document text, no
  RESTRICTED body or title, is copied outside the library's own folder.
* ``ChunkUpdate`` (``chunks``): stored without the ids of RESTRICTED documents
  (:meth:`ChunkUpdate.without_restricted_ids`); downstream steps read the chunk store.
* anything else (the artifact references, the shard plan of the fanned-out embedding):
  pickled as it is; those values hold paths, hashes and counts.

Every file is a pickled envelope ``{"format": FORMAT, "kind": …, "value": …}``. A file
without it was stored by a ragspine from before this IO manager (plain pickles); it is
not loaded: the error names the asset and partition to re-materialize (``ragspine ingest
<library>`` re-materializes every asset of a library).
"""

from __future__ import annotations

import pickle
from typing import Any, Mapping

import dagster as dg

from ragspine_core.errors import RagspineError

from ragspine_index.artifacts import validate_library_id
from ragspine_index.steps.chunks import ChunkUpdate
from ragspine_index.steps.documents import DocumentSet

#: The envelope's format tag; a stored file without it is from an older ragspine.
FORMAT = "ragspine-step-output/1"
_PICKLE_PROTOCOL = 4


def stored_form(value: Any) -> dict[str, Any]:
    """The envelope a step output is stored as (the policy above)."""
    if isinstance(value, DocumentSet):
        return {"format": FORMAT, "kind": "document_set", "value": value.reference()}
    if isinstance(value, ChunkUpdate):
        return {"format": FORMAT, "kind": "chunk_update", "value": value.without_restricted_ids()}
    return {"format": FORMAT, "kind": "object", "value": value}


def loaded_form(envelope: Any, *, where: str) -> Any:
    """The value of a stored envelope; ``where`` names the output for the error message."""
    if not isinstance(envelope, dict) or envelope.get("format") != FORMAT:
        raise RagspineError(_old_output(where))
    kind, value = envelope.get("kind"), envelope.get("value")
    if kind == "document_set":
        if not isinstance(value, Mapping):  # a damaged file: no reference to read the documents back from
            raise RagspineError(f"the stored step output {where} holds no document-set reference; {_REMATERIALIZE}")
        return DocumentSet.from_reference(value)
    if kind in ("chunk_update", "object"):
        return value
    raise RagspineError(f"the stored step output {where} has an unknown kind {kind!r}; {_REMATERIALIZE}")


_REMATERIALIZE = "re-materialize it (`ragspine ingest <library>` re-materializes every asset of a library)"


def _old_output(where: str) -> str:
    return (f"the stored step output {where} was written by an older ragspine (before the step-output IO "
            f"manager) and is not loaded; {_REMATERIALIZE}")


class _StepOutputStore(dg.UPathIOManager):
    """Dagster's filesystem paths; :func:`stored_form` / :func:`loaded_form` inside the files."""

    extension = ""  # the same file names as Dagster's filesystem IO manager

    def __init__(self, base_dir: str) -> None:
        from upath import UPath

        super().__init__(base_path=UPath(base_dir))

    def make_safe_partition_path(self, base_path, partition: str):
        validate_library_id(partition)  # a partition key is one safe folder name, never a path
        return base_path / partition

    def dump_to_path(self, context: dg.OutputContext, obj: Any, path) -> None:
        envelope = stored_form(obj)
        with path.open("wb") as f:
            pickle.dump(envelope, f, _PICKLE_PROTOCOL)

    def load_from_path(self, context: dg.InputContext, path) -> Any:
        where = _describe(context)
        try:  # a missing file raises FileNotFoundError: Dagster says which input is missing
            with path.open("rb") as f:
                envelope = pickle.load(f)
        except (AttributeError, ImportError, IndexError, EOFError, TypeError, pickle.UnpicklingError) as exc:
            # an old pickle names classes or functions that moved or no longer exist
            raise RagspineError(_old_output(where)) from exc
        return loaded_form(envelope, where=where)


def _describe(context: dg.InputContext) -> str:
    try:
        key = context.asset_key.to_user_string()
        part = f", partition {context.asset_partition_key!r}" if context.has_asset_partitions else ""
        return f"of asset {key}{part}"
    except Exception:  # an op output (the fanned-out embedding's plan and shards)
        return f"of {context.upstream_output.step_key if context.upstream_output else 'an op'}"


class StepOutputIOManager(dg.ConfigurableIOManagerFactory):
    """Step outputs as references (:mod:`ragspine_assets.io_manager`): the ``documents``
    output without its text, the ``chunks`` output without RESTRICTED ids.

    ``base_dir``: where the files go (``RAGSPINE_IO_DIR``: shared storage when steps run on
    different machines); empty: ``storage/`` under the Dagster instance (``DAGSTER_HOME``).
    """

    base_dir: str = ""

    def create_io_manager(self, context: dg.InitResourceContext) -> _StepOutputStore:
        base = self.base_dir or (context.instance.storage_directory() if context.instance is not None else "")
        if not base:
            raise RagspineError("StepOutputIOManager needs a base_dir (or a Dagster instance: DAGSTER_HOME)")
        return _StepOutputStore(base)
