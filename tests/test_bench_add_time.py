"""benchmarks/locomo/add_time.py splits each add's wall time from a bench trace."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.locomo.add_time import adds_of, summary


def test_an_adds_time_is_split_into_the_model_parts_and_the_rest(tmp_path: Path) -> None:
    records = [
        {"kind": "facts", "prompt_tokens": 100, "cached_tokens": 60, "completion_tokens": 20,
         "seconds": 3.0, "prompt_seconds": 1.0},
        {"kind": "choose", "seconds": 0.5},
        {"kind": "add", "seconds": 4.0},
        {"kind": "facts", "prompt_tokens": 50, "cached_tokens": 0, "completion_tokens": 10,
         "seconds": 2.0, "prompt_seconds": 1.5},
        {"kind": "add", "seconds": 2.5},
    ]  # fmt: skip
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    first, second = adds_of(trace)
    assert (first["prompt_eval"], first["generation"], first["checks"]) == (1.0, 2.0, 0.5)
    assert first["rest"] == 0.5 and second["rest"] == 0.5 and second["checks"] == 0
    figures = summary([first, second])
    assert figures["adds"] == 2 and figures["add_p95_s"] == 4.0
    assert figures["share_of_time"] == {"prompt_eval": 0.385, "generation": 0.385,
                                        "checks": 0.077, "rest": 0.154}  # fmt: skip
    assert figures["cached_share_of_prompt_tokens"] == 0.4
