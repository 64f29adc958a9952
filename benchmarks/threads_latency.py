"""How long a `search` takes from another thread while an `add(infer=True)` is extracting, against
the same search on an idle `Memory` (real pinned models, one memory file); and how long the
event loop ever waits while 50 `AsyncMemory` coroutines (searches and raw adds) run at once.

    .venv/bin/python -m benchmarks.threads_latency [--searches 40] [--threads 2]

The file gets 200 raw memories and a few real turns first; then `--searches` searches run idle,
then the same searches run while a second thread adds two-turn chunks with extraction (the 1.5B
model) in a loop; only searches that began and ended inside a model call count. Writes
benchmarks/results/threads_latency.json and prints p50/p95 of both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["what does she do for work", "which city did he move to", "what pets do they have",
           "when is the concert", "what did the doctor say", "where did they travel last year",
           "what instrument is she learning", "who is the new neighbour"]  # fmt: skip
TURNS = [
    ("user", "I started learning the cello in March, lessons every Tuesday."),
    ("assistant", "That sounds lovely. How is it going?"),
    ("user", "My sister Ines moved to Ghent for a job at the university."),
    ("assistant", "Ghent is beautiful. Will you visit her?"),
    ("user", "We adopted a second dog, a greyhound called Pixel."),
    ("assistant", "Congratulations on the new dog!"),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed_searches(
    memory: Any, count: int, during: threading.Event | None = None, limit_s: float = 300
) -> list[float]:
    """`count` search latencies in ms; with `during`, only searches that began and ended while
    the event was set (the other thread inside the model call) count."""
    out: list[float] = []
    i, deadline = 0, time.monotonic() + limit_s
    while len(out) < count and time.monotonic() < deadline:
        if during is not None and not during.wait(timeout=1):
            continue
        started = time.perf_counter()
        memory.search(QUERIES[i % len(QUERIES)], filters={"user_id": "ana"}, top_k=10)
        elapsed = 1000 * (time.perf_counter() - started)
        if during is None or during.is_set():
            out.append(elapsed)
        i += 1
    return out


class FlaggingExtractor:
    """Wraps the real extractor: `inside` is set while a model call runs."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.inside = threading.Event()
        self.reproducible = inner.reproducible

    @property
    def identity(self) -> Any:
        return self.inner.identity

    def extract(self, prompt: Any) -> Any:
        self.inside.set()
        try:
            return self.inner.extract(prompt)
        finally:
            self.inside.clear()

    def close(self) -> None:
        self.inner.close()


def loop_lag(path: Path, coroutines: int = 50) -> dict[str, float]:
    """The longest and the median delay of a 5 ms ticker while `coroutines` calls run."""
    import asyncio

    from offline_mem import AsyncMemory

    lags: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(1000 * (time.perf_counter() - before - 0.005))

    async def run() -> None:
        async with AsyncMemory({"path": str(path)}) as memory:
            await memory.search("warm up", filters={"user_id": "ana"})
            stop = asyncio.Event()
            tick = asyncio.create_task(ticker(stop))
            calls = [
                memory.search(QUERIES[k % 8], filters={"user_id": "ana"}) if k % 5 else
                memory.add(f"note {k}: I keep bees", user_id="ana", infer=False)
                for k in range(coroutines)
            ]  # fmt: skip
            await asyncio.gather(*calls)
            stop.set()
            await tick

    asyncio.run(run())
    return {"max_ms": max(lags), "p50_ms": statistics.median(lags), "ticks": len(lags)}


def main(argv: list[str] | None = None) -> int:
    from offline_mem import Memory

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--searches", type=int, default=40)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "threads_latency.json"
    )
    args = parser.parse_args(argv)
    from offline_mem.config import DEFAULT_EXTRACTOR, resolve_models_dir
    from offline_mem.pinned.extractor import LlamaExtractor

    flagging = FlaggingExtractor(
        LlamaExtractor(DEFAULT_EXTRACTOR, resolve_models_dir(), threads=args.threads)
    )
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(
            {"path": str(Path(tmp) / "m.db"), "threads": args.threads},
            extractor=flagging,  # type: ignore[arg-type]
        )
        memory.add([{"role": "user", "content": f"note {i}: {QUERIES[i % 8]} {i}"}
                    for i in range(200)], user_id="ana", infer=False)  # fmt: skip
        memory.add([{"role": r, "content": c} for r, c in TURNS[:2]], user_id="ana")  # warm
        timed_searches(memory, 5)
        idle = timed_searches(memory, args.searches)
        adds: list[float] = []
        stop = threading.Event()

        def extracting() -> None:
            k = 0
            while not stop.is_set():
                pair = TURNS[(2 * k) % len(TURNS) : (2 * k) % len(TURNS) + 2]
                started = time.perf_counter()
                memory.add([{"role": r, "content": f"{c} ({k})"} for r, c in pair], user_id="ana")
                adds.append(time.perf_counter() - started)
                k += 1

        worker = threading.Thread(target=extracting)
        worker.start()
        busy = timed_searches(memory, args.searches, during=flagging.inside)
        stop.set()
        worker.join()
        memory.close()
        lag = loop_lag(Path(tmp) / "m.db")
    report: dict[str, Any] = {
        "command": f"python -m benchmarks.threads_latency --searches {args.searches} "
        f"--threads {args.threads}",
        "cpu_count": os.cpu_count(),
        "idle_ms": {"p50": statistics.median(idle), "p95": percentile(idle, 0.95)},
        "while_extracting_ms": {"p50": statistics.median(busy), "p95": percentile(busy, 0.95)},
        "adds_during": len(adds),
        "add_s_p50": statistics.median(adds) if adds else None,
        "async_loop_lag_50_coroutines": lag,
    }
    report["p50_ratio"] = report["while_extracting_ms"]["p50"] / report["idle_ms"]["p50"]
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
