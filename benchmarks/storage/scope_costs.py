"""What one call costs in a 10-memory scope as the file around it grows: a warm search, a raw
add, an update, a delete, and `delete_all` of a scope, each in CPU time.

    .venv/bin/python benchmarks/storage/scope_costs.py --scopes 10000 --file /tmp/s10k.db
        [--queries 100] [--writes 30]

The file is built on first use (scale.py's `build`: SCOPES users x 10 raw memories, stand-in
embedder and analyser) and kept, so that two checkouts can be timed on the same data one after
the other (run each checkout's script with its own PYTHONPATH). The calls run on a copy of it,
which a newer version migrates when it opens it. Each search query is searched once to warm its
scope, then timed. Times are the calling thread's CPU time, which a loaded machine disturbs
least (a write's fsync is not in it). Prints one JSON line: ms p50 of each call.
"""

from __future__ import annotations

import argparse
import json
import shutil
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

from benchmarks.storage.scale import WORDS, build, git_commit, open_memory  # noqa: E402
from offline_mem import Memory  # noqa: E402


def cpu_ms(calls: list[Callable[[], Any]]) -> float:
    """Median CPU ms of the calls."""
    spent = []
    for call in calls:
        started = time.thread_time()
        call()
        spent.append(time.thread_time() - started)
    return round(1000 * statistics.median(spent), 2)


def measure(memory: Memory, scopes: int, queries: int, writes: int) -> dict[str, float]:
    rng = np.random.default_rng(7)
    asked = []
    for user in (f"u{int(u)}" for u in rng.integers(scopes, size=queries)):
        words = " ".join(WORDS[i] for i in rng.integers(len(WORDS), size=3))
        asked.append((f"what does user {user} prefer about {words}", user))
    for query, user in asked:
        memory.search(query, filters={"user_id": user}, top_k=10)
    writers = [f"u{int(u)}" for u in rng.choice(scopes, size=2 * writes, replace=False)]
    ids = [memory.get_all(filters={"user_id": u})["results"][0]["id"] for u in writers[:writes]]
    return {
        "search": cpu_ms([lambda q=q, u=u: memory.search(q, filters={"user_id": u}, top_k=10)
                          for q, u in asked]),
        "add_raw": cpu_ms([lambda u=u, n=n: memory.add(f"a new note {n} about {u}", user_id=u,
                                                       infer=False)
                           for n, u in enumerate(writers[:writes])]),
        "update": cpu_ms([lambda i=i: memory.update(i, f"an edited note {i}") for i in ids]),
        "delete": cpu_ms([lambda i=i: memory.delete(i) for i in ids]),
        "delete_all_scope": cpu_ms([lambda u=u: memory.delete_all(user_id=u)
                                    for u in writers[writes : 2 * writes]]),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scopes", type=int, required=True, help="users of 10 memories each")
    parser.add_argument("--file", type=Path, required=True, help="built when it does not exist")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--writes", type=int, default=30, help="adds, updates, deletes each")
    args = parser.parse_args()
    if not args.file.exists():
        with open_memory(args.file, real=False) as memory:
            build(memory, args.scopes, 10)
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "copy.db"
        shutil.copyfile(args.file, copy)
        with open_memory(copy, real=False) as memory:
            costs = measure(memory, args.scopes, args.queries, args.writes)
    print(json.dumps({"scopes": args.scopes, "memories": 10 * args.scopes,
                      "cpu_ms_p50": costs, "commit": git_commit()}))  # fmt: skip


if __name__ == "__main__":
    main()
