"""What the open-time checks cost: the median of 20 opens of a memory file with the checks (the
SQLite header, then `quick_check`, run as on a file's first open in a process) and without, on
files of a few sizes made with the fake models. Prints JSON; `--out FILE` writes it too.

    .venv/bin/python benchmarks/open_time.py --out benchmarks/results/open_time.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from writer_process import WordAnalyzer  # noqa: E402

from offline_mem import Memory  # noqa: E402
from offline_mem.store import db as db_module  # noqa: E402
from offline_mem.store import open_checks  # noqa: E402
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor  # noqa: E402

RUNS = 20


def build(path: Path, memories: int, users: int) -> None:
    with Memory({"path": str(path), "job_worker": False}, embedder=FakeEmbedder(),
                extractor=FakeExtractor(), entities=FakeEntities(),
                analyzer=WordAnalyzer()) as memory:  # fmt: skip
        for i in range(memories):
            memory.add(f"memory {i} about the garden and item {i * 7}", user_id=f"u{i % users}",
                       metadata={"i": i}, infer=False)  # fmt: skip


def median_open_ms(path: Path, *, check: bool) -> float:
    times = []
    for _ in range(RUNS):
        open_checks._checked.clear()  # every open is a first open in this process
        started = time.perf_counter()
        db = db_module.Database(str(path), check=check)
        times.append((time.perf_counter() - started) * 1000)
        db.close()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for memories, users in ((150, 3), (2000, 2)):
            path = Path(tmp) / f"m{memories}.db"
            build(path, memories, users)
            median_open_ms(path, check=True)  # warm the page cache
            without = median_open_ms(path, check=False)
            with_checks = median_open_ms(path, check=True)
            rows.append({
                "memories": memories, "users": users,
                "file_mb": round(os.path.getsize(path) / 1e6, 1),
                "open_ms_without_checks": round(without, 2),
                "open_ms_with_checks": round(with_checks, 2),
                "overhead_ms": round(with_checks - without, 2),
            })  # fmt: skip
    result = {"runs": RUNS, "statistic": "median", "machine_cpus": os.cpu_count(), "files": rows}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
