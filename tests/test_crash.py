"""Crash consistency: SIGKILL a writer at random moments, then check the file.

A writer subprocess (tests/writer_process.py: raw and inferred adds, updates, deletes,
delete_all, searches) prints each operation before the call and acknowledges it after. The test
kills it at a random moment, then checks that
- the file passes every structural invariant (tests/invariants.py);
- every acknowledged operation is visible: the file's memories, history and messages equal the
  model built from the acknowledgements;
- the one operation in flight (announced, not acknowledged) is wholly in the file or wholly
  absent: never half-visible;
and restarts the writer on the same file, continuing the seeded sequence.

OFFLINE_MEM_CRASH_KILLS picks the number of kills (default 40, the CI size; the long variant is
200 or more) and OFFLINE_MEM_CRASH_SEED the seed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from invariants import (
    LogicalState,
    LostWrite,
    apply_operation,
    check_path,
    logical_state,
    open_db,
    schema_committed,
    violations,
)

WRITER = Path(__file__).with_name("writer_process.py")
KILLS = int(os.environ.get("OFFLINE_MEM_CRASH_KILLS", "40"))
SEED = int(os.environ.get("OFFLINE_MEM_CRASH_SEED", "20240611"))


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The complete lines the writer printed (a line cut by the kill was never printed)."""
    text = path.read_text()
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line]


def rebuilt_result(model: LogicalState, state: LogicalState, op: dict[str, Any]) -> Any:
    """The result an in-flight add would have returned, read back from the file."""
    if op["op"] not in ("add_raw", "add_infer"):
        return None
    results = [
        {"id": mid, "memory": view["text"], "event": "ADD"}
        for mid, view in state.memories.items()
        if mid not in model.memories
    ]
    for mid, view in state.memories.items():
        old = model.memories.get(mid)
        if old is not None and old["state"] == "active" and view["state"] == "superseded":
            results.append(
                {"id": mid, "event": "SUPERSEDE", "superseded_by": view["superseded_by"]}
            )
    return {"results": results}


def resolve_in_flight(
    model: LogicalState, state: LogicalState, op: dict[str, Any]
) -> tuple[LogicalState, bool, list[str]]:
    """(the model after the in-flight op, whether it was applied, violations)."""
    if not model.differences(state):
        return model, False, []
    applied = model.copy()
    try:
        apply_operation(applied, op, rebuilt_result(model, state, op))
    except (LostWrite, KeyError) as exc:
        return model, True, [f"op {op['i']} ({op['op']}) half-visible: {exc}"]
    diffs = applied.differences(state)
    return applied, True, [f"op {op['i']} ({op['op']}) half-visible: {d}" for d in diffs]


