"""The storage benchmark's table from the JSON files of `scale.py` and `dev_bytes.py`.

    .venv/bin/python benchmarks/storage/report.py RESULTS_DIR > RESULTS_DIR/storage_scale.md

Reads `storage_<scenario>.json` (this layout) and `storage_<scenario>_before.json` (the vec0
layout, measured at the commit before migration 008) where present, and compares each pair's
top-10 answers for identical results.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ORDER = ["users200", "scopes1k", "scopes10k", "scopes100k", "one100k", "one1m"]


def load(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def kb(value: float) -> str:
    return f"{value / 1024:,.1f} KB"


def mb(value: float) -> str:
    return f"{value / 2**20:,.1f} MB"


def same_tops(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Identical top 10 (texts and scores to 1e-6) for every query of both runs."""
    if len(a["tops"]) != len(b["tops"]):
        return "n/a"
    same = sum(x == y for x, y in zip(a["tops"], b["tops"], strict=True))
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


def main() -> None:
    folder = Path(sys.argv[1])
    lines = [
        "# Storage at scale",
        "",
        "Raw memories (`add(..., infer=False)`, one message each) through the public API; made by",
        "`benchmarks/storage/scale.py SCENARIO` (see its docstring for the stand-in models).",
        '"before": the vec0 layout (commit 04b01f5), "after": plain vector rows (migration 008).',
        "Search: `Memory.search` within one scope, top 10, warm, p50 / p95 over 200 queries.",
        "Adds: a new scope's first add / its later adds, p50 over 200 new scopes.",
        "Compact: file size after `delete_all` of half the scopes and `compact`, against before.",
        "",
        "| run | scopes x memories | file | per memory | per scope | search ms p50 / p95 "
        "| add ms first / later | delete half + compact |",
        "|---|---|---|---|---|---|---|---|",
    ]
    comparisons = []
    for scenario in ORDER:
        before = load(folder, f"storage_{scenario}_before")
        after = load(folder, f"storage_{scenario}")
        if before:
            lines.append(row(f"{scenario} before", before))
        if after:
            lines.append(row(f"{scenario} after", after))
        if before and after:
            comparisons.append(
                f"- {scenario}: search p50 after/before "
                f"{after['search_ms_p50'] / before['search_ms_p50']:.2f}x, file "
                f"{after['file_bytes'] / before['file_bytes']:.4f}x, identical top 10 for "
                f"{same_tops(before, after)} queries"
            )
    if comparisons:
        lines += ["", "Side by side (same machine, run one after the other):", "", *comparisons]
    dev = load(folder, "storage_dev_bytes")
    if dev:
        lines += [
            "",
            f"Real dialogue with inference ({', '.join(dev['samples'])}, first "
            f"{dev['max_sessions']} sessions, `benchmarks/storage/dev_bytes.py`): "
            f"{dev['turns']} turns, {dev['memories']} memories, {mb(dev['file_bytes'])}: "
            f"{kb(dev['bytes_per_turn'])} per stored turn.",
        ]
    machine = next((r["machine"] for r in (load(folder, f"storage_{s}") for s in ORDER) if r),
                   None)  # fmt: skip
    if machine:
        lines += ["", f"Machine: {machine['cores']} cores ({machine['cpu']}), "
                  f"commit {machine['commit']}."]  # fmt: skip
    print("\n".join(lines))


if __name__ == "__main__":
    main()
