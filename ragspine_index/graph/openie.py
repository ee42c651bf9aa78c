"""The relation graph's LLM extractor (the ``llm`` relation-extractor slot): OpenIE-style
triples from each open chunk through an OpenAI-compatible provider, cached by chunk hash,
and the parser of its replies. The builder (:mod:`ragspine_index.graph.extraction`)
screens every endpoint with the competitor gate before it enters the graph."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING


from ragspine_core.errors import ConfigError, ProviderError
from ragspine_core.records import is_restricted


from ragspine_index.graph.graph_input import GraphChunk, Triple

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider


# ----------------------------------------------------------------- the LLM extractor
OPENIE_PROMPT_VERSION = "1"


_OPENIE_SYSTEM = ("You extract relations for a knowledge graph. From the passage, list factual "
                  "(subject, predicate, object) triples whose subject and object are named entities in the passage. "
                  'Answer with JSON only: {"triples": [["subject", "predicate", "object"], ...]}')


class OpenIETripleExtractor:
    """OpenIE-style triples through an :class:`~ragspine_core.llm.LLMProvider`, cached by chunk hash.

    A reply that is not the asked-for JSON (prose, a reply cut at ``max_tokens``) keeps
    the complete ``["s", "p", "o"]`` triples it holds (:func:`salvage_triples`, counted in
    ``salvaged``); one with none adds no edge for that chunk (counted in ``unparsed``, not
    cached). A provider failure (server down, deadline) still raises: the build fails
    with the provider's message rather than publish a graph missing the model's edges.

    Only non-RESTRICTED chunks may be passed (:func:`build_relation_graph` guarantees it;
    :meth:`extract` refuses a RESTRICTED one). Results are cached in SQLite keyed by
    (``model_id`` with the token cap, prompt version, sha256 of the text), so a re-build asks
    only for new text, and triples salvaged from a reply cut at a smaller cap are not reused by
    a build with a larger one. Every edge it yields is stamped model-derived and unverified.
    """

    def __init__(self, provider: LLMProvider, *, model_id: str, cache_path: Path, max_tokens: int | None = None) -> None:
        from ragspine_core.llm import feature_max_tokens

        self.provider = provider
        self.model_id = model_id
        self.max_tokens = feature_max_tokens("openie") if max_tokens is None else max_tokens
        #: the cache's model column: the model and the token cap its replies were asked with
        self._cache_model = f"{model_id}|max_tokens={self.max_tokens}"
        #: replies that held no readable triple (that chunk adds no model edge; not cached, asked again next build)
        self.unparsed = 0
        #: replies cut short whose complete triples were kept
        self.salvaged = 0
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(cache_path, timeout=60)
        self._conn.execute("CREATE TABLE IF NOT EXISTS openie_cache (model_id TEXT NOT NULL, prompt_version TEXT NOT NULL, "
                           "text_hash TEXT NOT NULL, triples TEXT NOT NULL, PRIMARY KEY (model_id, prompt_version, text_hash))")
        self._conn.commit()
        self.calls = 0
        self.cache_hits = 0

    def close(self) -> None:
        self._conn.close()

    def extract(self, chunk: GraphChunk) -> list[Triple]:
        if is_restricted(chunk.sensitivity):
            raise ConfigError("a RESTRICTED chunk may never be given to an extractor")
        h = hashlib.sha256(chunk.text.encode("utf-8")).hexdigest()
        row = self._conn.execute("SELECT triples FROM openie_cache WHERE model_id=? AND prompt_version=? AND text_hash=?",
                                 (self._cache_model, OPENIE_PROMPT_VERSION, h)).fetchone()
        if row is not None:
            self.cache_hits += 1
            return [Triple(*t) for t in json.loads(row[0])]
        self.calls += 1
        reply = self.provider.chat([{"role": "system", "content": _OPENIE_SYSTEM},
                                    {"role": "user", "content": chunk.text}], temperature=0.0, max_tokens=self.max_tokens)
        try:
            triples = parse_triples(reply)
        except ProviderError:
            triples = salvage_triples(reply)
            if not triples:  # the documented fallback: this chunk adds no model edge, and the build says how many
                self.unparsed += 1
                return []
            self.salvaged += 1
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO openie_cache VALUES (?,?,?,?)",
                               (self._cache_model, OPENIE_PROMPT_VERSION, h, json.dumps([[t.subject, t.predicate, t.object] for t in triples])))
        return triples


def parse_triples(reply: str) -> list[Triple]:
    """Triples of a model reply (``{"triples": [[s, p, o], ...]}``, possibly inside prose or a code fence)."""
    start, end = reply.find("{"), reply.rfind("}")
    if start < 0 or end <= start:
        raise ProviderError("the OpenIE reply holds no JSON object; the model must answer {\"triples\": [[s, p, o], ...]}")
    try:
        data = json.loads(reply[start:end + 1])
    except json.JSONDecodeError as exc:
        raise ProviderError(f"the OpenIE reply is not valid JSON ({exc.msg}); the model must answer {{\"triples\": [...]}}") from exc
    out = []
    for t in data.get("triples", []) if isinstance(data, dict) else []:
        if isinstance(t, (list, tuple)) and len(t) == 3 and all(isinstance(x, str) and x.strip() for x in t):
            out.append(Triple(*(x.strip()[:200] for x in t)))
    return out


_QUOTED = r'"((?:[^"\\]|\\.){1,400})"'
_TRIPLE = __import__("re").compile(r"\[\s*" + _QUOTED + r"\s*,\s*" + _QUOTED + r"\s*,\s*" + _QUOTED + r"\s*\]")


def salvage_triples(reply: str) -> list[Triple]:
    """The complete ``["s", "p", "o"]`` triples of a reply that is not valid JSON (e.g. cut
    short at ``max_tokens``, or wrapped in prose); empty when it holds none."""
    out = []
    for m in _TRIPLE.finditer(reply or ""):
        try:
            parts = [json.loads(f'"{g}"') for g in m.groups()]
        except ValueError:
            continue
        if all(isinstance(x, str) and x.strip() for x in parts):
            out.append(Triple(*(x.strip()[:200] for x in parts)))
    return out
