"""The keyword indexes (memories' and messages'): one document per indexed row in its
partition, no orphan postings, and statistics (lengths, document frequencies, partition totals,
each document's term list) that agree with the postings."""

from __future__ import annotations

import json
from collections.abc import Collection

from ..keyword_index import MEMORY_KEYWORDS, MESSAGE_KEYWORDS, KeywordTables
from ..messages import is_indexed_message
from .report import Checker
from .vectors import awaiting_index, memory_partitions


def keyword_rows(c: Checker) -> None:
    memories = memory_partitions(c)
    c.problems("keyword rows", _index_rows(c, MEMORY_KEYWORDS, "memory", memories, True))


def message_keyword_rows(c: Checker) -> None:
    """As the memories' (each indexed message has one keyword row once the index is complete;
    a message of a job not done may have none yet: `awaiting_index`)."""
    state = c.db.query_one("SELECT value FROM meta WHERE key = 'message_vectors'")
    complete = state is None or state[0] == "complete"
    messages = {
        int(seq): (mid, user or "")
        for seq, mid, user, role, content in c.db.query(
            "SELECT seq, id, user_id, role, content FROM messages"
        )
        if is_indexed_message(role, content)
    }
    awaiting = awaiting_index(c) if complete else set()
    details = _index_rows(c, MESSAGE_KEYWORDS, "message", messages, complete, awaiting)
    c.problems("message keyword rows", details)


def _index_rows(
    c: Checker,
    t: KeywordTables,
    kind: str,
    owners: dict[int, tuple[str, str]],
    required: bool,
    exempt: Collection[str] = (),
) -> list[str]:
    """Keyword rows of index `t` against its indexed rows (key -> (id, partition)): one doc row
    each (when `required`, but for the ids in `exempt`), none for a missing row, in the row's
    partition; no orphan postings."""
    docs = dict(c.db.query(f"SELECT {t.key}, partition FROM {t.docs}"))
    details = []
    if required:
        details += [
            f"{kind} {mid} has no keyword row ({t.docs})"
            for key, (mid, _) in owners.items()
            if key not in docs and mid not in exempt
        ]
    details += [f"{t.docs} row for {kind} {r} belongs to no {kind} (orphan)" for r in docs
                if r not in owners]  # fmt: skip
    details += [
        f"{kind} {owners[r][0]}'s keyword row is in partition {p!r}, not {owners[r][1]!r}"
        for r, p in docs.items()
        if r in owners and p != owners[r][1]
    ]
    for key, count in c.db.query(
        f"SELECT {t.key}, count(*) FROM {t.postings} p WHERE NOT EXISTS "
        f"(SELECT 1 FROM {t.docs} d WHERE d.{t.key} = p.{t.key} "
        f"AND d.partition = p.partition) GROUP BY {t.key}"
    ):
        details.append(
            f"{count} {t.postings} row(s) of {kind} {key} have no {t.docs} "
            "row in their partition (orphans)"
        )
    return details


def keyword_stats(c: Checker) -> None:
    details = index_stats(c, MEMORY_KEYWORDS) + _listed_terms(c, MEMORY_KEYWORDS)
    c.problems("keyword statistics", details)


def message_keyword_stats(c: Checker) -> None:
    details = index_stats(c, MESSAGE_KEYWORDS) + _listed_terms(c, MESSAGE_KEYWORDS)
    c.problems("message keyword statistics", details)


def _listed_terms(c: Checker, t: KeywordTables) -> list[str]:
    """Each doc lists the terms of its postings (a delete finds them by that list)."""
    held: dict[int, set[str]] = {}
    for key, term in c.db.query(f"SELECT {t.key}, term FROM {t.postings}"):
        held.setdefault(int(key), set()).add(term)
    details = []
    for key, listed in c.db.query(f"SELECT {t.key}, terms FROM {t.docs}"):
        try:
            terms = json.loads(listed)
        except (TypeError, ValueError):
            terms = None
        if not isinstance(terms, list) or set(terms) != held.get(int(key), set()):
            details.append(f"{t.docs} row {key} lists other terms than its postings hold")
    return details


def index_stats(c: Checker, t: KeywordTables) -> list[str]:
    """Lengths, document frequencies and partition totals of index `t` agree with its rows (the
    same tables and SQL on both stores)."""
    details = []
    for key, length, total in c.db.query(
        f"SELECT d.{t.key}, d.length, coalesce(sum(p.tf), 0) FROM {t.docs} d "
        f"LEFT JOIN {t.postings} p ON p.{t.key} = d.{t.key} "
        f"GROUP BY d.{t.key} HAVING d.length != coalesce(sum(p.tf), 0)"
    ):
        details.append(f"{t.docs} length {length} of {key} != its postings' {total}")
    for partition, term, df, actual in c.db.query(
        f"SELECT t.partition, t.term, t.df, count(p.term) FROM {t.terms} t "
        f"LEFT JOIN {t.postings} p ON p.partition = t.partition AND p.term = t.term "
        "GROUP BY t.partition, t.term, t.df HAVING t.df != count(p.term)"
    ):
        details.append(f"term {term!r} in partition {partition!r}: df {df}, postings {actual}")
    for partition, term in c.db.query(
        f"SELECT DISTINCT p.partition, p.term FROM {t.postings} p WHERE NOT EXISTS "
        f"(SELECT 1 FROM {t.terms} t WHERE t.partition = p.partition AND t.term = p.term)"
    ):
        details.append(f"term {term!r} in partition {partition!r} has postings but no df row")
    stored = {
        p: (d, n)
        for p, d, n in c.db.query(f"SELECT partition, docs, total_length FROM {t.partitions}")
    }
    actual = {
        p: (d, n)
        for p, d, n in c.db.query(
            f"SELECT partition, count(*), sum(length) FROM {t.docs} GROUP BY partition"
        )
    }
    for partition in sorted(set(stored) | set(actual)):
        have, want = stored.get(partition, (0, 0)), actual.get(partition, (0, 0))
        if have != want:
            details.append(f"partition {partition!r}: stored docs/length {have}, actual {want}")
    return details
