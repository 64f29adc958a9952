"""What `"reproducible": true` costs per add: the same real turns added twice, to two fresh files,
once with the KV cache reused (the default) and once with every prompt evaluated from scratch.

    .venv/bin/python -m benchmarks.extraction.reproducible_cost \
        --data ../shared/data/locomo/locomo_dev.json --adds 12 --threads 2

The turns are the first `--adds` two-turn chunks of the first conversation, fed as the LoCoMo
benchmark feeds them (named messages, the session date as timestamp). Each mode runs in its own
`Memory` with its own extractor, the default mode first. Writes
benchmarks/results/reproducible_cost.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.locomo.loader import load_locomo
from benchmarks.locomo.run import chunks_of
from benchmarks.locomo.systems import CallLog, make_recording_extractor

ROOT = Path(__file__).resolve().parents[2]


def run_mode(reproducible: bool, chunks: list[Any], workdir: Path, threads: int) -> dict[str, Any]:
    from offline_mem import Memory
    from offline_mem.config import DEFAULT_EXTRACTOR, resolve_models_dir
    from offline_mem.pinned.extractor import LlamaExtractor

    log = CallLog()
    inner = LlamaExtractor(
        DEFAULT_EXTRACTOR, resolve_models_dir(), threads=threads, reproducible=reproducible
    )
    path = workdir / f"{'reproducible' if reproducible else 'default'}.db"
    memory = Memory(
        {"path": str(path), "threads": threads, "reproducible": reproducible},
        extractor=make_recording_extractor(inner, log),
    )
    adds = []
    try:
        for session, chunk in chunks:
            messages = [{"role": m.role, "content": m.turn.text, "name": m.name} for m in chunk]
            start_call = len(log.calls)
            started = time.perf_counter()
            memory.add(messages, user_id="u", timestamp=session.when.isoformat())
            calls = log.since(start_call)
            adds.append(
                {
                    "seconds": time.perf_counter() - started,
                    "llm_calls": len(calls),
                    "prompt_tokens": sum(c.prompt_tokens for c in calls),
                    "completion_tokens": sum(c.completion_tokens for c in calls),
                }
            )
            print(f"reproducible={reproducible} add {len(adds)} {adds[-1]['seconds']:.1f}s",
                  flush=True)  # fmt: skip
        texts = sorted(r["memory"] for r in memory.get_all(filters={"user_id": "u"})["results"])
    finally:
        memory.close()
    seconds = [a["seconds"] for a in adds]
    return {
        "adds": adds,
        "p50_s": statistics.median(seconds),
        "mean_s": statistics.fmean(seconds),
        "total_s": sum(seconds),
        "memories": texts,  # compared in main(), never written: they quote the dataset
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--adds", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks/results/reproducible_cost.json"
    )
    args = parser.parse_args(argv)
    sample = load_locomo(args.data)[0]
    chunks = chunks_of(sample, 2, None)[: args.adds]
    with tempfile.TemporaryDirectory() as tmp:
        default = run_mode(False, chunks, Path(tmp), args.threads)
        reproducible = run_mode(True, chunks, Path(tmp), args.threads)
    report = {
        "command": "python -m benchmarks.extraction.reproducible_cost "
        f"--data <locomo_dev.json> --adds {args.adds} --threads {args.threads}",
        "sample": sample.sample_id,
        "machine": {"cpu_count": __import__("os").cpu_count(), "platform": platform.platform()},
        "default": default,
        "reproducible": reproducible,
        "p50_ratio": reproducible["p50_s"] / default["p50_s"],
        "mean_extra_s": reproducible["mean_s"] - default["mean_s"],
        "same_memories": default["memories"] == reproducible["memories"],
        "memories_differing": len(set(default["memories"]) ^ set(reproducible["memories"])),
    }
    for mode in ("default", "reproducible"):  # counts only: the texts quote the dataset
        report[mode]["memory_count"] = len(report[mode].pop("memories"))
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    for mode in ("default", "reproducible"):
        r = report[mode]
        prompt = statistics.fmean(a["prompt_tokens"] for a in r["adds"])
        print(f"{mode:13} p50 {r['p50_s']:.2f} s  mean {r['mean_s']:.2f} s  "
              f"prompt tokens/add {prompt:.0f}")  # fmt: skip
    print(f"ratio p50 {report['p50_ratio']:.2f}x, extra per add {report['mean_extra_s']:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
