"""What the MCP server costs over the library and the CLI, with the real pinned models.

    .venv/bin/python -m benchmarks.mcp_latency [--runs 5] [--warm 40] [--memories 300]

On one memory file (`--memories` raw memories of one user):
- cold: `offline-mem search` as a fresh process, spawn to its first line of results (and to its
  exit, reported too), against `offline-mem mcp` as a fresh process driven by the MCP SDK's
  stdio client, spawn to the first `search_memory` answer (initialise included). The two
  alternate, `--runs` times each; the ratio is of the medians to the first answer.
- warm: a `search_memory` round trip in a running server against `Memory.search` in this process
  on the same file (same queries, top_k 10), `--warm` of each, alternating; medians.
Targets (issue 22): cold ratio <= 3, warm ratio <= 2. Writes benchmarks/results/mcp_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["what does she drink in the morning", "which instrument is he learning",
           "where did they go hiking", "what is the wifi password", "when is the dentist",
           "what pets do they have", "which language is she studying",
           "favourite dish"]  # fmt: skip
THINGS = ["green tea", "the cello", "a hike in the hills", "the wifi password tulip-42",
          "a dentist visit", "two cats", "Portuguese lessons", "a lentil curry", "a red kayak",
          "the night train", "a pottery class", "a chess club"]  # fmt: skip
VERBS = ["likes", "talked about", "planned", "mentioned", "booked", "asked about"]
USER = "ana"


def fill(path: Path, count: int) -> None:
    from offline_mem import Memory

    messages = [
        {"role": "user", "content": f"Note {i}: {USER} {VERBS[i % 6]} {THINGS[i % 12]} ({i})."}
        for i in range(count)
    ]
    with Memory({"path": str(path)}) as memory:
        memory.add(messages, user_id=USER, infer=False)


def env() -> dict[str, str]:
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def cli_search_s(db: Path, query: str) -> tuple[float, float]:
    """Seconds from spawn to the first line of results, and to the process's exit."""
    command = [sys.executable, "-m", "offline_mem.cli", "--db", str(db), "search",
               "--user", USER, "-k", "10", query]  # fmt: skip
    started = time.perf_counter()
    with subprocess.Popen(command, env=env(), stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        process.stdout.readline()
        answered = time.perf_counter() - started
        process.stdout.read()
    assert process.returncode == 0
    return answered, time.perf_counter() - started


def server(db: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "offline_mem.cli", "--db", str(db), "mcp", "--user", USER],
        env={k: v for k, v in env().items() if k in ("PYTHONPATH", "OFFLINE_MEM_MODELS")},
    )


async def mcp_first_search_s(db: Path, query: str, log: Any) -> float:
    started = time.perf_counter()
    async with (
        stdio_client(server(db), errlog=log) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("search_memory", {"query": query, "top_k": 10})
        elapsed = time.perf_counter() - started
        assert not result.is_error, result
    return elapsed


async def warm_ms(db: Path, rounds: int, log: Any) -> tuple[list[float], list[float]]:
    from offline_mem import Memory

    through_mcp: list[float] = []
    direct: list[float] = []
    with Memory({"path": str(db)}) as memory:
        async with (
            stdio_client(server(db), errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for i in range(rounds + 3):  # the first 3 of each warm up
                query = QUERIES[i % len(QUERIES)]
                started = time.perf_counter()
                result = await session.call_tool("search_memory", {"query": query, "top_k": 10})
                mcp_ms = 1000 * (time.perf_counter() - started)
                assert not result.is_error, result
                started = time.perf_counter()
                memory.search(query, filters={"user_id": USER}, top_k=10)
                direct_ms = 1000 * (time.perf_counter() - started)
                if i >= 3:
                    through_mcp.append(mcp_ms)
                    direct.append(direct_ms)
    return through_mcp, direct


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": statistics.median(values), "p95": ordered[int(0.95 * (len(values) - 1))]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warm", type=int, default=40)
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "mcp_latency.json"
    )
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "m.db"
        fill(db, args.memories)
        cli: list[float] = []
        cli_exit: list[float] = []
        first: list[float] = []
        with (Path(tmp) / "server-stderr.log").open("w") as log:
            for run in range(args.runs):
                query = QUERIES[run % len(QUERIES)]
                answered, exited = cli_search_s(db, query)
                cli.append(answered)
                cli_exit.append(exited)
                first.append(anyio.run(mcp_first_search_s, db, query, log))
            through_mcp, direct = anyio.run(warm_ms, db, args.warm, log)
    machine = {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "mcp": version("mcp"),
        "load_avg_1_5_15_before": load_before,
        "load_avg_1_5_15_after": os.getloadavg(),
    }
    cold = {
        "cli_search_to_results_s": cli,
        "cli_search_to_exit_s": cli_exit,
        "mcp_start_to_first_search_s": first,
    }
    warm = {"mcp_search_memory": through_mcp, "memory_search": direct}
    report: dict[str, Any] = {
        "command": f"python -m benchmarks.mcp_latency --runs {args.runs} --warm {args.warm} "
        f"--memories {args.memories}",
        "machine": machine,
        "cold_s": {key: {"median": statistics.median(v), "runs": v} for key, v in cold.items()},
        "warm_ms": {key: summary(v) for key, v in warm.items()},
    }
    report["cold_ratio"] = statistics.median(first) / statistics.median(cli)  # to first answer
    report["warm_ratio"] = statistics.median(through_mcp) / statistics.median(direct)
    report["targets"] = {"cold_ratio_max": 3.0, "warm_ratio_max": 2.0}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
