"""llama.cpp loaded and run without a word on the process's stdout or stderr, and without
touching them.

llama-cpp-python offers two ways, neither fit for a library: `verbose=True` prints to stderr
(the model's metadata from Python, llama.cpp's log through llama-cpp-python's callback), and
`verbose=False` points file descriptors 1 and 2 of the whole process at /dev/null while it loads a
model (`suppress_stdout_stderr`, dup2), so whatever any other thread writes meanwhile is lost
(a known upstream bug in abetlen/llama-cpp-python).

So `load_llama` builds a `Llama` that is verbose while llama-cpp-python makes the model, context
and batch (no redirection) and not verbose from then on (no prints), and llama.cpp's log lines
written by a thread inside `llama_logs_to_logging()` go to the logger `offline_mem.llama_cpp` at
DEBUG. llama.cpp has one log callback per process: ours is installed once, only in place of
llama-cpp-python's default one (an application's own callback is left alone), and passes the
lines of every other thread (an application's own llama.cpp models) to that default one, as if
offline_mem were not there.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger("offline_mem.llama_cpp")
_LLAMA_CPP_LOGGER = "llama-cpp-python"  # the logger whose level llama-cpp-python's callback reads

_local = threading.local()
_install_lock = threading.Lock()
_installed = False
# llama.cpp keeps a bare pointer to the callback: the ctypes object must live as long as the process
_callback: Any = None
_previous: Any = None  # llama-cpp-python's callback, for other threads' lines


def load_llama(**kwargs: Any) -> Any:
    """`llama_cpp.Llama(**kwargs)` that prints nothing and redirects nothing (`verbose` is
    managed here and may not be given)."""
    install_log_callback()
    llama_logger = logging.getLogger(_LLAMA_CPP_LOGGER)
    level = llama_logger.level
    try:
        with llama_logs_to_logging():
            return _quiet_llama_class()(verbose=True, **kwargs)
    finally:
        llama_logger.setLevel(level)  # Llama.__init__ sets it from `verbose`


@contextmanager
def llama_logs_to_logging() -> Iterator[None]:
    """Send llama.cpp's log lines written by this thread to `log` at DEBUG meanwhile."""
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1
        if _local.depth == 0:
            _flush_line()


def install_log_callback() -> None:
    """Put offline_mem's callback in place of llama-cpp-python's default one, once."""
    global _installed, _callback, _previous
    with _install_lock:
        if _installed:
            return
        _installed = True
        import llama_cpp
        from llama_cpp import _logger

        current = llama_cpp.llama_log_callback()
        user_data = ctypes.c_void_p()
        llama_cpp.llama_log_get(ctypes.byref(current), ctypes.byref(user_data))
        address = ctypes.cast(current, ctypes.c_void_p).value
        default = _logger.llama_log_callback
        if address not in (None, ctypes.cast(default, ctypes.c_void_p).value):
            return  # the application chose where llama.cpp's log goes
        _previous = default if address is not None else None
        _callback = llama_cpp.llama_log_callback(_on_log)
        llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))


def _on_log(level: int, text: bytes | None, user_data: Any) -> None:
    try:
        if getattr(_local, "depth", 0) > 0:
            if text and log.isEnabledFor(logging.DEBUG):
                _add_text(text.decode("utf-8", errors="replace"))
        elif _previous is not None:
            _previous(level, text, user_data)
    except Exception:  # an exception cannot cross into llama.cpp; a log line is not worth a crash
        pass


def _add_text(text: str) -> None:
    """llama.cpp writes some lines in pieces (a load's progress dots): log whole lines."""
    *lines, rest = (getattr(_local, "pending", "") + text).split("\n")
    _local.pending = rest
    for line in lines:
        log.debug("%s", line)


def _flush_line() -> None:
    pending, _local.pending = getattr(_local, "pending", ""), ""
    if pending:
        log.debug("%s", pending)


@functools.cache
def _quiet_llama_class() -> type:
    from llama_cpp import Llama

    class QuietLlama(Llama):
        @property
        def verbose(self) -> bool:
            # True until the model, context and batch exist (False redirects fds 1 and 2 while
            # they are made), False from then on (True prints to sys.stderr)
            return "_batch" not in self.__dict__

        @verbose.setter
        def verbose(self, value: bool) -> None:
            pass  # decided by the getter

    return QuietLlama
