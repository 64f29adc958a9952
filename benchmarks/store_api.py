"""Issue 2 figures: raw `add` throughput (1,000 one-sentence memories in one call) and search
latency over 10,000 memories in one scope, with the real pinned embedder.

    .venv/bin/python benchmarks/store_api.py [--memories 10000] [--queries 50]

Prints JSON. Embedding time is reported separately from storage and query time, and search time
is broken down by part (p50 per query of the time spent in each step `Memory.search` takes:
query embedding, query entity extraction (spaCy, whose parse keyword analysis reuses), analysis,
and the store's vector KNN, vector fill-in, keyword, entity and record reads).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from offline_mem import Memory

SUBJECTS = ["Ana", "Bruno", "Chen", "Dara", "Eli", "Farah", "Goran", "Hana", "Ivo", "Jun"]
VERBS = ["likes", "owns", "visited", "booked", "fixed", "painted", "sold", "borrowed"]
OBJECTS = ["a red bicycle", "the blue kettle", "a flat in Porto", "tickets to Kyoto",
           "the garden shed", "a violin", "an old Volvo", "the locker 4417", "a sourdough starter",
           "the quarterly report"]  # fmt: skip


def sentence(i: int) -> str:
    rng = np.random.default_rng(i)
    return (
        f"{SUBJECTS[rng.integers(len(SUBJECTS))]} {VERBS[rng.integers(len(VERBS))]} "
        f"{OBJECTS[rng.integers(len(OBJECTS))]} on day {i}."
    )


# object attribute -> part name; keyword_stats and keyword_candidates are one part
SEARCH_PARTS = {
    "embedder.embed": "query_embedding",
    "entities.extract_query": "query_entities",
    "analyzer.analyze_query": "analyze",
    "store.vector_candidates": "vector_knn",
    "store.vector_similarities": "vector_fill",
    "store.keyword_stats": "keyword",
    "store.keyword_candidates": "keyword",
    "store.entity_candidates": "entity",
    "store.records_by_rowid": "records",
}


def time_parts(memory: Memory, seconds: Counter[str]) -> None:
    """Wrap the calls search makes (on these instances only) to add their time to `seconds`."""

    def wrap(fn: Callable[..., Any], part: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[part] += time.perf_counter() - start

        return timed

    for path, part in SEARCH_PARTS.items():
        owner_name, method = path.split(".")
        owner = getattr(memory, owner_name)
        setattr(owner, method, wrap(getattr(owner, method), part))


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="offline_mem_bench_"))
    report: dict[str, object] = {"machine": platform.machine(), "python": platform.python_version()}
    with Memory({"path": str(folder / "bench.db")}) as memory:
        memory.embedder.embed("warm up")
        texts = [sentence(i) for i in range(1000)]
        messages = [{"role": "user", "content": t} for t in texts]
        start = time.perf_counter()
        embed_start = time.perf_counter()
        memory.embedder.embed_batch(texts)
        embed_only = time.perf_counter() - embed_start
        start = time.perf_counter()
        added = memory.add(messages, user_id="throughput", infer=False)
        total = time.perf_counter() - start
        assert len(added["results"]) == 1000
        report["add_1000_in_one_call"] = {
            "seconds": round(total, 3),
            "memories_per_second": round(1000 / total, 1),
            "embedding_seconds_measured_separately": round(embed_only, 3),
            "store_seconds_estimate": round(total - embed_only, 3),
        }
        # fill one scope to --memories, in batches of 1,000
        for batch_start in range(0, args.memories, 1000):
            count = min(1000, args.memories - batch_start)
            memory.add(
                [
                    {"role": "user", "content": sentence(10_000 + batch_start + j)}
                    for j in range(count)
                ],
                user_id="search",
                infer=False,
            )
        queries = [
            sentence(50_000 + i).replace(" on day", " around day") for i in range(args.queries)
        ]
        embed_times, search_times = [], []
        for query in queries:
            t0 = time.perf_counter()
            memory.embedder.embed(query)
            embed_times.append((time.perf_counter() - t0) * 1000)
        seconds: Counter[str] = Counter()
        time_parts(memory, seconds)
        parts: dict[str, list[float]] = {part: [] for part in SEARCH_PARTS.values()}
        parts["other"] = []
        for query in queries:
            seconds.clear()
            t0 = time.perf_counter()
            memory.search(query, filters={"user_id": "search"}, top_k=10)
            elapsed = (time.perf_counter() - t0) * 1000
            search_times.append(elapsed)
            for part, values in parts.items():
                values.append(1000 * seconds[part])
            parts["other"][-1] = elapsed - 1000 * sum(seconds.values())
        report["search"] = {
            "memories_in_scope": args.memories,
            "queries": len(queries),
            "search_ms_p50": round(statistics.median(search_times), 2),
            "search_ms_p95": round(percentile(search_times, 95), 2),
            "of_which_query_embedding_ms_p50": round(statistics.median(embed_times), 2),
            "parts_ms_p50": {part: round(statistics.median(v), 2) for part, v in parts.items()},
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
        report["file_bytes"] = (folder / "bench.db").stat().st_size
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
