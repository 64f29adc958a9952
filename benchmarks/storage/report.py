"""The storage benchmark's results file and table from the runs of `scale.py` and `dev_bytes.py`.

    .venv/bin/python benchmarks/storage/report.py RUNS_DIR benchmarks/results

RUNS_DIR holds `after_<scenario>.json` (plain vector rows), `before_<scenario>.json` (the vec0
layout, measured at the commit before migration 008), `rows_<scenario>.json` and
`shared_<scenario>.json` (plain rows at f222640, against one vector per raw memory and keyword
docs that list their terms: migrations 012, 013) and `dev_after.json`, where present. Runs that
RUNS_DIR lacks keep the figures already in `storage_scale.json` (among them `postgres_scale`
and `postgres_scale_full`, which benchmarks/storage/postgres_scale.py and postgres_full.py
--out write there). Writes `storage_scale.json`
(every run, its top-10 answers replaced by their comparison with the other layout's) and
`storage_scale.md`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.storage.report_full import job_rows, postgres_full_section
from benchmarks.tables import table_path

ORDER = ["users200", "scopes1k", "scopes10k", "scopes100k", "one100k", "one1m"]


def load(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def combined(runs: Path, previous: dict[str, Any]) -> dict[str, Any]:
    """Every run by name, the top-10 lists replaced by the before/after comparison; runs not in
    `runs` as in `previous`."""
    out: dict[str, Any] = dict(previous)
    for scenario in ORDER:
        # (file prefix, key) of the earlier layout's run, then of the later one's
        for (old, old_key), (new, new_key) in (
            (("before", f"{scenario}_before"), ("after", scenario)),
            (("rows", f"{scenario}_rows"), ("shared", f"{scenario}_shared")),
        ):
            before, after = load(runs, f"{old}_{scenario}"), load(runs, f"{new}_{scenario}")
            if before and after:
                after[f"identical_top10_vs_{old}"] = same_tops(before, after)
            for name, run in ((old_key, before), (new_key, after)):
                if run:
                    run.pop("tops", None)
                    out[name] = run
    dev = load(runs, "dev_after")
    if dev:
        out["dev_bytes"] = dev
    layouts = load(runs, "layouts")
    if layouts:
        out["vector_layouts"] = layouts
    alternated = load(runs, "search_ab")
    if alternated:
        out["search_alternated"] = alternated
    for name in ("one_scope_100k_before", "one_scope_100k"):  # benchmarks/retrieval/scale.py
        found = load(runs, name)
        if found:
            scenario = found["scenarios"]["100k"]
            out[name] = {k: found[k] for k in ("command", "load_average")} | {
                "search": scenario["latency"],
                "search_without_cache": scenario["latency_without_vector_cache"],
            }
    return out


def kb(value: float) -> str:
    return f"{value / 1024:,.1f} KB"


def mb(value: float) -> str:
    return f"{value / 2**20:,.1f} MB"


def same_tops(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Queries whose top 10 is the same memories in the same order, scores within 1e-5."""
    if len(a["tops"]) != len(b["tops"]):
        return "n/a"
    same = sum(
        [t for t, _ in x] == [t for t, _ in y]
        and all(abs(p - q) <= 1e-5 for (_, p), (_, q) in zip(x, y, strict=True))
        for x, y in zip(a["tops"], b["tops"], strict=True)
    )
    return f"{same}/{len(a['tops'])}"


def row(label: str, r: dict[str, Any]) -> str:
    compact = r.get("delete_half_compact")
    after = "" if compact is None else f"{compact['ratio_after_compact']:.2f}x"
    return (
        f"| {label} | {r['scopes']:,} x {r['memories_per_scope']:,} | {mb(r['file_bytes'])} | "
        f"{kb(r['bytes_per_memory'])} | {kb(r['bytes_per_scope'])} | "
        f"{r['search_ms_p50']:.2f} / {r['search_ms_p95']:.2f} | "
        f"{r['first_add_ms_p50']:.1f} / {r['later_add_ms_p50']:.1f} "
        f"({r['first_over_later']:.2f}x) | {after} |"
    )


