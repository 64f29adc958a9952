"""postgres_scale.py at full scale: 1,000,000 memories over 100,000 scopes (issue 42).

    .venv/bin/python benchmarks/storage/postgres_full.py [--scopes 100000] [--chunk 10000]
        [--queries 200] [--adds 500] [--jobs 500] [--hnsw-budget-s 1800] [--dir DIR] [--out DIR]

The same stores as postgres_scale.py (10 raw memories a scope, user `u<scope>`, texts of
scale.py's `text_of`, the seeded stand-in embedder), but BUILT THROUGH IMPORT: one add per scope
would take ~77 min for the file and ~3 h for the database on two cores. bulk_build.py writes,
`--chunk` scopes at a time, the export file that the adds would have produced, reads it with
`read_export` and imports it with `import_data` into the file and into the database (one
transaction each, as `offline-mem import` does). Before the build a self-check proves, at 100
scopes on each store, that a store built so equals one built by the adds: same export (ids and
dates aside), same rows in every table, same search results.

Measured on the 1M stores, in this order:
- import: memories per second of `read_export` + `import_data` (and of `import_data` alone),
  per store (the file's read is shared: each chunk is read once and imported into both);
- bytes per memory (file after a checkpoint; the database's tables with indexes and TOAST);
- search within a scope, warm, p50 / p95 over `--queries` scopes: the file, the database
  exact, and how many of the database's top 10 equal the file's;
- raw adds: `--adds` adds of 10 messages (`infer=False`) into new scopes, memories per second;
- extraction jobs: `--jobs` async adds drained by 1 and then by 2 worker processes on the 1M
  store itself (postgres_scale.drain, a new set of scopes each run), jobs per second, duplicates;
- HNSW (`vector_index: "hnsw"`): the index build, time-boxed to `--hnsw-budget-s`. A watcher
  reads pg_stat_progress_create_index and cancels the build when it has run the budget or, after
  five minutes, when the rate so far projects past it; then the rate, what was done and the
  projection are reported instead of searches. When it finishes: its time, bytes, search
  p50 / p95, recall@10 of its vector candidates against exact, same top 10 as exact.

The server is started here (tests/postgres_server.py, fsync on) with `maintenance_work_mem`
of `--maintenance-work-mem` so that pgvector's graph build stays in memory (a graph that
outgrows it is built on a much slower path). Load average before and after is recorded: the
machine is shared. `--out DIR` stores the run as the `postgres_scale_full` key of
DIR/storage_scale.json (report.py renders it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the PostgreSQL server of the tests

from benchmarks.storage import bulk_build  # noqa: E402
from benchmarks.storage.postgres_scale import (  # noqa: E402
    PER_SCOPE,
    drain,
    hnsw_plan,
    open_memory,
    pg_bytes,
    queries,
    same_tops,
    searches,
    server_versions,
    vector_recall,
)
from benchmarks.storage.scale import checkpoint, file_bytes, git_commit, text_of  # noqa: E402
from offline_mem import Memory  # noqa: E402
from offline_mem.errors import OfflineMemError  # noqa: E402
from offline_mem.transfer.importer import import_data  # noqa: E402
from offline_mem.transfer.reader import read_export  # noqa: E402

ADDED_SCOPES_FROM = 10_000_000  # the raw adds' scopes, after every built one


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def self_checks(server: Any, folder: Path) -> dict[str, Any]:
    asked = queries(100, 50)

    def tops(memory: Memory) -> list[Any]:
        return searches(memory, asked)["tops"]

    out = {}
    work = folder / "check"
    work.mkdir()
    out["sqlite"] = bulk_build.self_check(
        lambda name: open_memory({"path": str(work / f"{name}.db")}), tops, work
    )
    out["postgresql"] = bulk_build.self_check(
        lambda name: open_memory({"store": server.create_database(f"check_{name}")}), tops, work
    )
    shutil.rmtree(work)
    return out


def build(file: Memory, db: Memory, scopes: int, chunk: int, folder: Path) -> dict[str, Any]:
    """Import the scopes chunk by chunk into both stores; seconds of each step."""
    spent = {"generate": 0.0, "read": 0.0, "sqlite": 0.0, "postgresql": 0.0}
    for first in range(0, scopes, chunk):
        last = min(scopes, first + chunk)
        path = folder / "chunk.jsonl"
        started = time.perf_counter()
        with path.open("w", encoding="utf-8") as out:
            for line in bulk_build.export_lines(first, last):
                out.write(line + "\n")
        lap = {"generate": time.perf_counter() - started}
        started = time.perf_counter()
        with path.open(encoding="utf-8") as source:
            data = read_export(source)
        lap["read"] = time.perf_counter() - started
        for name, memory in (("sqlite", file), ("postgresql", db)):
            started = time.perf_counter()
            import_data(memory, data)
            lap[name] = time.perf_counter() - started
        path.unlink()
        del data
        for step, seconds in lap.items():
            spent[step] += seconds
        log(f"scopes {last:,}/{scopes:,}: " + ", ".join(f"{k} {v:.1f} s" for k, v in lap.items()))
    memories = scopes * PER_SCOPE
    seconds = {k: round(v, 1) for k, v in spent.items()}
    out: dict[str, Any] = {"chunk_scopes": chunk, "seconds": seconds}
    for name in ("sqlite", "postgresql"):
        out[name] = {
            "import_s": round(spent["read"] + spent[name], 1),
            "memories_per_s": memories / (spent["read"] + spent[name]),
            "write_memories_per_s": memories / spent[name],
        }
    return out


def raw_adds(memory: Memory, adds: int) -> dict[str, Any]:
    """`adds` adds of PER_SCOPE messages, each into a new scope, through the public API."""
    started = time.perf_counter()
    for n in range(adds):
        scope = ADDED_SCOPES_FROM + n
        messages = [{"role": "user", "content": text_of(scope, i)} for i in range(PER_SCOPE)]
        memory.add(messages, user_id=f"u{scope}", infer=False)
    seconds = time.perf_counter() - started
    return {"adds": adds, "add_s": round(seconds, 1), "adds_per_s": adds / seconds,
            "memories_per_s": adds * PER_SCOPE / seconds}  # fmt: skip


def jobs(store: dict[str, Any], count: int, folder: Path, prefix: str) -> dict[str, Any]:
    out = {}
    for workers in (1, 2):
        log(f"{prefix}: {count} jobs by {workers} worker(s)")
        out[str(workers)] = drain(store, count, workers, folder, tag=f"{prefix}{workers}w")
    return out


class HnswWatch:
    """Watches an index build from a connection of its own; cancels it past the budget."""

    def __init__(self, url: str, vectors: dict[str, int], budget_s: float) -> None:
        """`vectors`: each table's vectors, in the order the indexes are built."""
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.vectors, self.budget_s = vectors, budget_s
        self.samples: list[dict[str, Any]] = []
        self.cancelled: str | None = None
        self.started = time.perf_counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        total = sum(self.vectors.values())
        while not self.stop.wait(15):
            row = self.conn.execute(
                "SELECT pid, relid::regclass::text, phase, tuples_done "
                "FROM pg_stat_progress_create_index WHERE datname = current_database()"
            ).fetchone()
            if row is None:
                continue
            pid, table, phase, tuples = row
            elapsed = time.perf_counter() - self.started
            before = list(self.vectors)[: list(self.vectors).index(table)]
            done = sum(self.vectors[t] for t in before) + int(tuples or 0)
            projected = elapsed * total / done if done else None
            self.samples.append({"s": round(elapsed), "table": table, "phase": phase,
                                 "vectors_done": done})  # fmt: skip
            log(f"hnsw: {elapsed:.0f} s, {table} {phase}, {done:,}/{total:,} vectors, "
                f"projected {projected or 0:.0f} s")  # fmt: skip
            late = elapsed >= self.budget_s
            hopeless = elapsed >= 300 and projected is not None and projected > self.budget_s
            if late or hopeless:
                self.cancelled = "budget reached" if late else "projected past the budget"
                self.conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.conn.close()


