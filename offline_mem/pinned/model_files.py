"""Model files on disk, checked against the manifest before any model is loaded.

`verified_model_dir(name)` is what every model loader calls: it returns the model's folder once
every file has the size and sha256 the manifest pins, and raises otherwise. Hashing a 1 GB GGUF
takes about a second, so the result is cached per file in `<models_dir>/.verified.json`, keyed on
the file's size, mtime_ns, ctime_ns and inode: a file replaced, rewritten or touched since it was
hashed is hashed again. `verify_model(..., full=True)` ignores the cache and re-hashes everything.
The cache guards against accidents (a partial copy, a wrong file, a flipped byte), not against
someone who can write the models folder, who could rewrite the cache too; `offline-mem models
verify` is the full check. No network here.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from ..config import resolve_models_dir
from ..errors import ModelError, ModelIntegrityError, ModelNotFoundError
from .manifest import Manifest, ModelFile, ModelSpec, load_manifest

CACHE_NAME = ".verified.json"
CACHE_FORMAT = 1
CHUNK_SIZE = 1 << 20

FileStatus = Literal["ok", "missing", "size_mismatch", "hash_mismatch"]


@dataclass(frozen=True)
class FileCheck:
    """The state of one model file against its manifest entry."""

    expected: ModelFile
    location: Path
    status: FileStatus
    actual_sha256: str | None = None
    actual_size: int | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class VerifyReport:
    name: str
    directory: Path
    files: tuple[FileCheck, ...]
    full: bool

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.files)

    @property
    def missing(self) -> tuple[FileCheck, ...]:
        return tuple(check for check in self.files if check.status == "missing")

    @property
    def mismatched(self) -> tuple[FileCheck, ...]:
        return tuple(check for check in self.files if check.status.endswith("_mismatch"))


@dataclass(frozen=True)
class ModelIdentity:
    """What a memory file records about a model: its name, the sha256 of its primary file and,
    for an embedder, the vector dimension."""

    name: str
    sha256: str
    dimension: int | None
    files_sha256: str | None = None  # `files_digest` of every file of the model


def files_digest(spec: ModelSpec) -> str:
    """One sha256 over the pinned sha256 of every file of a model (weights, tokenizer, configs,
    pooling): an embedder's vectors depend on all of them, so a memory file records this."""
    lines = sorted(f"{f.path}\t{f.sha256}\n" for f in spec.files)
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def model_dir(name: str, models_dir: Path | None = None) -> Path:
    """Where the files of model `name` live (present or not)."""
    return resolve_models_dir(models_dir) / name


def verified_model_dir(
    name: str, models_dir: Path | None = None, *, manifest: Manifest | None = None
) -> Path:
    """The folder of model `name` after checking every file's size and sha256 against the
    manifest (cached: see the module docstring).

    Raises ModelNotFoundError when a file is missing, ModelIntegrityError when one differs."""
    directory = resolve_models_dir(models_dir)
    spec = (manifest or load_manifest(directory)).get(name)
    report = check_model(spec, directory, full=False)
    if report.missing:
        first, more = report.missing[0], len(report.missing) - 1
        raise ModelNotFoundError(
            f"model {name!r} is not installed: {first.location} is missing"
            + (f" (and {more} more file{'s' if more > 1 else ''})" if more else "")
            + f"; run scripts/fetch_models --only {name} (or `offline-mem models fetch`, "
            "or `offline-mem models import DIR` from a bundle)"
        )
    for bad in report.mismatched:
        actual = bad.actual_sha256 or "?"
        if bad.status == "size_mismatch":
            actual = f"{actual} (size {bad.actual_size}, expected {bad.expected.size})"
        raise ModelIntegrityError(str(bad.location), bad.expected.sha256, actual)
    return directory / name


def verify_model(name: str, models_dir: Path | None = None, *, full: bool = True) -> VerifyReport:
    """Check model `name` file by file and report; never raises for a bad file.

    `full=True` re-hashes every present file, ignoring (and refreshing) the cache."""
    directory = resolve_models_dir(models_dir)
    spec = load_manifest(directory).get(name)
    return check_model(spec, directory, full=full)


def model_identity(name: str, models_dir: Path | None = None) -> ModelIdentity:
    """The identity the manifest pins for model `name` (check the files with
    `verified_model_dir` before loading them)."""
    spec = load_manifest(resolve_models_dir(models_dir)).get(name)
    return ModelIdentity(
        name=spec.name,
        sha256=spec.primary_file.sha256,
        dimension=spec.dimension,
        files_sha256=files_digest(spec),
    )


def check_model(
    spec: ModelSpec, directory: Path, *, full: bool, cache: VerificationCache | None = None
) -> VerifyReport:
    """Check every file of `spec` under `directory/<name>/`, hashing what the cache cannot vouch
    for (everything when `full`), and record the hashes in the cache."""
    own_cache = cache is None
    cache = cache or VerificationCache(directory)
    checks = tuple(
        _check_file(spec, model_file, directory, cache, full) for model_file in spec.files
    )
    if own_cache:
        cache.save()
    return VerifyReport(name=spec.name, directory=directory / spec.name, files=checks, full=full)


