"""The PostgreSQL store against the SQLite file at scale, through the public API (issue 42).

    .venv/bin/python benchmarks/storage/postgres_scale.py [--scale 1.0] [--queries 200]
        [--jobs 500] [--url postgresql://...] [--dir DIR] [--out benchmarks/results]

`--scale 1.0` is 1,000,000 raw memories over 100,000 scopes (10 each: one `add(..., infer=False)`
of 10 messages per scope, texts synthetic, benchmarks/storage/scale.py's `text_of`); a smaller
scale keeps 10 memories a scope and takes fewer scopes. Each store is built by the same adds:

- raw adds: memories per second over the build; bytes per memory (the file after a checkpoint;
  the database's offline_mem tables with their indexes and TOAST, `pg_total_relation_size`);
- search within a scope: `Memory.search(..., filters={"user_id": ...}, top_k=10)`, warm, p50 /
  p95 over `--queries` scopes, on the file, on the database (exact) and on the database with
  `vector_index: "hnsw"` (the index build timed); HNSW's recall@10 of the vector candidates
  against the exact ones, whether the planner used the index, and how many of the searches
  returned the same top 10 as the exact database and as the file;
- extraction jobs: `--jobs` async adds over 50 scopes, drained by 1 and by 2 worker processes
  on one store (fresh each time) with an instant stand-in extractor: jobs per second, and
  duplicates (extractions beyond one a job, facts added more than once).

The embedder is a stand-in (a seeded random unit vector per text, 384 dimensions) and no
entities are extracted, as in scale.py: a million texts through the real MiniLM would take hours
on two cores, and bytes and query plans do not depend on the numbers in a vector. Without
`--url` a PostgreSQL server (tests/postgres_server.py, the test wheel's binaries) is started
with fsync and synchronous commit on, as the SQLite file's FULL synchronous mode. `--out DIR`
stores the run as the `postgres_scale` key of DIR/storage_scale.json (report.py renders it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the PostgreSQL server of the tests

from benchmarks.storage.scale import (  # noqa: E402
    WORDS,
    SeededEmbedder,
    WordAnalyzer,
    build,
    checkpoint,
    file_bytes,
    git_commit,
)
from offline_mem import Memory  # noqa: E402
from offline_mem.pinned.extractor import Prompt  # noqa: E402
from offline_mem.store.filters import compile_filters  # noqa: E402
from offline_mem.testing import FakeExtractor, answer, new_message_lines  # noqa: E402

FULL_SCOPES, PER_SCOPE, JOB_SCOPES, K = 100_000, 10, 50, 10


class EchoExtractor(FakeExtractor):
    """Answers "User said <message>" at once: a job costs the queue and the store, no model."""

    def extract(self, prompt: Prompt) -> Any:
        if prompt.kind == "facts":
            said = new_message_lines(prompt)[0].split(": ", 1)[-1]
            self.script.append(answer(f"User said {said}"))
        return super().extract(prompt)


def open_memory(store: dict[str, Any], **config: Any) -> Memory:
    return Memory({**store, "nlp": None, **config}, embedder=SeededEmbedder(),
                  extractor=EchoExtractor(), analyzer=WordAnalyzer())  # fmt: skip


def queries(scopes: int, count: int) -> list[tuple[int, str]]:
    rng = np.random.default_rng(7)
    out = []
    for _ in range(count):
        scope = int(rng.integers(scopes))
        words = " ".join(WORDS[i] for i in rng.integers(len(WORDS), size=3))
        out.append((scope, f"what does user {scope} prefer about {words}"))
    return out


def searches(memory: Memory, asked: list[tuple[int, str]]) -> dict[str, Any]:
    """Warm searches within a scope: p50 / p95 and each query's top 10 (ids and scores)."""
    times, tops = [], []
    for scope, query in asked:
        where = {"user_id": f"u{scope}"}
        memory.search(query, filters=where, top_k=K)  # warm this scope's pages
        started = time.perf_counter()
        hits = memory.search(query, filters=where, top_k=K)["results"]
        times.append(time.perf_counter() - started)
        tops.append([(h["memory"], round(h["score"], 4)) for h in hits])
    ordered = sorted(times)
    return {
        "search_ms_p50": 1000 * statistics.median(ordered),
        "search_ms_p95": 1000 * ordered[int(0.95 * (len(ordered) - 1))],
        "tops": tops,
    }


