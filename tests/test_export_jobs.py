"""Export and import carry the extraction jobs not done yet: a file exported while async adds are
queued (or failed) imports with those jobs, so their facts are still extracted. Done jobs stay
behind (their memories travel), a running job travels as queued, a failed one as failed, and a
job line that cannot be trusted is refused with nothing written.

Fake models (offline_mem/testing.py, through tests/fake_memory.py).
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

import pytest
from fake_memory import fake_memory
from invariants import violations

from offline_mem import Memory
from offline_mem.errors import ExtractionError
from offline_mem.store import job_worker
from offline_mem.testing import answer
from offline_mem.transfer.export import export_lines
from offline_mem.transfer.format import ImportRefusedError
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.reader import read_export

JOB_KEYS = {"type", "id", "scope", "user_id", "agent_id", "run_id", "kind", "request", "state",
            "attempts", "error", "created_at", "finished_at"}  # fmt: skip


def open_memory(path: Path, *script: Any, **config: Any) -> Any:
    """The fake-model Memory on a SQLite file (these tests read the file)."""
    return fake_memory({"path": str(path)}, *script, **config)


def exported(memory: Memory) -> list[str]:
    return list(export_lines(memory.store.db))


def rows_of(lines: list[str], kind: str) -> list[dict[str, Any]]:
    return [row for line in lines[1:] if (row := json.loads(line))["type"] == kind]


def facts(memory: Memory, user_id: str = "u1") -> list[str]:
    found = memory.get_all(filters={"user_id": user_id}, top_k=100)["results"]
    return sorted(item["memory"] for item in found)


def queued_source(path: Path) -> tuple[Memory, list[str]]:
    """A file with a raw memory and three async adds still queued (two scopes)."""
    memory = open_memory(path, job_worker=False)
    memory.add("I keep bees", user_id="u1", infer=False)
    events = [
        memory.add("I like figs", user_id="u1", async_mode=True)["event_id"],
        memory.add(
            [{"role": "user", "content": "I like plums"}, {"role": "assistant", "content": "Ok"}],
            user_id="u1", metadata={"src": "chat"}, async_mode=True,
        )["event_id"],
        memory.add("I sail on weekends", user_id="u2", agent_id="a1", async_mode=True)["event_id"],
    ]  # fmt: skip
    return memory, events


def test_queued_jobs_are_exported_imported_and_run(tmp_path: Path) -> None:
    source, events = queued_source(tmp_path / "a.db")
    lines = exported(source)
    header = json.loads(lines[0])
    assert header["counts"]["job"] == 3
    assert [json.loads(line)["type"] for line in lines[-3:]] == ["job"] * 3  # after the others
    jobs = rows_of(lines, "job")
    assert [job["id"] for job in jobs] == events
    assert all(set(job) == JOB_KEYS and job["state"] == "queued" for job in jobs)
    messages = {row["id"] for row in rows_of(lines, "message")}
    assert all({m["id"] for m in job["request"]["messages"]} <= messages for job in jobs)

    target = open_memory(
        tmp_path / "b.db", answer("User likes figs"), answer("User likes plums"),
        answer("User sails on weekends"), job_worker=False,
    )  # fmt: skip
    report = import_data(target, read_export(lines))
    assert report.counts["job"] == 3
    assert exported(target) == lines  # export -> import -> export: the same bytes, jobs included
    assert target.pending() == 3 and target.pending(user_id="u1") == 2
    assert target.job(events[0])["status"] == "PENDING"
    target.flush(timeout=30)
    assert target.pending() == 0
    assert facts(target) == ["I keep bees", "User likes figs", "User likes plums"]
    assert facts(target, "u2") == ["User sails on weekends"]
    assert all(target.job(event)["status"] == "SUCCEEDED" for event in events)
    assert violations(target.store.db) == []
    source.close()
    target.close()


def test_a_worker_of_the_importing_memory_runs_the_jobs_without_a_flush(tmp_path: Path) -> None:
    source, _ = queued_source(tmp_path / "a.db")
    target = open_memory(tmp_path / "b.db", answer("User likes figs"))  # job_worker on
    import_data(target, read_export(exported(source)))
    deadline = time.monotonic() + 30
    while target.pending() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert target.pending() == 0 and "User likes figs" in facts(target)
    source.close()
    target.close()


def test_a_running_job_is_exported_as_queued_without_its_claim(tmp_path: Path) -> None:
    source = open_memory(tmp_path / "a.db", job_worker=False)
    event = source.add("I like figs", user_id="u1", async_mode=True)["event_id"]
    with source.store.atomic():
        source.store.db.execute(
            "UPDATE jobs SET state = 'running', owner = 'elsewhere', owner_host = ?, "
            "owner_pid = 1, lease_until = ?, claims = 1, started_at = created_at",
            (platform.node(), time.time() + 3600),
        )
    (job,) = rows_of(exported(source), "job")
    assert job["id"] == event and job["state"] == "queued" and set(job) == JOB_KEYS
    target = open_memory(tmp_path / "b.db", answer("User likes figs"), job_worker=False)
    import_data(target, read_export(exported(source)))
    row = target.store.db.query_one("SELECT state, owner, lease_until, claims FROM jobs")
    assert tuple(row) == ("queued", None, None, 0)
    target.flush(timeout=30)
    assert facts(target) == ["User likes figs"]
    source.close()
    target.close()


def test_failed_jobs_travel_as_failed_and_done_jobs_stay_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(job_worker, "RETRY_AFTER_S", (0.0, 0.0))
    broken = ExtractionError("the model answered outside its schema")
    source = open_memory(tmp_path / "a.db", answer("User likes figs"), broken, broken, broken)
    done = source.add("I like figs", user_id="u1", async_mode=True)["event_id"]
    failed = source.add("I like pears", user_id="u1", async_mode=True)["event_id"]
    source.flush(timeout=30)
    assert source.job(done)["status"] == "SUCCEEDED"
    lines = exported(source)
    (job,) = rows_of(lines, "job")  # the done job's result is its memory, exported as such
    assert job["id"] == failed and job["state"] == "failed" and job["attempts"] == 3
    assert job["error"] == "ExtractionError: the model answered outside its schema"
    assert rows_of(lines, "memory")[0]["text"] == "User likes figs"

    target = open_memory(tmp_path / "b.db", job_worker=False)
    import_data(target, read_export(lines))
    assert exported(target) == lines
    assert target.pending() == 0 and target.job(done) is None
    keys = ("event_id", "status", "attempts", "error", "created_at", "finished_at", "user_id")
    (there,), (here,) = target.failed_jobs(), source.failed_jobs()
    assert {k: there[k] for k in keys} == {k: here[k] for k in keys}
    assert there["status"] == "FAILED"
    source.close()
    target.close()


def test_without_jobs_the_file_is_as_before_and_old_files_import(tmp_path: Path) -> None:
    source = open_memory(tmp_path / "a.db", answer("User likes figs"), job_worker=False)
    source.add("I like figs", user_id="u1", async_mode=True)
    source.flush(timeout=30)
    lines = exported(source)
    header = json.loads(lines[0])
    assert set(header["counts"]) == {"message", "entity", "memory", "history"}  # no "job" count
    assert rows_of(lines, "job") == []
    header["counts"]["job"] = 0  # an explicit zero reads too
    data = read_export([json.dumps(header), *lines[1:]])
    target = open_memory(tmp_path / "b.db", job_worker=False)
    assert "job" not in import_data(target, data).counts
    assert exported(target) == lines and target.pending() == 0
    source.close()
    target.close()


def test_a_job_may_name_messages_already_in_the_target_but_not_reuse_a_job_id(
    tmp_path: Path,
) -> None:
    memory = open_memory(tmp_path / "a.db", answer("User likes figs"), job_worker=False)
    event = memory.add("I like figs", user_id="u1", async_mode=True)["event_id"]
    lines = exported(memory)
    header = json.loads(lines[0])
    header["counts"] = {"message": 0, "entity": 0, "memory": 0, "history": 0, "job": 1}
    (job,) = rows_of(lines, "job")
    only_job = [json.dumps(header), json.dumps(job)]
    with pytest.raises(ImportRefusedError, match="already holds 1 of the file's job ids"):
        import_data(memory, read_export(only_job))
    assert exported(memory) == lines
    renamed = [json.dumps(header), json.dumps({**job, "id": "another-job"})]
    import_data(memory, read_export(renamed))  # its message is the target's own
    assert memory.pending() == 2
    memory.flush(timeout=30)
    assert memory.job(event)["status"] == memory.job("another-job")["status"] == "SUCCEEDED"
    memory.close()


def test_a_deleted_message_is_left_out_of_its_jobs_request(tmp_path: Path) -> None:
    source = open_memory(tmp_path / "a.db", job_worker=False)
    turns = [{"role": "user", "content": "I like figs"}, {"role": "user", "content": "and plums"}]
    source.add(turns, user_id="u1", async_mode=True)
    (plums,) = source.store.db.query_one("SELECT id FROM messages WHERE content = 'and plums'")
    source.delete(plums)
    (job,) = rows_of(exported(source), "job")
    assert len(job["request"]["messages"]) == 1 and plums not in json.dumps(job)
    target = open_memory(tmp_path / "b.db", answer("User likes figs"), job_worker=False)
    import_data(target, read_export(exported(source)))
    target.flush(timeout=30)
    assert facts(target) == ["User likes figs"]
    source.close()
    target.close()


def broken_files(lines: list[str]) -> dict[str, tuple[list[str], str]]:
    header, body = lines[0], lines[1:]
    at = next(i for i, line in enumerate(body) if json.loads(line)["type"] == "job")
    job = json.loads(body[at])
    other_scope = next(r["id"] for r in rows_of(lines, "message") if r["user_id"] == "u2")

    def with_job(**changes: Any) -> list[str]:
        changed = list(body)
        changed[at] = json.dumps({**job, **changes})
        return [header, *changed]

    def with_request(**changes: Any) -> list[str]:
        return with_job(request={**job["request"], **changes})

    absent = "00000000-0000-4000-8000-000000000000"  # a message id no file holds
    unknown = [{"id": absent, "extract": True}]
    no_job_count, one_more = json.loads(header), json.loads(header)
    del no_job_count["counts"]["job"]
    one_more["counts"]["job"] += 1
    return {
        "attempts type": (with_job(attempts="3"), "job 'attempts' has the wrong type"),
        "request type": (with_job(request="{}"), "job 'request' has the wrong type"),
        "unknown key": (with_job(owner="x"), "unknown keys ['owner']"),
        "running": (with_job(state="running"), "a job is imported queued or failed"),
        "done": (with_job(state="done"), "a job is imported queued or failed"),
        "kind": (with_job(kind="other"), "unknown kind 'other'"),
        "scope": (with_job(user_id="someone-else"), "does not match its ids"),
        "duplicate": ([json.dumps(one_more), *body, body[at]], "job id: '"),
        "request keys": (with_request(now=None), "request 'now' has the wrong type"),
        "request time": (with_request(now="yesterday"), "ISO-8601"),
        "request message": (with_request(messages=[{"id": 1}]), "each request message"),
        "other scope": (
            with_request(messages=[{"id": other_scope, "extract": True}]),
            "is of another scope",
        ),
        "unknown message": (
            with_request(messages=unknown),
            f"message '{absent}' is neither in the file nor in the target file",
        ),
        "truncated": ([header, *body[:-1]], "(truncated?)"),
        "no job count": ([json.dumps(no_job_count), *body], "announces 0 job lines"),
    }


def test_a_bad_job_line_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    source, _ = queued_source(tmp_path / "a.db")
    lines = exported(source)
    target = open_memory(tmp_path / "b.db", job_worker=False)
    target.add("I keep a diary", user_id="u9", infer=False)
    before = exported(target)
    for name, (bad, reason) in broken_files(lines).items():
        with pytest.raises(ImportRefusedError, match="refusing the export file") as raised:
            import_data(target, read_export(bad))
        assert reason in str(raised.value), (name, str(raised.value))
        assert exported(target) == before, name
    assert target.pending() == 0
    source.close()
    target.close()
