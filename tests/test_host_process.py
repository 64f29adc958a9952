"""offline_mem as a guest in an application's process (tests/host_app_process.py, real models).

While offline_mem loads the extractor and searches in one thread, the application's lines written
from another thread all arrive, in order, on the real stdout and stderr; offline_mem writes nothing
there itself, redirects no file descriptor, and leaves the process's settings as it found them:
thinc keeps its PyTorch support, numpy its BLAS thread count (read from a third thread during the
forwards), and the GC, import system, signal handlers, environment, logging and locale are
unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from offline_mem.config import resolve_models_dir

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "host_app_process.py"
SMALL = "qwen2.5-coder-0.5b-instruct"
LINES = 1000


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("host")
    done = subprocess.run(
        [sys.executable, str(APP), str(folder / "memory.db"), str(resolve_models_dir()), SMALL,
         str(LINES)],
        capture_output=True, text=True, cwd=folder, timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's offline_mem
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.splitlines()
    assert out and out[-1].startswith("RESULT "), done.stdout[-3000:]
    return {
        "stdout": out[:-1],
        "stderr": done.stderr.splitlines(),
        "result": json.loads(out[-1].removeprefix("RESULT ")),
    }


def test_the_application_works_with_the_memory(run: dict[str, Any]) -> None:
    outcome = run["result"]["outcome"]
    assert "error" not in outcome, outcome
    assert outcome["job"] == "SUCCEEDED" and outcome["hits"] > 0


def test_every_line_of_the_application_arrives_in_order_and_nothing_else(
    run: dict[str, Any],
) -> None:
    assert run["result"]["written_while_loading"] > 0  # the lines overlapped the extractor's load
    assert run["stdout"] == [f"out {i}" for i in range(LINES)]
    assert run["stderr"] == [f"log {i}" for i in range(LINES)]


def test_no_file_descriptor_is_redirected(run: dict[str, Any]) -> None:
    result = run["result"]
    assert result["dup2"] == []
    assert result["after"]["fds"] == result["before"]["fds"]
    assert (result["after"]["stdout"], result["after"]["stderr"]) == (
        result["before"]["stdout"],
        result["before"]["stderr"],
    )


def test_the_process_settings_are_as_the_application_left_them(run: dict[str, Any]) -> None:
    before, after = run["result"]["before"], run["result"]["after"]
    assert after == before


def test_torch_and_thincs_torch_support_work_after_a_search(run: dict[str, Any]) -> None:
    result = run["result"]
    assert result["torch"]
    assert result["thinc_has_torch"] is True
    assert result["thinc_tensor"] == [0.0, 1.0, 2.0]


def test_numpy_keeps_its_blas_threads_during_the_forwards(run: dict[str, Any]) -> None:
    result = run["result"]
    assert result["before"]["blas"] and result["blas_seen"]
    assert all(seen == result["before"]["blas"] for seen in result["blas_seen"])