def assert_opens_as_empty_store(db: Path) -> None:
    """The library opens a file whose schema never committed, migrates it and works on it.
    Done in a subprocess with the writer's own configuration (fake models), so this process
    never holds the file open while the next writer runs."""
    check = (
        "import sys; from writer_process import make_memory\n"
        "m = make_memory(sys.argv[1])\n"
        "assert m.get_all(filters={'user_id': 'probe'})['results'] == []\n"
        "assert m.search('anything', filters={'user_id': 'probe'})['results'] == []\n"
        "m.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check, str(db)],
        cwd=WRITER.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"the library could not open a schema-less file: {done.stderr}"


def wait_until_ready(writer: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    """Until the writer has opened its Memory (its "ready" line), however slow the machine."""
    deadline = time.monotonic() + timeout
    while '"ready"' not in log.read_text() and writer.poll() is None:
        assert time.monotonic() < deadline, "the writer did not start"
        time.sleep(0.01)


def run_until_killed(
    db: Path, log: Path, start: int, delay: float, stall_ms: float, *, after_ready: bool
) -> subprocess.Popen[bytes]:
    """Start a writer and kill it `delay` seconds after it started or, with `after_ready`,
    after it opened the file: on a loaded machine start-up alone can outlast the delay, and the
    kills would then never reach the operations."""
    command = [sys.executable, str(WRITER), str(db), "--seed", str(SEED), "--start", str(start)]
    with log.open("w") as out:
        writer = subprocess.Popen(
            [*command, "--stall-ms", str(stall_ms)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if after_ready:
        wait_until_ready(writer, log)
    time.sleep(delay)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    return writer


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    rng = random.Random(SEED)
    model = LogicalState()
    next_op = 0
    stats: Counter[str] = Counter()
    problems: list[str] = []
    for kill in range(KILLS):
        log = tmp_path / "writer.log"
        # Mostly mid-run; some during start-up (opening, WAL recovery, the first migration).
        during_start = rng.random() < 0.2
        delay = rng.uniform(0.02, 0.35) if during_start else rng.uniform(0.05, 0.9)
        # Half the runs stall before each statement (a slow disk), so that more kills land
        # inside a transaction rather than in the fsync after its last write.
        stall_ms = rng.choice([0.0, 2.0])
        writer = run_until_killed(db, log, next_op, delay, stall_ms, after_ready=not during_start)
        lines = read_lines(log)
        errors = [line for line in lines if line["t"] == "error"]
        assert not errors and writer.returncode == -signal.SIGKILL, (
            f"kill {kill}: the writer failed on its own (rc {writer.returncode}): "
            f"{errors or log.read_text()[-2000:]}"
        )
        stats["kills"] += 1
        in_flight = None
        for line in lines:
            if line["t"] == "intent":
                in_flight = line
            elif line["t"] == "ack":
                assert in_flight is not None and in_flight["i"] == line["i"]
                apply_operation(model, in_flight, line["result"])
                stats["acknowledged"] += 1
                stats[f"ack {in_flight['op']}"] += 1
                next_op, in_flight = line["i"] + 1, None
        if not db.exists() or not schema_committed(str(db)):
            # Killed before the first open committed its schema: nothing can have been
            # acknowledged, and the library must open the file as an empty store.
            assert not lines or all(line["t"] == "ready" for line in lines)
            assert not model.memories and not model.messages
            if db.exists():
                assert_opens_as_empty_store(db)
                stats["killed before the schema committed"] += 1
            continue
        connection = open_db(str(db))
        try:
            found = [f"kill {kill}: {v}" for v in violations(connection)]
            state = logical_state(connection)
        finally:
            connection.close()
        if in_flight is not None:
            model, applied, half = resolve_in_flight(model, state, in_flight)
            found += [f"kill {kill}: {h}" for h in half]
            stats["killed in flight"] += 1
            stats["in flight, applied" if applied else "in flight, absent"] += 1
            next_op = in_flight["i"] + 1
        found += [f"kill {kill}: lost or changed: {d}" for d in model.differences(state)]
        problems += found
        assert not problems, "\n".join(problems[:20])
    stats["memories at the end"] = len(model.memories)
    stats["operations checked"] = next_op
    print("crash stats:", dict(stats))
    assert stats["kills"] == KILLS and stats["acknowledged"] > KILLS
    assert stats["killed in flight"] > 0
    assert check_path(str(db)) == []


def test_a_file_killed_during_its_first_migration_opens_as_an_empty_store(tmp_path: Path) -> None:
    """The window the random kills hit only sometimes, made certain: a process dies inside the
    first migration's transaction, leaving a file on disk with no committed schema."""
    db = tmp_path / "memory.db"
    dying = (
        "import sys, time\n"
        "from offline_mem.db import Database\n"
        "from offline_mem.migrations import MigrationContext, migrate\n"
        "db = Database(sys.argv[1])\n"
        "with db.atomic():\n"
        "    migrate(db, MigrationContext(dimension=8))\n"
        "    print('migrated, not committed', flush=True)\n"
        "    time.sleep(60)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", dying, str(db)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "migrated, not committed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert db.exists() and not schema_committed(str(db))
    assert_opens_as_empty_store(db)
    assert schema_committed(str(db)) and check_path(str(db)) == []
