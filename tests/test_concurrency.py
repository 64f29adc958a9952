"""Several processes share one store: 4 writers x N mixed operations at once, on a SQLite memory
file and on a PostgreSQL database (`store_kind`).

Each writer (tests/writer_process.py) works in its own scopes and also adds to one shared
scope; all of them start together on a fresh store (so they race to create the schema too).
No error may reach a caller (on the file BEGIN IMMEDIATE + the busy timeout make writers wait,
never fail; on the server row locks taken in one order), no acknowledged write may be lost, and
the store must pass every invariant and the library's `verify` at the end.

A share of the extraction adds are queued (async_mode=True) in each writer's async scope, and
every writer's worker competes for every job in the store: each job must be claimed once and
completed once, by whichever process, and its memories applied in queue order must match.

OFFLINE_MEM_CONCURRENCY_OPS picks the operations per writer on a file (default 250),
OFFLINE_MEM_PG_CONCURRENCY_OPS on PostgreSQL (default 100: each operation is a few round
trips to the server, about twice the file's time on a loaded 2-core machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from invariants import JobBook, LogicalState, apply_logged, db_violations, logical_state, open_db
from postgres_fixtures import store_location

WRITER = Path(__file__).with_name("writer_process.py")
WRITERS = 4
OPS = {
    "sqlite": int(os.environ.get("OFFLINE_MEM_CONCURRENCY_OPS", "250")),
    "postgresql": int(os.environ.get("OFFLINE_MEM_PG_CONCURRENCY_OPS", "100")),
}
SEED = 7
ASYNC_SHARE = "0.3"


def test_four_writers_lose_nothing_and_see_no_error(
    tmp_path: Path, store_kind: str, store_config: dict[str, Any]
) -> None:
    db, ops = store_location(store_config), OPS[store_kind]
    logs = [tmp_path / f"writer{k}.log" for k in range(WRITERS)]
    writers = []
    for k, log in enumerate(logs):
        with log.open("w") as out:
            command = [sys.executable, str(WRITER), db, "--seed", str(SEED),
                       "--proc", str(k), "--count", str(ops), "--shared",
                       "--async-share", ASYNC_SHARE]  # fmt: skip
            writers.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))
    for writer in writers:
        writer.wait(timeout=600)
    # the jobs the writers left queued when they closed: run by one more process
    drain = tmp_path / "drain.log"
    with drain.open("w") as out:
        command = [sys.executable, str(WRITER), db, "--seed", str(SEED), "--drain"]
        assert subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode == 0

    model, book = LogicalState(), JobBook()
    acknowledged = 0
    completed: dict[str, dict] = {}  # event_id -> the result of its (one) completion
    for k, (writer, log) in enumerate(zip(writers, logs, strict=True)):
        text = log.read_text()
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        errors = [line for line in lines if line["t"] == "error"]
        assert writer.returncode == 0 and not errors, f"writer {k}: {errors or text[-3000:]}"
        intents = {line["i"]: line for line in lines if line["t"] == "intent"}
        acks = [line for line in lines if line["t"] == "ack"]
        assert [a["i"] for a in acks] == list(range(ops)), f"writer {k} skipped operations"
        for ack in acks:
            apply_logged(model, book, intents[ack["i"]], ack["result"])
        acknowledged += len(acks)
    for log in [*logs, drain]:
        # the JSON lines the writer logged; its stderr shares the file (a library warning, such
        # as a delete whose text a reader's snapshot kept in the WAL, is no record)
        records = [text for text in log.read_text().splitlines() if text.startswith("{")]
        for line in map(json.loads, records):
            if line["t"] == "job_done":
                assert line["event_id"] not in completed, f"job {line['event_id']} done twice"
                completed[line["event_id"]] = line["result"]
            assert line["t"] != "job_lost", f"a claim was lost: {line}"

    connection = open_db(db)
    try:
        assert db_violations(connection) == []
        state = logical_state(connection)
        jobs = connection.query("SELECT id, state, claims FROM jobs ORDER BY seq")
        # No kill, no expired lease: every job was claimed once, by one process, and done.
        assert [(s, n) for _, s, n in jobs] == [("done", 1)] * len(jobs)
        for event_id, _, _ in jobs:  # a scope's memories, applied in its queue's order
            book.done(model, event_id, completed.pop(event_id))
        assert completed == {} and book.pending() == []
        assert book.differences(connection) == []
    finally:
        connection.close()
    assert model.differences(state) == []
    assert len(jobs) > WRITERS
    shared = [v for v in state.memories.values() if v["user_id"] == "shared"]
    assert acknowledged == WRITERS * ops
    assert {v["metadata"]["proc"] for v in shared} == set(range(WRITERS))
