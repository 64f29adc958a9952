"""Hostile input against a running `offline-mem serve`: every request of tests/server_hostile.py
answered 4xx (never a 500, never a dropped connection), the server still answering after them,
the other scope's memory untouched and `offline-mem verify` clean. 1,000 of them:
benchmarks/server_hostile.py."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest
from server_helpers import HELPER, ROOT, serve
from server_hostile import hostile_requests, kinds

pytestmark = pytest.mark.network_local

COUNT = 200


def test_hostile_requests_are_all_4xx_and_leave_the_file_sound(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with serve(db) as server:
        with server.client() as api:
            body = {"messages": "my secret", "user_id": "victim", "infer": False}
            [victim] = api.post("/memories", json=body).json()["results"]
        statuses: Counter[tuple[str, int]] = Counter()
        with httpx.Client(base_url=server.url, timeout=60) as raw:
            for hostile in hostile_requests(COUNT, server.token, victim["id"]):
                response = raw.request(hostile.method, hostile.path, headers=hostile.headers,
                                       content=hostile.content, params=hostile.params)  # fmt: skip
                statuses[(hostile.kind, response.status_code)] += 1
        bad = {key: n for key, n in statuses.items() if not 400 <= key[1] < 500}
        assert not bad, (bad, server.log.read_text()[-3000:])
        assert {kind for kind, _ in statuses} == set(kinds("t", "i"))
        with server.client() as api:
            assert api.get("/healthz").json()["status"] == "ok"
            assert api.get(f"/memories/{victim['id']}").json()["memory"] == "my secret"
        assert server.stop() == 0
    assert "Traceback" not in server.log.read_text()
    verify = subprocess.run(
        [sys.executable, str(HELPER), "--fakes", "--", "--db", str(db), "verify"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
