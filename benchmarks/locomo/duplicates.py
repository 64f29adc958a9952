"""Near-duplicates left among a run's active facts, the merges made, and the facts' validity.

For each conversation of a run's memory file: how many pairs of active facts lie within cosine
t of each other (the pinned MiniLM embedder) for each threshold asked; how many MERGE history
rows the run wrote (a fact said again, merged into the memory that said it); and the validity
columns (facts whose valid_from came from their text rather than their message's date, and any
whose valid_to is before valid_from: there must be none).

    .venv/bin/python -m benchmarks.locomo.duplicates --db /tmp/run/offline_mem/offline_mem.db \\
        --out benchmarks/results/dev_duplicates.json [--show 20 --at 0.85]

The result holds counts only; `--show N` prints N pairs (random.Random(44)) at or above `--at`
with their cosine, to read what a threshold would merge.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_THRESHOLDS = (0.8, 0.85, 0.9, 0.95)


def scope_users(db: Any) -> list[str]:
    return [row[0] for row in db.query("SELECT DISTINCT user_id FROM memories ORDER BY 1")]


def active_facts(db: Any, user: str) -> list[str]:
    """The active extracted facts of a user (raw memories, stored as said, are left out)."""
    rows = db.query(
        "SELECT text FROM memories WHERE user_id = ? AND state = 'active' "
        "AND extractor_sha256 IS NOT NULL ORDER BY rowid",
        (user,),
    )
    return [row[0] for row in rows]


def close_pairs(vectors: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    if len(vectors) < 2:
        return []
    sims = vectors @ vectors.T
    i, j = np.where(np.triu(sims, k=1) >= threshold)
    return [(int(a), int(b), float(sims[a, b])) for a, b in zip(i, j, strict=True)]


def validity(db: Any, user: str) -> dict[str, int]:
    row = db.query_one(
        "SELECT count(*), sum(valid_from < COALESCE(observed_at, created_at)), "
        "sum(valid_to IS NOT NULL), sum(valid_to < valid_from) FROM memories "
        "WHERE user_id = ? AND extractor_sha256 IS NOT NULL",
        (user,),
    )
    facts, dated, ended, backwards = (int(v or 0) for v in row)
    return {"facts": facts, "valid_from_from_text": dated, "with_valid_to": ended,
            "valid_to_before_valid_from": backwards}  # fmt: skip


def report(memory: Any, thresholds: tuple[float, ...], show: int, at: float) -> dict[str, Any]:
    db = memory.store.db
    per_user: dict[str, Any] = {}
    shown: list[tuple[str, str, float]] = []
    for user in scope_users(db):
        facts = active_facts(db, user)
        vectors = memory.embedder.embed_batch(facts) if facts else np.zeros((0, 1))
        merges = db.query_one(
            "SELECT count(*) FROM history h JOIN memories m ON m.id = h.memory_id "
            "WHERE m.user_id = ? AND h.event = 'MERGE'",
            (user,),
        )[0]
        per_user[user] = {
            "active_facts": len(facts),
            "close_pairs": {str(t): len(close_pairs(vectors, t)) for t in thresholds},
            "merges": int(merges),
            **validity(db, user),
        }
        shown += [(facts[a], facts[b], s) for a, b, s in close_pairs(vectors, at)]
    totals: dict[str, Any] = {
        key: sum(u[key] for u in per_user.values())
        for key in ("active_facts", "merges", "facts", "valid_from_from_text", "with_valid_to",
                    "valid_to_before_valid_from")
    }  # fmt: skip
    totals["close_pairs"] = {
        str(t): sum(u["close_pairs"][str(t)] for u in per_user.values()) for t in thresholds
    }
    for first, second, cosine in random.Random(44).sample(shown, min(show, len(shown))):
        print(f"{cosine:.3f}  {first}\n       {second}")
    return {"total": totals, "per_conversation": per_user}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", type=Path, required=True, help="the run's offline_mem memory file")
    p.add_argument("--thresholds", default=",".join(map(str, DEFAULT_THRESHOLDS)))
    p.add_argument("--show", type=int, default=0, help="print N close pairs to read")
    p.add_argument("--at", type=float, default=0.85, help="the cosine of the pairs shown")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    from offline_mem import Memory

    thresholds = tuple(float(t) for t in args.thresholds.split(","))
    with Memory({"path": str(args.db), "job_worker": False}) as memory:
        result = report(memory, thresholds, args.show, args.at)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
