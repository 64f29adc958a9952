"""The PostgreSQL store through the public API, against the real server (tests/postgres_server.py):
what is ported so far (docs/design/postgresql.md) gives the SQLite store's results, and what is
not raises NotImplementedInStoreError before changing anything."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from postgres_server import PostgresServer

from offline_mem import (
    ConfigError,
    Memory,
    MemoryNotFoundError,
    NotImplementedInStoreError,
    StoreConnectionError,
    StoreLoginError,
)
from offline_mem.store.filters import compile_filters
from offline_mem.store.postgres import PostgresStore
from offline_mem.testing import FakeEmbedder

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_memory(postgres_url: str, embedder: FakeEmbedder) -> Iterator[Memory]:
    with Memory({"store": postgres_url}, embedder=embedder) as mem:
        yield mem


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def test_raw_add_get_get_all_and_history(pg_memory: Memory, postgres_url: str) -> None:
    added = pg_memory.add(
        [{"role": "user", "content": "I live in Porto"}, {"role": "user", "content": "I like tea"}],
        user_id="alice", infer=False, metadata={"source": "chat"},
    )  # fmt: skip
    ids = [item["id"] for item in added["results"]]
    assert [item["memory"] for item in added["results"]] == ["I live in Porto", "I like tea"]
    got = pg_memory.get(ids[0])
    assert got is not None
    assert (got["memory"], got["user_id"], got["metadata"]) == (
        "I live in Porto", "alice", {"source": "chat"},
    )  # fmt: skip
    listed = pg_memory.get_all(filters={"user_id": "alice"})["results"]
    assert sorted(item["memory"] for item in listed) == ["I like tea", "I live in Porto"]
    assert pg_memory.get_all(filters={"user_id": "bob"})["results"] == []
    history = pg_memory.history(ids[0])
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in history] == [
        ("ADD", None, "I live in Porto")
    ]
    # the messages are stored with their vectors and keyword rows, in the same transaction
    assert _rows(postgres_url, "SELECT count(*), count(embedding) FROM messages") == [(2, 2)]
    assert _rows(postgres_url, "SELECT count(*) FROM provenance") == [(2,)]
    assert _rows(postgres_url, "SELECT docs FROM keyword_partitions") == [(2,)]


def test_validity_and_as_of_as_on_sqlite(pg_memory: Memory) -> None:
    said = {"role": "user", "content": "I painted that lake sunrise last year!",
            "timestamp": "2023-05-08T13:56:00Z"}  # fmt: skip
    (item,) = pg_memory.add([said], user_id="alice", infer=False)["results"]
    stored = pg_memory.get(item["id"])
    assert stored is not None and stored["valid_from"] == "2022-01-01T00:00:00.000000+00:00"
    assert "valid_to" not in stored
    before = pg_memory.get_all(filters={"user_id": "alice"}, as_of="2023-05-07")["results"]
    after = pg_memory.get_all(filters={"user_id": "alice"}, as_of="2023-05-08")["results"]
    assert (before, [i["id"] for i in after]) == ([], [item["id"]])
    (added,) = pg_memory.history(item["id"])
    assert added["happened_at"] == "2023-05-08T13:56:00.000000+00:00"


def test_get_all_filters_on_metadata_and_columns(pg_memory: Memory) -> None:
    pg_memory.add("I live in Porto", user_id="alice", infer=False, metadata={"topic": "home"})
    pg_memory.add("I like tea", user_id="alice", infer=False, metadata={"topic": "food", "n": 2})
    found = pg_memory.get_all(filters={"user_id": "alice", "topic": "food"})["results"]
    assert [item["memory"] for item in found] == ["I like tea"]
    found = pg_memory.get_all(filters={"user_id": "alice", "n": {"in": [1, 2.0]}})["results"]
    assert [item["memory"] for item in found] == ["I like tea"]
    found = pg_memory.get_all(filters={"user_id": "alice", "NOT": [{"n": "*"}]})["results"]
    assert [item["memory"] for item in found] == ["I live in Porto"]
    found = pg_memory.get_all(filters={"user_id": "alice", "topic": {"contains": "fo"}})["results"]
    assert [item["memory"] for item in found] == ["I like tea"]


def test_delete_removes_every_copy_of_the_text(pg_memory: Memory, postgres_url: str) -> None:
    added = pg_memory.add("My PIN is 4321", user_id="alice", infer=False)
    memory_id = added["results"][0]["id"]
    pg_memory.delete(memory_id)
    assert pg_memory.get(memory_id) is None
    events = [(h["event"], h["old_memory"], h["new_memory"]) for h in pg_memory.history(memory_id)]
    assert events == [("ADD", None, None), ("DELETE", None, None)]
    for table in ("memories", "messages", "keyword_docs", "keyword_postings", "keyword_terms",
                  "message_keyword_docs", "message_keyword_postings", "provenance"):  # fmt: skip
        assert _rows(postgres_url, f"SELECT count(*) FROM {table}") == [(0,)], table
    with pytest.raises(MemoryNotFoundError):
        pg_memory.delete(memory_id)


def test_delete_all_is_confined_to_the_scope(pg_memory: Memory, postgres_url: str) -> None:
    pg_memory.add(
        [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
        user_id="alice", infer=False,
    )  # fmt: skip
    kept = pg_memory.add("three", user_id="bob", infer=False)["results"][0]["id"]
    assert pg_memory.delete_all(user_id="alice") == {"deleted": 2}  # type: ignore[comparison-overlap]
    assert pg_memory.get_all(filters={"user_id": "alice"})["results"] == []
    assert pg_memory.get(kept) is not None
    assert _rows(postgres_url, "SELECT user_id FROM messages") == [("bob",)]
    assert _rows(postgres_url, "SELECT partition, docs FROM keyword_partitions") == [("bob", 1)]


def test_exact_vector_search_within_the_filter(postgres_url: str, embedder: FakeEmbedder) -> None:
    store = PostgresStore.open(postgres_url, embedder=embedder.identity)
    try:
        with Memory({"store": postgres_url}, embedder=embedder) as mem:
            for text in ("tea with milk", "green tea", "coffee beans", "a walk in Porto"):
                mem.add(text, user_id="alice", infer=False)
            mem.add("green tea", user_id="bob", infer=False)
        where = compile_filters({"user_id": "alice"})
        query = embedder.embed_batch(["green tea"])[0]
        found = store.vector_candidates(query, where, store.search_filter(where), k=2)
        records = store.records_by_rowid(list(found))
        best = max(found, key=lambda rowid: found[rowid])
        assert (records[best].text, records[best].user_id) == ("green tea", "alice")
        assert found[best] == pytest.approx(1.0, abs=1e-6)
        assert len(found) == 2 and {r.user_id for r in records.values()} == {"alice"}
        # the similarities match the vectors' own dot products (unit vectors)
        vectors = embedder.embed_batch([records[r].text for r in found])
        for rowid, vector in zip(found, vectors, strict=True):
            assert found[rowid] == pytest.approx(float(vector @ query), abs=1e-5)
    finally:
        store.close()


def test_a_failed_add_leaves_nothing(
    pg_memory: Memory, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from offline_mem.store.postgres import writes

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected after the memory row was written")

    monkeypatch.setattr(writes.PgWrites, "_link_entities", fail)
    with pytest.raises(RuntimeError, match="injected"):
        pg_memory.add("I live in Porto", user_id="alice", infer=False)
    for table in ("memories", "messages", "history", "keyword_docs", "message_keyword_docs"):
        assert _rows(postgres_url, f"SELECT count(*) FROM {table}") == [(0,)], table


def test_what_is_not_ported_raises_before_writing(pg_memory: Memory, postgres_url: str) -> None:
    pg_memory.add("I live in Porto", user_id="alice", infer=False)
    with pytest.raises(NotImplementedInStoreError, match="re-indexing"):
        pg_memory.store.mark_message_index("pending")
    assert [
        item["memory"] for item in pg_memory.get_all(filters={"user_id": "alice"})["results"]
    ] == ["I live in Porto"]
    assert _rows(postgres_url, "SELECT count(*) FROM messages") == [(1,)]


def test_reopening_keeps_the_rows_and_pins_the_embedder(
    postgres_url: str, embedder: FakeEmbedder
) -> None:
    with Memory({"store": postgres_url}, embedder=embedder) as mem:
        memory_id = mem.add("I like tea", user_id="alice", infer=False)["results"][0]["id"]
    with Memory({"store": postgres_url}, embedder=embedder) as mem:
        assert mem.get(memory_id)["memory"] == "I like tea"  # type: ignore[index]
    other = FakeEmbedder(dimension=384, name="another-embedder")
    from offline_mem import EmbedderMismatchError

    if other.identity.sha256 != embedder.identity.sha256:
        with pytest.raises(EmbedderMismatchError):
            Memory({"store": postgres_url}, embedder=other)
    assert _rows(postgres_url, "SELECT name FROM migrations") == [("001_core",)]


def test_a_refused_login_is_a_typed_error(
    postgres_server: PostgresServer, embedder: FakeEmbedder
) -> None:
    url = postgres_server.url(tcp=True, password="wrong")
    with pytest.raises(StoreLoginError, match=r"refused the login") as caught:
        Memory({"store": url}, embedder=embedder)
    assert "wrong" not in str(caught.value)  # the password is never shown


def test_an_unreachable_server_is_a_typed_error(embedder: FakeEmbedder) -> None:
    url = "postgresql://nobody@/db?host=/nonexistent-offline-mem-dir&port=1"
    with pytest.raises(StoreConnectionError, match="cannot connect") as caught:
        Memory({"store": url}, embedder=embedder)
    assert not isinstance(caught.value, StoreLoginError)


def test_a_lost_connection_is_a_typed_error_and_the_next_call_reconnects(
    pg_memory: Memory, postgres_url: str
) -> None:
    pg_memory.add("I like tea", user_id="alice", infer=False)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    with pytest.raises(StoreConnectionError, match="lost the connection"):
        pg_memory.get_all(filters={"user_id": "alice"})
    assert len(pg_memory.get_all(filters={"user_id": "alice"})["results"]) == 1


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"store": "/tmp/memory.db"}, "postgresql:// URL"),
        ({"store": "postgresql://h/db", "path": "/tmp/m.db"}, "both"),
        ({"path": "postgresql://h/db"}, "name it in 'store'"),
    ],
)
def test_store_config_is_checked(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Memory(config, embedder=FakeEmbedder())


def _relation_bytes(server: PostgresServer, url: str, table: str) -> bytes:
    """The table's file on disk, after a CHECKPOINT has written every page."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute("SELECT pg_relation_filepath(%s)", (table,)).fetchone()
    assert row is not None
    return (server.data / row[0]).read_bytes()


