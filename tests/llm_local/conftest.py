"""Fixtures of the local-model tests (:mod:`tests.llm_local.fixtures`, shared with the leak
suite): llama.cpp's server with the packaged Gemma 3 270M (extra ``llm-local``) once per
session on a free loopback port, behind the recording, shaping proxy of
:mod:`tests.llm_local.harness`. Skipped, saying why, only where the extra is not installed."""

from __future__ import annotations

from tests.llm_local.fixtures import local_llm, provider, proxy

__all__ = ["local_llm", "provider", "proxy"]
