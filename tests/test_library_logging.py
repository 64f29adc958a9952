"""offline_mem's log records go where the host application sends them, and nowhere when it
configured no logging: a library's warning must not appear in a host's stderr (which a host may
parse, as the concurrency test's writers' logs are parsed line by line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WARN = (
    "import logging, offline_mem\n"
    "logging.getLogger('offline_mem.store.store').warning('deleted text stays in the WAL')\n"
    "print('done')\n"
)


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_a_host_without_logging_sees_no_warning_of_the_library() -> None:
    done = run(WARN)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"
    assert done.stderr == ""


def test_a_host_that_configures_logging_gets_the_warning() -> None:
    done = run("import logging, sys\nlogging.basicConfig(stream=sys.stderr)\n" + WARN)
    assert done.returncode == 0
    assert "deleted text stays in the WAL" in done.stderr
