"""A plain `pip install` of the package, without extras, gives a working library: no torch,
transformers, sentence-transformers, spaCy or llama-cpp-python, and `Memory` adds and searches
with the fakes of offline_mem.testing (and a whitespace analyzer in spaCy's place).

It builds a fresh virtual environment and installs the checkout from PyPI in a subprocess (the
in-process socket guard does not see it), so it is marked `network`; about 2 minutes on two
cores. It also reports the size of that environment's site-packages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "sentence_transformers", "spacy", "llama_cpp")
SITE_PACKAGES_LIMIT_MB = 150  # besides pip and setuptools, which every virtualenv has

SMOKE = """
import importlib.metadata, importlib.util, json, sys
import offline_mem
from offline_mem import Memory
from offline_mem.pinned.nlp import Analysis, TextAnalyzer
from offline_mem.testing import FakeEmbedder, FakeEntities

class WordAnalyzer(TextAnalyzer):
    def analyze_batch(self, texts):
        return [Analysis(terms=t.lower().split(), tokens=t.lower().split()) for t in texts]

with Memory({"path": sys.argv[1]}, embedder=FakeEmbedder(), entities=FakeEntities(),
            analyzer=WordAnalyzer()) as memory:
    memory.add("I am allergic to peanuts", user_id="ana", infer=False)
    hits = memory.search("peanuts", filters={"user_id": "ana"})["results"]
print(json.dumps({
    "version": [offline_mem.__version__, importlib.metadata.version("offline_mem")],
    "file": offline_mem.__file__,
    "found": [hit["memory"] for hit in hits],
    "heavy": [name for name in HEAVY if importlib.util.find_spec(name) is not None],
}))
"""


def site_packages_mb(env: Path) -> float:
    (site,) = env.glob("lib/python*/site-packages")
    skip = ("pip", "setuptools", "pkg_resources", "_distutils_hack")
    total = sum(
        path.stat().st_size
        for path in site.rglob("*")
        if path.is_file() and not path.relative_to(site).parts[0].startswith(skip)
    )
    return total / 2**20


@pytest.mark.network
def test_a_plain_install_works_without_the_extras(tmp_path: Path) -> None:
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    pip_env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", str(ROOT)],
        check=True, timeout=900, env=pip_env, cwd=tmp_path,
    )  # fmt: skip
    out = subprocess.run(
        [python, "-c", SMOKE.replace("HEAVY", repr(HEAVY)), str(tmp_path / "memory.db")],
        check=True, timeout=300, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    result = json.loads(out.stdout)
    assert Path(result["file"]).is_relative_to(env)
    assert result["found"] == ["I am allergic to peanuts"]
    package_version, installed_version = result["version"]
    assert package_version == installed_version  # one version source: offline_mem.__version__
    assert result["heavy"] == []
    size = site_packages_mb(env)
    print(f"site-packages of a plain install: {size:.0f} MB", file=sys.stderr)
    assert size <= SITE_PACKAGES_LIMIT_MB


def test_an_embedder_that_needs_sentence_transformers_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from offline_mem.errors import MissingExtraError, ModelError
    from offline_mem.pinned.st_encoder import SentenceTransformersEncoder

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"pip install 'offline_mem\[reference\]'") as info:
        SentenceTransformersEncoder.load(tmp_path, batch_size=8)
    assert isinstance(info.value, ModelError) and isinstance(info.value, ImportError)
    assert info.value.extra == "reference"
