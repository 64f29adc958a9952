"""The benchmark's comparisons with the peer when it ran on a subset of the samples."""

from __future__ import annotations

from typing import Any

from benchmarks.locomo.report import markdown
from benchmarks.locomo.run import paired_differences, summarize_on, targets


def _row(sample: str, f1: float, kind: str = "single_fact") -> dict[str, Any]:
    return {
        "sample": sample,
        "type": kind,
        "f1": f1,
        "evidence_recall": 1.0,
        "gold_in_context": f1,
        "said_not_mentioned": False,
        "search_s": 0.01,
        "answer_prompt_tokens": 100,
    }


def _retrieval(add_seconds: dict[str, float]) -> dict[str, Any]:
    adds = [
        {
            "sample": sample,
            "seconds": seconds,
            "error": None,
            "hit_max_tokens": False,
            "stored": 1,
            "llm_calls": 1,
            "prompt_tokens": 10,
            "completion_tokens": 5,
        }
        for sample, seconds in add_seconds.items()
    ]
    return {
        "adds": adds,
        "memories": 2,
        "storage_bytes": 1024,
        "peak_rss_mib": 1.0,
        "ingest_s": 1.0,
        "setup_s": 0.1,
    }


def test_the_peer_is_compared_on_its_own_samples_only() -> None:
    om_rows = [_row("a", 0.9), _row("a", 0.7), _row("b", 0.1), _row("a", 0.0, "not_mentioned")]
    m0_rows = [_row("a", 0.5), _row("a", 0.5), _row("a", 1.0, "not_mentioned")]
    om_ret, m0_ret = _retrieval({"a": 4.0, "b": 100.0}), _retrieval({"a": 40.0})
    summaries = {
        "offline_mem": summarize_on(om_ret, om_rows, {"a", "b"}),
        "mem0": summarize_on(m0_ret, m0_rows, {"a"}),
    }
    on_peer = {
        "offline_mem": summarize_on(om_ret, om_rows, {"a"}),
        "mem0": summarize_on(m0_ret, m0_rows, {"a"}),
    }
    by_name = {t["target"]: t for t in targets(summaries, on_peer)}
    vs_peer = by_name["answer F1 (answerable): offline_mem - mem0 (points, peer's samples)"]
    assert abs(vs_peer["value"] - 30.0) < 1e-9  # (0.9 + 0.7) / 2 - 0.5, sample b left out
    assert abs(by_name["add p50: offline_mem / mem0 (peer's samples)"]["value"] - 0.1) < 1e-9
    assert by_name["add p50 (s): offline_mem"]["value"] == 52.0  # every sample's adds
    assert by_name["answer F1 (answerable): offline_mem - naive (points)"]["met"] is None

    results = {"offline_mem": {"questions": om_rows}, "mem0": {"questions": m0_rows}}
    paired = paired_differences(results, {"a"})["mem0"]
    assert paired["questions"] == 2
    assert abs(paired["points"] - 30.0) < 1e-9
    assert abs(paired["se"] - 10.0) < 1e-9  # differences 40 and 20: sd 14.14, / sqrt(2)


def test_the_markdown_has_a_table_on_the_peers_samples() -> None:
    rows = [_row("a", 0.9), _row("b", 0.5)]
    summary = summarize_on(_retrieval({"a": 1.0, "b": 1.0}), rows, {"a", "b"})
    peer = summarize_on(_retrieval({"a": 1.0, "b": 1.0}), rows, {"a"})
    report = {
        "config": {
            "data": "dev.json",
            "chunk": 2,
            "top_k": 10,
            "extractor": "m",
            "answer_model": "m",
            "threads": 2,
        },
        "dataset": {"samples": 2, "turns_ingested": 4, "questions": 2},
        "summary": {"offline_mem": summary, "mem0": peer},
        "summary_on_peer_samples": {"offline_mem": peer, "mem0": peer},
        "peer_samples": ["a"],
        "paired": {"mem0": {"questions": 1, "points": 0.0, "se": 0.0}},
        "targets": targets({"offline_mem": summary}),
        "systems": {},
        "environment": {
            "platform": "p",
            "cpu_count": 2,
            "python": "3",
            "git_commit": "c",
            "stemmer": "s",
            "offline_mem_prompt_version": "v",
            "answer_prompt_version": "v",
            "packages": {},
            "models": {},
        },
        "machine_load": {"loadavg_start": [0], "loadavg_end": [0], "wall_s": 1},
    }
    text = markdown(report)
    assert "## On the peer's samples only (a)" in text
    assert "- mem0: +0.0 F1 points, SE 0.0 (1 questions)" in text
    section = text.split("## On the peer's samples only")[1].split("Paired")[0]
    assert "| answer F1 (answerable) | 0.900 | 0.900 |" in section
    assert "memories stored" not in section
