"""LLM listwise reranking with a fall-back to the fused (RRF) order.

The judge sees the query and the texts of the open (non-RESTRICTED) candidates among
the first ``top_n`` hits and answers with an order. Two guarantees hold whatever the
judge does:

* **RESTRICTED exit #1** — a RESTRICTED candidate's text is never handed to the judge;
  the hit stays at its fused position. If every candidate is RESTRICTED the judge is
  not called at all.
* **Fused-order fall-back** — a judge that raises, or answers anything that is not a
  permutation of the open candidates, leaves the order untouched.
  :func:`listwise_rerank` never raises.

The listwise setting follows RankGPT (Sun et al., 2023, "Is ChatGPT Good at Search?").
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, TYPE_CHECKING, Protocol, runtime_checkable

from ragspine_core.records import Hit
from ragspine_query.rerank.reranker import passage_text

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

#: How many leading hits the judge reorders by default.
DEFAULT_TOP_N = 10

#: A passage longer than this is cut in the prompt (the judge needs the gist, not all of it).
DEFAULT_MAX_PASSAGE_CHARS = 1500


@runtime_checkable
class ListwiseJudge(Protocol):
    """Orders candidate passages by relevance to a query."""

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        """Return candidate indices, most relevant first (a permutation of ``range(len(candidates))``)."""
        ...


def listwise_rerank(
    query: str,
    results: list[Hit],
    judge: ListwiseJudge,
    *,
    top_n: int = DEFAULT_TOP_N,
    report: list[str] | None = None,
) -> list[Hit]:
    """Reorder the open hits among the first ``top_n`` by the judge's answer.

    Args:
        query: the user query, passed to the judge verbatim.
        results: hits in fused (RRF) order.
        judge: the :class:`ListwiseJudge`; only open candidates' texts reach it.
        top_n: how many leading hits take part; hits after them keep their places.
            A value below 1 reorders nothing.
        report: when given, one line is appended saying what the judge's answer did (a
            full or partial order, or why the fused order was kept) — ``explain``'s note.

    Returns:
        A new list holding the same ``Hit`` objects. RESTRICTED hits keep their index;
        open hits among the first ``top_n`` fill the open slots in the judge's order.
        On any judge exception, or an answer that is not a permutation of the open
        candidates, the input order is returned unchanged. Never raises.
    """
    ordered = list(results)
    say = report.append if report is not None else (lambda note: None)
    try:
        limit = max(0, int(top_n))
    except (TypeError, ValueError):
        return ordered
    open_slots = [i for i, hit in enumerate(ordered[:limit]) if not hit.chunk.is_restricted]
    if not open_slots:
        say("listwise: no open candidate; judge not asked")
        return ordered
    candidates = [passage_text(ordered[i]) for i in open_slots]
    try:
        answer = judge.judge(query, list(candidates))
        permutation = _as_permutation(answer, len(candidates))
    except Exception as exc:  # noqa: BLE001 — any judge failure degrades to the fused order
        say(f"listwise: judge failed ({type(exc).__name__}): fused (RRF) order kept")
        return ordered
    if permutation is None:
        say("listwise: the judge's answer is not a permutation of the candidates: fused (RRF) order kept")
        return ordered
    say(f"listwise: {getattr(answer, 'how', '') or f'judge ordered {len(candidates)} candidates'}")
    reranked = list(ordered)
    for slot, pick in zip(open_slots, permutation):
        reranked[slot] = ordered[open_slots[pick]]
    return reranked


def _as_permutation(answer: object, n: int) -> list[int] | None:
    """``answer`` as a permutation of ``range(n)``, or ``None`` when it is anything else."""
    if not isinstance(answer, (list, tuple)) or len(answer) != n:
        return None
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in answer):
        return None
    if sorted(answer) != list(range(n)):
        return None
    return list(answer)


def build_listwise_prompt(
    query: str,
    candidates: Sequence[str],
    *,
    max_passage_chars: int = DEFAULT_MAX_PASSAGE_CHARS,
) -> list[dict[str, Any]]:
    """Chat messages asking a model to rank ``candidates`` for ``query``.

    Passages are labelled ``[0]`` … ``[n-1]``; the model is asked to answer with the
    labels alone, best first, as ``[2] > [0] > [1]`` (a JSON list is accepted too, see
    :func:`parse_listwise_response`).
    """
    n = len(candidates)
    lines = []
    for i, text in enumerate(candidates):
        flat = " ".join(str(text).split())
        if len(flat) > max_passage_chars:
            flat = flat[:max_passage_chars].rstrip() + " …"
        lines.append(f"[{i}] {flat}")
    example = " > ".join(f"[{i}]" for i in ([2, 0, 1] if n >= 3 else list(range(n))[::-1]))
    system = (
        "You are a search relevance judge. You receive a query and numbered passages, and "
        "you order the passages from most to least useful for answering the query. "
        "Reply with the passage labels only, every label exactly once, most relevant "
        f"first, in the form {example}. Write no explanation."
    )
    user = (
        f"Query: {' '.join(str(query).split())}\n\n"
        f"Passages ({n}):\n" + "\n".join(lines) + "\n\n"
        f"Rank all {n} passages by relevance to the query."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_CODE_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_JSON_INT_LIST = re.compile(r"\[\s*\d+\s*(?:,\s*\d+\s*)*\]")
_BRACKETED_ID = re.compile(r"\[\s*(-?\d+)\s*\]")
_BARE_LIST = re.compile(r"[\d\s,>;|]+")


def parse_listwise_response(text: str, n_candidates: int) -> list[int]:
    """Turn a judge's reply into a permutation of ``range(n_candidates)``.

    Accepted forms, tried in this order: a JSON list of indices (``[2, 0, 1]``, also
    inside a code fence or surrounded by prose), labels in order (``[2] > [0] > [1]``,
    possibly inside prose), and a bare list of numbers (``2, 0, 1`` or ``2 > 0 > 1``).
    Repeated indices keep their first occurrence.

    Decision on partial answers: if every index found is in range, indices the reply
    left out are appended in their original order (models often stop after the best
    few). A reply with no index, or with any index out of range (it is then unclear
    what the model meant), yields the identity order.
    """
    return parse_listwise_detail(text, n_candidates)[0]


def parse_listwise_detail(text: str, n_candidates: int) -> tuple[list[int], str]:
    """:func:`parse_listwise_response` and a note saying how the reply was read: a full
    order, a partial one (the rest kept in fused order), repeated ids dropped, or why no
    order could be read (the identity: the fused order stays)."""
    n = int(n_candidates)
    identity = list(range(max(n, 0)))
    if n <= 0 or not isinstance(text, str):
        return identity, "judge answered no text: fused (RRF) order kept"
    found = _indices_in(_CODE_FENCE.sub("", text.strip()))
    if not found:
        return identity, "judge answered no ranking: fused (RRF) order kept"
    if any(i < 0 or i >= n for i in found):
        return identity, f"judge named a passage outside [0]..[{n - 1}]: fused (RRF) order kept"
    order: list[int] = []
    seen: set[int] = set()
    for i in found:
        if i not in seen:
            seen.add(i)
            order.append(i)
    ranked = len(order)
    order.extend(i for i in identity if i not in seen)
    notes = []
    if ranked < n:
        notes.append(f"judge ranked {ranked} of {n}; the rest keep their fused order")
    else:
        notes.append(f"judge ordered all {n}")
    if len(found) > ranked:
        notes.append(f"{len(found) - ranked} repeated id(s) ignored")
    return order, "; ".join(notes)


class JudgedOrder(list[Any]):
    """A judge's order (a list of candidate indices) with ``how`` it was read from the reply."""

    how: str = ""


def _indices_in(text: str) -> list[int]:
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):  # e.g. {"ranking": [2, 0, 1]}
        parsed = next((v for v in parsed.values() if isinstance(v, list)), None)
        if parsed is None:
            return []
    if isinstance(parsed, int) and not isinstance(parsed, bool):
        return [parsed]
    if isinstance(parsed, list):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in parsed):
            return list(parsed)
        if all(isinstance(v, str) and v.strip().isdigit() for v in parsed):
            return [int(v) for v in parsed]
        return []
    if parsed is not None:
        return []
    match = _JSON_INT_LIST.search(text)
    if match and "," in match.group(0):
        return [int(v) for v in re.findall(r"\d+", match.group(0))]
    labels = _BRACKETED_ID.findall(text)
    if labels:
        return [int(v) for v in labels]
    if _BARE_LIST.fullmatch(text):
        return [int(v) for v in re.findall(r"\d+", text)]
    return []


class ProviderListwiseJudge:
    """A :class:`ListwiseJudge` backed by an :class:`~ragspine_core.llm.LLMProvider`.

    One ``provider.chat`` call per judgement: build the prompt, ask, parse. Provider
    errors propagate; :func:`listwise_rerank` turns them into the fused order.
    """

    def __init__(
        self,
        provider: "LLMProvider",
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        max_passage_chars: int = DEFAULT_MAX_PASSAGE_CHARS,
    ) -> None:
        from ragspine_core.llm import feature_max_tokens

        self.provider = provider
        self.temperature = temperature
        self.max_tokens = feature_max_tokens("listwise") if max_tokens is None else max_tokens
        self.max_passage_chars = max_passage_chars

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        messages = build_listwise_prompt(query, candidates, max_passage_chars=self.max_passage_chars)
        reply = self.provider.chat(messages, temperature=self.temperature, max_tokens=self.max_tokens)
        order, how = parse_listwise_detail(reply, len(candidates))
        out = JudgedOrder(order)
        out.how = how
        return out


class ListwiseReranker:
    """The LLM judge behind the :class:`~ragspine_query.rerank.reranker.Reranker` verb.

    ``rank`` reorders only (a judge gives an order, not scores): hits are returned
    unchanged, with no ``rerank`` score. ``top_n=None`` means this reranker's own
    ``top_n`` (:data:`DEFAULT_TOP_N` unless given), to bound the prompt size.
    """

    #: Lets a retriever tell the judge from a local model (see ``make_reranker``).
    is_listwise = True

    def __init__(self, judge: ListwiseJudge, *, top_n: int = DEFAULT_TOP_N) -> None:
        self.judge = judge
        self.top_n = top_n

    def rank(self, query: str, hits: list[Hit], *, top_n: int | None = None, report: list[str] | None = None) -> list[Hit]:
        return listwise_rerank(query, hits, self.judge, top_n=self.top_n if top_n is None else top_n, report=report)
