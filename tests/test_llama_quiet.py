"""llama.cpp's log lines: offline_mem's own to `logging` at DEBUG, other threads' where they went
before (llama_quiet.py). The loading itself, with real fds, is tests/test_host_process.py."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from offline_mem.pinned import llama_quiet
from offline_mem.pinned.llama_quiet import llama_logs_to_logging


@pytest.fixture
def previous(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The callback that was installed before offline_mem's: it records what it is given."""
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(llama_quiet, "_previous", lambda *args: calls.append(args))
    return calls


def test_lines_inside_the_context_go_to_logging_whole(
    previous: list[tuple[Any, ...]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="offline_mem.llama_cpp")
    with llama_logs_to_logging():
        llama_quiet._on_log(1, b"llama_model_loader: loaded meta data\n", None)
        llama_quiet._on_log(1, b"load_tensors: ", None)
        llama_quiet._on_log(5, b"...", None)  # a line written in pieces
        llama_quiet._on_log(5, b"..\n", None)
        llama_quiet._on_log(2, b"no newline at the end", None)
    assert [r.getMessage() for r in caplog.records] == [
        "llama_model_loader: loaded meta data",
        "load_tensors: .....",
        "no newline at the end",
    ]
    assert {r.levelno for r in caplog.records} == {logging.DEBUG}
    assert previous == []


def test_lines_of_other_threads_go_to_the_previous_callback(
    previous: list[tuple[Any, ...]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="offline_mem.llama_cpp")
    with llama_logs_to_logging():
        other = threading.Thread(target=llama_quiet._on_log, args=(2, b"the app's model\n", 7))
        other.start()
        other.join()
    llama_quiet._on_log(3, b"after the context\n", None)
    assert previous == [(2, b"the app's model\n", 7), (3, b"after the context\n", None)]
    assert caplog.records == []


def test_a_failing_log_line_never_raises_into_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("a handler that fails")

    monkeypatch.setattr(llama_quiet, "_previous", broken)
    llama_quiet._on_log(2, b"a line\n", None)  # no exception


@pytest.mark.real_model
def test_the_callback_takes_the_place_of_llama_cpp_pythons_default() -> None:
    import ctypes

    import llama_cpp
    from llama_cpp import _logger

    llama_quiet.install_log_callback()
    current = llama_cpp.llama_log_callback()
    llama_cpp.llama_log_get(ctypes.byref(current), ctypes.byref(ctypes.c_void_p()))
    address = ctypes.cast(current, ctypes.c_void_p).value
    assert address == ctypes.cast(llama_quiet._callback, ctypes.c_void_p).value
    assert llama_quiet._previous is _logger.llama_log_callback
