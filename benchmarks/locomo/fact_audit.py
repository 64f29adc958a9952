"""Read a sample of a memory file's facts beside the turns they came from, and score the labels a
reader gave them (issue 19: facts credited to the wrong speaker, <= 5% of 100 read).

    .venv/bin/python -m benchmarks.locomo.fact_audit show --db FILE [--n 100 --seed 19]
    .venv/bin/python -m benchmarks.locomo.fact_audit score --db FILE --labels LABELS.json

`show` prints the sample (every fact of the file, active or superseded, drawn with
random.Random(seed).sample, then in file order) for a person to read: it is the dataset's text,
so it goes to the terminal, never into the repository. A labels file holds only memory ids and
verdicts: {"db": ..., "seed": 19, "n": 100, "labels": {"<memory id>": "<verdict>"}}, a verdict
being one of VERDICTS; facts left out of "labels" were read and found right.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
from collections import Counter
from pathlib import Path

VERDICTS = {
    "wrong_speaker": "credited to the other person (or to both when one said it)",
    "no_speaker": "names nobody: a copied turn or a bare title",
    "role_word": "names a role ('Assistant', 'User') instead of the speaker's name",
    "unsupported": "the right person, but the turn does not say it",
    "turn_copy": "the turn itself (or nearly), under its speaker's name: not an attribution error",
}


def sample(db: Path, n: int, seed: int) -> list[tuple[int, str, str, str, str | None]]:
    with sqlite3.connect(db) as conn:
        facts = conn.execute(
            "SELECT rowid, id, text, state, user_id FROM memories ORDER BY rowid"
        ).fetchall()
    return sorted(random.Random(seed).sample(facts, min(n, len(facts))))


def show(db: Path, n: int, seed: int) -> None:
    with sqlite3.connect(db) as conn:
        for number, (rowid, mid, text, state, user) in enumerate(sample(db, n, seed)):
            print(f"#{number} {mid} [{user}] {state}: {text}")
            for name, content in conn.execute(
                "SELECT m.name, m.content FROM provenance p JOIN messages m "
                "ON m.seq = p.message_seq WHERE p.memory_rowid = ?",
                (rowid,),
            ):
                print(f"     <{name}> {content}")


def score(db: Path, labels_path: Path) -> dict[str, object]:
    labels = json.loads(labels_path.read_text())
    drawn = sample(db, labels["n"], labels["seed"])
    ids = {mid for _, mid, *_ in drawn}
    unknown = set(labels["labels"]) - ids
    if unknown:
        raise SystemExit(f"labels for facts outside the sample: {sorted(unknown)[:3]}")
    bad = set(labels["labels"].values()) - set(VERDICTS)
    if bad:
        raise SystemExit(f"unknown verdicts {sorted(bad)}; known: {sorted(VERDICTS)}")
    counts = Counter(labels["labels"].values())
    read = len(drawn)
    attribution = counts["wrong_speaker"] + counts["no_speaker"] + counts["role_word"]
    return {
        "read": read,
        "counts": dict(sorted(counts.items())),
        "wrong_speaker_rate": round(counts["wrong_speaker"] / read, 3),
        "attribution_error_rate": round(attribution / read, 3),
        "turn_copy_rate": round(counts["turn_copy"] / read, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("show", "score"))
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--labels", type=Path)
    args = parser.parse_args(argv)
    if args.action == "show":
        show(args.db, args.n, args.seed)
    else:
        if args.labels is None:
            parser.error("score needs --labels")
        print(json.dumps(score(args.db, args.labels), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
