"""Issue 5 retrieval quality: recall@5 and MRR for each signal alone and for hybrid, per query type.

    .venv/bin/python benchmarks/retrieval/run.py [--seed 5] [--sweep] [--out benchmarks/results]

Loads the generated set (dataset.py) into a fresh memory file with the real pinned models
(all-MiniLM-L6-v2, en_core_web_sm; `add(..., infer=False)`: one memory per message, entities
from spaCy), then runs every query through `hybrid_search` with signals ("semantic",),
("keyword",), ("entity",) and all three, threshold None, top_k 10. recall@5 = share of a
query's gold memories in the top 5 (gold sets have at most 4 members); MRR = 1 / rank of the
first gold memory in the top 10 (0 when none).

The issue's bar: hybrid >= vector-only on every type, and better overall. `--sweep` re-ranks
the hybrid candidates of every query under each weight triple on a 0.05 grid (the candidate set
does not depend on the weights; the signals are captured from the library's own
`score_and_rank` call) and reports which triples meet the bar.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.retrieval.dataset import KINDS, RetrievalSet, build  # noqa: E402
from benchmarks.tables import table_path  # noqa: E402
from offline_mem.memory import Memory  # noqa: E402
from offline_mem.pinned.model_files import model_identity  # noqa: E402
from offline_mem.retrieval import search as search_module  # noqa: E402
from offline_mem.retrieval.ranking import Ranked, Signals, Weights, score_and_rank  # noqa: E402
from offline_mem.retrieval.search import SearchRequest, hybrid_search, overfetch  # noqa: E402
from offline_mem.store.filters import compile_filters  # noqa: E402
from offline_mem.store.keyword_index import lucene_idf  # noqa: E402

SIGNALS: dict[str, tuple[str, ...]] = {
    "vector": ("semantic",),
    "keyword": ("keyword",),
    "entity": ("entity",),
    "hybrid": ("semantic", "keyword", "entity"),
}
TOP_K = 10
# Experimental keyword scales, re-ranked from captured signals (benchmark only):
#   ideal_max_idf           the ideal is every query term matched as if it were in one memory
#   keyword_times_semantic  keyword evidence scaled by the memory's cosine before the cap
VARIANTS = ("ideal_max_idf", "keyword_times_semantic")
RECALL_AT = 5


@dataclass
class Captured:
    """What hybrid_search handed to score_and_rank for one query: enough to re-rank it."""

    signals: list[Signals] = field(default_factory=list)
    keyword_ideal: float = 0.0
    query_entities: int = 0
    ideal_max_idf: float = 0.0  # variant: every query term at the idf of df = 1


@contextmanager
def capture_ranking(into: list[Captured]) -> Iterator[None]:
    """Record the inputs of the library's score_and_rank (benchmark only; results unchanged)."""
    original = search_module.score_and_rank

    def recording(candidates: Any, **kwargs: Any) -> list[Ranked]:
        signals = list(candidates)
        into.append(Captured(signals, kwargs["keyword_ideal"], kwargs["query_entities"]))
        return original(signals, **kwargs)

    search_module.score_and_rank = recording  # type: ignore[assignment]
    try:
        yield
    finally:
        search_module.score_and_rank = original


def load(memory: Memory, data: RetrievalSet) -> tuple[dict[str, str], float]:
    """Add every memory (one add call per scope chunk); returns dataset id -> stored id."""
    ids: dict[str, str] = {}
    start = time.perf_counter()
    scopes = sorted({m.user_id for m in data.memories})
    for scope in scopes:
        items = data.in_scope(scope)
        for offset in range(0, len(items), 200):
            chunk = items[offset : offset + 200]
            messages = [{"role": "user", "content": m.text} for m in chunk]
            results = memory.add(messages, user_id=scope, infer=False)["results"]
            if [r["memory"] for r in results] != [m.text for m in chunk]:
                raise RuntimeError("add() did not keep one memory per message in order")
            ids.update({m.id: r["id"] for m, r in zip(chunk, results, strict=True)})
    return ids, time.perf_counter() - start


def recall_at(found: Sequence[str], gold: Sequence[str], k: int = RECALL_AT) -> float:
    return len(set(found[:k]) & set(gold)) / min(len(gold), k)


def reciprocal_rank(found: Sequence[str], gold: Sequence[str]) -> float:
    for rank, memory_id in enumerate(found, start=1):
        if memory_id in gold:
            return 1.0 / rank
    return 0.0


