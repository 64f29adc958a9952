"""`verify` of a PostgreSQL database (store/postgres/integrity.py): a database filled through
the public API is sound; damage written with raw SQL behind the API is named by the right check;
and `offline-mem --db postgresql://... verify` reports it as on a file, without the password."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cli_helpers import Cli, install
from fake_memory import fake_memory
from postgres_server import PASSWORD, PostgresServer
from test_cli_admin import populate

from offline_mem import Memory
from offline_mem.store.integrity import VerifyReport
from offline_mem.store.postgres.integrity import verify_database
from offline_mem.store.postgres.vectors import vector_literal
from offline_mem.testing import FakeEmbedder, answer

pytestmark = pytest.mark.postgres

DATABASE_CHECKS = [
    "rows",
    "validity",
    "message vectors",
    "keyword rows",
    "keyword statistics",
    "message keyword rows",
    "message keyword statistics",
    "vector values",
    "texts",
    "scopes",
    "models",
]


@pytest.fixture
def memory(postgres_url: str) -> Iterator[Memory]:
    """A database with raw and inferred memories of two users, a system message, an update and
    a deletion, written through the public API."""
    m = fake_memory({"store": postgres_url}, answer("User keeps bees.", "User works with Rui."))
    try:
        m.add("I keep the spare key in the blue pot", user_id="ana", infer=False)
        m.add("I sail on Sundays", user_id="bob", infer=False)
        m.add(
            [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "I keep bees and work with Rui"},
            ],
            user_id="ana",
        )
        gone = m.add("Delete me", user_id="bob", infer=False)["results"][0]["id"]
        m.delete(gone)
        note = m.add("A note about Porto", agent_id="a1", infer=False)["results"][0]["id"]
        m.update(note, "A note about Braga")
        yield m
    finally:
        m.close()


def verify(m: Memory) -> VerifyReport:
    return verify_database(m.store.db, embedder=FakeEmbedder().identity)


def damage(url: str, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Write behind the API, on a connection of its own."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql, params)


def found(report: VerifyReport) -> dict[str, list[str]]:
    return {
        name: [p.detail for p in report.problems_of(name)]
        for name in report.checks
        if report.problems_of(name)
    }


def memory_row(url: str, text: str) -> tuple[int, str]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT rowid, id FROM memories WHERE text = %s", (text,)).fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def test_a_database_filled_through_the_api_verifies_clean(memory: Memory) -> None:
    statements: list[str] = []
    memory.store.db.tracer = lambda sql, _params: statements.append(sql)
    report = verify(memory)
    memory.store.db.tracer = None
    assert report.checks == DATABASE_CHECKS
    assert report.ok, report.problems
    assert report.skipped == {}
    assert all(sql.lstrip().startswith("SELECT") for sql in statements)  # read-only
    counts = memory.store.counts()
    assert counts["memories"] == 5 and counts["messages"] == 5  # the fill is what it says


def test_verify_reads_one_snapshot(memory: Memory, postgres_url: str) -> None:
    """A write committed while the checks run is not seen by the checks after it."""

    def write_meanwhile(check: str) -> None:
        if check == "keyword statistics":
            damage(postgres_url, "UPDATE keyword_terms SET df = df + 1 WHERE term = 'sail'")

    db = memory.store.db
    assert verify_database(db, embedder=FakeEmbedder().identity, progress=write_meanwhile).ok
    assert list(found(verify(memory))) == ["keyword statistics"]


def test_a_vector_off_unit_length_is_found(memory: Memory, postgres_url: str) -> None:
    rowid, _ = memory_row(postgres_url, "I sail on Sundays")
    with psycopg.connect(postgres_url) as conn:
        (values,) = conn.execute(
            "SELECT embedding::real[] FROM memories WHERE rowid = %s", (rowid,)
        ).fetchone()
    doubled = vector_literal([2 * v for v in values])
    damage(
        postgres_url,
        "UPDATE memories SET embedding = %s::vector WHERE rowid = %s",
        (doubled, rowid),
    )
    assert found(verify(memory)) == {
        "vector values": [f"memory vector row {rowid} has length 2.0000, not 1"]
    }


def test_pgvector_refuses_a_nan_vector(memory: Memory, postgres_url: str) -> None:
    rowid, _ = memory_row(postgres_url, "I sail on Sundays")
    dimension = FakeEmbedder().identity.dimension
    nan = "[" + ",".join(["NaN"] + ["0"] * (dimension - 1)) + "]"
    with pytest.raises(psycopg.errors.DataException, match="NaN not allowed in vector"):
        damage(
            postgres_url,
            "UPDATE memories SET embedding = %s::vector WHERE rowid = %s",
            (nan, rowid),
        )
    assert verify(memory).ok


def test_a_document_frequency_off_by_one_is_found(memory: Memory, postgres_url: str) -> None:
    damage(
        postgres_url,
        "UPDATE keyword_terms SET df = df + 1 WHERE partition = 'bob' AND term = 'sail'",
    )
    assert found(verify(memory)) == {
        "keyword statistics": ["term 'sail' in partition 'bob': df 2, postings 1"]
    }


def test_a_text_changed_without_its_hash_is_found(memory: Memory, postgres_url: str) -> None:
    rowid, mid = memory_row(postgres_url, "I sail on Sundays")
    damage(
        postgres_url, "UPDATE memories SET text = 'I sail on Mondays' WHERE rowid = %s", (rowid,)
    )
    assert found(verify(memory)) == {
        "texts": [
            f"memory {mid}'s text does not match its hash",
            f"memory {mid}'s newest history row holds another text than the memory",
        ]
    }


def test_provenance_across_scopes_is_found(memory: Memory, postgres_url: str) -> None:
    rowid, mid = memory_row(postgres_url, "I sail on Sundays")  # bob's
    with psycopg.connect(postgres_url) as conn:
        seq, message = conn.execute(
            "SELECT seq, id FROM messages WHERE user_id = 'ana' ORDER BY seq LIMIT 1"
        ).fetchone()
    damage(
        postgres_url,
        "INSERT INTO provenance (memory_rowid, message_seq) VALUES (%s, %s)",
        (rowid, seq),
    )
    assert found(verify(memory)) == {
        "scopes": [f"memory {mid} cites message {message} of another scope"]
    }


def test_a_link_to_a_missing_row_cannot_be_written(memory: Memory, postgres_url: str) -> None:
    """Why the database has no "links" check: its foreign keys refuse an orphan."""
    rowid, _ = memory_row(postgres_url, "I sail on Sundays")
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        damage(
            postgres_url,
            "INSERT INTO provenance (memory_rowid, message_seq) VALUES (%s, %s)",
            (rowid, 10**9),
        )


def test_a_validity_date_off_by_a_minute_is_found(memory: Memory, postgres_url: str) -> None:
    rowid, mid = memory_row(postgres_url, "I sail on Sundays")
    with psycopg.connect(postgres_url) as conn:
        (start,) = conn.execute(
            "SELECT valid_from FROM memories WHERE rowid = %s", (rowid,)
        ).fetchone()
    earlier = datetime.fromisoformat(start) - timedelta(minutes=1)  # still a date
    damage(
        postgres_url,
        "UPDATE memories SET valid_from = %s WHERE rowid = %s",
        (earlier.isoformat(timespec="microseconds"), rowid),
    )
    problems = found(verify(memory))
    assert list(problems) == ["validity"]
    (problem,) = problems["validity"]
    assert problem.startswith(f"memory {mid} (active): valid_from ")


def test_another_embedder_pinned_in_meta_is_found(memory: Memory, postgres_url: str) -> None:
    other = "f" * 64
    damage(postgres_url, "UPDATE meta SET value = %s WHERE key = 'embedder_sha256'", (other,))
    ident = FakeEmbedder().identity
    assert found(verify(memory)) == {
        "models": [
            f"meta pins embedder {ident.name!r} (sha256 {other}, {ident.dimension} dims); the "
            f"configured one is {ident.name!r} (sha256 {ident.sha256}, {ident.dimension} dims)",
            f"5 memories written by another embedder (sha256 {ident.sha256}) than the pinned one",
        ]
    }


def test_an_indexed_message_without_a_vector_is_found(memory: Memory, postgres_url: str) -> None:
    damage(postgres_url, "UPDATE messages SET embedding = NULL WHERE content = 'I sail on Sundays'")
    with psycopg.connect(postgres_url) as conn:
        (mid,) = conn.execute(
            "SELECT id FROM messages WHERE content = 'I sail on Sundays'"
        ).fetchone()
    assert found(verify(memory)) == {"message vectors": [f"message {mid} has no vector"]}


# -- the command line -------------------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    return install(monkeypatch, tmp_path)


@pytest.fixture
def password_url(postgres_server: PostgresServer) -> str:
    """A new database, reached over loopback TCP with a password."""
    postgres_server.create_database("verify_cli")
    return postgres_server.url("verify_cli", tcp=True)


def test_the_cli_verifies_a_database(cli: Cli, password_url: str) -> None:
    cli.db = password_url  # type: ignore[assignment]
    populate(cli)
    clean = cli.run("verify")
    assert clean.exit_code == 0, clean.output
    assert clean.stdout.splitlines() == [f"ok      {name}" for name in DATABASE_CHECKS]
    report = json.loads(cli.ok("--json", "verify"))
    assert report["ok"] is True and list(report["checks"]) == DATABASE_CHECKS
    assert report["path"].startswith("postgresql://postgres:***@127.0.0.1:")
    assert PASSWORD not in clean.output + clean.stderr + json.dumps(report)

    damage(password_url, "UPDATE keyword_terms SET df = df + 1 WHERE term = 'porto'")
    damaged = cli.run("verify")
    assert damaged.exit_code == 1
    assert "FAILED  keyword statistics" in damaged.stdout.splitlines()
    assert "term 'porto' in partition" in damaged.stdout
    assert damaged.stderr.splitlines()[-1].startswith("error: postgresql://postgres:***@127.0.0.1:")
    assert "problem(s) found" in damaged.stderr
    assert PASSWORD not in damaged.output + damaged.stderr
