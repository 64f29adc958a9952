"""What `offline-mem stats` reports of a PostgreSQL database: the memory file's figures
(cli/admin.py `collect_stats`) read in one snapshot, with the tables' size in place of the
file's pages."""

from __future__ import annotations

from typing import Any

from ...timeutil import utc_now
from .connection import PgDatabase
from .reads import visibility
from .store import COMPACTED_TABLES


def database_stats(db: PgDatabase) -> dict[str, Any]:
    """meta, per-scope and per-extractor counts, row counts, jobs and the tables' bytes."""
    unexpired, params = visibility(now=utc_now(), include_expired=False, include_superseded=True)
    with db.snapshot():
        meta = dict(db.query("SELECT key, value FROM meta"))
        scopes = [
            {"user_id": u, "agent_id": a, "run_id": r, "state": s, "memories": int(n),
             "expired": int(e)}
            for u, a, r, s, n, e in db.query(
                "SELECT m.user_id, m.agent_id, m.run_id, m.state, count(*), "
                f"count(*) FILTER (WHERE NOT {unexpired}) FROM memories m "
                "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
                params,
            )
        ]  # fmt: skip
        extractors = [
            (sha, prompt, int(n))
            for sha, prompt, n in db.query(
                "SELECT extractor_sha256, prompt_version, count(*) FROM memories "
                "GROUP BY 1, 2 ORDER BY 3 DESC"
            )
        ]
        counts = {
            table: int(db.query_one(f"SELECT count(*) FROM {table}")[0])
            for table in ("memories", "messages", "history", "entities")
        }
        jobs: dict[str, Any] = {"queued": 0, "running": 0, "done": 0, "failed": 0}
        jobs.update({s: int(n) for s, n in db.query("SELECT state, count(*) FROM jobs GROUP BY 1")})
        jobs["failures"] = [
            {"event_id": i, "user_id": u, "agent_id": a, "run_id": r, "attempts": n, "error": e,
             "finished_at": f}
            for i, u, a, r, n, e, f in db.query(
                "SELECT id, user_id, agent_id, run_id, attempts, error, finished_at FROM jobs "
                "WHERE state = 'failed' ORDER BY seq"
            )
        ]  # fmt: skip
        size = db.query_one(
            "SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest(%s::text[]) AS t",
            (list(COMPACTED_TABLES),),
        )[0]
    return {"meta": meta, "scopes": scopes, "extractors": extractors, "counts": counts,
            "jobs": jobs, "table_bytes": int(size or 0)}  # fmt: skip
