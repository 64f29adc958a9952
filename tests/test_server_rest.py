"""`offline-mem serve`'s REST routes against a running server (a subprocess with fake models),
with requests shaped as Mem0's server (mem0ai/mem0 server/main.py) takes them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_helpers import HELPER, ROOT, Running, serve

pytestmark = pytest.mark.network_local

FACT = "User is allergic to peanuts"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    db = tmp_path_factory.mktemp("serve") / "memory.db"
    with serve(db, facts=[FACT]) as running:
        yield running


@pytest.fixture
def api(server: Running) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def test_add_with_inference_as_mem0s_server_takes_it(api: httpx.Client) -> None:
    body = {"messages": [{"role": "user", "content": "Peanuts make me ill, I'm allergic"}],
            "user_id": "alice", "metadata": {"topic": "health"}}  # fmt: skip
    added = api.post("/memories", json=body)
    assert added.status_code == 200
    [event] = added.json()["results"]
    assert (event["event"], event["memory"]) == ("ADD", FACT)
    listed = api.get("/memories", params={"user_id": "alice"}).json()["results"]
    assert [(m["memory"], m["metadata"]) for m in listed] == [(FACT, {"topic": "health"})]


def test_raw_add_get_update_history_delete(api: httpx.Client) -> None:
    body = {"messages": [{"role": "user", "content": "I keep bees"}], "user_id": "bob",
            "infer": False}  # fmt: skip
    [added] = api.post("/memories", json=body).json()["results"]
    memory_id = added["id"]
    got = api.get(f"/memories/{memory_id}").json()
    assert (got["memory"], got["user_id"]) == ("I keep bees", "bob")
    updated = api.put(f"/memories/{memory_id}", json={"text": "I keep two hives of bees"})
    assert updated.status_code == 200 and updated.json()["memory"] == "I keep two hives of bees"
    history = api.get(f"/memories/{memory_id}/history").json()
    assert [row["event"] for row in history] == ["ADD", "UPDATE"]
    assert history[1]["old_memory"] == "I keep bees"
    deleted = api.delete(f"/memories/{memory_id}")
    assert deleted.status_code == 200
    assert deleted.json()["event"] == "DELETE" and "message" in deleted.json()
    missing = api.get(f"/memories/{memory_id}")
    assert missing.status_code == 404 and missing.json()["error"] == "MemoryNotFoundError"
    assert [row["event"] for row in api.get(f"/memories/{memory_id}/history").json()] == [
        "ADD", "UPDATE", "DELETE"]  # fmt: skip


def test_search_takes_filters_or_mem0s_deprecated_top_level_ids(api: httpx.Client) -> None:
    api.post("/memories", json={"messages": [{"role": "user", "content": "My cat is Tom"}],
                                "user_id": "carol", "infer": False})  # fmt: skip
    for body in ({"query": "cat", "filters": {"user_id": "carol"}},
                 {"query": "cat", "user_id": "carol"}):  # fmt: skip
        found = api.post("/search", json={**body, "top_k": 5})
        assert found.status_code == 200
        assert "My cat is Tom" in [item["memory"] for item in found.json()["results"]]
    only = {"query": "cat", "user_id": "carol", "include_messages": False}
    facts_only = api.post("/search", json=only).json()["results"]
    assert {item["kind"] for item in facts_only} == {"fact"}
    other = api.post("/search", json={"query": "cat", "user_id": "dave"}).json()["results"]
    assert other == []
    messages = api.post("/messages/search", json={"query": "cat", "user_id": "carol"}).json()
    assert [m["content"] for m in messages["results"]] == ["My cat is Tom"]


def test_as_of_reads_what_was_true_then(api: httpx.Client) -> None:
    said = {"role": "user", "content": "My dog is Rex", "timestamp": "2023-05-08T10:00:00Z"}
    api.post("/memories", json={"messages": [said], "user_id": "erin", "infer": False})
    before = {"user_id": "erin", "as_of": "2023-05-07"}
    assert api.get("/memories", params=before).json()["results"] == []
    after = api.get("/memories", params={"user_id": "erin", "as_of": "2023-05-08"}).json()
    assert [item["memory"] for item in after["results"]] == ["My dog is Rex"]
    found = api.post("/search", json={"query": "dog", **before}).json()["results"]
    assert found == []
    mem0 = api.post("/search", json={"query": "dog", "user_id": "erin",
                                     "reference_date": "2023-05-09"}).json()["results"]  # fmt: skip
    assert [item["memory"] for item in mem0] == ["My dog is Rex"]
    bad = api.get("/memories", params={"user_id": "erin", "as_of": "soon"})
    assert bad.status_code == 400 and bad.json()["error"] == "ValidationError"


def test_scoped_routes_refuse_another_scopes_ids(api: httpx.Client) -> None:
    [added] = api.post("/memories", json={"messages": "I run marathons", "user_id": "erin",
                                          "infer": False}).json()["results"]  # fmt: skip
    path = f"/memories/{added['id']}"
    for response in (
        api.get(path, params={"user_id": "frank"}),
        api.put(path, params={"user_id": "frank"}, json={"text": "x"}),
        api.delete(path, params={"user_id": "frank"}),
        api.get(path + "/history", params={"user_id": "frank"}),
    ):
        assert response.status_code == 404, response.text
        assert response.json()["error"] == "MemoryNotFoundError"
    assert api.get(path, params={"user_id": "erin"}).status_code == 200


def test_delete_all_of_a_scope(api: httpx.Client) -> None:
    for text in ("one", "two"):
        api.post("/memories", json={"messages": text, "run_id": "r1", "infer": False})
    refused = api.delete("/memories")
    assert refused.status_code == 400
    done = api.delete("/memories", params={"run_id": "r1"})
    assert done.status_code == 200 and done.json()["deleted"] == 2
    assert api.get("/memories", params={"run_id": "r1"}).json()["results"] == []


def test_async_add_answers_202_with_the_job(api: httpx.Client) -> None:
    body = {"messages": [{"role": "user", "content": "Peanuts make me ill, I'm allergic"}],
            "user_id": "gina", "async_mode": True}  # fmt: skip
    queued = api.post("/memories", json=body)
    assert queued.status_code == 202
    assert queued.json()["status"] == "PENDING"
    event_id = queued.json()["event_id"]
    job = api.get(f"/jobs/{event_id}")
    assert job.status_code == 200 and job.json()["status"] in ("PENDING", "RUNNING", "SUCCEEDED")
    assert api.get("/jobs/no-such-job").status_code == 404


def test_library_errors_are_4xx_naming_the_type(api: httpx.Client) -> None:
    cases = [
        (api.post("/memories", json={"messages": "hi"}), 400, "ScopeRequiredError"),
        (api.post("/memories", json={"messages": 5, "user_id": "a"}), 400, "ValidationError"),
        (api.post("/memories", json={"messages": "hi", "user_id": "a b"}), 400, "ValidationError"),
        (
            api.post("/memories", json={"messages": "hi", "user_id": "a", "infer": "yes"}),
            400,
            "ValidationError",
        ),
        (api.post("/search", json={"query": 3, "user_id": "a"}), 400, "ValidationError"),
        (api.post("/search", json={"query": "q"}), 400, "ScopeRequiredError"),
        (
            api.post("/search", json={"query": "q", "user_id": "a", "top_k": "many"}),
            400,
            "ValidationError",
        ),
        (
            api.post("/search", json={"query": "q", "filters": {"user_id": "a", "x": {"$bad": 1}}}),
            400,
            "ValidationError",
        ),
        (api.get("/memories/not-an-id-that-exists"), 404, "MemoryNotFoundError"),
    ]
    for number, (response, status, kind) in enumerate(cases):
        got = (response.status_code, response.json()["error"])
        assert got == (status, kind), (number, response.text)


def test_malformed_requests_are_4xx(api: httpx.Client) -> None:
    cases = [
        (api.post("/memories", content=b"{not json"), 400),
        (api.post("/memories", content=b"\xff\xfe"), 400),
        (api.post("/memories", json=["a list"]), 400),
        (api.post("/memories", json={"messages": "hi", "user_id": "a", "surprise": 1}), 400),
        (api.post("/search", content=b""), 400),
        (api.get("/memories", params={"user_id": "a", "top_k": "ten"}), 400),
        (api.post("/memories", content=b"x" * 1_000_001), 413),
        (api.patch("/memories"), 405),
        (api.get("/no/such/route"), 404),
        (api.post("/configure", json={"llm": {"provider": "openai"}}), 403),
    ]
    for response, status in cases:
        assert response.status_code == status, (response.request.url, response.text)
        assert response.json()["error"]


def test_health_openapi_and_no_cors(api: httpx.Client) -> None:
    health = api.get("/healthz", headers={"Origin": "http://evil.example"})
    assert health.json()["status"] == "ok"
    assert "access-control-allow-origin" not in health.headers
    schema = api.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.")
    for path in ("/memories", "/memories/{memory_id}", "/memories/{memory_id}/history",
                 "/search", "/reset", "/jobs/{event_id}", "/healthz"):  # fmt: skip
        assert path in schema["paths"]


def test_every_request_needs_the_token(server: Running) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        assert anonymous.get("/healthz").status_code == 401
        assert anonymous.get("/memories", params={"user_id": "alice"}).status_code == 401
        assert anonymous.post("/mcp", json={}).status_code == 401
        wrong = anonymous.get("/healthz", headers={"Authorization": "Bearer " + "x" * 43})
        assert wrong.status_code == 401 and wrong.json()["error"] == "Unauthorized"
        mem0_style = anonymous.get("/healthz", headers={"X-API-Key": server.token})
        assert mem0_style.status_code == 200
        assert anonymous.get("/").status_code == 200  # the page itself holds no data


def test_token_file_is_private(server: Running) -> None:
    mode = server.db.with_name(server.db.name + ".token").stat().st_mode & 0o777
    assert mode == 0o600


def test_reset_last(server: Running, api: httpx.Client) -> None:
    assert api.post("/reset").status_code == 200
    assert api.get("/memories", params={"user_id": "alice"}).json()["results"] == []
    assert api.get("/memories").status_code == 400  # a scope is required (Mem0: admins list all)


def test_sigterm_stops_cleanly_with_jobs_kept(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with serve(db, slow=1.0) as running:
        with running.client() as api:
            queued = [api.post("/memories", json={"messages": f"fact {i}", "user_id": "u",
                                                  "async_mode": True}).json()["event_id"]
                      for i in range(5)]  # fmt: skip
        assert running.stop() == 0
    from offline_mem import Memory
    from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor

    fakes = {"embedder": FakeEmbedder(), "extractor": FakeExtractor(), "entities": FakeEntities()}
    with Memory({"path": str(db)}, **fakes) as memory:  # type: ignore[arg-type]
        states = [memory.job(event_id)["status"] for event_id in queued]  # type: ignore[index]
        assert all(state in ("PENDING", "SUCCEEDED") for state in states), states
        assert "PENDING" in states  # still queued in the file, not lost
        assert memory.pending() == states.count("PENDING")
        memory.flush(timeout=60)  # and they resume in the next process that runs jobs
        assert {memory.job(event_id)["status"] for event_id in queued} == {"SUCCEEDED"}  # type: ignore[index]
    assert "Finished server process" in running.log.read_text()


def test_the_browser_page_is_served_without_data(server: Running) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        page = anonymous.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for call in ('"/memories?"', '"/search"', "/history", '"PUT"', '"DELETE"', "include_sources"):
        assert call in page.text, call


def test_a_taken_port_is_one_error_line_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        args = [sys.executable, str(HELPER), "--fakes", "--", "--db", str(tmp_path / "m.db"),
                "serve", "--port", port]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1
    assert "error:" in done.stderr and "Address already in use" in done.stderr
    assert "offline-mem serve: http" not in done.stderr and "startup" not in done.stderr
