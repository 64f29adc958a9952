"""What being a good guest costs: cold and warm search time of two checkouts, alternated.

    .venv/bin/python -m benchmarks.guest_costs --before DIR [--after DIR] [--runs 5] [--name NAME]

Each run measures, for each checkout in turn (so a change in the machine's load touches both
alike), in new interpreters with PYTHONPATH set to the checkout:

- cli_search: a cold `offline-mem --db F search` (the command line owns its process);
- library_add_search: a cold `Memory(...)` on a new file, one raw `add`, one `search` (a library
  process);
- library_search_ms: inside one library process, `Memory.search` on a file of 300 raw memories,
  after two warm-up searches: p50 and p95 of 40 queries.

The after checkout is measured a second time as `after_own_process`, its library cases with the
config key `"own_process": true` (the command line's process-wide settings).

Medians over the runs, with every run kept. The models folder is the usual one
($OFFLINE_MEM_MODELS). Writes benchmarks/results/<name>.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUERY = "what bike do I ride"

FILL = """
import sys
from offline_mem import Memory
topics = ["bike", "sister", "job", "city", "book", "food", "music", "trip", "pet", "sport"]
with Memory({"path": sys.argv[1]}) as memory:
    for i in range(300):
        user = "ana" if i % 2 else "ben"
        text = f"Note {i}: {user} talks about the {topics[i % 10]} number {i // 10}"
        memory.add(text, user_id=user, infer=False)
"""

COLD_LIBRARY = """
import json, sys
from offline_mem import Memory
with Memory({"path": sys.argv[1], **json.loads(sys.argv[2])}) as memory:
    memory.add("My sister Marta lives in Porto", user_id="ana", infer=False)
    assert memory.search("where does Marta live", filters={"user_id": "ana"})["results"]
"""

WARM_SEARCH = """
import json, sys, time
from offline_mem import Memory
queries = [f"what about the {t} {i}" for i in range(4) for t in
           ["bike", "sister", "job", "city", "book", "food", "music", "trip", "pet", "sport"]]
with Memory({"path": sys.argv[1], **json.loads(sys.argv[2])}) as memory:
    for q in ("warm up", "warm up again"):
        memory.search(q, filters={"user_id": "ana"})
    times = []
    for q in queries:
        started = time.perf_counter()
        memory.search(q, filters={"user_id": "ana"})
        times.append((time.perf_counter() - started) * 1000)
times.sort()
print(json.dumps({"p50": times[len(times) // 2], "p95": times[int(len(times) * 0.95)]}))
"""


def child(args: list[str], source: Path, cwd: Path) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(source)}
    started = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{args[:3]} failed: {done.stderr[-2000:]}")
    return wall, done.stdout


def measure(sources: dict[str, Path], runs: int, work: Path) -> dict[str, Any]:
    python = sys.executable
    db = work / "filled.db"
    child([python, "-c", FILL, str(db)], sources["before"], work)
    variants = [(name, source, {}) for name, source in sources.items()]
    variants.append(("after_own_process", sources["after"], {"own_process": True}))
    found: dict[str, dict[str, list[float]]] = {
        name: {"cli_search": [], "library_add_search": [], "p50_ms": [], "p95_ms": []}
        for name, _, _ in variants
    }
    for _ in range(runs):
        for name, source, config in variants:
            _, where = child([python, "-c", "import offline_mem; print(offline_mem.__file__)"],
                             source, work)  # fmt: skip
            assert Path(where.strip()).is_relative_to(source), where
            if not config:  # the command line is the same process either way
                wall, _ = child([python, "-m", "offline_mem.cli", "--db", str(db), "search",
                                 QUERY, "--user", "ana"], source, work)  # fmt: skip
                found[name]["cli_search"].append(wall)
            fresh = work / f"fresh{time.monotonic_ns()}.db"
            wall, _ = child([python, "-c", COLD_LIBRARY, str(fresh), json.dumps(config)],
                            source, work)  # fmt: skip
            found[name]["library_add_search"].append(wall)
            _, out = child([python, "-c", WARM_SEARCH, str(db), json.dumps(config)], source, work)
            warm = json.loads(out.strip().splitlines()[-1])
            found[name]["p50_ms"].append(warm["p50"])
            found[name]["p95_ms"].append(warm["p95"])
    return {
        name: {
            key: {"median": round(statistics.median(v), 3), "runs": [round(x, 3) for x in v]}
            for key, v in values.items()
            if v
        }
        for name, values in found.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout before the change")
    parser.add_argument("--after", type=Path, default=ROOT, help="checkout after (this one)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--name", default="guest_costs")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    sources = {"before": args.before.resolve(), "after": args.after.resolve()}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="guest_costs_") as tmp:
        figures = measure(sources, args.runs, Path(tmp))
    result = {
        "command": "python -m benchmarks.guest_costs " + " ".join(sys.argv[1:]),
        "sources": {name: str(path) for name, path in sources.items()},
        "note": args.note,
        "runs": args.runs,
        "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "figures": figures,
    }
    out = ROOT / "benchmarks" / "results" / f"{args.name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    keys = ("cli_search", "library_add_search", "p50_ms", "p95_ms")
    print(f"{'':<18}" + "".join(f"{k:>20}" for k in keys))
    for name, values in figures.items():
        cells = [f"{values[k]['median']:>20.3f}" if k in values else f"{'-':>20}" for k in keys]
        print(f"{name:<18}" + "".join(cells))
    print(f"load average {result['load_average_before']} -> {result['load_average_after']}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
