"""CPU time of a warm search within one 10-memory scope, as the file around it grows.

    .venv/bin/python benchmarks/storage/search_cpu.py --scopes 10000 --file /tmp/s10k.db
        [--queries 100]

The file is built on first use (scale.py's `build`: SCOPES users x 10 raw memories, stand-in
embedder and analyser) and kept, so that two checkouts can be timed on the same file, one after
the other (run the script of each with its own PYTHONPATH; the layout must be the same).
Each query is searched once to warm its scope, then timed by the thread's CPU clock, which a
loaded machine disturbs least. Prints one JSON line: scopes, queries, CPU ms p50 and mean.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.storage.scale import WORDS, build, git_commit, open_memory  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scopes", type=int, required=True, help="users of 10 memories each")
    parser.add_argument("--file", type=Path, required=True, help="built when it does not exist")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    memory = open_memory(args.file, real=False)
    try:
        if memory.store.db.query_one("SELECT count(*) FROM memories")[0] == 0:
            build(memory, args.scopes, 10)
        rng = np.random.default_rng(7)
        asked = []
        for _ in range(args.queries):
            scope = int(rng.integers(args.scopes))
            words = " ".join(WORDS[i] for i in rng.integers(len(WORDS), size=3))
            asked.append((f"what does user {scope} prefer about {words}", f"u{scope}"))
        cpu = []
        for query, user in asked:
            memory.search(query, filters={"user_id": user}, top_k=10)
            started = time.thread_time()
            memory.search(query, filters={"user_id": user}, top_k=10)
            cpu.append(time.thread_time() - started)
    finally:
        memory.close()
    print(json.dumps({
        "scopes": args.scopes, "memories": 10 * args.scopes, "queries": args.queries,
        "search_cpu_ms_p50": round(1000 * statistics.median(cpu), 2),
        "search_cpu_ms_mean": round(1000 * statistics.mean(cpu), 2),
        "commit": git_commit(),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
