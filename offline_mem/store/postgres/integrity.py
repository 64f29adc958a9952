"""`verify` of a PostgreSQL database: the memory file's checks (store/integrity/) where they mean
something here, under the same names, read in one REPEATABLE READ, READ ONLY transaction.

Run as on the file: "keyword rows" and "message keyword rows" (each memory and each indexed
message, but one of a job not done, has one keyword document in its user's partition, and
every posting its document in that partition), "texts" and "scopes", with the same SQL. Run in
this store's own form: "rows" (every date parses), "validity", "keyword statistics" and
"message keyword statistics" (lengths, document frequencies and partition totals; a document
here keeps no list of its terms), "message vectors", "vector values" and "models" (this
store's schema version).

Left out, because here they cannot fail or mean nothing:
- "sqlite": PRAGMA integrity_check and foreign_key_check have no counterpart; the server
  enforces its foreign keys itself, and its pages are the server's to check (data checksums,
  amcheck).
- "vectors": a memory's vector is a NOT NULL `vector(D)` column of its own row, so a memory
  without one, a vector of no memory or of another dimension cannot be stored.
- "links": entity links, provenance, keyword documents and postings reference their rows
  with foreign keys ON DELETE CASCADE, so none can point at a missing row; the orphan parts of
  the keyword rows checks cannot fail here either.
pgvector refuses NaN and infinite values on input, so "vector values" finds lengths only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...values import EmbedderIdentity
from ..integrity.keywords import index_stats, keyword_rows, message_keyword_rows
from ..integrity.links import scopes, texts
from ..integrity.report import Check, Checker, VerifyReport, run_checks
from ..integrity.rows import date_problems, pin_problems, validity_problems
from ..integrity.vectors import UNIT_TOLERANCE, awaiting_index, vector_value_problems
from ..keyword_index import MEMORY_KEYWORDS, MESSAGE_KEYWORDS
from ..messages import is_indexed_message
from .connection import PgDatabase
from .migrations import SCHEMA_VERSION


def rows(c: Checker) -> None:
    c.problems("rows", date_problems(c))


def validity(c: Checker) -> None:
    c.problems("validity", validity_problems(c, greatest="GREATEST"))


def keyword_stats(c: Checker) -> None:
    c.problems("keyword statistics", index_stats(c, MEMORY_KEYWORDS))


def message_keyword_stats(c: Checker) -> None:
    c.problems("message keyword statistics", index_stats(c, MESSAGE_KEYWORDS))


def message_vectors(c: Checker) -> None:
    """Each indexed message has a vector (but a message of a job not done may have none yet:
    `awaiting_index`) and no system or empty message has one."""
    details = []
    awaiting = awaiting_index(c)
    for mid, role, content, has_vector in c.db.query(
        "SELECT id, role, content, embedding IS NOT NULL FROM messages ORDER BY seq"
    ):
        indexed = is_indexed_message(role, content)
        if indexed and not has_vector and mid not in awaiting:
            details.append(f"message {mid} has no vector")
        elif has_vector and not indexed:
            details.append(f"message {mid} is a system or empty message but has a vector")
    c.problems("message vectors", details)


def vector_values(c: Checker) -> None:
    """The server measures every vector's length (in double precision); those off unit length
    come back and are judged by the file's rule."""
    details = []
    for table, key, kind in (("memories", "rowid", "memory"), ("messages", "seq", "message")):
        off_unit = c.db.query(
            f"SELECT {key}, embedding::real[] FROM {table} "
            f"WHERE NOT (abs(vector_norm(embedding) - 1) <= %s) ORDER BY {key}",
            (UNIT_TOLERANCE,),
        )
        blobs = [(int(k), np.asarray(v, dtype=np.float32).tobytes()) for k, v in off_unit]
        details += vector_value_problems(kind, blobs)
    c.problems("vector values", details)


def models(c: Checker) -> None:
    c.problems("models", pin_problems(c, SCHEMA_VERSION))


CHECKS: list[tuple[str, Check]] = [
    ("rows", rows),
    ("validity", validity),
    ("message vectors", message_vectors),
    ("keyword rows", keyword_rows),
    ("keyword statistics", keyword_stats),
    ("message keyword rows", message_keyword_rows),
    ("message keyword statistics", message_keyword_stats),
    ("vector values", vector_values),
    ("texts", texts),
    ("scopes", scopes),
    ("models", models),
]


def verify_database(
    db: PgDatabase,
    *,
    embedder: EmbedderIdentity | None,
    embedder_unavailable: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> VerifyReport:
    """Run every check over one snapshot of the database; `embedder` is the configured one
    (None: the pin is checked for presence only, and `embedder_unavailable` says why). The
    report's path is the URL without its password."""
    return run_checks(
        db,
        CHECKS,
        shown=db.shown,
        embedder=embedder,
        embedder_unavailable=embedder_unavailable,
        progress=progress,
    )
