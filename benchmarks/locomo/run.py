"""The side-by-side harness: offline_mem, naive and Mem0 (local) on the same LoCoMo-format data.

    .venv/bin/python -m benchmarks.locomo.run               # the small default (scripts/bench)
    .venv/bin/python -m benchmarks.locomo.run --sessions 12 --per-type 5 --personas 2
    .venv/bin/python -m benchmarks.locomo.run --data locomo10.json --max-turns 80 --max-questions 40

For each system, in its own process (so peak RSS is its own and Mem0's environment stays out of
the others): ingest every sample's sessions in order, in fixed chunks of --chunk turns that never
cross a session, each message timestamped with its session's date; then search every question
(top-k). Then this process loads the answer model once and answers every question of every system
from its retrieved memories with the same prompt, and scores them (scoring.py). Results go to
benchmarks/results/ as JSON, a markdown table and PNG plots (report.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .loader import Sample, load_locomo
from .scoring import (
    STEMMER_NAME,
    answer_score,
    evidence_recall,
    percentile,
    says_not_mentioned,
)
from .systems import AddOutcome, ChunkMessage, System

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS = ("offline_mem", "naive", "mem0")
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"
# Real LoCoMo conversations run to 19-32 sessions; the dev-set figures use the first 4 of each
# (~750 turns over 8 conversations, ~2 hours of extraction at one thread on two cores).
DEFAULT_MAX_SESSIONS = 4
PACKAGES = (
    "offline_mem",
    "llama_cpp_python",
    "mem0ai",
    "qdrant-client",
    "sentence-transformers",
    "transformers",
    "torch",
    "spacy",
    "numpy",
    "openai",
    "sqlite-vec",
    "sqlean.py",
    "nltk",
    "matplotlib",
    "fastapi",
    "uvicorn",
)


# -- data -------------------------------------------------------------------------------------


def chunks_of(
    sample: Sample, size: int, max_turns: int | None, max_sessions: int | None = None
) -> list[tuple[Any, list[ChunkMessage]]]:
    """(session, messages) chunks in conversation order; a chunk never crosses a session."""
    out = []
    budget = max_turns if max_turns is not None else 10**9
    for session in sample.sessions[:max_sessions]:
        turns = list(session.turns[: max(0, budget)])
        budget -= len(turns)
        for start in range(0, len(turns), size):
            out.append(
                (
                    session,
                    [
                        ChunkMessage(
                            turn=t,
                            role="user" if t.speaker == sample.speaker_a else "assistant",
                            name=re.sub(r"\s+", "_", t.speaker.strip()) or "speaker",
                        )
                        for t in turns[start : start + size]
                    ],
                )
            )
    return out


def ingested_ids(
    sample: Sample, max_turns: int | None, max_sessions: int | None = None
) -> set[str]:
    chunks = chunks_of(sample, 1, max_turns, max_sessions)
    return {m.turn.dia_id for _, chunk in chunks for m in chunk}


def questions_of(sample: Sample, cfg: dict[str, Any]) -> list[Any]:
    """Questions whose evidence was ingested (all of it), at most --max-questions per sample."""
    seen = ingested_ids(sample, cfg["max_turns"], cfg.get("max_sessions"))
    chosen = [q for q in sample.qa if all(e in seen for e in q.evidence)]
    return chosen[: cfg["max_questions"]] if cfg["max_questions"] else chosen


# -- the retrieval phase, one process per system ----------------------------------------------


def build_system(name: str, workdir: Path, cfg: dict[str, Any]) -> System:
    from . import systems

    if name == "offline_mem":
        return systems.OfflineMemSystem(
            workdir,
            extractor=cfg["extractor"],
            threads=cfg["threads"],
            replay=Path(cfg["replay"]) if cfg.get("replay") else None,
            without=cfg.get("without"),
        )
    if name == "naive":
        return systems.NaiveSystem(systems.load_pinned_embedder())
    if name == "mem0":
        return systems.Mem0System(
            workdir, model_name=cfg["extractor"], threads=cfg["threads"], n_ctx=cfg["peer_n_ctx"]
        )
    raise ValueError(f"unknown system {name!r}")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def selected(samples: list[Sample], wanted: str | None) -> list[Sample]:
    """The samples `wanted` names (comma-separated ids) or counts (the first N); all when it is
    empty."""
    if not wanted:
        return samples
    if wanted.isdigit():
        return samples[: int(wanted)]
    ids = wanted.split(",")
    missing = sorted(set(ids) - {s.sample_id for s in samples})
    if missing:
        raise SystemExit(f"no sample {missing} in the selected data")
    return [s for s in samples if s.sample_id in ids]


def samples_of(name: str, data: Path, cfg: dict[str, Any]) -> list[Sample]:
    """The samples a system ingests and is scored on: --samples, and for the peer (whose adds
    take ~40 s each here) only --peer-samples of those."""
    samples = selected(load_locomo(data), cfg.get("samples"))
    return selected(samples, cfg.get("peer_samples")) if name == "mem0" else samples


def retrieve(name: str, data: Path, cfg: dict[str, Any], workdir: Path) -> dict[str, Any]:
    samples = samples_of(name, data, cfg)
    load_start = load_average()
    started = time.perf_counter()
    system = build_system(name, workdir, cfg)
    system.warm_up()
    setup_s = time.perf_counter() - started
    adds: list[dict[str, Any]] = []
    ingest_start = time.perf_counter()
    reuse = bool(cfg.get("reuse_ingest")) and system.can_reuse()
    for sample in samples:
        chunks = chunks_of(sample, cfg["chunk"], cfg["max_turns"], cfg.get("max_sessions"))
        for n, (session, chunk) in enumerate(chunks):
            if reuse:  # the file already holds these adds: only learn the turns' dia_ids
                system.index_chunk(sample.sample_id, chunk)
                continue
            outcome: AddOutcome = system.add(sample.sample_id, chunk, session.when)
            adds.append(
                {
                    "sample": sample.sample_id,
                    "chunk": n,
                    "dia_ids": [m.turn.dia_id for m in chunk],
                    **asdict(outcome),
                }
            )
            print(
                f"[{name}] add {len(adds)} {outcome.seconds:.1f}s stored={outcome.stored}"
                + (f" error={outcome.error[:120]}" if outcome.error else ""),
                flush=True,
            )
    ingest_s = time.perf_counter() - ingest_start
    system.finish_ingest()
    searches = []
    for sample in samples:
        for i, qa in enumerate(questions_of(sample, cfg)):
            t0 = time.perf_counter()
            hits = system.search(sample.sample_id, qa.question, cfg["top_k"])
            searches.append(
                {
                    "sample": sample.sample_id,
                    "index": i,
                    "seconds": time.perf_counter() - t0,
                    "hits": [asdict(h) for h in hits],
                }
            )
    result = {
        "system": name,
        "setup_s": setup_s,
        "ingest_s": ingest_s,
        "adds": adds,
        "searches": searches,
        "memories": system.memory_count(),
        "storage_bytes": system.storage_bytes(),
        "peak_rss_mib": peak_rss_mib(),
        "loadavg_start": load_start,
        "loadavg_end": load_average(),
    }
    server = getattr(system, "server", None)
    if server is not None:
        result["server_peak_rss_mib"] = (server.peak_rss_kib or 0) / 1024.0
    system.close()
    return result


# -- the answer phase and scores --------------------------------------------------------------


def score_system(
    retrieval: dict[str, Any], samples: list[Sample], cfg: dict[str, Any], answerer: Any
) -> dict[str, Any]:
    from .systems import Hit

    by_key = {(s["sample"], s["index"]): s for s in retrieval["searches"]}
    rows = []
    for sample in samples:
        for i, qa in enumerate(questions_of(sample, cfg)):
            search = by_key[(sample.sample_id, i)]
            hits = [Hit(h["text"], h["date"], tuple(h["dia_ids"])) for h in search["hits"]]
            reply = answerer.answer(sample.speaker_a, qa.question, hits)
            context = " ".join(h.text for h in hits)
            rows.append(
                {
                    "sample": sample.sample_id,
                    "type": qa.type,
                    "question": qa.question,
                    "gold": qa.answer,
                    "answer": reply.text,
                    "evidence": list(qa.evidence),
                    "f1": answer_score(reply.text, qa.answer, qa.type),
                    "evidence_recall": evidence_recall(qa.evidence, [h.dia_ids for h in hits]),
                    "gold_in_context": None
                    if qa.type == "not_mentioned"
                    else _token_recall(qa.answer, context),
                    "said_not_mentioned": says_not_mentioned(reply.text),
                    "search_s": search["seconds"],
                    "answer_prompt_tokens": reply.prompt_tokens,
                    "answer_s": reply.seconds,
                    "retrieved": [h.text for h in hits],
                }
            )
            print(
                f"[{retrieval['system']}] {qa.type}: {qa.question!r} -> {reply.text!r} "
                f"(gold {qa.answer!r})",
                flush=True,
            )
    return {"questions": rows, "summary": summarize(retrieval, rows)}


def _token_recall(gold: str, context: str) -> float:
    """Share of the gold answer's tokens present in the retrieved text (an upper bound)."""
    from .scoring import tokens

    wanted = tokens(gold)
    have = set(tokens(context))
    return sum(1 for t in wanted if t in have) / len(wanted) if wanted else 0.0


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarize(retrieval: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    adds = retrieval["adds"]
    add_s = [a["seconds"] for a in adds]
    search_s = [r["search_s"] for r in rows]
    types = sorted({r["type"] for r in rows})
    answerable = [r for r in rows if r["type"] != "not_mentioned"]
    nm = [r for r in rows if r["type"] == "not_mentioned"]
    return {
        "questions": len(rows),
        "f1": _mean([r["f1"] for r in rows]),
        "f1_answerable": _mean([r["f1"] for r in answerable]),
        "f1_by_type": {t: _mean([r["f1"] for r in rows if r["type"] == t]) for t in types},
        "evidence_recall": _mean([r["evidence_recall"] for r in rows]),
        "evidence_recall_by_type": {
            t: _mean([r["evidence_recall"] for r in rows if r["type"] == t]) for t in types
        },
        "gold_in_context": _mean([r["gold_in_context"] for r in rows]),
        "not_mentioned_rate": _mean([1.0 if r["said_not_mentioned"] else 0.0 for r in nm]),
        "false_not_mentioned_rate": _mean(
            [1.0 if r["said_not_mentioned"] else 0.0 for r in answerable]
        ),
        "adds": len(adds),
        "add_p50_s": percentile(add_s, 50),
        "add_p95_s": percentile(add_s, 95),
        "add_max_s": max(add_s) if add_s else None,
        "adds_failed": sum(1 for a in adds if a["error"]),
        "adds_hit_max_tokens": sum(1 for a in adds if a["hit_max_tokens"]),
        "adds_storing_nothing": sum(1 for a in adds if a["stored"] == 0),
        "llm_calls": sum(a["llm_calls"] for a in adds),
        "extraction_prompt_tokens": sum(a["prompt_tokens"] for a in adds),
        "extraction_prompt_tokens_per_add": _mean([float(a["prompt_tokens"]) for a in adds]),
        "extraction_completion_tokens": sum(a["completion_tokens"] for a in adds),
        "answer_prompt_tokens_per_question": _mean(
            [float(r["answer_prompt_tokens"]) for r in rows]
        ),
        "search_p50_ms": _ms(percentile(search_s, 50)),
        "search_p95_ms": _ms(percentile(search_s, 95)),
        "memories_stored": retrieval["memories"],
        "storage_bytes": retrieval["storage_bytes"],
        "peak_rss_mib": retrieval["peak_rss_mib"],
        "server_peak_rss_mib": retrieval.get("server_peak_rss_mib"),
        "ingest_s": retrieval["ingest_s"],
        "setup_s": retrieval["setup_s"],
        "loadavg_start_end": [retrieval.get("loadavg_start"), retrieval.get("loadavg_end")],
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def summarize_on(
    retrieval: dict[str, Any], rows: list[dict[str, Any]], sample_ids: set[str]
) -> dict[str, Any]:
    """summarize() over the given samples' adds and questions only (memories, storage and RSS
    stay whole-run figures)."""
    adds = [a for a in retrieval["adds"] if a["sample"] in sample_ids]
    return summarize({**retrieval, "adds": adds}, [r for r in rows if r["sample"] in sample_ids])


def _answerable_f1_by_question(result: dict[str, Any]) -> dict[tuple[str, int], float]:
    """Answerable questions' F1 keyed by (sample, position among the sample's questions)."""
    seen: dict[str, int] = {}
    out = {}
    for row in result["questions"]:
        n = seen[row["sample"]] = seen.get(row["sample"], -1) + 1
        if row["type"] != "not_mentioned":
            out[(row["sample"], n)] = row["f1"]
    return out


def paired_differences(results: dict[str, Any], peer_ids: set[str]) -> dict[str, Any]:
    """offline_mem minus each other system in answerable F1 points on the same questions, with
    the standard error of the mean paired difference (the peer: on its samples)."""
    if "questions" not in results.get("offline_mem", {}):
        return {}
    om = _answerable_f1_by_question(results["offline_mem"])
    out = {}
    for name, result in results.items():
        if name == "offline_mem" or "questions" not in result:
            continue
        other = _answerable_f1_by_question(result)
        keys = [k for k in om if k in other and (name != "mem0" or k[0] in peer_ids)]
        diffs = [100.0 * (om[k] - other[k]) for k in keys]
        if len(diffs) < 2:
            continue
        mean = sum(diffs) / len(diffs)
        var = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
        out[name] = {"questions": len(diffs), "points": mean, "se": (var / len(diffs)) ** 0.5}
    return out


def targets(
    summaries: dict[str, dict[str, Any]], on_peer: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Issues 19's and 20's targets, each as measured in this run (None where a system is
    missing). Comparisons with the peer use every system on the peer's samples (`on_peer`)."""
    om, nv = summaries.get("offline_mem"), summaries.get("naive")
    peer = on_peer or summaries
    om_p, m0 = peer.get("offline_mem"), peer.get("mem0")

    def diff(a: dict[str, Any] | None, b: dict[str, Any] | None, key: str) -> float | None:
        if a is None or b is None or a[key] is None or b[key] is None:
            return None
        return 100.0 * (a[key] - b[key])

    def ratio(key: str) -> float | None:
        if om_p is None or m0 is None or not om_p[key] or not m0[key]:
            return None
        return om_p[key] / m0[key]

    def own(key: str) -> float | None:
        return None if om is None else om[key]

    checks = [
        (
            "answer F1 (answerable): offline_mem - naive (points)",
            diff(om, nv, "f1_answerable"),
            ">= 8",
            lambda v: v >= 8,
        ),
        (
            "answer F1 (answerable): offline_mem - mem0 (points, peer's samples)",
            diff(om_p, m0, "f1_answerable"),
            ">= 25",
            lambda v: v >= 25,
        ),
        (
            "gold tokens in results: offline_mem - naive (points)",
            diff(om, nv, "gold_in_context"),
            ">= 0",
            lambda v: v >= 0,
        ),
        (
            "evidence recall: offline_mem - naive (points)",
            diff(om, nv, "evidence_recall"),
            "> 0",
            lambda v: v > 0,
        ),
        ("search p50 (ms): offline_mem", own("search_p50_ms"), "<= 20", lambda v: v <= 20),
        (
            "search p50: offline_mem / mem0 (peer's samples)",
            ratio("search_p50_ms"),
            "<= 0.5",
            lambda v: v <= 0.5,
        ),
        ("add p50 (s): offline_mem", own("add_p50_s"), "<= 8", lambda v: v <= 8),
        ("add p95 (s): offline_mem", own("add_p95_s"), "<= 15", lambda v: v <= 15),
        (
            "add p50: offline_mem / mem0 (peer's samples)",
            ratio("add_p50_s"),
            "<= 0.2",
            lambda v: v <= 0.2,
        ),
    ]
    return [
        {"target": t, "value": v, "goal": g, "met": None if v is None else bool(ok(v))}
        for t, v, g, ok in checks
    ]


# -- environment ------------------------------------------------------------------------------


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def environment(cfg: dict[str, Any]) -> dict[str, Any]:
    from importlib import metadata

    from offline_mem.extraction.prompts import PROMPT_VERSION
    from offline_mem.extraction.supersession import CHECK_PROMPT_VERSION
    from offline_mem.pinned.manifest import load_manifest

    from .answer import ANSWER_PROMPT_VERSION

    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    manifest = load_manifest()
    names = sorted({cfg["extractor"], cfg["answer_model"], "all-MiniLM-L6-v2", "en_core_web_sm"})
    models = {}
    for name in names:
        spec = manifest.get(name)
        models[name] = {
            "role": spec.role,
            "chat_format": spec.chat_format,
            "files": {f.path: {"sha256": f.sha256, "size": f.size} for f in spec.files},
        }
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "git_commit": commit,
        "packages": versions,
        "models": models,
        "offline_mem_prompt_version": f"{PROMPT_VERSION} + {CHECK_PROMPT_VERSION}",
        "answer_prompt_version": ANSWER_PROMPT_VERSION,
        "stemmer": STEMMER_NAME,
    }


# -- CLI --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="offline_mem vs naive vs Mem0 on LoCoMo-format data")
    p.add_argument("--data", type=Path, help="a LoCoMo-format JSON file (default: generate)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--personas", type=int, default=1)
    p.add_argument("--sessions", type=int, default=6)
    p.add_argument("--turns-per-session", type=int, default=6)
    p.add_argument("--per-type", type=int, default=3, help="questions per type per persona")
    p.add_argument("--chunk", type=int, default=2, help="turns per add")
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--max-turns", type=int, help="ingest at most this many turns per sample")
    p.add_argument("--max-questions", type=int, help="at most this many questions per sample")
    p.add_argument(
        "--max-sessions",
        type=int,
        help="ingest only the first N sessions of each sample (default: 4 with --data, else all)",
    )
    p.add_argument("--all-sessions", action="store_true", help="ingest every session")
    p.add_argument("--samples", help="sample ids (comma-separated) or a count N (the first N)")
    p.add_argument(
        "--peer-samples",
        help="Mem0 only on these of the samples (ids or a count N); the comparisons with it are "
        "made on its samples (default: all)",
    )
    p.add_argument(
        "--reuse-ingest",
        action="store_true",
        help="search the memory files a previous run left in --workdir instead of adding again "
        "(offline_mem; for trying ranking changes on the same memories)",
    )
    # run order: the peer first, so a failure to start it shows early
    p.add_argument("--systems", default="mem0,offline_mem,naive")
    p.add_argument("--extractor", default=DEFAULT_MODEL, help="offline_mem's and Mem0's LLM")
    p.add_argument("--answer-model", default=DEFAULT_MODEL)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--peer-n-ctx", type=int, default=16384)
    p.add_argument("--name", default="default", help="results file stem suffix")
    p.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--workdir", type=Path, help="where memory files go (default: a temp dir)")
    p.add_argument(
        "--replay",
        type=Path,
        help="offline_mem's extraction answers read from this trace of an earlier run "
        "(OFFLINE_MEM_BENCH_TRACE) instead of the model, for --without",
    )
    p.add_argument(
        "--without",
        help="offline_mem without this fact check (a class name in checks.pipeline.FACT_CHECKS, "
        "or ChangeGate): the per-check ablation, best with --replay",
    )
    p.add_argument(
        "--answer-cache",
        type=Path,
        help="a JSONL file of answers by prompt, reused and extended (for ablations: only the "
        "questions whose results changed are answered again)",
    )
    p.add_argument("--retrieve", help=argparse.SUPPRESS)  # internal: one system's phase
    p.add_argument("--retrieve-out", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def max_sessions_of(args: argparse.Namespace) -> int | None:
    """--max-sessions N; else every session with --all-sessions or generated data (no --data),
    else DEFAULT_MAX_SESSIONS."""
    if args.max_sessions is not None:
        return int(args.max_sessions)
    return None if args.all_sessions or not args.data else DEFAULT_MAX_SESSIONS


def config_of(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "data": str(args.data) if args.data else None,
        "seed": args.seed,
        "personas": args.personas,
        "sessions": args.sessions,
        "turns_per_session": args.turns_per_session,
        "per_type": args.per_type,
        "chunk": args.chunk,
        "top_k": args.top_k,
        "max_turns": args.max_turns,
        "max_questions": args.max_questions,
        "max_sessions": max_sessions_of(args),
        "samples": args.samples,
        "peer_samples": args.peer_samples,
        "reuse_ingest": args.reuse_ingest,
        "systems": args.systems.split(","),
        "extractor": args.extractor,
        "answer_model": args.answer_model,
        "threads": args.threads,
        "peer_n_ctx": args.peer_n_ctx,
        "name": args.name,
        "replay": str(args.replay) if args.replay else None,
        "without": args.without,
        "answer_cache": str(args.answer_cache) if args.answer_cache else None,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = config_of(args)
    if args.retrieve:  # child process
        result = retrieve(args.retrieve, args.data, cfg, args.workdir)
        args.retrieve_out.write_text(json.dumps(result))
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="locomo-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started, load_before = time.time(), load_average()
    data = args.data
    if data is None:
        from .dataset import generate

        data = workdir / "dataset.json"
        samples_raw = generate(
            args.seed,
            personas=args.personas,
            sessions=args.sessions,
            turns_per_session=args.turns_per_session,
            per_type=args.per_type,
        )
        data.write_text(json.dumps(samples_raw, ensure_ascii=False))
    samples = samples_of("offline_mem", data, cfg)
    retrievals: dict[str, dict[str, Any]] = {}
    for name in cfg["systems"]:
        out = workdir / f"retrieval_{name}.json"
        child = [
            sys.executable,
            "-m",
            "benchmarks.locomo.run",
            *(argv or sys.argv[1:]),
            "--data",
            str(data),
            "--workdir",
            str(workdir / name),
            # the child always gets --data (the generated file too): tell it the sessions
            *(["--all-sessions"] if cfg["max_sessions"] is None else []),
            "--retrieve",
            name,
            "--retrieve-out",
            str(out),
        ]
        (workdir / name).mkdir(exist_ok=True)
        print(f"== {name}: ingest and search", flush=True)
        code = subprocess.run(child, cwd=ROOT, check=False).returncode
        if code != 0 or not out.exists():
            print(f"== {name}: FAILED with exit code {code}; continuing without it", flush=True)
            retrievals[name] = {"system": name, "failed": f"exit code {code}"}
            continue
        retrievals[name] = json.loads(out.read_text())
    from .answer import Answerer, CachedAnswerer

    print("== answering", flush=True)
    answerer: Any = Answerer(cfg["answer_model"], threads=cfg["threads"])
    if args.answer_cache:
        answerer = CachedAnswerer(answerer, args.answer_cache)
    results: dict[str, Any] = {}
    for name, retrieval in retrievals.items():
        results[name] = (
            retrieval
            if "failed" in retrieval
            else score_system(retrieval, samples_of(name, data, cfg), cfg, answerer)
        )
    answerer.close()
    if args.answer_cache:
        print(f"== {answerer.reused} answers reused from {args.answer_cache}", flush=True)
    order = sorted(results, key=lambda n: SYSTEMS.index(n) if n in SYSTEMS else len(SYSTEMS))
    results = {n: results[n] for n in order}
    summaries = {n: r["summary"] for n, r in results.items() if "summary" in r}
    peer_ids = sorted(s.sample_id for s in samples_of("mem0", data, cfg))
    on_peer = {
        n: summarize_on(retrievals[n], r["questions"], set(peer_ids))
        for n, r in results.items()
        if "questions" in r
    }
    report = {
        "benchmark": "locomo-format side by side",
        "config": cfg,
        "dataset": {
            "path": str(data),
            "samples": len(samples),
            "turns_ingested": sum(
                len(ingested_ids(s, cfg["max_turns"], cfg.get("max_sessions"))) for s in samples
            ),
            "questions": sum(len(questions_of(s, cfg)) for s in samples),
        },
        "environment": environment(cfg),
        "machine_load": {
            "loadavg_start": load_before,
            "loadavg_end": load_average(),
            "wall_s": round(time.time() - started, 1),
        },
        "answers_reused": getattr(answerer, "reused", None),  # from --answer-cache
        "summary": summaries,
        # every system on the peer's samples only (= summary when the peer ran on all of them)
        "peer_samples": peer_ids,
        "summary_on_peer_samples": on_peer,
        "paired": paired_differences(results, set(peer_ids)),
        "targets": targets(summaries, on_peer),
        "systems": results,
    }
    from .report import write_all

    if args.data is not None:
        # A real dataset's licence keeps its text out of this repository: the full report (with
        # questions, answers and retrieved texts) stays in the workdir, the committed one has
        # scores, ids and timings only.
        full = workdir / f"locomo_{args.name}_full.json"
        full.write_text(json.dumps(report, ensure_ascii=False, indent=1))
        print(f"wrote {full} (with the dataset's text; not for the repository)")
        report = without_text(report)
    for path in write_all(report, args.out_dir, f"locomo_{args.name}"):
        print(f"wrote {path}")
    return 0


TEXT_FIELDS = ("question", "gold", "answer", "retrieved")


def without_text(report: dict[str, Any]) -> dict[str, Any]:
    """The report with every field that quotes the dataset (or a memory made from it) removed;
    scores, evidence ids, flags and timings stay."""
    systems = {}
    for name, result in report["systems"].items():
        result = dict(result)
        if "questions" in result:
            result["questions"] = [
                {k: v for k, v in row.items() if k not in TEXT_FIELDS}
                for row in result["questions"]
            ]
        systems[name] = result
    return {**report, "systems": systems, "text_removed": list(TEXT_FIELDS)}


if __name__ == "__main__":
    raise SystemExit(main())