def test_compact_rewrites_the_tables_without_the_deleted_text(
    pg_memory: Memory, postgres_url: str, postgres_server: PostgresServer
) -> None:
    for i in range(200):
        pg_memory.add(f"secret number {i} is Zanzibar{i:04d}", user_id="alice", infer=False)
    pg_memory.add("kept", user_id="bob", infer=False)
    pg_memory.delete_all(user_id="alice")
    # the deleted text is still on disk: the dead row versions keep it until VACUUM FULL
    assert b"Zanzibar0007" in _relation_bytes(postgres_server, postgres_url, "messages")
    result = pg_memory.compact()
    assert result["bytes_after"] < result["bytes_before"]
    assert result["free_bytes_before"] == result["bytes_before"] - result["bytes_after"]
    for table in ("memories", "messages", "keyword_postings"):
        assert b"Zanzibar" not in _relation_bytes(postgres_server, postgres_url, table)
    assert [r["memory"] for r in pg_memory.get_all(filters={"user_id": "bob"})["results"]] == [
        "kept"
    ]


def test_a_deadlock_the_server_breaks_is_a_typed_error(
    pg_memory: Memory, postgres_url: str
) -> None:
    """Two transactions lock two rows in opposite orders: the server rolls one back, which
    reaches the caller as StoreConflictError (no write of the store does this: its writes take
    locks in one order; docs/design/postgresql.md)."""
    from offline_mem import StoreConflictError
    from offline_mem.store.postgres.connection import PgDatabase

    for key in ("a", "b"):
        pg_memory.add(f"row {key}", user_id=key, infer=False)
    db = PgDatabase(postgres_url)
    first_locked, second_locked = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def lock(first: str, second: str, mine: threading.Event, theirs: threading.Event) -> None:
        try:
            with db.atomic():
                db.execute("SELECT 1 FROM memories WHERE user_id = %s FOR UPDATE", (first,))
                mine.set()
                theirs.wait(10)
                db.execute("SELECT 1 FROM memories WHERE user_id = %s FOR UPDATE", (second,))
        except BaseException as exc:  # one of the two is chosen
            errors.append(exc)

    threads = [
        threading.Thread(target=lock, args=("a", "b", first_locked, second_locked)),
        threading.Thread(target=lock, args=("b", "a", second_locked, first_locked)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    db.close()
    assert len(errors) == 1 and isinstance(errors[0], StoreConflictError)
    assert "retry" in str(errors[0])


def test_a_server_without_pgvector_is_a_typed_error(embedder: FakeEmbedder) -> None:
    """A copy of the test server's tree without pgvector's files: opening a database there is
    MissingExtensionError naming what to install, and nothing is created."""
    import shutil
    import tempfile
    from pathlib import Path

    from postgres_server import pg_bin_dir

    from offline_mem import MissingExtensionError

    base = Path(tempfile.mkdtemp(prefix="offline-mem-novector-"))
    server = None
    try:
        base.chmod(0o755)  # the server may run as nobody (tests/postgres_server.py)
        # the wheel's layout: its binaries find their libraries at $ORIGIN/../../../<pkg>.libs
        install = pg_bin_dir().parent
        tree = base / "site" / install.parent.name / install.name
        shutil.copytree(install, tree, symlinks=True)
        libs = install.parent.parent / f"{install.parent.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, base / "site" / libs.name, symlinks=True)
        removed = [p for p in tree.rglob("vector*") if p.is_file()]
        assert any(p.suffix == ".so" for p in removed) and any(p.suffix == ".control"
                                                               for p in removed)  # fmt: skip
        for path in removed:
            path.unlink()
        server = PostgresServer(bin_dir=tree / "bin").start()
        url = server.create_database("novector")
        with pytest.raises(MissingExtensionError, match="install pgvector") as caught:
            Memory({"store": url}, embedder=embedder)
        assert "postgresql-18-pgvector" in str(caught.value)
        assert _rows(url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
