"""Migration 008: a file of schema 7 (vectors in vec0 tables partitioned by user_id) opens,
moves its vectors into plain rows, and answers every search exactly as before.

tests/fixtures/schema7.db.gz was written at commit 04b01f5 (schema 7) with the fake models
below: three users with raw memories, an inferred fact each for two of them (one from a named
speaker), an agent-only scope. tests/fixtures/schema7_answers.json holds what `search` and
`search_messages` answered then (ids and scores). Scores tie often with the fake embedder (texts
of the same words); where rows tie at the k-th place, vec0 and the SQL scan may keep different
ones of them, so `search_messages` is compared by its scores and by the ids above that tie.
"""

from __future__ import annotations

import gzip
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from invariants import violations
from writer_process import WordAnalyzer

from offline_mem import Memory
from offline_mem.store.integrity import verify_file
from offline_mem.testing import FakeEmbedder

FIXTURES = Path(__file__).with_name("fixtures")


def old_file(tmp_path: Path) -> Path:
    path = tmp_path / "schema7.db"
    with gzip.open(FIXTURES / "schema7.db.gz", "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def open_memory(path: Path) -> Memory:
    config = {"path": str(path), "nlp": None}
    return Memory(config, embedder=FakeEmbedder(), analyzer=WordAnalyzer())


def answers(memory: Memory) -> list[dict[str, Any]]:
    out = []
    for case in json.loads((FIXTURES / "schema7_answers.json").read_text()):
        scope = {k: case[k] for k in ("user_id", "agent_id") if k in case}
        hits = memory.search(case["query"], filters=scope, top_k=6 if "user_id" in scope else 3,
                             threshold=None)["results"]  # fmt: skip
        messages = []
        if "user_id" in scope:
            messages = memory.search_messages(case["query"], filters=scope, top_k=4)["results"]
        out.append({**scope, "query": case["query"],
                    "search": [[h["id"], round(h["score"], 6)] for h in hits],
                    "messages": [[h["id"], round(h["score"], 6)] for h in messages]})  # fmt: skip
    return out


def assert_as_before(got: list[dict[str, Any]]) -> None:
    want = json.loads((FIXTURES / "schema7_answers.json").read_text())
    assert [{k: v for k, v in g.items() if k != "messages"} for g in got] == [
        {k: v for k, v in w.items() if k != "messages"} for w in want
    ]
    for g, w in zip(got, want, strict=True):
        assert [s for _, s in g["messages"]] == [s for _, s in w["messages"]], g["query"]
        if w["messages"]:
            last = w["messages"][-1][1]
            above = [i for i, s in w["messages"] if s > last]
            assert [i for i, s in g["messages"] if s > last] == above, g["query"]


def test_a_schema_7_file_migrates_and_answers_as_before(tmp_path) -> None:
    path = old_file(tmp_path)
    size_before = path.stat().st_size
    with open_memory(path) as memory:
        meta = memory.store.meta()
        assert meta["schema_version"] == "14"
        tables = {r[0] for r in memory.store.db.query("SELECT name FROM sqlite_master")}
        assert "memory_vectors_chunks" not in tables and "message_vectors_chunks" not in tables
        assert_as_before(answers(memory))
        report = verify_file(memory.store.db, embedder=memory.embedder.identity)
        assert report.ok, report.problems
        assert violations(memory.store.db) == []
        assert memory.store.usage()["free_bytes"] > 0.8 * size_before  # the vec0 chunks' pages
        memory.compact()
        assert memory.store.usage()["free_bytes"] == 0
        assert_as_before(answers(memory))
    assert path.stat().st_size < 0.1 * size_before


def test_a_kill_inside_the_migration_leaves_the_old_layout(tmp_path) -> None:
    path = old_file(tmp_path)
    dying = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from offline_mem.store import migrations\n"
        "step = migrations.m008_vectors_by_row.apply\n"
        "def stalled(db, ctx):\n"
        "    step(db, ctx)\n"
        "    print('migrated, not committed', flush=True)\n"
        "    time.sleep(60)\n"
        "at = [name for name, _ in migrations.MIGRATIONS].index('008_vectors_by_row')\n"
        "migrations.MIGRATIONS[at] = ('008_vectors_by_row', stalled)\n"
        "from test_migration_vectors import open_memory\n"
        "open_memory(sys.argv[1])\n"
    )
    process = subprocess.Popen([sys.executable, "-c", dying, str(path)], stdout=subprocess.PIPE,
                               text=True)  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "migrated, not committed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    with open_memory(path) as memory:  # the old layout was intact: it migrates now
        assert_as_before(answers(memory))
        assert verify_file(memory.store.db, embedder=memory.embedder.identity).ok
