"""How many BLAS threads the numpy embedder runs on, and one numpy forward at a time.

OpenBLAS splits even a small matrix product across all its threads, and its threads wait on each
other by spinning: when the cores are busy (the extractor's llama.cpp threads, another process)
that waiting dominates (a query's forward 28-54 ms on two threads against 10 ms on one, with both
cores loaded), while with the cores idle two threads are faster (docs/design/blas-threads.md).
So a forward gets one thread per core that nothing else
wants at the moment it starts (the kernel's count of runnable tasks, /proc/loadavg), at most
MAX_THREADS, and one thread wherever that count cannot be read. OpenBLAS's own worker threads
keep spinning (runnable) for ~0.1 s after a product, so for SPIN_SECONDS
after a forward on n threads its n - 1 workers are not counted as other tasks.

The BLAS thread count is a setting of the whole process, and threadpoolctl lets only the thread
holding it change it (others are silently ignored, so a limit set by one thread and restored by
another would stick). Hence one lock: the limit is set and restored by the same thread, and one
forward runs at a time (as the torch path before it did, for its tokenizer's sake).

Being process-wide, the limit also holds for every other thread's numpy products while a forward
runs, so it is set only where offline_mem owns the process (process_tuning.py); anywhere else a
forward runs on the BLAS threads the application left (OpenBLAS: one per core unless told).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .process_tuning import process_claimed

MAX_THREADS = 2
"""Measured gains stop at the 2 cores of the machines this was measured on; a query's matrices are
small enough that more threads are unlikely to pay for their start-up."""

SPIN_SECONDS = 0.25

LOADAVG = Path("/proc/loadavg")
TASKS = "/proc/self/task"

_lock = threading.Lock()
_controller: Any = None
_spinning_workers = 0
_last_forward_end = float("-inf")


@contextmanager
def blas_threads_for_forward() -> Iterator[int | None]:
    """Hold the forward lock with BLAS limited to `idle_cores()` threads; yields that count.
    Where offline_mem does not own the process: the lock only, and yields None."""
    global _spinning_workers, _last_forward_end
    with _lock:
        if not process_claimed():
            yield None
            return
        ours = 1 + (_spinning_workers if time.monotonic() - _last_forward_end < SPIN_SECONDS else 0)
        threads = min(idle_cores(ours), MAX_THREADS)
        try:
            with _blas_controller().limit(limits=threads, user_api="blas"):
                yield threads
        finally:
            _spinning_workers, _last_forward_end = threads - 1, time.monotonic()


def idle_cores(ours: int = 1) -> int:
    """Cores of this process's CPU set that no other runnable task wants now (at least 1).

    /proc/loadavg's fourth field is "runnable/total" tasks of the whole machine at this instant;
    `ours` of the runnable ones are the caller's (itself, and BLAS workers still spinning).
    Runnable threads of this process at a higher nice value than the caller's (the extractor's
    threads, niced where offline_mem serves) give way to it, so they leave their cores free too.
    1 where the count cannot be read (not Linux)."""
    try:
        runnable = int(LOADAVG.read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 1
    cores = _usable_cores()
    others = max(0, runnable - ours)
    if others and cores - others < MAX_THREADS:  # busy: are the others our own niced threads?
        others = max(0, others - yielding_threads())
    return max(1, cores - others)


def yielding_threads() -> int:
    """This process's runnable threads with a higher nice value than the calling thread's: the
    scheduler gives a core to the caller over them (at nice 10 a thread weighs 110 against the
    caller's 1024), so a forward on two threads beside them is not held up the way it is beside
    tasks of equal priority (measured: an async add's accept p50 46 -> 36 ms beside niced
    extraction, docs/design/blas-threads.md). 0 where /proc cannot be read."""
    try:
        mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        count = 0
        for task in os.scandir(TASKS):
            stat = Path(task.path, "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()  # from the 3rd field, the state
            if fields[0] == "R" and int(fields[16]) > mine:  # the 19th field is the nice value
                count += 1
        return count
    except (OSError, ValueError, IndexError):
        return 0


def _usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _blas_controller() -> Any:
    """The BLAS libraries loaded now (numpy's among them): inspecting them takes ~15 ms, so once
    per process. A library loaded later (scipy's own OpenBLAS) does not run numpy's products."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller
