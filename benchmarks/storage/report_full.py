"""The full-scale PostgreSQL run's table (benchmarks/storage/postgres_full.py), for report.py."""

from __future__ import annotations

from typing import Any


def postgres_full_section(results: dict[str, Any]) -> list[str]:
    run = results.get("postgres_scale_full")
    if not run:
        return []
    lite, exact, hnsw = run["sqlite"], run["postgresql"]["exact"], run["postgresql"]["hnsw"]
    built, server = run["import"], run["server"]
    small = results.get("postgres_scale", {})
    queries = run["queries"]

    def adds(store: str, figures: dict[str, Any]) -> str:
        here = f"{figures['raw_adds']['memories_per_s']:.0f}"
        before = small.get("sqlite" if store == "sqlite" else "postgresql", {})
        before = before if store == "sqlite" else before.get("exact", {})
        return f"{here} ({before['memories_per_s']:.0f})" if before else here

    def imported(store: str) -> str:
        r = built[store]
        return f"{r['memories_per_s']:.0f} ({r['write_memories_per_s']:.0f})"

    lines = [
        "",
        f"Full scale: {run['scopes']:,} scopes x {run['memories_per_scope']} = "
        f"{run['memories']:,} memories, PostgreSQL {server['postgresql']} + pgvector "
        f"{server['pgvector']} (fsync {server['fsync']}, maintenance_work_mem "
        f"{server['maintenance_work_mem']}) against the file (`{run['command']}`; "
        f"{run['embedder']}). Both stores built through `import` of generated export files, "
        f"{built['chunk_scopes']:,} scopes a file, each file read once and imported into both; "
        "the self-check (100 scopes built by adds and by import, each store) found the same "
        "export, rows and searches. Search within a scope, warm, "
        f"{queries} queries:",
        "",
        "| store | import memories/s (write alone) | raw adds memories/s (0.1-scale build) "
        "| bytes per memory | search ms p50 / p95 | same top 10 |",
        "|---|---|---|---|---|---|",
        f"| SQLite file | {imported('sqlite')} | {adds('sqlite', lite)} | "
        f"{lite['bytes_per_memory']:,.0f} | {lite['search_ms_p50']:.1f} / "
        f"{lite['search_ms_p95']:.1f} | |",
        f"| PostgreSQL exact | {imported('postgresql')} | {adds('postgresql', exact)} | "
        f"{exact['bytes_per_memory']:,.0f} | {exact['search_ms_p50']:.1f} / "
        f"{exact['search_ms_p95']:.1f} | {exact['identical_top10_vs_sqlite']}/{queries} as "
        "the file |",
    ]  # fmt: skip
    if hnsw["built"]:
        # measured after the raw adds and the jobs' facts: per memory of the store then
        held = (
            run["memories"]
            + exact["raw_adds"]["adds"] * run["memories_per_scope"]
            + sum(r["facts"] for r in run["jobs"]["postgresql"].values())
        )
        vectors = 2 * held  # a memory's and its message's
        before = small.get("postgresql", {}).get("hnsw")
        small_hnsw = (
            f"{before['index_build_s']:.0f} s for {2 * small['memories']:,} vectors"
            if before
            else ""
        )
        lines += [
            f"| PostgreSQL HNSW | | | {hnsw['table_bytes'] / held:,.0f} | "
            f"{hnsw['search_ms_p50']:.1f} / {hnsw['search_ms_p95']:.1f} | "
            f"{hnsw['identical_top10_vs_exact']}/{queries} as exact |",
            "",
            f"HNSW: both indexes ({vectors:,} vectors) built in {hnsw['index_build_s']:,} s, "
            f"{vectors / hnsw['index_build_s']:,.0f} vectors/s (pgvector's parallel build, "
            f"maintenance_work_mem {server['maintenance_work_mem']}"
            + (f"; at 0.1 scale, with the default 64MB: {small_hnsw}" if small_hnsw else "")
            + f"); recall@10 of the vector candidates against exact {hnsw['recall_at_10']:.3f}."
            + (" The run's 1,800 s time box was lifted during the build (the run's `note`)."
               if "note" in run else ""),
        ]  # fmt: skip
    else:
        total = sum(hnsw["vectors"].values())
        lines += [
            "",
            f"HNSW: not built at this scale. The build (both indexes, {total:,} vectors) was "
            f"cancelled after {hnsw['ran_s']:,} s ({hnsw['cancelled']}, budget "
            f"{hnsw['budget_s']:,.0f} s) with {hnsw['vectors_done']:,} vectors in the graph: "
            f"{hnsw['vectors_per_s']:.0f} vectors/s, {hnsw['projected_build_s'] / 60:.0f} min "
            "for the whole at that rate (a lower bound: each insertion searches a larger "
            "graph).",
        ]  # fmt: skip
    lines[-1] += (
        f" A scope of {run['memories_per_scope']} memories is ranked exactly even with the HNSW "
        "option (a filter that selects at most 2,000 rows never goes through the index), so "
        "HNSW changes no search here. Import: `read_export` + `import_data` per store (write "
        f"alone: `import_data`). Raw adds: {lite['raw_adds']['adds']} adds of "
        f"{run['memories_per_scope']} messages, each into a new scope of the full store. "
        "Bytes: the file after a checkpoint; the database's tables with their indexes and "
        "TOAST, after VACUUM."
    )
    lines += [
        "",
        "Extraction jobs on the full stores themselves (async adds to 50 new scopes, an "
        "instant stand-in extractor), drained by worker processes:",
        "",
        "| store | workers | jobs | jobs/s | per worker | duplicates |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    lines += job_rows(run["jobs"])
    lines += [
        "",
        f"Load average {run['load_average_before'][0]} before, "
        f"{run['load_average_after'][0]} after, on {run['machine']['cores']} cores shared with "
        f"other work; commit {run['machine']['commit']}; {run['wall_s'] / 60:.0f} min in all.",
    ]
    return lines


def job_rows(jobs: dict[str, Any]) -> list[str]:
    """The rows of a jobs table (store, workers, jobs, jobs/s, per worker, duplicates), shared
    by the 0.1-scale and the full-scale reports."""
    rows = []
    for store, label in (("sqlite", "SQLite file"), ("postgresql", "PostgreSQL")):
        for workers, r in sorted(jobs[store].items()):
            rows.append(
                f"| {label} | {workers} | {r['jobs']} | {r['jobs_per_s']:.1f} | "
                f"{' + '.join(map(str, r['extracted_per_worker']))} | "
                f"{r['duplicate_extractions'] + r['facts_added_twice']} |"
            )
    return rows
