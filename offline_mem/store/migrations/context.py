"""What a migration's DDL needs to know, and a migration's shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..db import Database


@dataclass(frozen=True)
class MigrationContext:
    dimension: int  # the embedder's, for the vector tables


Migration = Callable[[Database, MigrationContext], None]
