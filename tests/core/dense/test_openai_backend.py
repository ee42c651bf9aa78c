"""The OpenAI-compatible embedding backend against a real local HTTP server (no mocks)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ragspine_core.dense import OpenAIEmbeddingBackend
from ragspine_core.errors import ConfigError, ProviderError
from tests.query.openai_server import EmbeddingServer, vector_for


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture()
def server():
    with EmbeddingServer() as srv:
        yield srv


def make_backend(server: EmbeddingServer, **kwargs) -> OpenAIEmbeddingBackend:
    kwargs.setdefault("backoff_s", 0.0)
    kwargs.setdefault("dim", 4)
    return OpenAIEmbeddingBackend(server.base_url, "emb-small", **kwargs)


def expected(texts: list[str]) -> np.ndarray:
    raw = np.array([vector_for(t) for t in texts], dtype=np.float64)
    return (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)


def test_embeds_in_index_order_and_normalises(server):
    backend = make_backend(server, api_key="sk-test")
    texts = ["a", "bbbb", "cc"]
    out = backend.embed(texts)
    np.testing.assert_allclose(out, expected(texts), rtol=1e-6)
    assert backend.dim == 4 and backend.model_id == "openai:emb-small"
    (request,) = server.requests
    assert request["path"] == "/v1/embeddings"
    assert request["body"] == {"model": "emb-small", "input": texts}
    assert request["headers"]["Authorization"] == "Bearer sk-test"


def test_embed_texts_returns_plain_lists(server):
    out = make_backend(server).embed_texts(["hello"])
    assert isinstance(out[0][0], float)
    assert out == [pytest.approx(expected(["hello"])[0].tolist())]
    assert "Authorization" not in server.requests[0]["headers"]


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_base_url_with_or_without_v1_reaches_the_same_endpoint(server, suffix):
    OpenAIEmbeddingBackend(server.base_url + suffix, "m", dim=4).embed(["x"])
    assert [r["path"] for r in server.requests] == ["/v1/embeddings"]


def test_splits_inputs_into_batches(server):
    backend = make_backend(server, batch_size=2)
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    np.testing.assert_allclose(backend.embed(texts), expected(texts), rtol=1e-6)
    assert [r["body"]["input"] for r in server.requests] == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
    backend.embed(texts, batch_size=5)
    assert len(server.requests) == 4


def test_retries_a_500_then_succeeds(server):
    server.script = [(500, {"error": "overloaded"}, {})]
    out = make_backend(server, max_retries=2).embed(["abc"])
    np.testing.assert_allclose(out, expected(["abc"]), rtol=1e-6)
    assert len(server.requests) == 2


def test_retries_a_reply_cut_short(server):
    server.script = [(200, {"data": []}, {"X-Test-Truncate": "1"})]
    out = make_backend(server).embed(["abc"])
    np.testing.assert_allclose(out, expected(["abc"]), rtol=1e-6)
    assert len(server.requests) == 2


def test_retries_a_429_honouring_retry_after(server):
    server.script = [(429, {"error": "slow down"}, {"Retry-After": "0"})]
    make_backend(server).embed(["abc"])
    assert len(server.requests) == 2


def test_gives_up_after_max_retries_with_the_last_error(server):
    server.script = [(503, {"error": "down"}, {})] * 3
    with pytest.raises(ProviderError, match=r"after 3 attempt\(s\).*HTTP 503"):
        make_backend(server, max_retries=2).embed(["abc"])
    assert len(server.requests) == 3


def test_a_4xx_fails_at_once_and_quotes_the_server(server):
    server.script = [(400, {"error": {"message": "model emb-small does not exist"}}, {})]
    with pytest.raises(ProviderError, match="HTTP 400.*does not exist"):
        make_backend(server, max_retries=5).embed(["abc"])
    assert len(server.requests) == 1


def test_backoff_doubles_between_attempts(server):
    server.script = [(500, b"{}", {}), (500, b"{}", {})]
    started = time.perf_counter()
    make_backend(server, max_retries=2, backoff_s=0.05).embed(["abc"])
    assert time.perf_counter() - started >= 0.05 + 0.10


def test_retries_a_timeout(server):
    server.delay_s = 0.5
    backend = make_backend(server, timeout_s=0.1, max_retries=1)
    with pytest.raises(ProviderError, match="after 2 attempt"):
        backend.embed(["abc"])


def test_connection_refused_is_a_provider_error():
    with EmbeddingServer() as srv:
        url = srv.base_url
    with pytest.raises(ProviderError, match="reachable"):
        OpenAIEmbeddingBackend(url, "m", max_retries=1, backoff_s=0.0, dim=2).embed(["x"])


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"<html>gateway</html>", "not JSON"),
        ({"object": "list"}, "no 'data' list"),
        ({"data": [{"index": 0, "embedding": ["0.1", "0.2"]}]}, "not a non-empty list of numbers"),
        ({"data": [{"index": 0, "embedding": [0.1, None]}]}, "not a non-empty list of numbers"),
        ({"data": [{"index": 0, "embedding": "AAAA"}]}, "not a non-empty list of numbers"),
        ({"data": [{"index": 0}]}, "no 'embedding' field"),
        ({"data": [{"index": 7, "embedding": [1.0]}]}, "indices must be 0..0"),
    ],
)
def test_malformed_bodies_raise_provider_error(server, payload, message):
    server.script = [(200, payload, {})]
    with pytest.raises(ProviderError, match=message):
        make_backend(server).embed(["only one"])


def test_wrong_count_raises_provider_error(server):
    server.script = [(200, {"data": [{"index": 0, "embedding": [1.0, 0.0]}]}, {})]
    with pytest.raises(ProviderError, match="1 embeddings for 2 inputs"):
        make_backend(server).embed(["a", "b"])


def test_duplicate_indices_raise_provider_error(server):
    item = {"index": 0, "embedding": [1.0, 0.0]}
    server.script = [(200, {"data": [item, item]}, {})]
    with pytest.raises(ProviderError, match="each once"):
        make_backend(server).embed(["a", "b"])


def test_dimension_change_between_batches_is_refused(server):
    server.script = [(200, {"data": [{"index": 0, "embedding": [1.0, 0.0, 0.0]}]}, {})]
    with pytest.raises(ProviderError, match="3-d embeddings.*expected 4-d"):
        make_backend(server, dim=4).embed(["a"])


def test_without_dim_the_constructor_probes_once(server):
    backend = make_backend(server, dim=None)
    assert backend.dim == 4
    assert len(server.requests) == 1
    backend.embed(["a", "b"])
    assert len(server.requests) == 2


def test_a_failing_probe_fails_construction(server):
    server.script = [(404, {"error": "no such model"}, {})]
    with pytest.raises(ProviderError, match="HTTP 404"):
        make_backend(server, dim=None)


def test_empty_input_sends_nothing(server):
    out = make_backend(server, dim=4).embed([])
    assert out.shape == (0, 4)
    assert server.requests == []


def test_invalid_settings_are_config_errors():
    with pytest.raises(ConfigError, match="http:// or https://"):
        OpenAIEmbeddingBackend("localhost:8000", "m", dim=3)
    with pytest.raises(ConfigError, match="model name"):
        OpenAIEmbeddingBackend("http://localhost:8000", "", dim=3)
    with pytest.raises(ConfigError, match="max_retries"):
        OpenAIEmbeddingBackend("http://localhost:8000", "m", max_retries=-1, dim=3)
    with pytest.raises(ConfigError, match="dim"):
        OpenAIEmbeddingBackend("http://localhost:8000", "m", dim=0)


def test_repr_never_shows_the_api_key():
    backend = OpenAIEmbeddingBackend("http://localhost:8000", "m", api_key="sk-secret", dim=3)
    assert "sk-secret" not in repr(backend)