def summarize(rows: list[dict[str, Any]], method: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for kind in (*KINDS, "overall"):
        chosen = [r for r in rows if kind == "overall" or r["kind"] == kind]
        out[kind] = {
            "recall@5": round(sum(r[method]["recall@5"] for r in chosen) / len(chosen), 4),
            "mrr": round(sum(r[method]["mrr"] for r in chosen) / len(chosen), 4),
            "queries": len(chosen),
        }
    return out


def meets_bar(table: dict[str, dict[str, dict[str, float]]], metric: str) -> bool:
    hybrid, vector = table["hybrid"], table["vector"]
    per_type = all(hybrid[k][metric] >= vector[k][metric] for k in KINDS)
    return per_type and hybrid["overall"][metric] > vector["overall"][metric]


def evaluate(
    memory: Memory, data: RetrievalSet, ids: dict[str, str]
) -> tuple[list[dict[str, Any]], list[Captured], dict[str, Any]]:
    where_filters = {"user_id": data.scope}
    rows: list[dict[str, Any]] = []
    captured: list[Captured] = []
    embed_s = search_s = 0.0
    leaks = 0
    for query in data.queries:
        gold = [ids[g] for g in query.gold]
        start = time.perf_counter()
        vector = memory.embedder.embed(query.text)
        embed_s += time.perf_counter() - start
        mentions = memory.entities.extract_query(query.text)
        row: dict[str, Any] = {"id": query.id, "kind": query.kind, "query": query.text,
                               "gold": list(query.gold)}  # fmt: skip
        for method, signals in SIGNALS.items():
            request = SearchRequest(
                query=query.text, where=compile_filters(where_filters), top_k=TOP_K,
                threshold=None, weights=memory.weights, signals=signals,
            )  # fmt: skip
            start = time.perf_counter()
            if method == "hybrid":
                with capture_ranking(captured):
                    hits = hybrid_search(memory.store, memory.embedder, memory.analyzer, request,
                                         query_vector=vector, mentions=mentions)  # fmt: skip
            else:
                hits = hybrid_search(memory.store, memory.embedder, memory.analyzer, request,
                                     query_vector=vector, mentions=mentions)  # fmt: skip
            search_s += time.perf_counter() - start
            if method == "hybrid":
                captured[-1].ideal_max_idf = _ideal_max_idf(memory, query.text, request)
            leaks += sum(1 for record, _ in hits if record.user_id != data.scope)
            found = [record.id for record, _ in hits]
            row[method] = {
                "recall@5": recall_at(found, gold),
                "mrr": reciprocal_rank(found, gold),
                "top5": [_dataset_id(ids, f) for f in found[:5]],
            }
        rows.append(row)
    timing = {
        "query_embed_ms_mean": round(1000 * embed_s / len(data.queries), 2),
        "search_ms_mean_per_signal_config": round(1000 * search_s / (4 * len(data.queries)), 2),
        "results_from_other_scopes": leaks,
    }
    return rows, captured, timing


def _ideal_max_idf(memory: Memory, text: str, request: SearchRequest) -> float:
    """The keyword scale if the ideal were every query term as rare as a term can be (df = 1),
    so matching a common word earns only part of the keyword score."""
    terms = set(memory.analyzer.analyze(text).terms)
    stats = memory.store.keyword_stats(sorted(terms), request.where)
    return len(terms) * lucene_idf(stats.docs, 1) if stats.docs else 0.0


def _dataset_id(ids: dict[str, str], stored: str) -> str:
    for key, value in ids.items():
        if value == stored:
            return key
    return stored


def rerank(
    captured: list[Captured], rows: list[dict[str, Any]], ids: dict[str, str], memory: Memory,
    weights: Weights, variant: str = "library",
) -> list[dict[str, Any]]:  # fmt: skip
    """Hybrid metrics for every query under other weights, from the captured signals."""
    rowid_of = _rowids(memory, ids)
    out = []
    for cap, row in zip(captured, rows, strict=True):
        signals = cap.signals
        if variant == "keyword_times_semantic":
            signals = [replace(c, bm25=(c.bm25 or 0.0) * max(0.0, min(1.0, c.cosine or 0.0)))
                       for c in signals]  # fmt: skip
        ideal = cap.ideal_max_idf if variant == "ideal_max_idf" else cap.keyword_ideal
        ranked = score_and_rank(
            signals,
            keyword_ideal=ideal,
            query_entities=cap.query_entities,
            weights=weights, threshold=None, top_k=TOP_K,
        )  # fmt: skip
        gold_rowids = [rowid_of[g] for g in row["gold"]]
        found = [r.rowid for r in ranked]
        out.append({"kind": row["kind"], "hybrid": {
            "recall@5": recall_at(found, gold_rowids), "mrr": reciprocal_rank(found, gold_rowids),
        }, "vector": row["vector"]})  # fmt: skip
    return out


def _rowids(memory: Memory, ids: dict[str, str]) -> dict[str, int]:
    by_id = {row[0]: row[1] for row in memory.store.db.query("SELECT id, rowid FROM memories")}
    return {key: by_id[value] for key, value in ids.items()}


def sweep(
    captured: list[Captured], rows: list[dict[str, Any]], ids: dict[str, str], memory: Memory,
    variant: str = "library",
) -> dict[str, Any]:  # fmt: skip
    results = []
    steps = 20
    for s in range(steps + 1):
        for k in range(steps + 1 - s):
            e = steps - s - k
            weights = Weights(s / steps, k / steps, e / steps)
            rr = rerank(captured, rows, ids, memory, weights, variant)
            table = {"hybrid": summarize(rr, "hybrid"), "vector": summarize(rr, "vector")}
            results.append({
                "weights": [weights.semantic, weights.keyword, weights.entity],
                "hybrid": table["hybrid"],
                "meets_bar_recall@5": meets_bar(table, "recall@5"),
                "meets_bar_both": meets_bar(table, "recall@5") and meets_bar(table, "mrr"),
            })  # fmt: skip

    def order(r: dict[str, Any]) -> tuple[float, float]:
        return (-r["hybrid"]["overall"]["recall@5"], -r["hybrid"]["overall"]["mrr"])

    both = sorted((r for r in results if r["meets_bar_both"]), key=order)
    keyword_used = sorted(
        (r for r in results if r["meets_bar_recall@5"] and r["weights"][1] > 0), key=order
    )
    return {
        "keyword_scale": variant,
        "grid_step": 1 / steps,
        "triples": len(results),
        "meeting_bar_recall@5": sum(r["meets_bar_recall@5"] for r in results),
        "meeting_bar_recall@5_and_mrr": len(both),
        "best": both[:10],
        "best_with_keyword_weight_meeting_recall_bar": keyword_used[:10],
        "all_columns": [
            "semantic",
            "keyword",
            "entity",
            "recall@5",
            "mrr",
            "bar_recall@5",
            "bar_both",
        ],
        "all": [compact(r) for r in results],
    }


def compact(r: dict[str, Any]) -> list[Any]:
    overall = r["hybrid"]["overall"]
    return [*r["weights"], overall["recall@5"], overall["mrr"], r["meets_bar_recall@5"],
            r["meets_bar_both"]]  # fmt: skip


def paraphrase_overlap(memory: Memory, data: RetrievalSet) -> list[dict[str, Any]]:
    """Paraphrase queries whose analysed terms share a term with their gold memory (want none)."""
    texts = {m.id: m.text for m in data.memories}
    bad = []
    for q in data.queries:
        if q.kind != "paraphrase":
            continue
        shared = set(memory.analyzer.analyze(q.text).terms) & set(
            memory.analyzer.analyze(texts[q.gold[0]]).terms
        )
        if shared:
            bad.append({"query": q.text, "shared_terms": sorted(shared)})
    return bad


def configuration(memory: Memory, data: RetrievalSet) -> dict[str, Any]:
    spacy_ident = model_identity("en_core_web_sm", memory.models_dir)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()  # fmt: skip
    status = ["git", "-C", str(ROOT), "status", "--porcelain", "offline_mem"]
    dirty = subprocess.run(status, capture_output=True, text=True, check=False).stdout.split("\n")
    return {
        "dataset": data.summary(),
        "top_k": TOP_K,
        "overfetch": overfetch(TOP_K),
        "threshold": None,
        "weights": asdict(memory.weights),
        "embedder": asdict(memory.embedder.identity),
        "nlp": {"name": spacy_ident.name, "sha256": spacy_ident.sha256},
        "git_commit": commit,
        "offline_mem_uncommitted_changes": [line.strip() for line in dirty if line.strip()],
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
    }


def markdown(report: dict[str, Any]) -> str:
    cfg = report["configuration"]
    lines = [
        "# Retrieval quality (issue 5)",
        "",
        f"Set: seed {cfg['dataset']['seed']}, {cfg['dataset']['memories_in_scope']} memories in "
        f"scope `{cfg['dataset']['scope']}` + {cfg['dataset']['memories_other_scopes']} in "
        f"{cfg['dataset']['scopes'] - 1} other scopes, {cfg['dataset']['queries']} queries. "
        f"top_k {cfg['top_k']} (over-fetch {cfg['overfetch']}), threshold None, weights "
        f"{cfg['weights']}. Embedder {cfg['embedder']['name']} ({cfg['embedder']['sha256'][:12]}),"
        f" nlp {cfg['nlp']['name']} ({cfg['nlp']['sha256'][:12]}), commit "
        f"{cfg['git_commit'][:10]}.",
        "",
        "recall@5 / MRR@10 per query type:",
        "",
        "| signal | " + " | ".join((*KINDS, "overall")) + " |",
        "|---|" + "---|" * (len(KINDS) + 1),
    ]
    for method, table in report["results"].items():
        cells = [f"{table[k]['recall@5']:.3f} / {table[k]['mrr']:.3f}" for k in (*KINDS, "overall")]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Bar (hybrid >= vector on every type, better overall): recall@5 "
        f"{'met' if report['bar']['recall@5'] else 'MISSED'}, MRR "
        f"{'met' if report['bar']['mrr'] else 'MISSED'}.",
        f"Results from other scopes: {report['timing']['results_from_other_scopes']}. "
        f"Paraphrase queries sharing an analysed term with their gold: "
        f"{len(report['paraphrase_overlap'])}.",
    ]
    for key in ("sweep", *(f"sweep_{v}" for v in VARIANTS)):
        if key not in report:
            continue
        sw = report[key]
        lines += [
            "",
            f"Weight sweep, keyword scale `{sw['keyword_scale']}` "
            f"(grid {sw['grid_step']:.2f}, {sw['triples']} triples): "
            f"{sw['meeting_bar_recall@5']} meet the bar on recall@5, "
            f"{sw['meeting_bar_recall@5_and_mrr']} on recall@5 and MRR. Best:",
            "",
            "| semantic, keyword, entity | " + " | ".join((*KINDS, "overall")) + " |",
            "|---|" + "---|" * (len(KINDS) + 1),
        ]
        with_keyword = sw["best_with_keyword_weight_meeting_recall_bar"][:4]
        shown = sw["best"][:4] + [r for r in with_keyword if r not in sw["best"][:4]]
        for r in shown:
            cells = [f"{r['hybrid'][k]['recall@5']:.3f} / {r['hybrid'][k]['mrr']:.3f}"
                     for k in (*KINDS, "overall")]  # fmt: skip
            mark = "both" if r["meets_bar_both"] else "recall@5 only"
            lines.append(f"| {r['weights']} ({mark}) | " + " | ".join(cells) + " |")
    lines += ["", f"Load average at start: {cfg['load_average']}", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--weights", help="semantic,keyword,entity (default: the library's)")
    args = parser.parse_args()
    data = build(args.seed)
    config: dict[str, Any] = {}
    if args.weights:
        s, k, e = (float(x) for x in args.weights.split(","))
        config["ranking_weights"] = {"semantic": s, "keyword": k, "entity": e}
    with (
        tempfile.TemporaryDirectory(prefix="offline_mem_retrieval_") as folder,
        Memory({"path": str(Path(folder) / "bench.db"), **config}) as memory,
    ):
        cfg = configuration(memory, data)
        ids, load_s = load(memory, data)
        rows, captured, timing = evaluate(memory, data, ids)
        report: dict[str, Any] = {
            "configuration": cfg,
            "results": {m: summarize(rows, m) for m in SIGNALS},
        }
        report["bar"] = {m: meets_bar(report["results"], m) for m in ("recall@5", "mrr")}
        report["timing"] = {"load_s": round(load_s, 1), **timing}
        report["paraphrase_overlap"] = paraphrase_overlap(memory, data)
        check = rerank(captured, rows, ids, memory, memory.weights)
        if [r["hybrid"] for r in check] != [
            {"recall@5": r["hybrid"]["recall@5"], "mrr": r["hybrid"]["mrr"]} for r in rows
        ]:
            raise RuntimeError("re-ranking the captured signals does not reproduce hybrid")
        if args.sweep:
            report["sweep"] = sweep(captured, rows, ids, memory)
            for variant in VARIANTS:
                report[f"sweep_{variant}"] = sweep(captured, rows, ids, memory, variant)
        report["queries"] = rows
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "retrieval.json").write_text(json.dumps(report, indent=1) + "\n")
    table_path(out, "retrieval.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
