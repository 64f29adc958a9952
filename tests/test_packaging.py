"""An installed wheel, not only a checkout, knows its pinned models: the manifest travels in it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from offline_mem.config import checkout_models_dir
from offline_mem.pinned.manifest import PACKAGED_MANIFEST, manifest_path

ROOT = checkout_models_dir().parent
CHECKOUT_MANIFEST = checkout_models_dir() / "manifest.json"
# what a wheel is built from; copied so the build leaves nothing in the checkout
SOURCES = ["pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "offline_mem",
           "offline_mem_fetch", "models/manifest.json"]  # fmt: skip


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    for name in SOURCES:
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, target)
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--quiet", "--wheel-dir", str(dist), str(source)],
        check=True, timeout=300,
    )  # fmt: skip
    (wheel,) = dist.glob("offline_mem-*.whl")
    return wheel


def test_an_installed_wheel_reads_the_pinned_manifest_it_carries(tmp_path):
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        carried = archive.read("offline_mem/pinned_models.json")
    assert carried == CHECKOUT_MANIFEST.read_bytes()

    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
         "--target", str(site), str(wheel)],
        check=True, timeout=300,
    )  # fmt: skip
    empty_models = tmp_path / "models"
    empty_models.mkdir()
    probe = (
        "import json; from offline_mem.pinned.manifest import load_manifest, manifest_path; "
        "print(json.dumps([str(manifest_path()), list(load_manifest().names)]))"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "OFFLINE_MEM_MODELS": str(empty_models)}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
        check=True, timeout=120,
    )  # fmt: skip
    path, names = json.loads(out.stdout)
    assert Path(path) == site / "offline_mem" / "pinned_models.json"
    pinned = [model["name"] for model in json.loads(CHECKOUT_MANIFEST.read_text())["models"]]
    assert names == pinned


def test_a_checkout_reads_its_models_folder_not_a_packaged_copy():
    assert not PACKAGED_MANIFEST.exists()  # only a built wheel has one
    assert manifest_path(checkout_models_dir()) == CHECKOUT_MANIFEST
