"""The keyword top-k (bm25.bm25_scores with a limit) against brute force (issue 5).

The top-k pass skips the postings of terms in more than half the partition (MaxScore, with a
checked bound) and, with a user_id, checks the filter only on the rows it ranks; both fall back
to a full pass when their check fails. Whatever the path, the result must be exactly the best
`limit` memories passing the filter by BM25, ties broken by rowid, with the same scores as
BM25 computed from scratch over the partition. The corpora here are built to reach every path:
a term in every memory, a term in just over half, many equal scores, and a metadata filter
that rejects most memories.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from offline_mem import Memory
from offline_mem.pinned.nlp import Analysis, TextAnalyzer
from offline_mem.store import bm25
from offline_mem.store.filters import compile_filters
from offline_mem.testing import FakeEmbedder

MID = [f"mid{i}" for i in range(6)]
RARE = [f"rare{i}" for i in range(30)]


class SplitAnalyzer(TextAnalyzer):
    """Terms are the text split on spaces."""

    def analyze_batch(self, texts: Sequence[str]) -> list[Analysis]:
        return [Analysis(terms=t.split(), tokens=t.split()) for t in texts]


def corpus(seed: int, count: int) -> list[str]:
    """`every` in all documents, `half` in ~55%, `near` in ~45%, mid* in ~25% each, rare* in a
    few; a unique word per document (texts must differ), so equal scores come from equal term
    profiles."""
    rng = random.Random(seed)
    docs = []
    for i in range(count):
        words = ["every"] * rng.choice([1, 1, 2])
        if rng.random() < 0.55:
            words.append("half")
        if rng.random() < 0.45:
            words.append("near")
        words += [w for w in MID if rng.random() < 0.25]
        words += [w for w in RARE if rng.random() < 0.03]
        words += [w for w in MID[:2] if rng.random() < 0.1]  # some tf = 2
        words.append(f"only{i}")
        if rng.random() < 0.5:  # lengths vary, but many documents share one
            words.append(f"pad{i}")
        docs.append(" ".join(words))
    return docs


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path = str(tmp_path_factory.mktemp("topk") / "memory.db")
    memory = Memory({"path": path, "nlp": None}, embedder=FakeEmbedder(),
                    analyzer=SplitAnalyzer())  # fmt: skip
    rng = random.Random(7)
    for user, seed, count in (("u", 1, 240), ("v", 2, 60)):
        for text in corpus(seed, count):
            kind = "a" if rng.random() < 0.1 else "b"  # "a": a filter that rejects most
            agent = "g" if rng.random() < 0.5 else None
            memory.add([{"role": "user", "content": text}], user_id=user, agent_id=agent,
                       metadata={"kind": kind}, infer=False)  # fmt: skip
    yield memory
    memory.close()


def brute_force(
    memory: Memory, filters: dict[str, Any], terms: list[str], limit: int
) -> dict[int, float]:
    """BM25 from scratch: Lucene idf, statistics over the user's partition (every user's
    memories when the filter names no user_id), the filter applied to the scored memories."""
    rows = memory.store.db.query("SELECT rowid, text, user_id, agent_id, metadata FROM memories")
    user = filters.get("user_id")
    corpus_rows = [r for r in rows if user is None or r[2] == user]
    docs = {int(r[0]): r[1].split() for r in corpus_rows}
    n = len(docs)
    avg = sum(len(d) for d in docs.values()) / n
    query = sorted(set(terms))
    df = {t: sum(t in d for d in docs.values()) for t in query}
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in query if df[t]}

    def passes(row: Any) -> bool:
        meta = json.loads(row[4])
        return all(
            (row[2] if k == "user_id" else row[3] if k == "agent_id" else meta.get(k)) == v
            for k, v in filters.items()
        )

    scores = {}
    for row in corpus_rows:
        if not passes(row):
            continue
        counts = Counter(docs[int(row[0])])
        held = [t for t in idf if counts[t]]
        if held:
            length = len(docs[int(row[0])])
            scores[int(row[0])] = sum(
                idf[t] * counts[t] * 2.5 / (counts[t] + 1.5 * (0.25 + 0.75 * length / avg))
                for t in held
            )
    return dict(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit])


def ours(memory: Memory, filters: dict[str, Any], terms: list[str], limit: int) -> dict[int, float]:
    where = compile_filters(filters)
    stats = memory.store.keyword_stats(terms, where)
    return memory.store.keyword_candidates(
        stats, where, memory.store.search_filter(where), limit=limit
    )


def assert_same_top(got: dict[int, float], want: dict[int, float]) -> None:
    assert list(got) == list(want)  # same memories, same order (ties by rowid)
    for rowid, score in want.items():
        assert got[rowid] == pytest.approx(score, rel=1e-12, abs=1e-12)


QUERIES = [
    ["every"],
    ["every", "half"],
    ["every", "mid0"],
    ["every", "half", "mid1", "mid2"],
    ["half", "near"],  # rare terms that score less than the common one can add
    ["every", "half", "near", "rare4"],
    ["half", "mid3"],
    ["every", "rare3"],
    ["every", "half", "rare5", "rare6"],
    ["mid0", "mid1", "mid4"],
    ["rare1", "rare2", "unknownword"],
    ["every", "mid5", "rare9", "only17"],
]
LIMITS = [1, 3, 10, 60]
FILTERS = [
    {"user_id": "u"},
    {"user_id": "u", "kind": "a"},
    {"user_id": "u", "kind": "b"},
    {"user_id": "v"},
    {"agent_id": "g"},  # no user_id: no partition, the filter inside the ranking pass
    {"agent_id": "g", "kind": "a"},
]


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: "-".join(f"{k}={f[k]}" for k in f))
@pytest.mark.parametrize("terms", QUERIES, ids=["+".join(q) for q in QUERIES])
def test_top_k_is_the_brute_force_top_k(
    indexed: Memory, terms: list[str], filters: dict[str, Any], limit: int
) -> None:
    want = brute_force(indexed, filters, terms, limit)
    assert_same_top(ours(indexed, filters, terms, limit), want)


def test_only_rowids_also_rowids_and_all_match_brute_force(indexed: Memory) -> None:
    filters = {"user_id": "u", "kind": "b"}
    where = compile_filters(filters)
    condition = indexed.store.search_filter(where)
    terms = ["every", "half", "mid2"]
    stats = indexed.store.keyword_stats(terms, where)
    everything = brute_force(indexed, filters, terms, 10_000)
    scored = indexed.store.keyword_candidates(stats, where, condition)
    assert_same_top(dict(sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))), everything)
    asked = list(range(1, 400, 7))  # some pass the filter, some do not, some are other users'
    got = indexed.store.keyword_candidates(stats, where, condition, only_rowids=asked)
    assert got.keys() == {r for r in asked if r in everything}
    top = indexed.store.keyword_candidates(stats, where, condition, limit=10)
    assert list(top) == list(everything)[:10]
    both = indexed.store.keyword_candidates(stats, where, condition, limit=10, also_rowids=asked)
    assert both == {**top, **got}  # the top, plus the asked memories that pass and hold a term
    for rowid, score in [*got.items(), *top.items()]:
        assert score == scored[rowid]  # the same computation, whichever path found the memory


def test_the_cases_above_take_every_path(indexed: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pruned and unpruned passes, the filter after and inside the pass, and the deeper fetch
    when the margin reaches past the first rows: the parametrised cases cover each of them."""
    paths: Counter[str] = Counter()
    original = bm25._ranked

    def recording(db: Any, stats: Any, weights: Any, partition: Any, condition: Any, t: Any,
                  **kwargs: Any) -> Any:  # fmt: skip
        paths["pruned" if len(weights) < len(stats.idf) else "all terms"] += 1
        paths["filter inside" if condition is not None else "filter after"] += 1
        if kwargs.get("above") is not None:
            paths["deeper"] += 1
        return original(db, stats, weights, partition, condition, t, **kwargs)

    monkeypatch.setattr(bm25, "_ranked", recording)
    for terms in QUERIES:
        for filters in FILTERS:
            for limit in LIMITS:
                ours(indexed, filters, terms, limit)
    for path in ("pruned", "all terms", "filter inside", "filter after", "deeper"):
        assert paths[path] > 0, (path, dict(paths))


def test_ranking_pass_reads_postings_by_primary_key(indexed: Memory) -> None:
    """The index named by POSTINGS_KEY exists and is the one the ranking pass uses."""
    plan = indexed.store.db.query(
        "EXPLAIN QUERY PLAN SELECT tf FROM keyword_postings INDEXED BY "
        f"{bm25.POSTINGS_KEY} WHERE partition = ? AND term = ?",
        ("u", "every"),
    )
    assert any("PRIMARY KEY (partition=? AND term=?)" in row[3] for row in plan), plan
