"""The README's first command answers right: the queries of ``scripts/demo.sh``, run as
written against the sample library ingested with the defaults a new user gets (``auto``
embedding, default retrieval), print the document that answers them first.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import RESTRICTED_MARKERS, copy_sample_data, ingest, python_env

pytestmark = pytest.mark.slow

#: What answers each demo question (read in the documents): one of them is printed in the top 3.
ANSWERS = {
    "Why did Acme Europe revenue decline in Q3 2024?": {"acme-eu-2024q3-earnings"},
    # the judged set's grade 2 for the same question (zh-001): the FAQ's 问/答 states the causes
    "艾克美中国为什么营收下滑？": {"acme-cn-2024q3-earnings", "pr-acme-cn-2024q3-results-brief", "investor-faq",
                          "acme-group-history-zh"},
}
#: What else answers in part (the judged set's grade 1, data/eval/sample/qrels/dev.tsv en-001): the
#: first result is one of ANSWERS or of these. Since filter extraction is off by default (issue 36)
#: the group history's challenges section ("In Europe, weak demand from German machine builders")
#: can lead the English question, with the Q3 note right under it.
PARTIAL = {
    "Why did Acme Europe revenue decline in Q3 2024?": {"acme-group-history-en", "acme-group-2024q4-earnings"},
    "艾克美中国为什么营收下滑？": set(),
}


def demo_queries(repo_root: Path) -> list[list[str]]:
    """The ``ragspine query`` lines of scripts/demo.sh, as argument lists."""
    lines = (repo_root / "scripts" / "demo.sh").read_text(encoding="utf-8").splitlines()
    return [shlex.split(line)[1:] for line in lines if re.match(r"^ragspine query ", line)]


@pytest.fixture(scope="module")
def default_sample(tmp_path_factory) -> Path:
    pytest.importorskip("dagster", reason="materializing the sample needs the 'pipeline' extra")
    data = copy_sample_data(tmp_path_factory.mktemp("demo") / "data")
    ingest(data / "raw" / "sample", embedding="auto")
    return data


def test_demo_questions_print_their_answer(repo_root, default_sample):
    queries = demo_queries(repo_root)
    assert [q[2] for q in queries] == list(ANSWERS), "scripts/demo.sh asks other questions than this test checks"
    ragspine = Path(sys.executable).parent / "ragspine"
    for argv in queries:
        library = default_sample / "artifacts" / "sample"
        args = [str(ragspine), "query", str(library), *argv[2:]]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=600, env=python_env(), cwd=default_sample.parent)
        assert proc.returncode == 0, proc.stderr[-2000:]
        shown = re.findall(r"^\[\d+\] .* — sample:(\S+)", proc.stdout, flags=re.M)
        assert shown, proc.stdout[:2000]
        assert shown[0] in ANSWERS[argv[2]] | PARTIAL[argv[2]], proc.stdout[:3000]
        assert set(shown[:3]) & ANSWERS[argv[2]], proc.stdout[:3000]
        assert not any(m in proc.stdout for m in RESTRICTED_MARKERS)
