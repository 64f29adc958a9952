"""Several processes share one memory file: 4 writers x N mixed operations at once.

Each writer (tests/writer_process.py) works in its own scopes and also adds to one shared
scope; all of them start together on a fresh file (so they race to create the schema too).
No error may reach a caller (BEGIN IMMEDIATE + the busy timeout make writers wait, never fail),
no acknowledged write may be lost, and the file must pass every invariant at the end.

A share of the extraction adds are queued (async_mode=True) in each writer's async scope, and
every writer's worker competes for every job on the file: each job must be claimed once and
completed once, by whichever process, and its memories applied in queue order must match.

OFFLINE_MEM_CONCURRENCY_OPS picks the operations per writer (default 250).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from invariants import JobBook, LogicalState, apply_logged, logical_state, open_db, violations

WRITER = Path(__file__).with_name("writer_process.py")
WRITERS = 4
OPS = int(os.environ.get("OFFLINE_MEM_CONCURRENCY_OPS", "250"))
SEED = 7
ASYNC_SHARE = "0.3"


def test_four_writers_lose_nothing_and_see_no_error(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    logs = [tmp_path / f"writer{k}.log" for k in range(WRITERS)]
    writers = []
    for k, log in enumerate(logs):
        with log.open("w") as out:
            command = [sys.executable, str(WRITER), str(db), "--seed", str(SEED),
                       "--proc", str(k), "--count", str(OPS), "--shared",
                       "--async-share", ASYNC_SHARE]  # fmt: skip
            writers.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))
    for writer in writers:
        writer.wait(timeout=600)
    # the jobs the writers left queued when they closed: run by one more process
    drain = tmp_path / "drain.log"
    with drain.open("w") as out:
        command = [sys.executable, str(WRITER), str(db), "--seed", str(SEED), "--drain"]
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
        assert [a["i"] for a in acks] == list(range(OPS)), f"writer {k} skipped operations"
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

    connection = open_db(str(db))
    try:
        assert violations(connection) == []
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
    assert acknowledged == WRITERS * OPS
    assert {v["metadata"]["proc"] for v in shared} == set(range(WRITERS))