def run_hnsw(url: str, exact: Memory, asked: list[Any], budget_s: float) -> dict[str, Any]:
    # the tables of HNSW_INDEXES, in its order
    vectors = {
        "memories": int(exact.store.db.query_one("SELECT count(*) FROM memories")[0]),
        "messages": int(exact.store.db.query_one(
            "SELECT count(*) FROM messages WHERE embedding IS NOT NULL"
        )[0]),
    }  # fmt: skip
    watch = HnswWatch(url, vectors, budget_s)
    started = time.perf_counter()
    try:
        approx = open_memory({"store": url}, vector_index="hnsw")  # builds both indexes
    except OfflineMemError as exc:
        watch.close()
        if watch.cancelled is None:
            raise
        seconds = time.perf_counter() - started
        last = watch.samples[-1] if watch.samples else {"vectors_done": 0}
        rate = last["vectors_done"] / seconds
        return {
            "built": False, "cancelled": watch.cancelled, "budget_s": budget_s,
            "ran_s": round(seconds), "vectors": vectors,
            "vectors_done": last["vectors_done"], "vectors_per_s": rate,
            "projected_build_s": round(sum(vectors.values()) / rate) if rate else None,
            "error": str(exc)[:200], "samples": watch.samples,
        }  # fmt: skip
    out: dict[str, Any] = {"built": True, "index_build_s": round(time.perf_counter() - started)}
    watch.close()
    out["samples"] = watch.samples
    with approx:
        approx.store.db.execute("ANALYZE")
        out |= pg_bytes(approx)
        log("postgresql: searching (hnsw)")
        out |= searches(approx, asked)
        out["recall_at_10"] = vector_recall(exact, approx, asked)
        plan = hnsw_plan(approx, asked[0][0])
        out["plan_uses_hnsw"] = "memories_embedding_hnsw" in plan
        out["plan"] = plan
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scopes", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=10_000, help="scopes per import")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--adds", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--hnsw-budget-s", type=float, default=1800)
    parser.add_argument("--maintenance-work-mem", default="4GB")
    parser.add_argument("--dir", type=Path, default=None, help="where the file and server go")
    parser.add_argument("--out", type=Path, default=None, help="results folder")
    args = parser.parse_args()
    from postgres_server import PostgresServer

    folder = Path(tempfile.mkdtemp(prefix="offline_mem_pg_full_", dir=args.dir))
    load_before = [round(x, 2) for x in os.getloadavg()]
    server = PostgresServer(durable=True, base=str(args.dir) if args.dir else None).start()
    started = time.time()
    try:
        url = server.create_database("full")
        with open_memory({"store": url}) as admin:
            admin.store.db.execute(
                f"ALTER SYSTEM SET maintenance_work_mem = '{args.maintenance_work_mem}'"
            )
            admin.store.db.execute("SELECT pg_reload_conf()")
        report: dict[str, Any] = {
            "command": "python benchmarks/storage/postgres_full.py " + " ".join(sys.argv[1:]),
            "scopes": args.scopes, "memories_per_scope": PER_SCOPE,
            "memories": args.scopes * PER_SCOPE, "queries": args.queries,
            "embedder": "stand-in: a seeded random 384-d unit vector per text (not MiniLM)",
            "built_by": "import of generated export files (bulk_build.py), self-checked",
            "server": server_versions(url) | {"maintenance_work_mem": args.maintenance_work_mem},
            "load_average_before": load_before,
        }  # fmt: skip
        log("self-checks (100 scopes by adds against by import, each store)")
        report["self_check"] = self_checks(server, folder)
        report |= measure(args, url, folder)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    report["wall_s"] = round(time.time() - started)
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    report["machine"] = {"cpu": platform.processor() or platform.machine(),
                         "cores": os.cpu_count(), "commit": git_commit()}  # fmt: skip
    print(json.dumps(report, indent=1))
    if args.out:
        results = args.out / "storage_scale.json"
        stored = json.loads(results.read_text()) if results.exists() else {}
        stored["postgres_scale_full"] = report
        results.write_text(json.dumps(stored, indent=1) + "\n")


