"""Crash consistency: SIGKILL a writer at random moments, then check the store.

Each test runs on a SQLite memory file and on a PostgreSQL database (`store_kind`). A writer
subprocess (tests/writer_process.py: raw and inferred adds, updates, deletes, delete_all,
searches) prints each operation before the call and acknowledges it after. The test kills it at
a random moment, waits (on PostgreSQL) until the server has ended the dead writer's sessions,
then checks that
- the store passes every structural invariant and the library's `verify` (tests/invariants.py
  `db_violations`);
- every acknowledged operation is visible: the store's memories, history and messages equal the
  model built from the acknowledgements;
- the one operation in flight (announced, not acknowledged) is wholly in the store or wholly
  absent: never half-visible;
and restarts the writer on the same store, continuing the seeded sequence.

With extraction jobs (`add(..., async_mode=True)`; the writer logs each job's run between a
job_intent and a job_done line), each check also holds the file's queue to the model: every
acknowledged job is still queued or running, or done (its memories in the file), or deleted with
its scope; none is completed twice; a job committing when the writer died is wholly done or not
at all. After the last kill a writer drains the queue: every job must end done, exactly once.

OFFLINE_MEM_CRASH_KILLS picks the number of kills on a file (default 40, the CI size; the long
variant is 200 or more), OFFLINE_MEM_ASYNC_CRASH_KILLS those of the async test (default 25;
benchmarks/async_crash.py runs 100+), OFFLINE_MEM_PG_CRASH_KILLS those of each test on
PostgreSQL (default 10: a writer's start and each check cost more there) and
OFFLINE_MEM_CRASH_SEED the seed.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from invariants import (
    JobBook,
    LogicalState,
    LostWrite,
    apply_logged,
    apply_operation,
    check_path,
    db_violations,
    logical_state,
    open_db,
    schema_committed,
)
from postgres_fixtures import store_location

from offline_mem.config import is_postgres_url

WRITER = Path(__file__).with_name("writer_process.py")
PG_KILLS = int(os.environ.get("OFFLINE_MEM_PG_CRASH_KILLS", "10"))
KILLS = {"sqlite": int(os.environ.get("OFFLINE_MEM_CRASH_KILLS", "40")), "postgresql": PG_KILLS}
ASYNC_KILLS = {
    "sqlite": int(os.environ.get("OFFLINE_MEM_ASYNC_CRASH_KILLS", "25")),
    "postgresql": PG_KILLS,
}
SEED = int(os.environ.get("OFFLINE_MEM_CRASH_SEED", "20240611"))


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines the writer printed (a line cut by the kill was never printed;
    its stderr shares the file, and a library warning there is no record)."""
    text = path.read_text()
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.startswith("{")]


