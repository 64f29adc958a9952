"""Carry verified models to a machine without network: bundle here, import there.

A bundle is a folder laid out like a models folder — `<DIR>/manifest.json` and
`<DIR>/<model>/<path>` — so it can also be used in place (OFFLINE_MEM_MODELS=DIR). Only files
that verify are bundled, each copy is hashed as it is written, and an import re-verifies every
byte against this machine's manifest before anything is renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from ..config import resolve_models_dir
from ..errors import ModelError, ModelIntegrityError
from .manifest import (
    MANIFEST_NAME,
    Manifest,
    ModelSpec,
    load_manifest,
    manifest_to_json,
    read_manifest,
)
from .model_files import (
    VerificationCache,
    check_model,
    copy_hashing,
    file_chunks,
    place_verified_file,
    verified_model_dir,
)

Log = Callable[[str], None]

BUNDLE_README = """\
offline_mem model bundle: pinned model files and the manifest that pins them (sha256, size).
On the target machine: `offline-mem models import DIR` (verifies every file, then installs it),
or use the folder in place with OFFLINE_MEM_MODELS=DIR.
"""


def bundle_models(
    dest: Path,
    names: Sequence[str] | None = None,
    *,
    models_dir: Path | None = None,
    log: Log = lambda line: None,
) -> list[ModelSpec]:
    """Copy the verified files of `names` (default: every model present and verified) and their
    manifest into `dest`. A named model that is missing or fails verification is an error."""
    directory = resolve_models_dir(models_dir)
    manifest = load_manifest(directory)
    specs = _bundle_selection(manifest, directory, names)
    if not specs:
        raise ModelError(f"no verified model in {directory} to bundle; fetch them first")
    dest.mkdir(parents=True, exist_ok=True)
    for spec in specs:
        verified_model_dir(spec.name, directory, manifest=manifest)
        log(f"{spec.name}: copying {len(spec.files)} file(s) into {dest / spec.name}")
        for model_file in spec.files:
            source = directory / spec.name / model_file.path
            target = dest / spec.name / model_file.path
            target.parent.mkdir(parents=True, exist_ok=True)
            temp = target.with_name(f".{target.name}.partial")
            with temp.open("wb") as out:
                digest, size = copy_hashing(file_chunks(source), out)
            if digest != model_file.sha256 or size != model_file.size:
                temp.unlink(missing_ok=True)
                raise ModelIntegrityError(str(source), model_file.sha256, digest)
            os.replace(temp, target)
    _write_text(dest / MANIFEST_NAME, json.dumps(manifest_to_json(specs), indent=2) + "\n")
    _write_text(dest / "README.txt", BUNDLE_README)
    return specs


def import_models(
    bundle: Path,
    names: Sequence[str] | None = None,
    *,
    models_dir: Path | None = None,
    trust_bundle_manifest: bool = False,
    log: Log = lambda line: None,
) -> list[ModelSpec]:
    """Verify the files of a bundle against this machine's manifest, then install them.

    A model this machine's manifest pins must be pinned identically by the bundle. A model it
    does not know is refused unless `trust_bundle_manifest`; where this machine has no manifest at
    all, the bundle's is the only one there is and is used. Models taken from the bundle's manifest
    are added to the models folder's own manifest.json. Nothing of a model is installed unless all
    of its files verify."""
    carried = read_manifest(bundle / MANIFEST_NAME)
    directory = resolve_models_dir(models_dir)
    try:
        local: Manifest | None = load_manifest(directory)
    except ModelError:
        local = None
    chosen = list(names) if names else list(carried.names)
    specs, adopted = [], []
    for name in chosen:
        spec = _trusted_spec(name, carried, local, trust_bundle_manifest or local is None)
        specs.append(spec)
        if local is None or name not in local.names:
            adopted.append(spec)
    directory.mkdir(parents=True, exist_ok=True)
    if adopted:
        known = list(local.models) if local is not None else []
        text = json.dumps(manifest_to_json([*known, *adopted]), indent=2) + "\n"
        _write_text(directory / MANIFEST_NAME, text)
        log(
            f"pinned {', '.join(s.name for s in adopted)} from the bundle's manifest in {directory}"
        )
    cache = VerificationCache(directory)
    try:
        for spec in specs:
            _import_one(spec, bundle, directory, cache, log)
    finally:
        cache.save()
    return specs


def _bundle_selection(
    manifest: Manifest, directory: Path, names: Sequence[str] | None
) -> list[ModelSpec]:
    if names:
        return [manifest.get(name) for name in names]
    return [spec for spec in manifest if check_model(spec, directory, full=False).ok]


def _trusted_spec(name: str, carried: Manifest, local: Manifest | None, trust: bool) -> ModelSpec:
    bundled = carried.get(name)
    if local is None or name not in local.names:
        if not trust:
            raise ModelError(
                f"{name!r} is not in this machine's manifest ({local.path if local else None}); "
                "import it only if you trust the bundle: --trust-bundle-manifest"
            )
        return bundled
    spec = local.get(name)
    if spec.files != bundled.files:
        raise ModelError(
            f"the bundle's manifest pins other files for {name!r} than this machine's manifest "
            f"({local.path}); refusing to import it"
        )
    return spec


def _import_one(
    spec: ModelSpec, bundle: Path, directory: Path, cache: VerificationCache, log: Log
) -> None:
    report = check_model(spec, directory, full=False, cache=cache)
    needed = [check.expected for check in report.files if not check.ok]
    if not needed:
        log(f"{spec.name}: already installed and verified")
        return
    stage = Path(tempfile.mkdtemp(prefix=".import-", dir=directory))
    try:
        staged = []
        for model_file in needed:
            source = bundle / spec.name / model_file.path
            if not source.is_file():
                raise ModelError(f"the bundle has no {source}")
            temp = stage / model_file.path
            temp.parent.mkdir(parents=True, exist_ok=True)
            with temp.open("wb") as out:
                digest, size = copy_hashing(file_chunks(source), out)
            if digest != model_file.sha256 or size != model_file.size:
                raise ModelIntegrityError(str(source), model_file.sha256, digest)
            staged.append((model_file, temp, digest))
        for model_file, temp, digest in staged:
            place_verified_file(temp, directory, spec, model_file, digest, cache)
        log(f"{spec.name}: {len(staged)} file(s) verified and installed in {directory / spec.name}")
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _write_text(path: Path, text: str) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(temp, 0o644)
    os.replace(temp, path)