def same_tops(a: list[Any], b: list[Any]) -> int:
    return sum(x == y for x, y in zip(a, b, strict=True))


def vector_recall(exact: Memory, approx: Memory, asked: list[tuple[int, str]]) -> float:
    """recall@10 of the HNSW store's vector candidates against the exact store's."""
    found = 0
    for scope, query in asked:
        vector = exact.embedder.embed(query)
        where = compile_filters({"user_id": f"u{scope}"})
        truth = exact.store.vector_candidates(vector, where, exact.store.search_filter(where), k=K)
        with approx.store.snapshot():
            got = approx.store.vector_candidates(
                vector, where, approx.store.search_filter(where), k=K
            )
        found += len(set(got) & set(truth))
    return found / (K * len(asked))


def hnsw_plan(memory: Memory, scope: int) -> str:
    vector = "[" + ",".join(["0.05"] * 384) + "]"
    with memory.store.atomic():
        memory.store.db.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        rows = memory.store.db.query(
            "EXPLAIN SELECT m.rowid FROM memories m WHERE m.user_id = %s AND m.state = 'active' "
            "ORDER BY m.embedding <=> %s::vector LIMIT 10",
            (f"u{scope}", vector),
        )
    return "\n".join(row[0] for row in rows)


def pg_bytes(memory: Memory) -> dict[str, int]:
    tables = memory.store._table_bytes()  # type: ignore[union-attr]
    (database,) = memory.store.db.query_one("SELECT pg_database_size(current_database())")
    return {"table_bytes": int(tables), "database_bytes": int(database)}


def built(memory: Memory, scopes: int, label: str) -> dict[str, Any]:
    print(f"{label}: building {scopes:,} scopes x {PER_SCOPE}", file=sys.stderr)
    seconds = build(memory, scopes, PER_SCOPE)
    memories = scopes * PER_SCOPE
    return {"build_s": round(seconds, 1), "adds_per_s": scopes / seconds,
            "memories_per_s": memories / seconds}  # fmt: skip


def run_sqlite(folder: Path, scopes: int, asked: list[tuple[int, str]]) -> dict[str, Any]:
    path = folder / "scale.db"
    with open_memory({"path": str(path)}) as memory:
        out = built(memory, scopes, "sqlite")
        checkpoint(memory)
        out["bytes"] = file_bytes(path)
        out["bytes_per_memory"] = out["bytes"] / (scopes * PER_SCOPE)
        print("sqlite: searching", file=sys.stderr)
        out |= searches(memory, asked)
    path.unlink()
    return out


def run_postgres(url: str, scopes: int, asked: list[tuple[int, str]]) -> dict[str, Any]:
    with open_memory({"store": url}) as memory:
        exact: dict[str, Any] = built(memory, scopes, "postgresql")
        memory.store.db.execute("VACUUM ANALYZE")
        exact |= pg_bytes(memory)
        exact["bytes_per_memory"] = exact["table_bytes"] / (scopes * PER_SCOPE)
        print("postgresql: searching (exact)", file=sys.stderr)
        exact |= searches(memory, asked)
        started = time.perf_counter()
        approx_memory = open_memory({"store": url}, vector_index="hnsw")  # builds the indexes
        hnsw: dict[str, Any] = {"index_build_s": round(time.perf_counter() - started, 1)}
        with approx_memory:
            approx_memory.store.db.execute("ANALYZE")
            hnsw |= pg_bytes(approx_memory)
            hnsw["bytes_per_memory"] = hnsw["table_bytes"] / (scopes * PER_SCOPE)
            print("postgresql: searching (hnsw)", file=sys.stderr)
            hnsw |= searches(approx_memory, asked)
            hnsw["recall_at_10"] = vector_recall(memory, approx_memory, asked)
            plan = hnsw_plan(approx_memory, asked[0][0])
            hnsw["plan_uses_hnsw"] = "memories_embedding_hnsw" in plan
            hnsw["plan"] = plan
    return {"exact": exact, "hnsw": hnsw}


