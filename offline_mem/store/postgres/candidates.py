"""The vector signal of a search in PostgreSQL: exact cosine top-k within the filter.

pgvector's `<=>` is the cosine distance; the query ranks exactly the rows the condition selects
(through the scope indexes), never a global top-k filtered afterwards, as the SQLite store does.
The keyword and entity signals are not ported yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ...timeutil import utc_now
from ..filters import CompiledFilter
from .connection import PgDatabase
from .filters import pg_condition
from .reads import visibility
from .vectors import vector_literal


class PgCandidates:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def search_filter(
        self,
        where: CompiledFilter,
        *,
        include_expired: bool = False,
        include_superseded: bool = False,
        now: datetime | None = None,
        as_of: datetime | None = None,
    ) -> tuple[str, list[Any]]:
        """The caller's filter plus visibility, as PostgreSQL over alias m."""
        condition, params = pg_condition(where)
        visible, vparams = visibility(
            now=now or utc_now(), include_expired=include_expired,
            include_superseded=include_superseded, as_of=as_of,
        )  # fmt: skip
        return f"{condition} AND {visible}", [*params, *vparams]

    def vector_candidates(
        self, vector: np.ndarray, condition: tuple[str, list[Any]], *, k: int
    ) -> dict[int, float]:
        """rowid -> cosine similarity of the k nearest memories passing the condition."""
        sql, params = condition
        query = vector_literal(vector)
        rows = self.db.query(
            "SELECT m.rowid, m.embedding <=> %s::vector AS d FROM memories m "
            f"WHERE {sql} ORDER BY d, m.rowid LIMIT %s",
            (query, *params, int(k)),
        )
        return {int(rowid): 1.0 - float(d) for rowid, d in rows}

    def vector_similarities(self, vector: np.ndarray, rowids: Sequence[int]) -> dict[int, float]:
        if not rowids:
            return {}
        rows = self.db.query(
            "SELECT rowid, 1 - (embedding <=> %s::vector) FROM memories WHERE rowid = ANY(%s)",
            (vector_literal(vector), [int(r) for r in rowids]),
        )
        return {int(rowid): float(score) for rowid, score in rows}
