"""The vector layouts considered for many scopes in one file, measured side by side.

    .venv/bin/python benchmarks/storage/vector_layouts.py [--scopes 10000] [--per-scope 10]
        [--queries 300] [--out FILE.json]

Each layout gets the same seeded random 384-dimension unit vectors, `--scopes` scopes of
`--per-scope` vectors each, in its own file (nothing else in it), and answers the same
queries: the exact top 10 within one scope. Reported per layout: file bytes, bytes per
vector, per-query p50/p95, and whether its top 10 equals the plain scan's (ids, in order).

  vec0_partition   vec0, `user_id TEXT PARTITION KEY` (offline_mem's layout before
                   migration 008): a 1,024-vector chunk is allocated per partition
  vec0_chunk8      the same with `chunk_size=8`
  vec0_metadata    vec0 without partitions, `user_id` a metadata column filtered in the KNN
  plain_rows       a plain table (rowid, BLOB) with the scope in an owner table indexed by
                   user_id, KNN by sqlite-vec's `vec_distance_cosine` over the scope's rows
                   (offline_mem's layout since migration 008)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from offline_mem.store.db import Database  # noqa: E402

DIM = 384
K = 10


def vectors(count: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


Layout = tuple[Callable[[Database], None], Callable[[Database, list[tuple[int, str, bytes]]], None],
               Callable[[Database, str, bytes], list[int]]]  # fmt: skip


def _vec0(extra: str, partition: bool) -> Layout:
    column = "user_id TEXT PARTITION KEY" if partition else "user_id TEXT"

    def create(db: Database) -> None:
        db.execute(f"CREATE VIRTUAL TABLE v USING vec0({column}, "
                   f"embedding FLOAT[{DIM}] distance_metric=cosine{extra})")  # fmt: skip

    def insert(db: Database, rows: list[tuple[int, str, bytes]]) -> None:
        db.executemany("INSERT INTO v (rowid, user_id, embedding) VALUES (?, ?, ?)", rows)

    def knn(db: Database, user: str, query: bytes) -> list[int]:
        rows = db.query("SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? AND user_id = ? "
                        "ORDER BY distance", (query, K, user))  # fmt: skip
        return [r[0] for r in rows]

    return create, insert, knn


def _plain() -> Layout:
    def create(db: Database) -> None:
        db.execute("CREATE TABLE owner (rowid INTEGER PRIMARY KEY, user_id TEXT)")
        db.execute("CREATE INDEX owner_user ON owner(user_id)")
        db.execute("CREATE TABLE v (rowid INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")

    def insert(db: Database, rows: list[tuple[int, str, bytes]]) -> None:
        db.executemany("INSERT INTO owner (rowid, user_id) VALUES (?, ?)", [r[:2] for r in rows])
        db.executemany(
            "INSERT INTO v (rowid, embedding) VALUES (?, ?)", [(r[0], r[2]) for r in rows]
        )

    def knn(db: Database, user: str, query: bytes) -> list[int]:
        rows = db.query("SELECT v.rowid, vec_distance_cosine(v.embedding, ?) AS d FROM v "
                        "WHERE v.rowid IN (SELECT rowid FROM owner WHERE user_id = ?) "
                        "ORDER BY d, v.rowid LIMIT ?", (query, user, K))  # fmt: skip
        return [r[0] for r in rows]

    return create, insert, knn


LAYOUTS: dict[str, Layout] = {
    "vec0_partition": _vec0("", partition=True),
    "vec0_chunk8": _vec0(", chunk_size=8", partition=True),
    "vec0_metadata": _vec0("", partition=False),
    "plain_rows": _plain(),
}


def measure(name: str, folder: Path, scopes: int, per_scope: int, queries: int) -> dict[str, Any]:
    create, insert, knn = LAYOUTS[name]
    path = folder / f"{name}.db"
    db = Database(str(path))
    try:
        with db.atomic():
            create(db)
        started = time.perf_counter()
        for first in range(0, scopes, 1000):
            with db.atomic():
                for scope in range(first, min(scopes, first + 1000)):
                    block = vectors(per_scope, seed=scope)
                    insert(db, [(scope * per_scope + i + 1, f"u{scope}", block[i].tobytes())
                                for i in range(per_scope)])  # fmt: skip
        build_s = time.perf_counter() - started
        db.query_one("PRAGMA wal_checkpoint(TRUNCATE)")
        size = sum(os.path.getsize(p) for p in (str(path), f"{path}-wal") if os.path.isfile(p))
        rng = np.random.default_rng(11)
        times, answers = [], []
        for _ in range(queries):
            user = f"u{int(rng.integers(scopes))}"
            query = vectors(1, seed=int(rng.integers(1 << 30)))[0].tobytes()
            knn(db, user, query)
            started = time.perf_counter()
            answers.append(knn(db, user, query))
            times.append(time.perf_counter() - started)
    finally:
        db.close()
    ordered = sorted(times)
    return {"file_bytes": size, "bytes_per_vector": size / (scopes * per_scope),
            "bytes_per_scope": size / scopes, "build_s": round(build_s, 1),
            "knn_ms_p50": 1000 * statistics.median(ordered),
            "knn_ms_p95": 1000 * ordered[int(0.95 * (len(ordered) - 1))],
            "answers": answers}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scopes", type=int, default=10_000)
    parser.add_argument("--per-scope", type=int, default=10)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {"scopes": args.scopes, "per_scope": args.per_scope,
                              "queries": args.queries, "layouts": {}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="offline_mem_layouts_") as tmp:
        for name in args.layouts.split(","):
            print(f"{name} ...", file=sys.stderr)
            report["layouts"][name] = measure(name, Path(tmp), args.scopes, args.per_scope,
                                              args.queries)  # fmt: skip
    exact = report["layouts"].get("plain_rows", {}).get("answers")
    for result in report["layouts"].values():
        answers = result.pop("answers")
        result["same_top10_as_plain_rows"] = None if exact is None else answers == exact
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
