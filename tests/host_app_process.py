"""An application that uses offline_mem in its own process, run by tests/test_host_process.py.

One thread writes numbered lines to stdout and to `logging` (stderr) from the moment the extractor
starts loading; another opens a `Memory`, queues an add, flushes it (loading the extractor) and
searches; a third reads the BLAS thread counts meanwhile. Then the process checks what offline_mem
may not have changed, and prints one JSON line starting with RESULT.

argv: memory file, models folder, extractor name, number of lines.
"""

from __future__ import annotations

import gc
import json
import locale
import logging
import os
import signal
import sys
import threading
import time

import numpy as np
from threadpoolctl import threadpool_info

db, models_dir, extractor_name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
app_log = logging.getLogger("app")

dup2_calls: list[tuple[int, int, str]] = []
_real_dup2 = os.dup2


def _audited_dup2(fd: int, fd2: int, inheritable: bool = True) -> int:
    dup2_calls.append((fd, fd2, threading.current_thread().name))
    return _real_dup2(fd, fd2, inheritable)


os.dup2 = _audited_dup2  # type: ignore[assignment]


def fds() -> list[tuple[int, int]]:
    return [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)]


def blas() -> list[tuple[str, int]]:
    """numpy's BLAS thread counts (not those of libraries loaded later: torch's, llama.cpp's)."""
    return sorted(
        (lib["filepath"], lib["num_threads"])
        for lib in threadpool_info()
        if lib["user_api"] == "blas" and lib["filepath"] in NUMPY_BLAS
    )


def process_state() -> dict[str, object]:
    """What a library may not change behind its host's back."""
    return {
        "fds": fds(),
        "stdout": id(sys.stdout),
        "stderr": id(sys.stderr),
        "gc_enabled": gc.isenabled(),
        "gc_frozen": gc.get_freeze_count(),
        "meta_path": [repr(finder) for finder in sys.meta_path],
        "signals": {
            name: repr(signal.getsignal(getattr(signal, name)))
            for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGPIPE", "SIGCHLD")
        },
        "environ": dict(os.environ),
        "root_handlers": [repr(handler) for handler in logging.getLogger().handlers],
        "root_level": logging.getLogger().level,
        "llama_cpp_logger_level": logging.getLogger("llama-cpp-python").level,
        "locale": locale.setlocale(locale.LC_ALL),
        "blas": blas(),
    }


np.dot(np.ones((64, 64)), np.ones((64, 64)))  # numpy's BLAS loaded, as in an application
NUMPY_BLAS = {lib["filepath"] for lib in threadpool_info() if lib["user_api"] == "blas"}
before = process_state()

from offline_mem import Memory  # noqa: E402
from offline_mem.pinned.extractor import LlamaExtractor  # noqa: E402

loading, loaded, work_done = threading.Event(), threading.Event(), threading.Event()
_load = LlamaExtractor._load


def _observed_load(self: LlamaExtractor) -> object:
    loading.set()
    try:
        return _load(self)
    finally:
        loaded.set()


LlamaExtractor._load = _observed_load  # type: ignore[method-assign]

written_while_loading = 0


def write_lines() -> None:
    global written_while_loading
    loading.wait(timeout=600)
    for i in range(count):
        print(f"out {i}", flush=True)
        app_log.info("log %d", i)
        if not loaded.is_set():
            written_while_loading += 1
        time.sleep(0.001)


blas_seen: list[list[tuple[str, int]]] = []


def watch_blas() -> None:
    while not work_done.is_set():
        blas_seen.append(blas())


outcome: dict[str, object] = {}


def use_memory() -> None:
    try:
        config = {"path": db, "models_dir": models_dir, "extractor": extractor_name}
        with Memory(config) as memory:
            queued = memory.add(
                [
                    {"role": "user", "content": "I moved to Ghent last spring."},
                    {"role": "assistant", "content": "How do you like Ghent?"},
                    {"role": "user", "content": "A lot. I cycle to work along the canal."},
                ],
                user_id="ana",
                async_mode=True,
            )
            memory.flush(timeout=600)
            outcome["job"] = (memory.job(queued["event_id"]) or {}).get("status")
            hits = memory.search("where does ana live?", filters={"user_id": "ana"})
            outcome["hits"] = len(hits["results"])
    except BaseException as exc:
        outcome["error"] = repr(exc)
    finally:
        work_done.set()


threads = [threading.Thread(target=f) for f in (write_lines, watch_blas, use_memory)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()

after = process_state()
import thinc.compat  # noqa: E402
import thinc.util  # noqa: E402
import torch  # noqa: E402

try:
    tensor: object = thinc.util.xp2torch(np.arange(3, dtype="f")).tolist()
except ImportError as exc:  # thinc without PyTorch support
    tensor = repr(exc)
print(
    "RESULT "
    + json.dumps(
        {
            "outcome": outcome,
            "before": before,
            "after": after,
            "dup2": dup2_calls,
            "written_while_loading": written_while_loading,
            "blas_seen": blas_seen,
            "torch": torch.__version__,
            "thinc_has_torch": thinc.compat.has_torch,
            "thinc_tensor": tensor,
        }
    ),
    flush=True,
)
