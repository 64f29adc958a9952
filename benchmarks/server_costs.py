"""What one `offline-mem serve` costs and saves, with the pinned models (issue targets in
docs/server.md):

1. memory: 4 MCP clients through one `serve` (streamable HTTP) against 4 `offline-mem mcp`
   processes (stdio), each client making one inferred add and one search; RSS and PSS summed
   over the server processes afterwards, all sessions still open;
2. latency: a warm `POST /search` round trip against an in-process `Memory.search` on the same
   file, alternated, p50;
3. load: 16 concurrent clients x 200 searches: p50, p95, errors;
4. async adds: `POST /memories` with `async_mode` while the worker extracts: p50, p95;
5. a screenshot of the memory browser (Debian's headless Chromium).

    python benchmarks/server_costs.py [--out benchmarks/results/server_costs.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

OFFLINE_MEM = Path(sys.executable).parent / "offline-mem"
CLIENTS = 4
SAID = "I moved to a flat by the river last month, and I have started learning the cello."
QUERIES = [
    "where does the user live",
    "which instrument",
    "music lessons",
    "river flat",
    "when did they move",
    "hobbies",
    "favourite food",
    "family",
    "work",
    "cello",
]
ASYNC_ADDS = 60  # of 20, the "p95" was the largest one
URL = re.compile(r"offline-mem serve: (http://\S+)")


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def tree_memory(root_pid: int) -> dict[str, float]:
    """RSS and PSS in MB of a process and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    pids, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo += children.get(pid, [])
    rss = pss = 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) / 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) / 1024
        except OSError:
            continue
    return {"rss_mb": round(rss, 1), "pss_mb": round(pss, 1)}


class Serve:
    """`offline-mem --db DB serve --port 0` with the pinned models, until stop()."""

    def __init__(self, db: Path) -> None:
        self.log = db.with_suffix(".serve.log")
        with self.log.open("ab") as err:
            self.process = subprocess.Popen(
                [str(OFFLINE_MEM), "--db", str(db), "serve", "--port", "0"],
                stdout=err,
                stderr=err,
                env=env(),
                cwd=db.parent,
            )
        deadline = time.monotonic() + 300
        while True:
            text = self.log.read_text(errors="replace")
            found = URL.search(text)
            if found and "Application startup complete" in text:
                break
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start:\n{text}")
            time.sleep(0.1)
        self.url = found.group(1)
        self.token = db.with_name(db.name + ".token").read_text().split()[0]

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, timeout=600, headers={"Authorization": f"Bearer {self.token}"}
        )

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(600)


