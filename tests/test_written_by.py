"""Which application made each change: `written_by(label)` around library calls, a queued job
carrying its caller's label, the token's label for `offline-mem serve`'s REST routes and MCP
tools; the label survives export and import, and an export made before it imports. Each test
runs on a SQLite file and on a PostgreSQL database (`store_config`, `new_store`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from postgres_fixtures import NewStore
from server_helpers import serve
from store_export import export_lines
from writer_process import WordAnalyzer

from offline_mem import Memory, ValidationError, written_by
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.reader import read_export


def open_memory(store: dict[str, Any], *facts: dict[str, Any]) -> Memory:
    return Memory({**store, "job_worker": False}, embedder=FakeEmbedder(),
                  extractor=FakeExtractor(*facts), entities=FakeEntities(),
                  analyzer=WordAnalyzer())  # fmt: skip


def writers(memory: Memory, memory_id: str) -> list[tuple[str, str | None]]:
    return [(row["event"], row.get("written_by")) for row in memory.history(memory_id)]


def test_history_rows_name_the_block_that_wrote_them(store_config: dict[str, Any]) -> None:
    with open_memory(store_config, {"1": ["User keeps bees"]}) as memory:
        with written_by("ide-agent"):
            [raw] = memory.add("I sail on Sundays", user_id="ana", infer=False)["results"]
        memory.update(raw["id"], "I sail on Saturdays")
        with written_by("desktop"):
            memory.delete(raw["id"])
            queued = memory.add("I keep bees", user_id="ana", async_mode=True)
        memory.flush()  # the job runs outside the block, as the worker would
        assert writers(memory, raw["id"]) == [("ADD", "ide-agent"), ("UPDATE", None),
                                              ("DELETE", "desktop")]  # fmt: skip
        [fact] = memory.job(queued["event_id"])["results"]
        assert writers(memory, fact["id"]) == [("ADD", "desktop")]
        for bad in ("", "  ", 5):
            with pytest.raises(ValidationError), written_by(bad):  # type: ignore[arg-type]
                pass


def test_the_label_survives_export_and_an_older_export_imports(new_store: NewStore) -> None:
    with open_memory(new_store()) as memory:
        with written_by("script"):
            [raw] = memory.add("I sail", user_id="ana", infer=False)["results"]
        lines = list(export_lines(memory))
    history = [json.loads(line) for line in lines if '"type": "history"' in line
               or '"type":"history"' in line]  # fmt: skip
    assert [row["written_by"] for row in history] == ["script"]
    with open_memory(new_store()) as copy:
        import_data(copy, read_export(lines))
        assert writers(copy, raw["id"]) == [("ADD", "script")]
    older = [line.replace(', "written_by": "script"', "").replace(',"written_by":"script"', "")
             for line in lines]  # fmt: skip
    assert older != lines
    with open_memory(new_store()) as copy:
        import_data(copy, read_export(older))
        assert writers(copy, raw["id"]) == [("ADD", None)]


@pytest.mark.network_local
def test_serve_records_each_tokens_label_for_rest_and_mcp(
    store_config: dict[str, Any], tmp_path: Path
) -> None:
    db = Path(store_config["path"]) if "path" in store_config else store_config["store"]
    tokens = tmp_path / "tokens"
    ide, desktop = "i" * 24, "d" * 24
    fd = os.open(tokens, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"{ide} ide-agent\n{desktop} desktop-app\n")
    with serve(db, "--token-file", str(tokens), workdir=tmp_path) as server:
        with server.client(ide) as api:
            body = {"messages": [{"role": "user", "content": "I sail"}], "user_id": "ana",
                    "infer": False}  # fmt: skip
            [raw] = api.post("/memories", json=body).json()["results"]
        with server.client(desktop) as api:
            api.put(f"/memories/{raw['id']}", json={"text": "I sail often"}).raise_for_status()
            rows = api.get(f"/memories/{raw['id']}/history").json()
        assert [(r["event"], r.get("written_by")) for r in rows] == [
            ("ADD", "ide-agent"), ("UPDATE", "desktop-app")]  # fmt: skip
        from test_server_mcp import call, connect

        async def over_mcp() -> str:
            async with connect(server, token=desktop) as session:
                added = await call(session, "add_memory", text="I row", user_id="ana",
                                   infer=False)  # fmt: skip
                return str(added["results"][0]["id"])

        rowed = anyio.run(over_mcp)
        with server.client(ide) as api:
            rows = api.get(f"/memories/{rowed}/history").json()
        assert [(r["event"], r.get("written_by")) for r in rows] == [("ADD", "desktop-app")]
