"""One BLAS thread, and one numpy forward at a time, while the numpy embedder runs.

OpenBLAS splits even a small matrix product across all its threads, and its threads wait on each
other by spinning: when the cores are busy (the extractor's llama.cpp threads, another process)
that waiting dominates. Measured on this project's 2-core machine with both cores loaded by another
process: one (256 x 32) @ (32 x 256) attention product took 12-16 ms on OpenBLAS's two threads and
0.1 ms on one; the forward of a query 28-54 ms against 10 ms; of 64 short texts 0.57 s against
0.34 s.

The BLAS thread count is a setting of the whole process, and threadpoolctl lets only the thread
holding it change it (others are silently ignored, so a limit set by one thread and restored by
another would stick). Hence one lock: the limit is set and restored by the same thread, and one
forward runs at a time (as the torch path before it did, for its tokenizer's sake).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_controller: Any = None


@contextmanager
def one_blas_thread() -> Iterator[None]:
    with _lock, _blas_controller().limit(limits=1, user_api="blas"):
        yield


def _blas_controller() -> Any:
    """The BLAS libraries loaded now (numpy's among them): inspecting them takes ~15 ms, so once
    per process. A library loaded later (scipy's own OpenBLAS) does not run numpy's products."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller
