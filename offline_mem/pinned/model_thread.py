"""One thread for every call into llama.cpp.

llama.cpp computes with OpenMP, and GNU OpenMP keeps a pool of worker threads for each thread
that calls it. Once two threads have called the model (say a synchronous add from the main
thread, then a queued job from the `Memory`'s worker), the process manages more OpenMP threads
than it has cores, and OpenMP then shortens how long its idle threads spin before sleeping, so
each step of a decode pays for waking them (~15% more model time on 2 cores;
docs/design/model-thread.md). So every call runs on this one thread, whichever thread asks;
benchmarks/model_thread_probe.py shows the ways of calling now take the same time.

Each call gets an event that is set when its caller is interrupted while it waits
(KeyboardInterrupt); the decoding loop checks it between tokens, so the call ends soon instead
of running on unseen (and holding up the interpreter's exit, which waits for the thread).

`nice` > 0 lowers the thread's scheduling priority before its first call (Linux: the nice value
is per thread and inherited by the OpenMP workers it starts), so work that is not the model's
(an async add's embedding and keyword pass, a search) gets the cores first while the model
extracts in the background. Raising it back needs privileges, so it is set once, per thread.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class ModelThread:
    def __init__(self, name: str, nice: int = 0) -> None:
        self._name = name
        self._nice = nice
        self._executor: ThreadPoolExecutor | None = None
        self._pid = 0  # the process the executor's thread lives in (a fork has no such thread)
        self._thread_id: int | None = None
        self._guard = threading.Lock()

    def run(self, call: Callable[[threading.Event], T]) -> T:
        """`call(cancelled)` on the model thread; its result or its exception."""
        cancelled = threading.Event()
        executor = self._current()
        if executor is None:  # already on the model thread (a call made from inside a call)
            return call(cancelled)
        future = None
        try:
            future = executor.submit(call, cancelled)
            return future.result()
        except BaseException:
            # interrupted while waiting: stop the call at its next token (when the call itself
            # raised, it has ended and setting the event changes nothing)
            cancelled.set()
            if future is not None:
                future.cancel()  # not started yet: it never will
            raise

    def close(self) -> None:
        """End the thread once its calls are done; a later `run` starts a new one."""
        with self._guard:
            executor, self._executor = self._executor, None
        if executor is not None and self._pid == os.getpid():
            executor.shutdown(wait=threading.get_ident() != self._thread_id)

    def _current(self) -> ThreadPoolExecutor | None:
        with self._guard:
            if self._executor is None or self._pid != os.getpid():
                self._executor = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix=self._name, initializer=self._started
                )
                self._pid = os.getpid()
                self._thread_id = None
            elif threading.get_ident() == self._thread_id:
                return None
            return self._executor

    def _started(self) -> None:
        self._thread_id = threading.get_ident()
        if self._nice > 0:
            lower_thread_priority(self._nice)


def lower_thread_priority(nice: int) -> bool:
    """Add `nice` to the calling thread's nice value; False where the platform has no
    per-thread nice value (only Linux has) or refuses."""
    if not sys.platform.startswith("linux"):
        return False
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError:
        return False
    return True
