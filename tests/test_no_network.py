"""No byte leaves the machine: the suite's guard works, and real models make no network call.

tests/conftest.py blocks every non-loopback connect and fails the test that attempted one, even
when the code under test swallowed the error. Here we prove that guard: in-process, and by running
pytest on a test that hides its connection attempt. Then a Memory with the real embedder and
spaCy (the extractor is scripted) runs add, inferred add, search, get_all, update and delete in a
fresh process under a Python audit hook that records every socket connect, DNS lookup and send —
with the Hugging Face offline variables unset, so the library must not depend on the caller
having set them — and none may happen. The same holds for `offline-mem mcp` serving a whole
session to the MCP SDK's stdio client: the server process is audited from its first line.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp_helpers import call, serve

ROOT = Path(__file__).resolve().parent.parent


def test_the_guard_refuses_and_records_a_connection(no_network: list[str]) -> None:
    start = len(no_network)
    with pytest.raises(ConnectionRefusedError, match="blocked"):
        socket.create_connection(("192.0.2.1", 443), timeout=1)
    with (
        socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock,
        pytest.raises(ConnectionRefusedError, match="blocked"),
    ):
        sock.connect_ex(("2001:db8::1", 80))
    attempts = no_network[start:]
    assert attempts == ["('192.0.2.1', 443)", "('2001:db8::1', 80)"]
    del no_network[start:]  # this test attempted them on purpose


INNER_TESTS = """
import socket
import pytest

def test_swallows_its_connection_error():
    try:
        socket.create_connection(("198.51.100.7", 80), timeout=1)
    except OSError:
        pass  # code under test that hides a failure must still fail the test

def test_offline_code_passes():
    assert 1 + 1 == 2

@pytest.mark.network_local
def test_loopback_is_allowed_when_marked():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    socket.create_connection(server.getsockname(), timeout=1).close()
    server.close()
"""


def test_a_test_that_hides_its_connection_attempt_still_fails(tmp_path: Path) -> None:
    for helper in ("conftest.py", "postgres_fixtures.py", "postgres_server.py", "fake_memory.py"):
        shutil.copy(ROOT / "tests" / helper, tmp_path / helper)  # conftest's fixture modules
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    network_local: may connect to 127.0.0.1\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:]
    assert "attempted outbound connections: [\"('198.51.100.7', 80)\"]" in done.stdout
    # the test itself passed; the guard fails it at teardown, and only it
    assert "ERROR test_inner.py::test_swallows_its_connection_error" in done.stdout
    assert "3 passed, 1 error" in done.stdout, done.stdout[-3000:]


REAL_MODEL_RUN = textwrap.dedent(
    """
    import json, socket, sys

    events = []
    WATCHED = {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname",
               "socket.gethostbyaddr", "socket.sendto", "socket.sendmsg", "http.client.connect",
               "urllib.Request"}

    def hook(event, args):
        if event in WATCHED:
            if event == "socket.connect" and args[0].family == socket.AF_UNIX:
                return
            events.append(f"{event} {args[1:]!r}"[:200])

    sys.addaudithook(hook)

    from offline_mem import Memory
    from offline_mem.testing import FakeExtractor, answer

    with Memory({"path": sys.argv[1]},
                extractor=FakeExtractor(answer("User lives in Porto with Marta."))) as m:
        added = m.add("I live in Lisbon and my sister Marta visits on Sundays.", user_id="u",
                      infer=False)["results"]
        m.add("I moved to Porto.", user_id="u")
        found = m.search("Where does the user live?", filters={"user_id": "u"})["results"]
        m.get_all(filters={"user_id": "u"})
        m.update(added[0]["id"], "I live in Porto now")
        m.delete(added[0]["id"])
        kinds = (type(m.embedder).__name__, type(m.analyzer).__name__, type(m.entities).__name__)
    print(json.dumps({"events": events, "found": len(found), "models": kinds}))
    """
)


@pytest.mark.real_model
def test_a_real_model_memory_makes_no_network_call(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")}
    done = subprocess.run(
        [sys.executable, "-c", REAL_MODEL_RUN, str(tmp_path / "memory.db")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["models"] == ["SentenceTransformerEmbedder", "SpacyAnalyzer", "SpacyEntities"]
    assert report["found"] >= 1
    assert report["events"] == []


@pytest.mark.real_model
def test_the_mcp_server_makes_no_network_call_in_a_session(tmp_path: Path) -> None:
    """The real embedder and spaCy (the extractor is scripted), every tool, then the audit."""
    audit = tmp_path / "audit.txt"

    async def session() -> None:
        async with serve(tmp_path / "memory.db", "--user", "u", fakes=False,
                         facts=["User lives in Porto"], audit=audit) as client:  # fmt: skip
            raw = await call(client, "add_memory", text="I live in Lisbon with my sister Marta.",
                             infer=False)  # fmt: skip
            await call(client, "add_memory", text="I moved to Porto.")
            found = await call(client, "search_memory", query="Where does the user live?")
            assert {item["kind"] for item in found["results"]} == {"fact", "message"}
            await call(client, "list_memories")
            key = raw["results"][0]["id"]
            await call(client, "get_memory", memory_id=key)
            await call(client, "update_memory", memory_id=key, text="I live in Porto now")
            await call(client, "memory_history", memory_id=key)  # scoped: before the delete
            await call(client, "delete_memory", memory_id=key)

    anyio.run(session)
    lines = audit.read_text().splitlines()
    assert lines[0] == "armed"
    assert lines[1:] == []


def test_the_mcp_server_audit_records_what_it_watches(tmp_path: Path) -> None:
    """The audit of the server process sees an attempt (to a closed loopback port here)."""
    audit = tmp_path / "audit.txt"
    attempt = (
        "import socket, sys; sys.path.insert(0, sys.argv[2]); "
        "from mcp_server_process import audit_to; from pathlib import Path; "
        "audit_to(Path(sys.argv[1]))\n"
        "try: socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
        "except OSError: pass"
    )
    subprocess.run(
        [sys.executable, "-c", attempt, str(audit), str(ROOT / "tests")], check=True, timeout=60
    )
    lines = audit.read_text().splitlines()
    assert lines[0] == "armed"
    assert any("socket.connect" in line and "127.0.0.1" in line for line in lines[1:]), lines
