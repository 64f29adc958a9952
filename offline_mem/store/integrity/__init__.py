"""`verify`: is a memory file sound? Read-only; every check reports what it found, by name.

Checks: SQLite's own integrity and foreign-key checks; every memory row (active or superseded) has
exactly one vector row and one keyword document in its user's partition; no vector, keyword,
entity-link or provenance row points at a missing memory, message or entity; the keyword
statistics (document lengths, document frequencies, partition totals) agree with the postings;
every vector is unit-length; every indexed message has a vector (its own, or linked to the one
of the raw memory made from it) and a keyword document (but a message of a job not done: it is
indexed after its add returns, before its job runs), and the messages' keyword index is as
sound as the memories' (each document lists its postings' terms); the schema version and the
embedder pinned in `meta` match this offline_mem and the configured embedder, and every memory
was written by the pinned embedder; every stored vector is finite and of unit length; a
memory's newest history row holds its text; no provenance, entity link or supersession joins
rows of two scopes.

One module per group of checks: rows.py (SQLite, rows, dates, validity, pins), vectors.py,
keywords.py, links.py (links, texts, scopes); report.py holds what they found and runs them.
Checks whose SQL both stores accept are run on a PostgreSQL database too
(store/postgres/integrity.py).
"""

from __future__ import annotations

from collections.abc import Callable

from ...values import EmbedderIdentity
from ..db import Database
from .keywords import keyword_rows, keyword_stats, message_keyword_rows, message_keyword_stats
from .links import links, scopes, texts
from .report import Check, Problem, VerifyReport, run_checks
from .rows import models, rows, sqlite, validity
from .vectors import UNIT_TOLERANCE, message_vectors, vector_value_problems, vector_values, vectors

__all__ = [
    "CHECKS",
    "UNIT_TOLERANCE",
    "Problem",
    "VerifyReport",
    "vector_value_problems",
    "verify_file",
]


CHECKS: list[tuple[str, Check]] = [
    ("sqlite", sqlite),
    ("rows", rows),
    ("validity", validity),
    ("vectors", vectors),
    ("message vectors", message_vectors),
    ("keyword rows", keyword_rows),
    ("keyword statistics", keyword_stats),
    ("message keyword rows", message_keyword_rows),
    ("message keyword statistics", message_keyword_stats),
    ("links", links),
    ("vector values", vector_values),
    ("texts", texts),
    ("scopes", scopes),
    ("models", models),
]


def verify_file(
    db: Database,
    *,
    embedder: EmbedderIdentity | None,
    embedder_unavailable: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> VerifyReport:
    """Run every check over the file; `embedder` is the configured one (None: the pin is checked
    for presence only, and `embedder_unavailable` says why)."""
    return run_checks(
        db,
        CHECKS,
        shown=db.path,
        embedder=embedder,
        embedder_unavailable=embedder_unavailable,
        progress=progress,
    )