def worker(config: str, go: str) -> None:
    """One job worker process: open, wait for the go file, drain, report."""
    with open_memory(json.loads(config), job_worker=False) as memory:
        print(json.dumps({"t": "ready"}), flush=True)
        while not os.path.exists(go):
            time.sleep(0.01)
        memory.flush(timeout=3600)
        done = time.time()
        extracted = len(memory.extractor.calls)  # type: ignore[attr-defined]
        print(json.dumps({"t": "drained", "at": done, "extracted": extracted}), flush=True)


def drain(
    store: dict[str, Any], jobs: int, workers: int, folder: Path, tag: str = "j"
) -> dict[str, Any]:
    """`jobs` async adds to the scopes `<tag>0`.. (a tag of letters and digits no other scope
    of the store starts with), drained by `workers` processes; counted in those scopes."""
    assert tag.isalnum()
    mine = f"substr(user_id, 1, {len(tag)}) = '{tag}'"  # (LIKE's % reads as a placeholder)
    with open_memory(store, job_worker=False) as producer:
        for i in range(jobs):
            producer.add(f"note {i} about t{i}a and t{i}b", user_id=f"{tag}{i % JOB_SCOPES}",
                         async_mode=True)  # fmt: skip
        assert producer.pending() == jobs
    go = folder / f"go{time.monotonic_ns()}"
    command = [sys.executable, __file__, "--worker", json.dumps(store), str(go)]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(workers)]
    for proc in procs:
        assert proc.stdout is not None and '"ready"' in proc.stdout.readline()
    go.touch()
    started = time.time()
    reports = []
    for proc in procs:
        assert proc.stdout is not None
        reports.append(json.loads(proc.stdout.readline()))
        assert proc.wait(3600) == 0
    go.unlink()
    seconds = max(r["at"] for r in reports) - started
    extracted = [r["extracted"] for r in reports]
    with open_memory(store, job_worker=False) as memory:
        adds = Counter(
            text for (text,) in memory.store.db.query(
                "SELECT h.new_memory FROM history h WHERE h.event = 'ADD' AND h.memory_id IN "
                f"(SELECT id FROM memories WHERE {mine})"
            )
        )  # fmt: skip
        states = dict(memory.store.db.query(
            f"SELECT state, count(*) FROM jobs WHERE {mine} GROUP BY state"
        ))  # fmt: skip
    return {
        "workers": workers, "jobs": jobs, "drain_s": round(seconds, 2),
        "jobs_per_s": jobs / seconds, "extracted_per_worker": extracted,
        "duplicate_extractions": sum(extracted) - jobs,
        "facts_added_twice": sum(1 for n in adds.values() if n > 1),
        "facts": len(adds), "states": states,
    }  # fmt: skip


def run_jobs(url_for: Any, folder: Path, jobs: int) -> dict[str, Any]:
    out: dict[str, Any] = {"sqlite": {}, "postgresql": {}}
    for workers in (1, 2):
        print(f"jobs: {jobs} by {workers} worker(s)", file=sys.stderr)
        path = folder / f"jobs{workers}.db"
        out["sqlite"][str(workers)] = drain({"path": str(path)}, jobs, workers, folder)
        path.unlink()
        out["postgresql"][str(workers)] = drain({"store": url_for()}, jobs, workers, folder)
    return out


