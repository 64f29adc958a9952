"""Several processes share one memory file: 4 writers x N mixed operations at once.

Each writer (tests/writer_process.py) works in its own scopes and also adds to one shared
scope; all of them start together on a fresh file (so they race to create the schema too).
No error may reach a caller (BEGIN IMMEDIATE + the busy timeout make writers wait, never fail),
no acknowledged write may be lost, and the file must pass every invariant at the end.

OFFLINE_MEM_CONCURRENCY_OPS picks the operations per writer (default 250).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from invariants import LogicalState, apply_operation, logical_state, open_db, violations

WRITER = Path(__file__).with_name("writer_process.py")
WRITERS = 4
OPS = int(os.environ.get("OFFLINE_MEM_CONCURRENCY_OPS", "250"))
SEED = 7


def test_four_writers_lose_nothing_and_see_no_error(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    logs = [tmp_path / f"writer{k}.log" for k in range(WRITERS)]
    writers = []
    for k, log in enumerate(logs):
        with log.open("w") as out:
            command = [sys.executable, str(WRITER), str(db), "--seed", str(SEED),
                       "--proc", str(k), "--count", str(OPS), "--shared"]  # fmt: skip
            writers.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))
    for writer in writers:
        writer.wait(timeout=600)

    model = LogicalState()
    acknowledged = 0
    for k, (writer, log) in enumerate(zip(writers, logs, strict=True)):
        text = log.read_text()
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        errors = [line for line in lines if line["t"] == "error"]
        assert writer.returncode == 0 and not errors, f"writer {k}: {errors or text[-3000:]}"
        intents = {line["i"]: line for line in lines if line["t"] == "intent"}
        acks = [line for line in lines if line["t"] == "ack"]
        assert [a["i"] for a in acks] == list(range(OPS)), f"writer {k} skipped operations"
        for ack in acks:
            apply_operation(model, intents[ack["i"]], ack["result"])
        acknowledged += len(acks)

    connection = open_db(str(db))
    try:
        assert violations(connection) == []
        state = logical_state(connection)
    finally:
        connection.close()
    assert model.differences(state) == []
    shared = [v for v in state.memories.values() if v["user_id"] == "shared"]
    assert acknowledged == WRITERS * OPS
    assert {v["metadata"]["proc"] for v in shared} == set(range(WRITERS))
