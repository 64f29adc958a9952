"""`offline-mem stats | export | import | verify | backup`: export -> import -> export gives the
same bytes, import re-embeds for another embedder and refuses files it cannot trust, verify names
what is broken, backup copies a live file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import Cli, install

from offline_mem.cli import common
from offline_mem.errors import ExtractionError
from offline_mem.store.db import Database
from offline_mem.testing import FakeEmbedder, answer, changes
from offline_mem.transfer.export import FORMAT_VERSION

MOVED = "User lives in Porto now, not in Lisbon."


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    return install(monkeypatch, tmp_path)


def populate(cli: Cli) -> dict[str, str]:
    """A file with inferred and raw memories, a supersession, an update, a deletion, entities,
    metadata, an expiry, several scopes and messages that became no memory."""
    cli.still_true = changes(("User lives in Lisbon.", MOVED))
    cli.script += [
        answer("User lives in Lisbon.", "User works with Marta Silva."),
        answer(MOVED),
        ExtractionError("not this time"),
    ]
    messages = [
        {"role": "user", "content": "I live in Lisbon and work with Marta Silva"},
        {"role": "assistant", "content": "Nice!", "name": "bot"},
    ]
    first = cli.json(
        "add",
        "--user",
        "u1",
        "--metadata",
        '{"src": "chat", "n": 1.5}',
        "--messages",
        "-",
        input=json.dumps(messages),
    )["results"]
    moved = cli.json("add", "--user", "u1", "I live in Porto now")["results"][0]["id"]
    assert cli.run("add", "--user", "u1", "lost message").exit_code == 1
    cli.script.append({})
    cli.ok("add", "--user", "u1", "--agent", "a1", "Hello there")
    raw = cli.json(
        "add",
        "--agent",
        "a1",
        "--run",
        "r1",
        "--no-infer",
        "--expires",
        "2001-01-01",
        "An expired note about Porto",
    )["results"][0]["id"]
    gone = cli.json("add", "--user", "u2", "--no-infer", "Delete me, Ana")["results"][0]["id"]
    cli.ok("update", raw, "An expired note about Braga", "--metadata", '{"é": "ü"}')
    cli.ok("delete", gone)
    return {"lisbon": first[0]["id"], "marta": first[1]["id"], "moved": moved, "raw": raw}


def export(cli: Cli, db: Path, *extra: str) -> str:
    return cli.ok("export", *extra, db=db)


def test_export_import_export_is_identical(cli: Cli, tmp_path: Path) -> None:
    ids = populate(cli)
    for extra in ((), ("--vectors",)):
        first = export(cli, cli.db, *extra)
        header, *rows = [json.loads(line) for line in first.splitlines()]
        assert header["format_version"] == FORMAT_VERSION
        # the deleted raw memory's message went with it (docs/storage.md)
        assert header["counts"] == {"message": 5, "entity": 5, "memory": 4, "history": 8}
        kinds = [r["type"] for r in rows]
        assert kinds == sorted(kinds, key=["message", "entity", "memory", "history"].index)
        moved = next(r for r in rows if r["type"] == "memory" and r["id"] == ids["moved"])
        assert moved["sources"] and moved["entities"] == ["lisbon", "porto"]
        target = tmp_path / f"copy{len(extra)}.db"
        dump = tmp_path / "dump.jsonl"
        dump.write_text(first)
        result = cli.json("import", str(dump), db=target)
        assert result["imported"] == header["counts"]
        assert result["reembedded"] is (not extra)
        assert export(cli, target, *extra) == first
        assert cli.run("verify", db=target).exit_code == 0
    # the copy answers like the original
    query = ("search", "--user", "u1", "where do I live")
    assert cli.json(*query, db=target) == cli.json(*query)
    assert cli.json("history", ids["lisbon"], db=target) == cli.json("history", ids["lisbon"])
    assert cli.ok("export", str(tmp_path / "file.jsonl")).startswith(
        "exported 5 messages, 5 entities, 4 memories, 8 history rows"
    )
    assert (tmp_path / "file.jsonl").read_text() == export(cli, cli.db)


def test_import_re_embeds_for_another_embedder(cli: Cli, tmp_path: Path, monkeypatch) -> None:
    populate(cli)
    dump = tmp_path / "dump.jsonl"
    dump.write_text(export(cli, cli.db, "--vectors"))
    other = FakeEmbedder(dimension=64, name="other-embedder")
    cli.embedder = other
    monkeypatch.setattr(common, "MODELS", cli.models())
    target = tmp_path / "other.db"
    assert cli.ok("import", str(dump), db=target).endswith("(re-embedded with other-embedder)\n")
    stats = cli.json("stats", db=target)
    assert stats["embedder"] == {
        "name": "other-embedder",
        "sha256": other.identity.sha256,
        "dimension": "64",
    }
    rows = [json.loads(line) for line in export(cli, target).splitlines()[1:]]
    assert {r["embedder_sha256"] for r in rows if r["type"] == "memory"} == {other.identity.sha256}
    hits = cli.json("search", "--user", "u1", "--facts-only", "Porto", db=target)["results"]
    assert hits[0]["memory"] == MOVED
    assert cli.run("verify", db=target).exit_code == 0


ABSENT = "00000000-0000-4000-8000-000000000000"  # a message id (a UUID) that no file holds


def broken_exports(good: str) -> dict[str, tuple[str, str]]:
    header, *rows = good.splitlines()
    h = json.loads(header)
    memory_at = next(i for i, r in enumerate(rows) if json.loads(r)["type"] == "memory")

    def with_header(**changes: object) -> str:
        return "\n".join([json.dumps({**h, **changes}), *rows]) + "\n"

    def with_memory(**changes: object) -> str:
        changed = list(rows)
        changed[memory_at] = json.dumps({**json.loads(rows[memory_at]), **changes})
        return "\n".join([header, *changed]) + "\n"

    return {
        "not an export": ('{"hello": "world"}\n', "not an offline_mem export"),
        "empty": ("", "the file is empty"),
        "format version": (with_header(format_version=99), "format version 99"),
        "newer schema": (with_header(schema_version=999), "schema version 999 is newer"),
        "truncated": ("\n".join([header, *rows[:-1]]) + "\n", "(truncated?)"),
        "bad json": (good.replace(rows[0], rows[0][:-1]), "line 2: not JSON"),
        "hash": (with_memory(text="tampered"), "its hash does not match its text"),
        "source": (with_memory(sources=[ABSENT]), f"source message '{ABSENT}' is not in the file"),
        "unknown key": (with_memory(extra=1), "unknown keys ['extra']"),
        "scope": (with_memory(user_id="someone-else"), "does not match its ids"),
        "vector": (with_memory(vector="AAAA"), "vectors must be given for every memory"),
    }


def test_import_refuses_what_it_cannot_trust(cli: Cli, tmp_path: Path) -> None:
    populate(cli)
    good = export(cli, cli.db)
    target = tmp_path / "target.db"
    for name, (text, reason) in broken_exports(good).items():
        dump = tmp_path / f"{name}.jsonl"
        dump.write_text(text)
        result = cli.run("import", str(dump), db=target)
        assert result.exit_code == 1, name
        assert result.stderr.startswith("error: refusing the export file: "), name
        assert reason in result.stderr, (name, result.stderr)
        assert not target.exists() or cli.json("stats", db=target)["counts"]["memories"] == 0
    # ids already in the target: refused, nothing written
    dump = tmp_path / "good.jsonl"
    dump.write_text(good)
    before = export(cli, cli.db)
    result = cli.run("import", str(dump))
    assert result.exit_code == 1 and "already holds" in result.stderr
    assert export(cli, cli.db) == before


def test_verify_names_a_deleted_vector_row(cli: Cli) -> None:
    ids = populate(cli)
    assert cli.ok("verify").splitlines()[0] == "ok      sqlite"
    db = Database(str(cli.db))
    rowid = db.query_one("SELECT rowid FROM memories WHERE id = ?", (ids["marta"],))[0]
    db.execute("DELETE FROM memory_vectors WHERE rowid = ?", (rowid,))
    db.execute("UPDATE keyword_partitions SET docs = docs + 5 WHERE partition = 'u1'")
    db.close()
    result = cli.run("verify")
    assert result.exit_code == 1
    assert f"FAILED  vectors\n        memory {ids['marta']} has no vector row" in result.stdout
    assert "FAILED  keyword statistics" in result.stdout
    assert "ok      links" in result.stdout and "ok      sqlite" in result.stdout
    assert result.stderr.endswith("2 problem(s) found\n")
    report = json.loads(cli.run("--json", "verify").stdout)
    assert report["ok"] is False
    assert report["checks"]["vectors"] == [
        f"memory {ids['marta']} has no vector row (memory_vectors)"
    ]


def test_verify_checks_the_messages_keyword_index(cli: Cli) -> None:
    populate(cli)
    db = Database(str(cli.db))
    seq, mid = db.query_one("SELECT seq, id FROM messages WHERE role != 'system' LIMIT 1")
    db.execute("DELETE FROM message_keyword_postings WHERE message_seq = ?", (seq,))
    db.execute("DELETE FROM message_keyword_docs WHERE message_seq = ?", (seq,))
    db.close()
    report = json.loads(cli.run("--json", "verify").stdout)
    checks = report["checks"]
    assert report["ok"] is False
    assert checks["message keyword rows"] == [
        f"message {mid} has no keyword row (message_keyword_docs)"
    ]
    assert any("stored docs/length" in p for p in checks["message keyword statistics"])
    assert checks["keyword rows"] == [] and checks["message vectors"] == []


def test_verify_checks_history_dates_and_the_newest_text(cli: Cli) -> None:
    ids = populate(cli)
    db = Database(str(cli.db))
    db.execute("UPDATE history SET updated_at = '2026-12-05T19#41' WHERE memory_id = ?",
               (ids["marta"],))  # fmt: skip
    db.execute("UPDATE history SET new_memory = 'Marta lives in Bergen' WHERE memory_id = ?",
               (ids["marta"],))  # fmt: skip
    db.close()
    report = json.loads(cli.run("--json", "verify").stdout)["checks"]
    assert [p for p in report["rows"] if "not a date" in p] != []
    assert report["texts"] == [f"memory {ids['marta']}'s newest history row holds another text "
                               "than the memory"]  # fmt: skip


def test_verify_reports_orphans_and_a_foreign_embedder(cli: Cli, monkeypatch) -> None:
    ids = populate(cli)
    db = Database(str(cli.db))
    db.execute("PRAGMA foreign_keys = OFF")
    db.execute("DELETE FROM memories WHERE id = ?", (ids["raw"],))
    db.close()
    cli.embedder = FakeEmbedder(name="another")
    monkeypatch.setattr(common, "MODELS", cli.models())
    report = json.loads(cli.run("--json", "verify").stdout)
    checks = report["checks"]
    assert any("orphan in memory_vectors" in p for p in checks["vectors"])
    assert any("belongs to no memory (orphan)" in p for p in checks["keyword rows"])
    assert any("points at a missing memory" in p for p in checks["links"])
    assert any("the configured one is 'another'" in p for p in checks["models"])


def test_stats_and_backup(cli: Cli, tmp_path: Path) -> None:
    populate(cli)
    stats = cli.json("stats")
    assert stats["counts"] == {"memories": 4, "messages": 5, "history": 8, "entities": 5}
    assert stats["space"]["used_bytes"] > 0 and stats["space"]["free_bytes"] >= 0
    assert stats["file_size"] > 0 and stats["embedder"]["name"] == "fake-embedder"
    assert [
        (s["user_id"], s["agent_id"], s["run_id"], s["state"], s["memories"], s["expired"])
        for s in stats["scopes"]
    ] == [
        (None, "a1", "r1", "active", 1, 1),
        ("u1", None, None, "active", 2, 0),
        ("u1", None, None, "superseded", 1, 0),
    ]
    assert {x["name"] for x in stats["extractors"]} == {None, "unknown"}
    text = cli.ok("stats")
    assert "embedder: fake-embedder (384 dims" in text and "user=u1" in text
    assert "free (offline-mem compact gives it back)" in text
    compacted = cli.json("compact")
    assert compacted["bytes_after"] <= compacted["bytes_before"]
    assert cli.json("stats")["space"]["free_bytes"] == 0
    copy = tmp_path / "backup.db"
    assert cli.ok("backup", str(copy)).startswith(f"backed up to {copy}")
    assert export(cli, copy) == export(cli, cli.db)
    assert cli.run("verify", db=copy).exit_code == 0
    again = cli.run("backup", str(copy))
    assert again.exit_code == 1 and "already exists" in again.stderr
    missing = cli.run("stats", db=tmp_path / "none.db")
    assert missing.exit_code == 1 and missing.stderr.startswith("error: no memory file at")


def test_async_adds_wait_for_flush_and_stats_count_the_jobs(cli: Cli, monkeypatch) -> None:
    from offline_mem.store import job_worker

    monkeypatch.setattr(job_worker, "RETRY_AFTER_S", (0.0, 0.0))
    broken = ExtractionError("the model answered outside its schema")
    cli.script += [answer("User keeps bees."), broken, broken, broken]
    queued = cli.json("add", "--user", "u1", "--async", "I keep bees on the roof")
    assert queued["status"] == "PENDING" and queued["results"] == []
    line = cli.ok("add", "--user", "u1", "--async", "I sold the old boat")
    assert line.startswith("queued as job ") and "offline-mem flush" in line
    # the turns are searchable before any extraction; the commands ran no job on their way out
    found = cli.json("search", "--user", "u1", "bees on the roof")["results"]
    assert found[0]["kind"] == "message" and found[0]["content"] == "I keep bees on the roof"
    jobs = cli.json("stats")["jobs"]
    assert (jobs["queued"], jobs["running"], jobs["done"], jobs["failed"]) == (2, 0, 0, 0)
    assert cli.ok("flush") == "ran 2 extraction jobs; 1 failed (see offline-mem stats)\n"
    assert [m["memory"] for m in cli.json("list", "--user", "u1")["results"]] == [
        "User keeps bees."
    ]
    jobs = cli.json("stats")["jobs"]
    assert (jobs["queued"], jobs["done"], jobs["failed"]) == (0, 1, 1)
    (failure,) = jobs["failures"]
    assert failure["user_id"] == "u1" and failure["attempts"] == 3
    assert failure["error"] == "ExtractionError: the model answered outside its schema"
    text = cli.ok("stats")
    assert "extraction jobs: 0 queued, 0 running, 1 done, 1 failed" in text
    assert f"failed {failure['event_id']} after 3 runs: ExtractionError" in text
    assert cli.ok("flush", "--timeout", "5") == "no extraction jobs pending\n"
