"""What a fresh process imports: nothing heavy for a command that needs no model, and no
sentence-transformers, transformers or torch on the way to a search or a raw add.

Importing torch, transformers or spaCy costs seconds on a cold machine (docs/models.md);
`offline-mem list` must not pay for them. Each command runs in its own interpreter, exactly as
from a shell, and reports the modules it ended with. (Timings are benchmarks, not tests:
benchmarks/cold_start.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offline_mem import Memory

HEAVY = ("torch", "transformers", "sentence_transformers", "spacy", "thinc", "llama_cpp")
# the embedder's and spaCy's own libraries, fine on the model paths only
MODEL_LIBRARIES = ("spacy", "thinc", "tokenizers", "safetensors")

RUN_CLI = """
import json, sys
watched = json.loads(sys.argv[1])
sys.argv = ["offline-mem", *sys.argv[2:]]
from offline_mem.cli import run  # the console script's entry point, as a user runs it
try:
    run()
except SystemExit as done:
    code = done.code or 0
sys.stdout.flush()
print("\\nIMPORTED " + json.dumps([name for name in watched if name in sys.modules]))
sys.exit(code)
"""

IMPORT_PACKAGE = """
import json, sys
import offline_mem
from offline_mem import *  # every public name
print("IMPORTED " + json.dumps([name for name in json.loads(sys.argv[1]) if name in sys.modules]))
"""


def _imported(*args: str, cwd: Path, script: str = RUN_CLI) -> list[str]:
    watched = json.dumps(sorted({*HEAVY, *MODEL_LIBRARIES}))
    done = subprocess.run(
        [sys.executable, "-c", script, watched, *args],
        capture_output=True, text=True, cwd=cwd, env=os.environ.copy(), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("IMPORTED "), done.stdout[-2000:]
    return list(json.loads(last.removeprefix("IMPORTED ")))


@pytest.fixture(scope="module")
def memory_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A file with two raw memories (one to keep, one to delete), written with the real
    pinned models."""
    path = tmp_path_factory.mktemp("startup") / "memory.db"
    with Memory({"path": str(path)}) as memory:
        ids = [
            memory.add(text, user_id="ana", infer=False)["results"][0]["id"]
            for text in ("I ride a Brompton folding bike", "I keep bees")
        ]
    return path, ids[0], ids[1]


def test_importing_the_package_imports_no_model_library(tmp_path: Path) -> None:
    assert _imported(cwd=tmp_path, script=IMPORT_PACKAGE) == []


@pytest.mark.real_model
@pytest.mark.parametrize(
    "command",
    [
        ["list", "--user", "ana"],
        ["get", "{id}"],
        ["history", "{id}"],
        ["stats"],
        ["verify"],
        ["export", "-"],
        ["backup", "{dir}/copy.db"],
        ["models", "list"],
        ["delete", "{other}"],
    ],
    ids=lambda command: command[0] if command[0] != "models" else "models-list",
)
def test_a_command_without_a_model_imports_no_heavy_module(
    memory_file: tuple[Path, str, str], command: list[str], tmp_path: Path
) -> None:
    path, memory_id, other = memory_file
    args = [part.format(id=memory_id, other=other, dir=tmp_path) for part in command]
    assert _imported("--db", str(path), *args, cwd=tmp_path) == []


@pytest.mark.real_model
@pytest.mark.parametrize(
    "command",
    [
        ["search", "what bike do I ride", "--user", "ana"],
        ["add", "--no-infer", "My sister Marta lives in Porto", "--user", "ana"],
    ],
    ids=["search", "raw-add"],
)
def test_search_and_raw_add_run_without_torch(
    memory_file: tuple[Path, str, str], command: list[str], tmp_path: Path
) -> None:
    """The pinned embedder runs on numpy and spaCy imports without torch (spacy_import.py)."""
    path, _, _ = memory_file
    imported = _imported("--db", str(path), *command, cwd=tmp_path)
    assert set(imported) <= set(MODEL_LIBRARIES), imported
    assert "tokenizers" in imported and "spacy" in imported  # the models did run
