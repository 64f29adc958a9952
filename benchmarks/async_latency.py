"""What `add(..., async_mode=True)` costs the caller while the worker is extracting, whether its
turns are searchable as soon as it returns, and how many extractions per minute the background
worker gets through against the same adds made synchronously (real pinned models).

    .venv/bin/python -m benchmarks.async_latency [--chunks 20] [--gap 1.0]

One conversation of hand-written two-turn chunks (below). First the synchronous path: each chunk
is `add`ed (extraction in the call) on a fresh file, and its wall time is the job's time. Then
the async path on another fresh file: each chunk is `add(async_mode=True)`ed, `--gap` seconds
apart (someone chatting), and right after each call returns every turn of the chunk is searched
for (its own text as the query; the turn must be among the results, as a message). Only adds
made while a job was running count as "while the worker is busy". Throughput: chunks per minute,
from the first add to the last job done (async) and over the adds' total time (sync). Both files
share one extractor object, warmed up first, so neither pays the model's load. The extractor
runs at the nice value a `Memory` configured with `"async_mode": True` gives it
(config.BACKGROUND_NICE; `--nice 0` for the value of a synchronous configuration).

Writes benchmarks/results/async_latency.json and prints it; the load average is sampled every
2 s throughout (another job may share this machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# (user turn, assistant turn): one made-up conversation, written for this benchmark.
CHUNKS = [
    (
        "Hi, I'm Teodor. I just moved from Brno to Rotterdam for a job at the port authority.",
        "Welcome to Rotterdam! What will you be doing at the port authority?",
    ),
    (
        "I'm a hydraulic engineer, mostly checking the sluice gates and pumping stations.",
        "That sounds like important work. Is it very different from what you did in Brno?",
    ),
    (
        "In Brno I designed irrigation systems for vineyards, so yes, much bigger water now.",
        "Quite a change of scale. How are you finding the city so far?",
    ),
    (
        "Windy. I bought a second-hand cargo bike on Saturday because everyone cycles here.",
        "A cargo bike is a good idea in a flat city. What will you carry in it?",
    ),
    (
        "Mostly my dog, Bruna. She's a twelve-year-old beagle and can't walk far anymore.",
        "Poor Bruna. Does she like riding in the bike?",
    ),
    (
        "She loves it, she barks at every seagull. "
        "My vet here is Dr. Okafor on Witte de Withstraat.",
        "Good to have a vet nearby for an older dog.",
    ),
    (
        "My sister Lenka is visiting in May. She's a pastry chef in Vienna.",
        "How nice! Do you have plans for her visit?",
    ),
    (
        "We want to take the water taxi to Kinderdijk to see the windmills.",
        "That's a lovely trip, especially in spring.",
    ),
    (
        "I'm also learning Dutch. Classes are on Tuesday and Thursday evenings at the library.",
        "How is the Dutch going?",
    ),
    (
        "Slowly. The pronunciation of 'g' is killing me, but my teacher Marieke is patient.",
        "It takes time. Are you practising outside class?",
    ),
    (
        "I read children's books to Bruna in Dutch. She doesn't judge my accent.",
        "That's a clever way to practise.",
    ),
    (
        "Bad news: I sprained my ankle playing five-a-side football with colleagues on Friday.",
        "Oh no, I'm sorry. Is it serious?",
    ),
    (
        "The doctor said no football for six weeks, and I should keep it raised in the evenings.",
        "Rest well. Can you still get to work?",
    ),
    (
        "I work from home this week; my manager Pieter said it's fine until I can cycle again.",
        "That's kind of him.",
    ),
    (
        "I've started cooking more since I'm stuck at home. Yesterday I made svickova from my "
        "grandmother's recipe.",
        "That sounds delicious. Did it turn out like hers?",
    ),
    (
        "Almost. I couldn't find proper bread dumplings, so I made them myself.",
        "Homemade dumplings, impressive!",
    ),
    (
        "I'm thinking of getting an allotment garden near the Kralingse Plas next spring.",
        "Growing your own vegetables could be fun.",
    ),
    (
        "I'd like to grow tomatoes, peppers and maybe a few vines, like back home in Moravia.",
        "Vines in Rotterdam would be an experiment!",
    ),
    (
        "Lenka changed her plans: she now arrives on the 14th of May and stays for ten days.",
        "Ten days is a good long visit.",
    ),
    (
        "My ankle is better now, I cycled Bruna to the park this morning for the first time.",
        "Great to hear you're back on the bike.",
    ),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"n": len(values), "p50": round(percentile(values, 50), 4),
            "p95": round(percentile(values, 95), 4), "max": round(max(values), 4),
            "mean": round(statistics.fmean(values), 4)}  # fmt: skip


def turns(chunk: tuple[str, str]) -> list[dict[str, str]]:
    return [{"role": "user", "content": chunk[0]}, {"role": "assistant", "content": chunk[1]}]


class LoadSampler:
    """The 1-minute load average every `every` seconds, in a thread."""

    def __init__(self, every: float = 2.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return {"min": min(self.samples), "mean": round(statistics.fmean(self.samples), 2),
                "max": max(self.samples), "samples": len(self.samples)}  # fmt: skip


def sync_phase(memory: Any, chunks: list[tuple[str, str]]) -> dict[str, Any]:
    durations, facts = [], 0
    for chunk in chunks:
        started = time.perf_counter()
        result = memory.add(turns(chunk), user_id="teodor")
        durations.append(time.perf_counter() - started)
        facts += sum(r["event"] == "ADD" for r in result["results"])
    total = sum(durations)
    return {"add_seconds": summary(durations), "total_seconds": round(total, 2),
            "jobs_per_minute": round(len(chunks) / total * 60, 3), "facts": facts}  # fmt: skip


def running_jobs(memory: Any) -> int:
    return int(memory.store.db.query_one("SELECT count(*) FROM jobs WHERE state = 'running'")[0])


def async_phase(memory: Any, chunks: list[tuple[str, str]], gap: float) -> dict[str, Any]:
    busy, idle, searches, found, missed = [], [], [], 0, []
    first = time.perf_counter()
    for number, chunk in enumerate(chunks):
        working = running_jobs(memory) > 0
        started = time.perf_counter()
        result = memory.add(turns(chunk), user_id="teodor", async_mode=True)
        elapsed = time.perf_counter() - started
        assert result["status"] == "PENDING"
        (busy if working else idle).append(elapsed)
        for turn in turns(chunk):  # the turn is evidence at once
            began = time.perf_counter()
            hits = memory.search(turn["content"], filters={"user_id": "teodor"}, top_k=10)
            searches.append(time.perf_counter() - began)
            contents = [h.get("content") for h in hits["results"] if h["kind"] == "message"]
            if turn["content"] in contents:
                found += 1
            else:
                missed.append(number)
        time.sleep(gap)
    memory.flush()
    total = time.perf_counter() - first
    rows = memory.store.db.query("SELECT state, results FROM jobs")
    facts = sum(sum(r["event"] == "ADD" for r in json.loads(res)) for _, res in rows if res)
    return {
        "add_seconds_while_worker_busy": summary(busy),
        "add_seconds_worker_idle": summary(idle),
        "search_seconds_right_after_add": summary(searches),
        "turns_found_by_search_right_after_add": f"{found}/{2 * len(chunks)}",
        "chunks_with_a_turn_missed": missed,
        "jobs": {state: sum(r[0] == state for r in rows) for state in ("done", "failed")},
        "first_add_to_last_job_done_seconds": round(total, 2),
        "jobs_per_minute": round(len(chunks) / total * 60, 3),
        "facts": facts,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=len(CHUNKS))
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between async adds")
    parser.add_argument("--nice", type=int, default=None, help="the extractor thread's nice")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "async_latency.json"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from offline_mem import Memory
    from offline_mem.config import BACKGROUND_NICE, DEFAULT_EXTRACTOR, resolve_models_dir
    from offline_mem.pinned.extractor import LlamaExtractor

    chunks = CHUNKS[: args.chunks]
    load_start = os.getloadavg()
    sampler = LoadSampler()
    nice = BACKGROUND_NICE if args.nice is None else args.nice
    extractor = LlamaExtractor(DEFAULT_EXTRACTOR, resolve_models_dir(), nice=nice)
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        warm = Memory({"path": f"{tmp}/warm.db"}, extractor=extractor)
        warm.add("I like tea with mint.", user_id="warmup")  # loads every model once
        warm._worker.stop()
        warm.store.close()
        sync = Memory({"path": f"{tmp}/sync.db"}, extractor=extractor)
        report["sync"] = sync_phase(sync, chunks)
        sync.store.close()
        queued = Memory({"path": f"{tmp}/async.db"}, extractor=extractor)
        queued.search("warm up the query path", filters={"user_id": "teodor"})
        report["async"] = async_phase(queued, chunks, args.gap)
        queued.close()  # closes the extractor too
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    busy = report["async"]["add_seconds_while_worker_busy"]
    report = {
        "command": "python -m benchmarks.async_latency " + " ".join(argv or sys.argv[1:]),
        "git": commit,
        "chunks": len(chunks),
        "gap_seconds": args.gap,
        "extractor_nice": nice,
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_during": sampler.stop(),
        **report,
        "targets": {
            "async add p95 <= 50 ms while the worker is busy": bool(busy) and busy["p95"] <= 0.050,
            "every turn searchable right after its add": report["async"][
                "turns_found_by_search_right_after_add"
            ]
            == f"{2 * len(chunks)}/{2 * len(chunks)}",
            "async throughput >= synchronous": report["async"]["jobs_per_minute"]
            >= report["sync"]["jobs_per_minute"],
        },
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
