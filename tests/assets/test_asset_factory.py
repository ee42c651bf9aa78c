"""One asset factory over ``STEPS``: a new ``Step`` is a new asset with no other edit.

The assets of the shipped steps are checked in ``tests/assets/test_definitions.py`` (keys,
lineage, checks, code versions); here a step that exists only in this test gets its asset,
lineage, blocking check and default UI view from :func:`asset_for`, and runs in a real
Dagster materialization after the real ``documents`` asset; its progress counts reach the
run log as structured numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

dg = pytest.importorskip("dagster", reason="the assets need the 'pipeline' extra")

from ragspine_assets.assets import ALL_ASSETS, documents  # noqa: E402
from ragspine_assets.assets._util import progress_line  # noqa: E402
from ragspine_assets.assets.factory import VIEWS, asset_for, assets_for_steps  # noqa: E402
from ragspine_index.steps.documents import DocumentSet  # noqa: E402
from ragspine_index.pipeline import STEPS, Step  # noqa: E402
from ragspine_index.step_api import CheckSpec, Progress, StepContext, StepResult, outcome  # noqa: E402
from ragspine_assets.io_manager import StepOutputIOManager  # noqa: E402
from ragspine_assets.partitions import LIBRARIES_PARTITION  # noqa: E402
from ragspine_assets.progress import RateMeter  # noqa: E402
from ragspine_assets.resources import EmbeddingBackendResource, RagspineConfig  # noqa: E402
from tests.conftest import copy_sample_data  # noqa: E402


@dataclass(frozen=True)
class WordCount:
    words: int
    content_hash: str


UNDER_A_MILLION = CheckSpec("under_a_million_words", blocking=True, description="fewer than a million words")


def word_count_step(ctx: StepContext, documents: DocumentSet) -> StepResult:
    """Words in the library's open and RESTRICTED documents (a count, never text)."""
    total = 0
    for i, d in enumerate(documents.documents, start=1):
        total += len(d.body.split())
        ctx.progress(Progress("counted 1/2 of the words of", i, len(documents.documents), "documents"))
    value = WordCount(total, f"{total:064d}")
    return StepResult(value, (outcome(UNDER_A_MILLION, total < 1_000_000, {"words": total}),))


NEW_STEP = Step("word_count", word_count_step, ("documents",), (UNDER_A_MILLION,), code_version="7")


def test_every_shipped_step_has_its_asset_in_step_order():
    assert [a.key.to_user_string() for a in ALL_ASSETS] == [s.name for s in STEPS]
    assert set(VIEWS) == {s.name for s in STEPS}, "every shipped step keeps its own UI view"


def test_a_new_step_gets_an_asset_with_lineage_checks_and_code_version():
    assets = assets_for_steps((*STEPS, NEW_STEP))
    assert len(assets) == len(STEPS) + 1
    asset = assets[-1]
    assert asset.key == dg.AssetKey("word_count")
    assert {k.to_user_string() for k in asset.asset_deps[asset.key]} == {"documents"}
    assert asset.code_versions_by_key[asset.key] == "7"
    spec = next(iter(asset.check_specs))
    assert (spec.name, spec.blocking) == ("under_a_million_words", True)
    assert asset.group_names_by_key[asset.key] == "indexing"
    assert asset.descriptions_by_key[asset.key] == word_count_step.__doc__
    assert asset.partitions_def.name == LIBRARIES_PARTITION


def test_a_new_step_materializes_after_documents_and_reports_structured_progress(tmp_path, capfd):
    data = copy_sample_data(tmp_path / "data")
    resources = {"ragspine": RagspineConfig(data_root=str(data), embedding_backend=EmbeddingBackendResource(spec="none")),
                 "io_manager": StepOutputIOManager(base_dir=str(tmp_path / "io"))}
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(LIBRARIES_PARTITION, ["sample"])
        result = dg.materialize([documents, asset_for(NEW_STEP)], instance=instance, resources=resources,
                                partition_key="sample")
    assert result.success
    value = result.output_for_node("word_count")
    assert isinstance(value, WordCount) and value.words > 1000
    meta = result.asset_materializations_for_node("word_count")[0].metadata
    assert meta["content_hash"].value == value.content_hash
    checks = result.get_asset_check_evaluations()
    assert [(c.check_name, c.passed) for c in checks if c.asset_key == dg.AssetKey("word_count")] == [
        ("under_a_million_words", True)]
    # the counts as the step reported them: the 1/2 in its text is not taken for counts
    assert "counted 1/2 of the words of 46/46 documents (" in capfd.readouterr().err


def test_the_progress_line_reads_the_counts_not_the_text():
    clock = iter([100.0, 110.0]).__next__
    meter = RateMeter(clock=clock)
    line = progress_line(Progress("shard 1/3: embedded", 64, 256, "new texts"), meter)
    assert line == "shard 1/3: embedded 64/256 new texts (6.4/s, ETA 0:30)"
