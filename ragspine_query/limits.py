"""Limits on what a user can send: the query text.

Every public entry applies them — ``ragspine query``,
:meth:`~ragspine_query.agent_api.NarrativeIndexRetriever.retrieve`,
:meth:`~ragspine_query.retriever.HybridRetriever.search` and
:meth:`~ragspine_query.retriever.MultiIndexRetriever.search` — through :func:`check_query`:

* size: at most :data:`MAX_QUERY_CHARS` characters (before: a 100 KB query took 46 s and
  575 MB in ``auto`` mode through the CLI, and ``'revenue margin ' * 70000`` took 155 s
  and +4.6 GB through ``HybridRetriever.search``, which was not limited);
* terms: at most :data:`MAX_QUERY_TERMS` words (runs of letters or digits), so a query of
  thousands of one-letter words cannot fan out into thousands of postings scans;
* searchable text: at least one letter or digit (an empty query, white space, control
  characters or punctuation only: before, a query of control characters returned five
  vector-ranked results).

The time a query takes follows from these bounds (docs/operations.md); there is no
separate timer.
"""

from __future__ import annotations

import re
import unicodedata

from ragspine_core.errors import QueryError

#: The longest query accepted, in characters (about 600-800 words of English).
MAX_QUERY_CHARS = 4096
#: The most words (runs of letters or digits) a query may have.
MAX_QUERY_TERMS = 1024

_WORD = re.compile(r"[^\W_]+")


def _searchable(query: str) -> bool:
    return any(unicodedata.category(ch)[0] in "LN" for ch in query)


def check_query(query: object) -> str:
    """Return ``query`` when it is a searchable text within the limits, else raise :class:`QueryError`."""
    if not isinstance(query, str):
        raise QueryError(f"a query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise QueryError("the query is empty: pass the words to search for")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"the query has {len(query):,} characters, more than the limit of {MAX_QUERY_CHARS:,}: "
                         "shorten it to the question itself (search for its key sentences, not a whole document)")
    if not _searchable(query):
        raise QueryError("the query has no searchable text (no letter or digit, only punctuation, symbols or control "
                         "characters): pass the words to search for")
    n_terms = sum(1 for _ in _WORD.finditer(query))
    if n_terms > MAX_QUERY_TERMS:
        raise QueryError(f"the query has {n_terms:,} words, more than the limit of {MAX_QUERY_TERMS:,}: shorten it "
                         "to the question itself")
    return query
