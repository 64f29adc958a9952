"""What a memory file costs as scopes and memories grow, through the public API.

    .venv/bin/python benchmarks/storage/scale.py SCENARIO [--dir DIR] [--out FILE.json]
        [--queries 200] [--real-models]

Scenarios (raw memories, `add(..., infer=False)`, one message each; texts synthetic):
  users200      200 users x 1 memory (the real pinned embedder and spaCy: what a new user sees)
  scopes10k     10,000 users x 10 memories
  scopes100k    100,000 users x 1 memory
  one100k       1 user x 100,000 memories
  one1m         1 user x 1,000,000 memories

Reported: the file's bytes (data, free pages, WAL; after a checkpoint), bytes per memory and per
scope, the time of an add that opens a new scope against an add to an existing one (200 scopes
made after the build, each: a first add, then two more), search p50/p95 within a scope over
`--queries` queries, and each query's top 10 (text and score) so that two layouts can be compared
for identical results (`compare.py`). Delete and compact: delete_all of half the scopes (the
scope scenarios), then `compact`, file size before and after.

Without --real-models (all but users200) the embedder is a stand-in that gives each text a
seeded random 384-dimension unit vector, the keyword analyser splits words and no entities are
extracted (no spaCy): file
bytes do not depend on what the numbers in a vector are, and a million texts through the real
models would take hours on two cores. The searches use the same stand-ins for the query.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from offline_mem import Memory  # noqa: E402
from offline_mem.pinned.embedder import Embedder  # noqa: E402
from offline_mem.pinned.nlp import Analysis, TextAnalyzer  # noqa: E402
from offline_mem.values import EmbedderIdentity  # noqa: E402

DIM = 384
SCENARIOS = {
    "users200": (200, 1),
    "scopes1k": (1_000, 10),
    "scopes10k": (10_000, 10),
    "scopes100k": (100_000, 1),
    "one100k": (1, 100_000),
    "one1m": (1, 1_000_000),
}
WORDS = [
    "tea",
    "coffee",
    "morning",
    "evening",
    "dinner",
    "lunch",
    "meeting",
    "project",
    "report",
    "deadline",
    "doctor",
    "dentist",
    "school",
    "garden",
    "kitchen",
    "bike",
    "train",
    "flight",
    "hotel",
    "holiday",
    "weekend",
    "birthday",
    "party",
    "book",
    "film",
    "music",
    "concert",
    "football",
    "tennis",
    "running",
    "swim",
    "park",
    "house",
    "rent",
    "bill",
    "bank",
    "salary",
    "budget",
    "market",
    "pizza",
    "pasta",
    "bread",
    "cheese",
    "wine",
    "recipe",
    "piano",
    "guitar",
    "violin",
    "photo",
    "camera",
    "laptop",
    "password",
    "account",
    "allergy",
    "headache",
    "knee",
    "hospital",
    "pharmacy",
    "plant",
    "tomato",
    "flower",
    "weather",
    "rain",
    "snow",
    "summer",
    "winter",
]


class SeededEmbedder(Embedder):
    """A seeded random unit vector per text: stable, cheap, 384 dimensions like the pinned one."""

    def __init__(self) -> None:
        self.identity = EmbedderIdentity(name="seeded-random", sha256="s" * 64, dimension=DIM)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.empty((len(texts), DIM), np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            row = np.random.default_rng(seed).standard_normal(DIM)
            rows[i] = row / np.linalg.norm(row)
        return rows


class WordAnalyzer(TextAnalyzer):
    """Lowercased words: the keyword terms without spaCy (about as many per text)."""

    def analyze_batch(self, texts: Sequence[str]) -> list[Analysis]:
        out = []
        for text in texts:
            tokens = [w.strip(".,:;!?").lower() for w in text.split()]
            out.append(Analysis(terms=[t for t in tokens if t], tokens=tokens))
        return out


def text_of(scope: int, index: int) -> str:
    """A short sentence, unique per (scope, index), about 45 characters like a chat fact."""
    rng = np.random.default_rng(scope * 1_000_003 + index)
    words = " ".join(WORDS[i] for i in rng.integers(len(WORDS), size=4))
    return f"User {scope} note {index}: prefers {words}"


def open_memory(path: Path, real: bool) -> Memory:
    if real:
        return Memory({"path": str(path)})
    return Memory({"path": str(path), "nlp": None}, embedder=SeededEmbedder(),
                  analyzer=WordAnalyzer())  # fmt: skip


def file_bytes(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (str(path), f"{path}-wal") if os.path.isfile(p))


def checkpoint(memory: Memory) -> None:
    """Raw SQL, so that this script also measures files of versions before `compact`."""
    memory.store.db.query_one("PRAGMA wal_checkpoint(TRUNCATE)")


def usage(memory: Memory) -> dict[str, int]:
    db = memory.store.db
    page, pages, free = (int(db.query_one(f"PRAGMA {p}")[0])
                         for p in ("page_size", "page_count", "freelist_count"))  # fmt: skip
    return {"used_bytes": (pages - free) * page, "free_bytes": free * page}


def build(memory: Memory, scopes: int, per_scope: int) -> float:
    """Fill the file: one add per scope (or per 1,000 memories of a large scope)."""
    start = time.perf_counter()
    batch = min(per_scope, 1000)
    for scope in range(scopes):
        for first in range(0, per_scope, batch):
            messages = [
                {"role": "user", "content": text_of(scope, i)}
                for i in range(first, min(per_scope, first + batch))
            ]
            memory.add(messages, user_id=f"u{scope}", infer=False)
        if scope and scope % 5000 == 0:
            print(f"  {scope} scopes, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return time.perf_counter() - start


def new_scope_adds(memory: Memory, count: int = 200) -> dict[str, float]:
    """Median time of a new scope's first add and of its second and third."""
    first, later = [], []
    for n in range(count):
        user = f"new{n}"
        for i in range(3):
            started = time.perf_counter()
            memory.add(text_of(10_000_000 + n, i), user_id=user, infer=False)
            (first if i == 0 else later).append(time.perf_counter() - started)
    return {
        "first_add_ms_p50": 1000 * statistics.median(first),
        "later_add_ms_p50": 1000 * statistics.median(later),
        "first_over_later": statistics.median(first) / statistics.median(later),
    }


