"""A memory file moves to PostgreSQL and back with `export`/`import`: the exports of both are
the same bytes; and `offline-mem --db postgresql://...` runs the memory commands on the
database (fake models through tests/cli_helpers.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Cli, install
from fake_memory import fake_memory
from postgres_server import PostgresServer
from test_cli_admin import populate

from offline_mem.store.postgres import keywords as pg_keywords
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.postgres import export_lines
from offline_mem.transfer.reader import read_export

pytestmark = pytest.mark.postgres


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    return install(monkeypatch, tmp_path)


def export(cli: Cli, db: Path | str, *extra: str) -> str:
    return cli.ok("export", *extra, db=db)  # type: ignore[arg-type]


def ranked(found: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(r.get("kind"), r["id"], round(r["score"], 5)) for r in found["results"]]


def test_a_file_moves_to_postgres_and_back_unchanged(
    cli: Cli, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    ids = populate(cli)
    cli.ok("add", "--user", "u3", "--async", "I like figs")  # a queued job travels too
    for n, extra in enumerate(((), ("--vectors",))):
        first = export(cli, cli.db, *extra)
        header = json.loads(first.splitlines()[0])
        assert header["counts"]["job"] == 1
        dump = tmp_path / f"dump{n}.jsonl"
        dump.write_text(first)
        url = postgres_server.create_database(f"transfer_{n}")
        result = cli.json("import", str(dump), db=url)  # type: ignore[arg-type]
        assert result["imported"] == header["counts"]
        assert result["reembedded"] is (not extra)
        assert export(cli, url, *extra) == first
        # and back: the database's export imported into a new file exports the same again
        again = tmp_path / f"again{n}.jsonl"
        again.write_text(export(cli, url, *extra))
        back = tmp_path / f"back{n}.db"
        cli.json("import", str(again), db=back)
        assert export(cli, back, *extra) == first
    # the database answers as the file does
    for query in ("where do I live", "Marta Silva", "Porto note"):
        on_file = cli.json("search", "--user", "u1", query)
        on_db = cli.json("search", "--user", "u1", query, db=url)  # type: ignore[arg-type]
        assert ranked(on_db) == ranked(on_file)
    history = ("history", ids["lisbon"])
    assert cli.json(*history, db=url) == cli.json(*history)  # type: ignore[arg-type]


def test_the_cli_on_a_database(cli: Cli, postgres_url: str, tmp_path: Path) -> None:
    db: Any = postgres_url
    cli.script.append({})
    added = cli.json("add", "--user", "u1", "--no-infer", "I keep the spare key in the blue pot",
                     db=db)["results"]  # fmt: skip
    found = cli.json("search", "--user", "u1", "spare key", db=db)["results"]
    assert found[0]["id"] == added[0]["id"]
    assert cli.json("get", added[0]["id"], db=db)["memory"] == added[0]["memory"]
    cli.ok("delete", added[0]["id"], db=db)
    assert cli.json("search", "--user", "u1", "spare key", db=db)["results"] == []
    cli.json("add", "--user", "u2", "--no-infer", "--expires", "2001-01-01", "an old note",
             db=db)  # fmt: skip
    stats = cli.json("stats", db=db)
    assert stats["counts"] == {"memories": 1, "messages": 1, "history": 3, "entities": 0}
    assert stats["scopes"] == [{"user_id": "u2", "agent_id": None, "run_id": None,
                                "state": "active", "memories": 1, "expired": 1}]  # fmt: skip
    assert stats["path"].startswith("postgresql://") and stats["file_size"] > 0
    assert "database: postgresql://" in cli.ok("stats", db=db)
    refused = cli.run("compact", db=db)
    assert refused.exit_code == 1 and "SQLite memory file" in refused.stderr
    assert "offline-mem-test" not in refused.stderr  # never the password
    assert cli.run("backup", str(tmp_path / "b.db"), db=db).exit_code == 1
    bad = cli.run("export", db="postgresql://nobody@/nodb?host=/nonexistent&port=1")
    assert bad.exit_code == 1 and "cannot connect" in bad.stderr


KEYWORD_TABLES = [f"{prefix}keyword_{table}" for prefix in ("", "message_")
                  for table in ("docs", "postings", "terms", "partitions")]  # fmt: skip


def keyword_rows(memory: Any) -> dict[str, list[Any]]:
    db = memory.store.db
    return {table: db.query(f"SELECT * FROM {table} ORDER BY 1, 2, 3") for table in KEYWORD_TABLES}


def test_an_import_writes_the_keyword_rows_that_the_adds_write(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an import indexes all its rows at once (keywords.index_many), in several statements here
    monkeypatch.setattr(pg_keywords, "_ROWS_PER_STATEMENT", 3)
    with fake_memory({"store": postgres_server.create_database("keywords_by_adds")}) as source:
        source.add([{"role": "user", "content": "tea with milk, tea at noon"},
                    {"role": "user", "content": "Green tea and figs"}],
                   user_id="u1", infer=False)  # fmt: skip
        source.add("figs again", user_id="u2", infer=False)
        source.add("an agent's note about tea", agent_id="a1", infer=False)  # no user
        dump = "".join(line + "\n" for line in export_lines(source.store.db, vectors=True))
        expected = keyword_rows(source)
    assert len(expected["keyword_postings"]) > 3 and len(expected["keyword_partitions"]) == 3
    with fake_memory({"store": postgres_server.create_database("keywords_by_import")}) as target:
        import_data(target, read_export(io.StringIO(dump)))
        assert keyword_rows(target) == expected
