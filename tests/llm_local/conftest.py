"""Fixtures of the local-model tests: llama.cpp's server with the packaged Gemma 3 270M
(extra ``llm-local``) once per session on a free loopback port, behind the recording,
shaping proxy of :mod:`tests.llm_local.harness`. Skipped, saying why, only where the extra
is not installed."""

from __future__ import annotations

import pytest

from tests.llm_local.harness import TEST_MAX_TOKENS, ShapingProxy


@pytest.fixture(scope="session")
def local_llm():
    from ragspine_tools.llm_serve import LocalLLMServer, missing_parts

    missing = missing_parts()
    if missing:
        pytest.skip(f"the llm-local extra is not installed ({', '.join(missing)} missing): "
                    "pip install 'ragspine[llm-local]' to run the local-model tests")
    server = LocalLLMServer(startup_timeout_s=180, n_ctx=2048, threads=2)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def proxy(local_llm):
    p = ShapingProxy(local_llm.base_url.removesuffix("/v1"))
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(scope="session")
def provider(proxy, local_llm):
    from ragspine_core.llm import OpenAICompatibleProvider

    return OpenAICompatibleProvider(proxy.base_url, local_llm.alias, timeout_s=120, deadline_s=120, max_retries=0,
                                    max_tokens_cap=TEST_MAX_TOKENS)

