"""Our keyword index's BM25 against rank-bm25's BM25Okapi on the same tokens (issue 5).

Both are Okapi BM25 with k1 = 1.5, b = 0.75, document length = number of terms and avgdl = mean
length over the scope's documents. Known differences, pinned down by the tests below:
  - idf: production uses Lucene's ln(1 + (N - df + 0.5) / (df + 0.5)), always positive
    (keyword_index.lucene_idf). BM25Okapi uses ln((N - df + 0.5) / (df + 0.5)) and replaces a
    negative value (a term in more than half the documents) by 0.25 * the average idf (its
    "epsilon" trick). So: (1) with `idf=okapi_idf` our scores equal BM25Okapi's on a corpus where
    no query term is in more than half the documents; (2) production scores equal a BM25Okapi
    whose idf is swapped for Lucene's, on any corpus; (3) past half the documents, okapi_idf is
    negative and BM25Okapi's is epsilon * mean idf (> 0) — a documented difference, not a bug.
  - repeated query terms: BM25Okapi adds a term once per occurrence in the query; we score each
    distinct query term once. Queries here have distinct terms.
Our statistics are the user's own corpus (partition), so another user's documents must not
change the scores: user "u"'s corpus is compared with a BM25Okapi over that corpus alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from rank_bm25 import BM25Okapi

from offline_mem import Memory
from offline_mem.pinned.nlp import Analysis, TextAnalyzer
from offline_mem.store.bm25 import bm25_scores
from offline_mem.store.filters import compile_filters
from offline_mem.store.keyword_index import IdfFunction, lucene_idf, okapi_idf, query_stats
from offline_mem.testing import FakeEmbedder

# Each document is its keyword terms, space-separated (the analyser below splits on spaces).
CORPUS = [
    "dentist okonkwo crown molar upper left",
    "locker 4417 gym key lost",
    "theremin practice evening january theremin",
    "okonkwo invoice crown payment",
    "gym membership renew january price",
    "kohlrabi allotment harvest soup",
    "locker 2210 swimming pool key",
    "piano lesson wednesday evening teacher",
    "crown jewel exhibition tower london museum visit",
    "soup recipe kohlrabi celeriac winter",
    "rent increase september landlord letter",
    "passport renewal form photo office",
]
OTHER_USER = [
    "okonkwo okonkwo okonkwo crown",
    "gym gym locker locker theremin",
    "kohlrabi kohlrabi kohlrabi",
]
QUERIES = [
    ["okonkwo", "crown"],
    ["locker", "4417"],
    ["theremin", "evening"],
    ["kohlrabi", "soup", "winter"],
    ["gym", "january", "key"],
    ["crown", "museum", "unknownword"],
]


class SplitAnalyzer(TextAnalyzer):
    """Terms are the text split on spaces: the exact tokens BM25Okapi gets."""

    def analyze_batch(self, texts: Sequence[str]) -> list[Analysis]:
        return [Analysis(terms=t.split(), tokens=t.split()) for t in texts]


@pytest.fixture
def indexed(db_path: str) -> Iterator[Memory]:
    memory = Memory({"path": db_path, "nlp": None}, embedder=FakeEmbedder(),
                    analyzer=SplitAnalyzer())  # fmt: skip
    memory.add([{"role": "user", "content": t} for t in CORPUS], user_id="u", infer=False)
    memory.add([{"role": "user", "content": t} for t in OTHER_USER], user_id="v", infer=False)
    yield memory
    memory.close()


def our_scores(memory: Memory, terms: list[str], idf: IdfFunction) -> dict[str, float]:
    """BM25 of every memory of user u holding a query term, keyed by memory text."""
    where = compile_filters({"user_id": "u"})
    sql, params = memory.store.search_filter(where)
    stats = query_stats(memory.store.db, terms, "u", idf=idf)
    scores = bm25_scores(memory.store.db, stats, "u", sql, params)
    records = memory.store.records_by_rowid(list(scores))
    return {records[rowid].text: score for rowid, score in scores.items()}


class LuceneIdfOkapi(BM25Okapi):
    """BM25Okapi with Lucene's idf: the reference for the production formula."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        for word, freq in nd.items():
            self.idf[word] = lucene_idf(self.corpus_size, freq)


