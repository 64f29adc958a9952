"""`ModelThread`: every call runs on one thread whichever thread asks, results and exceptions
come back to the caller, a call made from inside a call runs in place, an interrupted caller
cancels its call, and `close` ends the thread (a later call starts a new one)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from offline_mem.pinned.model_thread import ModelThread


def where(_cancelled: threading.Event) -> int:
    return threading.get_ident()


def test_calls_from_any_thread_run_on_one_thread_that_is_none_of_theirs():
    runner = ModelThread("test-model")
    seen: list[int] = []
    callers = [threading.Thread(target=lambda: seen.append(runner.run(where))) for _ in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    seen.append(runner.run(where))
    try:
        assert len(set(seen)) == 1
        assert seen[0] not in {c.ident for c in callers} | {threading.get_ident()}
    finally:
        runner.close()


def test_exceptions_reach_the_caller_and_nested_calls_run_in_place():
    runner = ModelThread("test-model")

    def fails(_cancelled: threading.Event) -> None:
        raise ValueError("model says no")

    def nested(_cancelled: threading.Event) -> tuple[int, int]:
        return threading.get_ident(), runner.run(where)  # would deadlock if queued

    try:
        with pytest.raises(ValueError, match="model says no"):
            runner.run(fails)
        outer, inner = runner.run(nested)
        assert outer == inner
    finally:
        runner.close()


@pytest.fixture
def ctrl_c_raises():
    """Python's Ctrl-C handler in place: a process started as a background job of a script
    (`cmd &`) inherits SIGINT ignored and Python leaves it so, and then no KeyboardInterrupt
    comes (the whole suite launched that way failed here)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_interrupted_caller_cancels_its_call(ctrl_c_raises):
    runner = ModelThread("test-model")
    started = threading.Event()
    stopped_early: list[bool] = []

    def long_call(cancelled: threading.Event) -> None:
        started.set()
        stopped_early.append(cancelled.wait(30))

    def interrupt_when_started() -> None:
        started.wait(30)
        # Ctrl-C: a KeyboardInterrupt in the main thread. Sent to the main thread itself: a
        # signal sent to the process may be taken by another thread, and then nothing wakes
        # the main thread's wait until the call ends (seen once on a loaded machine)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    runner.run(where)  # the thread runs before the interruption (not while it starts)
    interrupter = threading.Thread(target=interrupt_when_started)
    interrupter.start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        runner.run(long_call)
    interrupter.join()
    runner.close()  # waits for the call, which saw the cancellation
    assert stopped_early == [True] and time.monotonic() - began < 20


def test_close_ends_the_thread_and_a_later_call_starts_another():
    runner = ModelThread("test-model")
    first = runner.run(where)
    runner.close()
    assert first not in {t.ident for t in threading.enumerate()}
    second = runner.run(where)
    runner.close()
    assert second != first or second not in {t.ident for t in threading.enumerate()}


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no nice values on this platform")
def test_a_nice_model_thread_and_the_threads_it_starts_yield_to_the_callers():
    """A background extractor's thread runs at a lower priority, and so do the threads it starts
    (llama.cpp's OpenMP workers are started by it); the caller's thread keeps its own."""
    mine = _nice()
    runner = ModelThread("test-model", nice=3)

    def nice_here_and_in_a_child(_cancelled: threading.Event) -> tuple[int, int]:
        seen: list[int] = []
        child = threading.Thread(target=lambda: seen.append(_nice()))
        child.start()
        child.join()
        return _nice(), seen[0]

    try:
        own, child = runner.run(nice_here_and_in_a_child)
        expected = min(19, mine + 3) if sys.platform.startswith("linux") else mine
        assert (own, child) == (expected, expected)
        assert _nice() == mine
        assert ModelThread("test-model").run(nice_here_and_in_a_child) == (mine, mine)
    finally:
        runner.close()
