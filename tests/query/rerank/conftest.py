"""Shared fixtures for the rerank tests: hits, tiny models, a running local LLM server."""

from __future__ import annotations

import pytest

from tests.query.rerank.llm_server import LocalChatServer


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory):
    """(model_dir, weights) of the tiny cross-encoder; skipped when ``onnx`` is not installed."""
    pytest.importorskip("onnx", reason="building the tiny test model needs the onnx package")
    pytest.importorskip("onnxruntime")
    from tests.query.rerank.rerank_tiny_models import build_cross_encoder

    model_dir = tmp_path_factory.mktemp("tiny_cross_encoder")
    return model_dir, build_cross_encoder(model_dir)


@pytest.fixture(scope="session")
def tiny_splade(tmp_path_factory):
    """(model_dir, weights) of the tiny masked LM; skipped when ``onnx`` is not installed."""
    pytest.importorskip("onnx", reason="building the tiny test model needs the onnx package")
    pytest.importorskip("onnxruntime")
    from tests.query.rerank.rerank_tiny_models import build_splade

    model_dir = tmp_path_factory.mktemp("tiny_splade")
    return model_dir, build_splade(model_dir)


@pytest.fixture(scope="module")
def chat_server():
    """One local chat server per test module; tests reset its behaviour script."""
    with LocalChatServer("ok", slow_s=1.0) as server:
        yield server