def searches(memory: Memory, scopes: int, per_scope: int, count: int) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    times, cpu, tops = [], [], []
    for q in range(count):
        scope = int(rng.integers(scopes))
        words = " ".join(WORDS[i] for i in rng.integers(len(WORDS), size=3))
        query = f"what does user {scope} prefer about {words}"
        memory.search(query, filters={"user_id": f"u{scope}"}, top_k=10)  # warm this scope
        started, started_cpu = time.perf_counter(), time.thread_time()
        hits = memory.search(query, filters={"user_id": f"u{scope}"}, top_k=10)["results"]
        times.append(time.perf_counter() - started)
        cpu.append(time.thread_time() - started_cpu)
        tops.append([[h["memory"], round(h["score"], 6)] for h in hits])
        del q
    ordered = sorted(times)
    return {
        "search_ms_p50": 1000 * statistics.median(ordered),
        "search_ms_p95": 1000 * ordered[int(0.95 * (len(ordered) - 1))],
        # CPU time of the searching thread: what a loaded machine disturbs least
        "search_cpu_ms_p50": 1000 * statistics.median(cpu),
        "queries": count,
        "tops": tops,
    }


def delete_half_and_compact(memory: Memory, scopes: int) -> dict[str, Any]:
    checkpoint(memory)
    before = file_bytes(Path(memory.path))
    started = time.perf_counter()
    for scope in range(0, scopes, 2):
        memory.delete_all(user_id=f"u{scope}")
    deleted_s = time.perf_counter() - started
    after_delete = file_bytes(Path(memory.path))
    started = time.perf_counter()
    memory.compact()
    return {
        "bytes_before": before,
        "bytes_after_delete": after_delete,
        "bytes_after_compact": file_bytes(Path(memory.path)),
        "ratio_after_compact": file_bytes(Path(memory.path)) / before,
        "delete_all_half_s": deleted_s,
        "compact_s": time.perf_counter() - started,
    }


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(
    scenario: str, folder: Path, queries: int, real: bool, delete: bool = True
) -> dict[str, Any]:
    scopes, per_scope = SCENARIOS[scenario]
    path = folder / f"{scenario}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    memory = open_memory(path, real)
    try:
        build_s = build(memory, scopes, per_scope)
        checkpoint(memory)
        size = file_bytes(path)
        space = usage(memory)
        memories = scopes * per_scope
        report: dict[str, Any] = {
            "scenario": scenario, "scopes": scopes, "memories_per_scope": per_scope,
            "real_models": real, "build_s": round(build_s, 1), "file_bytes": size,
            "used_bytes": space["used_bytes"], "free_bytes": space["free_bytes"],
            "bytes_per_memory": size / memories, "bytes_per_scope": size / scopes,
        }  # fmt: skip
        report |= searches(memory, scopes, per_scope, queries)
        report |= new_scope_adds(memory)
        if delete and scopes > 1 and hasattr(memory, "compact"):
            report["delete_half_compact"] = delete_half_and_compact(memory, scopes)
    finally:
        memory.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--dir", type=Path, default=None, help="where the file is built")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--real-models", action="store_true")
    parser.add_argument("--no-delete", action="store_true", help="skip delete half + compact")
    args = parser.parse_args()
    real = args.real_models or args.scenario == "users200"
    folder = args.dir or Path(tempfile.mkdtemp(prefix="offline_mem_scale_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        report = run(args.scenario, folder, args.queries, real, delete=not args.no_delete)
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    report["machine"] = {"cpu": platform.processor() or platform.machine(),
                         "cores": os.cpu_count(), "commit": git_commit()}  # fmt: skip
    summary = {k: v for k, v in report.items() if k != "tops"}
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