def shared_section(results: dict[str, Any]) -> list[str]:
    """Plain rows (f222640) against one vector per raw memory and lean keyword docs (012, 013)."""
    lines = []
    for scenario in ORDER:
        rows, shared = results.get(f"{scenario}_rows"), results.get(f"{scenario}_shared")
        if not (rows and shared):
            continue
        lines += [
            row(f"{scenario} two vectors ({rows['machine']['commit']})", rows),
            row(f"{scenario} one vector ({shared['machine']['commit']})", shared),
        ]
        lines.append(
            f"\n{scenario}: {shared['bytes_per_memory']:,.0f} against "
            f"{rows['bytes_per_memory']:,.0f} bytes a raw memory "
            f"({shared['bytes_per_memory'] / rows['bytes_per_memory']:.3f}x), search p50 "
            f"{shared['search_ms_p50'] / rows['search_ms_p50']:.2f}x (CPU time "
            f"{shared['search_cpu_ms_p50'] / rows['search_cpu_ms_p50']:.2f}x), identical top 10 "
            f"for {shared['identical_top10_vs_rows']} queries."
        )
    if not lines:
        return []
    head = [
        "",
        "One vector per raw memory (migration 012: a raw memory's message links to the memory's",
        "vector) and keyword docs that list their terms instead of an index of postings by row",
        "(013), against the plain rows before them; same scenario, one run after the other:",
        "",
        "| run | scopes x memories | file | per memory | per scope | search ms p50 / p95 "
        "| add ms first / later | delete half + compact |",
        "|---|---|---|---|---|---|---|---|",
    ]
    return head + lines


def postgres_section(results: dict[str, Any]) -> list[str]:
    """The PostgreSQL store against the file, one run (benchmarks/storage/postgres_scale.py)."""
    run = results.get("postgres_scale")
    if not run:
        return []
    lite, exact, hnsw = run["sqlite"], run["postgresql"]["exact"], run["postgresql"]["hnsw"]
    server = run["server"]
    lines = [
        "",
        f"PostgreSQL {server['postgresql']} + pgvector {server['pgvector']} (fsync "
        f"{server['fsync']}) against the file, both built by the same raw adds, "
        f"{run['scopes']:,} scopes x {run['memories_per_scope']} = {run['memories']:,} memories "
        f"(`{run['command']}`; {run['embedder']}; search within a scope, warm, "
        f"{run['queries']} queries):",
        "",
        "| store | memories/s (raw adds) | bytes per memory | search ms p50 / p95 | same top 10 |",
        "|---|---|---|---|---|",
        f"| SQLite file | {lite['memories_per_s']:.0f} | {lite['bytes_per_memory']:,.0f} | "
        f"{lite['search_ms_p50']:.1f} / {lite['search_ms_p95']:.1f} | |",
        f"| PostgreSQL exact | {exact['memories_per_s']:.0f} | {exact['bytes_per_memory']:,.0f} | "
        f"{exact['search_ms_p50']:.1f} / {exact['search_ms_p95']:.1f} | "
        f"{exact['identical_top10_vs_sqlite']}/{run['queries']} as the file |",
        f"| PostgreSQL HNSW | | {hnsw['bytes_per_memory']:,.0f} | {hnsw['search_ms_p50']:.1f} / "
        f"{hnsw['search_ms_p95']:.1f} | {hnsw['identical_top10_vs_exact']}/{run['queries']} as "
        "exact |",
        "",
        f"HNSW: both indexes (memories' and messages' vectors) built in "
        f"{hnsw['index_build_s']:.0f} s; recall@10 of the vector candidates against exact "
        f"{hnsw['recall_at_10']:.3f} (the final top 10 is re-scored from every signal, hence "
        "the same as exact); EXPLAIN of a scope's query on user_id and state alone "
        + ("used the HNSW index" if hnsw["plan_uses_hnsw"] else "did not use the HNSW index")
        + (", but the search's own query (with the visibility conditions) must have gone "
           "through it (only an index scan misses rows): "
           "slower, and it missed most of the scope's rows"
           if hnsw["recall_at_10"] < 0.95 else "")
        + ". Bytes: the file after a checkpoint; the database's tables with their indexes "
        "and TOAST.",
    ]  # fmt: skip
    if run.get("jobs"):
        lines += [
            "",
            "Extraction jobs (async adds, an instant stand-in extractor: the queue's and the "
            "store's cost), drained by worker processes on one store:",
            "",
            "| store | workers | jobs | jobs/s | per worker | duplicates |",
            "|---|---|---|---|---|---|",
        ]
        lines += job_rows(run["jobs"])
    ratios = run.get("ratios")
    if ratios:
        lines += [
            "",
            "PostgreSQL / file, same run: search p50 "
            f"{ratios['search_p50_pg_exact_over_sqlite']:.2f}x exact, "
            f"{ratios['search_p50_pg_hnsw_over_sqlite']:.2f}x HNSW (p95 "
            f"{ratios['search_p95_pg_exact_over_sqlite']:.2f}x, "
            f"{ratios['search_p95_pg_hnsw_over_sqlite']:.2f}x); raw-add throughput "
            f"{ratios['add_throughput_pg_over_sqlite']:.2f}x; bytes per memory "
            f"{ratios['bytes_per_memory_pg_over_sqlite']:.2f}x; jobs with 2 workers "
            f"{ratios['jobs_pg_over_sqlite_2_workers']:.2f}x (2 workers over 1 on PostgreSQL: "
            f"{ratios['jobs_2_over_1_workers_pg']:.2f}x). Load average at the end "
            f"{run['load_average'][0]} on {run['machine']['cores']} cores.",
        ]
    return lines