def ratios(report: dict[str, Any]) -> dict[str, float]:
    lite, exact, hnsw = (
        report["sqlite"],
        report["postgresql"]["exact"],
        report["postgresql"]["hnsw"],
    )
    jobs = report["jobs"]
    return {
        "search_p50_pg_exact_over_sqlite": exact["search_ms_p50"] / lite["search_ms_p50"],
        "search_p95_pg_exact_over_sqlite": exact["search_ms_p95"] / lite["search_ms_p95"],
        "search_p50_pg_hnsw_over_sqlite": hnsw["search_ms_p50"] / lite["search_ms_p50"],
        "search_p95_pg_hnsw_over_sqlite": hnsw["search_ms_p95"] / lite["search_ms_p95"],
        "add_throughput_pg_over_sqlite": exact["memories_per_s"] / lite["memories_per_s"],
        "bytes_per_memory_pg_over_sqlite": exact["bytes_per_memory"] / lite["bytes_per_memory"],
        "jobs_2_over_1_workers_pg": jobs["postgresql"]["2"]["jobs_per_s"]
        / jobs["postgresql"]["1"]["jobs_per_s"],
        "jobs_pg_over_sqlite_2_workers": jobs["postgresql"]["2"]["jobs_per_s"]
        / jobs["sqlite"]["2"]["jobs_per_s"],
    }


def server_versions(url: str) -> dict[str, str]:
    with open_memory({"store": url}) as memory:
        db = memory.store.db
        return {
            "postgresql": db.query_one("SHOW server_version")[0],
            "pgvector": db.query_one(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            )[0],
            "fsync": db.query_one("SHOW fsync")[0],
            "synchronous_commit": db.query_one("SHOW synchronous_commit")[0],
        }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="of 100,000 scopes x 10")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--url", help="an empty database's server URL (default: start one)")
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite files go")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    scopes = max(1, round(FULL_SCOPES * args.scale))
    folder = Path(tempfile.mkdtemp(prefix="offline_mem_pg_scale_", dir=args.dir))
    server = None
    names = iter(range(1000))
    if args.url:
        url_for = lambda: args.url  # noqa: E731
    else:
        from postgres_server import PostgresServer

        server = PostgresServer(durable=True).start()
        url_for = lambda: server.create_database(f"bench{next(names)}")  # noqa: E731
    started = time.time()
    try:
        asked = queries(scopes, args.queries)
        url = url_for()
        report: dict[str, Any] = {
            "command": "python benchmarks/storage/postgres_scale.py " + " ".join(sys.argv[1:]),
            "scopes": scopes, "memories_per_scope": PER_SCOPE, "memories": scopes * PER_SCOPE,
            "queries": args.queries,
            "embedder": "stand-in: a seeded random 384-d unit vector per text (not MiniLM)",
            "server": server_versions(url),
        }  # fmt: skip
        report["sqlite"] = run_sqlite(folder, scopes, asked)
        report["postgresql"] = run_postgres(url, scopes, asked)
        lite, pg = report["sqlite"], report["postgresql"]
        pg["exact"]["identical_top10_vs_sqlite"] = same_tops(pg["exact"]["tops"], lite["tops"])
        pg["hnsw"]["identical_top10_vs_exact"] = same_tops(pg["hnsw"]["tops"], pg["exact"]["tops"])
        for run in (lite, pg["exact"], pg["hnsw"]):
            run.pop("tops")
        report["jobs"] = run_jobs(url_for, folder, args.jobs) if args.jobs else {}
        if args.jobs:
            report["ratios"] = ratios(report)
    finally:
        if server is not None:
            server.stop()
    report["wall_s"] = round(time.time() - started)
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    report["machine"] = {"cpu": platform.processor() or platform.machine(),
                         "cores": os.cpu_count(), "commit": git_commit()}  # fmt: skip
    print(json.dumps(report, indent=1))
    if args.out:
        results = args.out / "storage_scale.json"
        stored = json.loads(results.read_text()) if results.exists() else {}
        stored["postgres_scale"] = report
        results.write_text(json.dumps(stored, indent=1) + "\n")


if __name__ == "__main__":
    main()
