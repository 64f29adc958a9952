"""Ranking: three signals combined into one score on a fixed scale. Pure, no I/O.

Each signal is first put on [0, 1] with a meaning that does not depend on the query:
  semantic = cosine similarity of query and memory embeddings, clipped at 0;
  keyword  = BM25 / (BM25 of an average-length memory holding each query term once, terms
             absent from the scope included), capped at 1 — "how much of the query's keyword
             evidence this memory carries";
  entity   = share of the query's known entities (those linked to some visible memory of the
             scope) that this memory is linked to.
The final score is the weighted sum with weights that sum to 1, so it lies in [0, 1] and a
threshold means the same for every query. (Mem0 divides by a per-query maximum, so its scale
shifts with whether any keyword or entity matched at all.)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from ..errors import ValidationError

T = TypeVar("T")


@dataclass(frozen=True)
class Weights:
    """Defaults from the sweep in docs/results/retrieval.md: every setting with a keyword
    weight above 0.05 lost paraphrase queries to memories sharing one common word, while 0.05
    still lifts number queries (recall@5 0.88 -> 0.96) and entity links carry names."""

    semantic: float = 0.6
    keyword: float = 0.05
    entity: float = 0.35

    def __post_init__(self) -> None:
        values = (self.semantic, self.keyword, self.entity)
        if any(v < 0 for v in values) or abs(sum(values) - 1.0) > 1e-9:
            raise ValidationError(f"ranking weights must be >= 0 and sum to 1, got {values}")


@dataclass(frozen=True)
class Signals:
    """The raw evidence for one candidate (None: the signal has nothing for it)."""

    rowid: int
    cosine: float | None = None
    bm25: float | None = None
    entity_matches: int = 0


@dataclass(frozen=True)
class Ranked:
    rowid: int
    score: float
    semantic: float
    keyword: float
    entity: float
    bm25: float
    # the rowid of the replaced memory whose score this one carries (carry_to_replacements)
    carried_from: int | None = None

    def explain(self, weights: Weights, threshold: float | None) -> dict[str, float | None]:
        return score_details(self, weights, threshold, bm25=self.bm25)


class Scored(Protocol):
    @property
    def score(self) -> float: ...
    @property
    def semantic(self) -> float: ...
    @property
    def keyword(self) -> float: ...
    @property
    def entity(self) -> float: ...


def score_details(
    item: Scored, weights: Weights, threshold: float | None, *, bm25: float | None = None
) -> dict[str, float | None]:
    """`explain=True`'s `score_details`: each signal on [0, 1], its weight, the final score."""
    details: dict[str, float | None] = {
        "semantic_score": round(item.semantic, 6),
        "keyword_score": round(item.keyword, 6),
    }
    if bm25 is not None:
        details["bm25_score"] = round(bm25, 6)
    return details | {
        "entity_score": round(item.entity, 6),
        "semantic_weight": weights.semantic,
        "keyword_weight": weights.keyword,
        "entity_weight": weights.entity,
        "final_score": round(item.score, 6),
        "max_possible_score": 1.0,
        "threshold": threshold,
    }


def keyword_share(bm25: float, ideal: float) -> float:
    """A BM25 score on [0, 1]: its share of the ideal (see the module's docstring), capped."""
    return min(1.0, bm25 / ideal) if ideal > 0 else 0.0


def score_and_rank(
    candidates: Iterable[Signals],
    *,
    keyword_ideal: float,
    query_entities: int,
    weights: Weights,
    threshold: float | None,
    top_k: int,
) -> list[Ranked]:
    """Best first; ties broken by rowid (older first) so results are deterministic."""
    ranked = []
    for c in candidates:
        semantic = max(0.0, min(1.0, c.cosine or 0.0))
        bm25 = c.bm25 or 0.0
        keyword = keyword_share(bm25, keyword_ideal)
        entity = min(1.0, c.entity_matches / query_entities) if query_entities else 0.0
        score = weights.semantic * semantic + weights.keyword * keyword + weights.entity * entity
        if threshold is not None and score < threshold:
            continue
        ranked.append(Ranked(c.rowid, score, semantic, keyword, entity, bm25))
    ranked.sort(key=lambda r: (-r.score, r.rowid))
    return ranked[:top_k]


def carry_to_replacements(
    ranked: Sequence[Ranked], replacements: Mapping[int, int | None], top_k: int
) -> list[Ranked]:
    """A ranking of current memories from one that holds replaced ones too. A replaced memory
    (a key of `replacements`) leaves the ranking and the memory that replaces it now takes its
    score when that is higher than its own: it answers what the replaced one answered. A
    search for where someone lives finds "<name> lives in Lisbon" by its words; "<name> moved
    to Porto", which superseded it, shares few of them and would rank below the turns that
    still say Lisbon. A replaced memory with no visible replacement (None) is left out."""
    best: dict[int, Ranked] = {}
    for item in ranked:
        if item.rowid in replacements:
            successor = replacements[item.rowid]
            if successor is None:
                continue
            item = replace(item, rowid=successor, carried_from=item.rowid)
        held = best.get(item.rowid)
        if held is None or item.score > held.score:
            best[item.rowid] = item
    return sorted(best.values(), key=lambda r: (-r.score, r.rowid))[:top_k]


def interleave(
    rankings: Sequence[Sequence[T]], key: Callable[[T], Hashable], limit: int
) -> list[T]:
    """The rankings taken in turn, one item each (first ranking first), each item once, cut at
    `limit`. Unlike reciprocal rank fusion, an item two rankings share gains nothing: what
    matches both a question and its rewrite is the generic part they share."""
    seen: set[Hashable] = set()
    merged: list[T] = []
    for rank in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if rank < len(ranking) and key(ranking[rank]) not in seen:
                seen.add(key(ranking[rank]))
                merged.append(ranking[rank])
    return merged[:limit]
