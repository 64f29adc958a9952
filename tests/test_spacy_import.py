"""spaCy imported the fast way (spacy_import.py) analyses text exactly as spaCy imported plainly,
and a process that offline_mem does not own gets the plain import.

Each import runs in a fresh interpreter: which modules an import brings in is a property of the
whole process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from offline_mem.pinned.model_files import verified_model_dir

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[1]

TEXTS = [
    "My sister Marta moved to Porto in 2021 and works at Hospital São João.",
    "I rode 42 km on my Brompton yesterday; the ride was better than expected!",
    'We watched "The Matrix" with Dr. Okonkwo at 9pm.',
    "what bike do I ride",
    "",
]

PARSE = """
import gc, json, sys
mode, folder, texts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
from offline_mem.pinned.process_tuning import claim_process
from offline_mem.pinned.spacy_import import import_spacy
if mode == "plain":
    import spacy
elif mode == "library":  # a process that is not offline_mem's own
    spacy = import_spacy()
elif mode == "torch-first":
    import torch
    claim_process()
    spacy = import_spacy()
else:  # the fast import, where offline_mem owns the process (the command line)
    claim_process()
    spacy = import_spacy()
import thinc.compat
state = {
    "torch": "torch" in sys.modules,
    "thinc_has_torch": thinc.compat.has_torch,
    "spacy_cli": "spacy.cli" in sys.modules,
    "gc_enabled": gc.isenabled(),
}
nlp = spacy.load(folder, exclude=["parser", "senter"])
docs = [
    {
        "tokens": [[t.text, t.lemma_, t.pos_, t.tag_, t.is_stop, t.like_num] for t in doc],
        "ents": [[e.text, e.label_, e.start_char] for e in doc.ents],
    }
    for doc in nlp.pipe(texts)
]
info = spacy.info()
import spacy.cli
print(json.dumps({
    "state": state, "docs": docs, "info": sorted(info), "cli_info": callable(spacy.cli.info),
}))
"""


def _run(mode: str, tmp_path: Path) -> dict[str, Any]:
    folder = str(verified_model_dir("en_core_web_sm"))
    done = subprocess.run(
        [sys.executable, "-c", PARSE, mode, folder, json.dumps(TEXTS)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's offline_mem
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run("plain", tmp_path_factory.mktemp("plain"))


def test_plain_spacy_imports_torch_here(plain: dict[str, Any]) -> None:
    """The premise: with torch installed, a plain `import spacy` imports it (through thinc)."""
    assert plain["state"]["torch"] and plain["state"]["thinc_has_torch"]


def test_the_fast_import_analyses_text_exactly_as_the_plain_one(
    plain: dict[str, Any], tmp_path: Path
) -> None:
    fast = _run("fast", tmp_path)
    assert fast["state"] == {
        "torch": False,
        "thinc_has_torch": False,
        "spacy_cli": False,  # stood in for during the import, not imported
        "gc_enabled": True,  # paused during the import only
    }
    assert fast["docs"] == plain["docs"]
    # spaCy's own `info` and command line still work, imported when asked for
    assert fast["info"] == plain["info"] and fast["cli_info"]


def test_nothing_is_hidden_once_torch_is_imported(plain: dict[str, Any], tmp_path: Path) -> None:
    """An application that imported torch first keeps thinc's PyTorch support."""
    after_torch = _run("torch-first", tmp_path)
    assert after_torch["state"]["thinc_has_torch"] is True
    assert after_torch["docs"] == plain["docs"]


def test_a_library_process_gets_the_plain_import(plain: dict[str, Any], tmp_path: Path) -> None:
    """Where offline_mem does not own the process, nothing is hidden, stood in for or paused:
    thinc has its PyTorch support, as after `import spacy`."""
    library = _run("library", tmp_path)
    assert library["state"] == plain["state"]
    assert library["state"]["thinc_has_torch"] is True
    assert library["docs"] == plain["docs"]
    assert library["info"] == plain["info"] and library["cli_info"]
