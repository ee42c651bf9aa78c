"""``notebooks/quickstart.ipynb`` runs top to bottom with the project's kernel.

The notebook is executed by ``nbclient`` with an ``ipykernel`` from this interpreter
against a scratch copy of the sample library (``RAGSPINE_NOTEBOOK_DATA``), which the
notebook materializes itself through the Dagster assets, as a new user's first run does.
The test fails if any cell raises or the nDCG@k figure comes out empty. The committed
notebook must carry no outputs (they would go stale).
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import RAGSPINE_ENV_VARS, copy_sample_data

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "quickstart.ipynb"
CELL_TIMEOUT_S = 600  # a bound, not an estimate: the first ingest takes ~30-60 s on 2 idle cores


def test_committed_notebook_has_no_outputs() -> None:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))  # plain JSON: runs without the extra
    assert nb["nbformat"] == 4, nb["nbformat"]
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "the notebook has no code cells"
    stale = [i for i, c in enumerate(code) if c.get("outputs") or c.get("execution_count") is not None]
    assert not stale, (f"code cells {stale} of {NOTEBOOK.name} are committed with outputs; clear them "
                       "(jupyter nbconvert --clear-output --inplace notebooks/quickstart.ipynb)")


def test_quickstart_notebook_runs_top_to_bottom(tmp_path, monkeypatch) -> None:
    nbformat = pytest.importorskip("nbformat", reason="the 'notebook' extra is not installed")
    nbclient = pytest.importorskip("nbclient", reason="the 'notebook' extra is not installed")
    pytest.importorskip("ipykernel", reason="the 'notebook' extra is not installed")
    pytest.importorskip("matplotlib", reason="the 'notebook' extra is not installed")
    from jupyter_client.kernelspec import KernelSpecManager, NATIVE_KERNEL_NAME

    data = copy_sample_data(tmp_path / "data")
    for var in RAGSPINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RAGSPINE_NOTEBOOK_DATA", str(data))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # the kernel runs this interpreter (the project's environment): its spec names `python`
    # (resolved on PATH) or an absolute path, which must then be this one
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    spec = KernelSpecManager().get_kernel_spec(NATIVE_KERNEL_NAME)
    assert spec.argv[0] in ("python", "python3") or Path(spec.argv[0]).resolve() == Path(sys.executable).resolve(), (
        f"the {NATIVE_KERNEL_NAME!r} kernel runs {spec.argv[0]}, not this environment's {sys.executable}")

    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name=NATIVE_KERNEL_NAME, allow_errors=False,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    try:
        client.execute()  # raises CellExecutionError naming the cell when any cell raises
    except nbclient.exceptions.CellExecutionError as exc:
        pytest.fail(f"a notebook cell raised:\n{str(exc)[-4000:]}")

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors
    # the figure: one PNG with real content (an empty Agg canvas compresses to a few KB)
    pngs = [base64.b64decode(o.data["image/png"]) for o in outputs
            if o.output_type in ("display_data", "execute_result") and "image/png" in o.get("data", {})]
    assert len(pngs) == 1, f"expected the nDCG@k figure, got {len(pngs)} images"
    assert pngs[0][:8] == b"\x89PNG\r\n\x1a\n" and len(pngs[0]) > 15_000, len(pngs[0])
    # the DataFrames were rendered (provenance columns, the explain table, the snapshot diff)
    html = "\n".join(o.data.get("text/html", "") for o in outputs if o.output_type == "execute_result")
    for column in ("locator", "library_id", "bm25", "vector", "fused", "stage", "snapshot_id", "chunks added"):
        assert column in html, f"no rendered table shows {column!r}"
    # RESTRICTED text never reaches an output
    from tests.conftest import RESTRICTED_MARKERS

    text = "\n".join(str(o) for o in outputs)
    leaked = [m for m in RESTRICTED_MARKERS.values() if m in text]
    assert not leaked, leaked
    assert not (REPO / "notebooks" / ".dagster_home").exists()
