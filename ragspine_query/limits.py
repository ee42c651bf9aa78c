"""Limits on what a user can send: the query text.

A query longer than :data:`MAX_QUERY_CHARS` characters is refused with a clear error
(before: a 100 KB query took 46 s and 575 MB in ``auto`` mode); an empty or whitespace-only
query is refused too (before: it returned results). Both are checked by
:meth:`ragspine_query.agent_api.NarrativeIndexRetriever.retrieve` and so by ``ragspine query``.
The evaluation path (``HybridRetriever.search``) is not limited: datasets are trusted input.
"""

from __future__ import annotations

from ragspine_core.errors import QueryError

#: The longest query accepted, in characters (about 600-800 words of English).
MAX_QUERY_CHARS = 4096


def check_query(query: object) -> str:
    """Return ``query`` when it is a searchable text, else raise :class:`QueryError`."""
    if not isinstance(query, str):
        raise QueryError(f"a query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise QueryError("the query is empty: pass the words to search for")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"the query has {len(query):,} characters, more than the limit of {MAX_QUERY_CHARS:,}: "
                         "shorten it to the question itself (search for its key sentences, not a whole document)")
    return query
