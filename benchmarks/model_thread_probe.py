"""Why queued extraction jobs run slower than synchronous adds (issue 20): the same ten
hand-written chunks (benchmarks/async_latency.py) added three ways on fresh files with one shared
extractor: queued (the Memory's worker thread runs the model), synchronously from the main
thread, and synchronously from a plain thread. Prints each way's wall time, model calls, prompt,
cached and generated tokens and the seconds spent inside the model.

    PYTHONPATH=. .venv/bin/python -m benchmarks.model_thread_probe [--chunks 10]

Measured (2 cores, AVX-512, quiet; session 16): the same prompts and tokens took 26-28 s of model
time from the main thread and 30-32 s from any other thread, in either order; with
OMP_WAIT_POLICY=passive all three took 33-36 s and the gap closed. Cause: GNU OpenMP keeps a pool
per calling thread and spins less once it manages more threads than there are cores. Since every
model call runs on one thread (offline_mem/pinned/model_thread.py) the three ways take the same
time (session 17: 30.4 s queued, 30.6 s main thread, 29.9 s other thread; before, the same
session: 35.4, 29.4, 36.1).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks.async_latency import CHUNKS


def main() -> None:
    from offline_mem import Memory
    from offline_mem.config import DEFAULT_EXTRACTOR, resolve_models_dir
    from offline_mem.pinned.extractor import LlamaExtractor

    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=10)
    chunks = CHUNKS[: parser.parse_args().chunks]
    extractor = LlamaExtractor(DEFAULT_EXTRACTOR, resolve_models_dir())
    calls: list[tuple[int, int, int, float]] = []
    inner = extractor.extract

    def timed(prompt: Any) -> Any:
        started = time.perf_counter()
        out = inner(prompt)
        calls.append((out.prompt_tokens, out.cached_tokens, out.completion_tokens,
                      time.perf_counter() - started))  # fmt: skip
        return out

    extractor.extract = timed  # type: ignore[method-assign]

    def add_all(memory: Memory, queued: bool) -> None:
        for user, assistant in chunks:
            turns = [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
            memory.add(turns, user_id="probe", async_mode=queued)

    def queued(memory: Memory) -> None:
        add_all(memory, True)
        memory.flush()

    def in_thread(run: Callable[[], None]) -> None:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()

    with tempfile.TemporaryDirectory() as tmp:
        warm = Memory({"path": f"{tmp}/warm.db"}, extractor=extractor)
        warm.add("I like tea with mint.", user_id="warmup")
        warm.close()
        ways: dict[str, Callable[[Memory], None]] = {
            "queued": queued,
            "sync, main thread": lambda m: add_all(m, False),
            "sync, other thread": lambda m: in_thread(lambda: add_all(m, False)),
        }
        for number, (way, run) in enumerate(ways.items()):
            memory = Memory({"path": f"{tmp}/{number}.db"}, extractor=extractor)
            calls.clear()
            started = time.perf_counter()
            run(memory)
            wall = time.perf_counter() - started
            memory.close()
            prompt, cached, written, model = (sum(c[i] for c in calls) for i in range(4))
            print(f"{way}: {wall:.1f} s, {len(calls)} calls, prompt {prompt}, cached {cached}, "
                  f"written {written}, model {model:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