def quick_status(spec: ModelSpec, directory: Path, cache: VerificationCache) -> str:
    """A status without hashing: verified, unverified, partial, size mismatch or missing."""
    present = verified = 0
    for model_file in spec.files:
        location = directory / spec.name / model_file.path
        try:
            stat = location.stat()
        except FileNotFoundError:
            continue
        present += 1
        if stat.st_size != model_file.size:
            return "size mismatch"
        if cache.vouches(cache_key(spec.name, model_file), stat, model_file.sha256):
            verified += 1
    if present == 0:
        return "missing"
    if present < len(spec.files):
        return f"partial ({present}/{len(spec.files)} files)"
    return "verified" if verified == present else "unverified"


def cache_key(name: str, model_file: ModelFile) -> str:
    return f"{name}/{model_file.path}"


def sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        digest, _ = copy_hashing(_chunks(handle), None)
    return digest


def copy_hashing(chunks: Iterable[bytes], out: BinaryIO | None) -> tuple[str, int]:
    """Hash `chunks` (writing them to `out` when given); return (sha256 hex, size)."""
    digest, size = hashlib.sha256(), 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
        if out is not None:
            out.write(chunk)
    return digest.hexdigest(), size


def file_chunks(path: Path) -> Iterable[bytes]:
    with path.open("rb") as handle:
        yield from _chunks(handle)


def place_verified_file(
    temp_path: Path,
    directory: Path,
    spec: ModelSpec,
    model_file: ModelFile,
    actual_sha256: str,
    cache: VerificationCache,
) -> Path:
    """Move a fully written temporary file into place once its hash is the manifest's.

    `temp_path` must be on the same filesystem as `directory` so that the rename is atomic: a
    reader sees either the old file or the whole new one."""
    size = temp_path.stat().st_size
    if actual_sha256 != model_file.sha256 or size != model_file.size:
        raise ModelIntegrityError(
            str(temp_path), model_file.sha256, f"{actual_sha256} (size {size})"
        )
    target = directory / spec.name / model_file.path
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(temp_path, target)
    cache.record(cache_key(spec.name, model_file), target.stat(), actual_sha256)
    return target


class VerificationCache:
    """The hashes of files seen before, in `<models_dir>/.verified.json`.

    An entry vouches for a file only while its size, mtime_ns, ctime_ns and inode are unchanged
    and its recorded hash is the one expected. The file is written atomically; a models folder
    that cannot be written (a read-only stick) just goes without a cache."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / CACHE_NAME
        self._entries = self._load()
        self._dirty = False

    def vouches(self, key: str, stat: os.stat_result, expected_sha256: str) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry == _entry(stat, expected_sha256)

    def record(self, key: str, stat: os.stat_result, sha256: str) -> None:
        self._entries[key] = _entry(stat, sha256)
        self._dirty = True

    def save(self) -> None:
        if not self._dirty:
            return
        body = json.dumps(
            {"format": CACHE_FORMAT, "files": self._entries}, indent=1, sort_keys=True
        )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".verified.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(body)
            os.chmod(temp, 0o644)
            os.replace(temp, self.path)
        except OSError:
            return  # read-only models folder: the next load hashes again, which is still correct
        self._dirty = False

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
            return {}
        files = data.get("files")
        return files if isinstance(files, dict) else {}


def _check_file(
    spec: ModelSpec, model_file: ModelFile, directory: Path, cache: VerificationCache, full: bool
) -> FileCheck:
    location = directory / spec.name / model_file.path
    key = cache_key(spec.name, model_file)
    try:
        before = location.stat()
    except FileNotFoundError:
        return FileCheck(model_file, location, "missing")
    except OSError as exc:
        raise ModelError(f"cannot read {location}: {exc}") from exc
    if not full and cache.vouches(key, before, model_file.sha256):
        return FileCheck(model_file, location, "ok", model_file.sha256, before.st_size, cached=True)
    actual = sha256_file(location)
    if _same_file_state(before, location.stat()):
        cache.record(key, before, actual)
    if before.st_size != model_file.size:
        return FileCheck(model_file, location, "size_mismatch", actual, before.st_size)
    status: FileStatus = "ok" if actual == model_file.sha256 else "hash_mismatch"
    return FileCheck(model_file, location, status, actual, before.st_size)


def _entry(stat: os.stat_result, sha256: str) -> dict[str, Any]:
    return {
        "sha256": sha256,
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "inode": stat.st_ino,
    }


def _same_file_state(a: os.stat_result, b: os.stat_result) -> bool:
    return _entry(a, "") == _entry(b, "")


def _chunks(handle: BinaryIO) -> Iterable[bytes]:
    while chunk := handle.read(CHUNK_SIZE):
        yield chunk