def reference_scores(terms: list[str], reference: type[BM25Okapi] = BM25Okapi) -> dict[str, float]:
    okapi = reference([doc.split() for doc in CORPUS], k1=1.5, b=0.75)
    return {doc: float(s) for doc, s in zip(CORPUS, okapi.get_scores(terms), strict=True) if s}


def assert_same(ours: dict[str, float], reference: dict[str, float]) -> None:
    assert set(ours) == set(reference)
    for text, score in reference.items():
        assert ours[text] == pytest.approx(score, rel=1e-9, abs=1e-12)
    ranking = sorted(ours, key=lambda t: (-ours[t], CORPUS.index(t)))
    assert ranking == sorted(reference, key=lambda t: (-reference[t], CORPUS.index(t)))


def test_corpus_keeps_every_query_term_under_half_the_documents() -> None:
    for terms in QUERIES:
        assert len(set(terms)) == len(terms)
        for term in terms:
            assert sum(term in doc.split() for doc in CORPUS) < len(CORPUS) / 2


@pytest.mark.parametrize("terms", QUERIES, ids=["-".join(q) for q in QUERIES])
def test_okapi_idf_scores_and_ranking_equal_bm25okapi(indexed: Memory, terms: list[str]) -> None:
    assert_same(our_scores(indexed, terms, okapi_idf), reference_scores(terms))


@pytest.mark.parametrize("terms", QUERIES, ids=["-".join(q) for q in QUERIES])
def test_production_scores_equal_bm25okapi_with_lucene_idf(
    indexed: Memory, terms: list[str]
) -> None:
    """The path search uses (Store.keyword_stats / keyword_candidates, default idf)."""
    where = compile_filters({"user_id": "u"})
    stats = indexed.store.keyword_stats(terms, where)
    scores = indexed.store.keyword_candidates(stats, where, indexed.store.search_filter(where))
    records = indexed.store.records_by_rowid(list(scores))
    ours = {records[rowid].text: score for rowid, score in scores.items()}
    assert_same(ours, reference_scores(terms, LuceneIdfOkapi))


def test_limit_keeps_the_best(indexed: Memory) -> None:
    where = compile_filters({"user_id": "u"})
    stats = indexed.store.keyword_stats(["crown", "okonkwo"], where)
    condition = indexed.store.search_filter(where)
    top = indexed.store.keyword_candidates(stats, where, condition, limit=2)
    texts = [indexed.store.records_by_rowid([r])[r].text for r in top]
    reference = reference_scores(["crown", "okonkwo"], LuceneIdfOkapi)
    assert texts == sorted(reference, key=lambda t: -reference[t])[:2]


def test_documented_difference_past_half_the_documents(db_path: str) -> None:
    """A term in 3 of 4 documents: okapi_idf is negative, BM25Okapi's is epsilon * mean idf
    (> 0), and production's Lucene idf is small but positive."""
    docs = ["common alpha", "common beta", "common gamma", "delta"]
    memory = Memory({"path": db_path, "nlp": None}, embedder=FakeEmbedder(),
                    analyzer=SplitAnalyzer())  # fmt: skip
    memory.add([{"role": "user", "content": t} for t in docs], user_id="u", infer=False)
    okapi = BM25Okapi([d.split() for d in docs])
    assert okapi.idf["common"] == pytest.approx(0.25 * okapi.average_idf)
    assert okapi_idf(4, 3) < 0 < okapi.idf["common"]
    stats = query_stats(memory.store.db, ["common"], "u")
    assert stats.idf == {"common": pytest.approx(lucene_idf(4, 3))}
    assert 0 < lucene_idf(4, 3) < lucene_idf(4, 1)
    memory.close()
