"""A local folder laid out like a models folder (`<DIR>/<model>/<path>`), such as a bundle."""

from __future__ import annotations

from pathlib import Path

from offline_mem.pinned.manifest import ModelFile, ModelSpec
from offline_mem.pinned.model_files import copy_hashing, file_chunks

from .sources import Deliver, Log, SourceError


def fetch_local(
    spec: ModelSpec, folder: Path, needed: list[ModelFile], stage: Path, deliver: Deliver, log: Log
) -> None:
    """Copy the needed files from `folder/<name>/<path>` (or `folder/<path>`), hashing them."""
    for model_file in needed:
        candidates = (folder / spec.name / model_file.path, folder / model_file.path)
        found = next((path for path in candidates if path.is_file()), None)
        if found is None:
            raise SourceError(f"{candidates[0]} does not exist")
        log(f"  local: copying {found}")
        temp = stage / f"local-{spec.name}" / model_file.path
        temp.parent.mkdir(parents=True, exist_ok=True)
        with temp.open("wb") as out:
            digest, _ = copy_hashing(file_chunks(found), out)
        deliver(model_file, temp, digest)
