"""`offline-mem --db postgresql://... serve`: the REST routes over a PostgreSQL database (a
subprocess with fake models, tests/server_helpers.py), and two servers on one database."""

from __future__ import annotations

from pathlib import Path

import pytest
from postgres_server import PASSWORD
from server_helpers import serve

pytestmark = [pytest.mark.postgres, pytest.mark.network_local]

FACT = "User is allergic to peanuts"


def test_two_servers_on_one_database(postgres_url: str, tmp_path: Path) -> None:
    tokens = ("--token-file", str(tmp_path / "tokens"))
    (tmp_path / "second").mkdir()
    with serve(postgres_url, *tokens, facts=[FACT], workdir=tmp_path) as first, serve(
        postgres_url, *tokens, facts=[FACT], workdir=tmp_path / "second"
    ) as second, first.client() as one, second.client() as two:  # fmt: skip
        body = {"messages": [{"role": "user", "content": "Peanuts make me ill"}],
                "user_id": "alice"}  # fmt: skip
        [event] = one.post("/memories", json=body).json()["results"]
        assert (event["event"], event["memory"]) == ("ADD", FACT)
        raw = {"messages": [{"role": "user", "content": "I keep bees"}], "user_id": "bob",
               "infer": False}  # fmt: skip
        [added] = two.post("/memories", json=raw).json()["results"]
        # each server sees the other's writes
        assert two.get(f"/memories/{event['id']}").json()["memory"] == FACT
        found = one.post("/search", json={"query": "bees", "filters": {"user_id": "bob"}})
        assert found.json()["results"][0]["id"] == added["id"]
        assert two.put(f"/memories/{added['id']}", json={"text": "I keep two hives"}).is_success
        history = one.get(f"/memories/{added['id']}/history").json()
        assert [row["event"] for row in history] == ["ADD", "UPDATE"]
        assert one.delete(f"/memories/{added['id']}").is_success
        assert two.get(f"/memories/{added['id']}").status_code == 404
        shown = one.get("/configure").json()["path"]
        assert shown.startswith("postgresql://") and PASSWORD not in shown


def test_serving_a_database_needs_a_token_file(postgres_url: str, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="--token-file"), serve(postgres_url, workdir=tmp_path):
        pass