def measure(args: Any, url: str, folder: Path) -> dict[str, Any]:
    path = folder / "full.db"
    asked = queries(args.scopes, args.queries)
    memories = args.scopes * PER_SCOPE
    out: dict[str, Any] = {}
    with open_memory({"path": str(path)}) as file, open_memory({"store": url}) as db:
        out["import"] = build(file, db, args.scopes, args.chunk, folder)
        checkpoint(file)
        lite: dict[str, Any] = {"bytes": file_bytes(path)}
        lite["bytes_per_memory"] = lite["bytes"] / memories
        db.store.db.execute("VACUUM ANALYZE")
        exact: dict[str, Any] = pg_bytes(db)
        exact["bytes_per_memory"] = exact["table_bytes"] / memories
        log("searching (file, database exact)")
        lite |= searches(file, asked)
        exact |= searches(db, asked)
        exact["identical_top10_vs_sqlite"] = same_tops(exact["tops"], lite["tops"])
        log("raw adds")
        lite["raw_adds"] = raw_adds(file, args.adds)
        exact["raw_adds"] = raw_adds(db, args.adds)
    out["jobs"] = {
        "sqlite": jobs({"path": str(path)}, args.jobs, folder, "js"),
        "postgresql": jobs({"store": url}, args.jobs, folder, "jp"),
    }
    with open_memory({"store": url}) as db:
        log(f"hnsw: building, budget {args.hnsw_budget_s:.0f} s")
        hnsw = run_hnsw(url, db, asked, args.hnsw_budget_s)
    if "tops" in hnsw:
        hnsw["identical_top10_vs_exact"] = same_tops(hnsw.pop("tops"), exact["tops"])
    lite.pop("tops"), exact.pop("tops")
    out["sqlite"], out["postgresql"] = lite, {"exact": exact, "hnsw": hnsw}
    path.unlink()
    return out


if __name__ == "__main__":
    main()
