"""Where an add's time goes, from a bench trace (issue 20): prompt evaluation, answer writing and
supersession checks inside the model, and the rest (fact checks, embedding, SQL, entities).

    OFFLINE_MEM_BENCH_TRACE=1 scripts/bench ... --workdir DIR  # DIR/offline_mem/trace.jsonl
    .venv/bin/python -m benchmarks.locomo.add_time DIR/offline_mem/trace.jsonl [--out FILE.json]

The trace holds the dataset's text; the summary printed and written holds figures only.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

PARTS = ("prompt_eval", "generation", "checks", "rest")


def adds_of(trace: Path) -> list[dict[str, float]]:
    """Each add's seconds by part, and its model calls' tokens, in trace order."""
    adds: list[dict[str, float]] = []
    fields = (*PARTS, "calls", "prompt_tokens", "cached_tokens", "written", "guessed")
    current = dict.fromkeys(fields, 0.0)
    for line in trace.read_text(encoding="utf-8").splitlines():
        record: dict[str, Any] = json.loads(line)
        if record["kind"] == "add":
            inside = current["prompt_eval"] + current["generation"] + current["checks"]
            current["rest"] = max(0.0, record["seconds"] - inside)
            current["total"] = record["seconds"]
            adds.append(current)
            current = dict.fromkeys(current, 0.0)
        elif record["kind"] == "choose":
            current["checks"] += record["seconds"]
        elif "seconds" in record:
            current["calls"] += 1
            current["prompt_eval"] += record["prompt_seconds"]
            current["generation"] += record["seconds"] - record["prompt_seconds"]
            current["prompt_tokens"] += record["prompt_tokens"]
            current["cached_tokens"] += record["cached_tokens"]
            current["written"] += record["completion_tokens"]
            current["guessed"] += record.get("guessed_tokens", 0)  # traces before round 20: none
    return adds


def summary(adds: list[dict[str, float]]) -> dict[str, Any]:
    total = sum(a["total"] for a in adds) or 1.0
    ordered = sorted(a["total"] for a in adds)
    return {
        "adds": len(adds),
        "add_p50_s": round(statistics.median(ordered), 2),
        "add_p95_s": round(ordered[math.ceil(0.95 * len(ordered)) - 1], 2),  # nearest rank
        "share_of_time": {p: round(sum(a[p] for a in adds) / total, 3) for p in PARTS},
        "seconds_per_add": {p: round(sum(a[p] for a in adds) / len(adds), 2) for p in PARTS},
        "model_calls_per_add": round(sum(a["calls"] for a in adds) / len(adds), 2),
        "prompt_tokens_per_call": round(
            sum(a["prompt_tokens"] for a in adds) / max(1, sum(a["calls"] for a in adds))
        ),
        "cached_share_of_prompt_tokens": round(
            sum(a["cached_tokens"] for a in adds) / max(1, sum(a["prompt_tokens"] for a in adds)), 3
        ),
        "tokens_written_per_add": round(sum(a["written"] for a in adds) / len(adds), 1),
        "guessed_share_of_written": round(
            sum(a["guessed"] for a in adds) / max(1, sum(a["written"] for a in adds)), 3
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = summary(adds_of(args.trace))
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
