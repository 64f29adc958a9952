"""Issue 5 search latency at scale, one process, warm, plus the keyword-engine comparison.

    .venv/bin/python benchmarks/retrieval/scale.py [--scenarios 10k,100k,1m] [--queries 200]
        [--engines] [--out benchmarks/results] [--keep DIR]

Scenarios (each its own memory file, built directly through the store's tables in big
transactions; vectors are random unit vectors, texts synthetic):
  10k   one scope of 10,000 memories                          target p50 <= 20 ms
  100k  one scope of 100,000 memories                         target p95 <= 100 ms
  1m    1,000 scopes, 1,000,000 memories: scope "s0000" is the same 10,000 memories as in 10k,
        the other 999 scopes hold 990,000 between them        target p50 within 1.5x of 10k

Texts: 4-14 content words drawn from a Zipf distribution (s = 1.07) over ~260 everyday words
followed by ~40,000 pseudo-words, with function words in between and, in half the memories, one
or two of the scope's 60 people (capitalised; linked as entities). Keyword terms are the content
words lowercased (the spaCy analyser is not run over a million texts; queries are analysed by the
real SpacyAnalyzer, so a query's terms are what search really sees). So postings lists have a
realistic long tail: a few terms in a large share of memories, most in very few.

Queries: 2-5 words from the same distribution, a person in a third of them. Each query is
embedded for real with all-MiniLM-L6-v2 (reported separately, as is the query's entity
extraction); `hybrid_search` gets that vector and runs analysis, the three signals and ranking.
The per-part breakdown times the store calls search makes (wrapped in this benchmark only).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.tables import table_path  # noqa: E402
from offline_mem.memory import Memory  # noqa: E402
from offline_mem.pinned.model_files import model_identity  # noqa: E402
from offline_mem.retrieval.search import SearchRequest, hybrid_search  # noqa: E402
from offline_mem.store.bm25 import bm25_scores  # noqa: E402
from offline_mem.store.filters import compile_filters  # noqa: E402
from offline_mem.store.keyword_index import query_stats  # noqa: E402
from offline_mem.store.store import Store  # noqa: E402
from offline_mem.values import EmbedderIdentity, Scope  # noqa: E402

DIM = 384
ZIPF_S = 1.07


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


COMMON = _words(
    "dinner lunch breakfast coffee tea meeting work office project report deadline email call "
    "phone doctor dentist appointment school kids son daughter wife husband partner mother "
    "father sister brother friend neighbour dog cat car bike train bus flight hotel trip "
    "holiday weekend monday tuesday wednesday thursday friday saturday sunday morning evening "
    "night birthday party gift book film movie music concert game football tennis running gym "
    "swim walk park garden house flat kitchen bathroom bedroom sofa table chair window door key "
    "lock rent bill bank money card payment tax insurance salary budget price shop market food "
    "pizza pasta rice bread cheese fruit apple wine beer water milk sugar salt recipe cook bake "
    "clean paint fix repair plumber electrician landlord manager colleague team client customer "
    "order delivery package parcel post letter passport visa ticket museum beach mountain lake "
    "river city village country language lesson class course exam study university teacher "
    "student homework piano guitar violin song photo camera laptop computer screen printer "
    "password account app website internet wifi router battery charger cable headphones jacket "
    "shoes shirt dress umbrella bag wallet watch glasses medicine allergy headache back knee "
    "tooth eye hospital clinic pharmacy vet plant tomato flower tree grass weather rain snow sun "
    "cold heat spring summer autumn winter january february march april may june july august "
    "september october november december year month week day hour minute plan idea problem"
)
FUNCTION = ("the", "a", "to", "and", "with", "for", "on", "at", "my", "in", "about", "of")
SYLLABLES = _words(
    "ba be bi bo bu da de di do du ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu "
    "ra re ri ro ru ta te ti to tu va ve vi vo vu za ze zi zo zu sha she shi sho tri tra bro "
    "bri pla ple gra gro fle fli mar tor len dor kin vel run"
)
FIRST = _words(
    "Marguerite Tobiah Annelise Ignatius Rosalind Thaddeus Philippa Leopold Wilhelmina "
    "Cornelius Evangeline Barnaby Octavia Percival Seraphina Augustin Ottilie Benedikt "
    "Clementine Lysander Henrietta Ambrose Cordelia Fitzroy Imogen Jasper Lavinia Montgomery "
    "Okonkwo Lindqvist Achterberg Oyelaran Kowalczyk Thistlewood Marchetti Ravindran"
)
PEOPLE_PER_SCOPE = 60
CHUNK = 50_000


def vocabulary(size: int = 40_000, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    words, seen = list(COMMON), set(COMMON)
    while len(words) < size:
        parts = rng.integers(len(SYLLABLES), size=rng.integers(2, 5))
        word = "".join(SYLLABLES[p] for p in parts)
        if word[-1] != "s" and word not in seen:  # a trailing s would lemmatise away
            seen.add(word)
            words.append(word)
    return words


def people(scope_index: int) -> list[str]:
    rng = np.random.default_rng(10_000 + scope_index)
    out = set()
    while len(out) < PEOPLE_PER_SCOPE:
        first, last = rng.choice(FIRST, size=2, replace=False)
        out.add(f"{first} {last}")
    return sorted(out)


def zipf_ranks(rng: np.random.Generator, count: int, vocab_size: int) -> np.ndarray:
    ranks = rng.zipf(ZIPF_S, size=count * 2) - 1
    ranks = ranks[ranks < vocab_size]
    while len(ranks) < count:
        more = rng.zipf(ZIPF_S, size=count) - 1
        ranks = np.concatenate([ranks, more[more < vocab_size]])
    return ranks[:count]


@dataclass
class Doc:
    text: str
    terms: list[str]
    people: list[str]


def scope_docs(scope_index: int, count: int, vocab: list[str]) -> Iterator[list[Doc]]:
    """The memories of one scope, in chunks; the same (scope_index, count) always gives the same."""
    rng = np.random.default_rng(scope_index)
    names = people(scope_index)
    produced = 0
    while produced < count:
        n = min(CHUNK, count - produced)
        lengths = rng.integers(4, 15, size=n)
        ranks = zipf_ranks(rng, int(lengths.sum()), len(vocab))
        glue = rng.integers(len(FUNCTION), size=int(lengths.sum()))
        who = rng.integers(len(names), size=(n, 2))
        how_many = rng.choice([0, 0, 1, 1, 2], size=n)
        docs, at = [], 0
        for i in range(n):
            words = [vocab[r] for r in ranks[at : at + lengths[i]]]
            filler = [FUNCTION[g] for g in glue[at : at + lengths[i]]]
            at += lengths[i]
            linked = sorted({names[w] for w in who[i][: how_many[i]]})
            text_words = [w for pair in zip(filler, words, strict=True) for w in pair]
            text = " ".join([*(p for p in linked), *text_words]).capitalize() + "."
            terms = [*(t.lower() for p in linked for t in p.split()), *words]
            docs.append(Doc(text, terms, linked))
        produced += n
        yield docs


def embedder_identity() -> EmbedderIdentity:
    ident = model_identity("all-MiniLM-L6-v2")
    return EmbedderIdentity(name=ident.name, sha256=ident.sha256, dimension=ident.dimension or DIM)


def build(path: Path, scopes: list[tuple[int, int]], vocab: list[str]) -> dict[str, float]:
    """Write the memory file; returns seconds per part."""
    identity = embedder_identity()
    store = Store.open(str(path), embedder=identity)
    db = store.db
    db.execute("PRAGMA synchronous = OFF")  # benchmark build only; search reads are unaffected
    db.execute("PRAGMA cache_size = -1000000")
    timing: Counter[str] = Counter()
    rowid = 0
    stamp = "2025-01-01T00:00:00.000000+00:00"
    for scope_index, count in scopes:
        user = f"s{scope_index:04d}"
        key = Scope(user, None, None).key
        vrng = np.random.default_rng(1_000_000 + scope_index)
        df: Counter[str] = Counter()
        total_length = 0
        entity_rowids: dict[str, int] = {}
        with db.atomic():
            for docs in scope_docs(scope_index, count, vocab):
                start = time.perf_counter()
                rows, first = [], rowid + 1
                for doc in docs:
                    rowid += 1
                    rows.append((rowid, str(uuid.UUID(int=rowid)), doc.text,
                                 hashlib.md5(doc.text.encode()).hexdigest(), user, key, stamp,
                                 stamp, identity.sha256))  # fmt: skip
                db.executemany(
                    "INSERT INTO memories (rowid, id, text, hash, user_id, scope, role, created_at,"
                    " updated_at, embedder_sha256) VALUES (?, ?, ?, ?, ?, ?, 'user', ?, ?, ?)",
                    rows,
                )
                timing["memories"] += time.perf_counter() - start
                start = time.perf_counter()
                vectors = vrng.standard_normal((len(docs), DIM)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                db.executemany(
                    "INSERT INTO memory_vectors (rowid, embedding) VALUES (?, ?)",
                    [(first + i, vectors[i].tobytes()) for i in range(len(docs))],
                )
                timing["vectors"] += time.perf_counter() - start
                start = time.perf_counter()
                doc_rows, postings = [], []
                for i, doc in enumerate(docs):
                    tf = Counter(doc.terms)
                    doc_rows.append((first + i, user, len(doc.terms)))
                    total_length += len(doc.terms)
                    df.update(tf.keys())
                    postings.extend((user, t, first + i, n) for t, n in tf.items())
                db.executemany(
                    "INSERT INTO keyword_docs (memory_rowid, partition, length) VALUES (?, ?, ?)",
                    doc_rows,
                )
                db.executemany(
                    "INSERT INTO keyword_postings (partition, term, memory_rowid, tf)"
                    " VALUES (?, ?, ?, ?)",
                    postings,
                )
                timing["keyword"] += time.perf_counter() - start
                start = time.perf_counter()
                links = []
                for i, doc in enumerate(docs):
                    for name in doc.people:
                        if name not in entity_rowids:
                            cur = db.execute(
                                "INSERT INTO entities (scope, name, norm, kind)"
                                " VALUES (?, ?, ?, 'PERSON')",
                                (key, name, name.lower()),
                            )
                            entity_rowids[name] = cur.lastrowid
                        links.append((entity_rowids[name], first + i))
                db.executemany(
                    "INSERT INTO entity_links (entity_rowid, memory_rowid) VALUES (?, ?)", links
                )
                timing["entities"] += time.perf_counter() - start
            start = time.perf_counter()
            db.executemany(
                "INSERT INTO keyword_terms (partition, term, df) VALUES (?, ?, ?)",
                [(user, t, n) for t, n in df.items()],
            )
            db.execute(
                "INSERT INTO keyword_partitions (partition, docs, total_length) VALUES (?, ?, ?)",
                (user, count, total_length),
            )
            timing["keyword"] += time.perf_counter() - start
    start = time.perf_counter()
    db.execute("ANALYZE")
    timing["analyze"] += time.perf_counter() - start
    store.close()
    return {k: round(v, 1) for k, v in timing.items()}


def make_queries(count: int, vocab: list[str], scope_index: int, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    names = people(scope_index)
    out = []
    for _ in range(count):
        words = [vocab[r] for r in zipf_ranks(rng, int(rng.integers(2, 6)), len(vocab))]
        if rng.random() < 1 / 3:
            words.insert(int(rng.integers(len(words) + 1)), str(rng.choice(names)))
        out.append(" ".join(words))
    return out


class PartTimer:
    """Wraps the store methods hybrid_search calls, accumulating seconds per part."""

    PARTS: ClassVar[dict[str, str]] = {
        "vector_candidates": "vector_knn",
        "vector_similarities": "vector_fill",
        "keyword_stats": "keyword",
        "keyword_candidates": "keyword",
        "entity_candidates": "entity",
        "records_by_rowid": "records",
    }

    def __init__(self, store: Store, analyzer: Any) -> None:
        self.seconds: Counter[str] = Counter()
        for method, part in self.PARTS.items():
            setattr(store, method, self._wrap(getattr(store, method), part))
        analyzer.analyze_query = self._wrap(analyzer.analyze_query, "analyze")

    def _wrap(self, fn: Callable[..., Any], part: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[part] += time.perf_counter() - start

        return timed

    def take(self) -> dict[str, float]:
        out = dict(self.seconds)
        self.seconds.clear()
        return out


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(values), q)), 2)


def measure(
    path: Path, user: str, queries: list[str], warmup: int = 20, *, vector_cache_mb: float = 512
) -> dict[str, Any]:
    """Warm search latency; the first search (which loads the vector cache) is reported apart."""
    with Memory({"path": str(path), "vector_cache_mb": vector_cache_mb}) as memory:
        timer = PartTimer(memory.store, memory.analyzer)
        where = compile_filters({"user_id": user})
        first_ms = run_one(memory, where, queries[0])[2]
        for text in queries[1:warmup]:
            run_one(memory, where, text)
        timer.take()
        embed, ner, search = [], [], []
        parts: dict[str, list[float]] = {}
        hits = 0
        for text in queries:
            e, n, s, found = run_one(memory, where, text)
            embed.append(e)
            ner.append(n)
            search.append(s)
            hits += found
            for part, sec in timer.take().items():
                parts.setdefault(part, []).append(1000 * sec)
    result = {
        "queries": len(queries),
        "vector_cache_mb": vector_cache_mb,
        "first_search_ms": round(first_ms, 1),
        "search_ms": {
            "p50": pct(search, 50),
            "p95": pct(search, 95),
            "mean": round(statistics.fmean(search), 2),
        },
        "query_embed_ms": {"p50": pct(embed, 50), "p95": pct(embed, 95)},
        "query_entity_extraction_ms": {"p50": pct(ner, 50), "p95": pct(ner, 95)},
        "search_plus_embed_plus_ner_ms": {
            "p50": pct([a + b + c for a, b, c in zip(embed, ner, search, strict=True)], 50),
            "p95": pct([a + b + c for a, b, c in zip(embed, ner, search, strict=True)], 95),
        },
        "parts_ms": {part: _p50_p95(v, len(queries)) for part, v in sorted(parts.items())},
        "mean_results": round(hits / len(queries), 1),
    }
    return result


def _p50_p95(values: list[float], count: int) -> dict[str, float]:
    padded = values + [0.0] * (count - len(values))  # queries that never called the part
    return {"p50": pct(padded, 50), "p95": pct(padded, 95)}


def run_one(memory: Memory, where: Any, text: str) -> tuple[float, float, float, int]:
    start = time.perf_counter()
    vector = memory.embedder.embed(text)
    embed = time.perf_counter() - start
    start = time.perf_counter()
    mentions = memory.entities.extract_query(text)
    ner = time.perf_counter() - start
    request = SearchRequest(query=text, where=where, top_k=10, threshold=None)
    start = time.perf_counter()
    hits = hybrid_search(memory.store, memory.embedder, memory.analyzer, request,
                         query_vector=vector, mentions=mentions)  # fmt: skip
    search = time.perf_counter() - start
    return 1000 * embed, 1000 * ner, 1000 * search, len(hits)


# -- keyword engines -------------------------------------------------------------------------------


def compare_engines(
    path: Path, scope_index: int, count: int, vocab: list[str], queries: list[str]
) -> dict[str, Any]:
    """Ours (SQL postings, already in `path`), rank-bm25's BM25Okapi in memory, and FTS5 in the
    same file: build time and top-60 query time over one scope of `count` memories."""
    from rank_bm25 import BM25Okapi

    from offline_mem.pinned.nlp import SpacyAnalyzer
    from offline_mem.store.db import Database

    with Memory({"path": str(path)}) as memory:
        analyzer: SpacyAnalyzer = memory.analyzer  # type: ignore[assignment]
        query_terms = [analyzer.analyze(q).terms for q in queries]
    corpus = [doc.terms for docs in scope_docs(scope_index, count, vocab) for doc in docs]
    user = f"s{scope_index:04d}"
    out: dict[str, Any] = {"memories": count, "queries": len(queries), "top": 60}

    db = Database(str(path))
    where = compile_filters({"user_id": user})
    sql, params = "m.user_id = ? AND m.state = 'active'", [user]
    times = []
    for terms in query_terms:
        start = time.perf_counter()
        stats = query_stats(db, terms, user)
        bm25_scores(db, stats, user, sql, params, limit=60)
        times.append(1000 * (time.perf_counter() - start))
    out["sql_postings"] = {"query_ms_p50": pct(times, 50), "query_ms_p95": pct(times, 95)}
    del where

    start = time.perf_counter()
    okapi = BM25Okapi(corpus)
    out["rank_bm25"] = {"build_s": round(time.perf_counter() - start, 2)}
    times = []
    for terms in query_terms:
        start = time.perf_counter()
        scores = okapi.get_scores(terms)
        top = np.argpartition(-scores, 60)[:60]
        top[np.argsort(-scores[top])]
        times.append(1000 * (time.perf_counter() - start))
    out["rank_bm25"].update(query_ms_p50=pct(times, 50), query_ms_p95=pct(times, 95))
    del okapi

    db.execute("DROP TABLE IF EXISTS bench_fts")
    start = time.perf_counter()
    with db.atomic():
        db.execute("CREATE VIRTUAL TABLE bench_fts USING fts5(terms, user_id UNINDEXED)")
        rows = db.query("SELECT rowid FROM memories WHERE user_id = ? ORDER BY rowid", (user,))
        db.executemany(
            "INSERT INTO bench_fts (rowid, terms, user_id) VALUES (?, ?, ?)",
            [(r[0], " ".join(t), user) for r, t in zip(rows, corpus, strict=True)],
        )
    out["fts5"] = {"build_s": round(time.perf_counter() - start, 2)}
    times = []
    for terms in query_terms:
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(terms))
        start = time.perf_counter()
        if match:
            db.query(
                "SELECT rowid, bm25(bench_fts) FROM bench_fts WHERE bench_fts MATCH ? AND"
                " user_id = ? ORDER BY bm25(bench_fts) LIMIT 60",
                (match, user),
            )
        times.append(1000 * (time.perf_counter() - start))
    out["fts5"].update(query_ms_p50=pct(times, 50), query_ms_p95=pct(times, 95))
    db.execute("DROP TABLE bench_fts")
    db.close()
    return out


# -- main ------------------------------------------------------------------------------------------


SCENARIOS = {
    "10k": [(0, 10_000)],
    "100k": [(100, 100_000)],
    "1m": [(0, 10_000)] + [(i, 990_000 // 999 + (i <= 990_000 % 999)) for i in range(1, 1000)],
}
SCENARIOS["smoke"] = [(0, 2_000)]
SCENARIOS["smoke_many"] = [(0, 2_000)] + [(i, 200) for i in range(1, 50)]
TARGETS = {"10k": ("p50", 20.0), "100k": ("p95", 100.0)}


@contextmanager
def load_note(report: dict[str, Any], key: str) -> Iterator[None]:
    before = os.getloadavg()
    yield
    report.setdefault("load_average", {})[key] = {"before": before, "after": os.getloadavg()}


def _uncached(scenario: dict[str, Any]) -> str:
    m = scenario.get("latency_without_vector_cache")
    return f"{m['search_ms']['p50']} / {m['search_ms']['p95']}" if m else ""


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Search latency at scale (issue 5)", "",
             f"Command: `{report['command']}`", "",
             "| scenario | memories (file) | scope | build s | search p50 ms | search p95 ms |"
             " first search ms | without vector cache p50 / p95 ms |"
             " embed p50 ms | query NER p50 ms | target |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, sc in report["scenarios"].items():
        m = sc["latency"]
        target = sc.get("target", "")
        lines.append(
            f"| {name} | {sc['memories']:,} | {sc['scope_size']:,} | {sc['build_s_total']} | "
            f"{m['search_ms']['p50']} | {m['search_ms']['p95']} | {m.get('first_search_ms', '')} | "
            f"{_uncached(sc)} | {m['query_embed_ms']['p50']} | "
            f"{m['query_entity_extraction_ms']['p50']} | {target} |"
        )
    lines += ["", "Per-part p50 / p95 ms (store calls inside hybrid_search):", ""]
    for name, sc in report["scenarios"].items():
        parts_ms = sc["latency"]["parts_ms"]
        parts = ", ".join(f"{p} {v['p50']}/{v['p95']}" for p, v in parts_ms.items())
        lines.append(f"- {name}: {parts}")
    if "engines" in report:
        lines += ["", "Keyword engines (one scope; query = top 60 for the analysed query terms):",
                  "", "| memories | engine | build s | query p50 ms | query p95 ms |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for eng in report["engines"]:
            for name in ("sql_postings", "rank_bm25", "fts5"):
                e = eng[name]
                build_s = e.get("build_s", eng.get("sql_build_s", ""))
                lines.append(f"| {eng['memories']:,} | {name} | {build_s} | "
                             f"{e['query_ms_p50']} | {e['query_ms_p95']} |")  # fmt: skip
    lines += ["", f"Load average: {json.dumps(report['load_average'])}", ""]
    for note in report.get("notes", []):
        lines.append(f"Note: {note}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", default="10k,100k,1m")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--engines", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--keep", help="folder for the memory files (reused when present)")
    parser.add_argument("--build-only", action="store_true", help="build the files, time nothing")
    parser.add_argument("--note", action="append", default=[], help="a note for the report")
    args = parser.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="offline_mem_scale_"))
    folder.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    report: dict[str, Any] = {
        "command": "python benchmarks/retrieval/scale.py " + " ".join(sys.argv[1:]),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "embedder": embedder_identity().__dict__,
        "scenarios": {},
        "notes": args.note,
    }
    for name in args.scenarios.split(","):
        scopes = SCENARIOS[name]
        path = folder / f"scale_{name}.db"
        build_s: dict[str, float] = {}
        sidecar = path.with_suffix(".build.json")
        with load_note(report, f"{name}_build"):
            if not path.exists():
                start = time.perf_counter()
                build_s = build(path, scopes, vocab)
                build_s["total"] = round(time.perf_counter() - start, 1)
                build_s["load_average_after"] = round(os.getloadavg()[0], 2)
                sidecar.write_text(json.dumps(build_s))
            elif sidecar.exists():
                build_s = {**json.loads(sidecar.read_text()), "reused_file": True}
        if args.build_only:
            print(json.dumps({name: build_s}), flush=True)
            continue
        scope_index, scope_size = scopes[0]
        queries = make_queries(args.queries, vocab, scope_index)
        with load_note(report, f"{name}_search"):
            latency = measure(path, f"s{scope_index:04d}", queries)
        with load_note(report, f"{name}_search_uncached"):  # the same, sqlite-vec's scan only
            uncached = measure(path, f"s{scope_index:04d}", queries, vector_cache_mb=0)
        sc: dict[str, Any] = {
            "memories": sum(c for _, c in scopes), "scopes": len(scopes),
            "scope_size": scope_size, "build_s": build_s,
            "build_s_total": build_s.get("total", "reused"),
            "file_mb": round(path.stat().st_size / 2**20),
            "latency": latency, "latency_without_vector_cache": uncached,
        }  # fmt: skip
        if name in TARGETS:
            stat, limit = TARGETS[name]
            value = latency["search_ms"][stat]
            sc["target"] = f"{stat} <= {limit} ms: {'met' if value <= limit else 'MISSED'}"
        alone_name = {"1m": "10k", "smoke_many": "smoke"}.get(name)
        if alone_name in report["scenarios"]:
            alone = report["scenarios"][alone_name]["latency"]["search_ms"]["p50"]
            ratio = latency["search_ms"]["p50"] / alone
            sc["target"] = f"p50 {ratio:.2f}x of {alone_name} alone (<= 1.5x: " + (
                "met)" if ratio <= 1.5 else "MISSED)")  # fmt: skip
        report["scenarios"][name] = sc
        print(json.dumps({name: sc}, indent=1), flush=True)
    if args.build_only:
        return
    if args.engines:
        report["engines"] = []
        for name in ("smoke", "10k", "100k"):
            if name not in report["scenarios"]:
                continue
            scope_index, count = SCENARIOS[name][0]
            queries = make_queries(args.queries, vocab, scope_index)
            with load_note(report, f"{name}_engines"):
                eng = compare_engines(folder / f"scale_{name}.db", scope_index, count, vocab,
                                      queries)  # fmt: skip
            eng["sql_build_s"] = report["scenarios"][name]["build_s"].get("keyword", "reused")
            report["engines"].append(eng)
            print(json.dumps(eng), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.json").write_text(json.dumps(report, indent=1) + "\n")
    table_path(out, "scale.md").write_text(markdown(report))
    print(markdown(report))
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
