"""The HTTP edge's request and response shapes (pydantic), for parsing the request and for the
OpenAPI schema at ``/openapi.json``.

A search's request body is parsed and validated by :class:`SearchBody` in one pass
(``model_validate_json``: pydantic-core reads the bytes). Its answer is *not* validated
at run time: the service builds it (the ``ragspine query --json`` object) and the edge
encodes it once (orjson). :class:`SearchResponse` documents that object in the schema;
``tests/tools/serve/test_serve_http.py`` validates real answers against it (unknown fields
forbidden), so the schema stays true.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SearchBody(BaseModel):
    """A search request (the fields of ``ragspine query``)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="the question or keywords")
    libraries: list[str] | None = Field(default=None, max_length=64,
                                        description="library ids to search (fused by RRF); default: every library the key may read")
    filters: dict[str, Any] | None = Field(default=None, description="metadata predicates {field: value | {op: value}}, "
                                                                     "as ragspine_query.filters (a preference the pipeline may drop when nothing matches)")
    mode: str | None = Field(default=None, description="auto|hybrid|vector|bm25|lexical|economy|graph (default: the service's)")
    top_k: int = Field(default=5, description="results to return (0..the service's max_top_k)")
    explain: bool = Field(default=False, description="also return the per-stage trace (counted over the rows the key may see)")


class Confidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grade: str = Field(description="high | medium | low")
    score: float = Field(description="in [0, 1]")


class Snippet(BaseModel):
    """One cited snippet (``ragspine query --json``); never RESTRICTED."""

    model_config = ConfigDict(extra="forbid")

    text: str
    doc_id: str
    title: str
    source_locator: str = Field(description="where the source document lives")
    locator: str = Field(description="the citation: source and span")
    chunk_id: str
    library_id: str
    entity: str
    topic: str
    geography: str
    period: str
    language: str
    valid_as_of: str | None = Field(description="ISO date, or empty")
    sensitivity: str = Field(description="PUBLIC | INTERNAL (at most the key's ceiling)")
    span: list[int] = Field(description="[start, end] character offsets in the document")
    chunker: str = Field(description="chunker@version")
    heading: str
    metadata: dict[str, Any]
    scores: dict[str, float] = Field(description="bm25, vector, fused (higher is better), and any other stage's score")
    location: dict[str, Any] | None = Field(default=None, description="page / slide / sheet / anchor of a converted file")
    page: int | None = None
    prompt_text: str | None = Field(default=None, description="the parent text a prompt would be given")
    via: str | None = Field(default=None, description="the summary-tree node it was reached through")
    tier: str | None = None
    confidence: Confidence | None = None
    needs_refinement: bool | None = None


class ExplainRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: int
    stage: str
    name: str
    query: str
    ms: float
    detail: str
    rank: int | None
    chunk_id: str | None
    library_id: str | None
    score: float | None


class SearchResponse(BaseModel):
    """``POST /v1/search``: the ``ragspine query --json`` object, plus ``snapshots`` and ``mode``."""

    model_config = ConfigDict(extra="forbid")

    results: list[Snippet]
    tier: str | None = Field(description="the retrieval tier that answered")
    confidence: Confidence | None
    needs_refinement: bool | None
    filters: dict[str, Any] | None = Field(default=None, description="the filters applied")
    dropped_filters: list[dict[str, Any]] | None = Field(default=None, description="filters dropped because nothing matched them")
    refusal: dict[str, Any] | None = Field(default=None, description="why the question was refused (kind, reason, query, entities)")
    explain: list[ExplainRow] | None = Field(default=None, description="with explain: one row per (stage, candidate)")
    snapshots: dict[str, str] = Field(description="the snapshot each library was read at")
    mode: str = Field(description="the retrieval mode that ran")


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: int
    kind: str = Field(description="access | request | timeout | internal")
    message: str = Field(description="one sentence naming the field or rule and what to do; never a key or a chunk's text")


class ErrorResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail
