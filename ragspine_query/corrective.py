"""Corrective retrieval (CRAG, Yan et al., "Corrective Retrieval Augmented Generation", 2024),
with the Cortex seed's grading rules (``EvaluateCRAG``): grade the retrieved set, then act.

Grades, by the set's confidence ``c`` in [0, 1]: ``correct`` (c >= ``high``, 0.65),
``incorrect`` (c < ``low``, 0.30), ``ambiguous`` between. Hits under the noise floor are
stripped from what is returned.

* **static mode** (scores on a known scale): a hit's confidence is its normalised native
  signal (:func:`~ragspine_query.score_normalization.normalize_score`: cosine clamped to [0, 1] —
  negative cosine counts as 0 — and BM25 by ``x/(1+x)``), the best signal it has; the
  set's confidence is its best hit's; the floor is absolute (``floor``, 0.10).
* **dynamic mode** (RRF-scale scores, the default: fused ranks carry no absolute
  scale): the set's confidence is the *agreement of the channels* on the top of the
  fused list — for each of the top ``agree_top`` hits, the share of channels that also
  rank it within their own top ``agree_top`` — and the floor is relative: hits under
  ``floor × best fused score`` (an elbow) are stripped. With one channel there is
  nothing to agree on and the static rule grades its native scores.

The loop is bounded and in the seed's order (drop-filters → rewrite → refuse): a set
graded ``correct`` is used; otherwise at most two corrective actions run, each graded —
drop the extracted filters (the caller's own only when ``relax_caller_filters``: a caller's
filter is a constraint), then rewrite the query (LLM when
given, else the deterministic keyword form); widening to every channel (undoing an
adaptive tier's restriction) stands in when one of them does not apply. The best-graded
set is used (``needs_refinement`` unless it is ``correct``); if even that is
``incorrect`` the query is refused with a structured :class:`~ragspine_core.gate.Refusal`.
The default grader of :func:`~ragspine_query.builder.build_pipeline` is the
relevance grader (:class:`~ragspine_query.assessment.RelevanceGrader`: how well the top
hits match the query); the ``dynamic``/``static`` rules above remain selectable. An
optional LLM grader (:class:`LLMGrader`) judges instead; it is shown only
non-RESTRICTED passages, and its failure falls back to the rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ragspine_query.assessment import Confidence, Grade, default_tier
from ragspine_query.score_normalization import normalize_score
from ragspine_core.errors import ConfigError
from ragspine_core.gate import Refusal
from ragspine_query.pipeline.explain import hit_candidates, now
from ragspine_query.pipeline.runner import QueryPipeline, stages_of
from ragspine_query.pipeline.stages import Stage
from ragspine_query.pipeline.state import QueryState
from ragspine_query.pipeline.trace import current_tracer
from ragspine_query.source import Source
from ragspine_core.records import Hit
from ragspine_core.text.tokenize import ENGLISH_STOP_WORDS
from ragspine_query.transforms.transform import (MAX_QUERY_CHARS, ChannelQuery, ask_llm, feature_max_tokens, reply_lines,
                                                 same_language_lines)

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

GRADES = ("correct", "ambiguous", "incorrect")
_NOT_CHANNELS = frozenset({"fused", "rerank", "judge"})


@dataclass(frozen=True, slots=True)
class CRAGConfig:
    """Thresholds of the grader (the seed's ``CRAGConfig``)."""

    high: float = 0.65
    low: float = 0.30
    floor: float = 0.10
    dynamic: bool = True
    agree_top: int = 3
    max_rounds: int = 2

    def __post_init__(self) -> None:
        if not (0.0 <= self.low <= self.high <= 1.0):
            raise ConfigError(f"CRAG thresholds need 0 <= low <= high <= 1, got low={self.low}, high={self.high}")
        if not (0.0 <= self.floor < 1.0):
            raise ConfigError(f"CRAG floor must be in [0, 1), got {self.floor}")
        if self.agree_top < 1 or self.max_rounds not in (1, 2):
            raise ConfigError(f"agree_top must be >= 1 and max_rounds 1 or 2, got {self.agree_top}, {self.max_rounds}")


def default_crag_config() -> CRAGConfig:
    """Static scores (the seed's ``DefaultCRAGConfig``): absolute floor 0.10."""
    return CRAGConfig(dynamic=False)


def dynamic_crag_config() -> CRAGConfig:
    """RRF-scale scores (the seed's ``DynamicCRAGConfig``): channel agreement, relative floor 0.25."""
    return CRAGConfig(floor=0.25, dynamic=True)


def _channels(hits: list[Hit]) -> list[str]:
    names = sorted({k for h in hits for k, v in h.scores.items() if k not in _NOT_CHANNELS and v})
    return names


def hit_confidence(hit: Hit) -> float:
    """The hit's best normalised native signal (``vector`` dense, ``bm25`` lexical, others dense-like)."""
    best = 0.0
    for name, v in hit.scores.items():
        if name in _NOT_CHANNELS or v is None:
            continue
        signal = "lexical" if name == "bm25" else "dense"
        best = max(best, normalize_score(signal, max(float(v), 0.0)))
    return best


def grade_hits(hits: list[Hit], config: CRAGConfig) -> tuple[Grade, list[Hit]]:
    """Grade a retrieved set by the rules; returns the grade and the hits above the floor."""
    if not hits:
        return Grade("incorrect", 0.0, 0, "nothing retrieved"), []
    channels = _channels(hits)
    if config.dynamic and len(channels) >= 2:
        n = config.agree_top
        tops = {}
        for c in channels:
            ranked = sorted(range(len(hits)), key=lambda i: (-float(hits[i].scores.get(c, 0.0) or 0.0), i))
            tops[c] = {i for i in ranked[:n] if hits[i].scores.get(c)}
        head = range(min(n, len(hits)))
        conf = sum(sum(i in tops[c] for c in channels) / len(channels) for i in head) / len(head)
        best = float(hits[0].score)
        kept = [h for h in hits if best <= 0 or float(h.score) >= config.floor * best]
        how = f"dynamic: agreement of {', '.join(channels)} on the top {len(head)}"
    else:
        confs = [hit_confidence(h) for h in hits]
        conf = max(confs)
        kept = [h for h, c in zip(hits, confs) if c >= config.floor]
        how = "static: normalised " + ("/".join(channels) or "scores")
    grade = "correct" if conf >= config.high else ("incorrect" if conf < config.low else "ambiguous")
    return Grade(grade, float(conf), len(kept), how), kept


GRADER_SYSTEM = ("You judge whether retrieved passages can answer a search query. Answer with one word: correct (they "
                 "answer it), ambiguous (partly relevant), or incorrect (irrelevant).")


class LLMGrader:
    """Grades with an LLM over the top ``n`` passages (RESTRICTED ones are never shown);
    a failure or an unusable answer falls back to the rules."""

    def __init__(self, provider: LLMProvider | None, *, n: int = 5, max_chars: int = 500) -> None:
        if provider is None:
            raise ConfigError("the LLM grader needs an LLM provider: set RAGSPINE_LLM_BASE_URL and RAGSPINE_LLM_MODEL, "
                              "or use corrective=dynamic / static")
        self.provider, self.n, self.max_chars = provider, n, max_chars

    def __call__(self, query: str, hits: list[Hit], config: CRAGConfig) -> tuple[Grade, list[Hit]]:
        rule, kept = grade_hits(hits, config)
        shown = [h for h in hits if not h.chunk.is_restricted][: self.n]
        if not shown:
            return rule, kept
        passages = "\n".join(f"[{i}] {' '.join(h.chunk.text.split())[: self.max_chars]}" for i, h in enumerate(shown))
        reply, note = ask_llm(self.provider, GRADER_SYSTEM, f"Query: {query}\n\nPassages:\n{passages}",
                              max_tokens=feature_max_tokens("grader"))
        word = reply.strip().lower().split()[0].strip(".:,") if reply and reply.split() else ""
        if word not in GRADES:
            return Grade(rule.grade, rule.confidence, rule.kept, f"{rule.how}; LLM grader: {note or 'no grade in the answer'}"), kept
        conf = {"correct": 1.0, "ambiguous": 0.5, "incorrect": 0.0}[word]
        return Grade(word, conf, len(kept), "LLM grader"), kept


_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_ASK = frozenset("what which who whom whose when where why how does do did is are was were can could should would will "
                 "tell me please explain describe find show list give".split())


def refine_query(query: str) -> str:
    """The seed's ``RefineAgentCRAGQuery``: the query's content words (no question or stop
    words), at most :data:`~ragspine_query.transforms.transform.MAX_QUERY_CHARS` characters."""
    words = [w for w in _WORD.findall(str(query)) if w.casefold() not in ENGLISH_STOP_WORDS and w.casefold() not in _ASK]
    return " ".join(words)[:MAX_QUERY_CHARS]


REWRITE_SYSTEM = ("Rewrite the search query so that a search engine finds better passages: keep its meaning, use precise "
                  "keywords. Answer with the rewritten query only.")


class CorrectiveStage(Stage):
    """The bounded grade→act loop as one stage, listed after the retrieval stages.

    The seed's order: grade; unless ``correct``, act — **drop the filters** (extracted
    ones; the caller's own only with ``relax_caller_filters``), then **rewrite** the query (LLM when given, else
    :func:`refine_query`), at most ``config.max_rounds`` (2) actions, each graded; a
    *widen* to every channel stands in for a missing action when an adaptive tier had
    restricted the channels. Each action runs the stages listed before this one again
    (:meth:`~ragspine_query.pipeline.state.QueryState.rerun`). The best-graded set is
    used; if even that is ``incorrect`` the query is **refused**
    (``Refusal(kind="low_confidence")``).

    With ``act=False`` nothing is retried, stripped or refused: the result is graded only,
    so that it carries ``confidence`` and ``needs_refinement`` (the default pipeline).

    Args:
        source: the retriever the stages search (its default tier tells whether a tier restricted the channels).
        config: grading thresholds (default: :func:`dynamic_crag_config`).
        grader: ``(query, hits, config) -> (Grade, kept)``; default the score rules
            (:func:`grade_hits`); :class:`~ragspine_query.assessment.RelevanceGrader` is what
            :func:`~ragspine_query.builder.build_pipeline` passes.
        provider: an LLM for the rewrite action (else the deterministic :func:`refine_query`).
        act: run the loop (True) or only grade (False).
        relax_caller_filters: let the drop-filters action drop the caller's own filters too
            (opt-in; default: only extracted ones). A result from a run that dropped any
            filter lists them in ``dropped_filters``.
    """

    name = "corrective"
    after_refusal = True

    def __init__(self, source: Source | None = None, *, config: CRAGConfig | None = None, grader: Any | None = None,
                 provider: LLMProvider | None = None, act: bool = True, relax_caller_filters: bool = False) -> None:
        self.source = source
        self.relax_caller_filters = relax_caller_filters
        self.config = config or dynamic_crag_config()
        self.grader = grader
        self.provider = provider
        self.act = act

    def _grade(self, query: str, hits: list[Hit], filters: Any = None) -> tuple[Grade, list[Hit]]:
        if self.grader is not None:
            if getattr(self.grader, "takes_filters", False):  # it reads the rows the run's filters allow
                return cast("tuple[Grade, list[Hit]]", self.grader(query, hits, self.config, filters=filters))
            return cast("tuple[Grade, list[Hit]]", self.grader(query, hits, self.config))
        return grade_hits(hits, self.config)

    def _rewrite(self, query: str) -> tuple[str | None, str]:
        rewritten, note = None, ""
        if self.provider is not None:
            reply, note = ask_llm(self.provider, REWRITE_SYSTEM, str(query), max_tokens=feature_max_tokens("rewrite"))
            lines, dropped = same_language_lines(str(query), reply_lines(reply, limit=1) if reply else [])
            rewritten = lines[0] if lines else None
            if reply is not None and rewritten is None:
                note = f"LLM rewrite unusable ({dropped or 'no line'}): content words"
        if rewritten is None:
            rewritten = refine_query(query)
        if rewritten and rewritten.casefold() != str(query).strip().casefold():
            return rewritten, f"rewritten{' (' + note + ')' if note else ''}"
        return None, ""

    def _actions(self, query: str, filters: Any, first: QueryState) -> list[tuple[str, Any, Any, bool, str]]:
        """``(action, query, filters, extract, note)`` in the seed's order: drop-filters, rewrite.

        Dropping filters drops the *extracted* ones; the caller's own filters are a
        constraint and are dropped only when ``relax_caller_filters`` is set."""
        acts: list[tuple[str, Any, Any, bool, str]] = []
        extracted = getattr(first.applied_filters, "outcome", "none") in ("applied", "blended", "filled")
        caller = bool(filters) and self.relax_caller_filters
        dropped = caller or extracted
        kept = None if caller else filters
        if dropped:
            what = " and ".join(x for x, on in (("the caller's filters", caller), ("the extracted filters", extracted)) if on)
            acts.append(("drop_filters", query, kept, False, f"retry without {what}"))
        rewritten, note = self._rewrite(query)
        if rewritten is not None:
            acts.append(("rewrite", rewritten, kept if dropped else filters, not dropped, note))
        if len(acts) < self.config.max_rounds:

            tier = first.tier
            if tier is not None and tier != default_tier(self.source):  # an adaptive tier restricted the channels
                acts.append(("widen", ChannelQuery(str(query), channels=None, origin="crag:widen", pinned=True),
                             kept if dropped else filters, not dropped, "every channel"))
        return acts[: self.config.max_rounds]

    @staticmethod
    def _dropped(first: QueryState, filters: Any, f2: Any, extract: bool, g1: Grade) -> tuple[dict[str, Any], ...]:
        """The filters a corrective rerun (``f2``, ``extract``) runs without, as records."""
        from ragspine_query.pipeline.state import dropped_filter_records

        why = f"corrective retrieval: the first result graded {g1.grade} ({g1.confidence:.2f})"
        out: tuple[dict[str, Any], ...] = ()
        if filters and not f2:
            out += dropped_filter_records(filters, "caller", why)
        ex = first.extraction
        if not extract and ex is not None and getattr(first.applied_filters, "outcome", "none") in ("applied", "blended", "filled"):
            out += dropped_filter_records([p.predicate for p in ex[1]], "extracted", why)
        return out

    @staticmethod
    def _annotate(out: QueryState, chosen: QueryState, grade: Grade) -> QueryState:

        for name in ("tier", "applied_filters"):  # what the chosen run says (SearchResult.carry: not None)
            value = getattr(chosen, name)
            if value is not None:
                setattr(out, name, value)
        out.dropped_filters = tuple(chosen.dropped_filters)
        out.confidence = Confidence.of(grade)
        out.needs_refinement = out.confidence.needs_refinement
        return out

    def __call__(self, state: QueryState) -> QueryState:

        tracer = current_tracer()
        query, filters = state.query, state.caller_filters
        if state.refusal is not None:
            state.hits = []
            state.confidence = Confidence("low", 0.0, f"refused ({state.refusal.kind})")
            state.needs_refinement = True
            return state
        t0 = now()
        g1, kept1 = self._grade(query, list(state.hits), state.filters)
        tracer.add("grade", "crag:1" if self.act else "confidence", now() - t0,
                   lambda: hit_candidates(kept1 if self.act else list(state.hits)), query=query, detail=g1.describe)
        if not self.act:
            return self._annotate(state, state, g1)
        best = (g1, kept1, state)
        tried: list[str] = []
        if g1.grade != "correct":
            for rnd, (action, q2, f2, extract, note) in enumerate(self._actions(query, filters, state), start=2):
                tried.append(action)
                tracer.add("correct", action, 0.0, query=str(q2), detail=note)
                res2 = state.rerun(q2, f2, extract=extract)
                if res2.refusal is not None:  # e.g. an LLM rewrite that names a competitor
                    continue
                res2.dropped_filters = tuple(res2.dropped_filters) + self._dropped(state, filters, f2, extract, g1)
                t0 = now()
                g2, kept2 = self._grade(str(q2), list(res2.hits), res2.filters)
                tracer.add("grade", f"crag:{rnd}", now() - t0, lambda: hit_candidates(kept2), query=str(q2), detail=g2.describe)
                if g2.confidence > best[0].confidence or (g2.grade == "correct" and best[0].grade != "correct"):
                    best = (g2, kept2, res2)
                if best[0].grade == "correct":
                    break
        grade, kept, chosen = best
        out = QueryState(query, filters, state.top_k, state.include_restricted)
        out.tier, out.applied_filters = None, None
        if grade.grade == "incorrect":
            out.refusal = Refusal("low_confidence", f"the retrieved passages do not support an answer (confidence "
                                  f"{grade.confidence:.2f} < {self.config.low}"
                                  + (f" after {', then '.join(a.replace('_', ' ') for a in tried)}" if tried else "")
                                  + "); rephrase the query or widen the libraries", str(query))
            return self._annotate(out, chosen, grade)
        out.hits = kept
        return self._annotate(out, chosen, grade)


class CorrectiveRetrieval(QueryPipeline):
    """``pipeline``'s stage list followed by a :class:`CorrectiveStage` (a pipeline that is
    not a :class:`~ragspine_query.pipeline.runner.QueryPipeline` runs as one stage), so
    ``CorrectiveRetrieval(p).run(…)`` has the pipeline's signature.
    :func:`~ragspine_query.builder.build_pipeline` lists the stage directly.

    Args:
        pipeline: a :class:`~ragspine_query.pipeline.runner.QueryPipeline` (possibly with
            filter extraction) or anything with ``run(query, *, filters, top_k, include_restricted, explain)``.
        config, grader, provider, act, relax_caller_filters: the :class:`CorrectiveStage`'s.
    """

    def __init__(self, pipeline: Any, *, config: CRAGConfig | None = None, grader: Any | None = None, provider: LLMProvider | None = None,
                 act: bool = True, relax_caller_filters: bool = False) -> None:
        self.pipeline = pipeline
        source, stages = stages_of(pipeline)
        self.stage = CorrectiveStage(source, config=config, grader=grader, provider=provider, act=act,
                                     relax_caller_filters=relax_caller_filters)
        self._init_from(source, stages + [self.stage])

    @property
    def config(self) -> CRAGConfig:
        return self.stage.config


__all__ = ["CRAGConfig", "CorrectiveRetrieval", "CorrectiveStage", "GRADES", "Grade", "LLMGrader", "default_crag_config", "dynamic_crag_config",
           "grade_hits", "hit_confidence", "refine_query"]
