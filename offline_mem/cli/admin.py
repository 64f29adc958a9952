"""`offline-mem stats | flush | export | import | verify | backup | compact`: the memory file as a
whole."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..errors import ModelError, OfflineMemError
from ..store.integrity import VerifyReport, verify_file
from ..timeutil import unexpired_clause, utc_now
from ..transfer.export import backup_file, export_file, file_header, open_existing
from ..transfer.importer import import_data
from ..transfer.reader import read_export
from ..values import EmbedderIdentity
from .common import (
    CliState,
    configured_embedder,
    db_path,
    echo_json,
    human_size,
    open_memory,
    pass_state,
    require_file,
    shown_db,
    store_url,
)

EXIT_PROBLEMS = 1


def _progress(length: int, label: str) -> Any:
    """A progress bar on stderr (stdout may be the export itself, or JSON)."""
    return click.progressbar(length=length, label=label, file=sys.stderr)


_PLURALS = {
    "message": "messages",
    "entity": "entities",
    "memory": "memories",
    "history": "history rows",
    "job": "jobs",
}


def _summary(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind if n == 1 else _PLURALS[kind]}" for kind, n in counts.items())


def _file_size(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.isfile(p))


def _model_names() -> dict[str, str]:
    """sha256 -> model name, from the manifest (empty when there is none)."""
    try:
        from ..pinned.manifest import load_manifest

        return {spec.primary_file.sha256: spec.name for spec in load_manifest(None)}
    except (OfflineMemError, OSError):
        return {}


def collect_database_stats(url: str) -> dict[str, Any]:
    """`collect_stats` of a PostgreSQL database: the same keys; `path` is the URL without its
    password, `file_size` the bytes of offline_mem's tables, `space` those bytes as used."""
    from ..config import redacted_url
    from ..store.postgres.stats import database_stats
    from ..transfer.postgres import open_database

    db = open_database(url)
    try:
        found = database_stats(db)
    finally:
        db.close()
    meta, names = found["meta"], _model_names()
    return {
        "path": redacted_url(url),
        "file_size": found["table_bytes"],
        "schema_version": meta.get("schema_version"),
        "embedder": {
            "name": meta.get("embedder_name"),
            "sha256": meta.get("embedder_sha256"),
            "dimension": meta.get("embedder_dimension"),
        },
        "extractors": [
            {
                "name": None if sha is None else names.get(sha, "unknown"),
                "sha256": sha,
                "prompt_version": prompt,
                "memories": n,
            }
            for sha, prompt, n in found["extractors"]
        ],
        "counts": found["counts"],
        "space": {"used_bytes": found["table_bytes"], "free_bytes": 0, "wal_bytes": 0},
        "scopes": found["scopes"],
        "jobs": found["jobs"],
    }


def collect_stats(path: str) -> dict[str, Any]:
    db = open_existing(path)
    try:
        unexpired, unexpired_params = unexpired_clause("expiration_date", utc_now())
        with db.snapshot():
            meta = dict(db.query("SELECT key, value FROM meta"))
            scopes = [
                {"user_id": u, "agent_id": a, "run_id": r, "state": s, "memories": n, "expired": e}
                for u, a, r, s, n, e in db.query(
                    "SELECT user_id, agent_id, run_id, state, count(*), "
                    f"sum(NOT {unexpired}) FROM memories "
                    "GROUP BY user_id, agent_id, run_id, state ORDER BY 1, 2, 3, 4",
                    unexpired_params,
                )
            ]
            extractors = db.query(
                "SELECT extractor_sha256, prompt_version, count(*) FROM memories "
                "GROUP BY 1, 2 ORDER BY 3 DESC"
            )
            counts = {
                t: db.query_one(f"SELECT count(*) FROM {t}")[0]
                for t in ("memories", "messages", "history", "entities")
            }
            jobs = _job_stats(db)
        usage = db.usage()
    finally:
        db.close()
    names = _model_names()
    return {
        "path": path,
        "file_size": _file_size(path),
        "schema_version": meta.get("schema_version"),
        "embedder": {
            "name": meta.get("embedder_name"),
            "sha256": meta.get("embedder_sha256"),
            "dimension": meta.get("embedder_dimension"),
        },
        "extractors": [
            {
                "name": None if sha is None else names.get(sha, "unknown"),
                "sha256": sha,
                "prompt_version": prompt,
                "memories": n,
            }
            for sha, prompt, n in extractors
        ],
        "counts": counts,
        "space": usage,
        "scopes": scopes,
        "jobs": jobs,
    }


def _job_stats(db: Any) -> dict[str, Any]:
    """The extraction queue: jobs per state, and the failed ones with their last error (a file
    from before the queue existed has none)."""
    if db.query_one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'") is None:
        return {"queued": 0, "running": 0, "done": 0, "failed": 0, "failures": []}
    counts = {"queued": 0, "running": 0, "done": 0, "failed": 0}
    counts.update(dict(db.query("SELECT state, count(*) FROM jobs GROUP BY state")))
    failures = [
        {"event_id": i, "user_id": u, "agent_id": a, "run_id": r, "attempts": n, "error": e,
         "finished_at": f}
        for i, u, a, r, n, e, f in db.query(
            "SELECT id, user_id, agent_id, run_id, attempts, error, finished_at FROM jobs "
            "WHERE state = 'failed' ORDER BY seq"
        )
    ]  # fmt: skip
    return {**counts, "failures": failures}


@click.command("stats")
@pass_state
def stats(state: CliState) -> None:
    """Memories per scope and state, file size, and the models in use."""
    url = store_url(state)
    result = collect_stats(db_path(state)) if url is None else collect_database_stats(url)
    if state.json:
        echo_json(result)
        return
    e, space = result["embedder"], result["space"]
    if url is None:
        click.echo(
            f"file: {result['path']} ({human_size(result['file_size'])}, "
            f"schema {result['schema_version']})"
        )
        click.echo(
            f"space: {human_size(space['used_bytes'])} used, {human_size(space['free_bytes'])} "
            f"free (offline-mem compact gives it back), WAL {human_size(space['wal_bytes'])}"
        )
    else:
        click.echo(
            f"database: {result['path']} ({human_size(result['file_size'])} of tables, "
            f"schema {result['schema_version']})"
        )
    click.echo(f"embedder: {e['name']} ({e['dimension']} dims, sha256 {e['sha256']})")
    for x in result["extractors"]:
        who = (
            "no extractor (stored as given)"
            if x["sha256"] is None
            else (
                f"extractor {x['name']} (sha256 {x['sha256'][:12]}, prompt {x['prompt_version']})"
            )
        )
        click.echo(f"{who}: {x['memories']} memories")
    c = result["counts"]
    click.echo(
        f"memories: {c['memories']}  messages: {c['messages']}  history: {c['history']}  "
        f"entities: {c['entities']}"
    )
    for row in result["scopes"]:
        scope = " ".join(
            f"{k.split('_')[0]}={row[k]}"
            for k in ("user_id", "agent_id", "run_id")
            if row[k] is not None
        )
        expired = f" ({row['expired']} expired)" if row["expired"] else ""
        click.echo(f"  {scope:<40} {row['state']:<11} {row['memories']}{expired}")
    j = result["jobs"]
    click.echo(
        f"extraction jobs: {j['queued']} queued, {j['running']} running, {j['done']} done, "
        f"{j['failed']} failed"
    )
    for failure in j["failures"]:
        click.echo(
            f"  failed {failure['event_id']} after {failure['attempts']} runs: {failure['error']}"
        )


@click.command("flush")
@click.option(
    "--timeout", type=float, metavar="S", help="Give up after S seconds (the jobs stay queued)."
)
@pass_state
def flush(state: CliState, timeout: float | None) -> None:
    """Run the queued extraction jobs of async adds (`add --async`) until none is left."""
    with open_memory(state) as memory:
        before = memory.pending()
        failed_before = len(memory.failed_jobs())
        memory.flush(timeout=timeout)
        failed = len(memory.failed_jobs()) - failed_before
    if state.json:
        echo_json({"ran": before, "failed": failed, "pending": 0})
    elif before == 0:
        click.echo("no extraction jobs pending")
    else:
        note = f"; {failed} failed (see offline-mem stats)" if failed else ""
        click.echo(f"ran {before} extraction job{'s' if before != 1 else ''}{note}")


@click.command("export")
@click.argument("dest", type=click.Path(dir_okay=False, path_type=Path), default="-")
@click.option(
    "--vectors", is_flag=True, help="Include each memory's vector (skips re-embedding on import)."
)
@pass_state
def export(state: CliState, dest: Path, vectors: bool) -> None:
    """Write every memory, message, entity and history row, and the extraction jobs not done
    yet, as JSONL to DEST (default stdout)."""
    url = store_url(state)
    if url is not None:  # a PostgreSQL database: the same lines (transfer/postgres.py)
        from ..transfer import postgres

        pg = postgres.open_database(url)
        try:
            total = postgres.export_total(pg, vectors=vectors)
            written = _export_to(dest, total, lambda out, done: postgres.export_file(
                pg, out, vectors=vectors, progress=done))  # fmt: skip
        finally:
            pg.close()
    else:
        db = open_existing(db_path(state))
        try:
            total = sum(file_header(db, vectors=vectors)["counts"].values())
            written = _export_to(dest, total, lambda out, done: export_file(
                db, out, vectors=vectors, progress=done))  # fmt: skip
        finally:
            db.close()
    if str(dest) != "-":
        summary = _summary(written)
        if state.json:
            echo_json({"exported": written, "path": str(dest)})
        else:
            click.echo(f"exported {summary} to {dest}")


def _export_to(
    dest: Path, total: int, write: Callable[[Any, Callable[[int], None] | None], dict[str, int]]
) -> dict[str, int]:
    """Write an export to stdout ("-") or, through a partial file renamed at the end, to
    `dest`, with a progress bar."""
    if str(dest) == "-":
        return write(sys.stdout, None)
    tmp = dest.with_name(dest.name + ".partial")
    with _progress(total, "exporting") as bar, tmp.open("w", encoding="utf-8") as out:
        written = write(out, bar.update)
    tmp.replace(dest)
    return written


@click.command("import")
@click.argument("source", type=click.File("r", encoding="utf-8"))
@pass_state
def import_(state: CliState, source: Any) -> None:
    """Load an export (SOURCE, or - for stdin) into the memory file, in one transaction.
    Re-embeds the texts when the export has no vectors or another embedder made them; refuses a
    file it cannot trust, or ids the memory file already holds."""
    data = read_export(source)
    with open_memory(state) as memory, _progress(data.count("memory"), "importing") as bar:
        report = import_data(memory, data, progress=bar.update)
    if state.json:
        echo_json(report.to_dict())
        return
    counts = _summary(report.counts)
    how = f"re-embedded with {report.embedder}" if report.reembedded else "vectors from the file"
    click.echo(f"imported {counts} ({how})")


@click.command("verify")
@pass_state
def verify(state: CliState) -> None:
    """Check the store: a vector and keyword row for every memory, consistent keyword
    statistics, texts, scopes, the pinned embedder; and SQLite's integrity on a file. Exit 1
    when anything is wrong."""
    try:
        embedder, unavailable = configured_embedder(), None
    except ModelError as exc:
        embedder, unavailable = None, str(exc)
    report = _verify_store(state, embedder, unavailable)
    if state.json:
        echo_json(report.to_dict())
    else:
        for name in report.checks:
            found = report.problems_of(name)
            click.echo(f"{'ok' if not found else 'FAILED':<7} {name}")
            for problem in found:
                click.echo(f"        {problem.detail}")
        for name, why in report.skipped.items():
            click.echo(f"skipped {name}: {why}")
    if not report.ok:
        click.echo(f"error: {shown_db(state)}: {len(report.problems)} problem(s) found", err=True)
        sys.exit(EXIT_PROBLEMS)


def _verify_store(
    state: CliState, embedder: EmbedderIdentity | None, unavailable: str | None
) -> VerifyReport:
    """`verify_file` of the memory file, or `verify_database` of the PostgreSQL database."""
    url = store_url(state)
    db: Any
    run: Callable[..., VerifyReport]
    if url is None:
        from ..store.integrity import CHECKS

        db, checks, run = open_existing(db_path(state), check=False), CHECKS, verify_file
    else:
        from ..store.postgres.integrity import CHECKS as DATABASE_CHECKS
        from ..store.postgres.integrity import verify_database
        from ..transfer.postgres import open_database

        db, checks, run = open_database(url), DATABASE_CHECKS, verify_database
    try:
        with _progress(len(checks), "verifying") as bar:
            return run(db, embedder=embedder, embedder_unavailable=unavailable,
                       progress=lambda _name: bar.update(1))  # fmt: skip
    finally:
        db.close()


@click.command("backup")
@click.argument("dest", type=click.Path(dir_okay=False, path_type=Path))
@pass_state
def backup(state: CliState, dest: Path) -> None:
    """A consistent copy of the memory file at DEST (SQLite's VACUUM INTO), safe while other
    processes are writing."""
    db = open_existing(require_file(state, "backup"))
    try:
        backup_file(db, str(dest))
    finally:
        db.close()
    if state.json:
        echo_json({"backup": str(dest), "size": dest.stat().st_size})
    else:
        click.echo(f"backed up to {dest} ({human_size(dest.stat().st_size)})")


@click.command("compact")
@pass_state
def compact(state: CliState) -> None:
    """Give free pages back to the file system and leave no deleted text in the file or its WAL
    (SQLite's VACUUM: safe to interrupt). Other processes may keep reading meanwhile."""
    db = open_existing(require_file(state, "compact"))
    try:
        result = db.compact()
    finally:
        db.close()
    if state.json:
        echo_json(result)
    else:
        click.echo(
            f"compacted {db_path(state)}: {human_size(result['bytes_before'])} -> "
            f"{human_size(result['bytes_after'])}"
        )


COMMANDS = [stats, flush, export, import_, verify, backup, compact]


def register(group: click.Group) -> None:
    for command in COMMANDS:
        group.add_command(command)
