"""Links and values: no link points at a missing row or joins two scopes; each text still
hashes to its hash, a memory's newest history row holds its text, and each row's scope names
its own user, agent and run."""

from __future__ import annotations

from typing import Any

from ...values import Scope, content_hash
from .report import Checker


def links(c: Checker) -> None:
    details = [
        f"entity_links row ({e}, {m}) points at a missing "
        + ("memory" if missing_memory else "entity")
        for e, m, missing_memory in c.db.query(
            "SELECT l.entity_rowid, l.memory_rowid, m.rowid IS NULL FROM entity_links l "
            "LEFT JOIN memories m ON m.rowid = l.memory_rowid "
            "LEFT JOIN entities e ON e.rowid = l.entity_rowid "
            "WHERE m.rowid IS NULL OR e.rowid IS NULL"
        )
    ]
    details += [
        f"provenance row ({m}, {s}) points at a missing " + ("memory" if no_memory else "message")
        for m, s, no_memory in c.db.query(
            "SELECT p.memory_rowid, p.message_seq, m.rowid IS NULL FROM provenance p "
            "LEFT JOIN memories m ON m.rowid = p.memory_rowid "
            "LEFT JOIN messages g ON g.seq = p.message_seq "
            "WHERE m.rowid IS NULL OR g.seq IS NULL"
        )
    ]
    c.problems("links", details)


def texts(c: Checker) -> None:
    """Each memory's text and each message's content still hashes to its `hash`, the newest
    history row of a memory holds its text, and each row's scope names its own user, agent and
    run: SQLite checks a file's structure, never its values, so a changed byte of a text or an
    owner shows only here."""
    details = [
        f"memory {mid}'s text does not match its hash"
        for mid, text, digest in c.db.query("SELECT id, text, hash FROM memories")
        if not _hashes_to(text, digest)
    ]
    details += [
        f"message {mid}'s content does not match its hash"
        for mid, content, digest in c.db.query("SELECT id, content, hash FROM messages")
        if not _hashes_to(content, digest)
    ]
    # Every write of a memory's text adds a history row holding it (ADD, UPDATE, SUPERSEDE):
    # the newest one holds the memory's text. A MERGE row holds it as old_memory (its
    # new_memory is the wording said again, which the memory did not take).
    details += [
        f"memory {mid}'s newest history row holds another text than the memory"
        for mid, text, last in c.db.query(
            "SELECT m.id, m.text, (SELECT CASE h.event WHEN 'MERGE' THEN h.old_memory "
            "ELSE h.new_memory END FROM history h WHERE h.memory_id = m.id "
            "ORDER BY h.rowid DESC LIMIT 1) FROM memories m"
        )
        if last is not None and last != text
    ]
    for table, kind in (("memories", "memory"), ("messages", "message")):
        details += [
            f"{kind} {mid}'s scope {scope!r} does not name its user, agent and run"
            for mid, scope, user, agent, run in c.db.query(
                f"SELECT id, scope, user_id, agent_id, run_id FROM {table}"
            )
            if scope != Scope(user, agent, run).key
        ]
    c.problems("texts", details)


def _hashes_to(text: Any, digest: Any) -> bool:
    try:
        return isinstance(text, str) and content_hash(text) == digest
    except UnicodeEncodeError:
        return False


def scopes(c: Checker) -> None:
    """Provenance, entity links and supersession stay within one scope: a link across scopes
    would show one scope's messages or memories in another's results."""
    details = [
        f"memory {mid} cites message {msg} of another scope"
        for mid, msg in c.db.query(
            "SELECT m.id, g.id FROM provenance p JOIN memories m ON m.rowid = p.memory_rowid "
            "JOIN messages g ON g.seq = p.message_seq WHERE g.scope != m.scope"
        )
    ]
    details += [
        f"memory {mid} is linked to entity {norm!r} of another scope"
        for mid, norm in c.db.query(
            "SELECT m.id, e.norm FROM entity_links l JOIN memories m ON m.rowid = l.memory_rowid "
            "JOIN entities e ON e.rowid = l.entity_rowid WHERE e.scope != m.scope"
        )
    ]
    details += [
        f"memory {mid} is superseded by memory {by} of another scope"
        for mid, by in c.db.query(
            "SELECT m.id, n.id FROM memories m JOIN memories n ON n.id = m.superseded_by "
            "WHERE n.scope != m.scope"
        )
    ]
    c.problems("scopes", details)
