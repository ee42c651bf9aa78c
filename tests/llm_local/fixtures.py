"""The local-model fixtures, shared by ``tests/llm_local`` and the leak suite
(``tests/leak/test_llm_real_server.py``): llama.cpp's server with the packaged Gemma 3 270M
(extra ``llm-local``) once per session on a free loopback port, behind the recording,
shaping proxy of :mod:`tests.llm_local.harness`, and a provider pointed at the proxy.
Skipped, saying why, only where the extra (or its model) is not installed.

A test module (or conftest) uses them by importing the three names; each importing
directory gets its own session server (seconds to start)."""

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
