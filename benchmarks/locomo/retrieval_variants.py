"""Retrieval-only ablation on the memory file a LoCoMo run left behind: the same questions searched
in several ways, scored by the share of the gold answer's tokens in the top-k and by evidence
recall (no answer model, so each variant costs seconds, not an hour).

    .venv/bin/python -m benchmarks.locomo.retrieval_variants \
        --data ../shared/data/locomo/locomo_dev.json --db WORKDIR/offline_mem/offline_mem.db

Variants (what a user of the API can call, plus internal switches of the default ranking):
    search                 facts and stored turns in one ranking (the default)
    search, no replies     a question's reply not lent its score (evidence.REPLY_SHARE = 0);
                           replies 0.8 / 1.0: other shares; every reply 0.9: every message's
    search, facts by score facts not capped at 20% of the places (evidence.FACT_SHARE = 1)
    search, no references  resolve_references=False (references.py's relational-name rule off)
    facts only             search(include_messages=False)
    turns only             search_messages (cosine over the stored turns)
Writes a JSON report (scores only: the dataset's text stays out of the repository).
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .loader import load_locomo
from .run import DEFAULT_MAX_SESSIONS, _token_recall, chunks_of, questions_of
from .scoring import evidence_recall

ROOT = Path(__file__).resolve().parents[2]


def hits_of(
    results: list[dict[str, Any]], index: dict[str, set[str]]
) -> list[tuple[str, set[str]]]:
    """(text, dia_ids) of each result: a turn by its content, a fact by its sources."""
    out = []
    for item in results:
        if "content" in item and item.get("kind", "message") == "message":
            ids = set(index.get(item["content"], set()))
            text = item.get("memory") or item["content"]
        else:
            ids = set()
            for source in item.get("sources", []):
                ids |= index.get(source.get("content", ""), set())
            text = item["memory"]
        out.append((text, ids))
    return out


def main(argv: list[str] | None = None) -> int:
    from offline_mem import Memory
    from offline_mem.retrieval import evidence, retriever

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/dev_retrieval.json")
    args = parser.parse_args(argv)
    cfg = {"chunk": 2, "max_turns": None, "max_sessions": args.max_sessions,
           "max_questions": None}  # fmt: skip
    memory = Memory({"path": str(args.db)})
    k = args.top_k

    def search(query: str, user: str, **options: Any) -> list[dict[str, Any]]:
        return memory.search(query, filters={"user_id": user}, top_k=k, include_sources=True,
                             **options)["results"]  # fmt: skip

    def facts_by_score(query: str, user: str) -> list[dict[str, Any]]:
        share = evidence.FACT_SHARE
        evidence.FACT_SHARE = 1.0
        try:
            return search(query, user)
        finally:
            evidence.FACT_SHARE = share

    def with_replies(share: float, every_message: bool = False) -> Callable[..., Any]:
        """search with REPLY_SHARE = share; every message's reply, not only a question's."""

        def call(query: str, user: str) -> list[dict[str, Any]]:
            saved = evidence.REPLY_SHARE, retriever.asks
            evidence.REPLY_SHARE = share
            if every_message:
                retriever.asks = lambda text: True
            try:
                return search(query, user)
            finally:
                evidence.REPLY_SHARE, retriever.asks = saved

        return call

    variants: dict[str, Callable[[str, str], list[dict[str, Any]]]] = {
        "search": search,
        "search, no replies": with_replies(0.0),
        "search, replies 0.8": with_replies(0.8),
        "search, replies 1.0": with_replies(1.0),
        "search, every reply 0.9": with_replies(0.9, every_message=True),
        "search, facts by score": facts_by_score,
        "search, no references": functools.partial(search, resolve_references=False),
        "facts only": functools.partial(search, include_messages=False),
        "turns only": lambda q, u: memory.search_messages(q, filters={"user_id": u}, top_k=k)[
            "results"
        ],
    }
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for sample in load_locomo(args.data):
        index: dict[str, set[str]] = {}
        for _, chunk in chunks_of(sample, 2, None, args.max_sessions):
            for m in chunk:
                index.setdefault(m.turn.text, set()).add(m.turn.dia_id)
        if not index:
            continue
        for number, qa in enumerate(questions_of(sample, cfg)):
            if qa.category not in (1, 2, 3, 4):
                continue
            for name, call in variants.items():
                results = call(qa.question, sample.sample_id)
                hits = hits_of(results, index)
                rows[name].append({
                    "sample": sample.sample_id, "index": number, "category": qa.category,
                    "gold_in_context": _token_recall(qa.answer, " ".join(t for t, _ in hits)),
                    "evidence_recall": evidence_recall(qa.evidence, [ids for _, ids in hits]),
                    "turns": sum(1 for item in results if item.get("kind", "message") == "message"),
                })  # fmt: skip
    memory.close()
    summary = {}
    for name, found in rows.items():
        recalls = [r["evidence_recall"] for r in found if r["evidence_recall"] is not None]
        summary[name] = {
            "questions": len(found),
            "gold_in_context": round(sum(r["gold_in_context"] for r in found) / len(found), 3),
            "evidence_recall": round(sum(recalls) / len(recalls), 3) if recalls else None,
            "turns_per_result_list": round(sum(r["turns"] for r in found) / len(found), 2),
        }
    report = {"command": "python -m benchmarks.locomo.retrieval_variants --data <dev set> "
              f"--db <run's offline_mem.db> --top-k {k} --max-sessions {args.max_sessions}",
              "summary": summary, "rows": rows}  # fmt: skip
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    for name, values in summary.items():
        print(
            f"{name:24} gold-in-results {values['gold_in_context']:.3f}  "
            f"evidence recall {values['evidence_recall']}  (n={values['questions']})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