def scope_costs_section(results: dict[str, Any]) -> list[str]:
    """One call in a 10-memory scope as the file grows, each commit's code (scope_costs.py)."""
    costs = results.get("scope_costs")
    if not costs:
        return []
    calls = ("search", "add_raw", "update", "delete", "delete_all_scope")
    lines = [
        "",
        "One call in a 10-memory scope as the file grows, CPU ms p50, each commit's code on a",
        f"copy of the same file (`{costs['command']}`):",
        "",
        "| memories | code | " + " | ".join(calls) + " |",
        "|---|---|" + "---|" * len(calls),
    ]
    for run in costs["runs"]:
        lines.append(f"| {10 * run['scopes']:,} | {run['code']} | "
                     + " | ".join(f"{run[c]:,}" for c in calls) + " |")  # fmt: skip
    return lines


def main() -> None:
    runs, out = Path(sys.argv[1]), Path(sys.argv[2])
    committed = out / "storage_scale.json"
    results = combined(runs, json.loads(committed.read_text()) if committed.exists() else {})
    (out / "storage_scale.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [
        "# Storage at scale",
        "",
        "Raw memories (`add(..., infer=False)`, one message each) through the public API; made by",
        "`benchmarks/storage/scale.py SCENARIO` (see its docstring for the stand-in models) and",
        '`benchmarks/storage/report.py`. "before": the vec0 layout (commit 04b01f5), "after":',
        "plain vector rows (migration 008). Search: `Memory.search` within one scope, top 10,",
        "warm, p50 / p95 over 200 queries. Adds: a new scope's first add / its later adds, p50",
        "over 200 new scopes. Compact: file size after `delete_all` of half the scopes, compacted.",
        "",
        "| run | scopes x memories | file | per memory | per scope | search ms p50 / p95 "
        "| add ms first / later | delete half + compact |",
        "|---|---|---|---|---|---|---|---|",
    ]
    comparisons = []
    for scenario in ORDER:
        before, after = results.get(f"{scenario}_before"), results.get(scenario)
        if before:
            lines.append(row(f"{scenario} before", before))
        if after:
            lines.append(row(f"{scenario} after", after))
        if before and after:
            comparisons.append(
                f"- {scenario}: file {after['file_bytes'] / before['file_bytes']:.4f}x, search "
                f"p50 after/before {after['search_ms_p50'] / before['search_ms_p50']:.2f}x, "
                f"identical top 10 for {after['identical_top10_vs_before']} queries"
            )
    if comparisons:
        lines += [
            "",
            "Side by side (same machine, one run after the other, under the load of other work:",
            "the wall-clock ratios below are mostly that load; see the alternated runs):",
            "",
            *comparisons,
        ]
    lines += shared_section(results)
    lines += scope_costs_section(results)
    alternated = results.get("search_alternated")
    if alternated:
        pairs = alternated["runs"]
        before = [r for r in pairs if r["layout"] == "before"]
        after = [r for r in pairs if r["layout"] == "after"]
        mean = lambda rs, k: sum(r[k] for r in rs) / len(rs)  # noqa: E731
        lines += [
            "",
            f"Search alternated before/after on the same machine ({len(before)} runs each, "
            f"{alternated['what'].split(';')[0]}): wall p50 {mean(after, 'search_ms_p50'):.1f} "
            f"against {mean(before, 'search_ms_p50'):.1f} ms "
            f"({mean(after, 'search_ms_p50') / mean(before, 'search_ms_p50'):.2f}x), CPU time p50 "
            f"{mean(after, 'search_cpu_ms_p50'):.1f} against "
            f"{mean(before, 'search_cpu_ms_p50'):.1f} ms "
            f"({mean(after, 'search_cpu_ms_p50') / mean(before, 'search_cpu_ms_p50'):.2f}x).",
        ]
    old, new = results.get("one_scope_100k_before"), results.get("one_scope_100k")
    if old and new:
        o, n = old["search"], new["search"]
        ou, nu = old["search_without_cache"], new["search_without_cache"]
        lines += [
            "",
            "One scope of 100,000 memories (`benchmarks/retrieval/scale.py --scenarios 100k`,",
            "facts only, both layouts built and searched side by side, load average ~10): p50 "
            f"{n['search_ms']['p50']:.0f} ms after against {o['search_ms']['p50']:.0f} ms before "
            f"({n['search_ms']['p50'] / o['search_ms']['p50']:.2f}x) with the vector cache; "
            f"without it {nu['search_ms']['p50']:.0f} against {ou['search_ms']['p50']:.0f} ms "
            f"({nu['search_ms']['p50'] / ou['search_ms']['p50']:.2f}x).",
        ]
    layouts = results.get("vector_layouts")
    if layouts:
        lines += [
            "",
            f"Vector layouts alone (`benchmarks/storage/vector_layouts.py`, {layouts['scopes']:,} "
            f"scopes x {layouts['per_scope']} vectors, exact top 10 within a scope):",
            "",
            "| layout | bytes per vector | KNN ms p50 / p95 | same top 10 as plain rows |",
            "|---|---|---|---|",
        ]
        for name, r in layouts["layouts"].items():
            lines.append(
                f"| {name} | {r['bytes_per_vector']:,.0f} | {r['knn_ms_p50']:.2f} / "
                f"{r['knn_ms_p95']:.2f} | {r['same_top10_as_plain_rows']} |"
            )
    for dev in (results.get("dev_bytes"), results.get("dev_bytes_dev8")):
        if not dev:
            continue
        lines += [
            "",
            f"Real dialogue with inference ({', '.join(dev['samples'])}, first "
            f"{dev['max_sessions']} sessions, `benchmarks/storage/dev_bytes.py`): "
            f"{dev['turns']} turns, {dev['memories']} memories, {mb(dev['file_bytes'])}: "
            f"{kb(dev['bytes_per_turn'])} per stored turn"
            + (
                f"; {kb(dev['bytes_per_turn_above_empty'])} a turn above a new file's "
                f"{mb(dev['empty_file_bytes'])} (one page per table and index)."
                if "empty_file_bytes" in dev
                else "."
            ),
        ]
    lines += postgres_section(results)
    lines += postgres_full_section(results)
    machine = next((r["machine"] for r in results.values() if "machine" in r), None)
    if machine:
        lines += ["", f"Machine: {machine['cores']} cores ({machine['cpu']}), loaded by other work "
                  "during these runs (latencies are noisy; compare within a pair)."]  # fmt: skip
    table_path(out, "storage_scale.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