@asynccontextmanager
async def http_session(server: Serve) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {server.token}"})
    async with (
        http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def stdio_session(db: Path, log: Any) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(OFFLINE_MEM),
        args=["--db", str(db), "mcp"],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(db.parent),
    )
    async with (
        stdio_client(params, errlog=log) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def use(session: Any, client: int) -> float:
    """One inferred add and one search, as a client's first work; seconds taken."""
    started = time.perf_counter()
    user = f"client{client}"
    calls = [
        ("add_memory", {"text": SAID, "user_id": user}),
        ("search_memory", {"query": "cello", "user_id": user}),
    ]
    for tool, arguments in calls:
        result = await session.call_tool(tool, arguments)
        if result.is_error:
            raise RuntimeError(f"{tool}: {result.content}")
    return time.perf_counter() - started


def stdio_server_pids(db: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(db).encode() in cmdline and b"mcp" in cmdline:
                found.append(int(entry.name))
    return found


def memory_part(work: Path) -> dict[str, Any]:
    served = work / "served.db"
    server = Serve(served)

    async def through_serve() -> list[float]:
        async with AsyncExitStack() as stack:
            sessions = [
                await stack.enter_async_context(http_session(server)) for _ in range(CLIENTS)
            ]
            return [await use(s, i) for i, s in enumerate(sessions)]

    serve_seconds = anyio.run(through_serve)
    serve_memory = tree_memory(server.process.pid)
    server.stop()

    separate = work / "separate.db"
    stdio: dict[str, Any] = {}

    async def through_stdio() -> None:
        with (work / "stdio.log").open("a") as log:
            async with AsyncExitStack() as stack:
                sessions = [
                    await stack.enter_async_context(stdio_session(separate, log))
                    for _ in range(CLIENTS)
                ]
                stdio["seconds"] = [await use(s, i) for i, s in enumerate(sessions)]
                pids = stdio_server_pids(separate)
                per = [tree_memory(pid) for pid in pids]
                stdio["processes"] = len(pids)
                stdio["memory"] = {k: round(sum(p[k] for p in per), 1) for k in per[0]}

    anyio.run(through_stdio)
    return {
        "clients": CLIENTS,
        "serve": {**serve_memory, "seconds_per_client": [round(s, 1) for s in serve_seconds]},
        "mcp_stdio": {
            **stdio["memory"],
            "processes": stdio["processes"],
            "seconds_per_client": [round(s, 1) for s in stdio["seconds"]],
        },
        "rss_ratio": round(serve_memory["rss_mb"] / stdio["memory"]["rss_mb"], 3),
        "pss_ratio": round(serve_memory["pss_mb"] / stdio["memory"]["pss_mb"], 3),
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(1000 * statistics.median(values), 2),
        "p95_ms": round(1000 * percentile(values, 0.95), 2),
        "n": len(values),
    }


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rest_search(api: httpx.Client, query: str) -> None:
    api.post("/search", json={"query": query, "user_id": "bench"}).raise_for_status()


def latency_parts(work: Path, searches: int, concurrent: int) -> dict[str, Any]:
    from offline_mem import Memory

    db = work / "latency.db"
    server = Serve(db)
    out: dict[str, Any] = {}
    with server.client() as api:
        for i in range(200):
            body = {
                "messages": [
                    {
                        "role": "user",
                        "content": f"note {i}: {QUERIES[i % 10]} and the {i % 7}th thing about it",
                    }
                ],
                "user_id": "bench",
                "infer": False,
            }
            api.post("/memories", json=body).raise_for_status()
        in_process = Memory({"path": str(db), "job_worker": False})
        rest, local = [], []
        for i in range(searches):  # warm, alternated
            query = QUERIES[i % len(QUERIES)]
            rest.append(timed(lambda q=query: rest_search(api, q)))
            local.append(timed(lambda q=query: in_process.search(q, filters={"user_id": "bench"})))
        in_process.close()
        out["warm_search"] = {"rest": ms(rest[10:]), "in_process": ms(local[10:])}
        out["warm_search"]["p50_ratio"] = round(
            out["warm_search"]["rest"]["p50_ms"] / out["warm_search"]["in_process"]["p50_ms"], 2
        )

    times: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        with server.client() as api:
            for i in range(searches):
                query = QUERIES[(n + i) % len(QUERIES)]
                try:
                    took = timed(lambda q=query: rest_search(api, q))
                except Exception as exc:  # counted, not raised: the figure is the error count
                    with lock:
                        errors.append(type(exc).__name__)
                    continue
                with lock:
                    times.append(took)

    server_cpu, client_cpu = process_cpu_s(server.process.pid), time.process_time()
    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(concurrent)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    server_cpu = process_cpu_s(server.process.pid) - server_cpu
    client_cpu = time.process_time() - client_cpu
    out["concurrent_search"] = {
        "clients": concurrent,
        "searches_each": searches,
        **ms(times),
        "errors": len(errors),
        "searches_per_s": round(len(times) / elapsed, 1),
        # where the two cores went: the server's CPU per search, and the 16 clients' (httpx,
        # in this process); their sum bounds the throughput at cores / sum
        "server_cpu_ms_per_search": round(1000 * server_cpu / max(1, len(times)), 2),
        "client_cpu_ms_per_search": round(1000 * client_cpu / max(1, len(times)), 2),
    }

    accepted: list[float] = []
    with server.client() as api:
        for i in range(ASYNC_ADDS):
            body = {
                "messages": [{"role": "user", "content": f"{SAID} Day {i}."}],
                "user_id": f"async{i % 4}",
                "async_mode": True,
            }
            started = time.perf_counter()
            answer = api.post("/memories", json=body)
            accepted.append(time.perf_counter() - started)
            if answer.status_code != 202:
                raise RuntimeError(f"async add answered {answer.status_code}: {answer.text}")
            time.sleep(0.5)
        pending = api.get("/healthz").json()["pending_jobs"]
    out["async_add_accept"] = {
        **ms(accepted),
        "jobs_pending_after": pending,
        "each_ms": [round(a * 1000, 1) for a in accepted],
    }
    out["sigterm_exit_code"] = server.stop()
    return out


def screenshot(work: Path, path: Path) -> None:
    from browser_helpers import chromium
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    db = work / "browser.db"
    server = Serve(db)
    try:
        with server.client() as api:
            for text in (
                "I have two hives of bees behind the shed",
                "My sister Ana lives in Porto",
                "I'm allergic to peanuts",
            ):
                body = {"messages": [{"role": "user", "content": text}], "user_id": "alice"}
                api.post("/memories", json=body).raise_for_status()
        with chromium() as browser:
            browser.get(f"{server.url}/#token={server.token}")
            browser.find_element(By.ID, "user_id").send_keys("alice")
            browser.find_element(By.ID, "query").send_keys("bees")
            browser.find_element(By.ID, "search").click()
            WebDriverWait(browser, 60).until(
                lambda b: b.find_elements(By.CSS_SELECTOR, "#results .item")
            )
            for button in browser.find_elements(By.CSS_SELECTOR, "#results .item .history")[:1]:
                button.click()
            time.sleep(1)
            path.parent.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(path))
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/server_costs.json")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=16)
    parser.add_argument("--parts", default="memory,latency,screenshot")
    options = parser.parse_args()
    parts = options.parts.split(",")
    # Each part's figures replace that part's in the file, so parts can be run apart.
    result: dict[str, Any] = json.loads(options.out.read_text()) if options.out.exists() else {}
    result["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, python " + (
        platform.python_version()
    )
    with tempfile.TemporaryDirectory(prefix="offline-mem-serve-bench-") as tmp:
        work = Path(tmp)
        for part in parts:
            started = [round(x, 2) for x in os.getloadavg()]
            if part == "memory":
                figures: dict[str, Any] = memory_part(work)
            elif part == "latency":
                figures = latency_parts(work, options.searches, options.concurrent)
            else:
                shot = ROOT / "docs/images/server_browser.png"
                screenshot(work, shot)
                figures = {"file": str(shot.relative_to(ROOT))}
            result[part] = {
                **figures,
                "command": f"python benchmarks/server_costs.py --parts {part}",
                "load_average_at_start": started,
                "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            }
            print(json.dumps(result[part], indent=2), flush=True)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
