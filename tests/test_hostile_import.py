"""A hostile export file, a damaged or empty memory file, an odd value: each is refused with one
typed error, and nothing is written. One test per reproduction of the hostile-files report:

1. an edited export: NaN vectors, a source of another scope, a bad date, role or id, NUL and
   oversized texts, a user id the API refuses, a reserved metadata key, a lone surrogate, JSON
   nested 100,000 deep, a 30 MB line;
2. filter values and metadata integers beyond 64 bits, metadata nested 5,000 deep;
3. a 0-byte memory file; a damaged one opened and written;
4. a read-only command given a path with no file;
5. a models folder's manifest.json re-pinning a model; an embedder whose tokenizer changed;
6. MCP arguments coerced or unknown; a deleted memory's history shown to any scope.

The models are the fakes (offline_mem/testing.py); the CLI gets them through tests/cli_helpers.
The tests through the API run on a SQLite file and on a PostgreSQL database (`store_config`);
those that read the memory file itself (its bytes, `verify`, a damaged page) are SQLite's.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_helpers import Cli
from cli_helpers import install as install_cli
from invariants import pg_table_dump
from postgres_fixtures import store_location
from writer_process import WordAnalyzer

from offline_mem import (
    CorruptFileError,
    EmbedderMismatchError,
    ImportRefusedError,
    Memory,
    OfflineMemError,
    ValidationError,
)
from offline_mem.memory_parts import components
from offline_mem.store.integrity import vector_value_problems, verify_file
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor
from offline_mem.transfer.export import export_lines
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.reader import read_export
from offline_mem.values import EmbedderIdentity

# -- helpers -----------------------------------------------------------------------------------


def open_memory(store: Path | dict[str, Any], **config: Any) -> Memory:
    """On a memory file's path, or on a store's config."""
    where = store if isinstance(store, dict) else {"path": str(store)}
    return Memory(
        {**where, **config},
        embedder=FakeEmbedder(),
        extractor=FakeExtractor(),
        entities=FakeEntities(),
        analyzer=WordAnalyzer(),
    )


def install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    """The CLI with the fakes, and a word analyzer in place of spaCy."""
    monkeypatch.setattr(components, "load_analyzer", lambda nlp, models_dir: WordAnalyzer())
    return install_cli(monkeypatch, tmp_path)


def file_digest(path: Path) -> str:
    """The memory file with its WAL: what a write would change."""
    digest = hashlib.sha256()
    for part in (path, Path(str(path) + "-wal")):
        digest.update(part.read_bytes() if part.exists() else b"-")
    return digest.hexdigest()


def written_state(memory: Memory) -> Any:
    """What a write would change: the memory file's bytes, or every row of the database."""
    if memory.config.store is not None:
        return pg_table_dump(memory.store.db)
    return file_digest(Path(memory.path))


@pytest.fixture
def export(tmp_path: Path) -> list[dict[str, Any]]:
    """An export (with vectors) of two users' raw memories, as parsed lines."""
    with open_memory(tmp_path / "source.db") as memory:
        memory.add("I keep bees in Lisbon", user_id="ana", metadata={"k": 1}, infer=False)
        memory.add("I sail on weekends", user_id="bob", infer=False)
        lines = list(export_lines(memory.store.db, vectors=True))
    return [json.loads(line) for line in lines]


def first(rows: list[dict[str, Any]], kind: str, **match: Any) -> dict[str, Any]:
    return next(
        r for r in rows if r.get("type") == kind and all(r.get(k) == v for k, v in match.items())
    )


