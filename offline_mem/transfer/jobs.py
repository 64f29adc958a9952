"""The extraction jobs of an export: those not done travel with the messages they name, so a
file exported while async adds are queued (or failed) does not lose the facts still to extract.

A done job is not written: its results are the memories already exported. A running job is
written as queued, since its run committed nothing. Owner, lease and retry times are not
written: they belong to the processes of the exported file. A job's request names its messages
by id; export leaves out those deleted since the add (the job's run would leave them out too),
so every message a written job names is in the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..errors import ValidationError
from ..store.db import Database
from ..timeutil import parse_datetime
from .format import JOB_COLUMNS, JOB_REQUEST_FIELDS, refusal

KINDS = ("facts", "procedural")  # the jobs table's CHECK
STATES = ("queued", "failed")  # as a job is written and imported: never running, never done
_EXPORTED = "state IN ('queued', 'running', 'failed')"


def _has_jobs(db: Database) -> bool:
    """Files of schema 6 and older have no jobs table (export reads a file without migrating
    it)."""
    found = db.query_one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'")
    return found is not None


def job_count(db: Database) -> int:
    """How many job lines `job_lines` writes."""
    if not _has_jobs(db):
        return 0
    return int(db.query_one(f"SELECT count(*) FROM jobs WHERE {_EXPORTED}")[0])


def job_lines(db: Database) -> Iterator[dict[str, Any]]:
    """The job lines, oldest first (a scope's jobs run in this order after an import too)."""
    if not _has_jobs(db):
        return
    cols = ", ".join(JOB_COLUMNS)
    for row in db.query(f"SELECT {cols} FROM jobs WHERE {_EXPORTED} ORDER BY seq"):
        item: dict[str, Any] = {"type": "job", **dict(zip(JOB_COLUMNS, row, strict=True))}
        item["request"] = _without_deleted(db, json.loads(item["request"]))
        if item["state"] == "running":
            item["state"], item["finished_at"] = "queued", None
        yield item


def _without_deleted(db: Database, request: dict[str, Any]) -> dict[str, Any]:
    named = [m["id"] for m in request["messages"]]
    if not named:
        return request
    marks = ", ".join("?" for _ in named)
    kept = {r[0] for r in db.query(f"SELECT id FROM messages WHERE id IN ({marks})", named)}
    return {**request, "messages": [m for m in request["messages"] if m["id"] in kept]}


# -- import ------------------------------------------------------------------------------------


def check_job(row: dict[str, Any], message_scopes: dict[str, str]) -> None:
    """A job line against itself and the file's messages (`message_scopes`: id -> scope). The
    messages it names that the file lacks are looked up in the target (`check_targets`)."""
    what = f"job {row['id']}"
    if row["kind"] not in KINDS:
        raise refusal(what, f"unknown kind {row['kind']!r}")
    if row["state"] not in STATES:
        raise refusal(what, f"state {row['state']!r}; a job is imported queued or failed")
    if row["attempts"] < 0:
        raise refusal(what, "attempts must be >= 0")
    request, fields = row["request"], JOB_REQUEST_FIELDS
    missing, unknown = fields.keys() - request.keys(), request.keys() - fields.keys()
    if missing or unknown:
        raise refusal(
            what, f"request with missing keys {sorted(missing)} / unknown keys {sorted(unknown)}"
        )
    for key, types in fields.items():
        if not isinstance(request[key], types):
            raise refusal(what, f"request {key!r} has the wrong type")
    try:
        parse_datetime(request["now"], what="its request's 'now'")
    except ValidationError as exc:
        raise refusal(what, str(exc)) from None
    for message in request["messages"]:
        if not (
            isinstance(message, dict)
            and set(message) == {"id", "extract"}
            and isinstance(message["id"], str)
            and isinstance(message["extract"], bool)
        ):
            raise refusal(what, "each request message must be {'id': str, 'extract': bool}")
        scope = message_scopes.get(message["id"])
        if scope is not None and scope != row["scope"]:
            raise refusal(what, f"message {message['id']!r} is of another scope")


def check_targets(db: Database, rows: list[dict[str, Any]], in_file: set[str]) -> None:
    """Inside the import's transaction, before it writes: each message a job names that the
    file lacks must be in the target file, of the job's scope."""
    for row in rows:
        for message in row["request"]["messages"]:
            if message["id"] in in_file:
                continue
            found = db.query_one("SELECT scope FROM messages WHERE id = ?", (message["id"],))
            if found is None or found[0] != row["scope"]:
                why = (
                    "is neither in the file nor in the target file"
                    if found is None
                    else "is in the target file under another scope"
                )
                raise refusal(f"job {row['id']}", f"message {message['id']!r} {why}")


def insert_jobs(db: Database, rows: list[dict[str, Any]]) -> None:
    """Call inside the import's transaction. The request is stored as `insert_job` stores it."""
    marks = ", ".join("?" for _ in JOB_COLUMNS)
    db.executemany(
        f"INSERT INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES ({marks})",
        [
            [
                json.dumps(r[c], ensure_ascii=False, sort_keys=True) if c == "request" else r[c]
                for c in JOB_COLUMNS
            ]
            for r in rows
        ],
    )
