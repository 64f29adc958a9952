"""The supersession check's probability of "changed" on pairs whose answer is known, to choose
`supersession.CHANGE_THRESHOLD`.

    .venv/bin/python -m benchmarks.extraction.check_threshold [--db MEMORY_FILE] [--out FILE]

Pairs: run.py's hand-written CHANGED (should be superseded), SAME and EVENTS (should not), and, with
`--db`, every pair a memory file recorded as superseded (old memory, the memory that superseded
it). On the dev set's run file those are read as wrong: in real conversations between two people
almost nothing changed (issue 19: 1 right of 16 read on two conversations). Each pair is asked
exactly as `check_supersessions` asks it. The report holds probabilities and memory ids, never the
file's texts, and a table: for each threshold, how many CHANGED pairs would still be superseded,
how many SAME and file pairs would be.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from offline_mem.config import DEFAULT_EXTRACTOR, resolve_models_dir
from offline_mem.extraction.supersession import build_check_prompt, changed_probability
from offline_mem.pinned.extractor import LlamaExtractor

from .run import CHANGED, EVENTS, SAME

ROOT = Path(__file__).resolve().parents[2]
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99)


def ask(extractor: Any, old: str, new: str, old_day: str | None, new_day: str | None) -> float:
    old_record = SimpleNamespace(text=old, observed_at=old_day, created_at=None)
    new_memory = SimpleNamespace(text=new, observed_at=new_day)
    prompt = build_check_prompt(old_record, new_memory, now_day=None, instructions=None)  # type: ignore[arg-type]
    return changed_probability(extractor, prompt)


def file_pairs(db: Path) -> list[tuple[str, str, str, str, str | None, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT o.id, n.id, o.text, n.text, o.observed_at, n.observed_at FROM memories o "
            "JOIN memories n ON n.id = o.superseded_by WHERE o.state = 'superseded' "
            "ORDER BY o.rowid"
        ).fetchall()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks/results/check_threshold.json"
    )
    args = parser.parse_args(argv)
    extractor = LlamaExtractor(DEFAULT_EXTRACTOR, resolve_models_dir())
    day_old, day_new = "2026-01-05", "2026-11-29"
    groups: dict[str, list[dict[str, Any]]] = {
        "changed": [{"pair": i, "p": ask(extractor, o, n, day_old, day_new)}
                    for i, (o, n) in enumerate(CHANGED)],
        "same": [{"pair": i, "p": ask(extractor, o, n, day_old, day_new)}
                 for i, (o, n) in enumerate(SAME)],
        "events": [{"pair": i, "p": ask(extractor, o, n, day_old, day_new)}
                   for i, (o, n) in enumerate(EVENTS)],
    }  # fmt: skip
    if args.db:
        groups["file"] = [
            {"old": oid, "new": nid, "p": ask(extractor, o, n, (od or "")[:10] or None,
                                             (nd or "")[:10] or None)}
            for oid, nid, o, n, od, nd in file_pairs(args.db)
        ]  # fmt: skip
    extractor.close()
    table = [
        {"threshold": t}
        | {name: sum(1 for r in rows if r["p"] >= t) for name, rows in groups.items()}
        for t in THRESHOLDS
    ]
    sizes = {name: len(rows) for name, rows in groups.items()}
    args.out.write_text(json.dumps({"extractor": DEFAULT_EXTRACTOR, "pairs": sizes,
                                    "superseded_at_threshold": table, "probabilities": groups},
                                   indent=1) + "\n")  # fmt: skip
    print("threshold  " + "  ".join(f"{n} (of {k})" for n, k in sizes.items()))
    for row in table:
        print(f"{row['threshold']:<9}  " + "  ".join(f"{row[n]:>{len(n) + 6}}" for n in sizes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