def text_of(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def refused_by_cli(cli: Cli, tmp_path: Path, text: str, match: str) -> str:
    """Import `text` through the CLI into a file holding one memory: refused with a message
    naming `match`, the file's bytes unchanged, no model run."""
    cli.ok("add", "--user", "zoe", "--no-infer", "I already live here")
    before = file_digest(cli.db)
    calls = len(cli.embedder.calls)
    source = tmp_path / "edited.jsonl"
    source.write_text(text, encoding="utf-8", errors="surrogatepass")
    result = cli.run("import", str(source))
    assert result.exit_code == 1, result.output
    assert "refusing the export file" in result.stderr and match in result.stderr, result.stderr
    assert file_digest(cli.db) == before
    assert len(cli.embedder.calls) == calls
    return result.stderr


def edited(export: list[dict[str, Any]], edit: Callable[[list[dict[str, Any]]], None]) -> str:
    rows = json.loads(json.dumps(export))
    edit(rows)
    return text_of(rows)


# -- 1. import trusts the file -----------------------------------------------------------------


# SQLite only: `verify` checks the imported memory file
def test_an_untouched_export_still_imports(export, tmp_path: Path, monkeypatch) -> None:
    cli = install(monkeypatch, tmp_path)
    source = tmp_path / "export.jsonl"
    source.write_text(text_of(export), encoding="utf-8")
    assert "imported 2 messages" in cli.ok("import", str(source))
    assert cli.ok("verify").count("ok") >= 10


def nan_vector(rows: list[dict[str, Any]]) -> None:
    memory = first(rows, "memory", user_id="ana")
    memory["vector"] = base64.b64encode(np.full(384, np.nan, dtype="<f4").tobytes()).decode()


def long_vector(rows: list[dict[str, Any]]) -> None:
    memory = first(rows, "memory", user_id="ana")
    memory["vector"] = base64.b64encode(np.full(384, 1.0, dtype="<f4").tobytes()).decode()


def short_vector(rows: list[dict[str, Any]]) -> None:
    vector = np.zeros(383, dtype="<f4")
    vector[0] = 1.0
    first(rows, "memory", user_id="ana")["vector"] = base64.b64encode(vector.tobytes()).decode()


def foreign_source(rows: list[dict[str, Any]]) -> None:
    bobs = first(rows, "message", user_id="bob")
    first(rows, "memory", user_id="ana")["sources"] = [bobs["id"]]


def set_field(kind: str, key: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def edit(rows: list[dict[str, Any]]) -> None:
        row = first(rows, kind, user_id="ana")
        row[key] = value
        if kind == "memory" and key == "text":
            row["hash"] = hashlib.md5(value.encode("utf-8", "surrogatepass")).hexdigest()

    return edit


def scope_with_newline(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        if row.get("user_id") == "ana":
            row["user_id"] = "ana\nroot"
            row["scope"] = json.dumps({"user_id": "ana\nroot"}, separators=(",", ":"))


# SQLite only (so are the three below): the file's bytes show nothing was written
@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (nan_vector, "NaN"),
        (long_vector, "length"),
        (short_vector, "float32 values"),
        (foreign_source, "of another scope"),
        (set_field("message", "created_at", "not-a-date"), "created_at"),
        (set_field("message", "role", "hacker"), "role"),
        (set_field("memory", "id", "../../etc/passwd"), "not a UUID"),
        (set_field("message", "content", "a\x00b"), "NUL"),
        (set_field("memory", "text", "x" * 300_000), "longer than"),
        (set_field("memory", "metadata", {"user_id": "bob"}), "reserved"),
        (set_field("memory", "metadata", {"n": 2**80}), "64-bit"),
        (set_field("memory", "expiration_date", "soon"), "expiration_date"),
        (scope_with_newline, "whitespace or control"),
    ],
    ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", "edit"),
)
def test_an_edited_row_is_refused_naming_its_line(export, tmp_path, monkeypatch, edit, reason):
    cli = install(monkeypatch, tmp_path)
    stderr = refused_by_cli(cli, tmp_path, edited(export, edit), reason)
    assert "line " in stderr


def test_a_lone_surrogate_is_refused(export, tmp_path: Path, monkeypatch) -> None:
    cli = install(monkeypatch, tmp_path)
    text = text_of(export).replace("I keep bees", "I keep \\ud800 bees")
    refused_by_cli(cli, tmp_path, text, "lone surrogate")


def test_json_nested_100000_deep_is_refused(export, tmp_path: Path, monkeypatch) -> None:
    cli = install(monkeypatch, tmp_path)
    deep = '{"type": "memory", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    lines = text_of(export).splitlines()
    text = "\n".join([lines[0], deep, *lines[1:]]) + "\n"
    refused_by_cli(cli, tmp_path, text, "line 2")


def test_a_30_mb_line_is_refused_quickly(export, tmp_path: Path, monkeypatch) -> None:
    cli = install(monkeypatch, tmp_path)
    huge = set_field("message", "content", "word " * 6_000_000)
    started = time.perf_counter()
    refused_by_cli(cli, tmp_path, edited(export, huge), "longer than 4000000 characters")
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize(
    "line",
    [
        '{"type": "message", "id": NaN}',
        '{"type": "message", "type": "memory"}',
        '{"type": "message", "n": 1e999}',
        '{"type": "message", "n": ' + "9" * 5000 + "}",
        "\x00",
        "[" * 50 + "]" * 50,
    ],
)
def test_malformed_json_is_refused(export, line: str) -> None:
    lines = [json.dumps(export[0]), line]
    with pytest.raises(ImportRefusedError, match="line 2"):
        read_export(lines)


def test_refusal_is_typed_and_comes_before_any_model(export, store_config) -> None:
    assert issubclass(ImportRefusedError, OfflineMemError)
    assert issubclass(ImportRefusedError, ValueError)
    target = open_memory(store_config)
    try:
        with pytest.raises(ImportRefusedError):
            data = read_export(io.StringIO(edited(export, foreign_source)))
            import_data(target, data)
        assert target.embedder.calls == []  # type: ignore[attr-defined]
    finally:
        target.close()


def test_history_naming_a_memory_of_the_target_is_refused(export, store_config) -> None:
    target = open_memory(store_config)
    try:
        theirs = target.add("mine", user_id="zoe", infer=False)["results"][0]["id"]
        rows = json.loads(json.dumps(export))
        history = first(rows, "history")
        history["memory_id"] = theirs
        rows = [r for r in rows if not (r.get("type") == "memory" and r.get("user_id") == "ana")]
        rows = [r for r in rows if r.get("type") != "entity"]
        for r in rows:
            if r.get("type") == "memory":
                r["entities"] = []
        rows[0]["counts"] = {k: sum(r.get("type") == k for r in rows) for k in rows[0]["counts"]}
        before = written_state(target)
        with pytest.raises(ImportRefusedError, match="history names"):
            import_data(target, read_export(text_of(rows).splitlines()))
        assert written_state(target) == before
        assert target.embedder.calls == [["mine"]]  # type: ignore[attr-defined]
    finally:
        target.close()


# -- verify rejects what import refuses --------------------------------------------------------


def test_verify_rejects_non_finite_and_non_unit_vectors() -> None:
    unit = np.zeros(4, dtype=np.float32)
    unit[0] = 1
    rows = [
        (1, unit.tobytes()),
        (2, np.full(4, np.nan, dtype=np.float32).tobytes()),
        (3, np.full(4, np.inf, dtype=np.float32).tobytes()),
        (4, np.full(4, 1.0, dtype=np.float32).tobytes()),
    ]
    found = vector_value_problems("memory", rows)
    assert found == [
        "memory vector row 2 holds a NaN or an infinity",
        "memory vector row 3 holds a NaN or an infinity",
        "memory vector row 4 has length 2.0000, not 1",
    ]


# SQLite only: writes the file's rows behind the API and runs `verify` on it
def test_verify_rejects_a_nan_vector_and_a_cross_scope_source(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with open_memory(path) as memory:
        memory.add("I keep bees", user_id="ana", infer=False)
        memory.add("I sail", user_id="bob", infer=False)
        db = memory.store.db
        assert verify_file(db, embedder=memory.embedder.identity).ok
        ana = db.query_one("SELECT rowid FROM memories WHERE user_id = 'ana'")[0]
        bob_message = db.query_one("SELECT seq FROM messages WHERE user_id = 'bob'")[0]
        nan = np.full(384, np.nan, dtype=np.float32).tobytes()
        with db.atomic():
            db.execute("DELETE FROM memory_vectors WHERE rowid = ?", (ana,))
            db.execute("INSERT INTO memory_vectors (rowid, embedding) VALUES (?, ?)", (ana, nan))
            db.execute("INSERT INTO provenance (memory_rowid, message_seq) VALUES (?, ?)",
                       (ana, bob_message))  # fmt: skip
        report = verify_file(db, embedder=memory.embedder.identity)
    assert (
        report.problems_of("vector values")
        and "NaN" in report.problems_of("vector values")[0].detail
    )
    assert "of another scope" in report.problems_of("scopes")[0].detail


# SQLite only: writes a NaN into the file's vector tables (pgvector refuses NaN)
def test_search_leaves_out_a_nan_vector_written_behind_its_back(tmp_path: Path) -> None:
    """A NaN vector put in the file by other means than the API (import refuses it) makes the
    row unrankable by vector; search answers with the rest instead of a TypeError."""
    with open_memory(tmp_path / "m.db") as memory:
        for i in range(3):
            memory.add(f"I keep bees {i}", user_id="ana", infer=False)
        db = memory.store.db
        nan = np.full(384, np.nan, dtype=np.float32).tobytes()
        with db.atomic():
            db.execute("UPDATE memory_vectors SET embedding = ? WHERE rowid = "
                       "(SELECT min(rowid) FROM memory_vectors)", (nan,))  # fmt: skip
            db.execute("UPDATE message_vectors SET embedding = ? WHERE rowid = "
                       "(SELECT min(rowid) FROM message_vectors)", (nan,))  # fmt: skip
        found = memory.search("bees", filters={"user_id": "ana"}, include_messages=True)
        assert {h["memory"] for h in found["results"]} >= {"I keep bees 1", "I keep bees 2"}
        messages = memory.search_messages("bees", filters={"user_id": "ana"})["results"]
        assert {h["content"] for h in messages} >= {"I keep bees 1", "I keep bees 2"}


# SQLite only: edits the file's rows and runs `verify` on it
def test_verify_reports_a_changed_byte_of_a_message_and_a_moved_owner(tmp_path: Path) -> None:
    """SQLite checks structure, not values: a flipped byte inside a message's content, or a
    memory whose user column no longer matches its scope, is found by `verify` alone."""
    path = tmp_path / "m.db"
    with open_memory(path) as memory:
        memory.add("I keep bees", user_id="ana", infer=False)
        memory.add("I sail", user_id="bob", infer=False)
        db = memory.store.db
        assert verify_file(db, embedder=memory.embedder.identity).ok
        with db.atomic():
            db.execute("UPDATE messages SET content = 'I keep beef' WHERE user_id = 'ana'")
            db.execute("UPDATE memories SET user_id = 'bot' WHERE user_id = 'bob'")
        report = verify_file(db, embedder=memory.embedder.identity)
    details = [p.detail for p in report.problems_of("texts")]
    assert len(details) == 2, details
    assert "content does not match its hash" in details[0]
    assert "does not name its user, agent and run" in details[1]


# SQLite only: writes bytes that are not UTF-8 into the file and runs `verify` on it
def test_verify_reports_a_row_that_cannot_be_read_and_a_date_that_is_not_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    with open_memory(path) as memory:
        memory.add("I keep bees", user_id="ana", infer=False)
        memory.add("I sail", user_id="bob", infer=False)
        db = memory.store.db
        with db.atomic():  # bytes that are not UTF-8, as a flipped bit can leave them
            db.execute("UPDATE history SET new_memory = CAST(x'49206b65ff' AS TEXT) "
                       "WHERE new_memory = 'I keep bees'")  # fmt: skip
            db.execute("UPDATE messages SET created_at = '2026-12-05T1X:00:00' "
                       "WHERE user_id = 'bob'")  # fmt: skip
        report = verify_file(db, embedder=memory.embedder.identity)
    details = [p.detail for p in report.problems_of("rows")]
    assert len(details) == 2, report.problems
    assert details[0].startswith("table history: a row cannot be read")
    assert "created_at '2026-12-05T1X:00:00' is not a date" in details[1]


# -- 2. untyped errors from the API ------------------------------------------------------------


def test_values_beyond_64_bits_and_deep_metadata_are_validation_errors(store_config) -> None:
    with open_memory(store_config) as memory:
        memory.add("n is small", user_id="ana", metadata={"n": 2**63 - 1}, infer=False)
        for call in (
            lambda: memory.get_all(filters={"user_id": "ana", "n": {"gt": 2**70}}),
            lambda: memory.search("n", filters={"user_id": "ana", "n": {"in": [-(2**64)]}}),
            lambda: memory.add("big", user_id="ana", metadata={"n": 2**80}, infer=False),
            lambda: memory.add("deep", user_id="ana", metadata=_nested(5000), infer=False),
            lambda: memory.add(
                [{"role": "assistant", "content": None, "tool_calls": _nested(5000)}],
                user_id="ana", infer=False,
            ),
        ):  # fmt: skip
            with pytest.raises(ValidationError):
                call()
        found = memory.get_all(filters={"user_id": "ana", "n": {"gte": 2**63 - 1}})["results"]
        assert [item["memory"] for item in found] == ["n is small"]


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_the_cli_reports_a_typed_error_for_a_huge_filter_value(
    store_config, tmp_path, monkeypatch
) -> None:
    cli = install(monkeypatch, tmp_path)
    db: Any = store_location(store_config)
    cli.ok("add", "--user", "ana", "--no-infer", "hello", db=db)
    filters = json.dumps({"n": {"gt": 2**70}})
    result = cli.run("list", "--user", "ana", "--filters", filters, db=db)
    assert result.exit_code == 1 and "unexpected" not in result.stderr
    assert "64-bit" in result.stderr


# -- 3. a 0-byte or damaged memory file --------------------------------------------------------


# SQLite only: a memory file's bytes (so are the two below)
def test_an_existing_empty_file_is_refused_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    path.write_bytes(b"")
    with pytest.raises(CorruptFileError, match="0-byte") as raised:
        open_memory(path)
    assert "offline-mem verify" in str(raised.value) and "backup" in str(raised.value)
    assert path.read_bytes() == b""
    with open_memory(path, init_empty_file=True) as memory:
        memory.add("fresh", user_id="ana", infer=False)
    with open_memory(tmp_path / "new" / "m.db") as memory:  # a new path is created as before
        memory.add("fresh", user_id="ana", infer=False)


def test_a_damaged_page_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with open_memory(path) as memory:
        for i in range(200):
            memory.add(f"memory number {i} about the garden", user_id="ana", infer=False)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page * 3 : page * 3 + 16] = bytes(range(16))  # a b-tree page header scribbled on
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    with pytest.raises(CorruptFileError, match="offline-mem verify") as raised:
        open_memory(path)
    assert "backup" in str(raised.value)
    assert path.read_bytes() == before


def test_a_truncated_file_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with open_memory(path) as memory:
        for i in range(100):
            memory.add(f"memory number {i}", user_id="ana", infer=False)
    data = path.read_bytes()
    page = int.from_bytes(data[16:18], "big")
    path.write_bytes(data[: len(data) - 2 * page])
    with pytest.raises(CorruptFileError, match="pages"):
        open_memory(path)


# -- 4. read-only commands on a missing path ---------------------------------------------------


# SQLite only: a memory file's path (so is the test below)
@pytest.mark.parametrize(
    "args",
    [
        ("list", "--user", "ana"),
        ("search", "x", "--user", "ana"),
        ("get", "some-id"),
        ("history", "some-id"),
        ("stats",),
        ("export",),
        ("verify",),
        ("delete", "some-id"),
        ("delete-all", "--user", "ana", "--yes"),
        ("update", "some-id", "text"),
    ],
)
def test_read_commands_refuse_a_missing_path(tmp_path, monkeypatch, args) -> None:
    cli = install(monkeypatch, tmp_path)
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    result = cli.run(*args, db=missing)
    assert result.exit_code != 0
    assert "no memory file" in result.stderr
    assert not (tmp_path / "no").exists()


def test_write_commands_may_create_the_file(tmp_path, monkeypatch) -> None:
    cli = install(monkeypatch, tmp_path)
    new = tmp_path / "new" / "x.db"
    cli.ok("add", "--user", "ana", "--no-infer", "hello", db=new)
    assert new.is_file()


# -- 5. the pins ------------------------------------------------------------------------------


def test_a_models_folder_manifest_cannot_repin_a_packaged_model(tmp_path, monkeypatch) -> None:
    from offline_mem.pinned.manifest import (
        load_manifest,
        manifest_to_json,
        package_manifest_path,
        read_manifest,
    )

    pinned_path = package_manifest_path()
    assert pinned_path is not None
    pins = read_manifest(pinned_path)
    name = pins.by_role("embedder")[0].name
    forged = json.loads(json.dumps(manifest_to_json(list(pins.models))))
    entry = next(m for m in forged["models"] if m["name"] == name)
    entry["files"][0]["sha256"] = "0" * 64
    (tmp_path / "manifest.json").write_text(json.dumps(forged))
    monkeypatch.delenv("OFFLINE_MEM_OVERRIDE_PINS", raising=False)
    assert load_manifest(tmp_path).get(name) == pins.get(name)
    monkeypatch.setenv("OFFLINE_MEM_OVERRIDE_PINS", "1")
    assert load_manifest(tmp_path).get(name).files[0].sha256 == "0" * 64


# SQLite only: opens the file's Store directly (postgres/store.py has the same check)
def test_an_embedder_with_other_files_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    first_files = EmbedderIdentity("e", "a" * 64, 8, files_sha256="1" * 64)
    from offline_mem.store.store import Store

    Store.open(path, embedder=first_files).close()
    Store.open(path, embedder=first_files).close()
    changed_tokenizer = EmbedderIdentity("e", "a" * 64, 8, files_sha256="2" * 64)
    with pytest.raises(EmbedderMismatchError, match="tokenizer"):
        Store.open(path, embedder=changed_tokenizer)


# -- 6. MCP tools ------------------------------------------------------------------------------


def test_history_takes_the_scope_like_get(store_config) -> None:
    from offline_mem.mcp.tools import DefaultScope, MemoryTools

    with open_memory(store_config) as memory:
        bobs = memory.add("bob's secret", user_id="bob", infer=False)["results"][0]["id"]
        assert memory.history(bobs, user_id="ana") == []
        assert [r["event"] for r in memory.history(bobs, user_id="bob")] == ["ADD"]
        memory.delete(bobs)
        assert [r["event"] for r in memory.history(bobs)] == ["ADD", "DELETE"]
        assert memory.history(bobs, user_id="bob") == []  # its scope is gone with its row
        tools = MemoryTools(memory, DefaultScope(user_id="ana"))
        with pytest.raises(OfflineMemError, match="no history"):
            tools.memory_history(bobs)


def test_mcp_arguments_are_validated_strictly(store_config) -> None:
    pytest.importorskip("mcp")
    from pydantic import ValidationError as ArgumentsError

    from offline_mem.mcp.server import MemoryServer
    from offline_mem.mcp.tools import DefaultScope, MemoryTools

    with open_memory(store_config) as memory:
        server = MemoryServer(MemoryTools(memory, DefaultScope(user_id="ana")))
        tools = {tool.name: tool for tool in server.registered}
        assert len(tools) == 7
        add = tools["add_memory"].fn_metadata
        assert add.validate_arguments({"text": "hi", "infer": False})["infer"] is False
        for bad in (
            {"text": "hi", "infer": "false"},
            {"text": "hi", "user": "bob"},
            {"text": "hi", "metadata": '{"k": 1}'},
        ):
            with pytest.raises(ArgumentsError):
                add.validate_arguments(bad)
        with pytest.raises(ArgumentsError):
            tools["search_memory"].fn_metadata.validate_arguments({"query": "x", "top_k": "5"})
        assert all(t.parameters.get("additionalProperties") is False for t in tools.values())
