"""Cold start: how long a fresh process takes to search, add, list, against the time a fresh
process takes to `import sentence_transformers` on the same machine in the same run.

    .venv/bin/python -m benchmarks.cold_start [--runs 3] [--source DIR] [--name NAME]

Every figure is a new interpreter (`sys.executable`), run `--runs` times in turn with the others
(so a change in the machine's load touches all of them alike); the median is reported with its
peak resident memory (the child's own max RSS, from wait4), and each median as a ratio to the
median `import sentence_transformers`. The models folder is the usual one ($OFFLINE_MEM_MODELS).
"Cold" means a new process; the files are in the page cache (they were just read), as they are
for a command run twice in a row.

- bare_python: `python -c pass`
- import_sentence_transformers: `python -c "import sentence_transformers"`
- cli_search / cli_raw_add / cli_list: `offline-mem --db F search|add --no-infer|list`, F holding
  one memory (a fresh copy of it for each add)
- python_memory_add_search: `Memory(...)`, one raw `add`, one `search`, in one new interpreter
- search_phases: inside one new interpreter, seconds spent importing offline_mem.cli, opening
  the Memory, loading spaCy (first analysis), loading the embedder (first embed), and in the
  search itself

`--source DIR` measures the offline_mem package of another checkout (e.g. the commit before a
change) with the same interpreter and models. Writes benchmarks/results/<name>.json (default
cold_start.json) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUERY = "what bike do I ride"
MEMORY = "I ride a Brompton folding bike"
ADDED = "My sister Marta lives in Porto"

PYTHON_MEMORY = """
import sys
from offline_mem import Memory
with Memory({"path": sys.argv[1]}) as memory:
    memory.add(sys.argv[2], user_id="ana", infer=False)
    found = memory.search(sys.argv[3], filters={"user_id": "ana"})["results"]
assert found, "the search found nothing"
"""

SEARCH_PHASES = """
import json, sys, time
started = time.perf_counter()
import offline_mem.cli
from offline_mem import Memory
imported = time.perf_counter()
memory = Memory({"path": sys.argv[1]})
opened = time.perf_counter()
memory.analyzer.analyze_query("warm up")
spacy_ready = time.perf_counter()
memory.embedder.embed("warm up")
embedder_ready = time.perf_counter()
memory.search(sys.argv[2], filters={"user_id": "ana"})
searched = time.perf_counter()
memory.close()
print(json.dumps({
    "import_offline_mem": imported - started,
    "open_memory": opened - imported,
    "load_spacy": spacy_ready - opened,
    "load_embedder": embedder_ready - spacy_ready,
    "search": searched - embedder_ready,
    "total": searched - started,
}))
"""


def run_child(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of one new process; fails on a non-zero exit.
    `cwd` matters: `python -m`/`-c` put it first on sys.path, before PYTHONPATH."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)  # the child's own rusage
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise RuntimeError(f"{args} failed ({child.returncode}): {err.read()[-2000:]}")
        return wall, usage.ru_maxrss / 1024, out.read()  # ru_maxrss: KB on Linux


def measure(runs: int, source: Path, workdir: Path) -> dict[str, Any]:
    env = os.environ.copy()
    env["PYTHONPATH"] = str(source)
    python = sys.executable
    _, _, imported = run_child([python, "-c", "import offline_mem; print(offline_mem.__file__)"],
                               env, workdir)  # fmt: skip
    if not Path(imported.strip()).is_relative_to(source):
        raise RuntimeError(f"the children import offline_mem from {imported.strip()}, not {source}")
    template = workdir / "one.db"
    run_child([python, "-m", "offline_mem.cli", "--db", str(template), "add", "--no-infer",
               MEMORY, "--user", "ana"], env, workdir)  # fmt: skip

    def fresh_copy(name: str) -> str:
        path = workdir / name
        for suffix in ("", "-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        shutil.copyfile(template, path)
        return str(path)

    cli = [python, "-m", "offline_mem.cli", "--db"]
    cases: dict[str, Any] = {
        "bare_python": lambda: [python, "-c", "pass"],
        "import_sentence_transformers": lambda: [python, "-c", "import sentence_transformers"],
        "cli_search": lambda: [*cli, str(template), "search", QUERY, "--user", "ana"],
        "cli_raw_add": lambda: [*cli, fresh_copy("add.db"), "add", "--no-infer", ADDED,
                                "--user", "ana"],
        "cli_list": lambda: [*cli, str(template), "list", "--user", "ana"],
        "python_memory_add_search": lambda: [python, "-c", PYTHON_MEMORY,
                                             fresh_copy("python.db"), ADDED, QUERY],
    }  # fmt: skip
    walls: dict[str, list[float]] = {name: [] for name in cases}
    rss: dict[str, list[float]] = {name: [] for name in cases}
    phases: list[dict[str, float]] = []
    for _ in range(runs):
        for name, command in cases.items():
            wall, peak, _ = run_child(command(), env, workdir)
            walls[name].append(wall)
            rss[name].append(peak)
        _, _, out = run_child([python, "-c", SEARCH_PHASES, str(template), QUERY], env, workdir)
        phases.append(json.loads(out.strip().splitlines()[-1]))
    base = statistics.median(walls["import_sentence_transformers"])
    figures = {
        name: {
            "median_s": round(statistics.median(values), 3),
            "runs_s": [round(v, 3) for v in values],
            "ratio_to_import_sentence_transformers": round(statistics.median(values) / base, 3),
            "max_rss_mb": round(statistics.median(rss[name]), 1),
        }
        for name, values in walls.items()
    }
    phase_medians = {key: round(statistics.median(p[key] for p in phases), 3) for key in phases[0]}
    return {"figures": figures, "search_phases_s": phase_medians}


def git_commit(source: Path) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--source", type=Path, default=ROOT, help="checkout to measure")
    parser.add_argument("--name", default="cold_start")
    parser.add_argument("--note", default="", help="what --source is, for the record")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cold_start_") as tmp:
        result = measure(args.runs, args.source.resolve(), Path(tmp))
    result = {
        "command": "python -m benchmarks.cold_start " + " ".join(sys.argv[1:]),
        "source": str(args.source.resolve()),
        "source_commit": git_commit(args.source),
        "note": args.note,
        "runs": args.runs,
        "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        **result,
    }
    out = ROOT / "benchmarks" / "results" / f"{args.name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'figure':<30} {'median s':>9} {'x import ST':>12} {'max RSS MB':>11}")
    for name, figure in result["figures"].items():
        print(
            f"{name:<30} {figure['median_s']:>9.3f} "
            f"{figure['ratio_to_import_sentence_transformers']:>12.3f} "
            f"{figure['max_rss_mb']:>11.1f}"
        )
    print("search phases (s):", result["search_phases_s"])
    print(f"load average {result['load_average_before']} -> {result['load_average_after']}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
