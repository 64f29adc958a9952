"""SIGKILL during compact (and the deletes before it): the file always verifies and keeps
every acknowledged write.

A writer (tests/compact_process.py) loops: add one memory to user "keep" (acknowledged on
stdout), churn another user's memories, delete_all a third, compact. The test kills it at a
random moment (most inside a compact), opens the file, runs `verify` and the structural
invariants, and checks that every acknowledged "keep" memory is there; then starts the writer
again on the same file.
OFFLINE_MEM_COMPACT_KILLS sets the number of kills (default 20).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from invariants import violations
from writer_process import WordAnalyzer

from offline_mem import Memory
from offline_mem.store.integrity import verify_file
from offline_mem.testing import FakeEmbedder

WRITER = Path(__file__).with_name("compact_process.py")
KILLS = int(os.environ.get("OFFLINE_MEM_COMPACT_KILLS", "20"))


def open_memory(path: str) -> Memory:
    return Memory({"path": path, "nlp": None}, embedder=FakeEmbedder(), analyzer=WordAnalyzer())


def seed_file(path: str) -> None:
    """Enough rows that a compact takes a while (a kill lands inside one)."""
    with open_memory(path) as memory:
        for user in range(12):
            notes = [{"role": "user", "content": f"seed {user} note {i}"} for i in range(100)]
            memory.add(notes, user_id=f"seed{user}", infer=False)


def run_until_killed(path: str, start: int, rng: random.Random) -> list[dict]:
    """Run the writer until its n-th compact (n random, 1 to 3) has begun, then wait up to 40 ms
    and kill it: most kills land inside a compact, some in the deletes around it."""
    proc = subprocess.Popen([sys.executable, str(WRITER), path, str(start)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    lines: list[dict] = []
    wanted = rng.randint(1, 3)
    while wanted:
        line = proc.stdout.readline()
        assert line, f"the writer ended: {lines[-3:]}"
        lines.append(json.loads(line))
        wanted -= lines[-1]["t"] == "compacting"
    time.sleep(rng.uniform(0, 0.04))
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    lines += [json.loads(line) for line in out.splitlines() if line.endswith("}")]
    assert proc.returncode == -signal.SIGKILL
    return lines


def test_kill_during_compact_loses_nothing_acknowledged(tmp_path) -> None:
    path = str(tmp_path / "m.db")
    seed_file(path)
    rng = random.Random(20261205)
    acked: set[int] = set()
    compacts = in_compact = 0
    start = 0
    for _ in range(KILLS):
        lines = run_until_killed(path, start, rng)
        acked |= {line["i"] for line in lines if line["t"] == "ack"}
        compacts += sum(line["t"] == "compacted" for line in lines)
        in_compact += bool(lines) and lines[-1]["t"] == "compacting"
        start = max(acked, default=start) + 1
        with open_memory(path) as memory:
            report = verify_file(memory.store.db, embedder=memory.embedder.identity)
            assert report.ok, report.problems
            assert violations(memory.store.db) == []
            listed = memory.get_all(filters={"user_id": "keep"}, top_k=10_000)["results"]
            kept = {m["memory"] for m in listed}
            missing = sorted(i for i in acked if f"keep note {i}" not in kept)
            assert missing == [], f"acknowledged adds lost: {missing}"
            seeded = memory.get_all(filters={"user_id": "seed3"}, top_k=1000)["results"]
            assert len(seeded) == 100
    print(f"{KILLS} kills, {in_compact} inside a compact; {compacts} compacts completed")
    assert in_compact >= KILLS // 2, f"only {in_compact} of {KILLS} kills landed in a compact"