def rebuilt_result(model: LogicalState, state: LogicalState, op: dict[str, Any]) -> Any:
    """The result an in-flight add would have returned, read back from the file."""
    if op["op"] not in ("add_raw", "add_infer"):
        return None
    # A raw memory's role is its message's (the model needs it to forget that message later).
    roles = {m["content"]: m["role"] for m in reversed(op["messages"])}
    results = [
        {"id": mid, "memory": view["text"], "event": "ADD", "role": roles.get(view["text"], "user")}
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
    """(the model after the in-flight op, whether it was applied, violations). An async add's
    job is not known here: the caller finds it in the file."""
    if not model.differences(state):
        return model, False, []
    applied = model.copy()
    try:
        apply_operation(applied, op, rebuilt_result(model, state, op))
    except (LostWrite, KeyError) as exc:
        return model, True, [f"op {op['i']} ({op['op']}) half-visible: {exc}"]
    diffs = applied.differences(state)
    return applied, True, [f"op {op['i']} ({op['op']}) half-visible: {d}" for d in diffs]


def assert_opens_as_empty_store(location: str) -> None:
    """The library opens a store whose schema never committed, migrates it and works on it.
    Done in a subprocess with the writer's own configuration (fake models), so this process
    never holds the store open while the next writer runs."""
    check = (
        "import sys; from writer_process import make_memory\n"
        "m = make_memory(sys.argv[1])\n"
        "assert m.get_all(filters={'user_id': 'probe'})['results'] == []\n"
        "assert m.search('anything', filters={'user_id': 'probe'})['results'] == []\n"
        "m.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check, location],
        cwd=WRITER.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"the library could not open a schema-less store: {done.stderr}"


def store_created(location: str) -> bool:
    """Whether a killed writer left anything: a file (SQLite creates it at once), or a database
    (which the test made before the first writer)."""
    return is_postgres_url(location) or Path(location).exists()


def wait_for_dead_sessions(location: str, timeout: float = 30) -> None:
    """On PostgreSQL, until the server has ended the killed writer's sessions: a transaction
    of it is rolled back (or, its COMMIT already sent, committed) only then, and the checks
    must see the store as the next writer will."""
    if not is_postgres_url(location):
        return
    deadline = time.monotonic() + timeout
    db = open_db(location)
    try:
        while db.query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )[0]:
            assert time.monotonic() < deadline, "the killed writer's sessions did not end"
            time.sleep(0.01)
    finally:
        db.close()


def wait_until_ready(writer: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    """Until the writer has opened its Memory (its "ready" line), however slow the machine."""
    deadline = time.monotonic() + timeout
    while '"ready"' not in log.read_text() and writer.poll() is None:
        assert time.monotonic() < deadline, "the writer did not start"
        time.sleep(0.01)


def run_until_killed(
    location: str,
    log: Path,
    start: int,
    delay: float,
    stall_ms: float,
    *,
    after_ready: bool,
    seed: int = SEED,
    extra: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start a writer and kill it `delay` seconds after it started or, with `after_ready`,
    after it opened the file: on a loaded machine start-up alone can outlast the delay, and the
    kills would then never reach the operations."""
    command = [sys.executable, str(WRITER), location, "--seed", str(seed), "--start", str(start)]
    with log.open("w") as out:
        writer = subprocess.Popen(
            [*command, "--stall-ms", str(stall_ms), *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if after_ready:
        wait_until_ready(writer, log)
    time.sleep(delay)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    wait_for_dead_sessions(location)
    return writer


class CrashRun:
    """Kills writers on one store and checks it after each kill (see the module docstring).
    With `async_share` the writers also queue extraction jobs, and each check also holds the
    queue to the model: no acknowledged job lost, none completed twice."""

    def __init__(
        self, tmp_path: Path, location: str, *, seed: int = SEED, async_share: float = 0.0,
        extract_ms: float = 0,
    ) -> None:  # fmt: skip
        self.tmp_path = tmp_path
        self.location = location
        self.seed = seed
        self.rng = random.Random(seed)
        self.extra = ["--async-share", str(async_share), "--extract-ms", str(extract_ms)]
        self.model = LogicalState()
        self.book = JobBook()
        self.next_op = 0
        self.stats: Counter[str] = Counter()

    def kill_once(self, kill: int) -> None:
        log = self.tmp_path / "writer.log"
        rng = self.rng
        # Mostly mid-run; some during start-up (opening, WAL recovery, the first migration).
        during_start = rng.random() < 0.2
        delay = rng.uniform(0.02, 0.35) if during_start else rng.uniform(0.05, 0.9)
        # Half the runs stall before each statement (a slow disk), so that more kills land
        # inside a transaction rather than in the fsync after its last write.
        stall_ms = rng.choice([0.0, 2.0])
        writer = run_until_killed(
            self.location, log, self.next_op, delay, stall_ms, after_ready=not during_start,
            seed=self.seed, extra=self.extra,
        )  # fmt: skip
        lines = read_lines(log)
        errors = [line for line in lines if line["t"] == "error"]
        assert not errors and writer.returncode == -signal.SIGKILL, (
            f"kill {kill}: the writer failed on its own (rc {writer.returncode}): "
            f"{errors or log.read_text()[-2000:]}"
        )
        self.stats["kills"] += 1
        in_flight, job_in_flight = self.replay(lines)
        created = store_created(self.location)
        if not created or not schema_committed(self.location):
            # Killed before the first open committed its schema: nothing can have been
            # acknowledged, and the library must open the store as an empty one.
            assert not lines or all(line["t"] == "ready" for line in lines)
            assert not self.model.memories and not self.model.messages
            if created:
                assert_opens_as_empty_store(self.location)
                self.stats["killed before the schema committed"] += 1
            return
        self.check(kill, in_flight, job_in_flight)

    def replay(self, lines: list[dict[str, Any]]) -> tuple[Any, Any]:
        """Apply a writer's acknowledged operations and completed jobs to the model; returns
        the operation and the job in flight when it died (announced, not acknowledged)."""
        in_flight = job_in_flight = None
        for line in lines:
            if line["t"] == "intent":
                in_flight = line
            elif line["t"] == "ack":
                assert in_flight is not None and in_flight["i"] == line["i"]
                apply_logged(self.model, self.book, in_flight, line["result"])
                self.stats["acknowledged"] += 1
                self.stats[f"ack {in_flight['op']}"] += 1
                self.next_op, in_flight = line["i"] + 1, None
            elif line["t"] == "job_intent":
                job_in_flight = line["event_id"]
            elif line["t"] in ("job_done", "job_lost"):
                assert job_in_flight == line["event_id"]
                if line["t"] == "job_done":
                    self.book.done(self.model, line["event_id"], line["result"])
                    self.stats["jobs done"] += 1
                job_in_flight = None
        return in_flight, job_in_flight

    def check(self, kill: int, in_flight: Any, job_in_flight: Any) -> None:
        connection = open_db(self.location)
        try:
            found = [f"kill {kill}: {v}" for v in db_violations(connection)]
            state = logical_state(connection)
            jobs = dict(connection.query("SELECT id, state FROM jobs"))
            done = {
                row[0]: json.loads(row[1])
                for row in connection.query("SELECT id, results FROM jobs WHERE state = 'done'")
            }
        finally:
            connection.close()
        self.stats["jobs queued at a kill"] += sum(s == "queued" for s in jobs.values())
        self.stats["jobs running at a kill"] += sum(s == "running" for s in jobs.values())
        if job_in_flight is not None:  # its run died: committed entirely, or not at all
            self.stats["killed with a job committing"] += 1
            if job_in_flight in done:
                self.book.done(self.model, job_in_flight, {"results": done[job_in_flight]})
                self.stats["jobs done"] += 1
        if in_flight is not None:
            self.model, applied, half = resolve_in_flight(self.model, state, in_flight)
            found += [f"kill {kill}: {h}" for h in half]
            self.stats["killed in flight"] += 1
            self.stats[f"killed in flight: {in_flight['op']}"] += 1
            self.stats["in flight, applied" if applied else "in flight, absent"] += 1
            if applied and in_flight["op"] == "add_async":
                (event_id,) = set(jobs) - set(self.book.states)
                self.book.queued(event_id, in_flight)
            if applied and in_flight["op"] == "delete_all":
                self.book.delete_scope(in_flight["scope"])
            self.next_op = in_flight["i"] + 1
        found += [f"kill {kill}: lost or changed: {d}" for d in self.model.differences(state)]
        connection = open_db(self.location)
        try:
            found += [f"kill {kill}: {d}" for d in self.book.differences(connection)]
        finally:
            connection.close()
        assert not found, "\n".join(found[:20])

    def drain(self) -> None:
        """Run the jobs left queued by the last kill to completion, in a last writer."""
        log = self.tmp_path / "drain.log"
        command = [sys.executable, str(WRITER), self.location, "--seed", str(self.seed),
                   "--drain", *self.extra]  # fmt: skip
        with log.open("w") as out:
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=600)
        lines = read_lines(log)
        assert done.returncode == 0, log.read_text()[-3000:]
        in_flight, job_in_flight = self.replay(lines)
        assert in_flight is None and job_in_flight is None
        self.check(-1, None, None)


def crash_run(
    tmp_path: Path, kills: int, *, location: str | None = None, seed: int = SEED,
    async_share: float = 0.0, extract_ms: float = 0.0,
    covered: Callable[[Counter[str]], bool] | None = None,
) -> Counter[str]:  # fmt: skip
    """`kills` SIGKILLs of writers on one store (the file or database at `location`, by default
    a new file in `tmp_path`), each followed by the checks; with async adds, a last writer then
    runs the jobs left queued and every acknowledged job must be done once.

    How much a writer does before its kill depends on the machine's speed (a loaded 2-core CI
    runner acknowledges fewer operations per kill), so with `covered` the run goes on killing,
    up to three times `kills`, until `covered(stats)` holds: the test then asserts it held."""
    location = location or str(tmp_path / "memory.db")
    run = CrashRun(tmp_path, location, seed=seed, async_share=async_share, extract_ms=extract_ms)
    for kill in range(kills):
        run.kill_once(kill)
    kill = kills
    while covered is not None and not covered(run.stats) and kill < 3 * kills:
        run.kill_once(kill)
        kill += 1
    if async_share:
        run.drain()
        assert run.book.pending() == [], "jobs still pending after the last writer drained"
        assert all(n == 1 for e, n in run.book.completions.items())
        run.stats["jobs acknowledged"] = len(run.book.states)
        ends = Counter(run.book.states.values())
        run.stats["jobs done at the end"] = ends["done"]
        run.stats["jobs deleted with their scope"] = ends["deleted"]
        run.stats["jobs completed twice"] = sum(n > 1 for n in run.book.completions.values())
    run.stats["memories at the end"] = len(run.model.memories)
    run.stats["operations checked"] = run.next_op
    assert check_path(location) == []
    return run.stats


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_acknowledged(
    tmp_path: Path, store_kind: str, store_config: dict[str, Any]
) -> None:
    kills, covered = KILLS[store_kind], sync_run_covered(KILLS[store_kind])
    stats = crash_run(tmp_path, kills, location=store_location(store_config), covered=covered)
    print("crash stats:", dict(stats))
    assert stats["kills"] >= kills and covered(stats)


def sync_run_covered(kills: int) -> Callable[[Counter[str]], bool]:
    """More operations acknowledged than the planned kills, and some kills inside one."""
    return lambda stats: stats["acknowledged"] > kills and stats["killed in flight"] > 0


@pytest.mark.slow
def test_sigkill_with_extraction_jobs_queued_and_running_loses_none(
    tmp_path: Path, store_kind: str, store_config: dict[str, Any]
) -> None:
    """Most extraction adds are queued (async_mode=True), the rest inferred at once, and each
    job takes 150 ms of "model time", so kills find jobs queued, running and committing; the
    next writer resumes them."""
    kills, covered = ASYNC_KILLS[store_kind], async_run_covered(ASYNC_KILLS[store_kind])
    stats = crash_run(
        tmp_path, kills, location=store_location(store_config), async_share=0.7,
        extract_ms=150, covered=covered,
    )  # fmt: skip
    print("async crash stats:", dict(stats))
    assert stats["kills"] >= kills and covered(stats)
    assert (
        stats["jobs done at the end"] + stats["jobs deleted with their scope"]
        == (stats["jobs acknowledged"])
    )
    assert stats["jobs completed twice"] == 0 and stats["jobs done at the end"] > 0


def async_run_covered(kills: int) -> Callable[[Counter[str]], bool]:
    """More async adds acknowledged than the planned kills, and kills that found jobs queued
    and running."""
    return lambda stats: (
        stats["ack add_async"] > kills
        and stats["jobs queued at a kill"] > 0
        and stats["jobs running at a kill"] > 0
    )


# A process that dies inside the first migration's transaction, on each store
DYING_IN_MIGRATION = (
    "import sys, time\n"
    "from offline_mem.store.{db_module} import {db_class} as Database\n"
    "from offline_mem.store.{migrations} import MigrationContext, migrate\n"
    "db = Database(sys.argv[1])\n"
    "with db.atomic():\n"
    "    migrate(db, MigrationContext(dimension=8))\n"
    "    print('migrated, not committed', flush=True)\n"
    "    time.sleep(60)\n"
)
STORE_MODULES = {
    "sqlite": {"db_module": "db", "db_class": "Database", "migrations": "migrations"},
    "postgresql": {"db_module": "postgres.connection", "db_class": "PgDatabase",
                   "migrations": "postgres.migrations"},
}  # fmt: skip


def test_a_store_killed_during_its_first_migration_opens_as_an_empty_store(
    store_kind: str, store_config: dict[str, Any]
) -> None:
    """The window the random kills hit only sometimes, made certain: a process dies inside the
    first migration's transaction, leaving a file on disk (or a database) with no committed
    schema."""
    location = store_location(store_config)
    dying = DYING_IN_MIGRATION.format(**STORE_MODULES[store_kind])
    process = subprocess.Popen(
        [sys.executable, "-c", dying, location], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "migrated, not committed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    wait_for_dead_sessions(location)
    assert store_created(location) and not schema_committed(location)
    assert_opens_as_empty_store(location)
    assert schema_committed(location) and check_path(location) == []


def test_an_in_flight_raw_add_read_back_keeps_each_memory_s_role() -> None:
    """A raw add applied by a kill is rebuilt from the file; deleting one of its memories later
    must forget the message of the right role (a CI run once failed on an assistant's)."""
    op = {
        "op": "add_raw", "i": 17, "scope": {"user_id": "u"}, "metadata": {},
        "messages": [{"role": "user", "content": "first words"},
                     {"role": "assistant", "content": "answer words"}],
    }  # fmt: skip
    model = LogicalState()
    state = model.copy()
    apply_operation(state, op, {"results": [
        {"id": "a", "memory": "first words", "event": "ADD", "role": "user"},
        {"id": "b", "memory": "answer words", "event": "ADD", "role": "assistant"},
    ]})  # fmt: skip
    applied, was_applied, half = resolve_in_flight(model, state, op)
    assert (was_applied, half) == (True, [])
    apply_operation(applied, {"op": "delete", "id": "b"}, None)
    apply_operation(state, {"op": "delete", "id": "b"}, None)
    assert applied.differences(state) == []
    assert ("u", None, None, "assistant", "answer words") not in applied.messages
