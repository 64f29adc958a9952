"""What every source shares: how it reports failure and how it hands a file over.

A source writes each needed file to a temporary path inside the staging folder, hashing as it
writes, then calls `deliver(model_file, temp_path, sha256)`, which checks the hash against the
manifest and renames the file into place (or raises). A source that cannot give the bytes raises
`SourceError`; the caller then moves on to the next source.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from offline_mem.pinned.manifest import ModelFile

Deliver = Callable[[ModelFile, Path, str], None]
Log = Callable[[str], None]


class SourceError(Exception):
    """One source could not provide a model's files (unreachable, missing, wrong bytes)."""


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")
