"""Bytes per stored turn of a memory file filled with inference from real dialogue.

    .venv/bin/python benchmarks/storage/dev_bytes.py [--data ../shared/data/locomo/locomo_dev.json]
        [--samples conv-30] [--max-sessions 4] [--threads 2] [--out FILE.json] [--keep DB]
    .venv/bin/python benchmarks/storage/dev_bytes.py --measure RUN.db [--out FILE.json]

Each conversation is one user's scope; its turns are added two at a time with inference
(`Memory.add(..., timestamp=<session date>)`, the first speaker as the user, the second as
the assistant, each with its name), as the LoCoMo benchmark adds them. Reported: the file's
bytes after a checkpoint, per stored turn and per memory, and SQLite's `dbstat` bytes per table
and index; beside them the bytes of an empty file (one page per table and index, whatever
it holds) and the bytes per turn above it, which is what each further turn costs.
`--measure` reads a file a benchmark run already filled (e.g. the LoCoMo run's
`offline_mem.db`): a compacted copy of it, the run's file untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.locomo.loader import load_locomo  # noqa: E402
from offline_mem import Memory  # noqa: E402
from offline_mem.config import MemoryConfig, resolve_models_dir  # noqa: E402
from offline_mem.pinned.extractor import LlamaExtractor  # noqa: E402
from offline_mem.testing import FakeEmbedder, FakeExtractor  # noqa: E402


def table_bytes(memory: Memory) -> dict[str, int]:
    rows = memory.store.db.query(
        "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
    )
    return {name: int(size) for name, size in rows}


def empty_file_bytes(folder: Path) -> int:
    """A new memory file's bytes: the schema, one page per table and index."""
    path = folder / "empty.db"
    with Memory(
        {"path": str(path), "nlp": None}, embedder=FakeEmbedder(), extractor=FakeExtractor()
    ) as m:
        m.store.db.checkpoint()
    return sum(os.path.getsize(p) for p in (str(path), f"{path}-wal") if os.path.isfile(p))


def measure(path: Path, turns: int | None, folder: Path) -> dict[str, Any]:
    """Bytes of a compacted copy of the file at `path` (turns: the messages stored, if None)."""
    copy = folder / "measured.db"
    source = sqlite3.connect(str(path))
    try:
        source.execute("VACUUM INTO ?", (str(copy),))
    finally:
        source.close()
    with Memory({"path": str(copy)}, extractor=FakeExtractor()) as memory:
        memory.compact()
        size = sum(os.path.getsize(p) for p in (str(copy), f"{copy}-wal") if os.path.isfile(p))
        counts = memory.store.counts()
        turns = counts["messages"] if turns is None else turns
        empty = empty_file_bytes(folder)
        return {
            "turns": turns, "memories": counts["memories"], "messages": counts["messages"],
            "file_bytes": size, "bytes_per_turn": size / turns,
            "bytes_per_memory": size / max(1, counts["memories"]),
            "empty_file_bytes": empty, "bytes_per_turn_above_empty": (size - empty) / turns,
            "page_size": int(memory.store.db.query_one("PRAGMA page_size")[0]),
            "table_bytes": table_bytes(memory),
        }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/locomo/locomo_dev.json"))
    parser.add_argument("--samples", default="conv-30")
    parser.add_argument("--max-sessions", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", type=Path, help="build the file here and keep it")
    parser.add_argument(
        "--measure", type=Path, help="measure this filled file instead of building one"
    )
    args = parser.parse_args()
    if args.measure:
        report = measure(args.measure, None, Path(tempfile.mkdtemp(prefix="offline_mem_devbytes_")))
        report["measured"] = str(args.measure)
        print(json.dumps({k: v for k, v in report.items() if k != "table_bytes"}, indent=2))
        if args.out:
            args.out.write_text(json.dumps(report, indent=1) + "\n")
        return
    wanted = set(args.samples.split(","))
    samples = [s for s in load_locomo(args.data) if s.sample_id in wanted]
    folder = Path(tempfile.mkdtemp(prefix="offline_mem_devbytes_"))
    path = args.keep or folder / "dev.db"
    turns = adds = 0
    started = time.perf_counter()
    config = MemoryConfig.from_dict({"path": str(path), "threads": args.threads})
    # a loaded machine can starve the model thread past the default 300 s: bytes are measured
    extractor = LlamaExtractor(config.extractor, resolve_models_dir(None), threads=config.threads,
                               timeout_s=3600)  # fmt: skip
    with Memory(config, extractor=extractor) as memory:
        for sample in samples:
            for session in sample.sessions[: args.max_sessions]:
                when = None if session.when is None else session.when.isoformat()
                for first in range(0, len(session.turns), 2):
                    chunk = session.turns[first : first + 2]
                    messages = [
                        {"role": "user" if t.speaker == sample.speaker_a else "assistant",
                         "content": t.text, "name": t.speaker}
                        for t in chunk
                    ]  # fmt: skip
                    memory.add(messages, user_id=sample.sample_id, timestamp=when)
                    turns += len(chunk)
                    adds += 1
        memory.store.db.checkpoint()
        size = sum(os.path.getsize(p) for p in (str(path), f"{path}-wal") if os.path.isfile(p))
        counts = memory.store.counts()
        report: dict[str, Any] = {
            "samples": sorted(wanted), "max_sessions": args.max_sessions, "adds": adds,
            "turns": turns, "memories": counts["memories"], "messages": counts["messages"],
            "file_bytes": size, "bytes_per_turn": size / turns,
            "bytes_per_memory": size / max(1, counts["memories"]),
            "page_size": int(memory.store.db.query_one("PRAGMA page_size")[0]),
            "build_s": round(time.perf_counter() - started, 1),
            "table_bytes": table_bytes(memory),
        }  # fmt: skip
    print(json.dumps({k: v for k, v in report.items() if k != "table_bytes"}, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
