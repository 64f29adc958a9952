"""Write a run's results: the full JSON, a markdown table and two PNG plots, each carrying the
configuration that produced it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..tables import table_path

TYPE_ORDER = ("single_fact", "latest", "temporal", "multi_hop", "not_mentioned", "open_domain")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def config_line(report: dict[str, Any]) -> str:
    c, d = report["config"], report["dataset"]
    source = c["data"] or (
        f"synthetic seed {c['seed']}, {c['personas']} persona(s) x "
        f"{c['sessions']} sessions x {c['turns_per_session']} turns"
    )
    return (
        f"{source}; {d['turns_ingested']} turns, {d['questions']} questions; chunk "
        f"{c['chunk']} turns, top-{c['top_k']}; extractor and answer model "
        f"{c['extractor']} / {c['answer_model']}; {c['threads']} threads"
    )


ROWS: tuple[tuple[str, Any, int], ...] = (
    ("answer F1 (all questions)", "f1", 3),
    ("answer F1 (answerable)", "f1_answerable", 3),
    ("F1 by type", "f1_by_type", 3),  # expanded into one row per type
    ("evidence recall@k", "evidence_recall", 3),
    ("gold tokens in retrieved", "gold_in_context", 3),
    ("not-mentioned rate (NM questions)", "not_mentioned_rate", 3),
    ("false not-mentioned (answerable)", "false_not_mentioned_rate", 3),
    ("add p50 (s)", "add_p50_s", 2),
    ("add p95 (s)", "add_p95_s", 2),
    ("add max (s)", "add_max_s", 2),
    (
        "adds / failed / ran to max_tokens / stored nothing",
        ("adds", "adds_failed", "adds_hit_max_tokens", "adds_storing_nothing"),
        0,
    ),
    ("extraction prompt tokens per add", "extraction_prompt_tokens_per_add", 0),
    ("extraction completion tokens (total)", "extraction_completion_tokens", 0),
    ("answer prompt tokens per question", "answer_prompt_tokens_per_question", 0),
    ("search p50 (ms)", "search_p50_ms", 1),
    ("search p95 (ms)", "search_p95_ms", 1),
    ("memories stored", "memories_stored", 0),
    ("storage (KiB)", "storage_bytes", 0),
    ("peak RSS (MiB)", "peak_rss_mib", 0),
    ("LLM server peak RSS (MiB)", "server_peak_rss_mib", 0),
    ("ingest wall time (s)", "ingest_s", 1),
    ("load average (1 min) at ingest start / end", "loadavg_start_end", 0),
)
# the rows that mean something on a subset of the samples (the peer's)
SUBSET_ROWS = ("f1", "f1_answerable", "f1_by_type", "evidence_recall", "gold_in_context")
SUBSET_ROWS += ("add_p50_s", "add_p95_s", "search_p50_ms", "search_p95_ms")


def _cell(summary: dict[str, Any], key: Any, digits: int) -> str:
    if isinstance(key, tuple) and key[0] == "f1_by_type":
        value: Any = summary["f1_by_type"].get(key[1])
    elif isinstance(key, tuple):
        value = " / ".join(str(summary[k]) for k in key)
    elif key == "loadavg_start_end":
        pair = summary.get(key) or [None, None]
        value = " / ".join("—" if p is None else f"{p[0]:.1f}" for p in pair)
    elif key == "storage_bytes":
        value = summary[key] / 1024.0
    else:
        value = summary[key]
    return _fmt(value, digits) if digits else _fmt(_round(value), 0)


def table(summaries: dict[str, dict[str, Any]], keys: tuple[str, ...] | None = None) -> list[str]:
    """A markdown table of the summaries, one column per system (`keys`: only those rows)."""
    names = list(summaries)
    types = [t for t in TYPE_ORDER if any(t in summaries[n]["f1_by_type"] for n in names)]
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for label, key, digits in ROWS:
        if keys is not None and (not isinstance(key, str) or key not in keys):
            continue
        expanded = (
            [(f"F1 {t}", ("f1_by_type", t)) for t in types]
            if key == "f1_by_type"
            else [(label, key)]
        )
        for row_label, row_key in expanded:
            cells = [_cell(summaries[n], row_key, digits) for n in names]
            lines.append(f"| {row_label} | " + " | ".join(cells) + " |")
    return lines


def markdown(report: dict[str, Any]) -> str:
    s = report["summary"]
    names = list(s)
    lines = [
        f"# LoCoMo-format benchmark: {', '.join(names)}",
        "",
        f"Configuration: {config_line(report)}.",
        "",
        *table(s),
    ]
    on_peer = report.get("summary_on_peer_samples") or {}
    peer_ids = report.get("peer_samples") or []
    if "mem0" in s and on_peer and report["dataset"]["samples"] > len(peer_ids):
        lines += [
            "",
            f"mem0 ran on {len(peer_ids)} of the {report['dataset']['samples']} samples: its "
            "column above is those samples'; every system on them alone:",
            "",
            f"## On the peer's samples only ({', '.join(peer_ids)})",
            "",
            *table(on_peer, SUBSET_ROWS),
        ]
    paired = report.get("paired") or {}
    if paired:
        lines += ["", "Paired on the same answerable questions (offline_mem minus the other):"]
        for name, p in paired.items():
            lines.append(
                f"- {name}: {p['points']:+.1f} F1 points, SE {p['se']:.1f} "
                f"({p['questions']} questions)"
            )
    lines += [
        "",
        "## Targets (from this one run)",
        "",
        "| target | measured | goal | met |",
        "|---|---|---|---|",
    ]
    for t in report["targets"]:
        met = {True: "yes", False: "no", None: "—"}[t["met"]]
        lines.append(f"| {t['target']} | {_fmt(t['value'], 2)} | {t['goal']} | {met} |")
    failed = [n for n, r in report["systems"].items() if "failed" in r]
    if failed:
        lines += ["", f"Systems that failed to run: {', '.join(failed)}."]
    env, load = report["environment"], report["machine_load"]
    pk = env["packages"]
    lines += [
        "",
        "## Environment",
        "",
        f"- machine: {env['platform']}, {env['cpu_count']} CPUs, shared; load average "
        f"(1/5/15 min) at start {load['loadavg_start']}, at end {load['loadavg_end']}; "
        f"wall time {load['wall_s']} s",
        f"- python {env['python']}; git {env['git_commit']}; stemmer {env['stemmer']}; "
        f"prompts: offline_mem {env['offline_mem_prompt_version']}, answer "
        f"{env['answer_prompt_version']}",
        "- packages: " + ", ".join(f"{k} {v}" for k, v in pk.items() if v),
        "- models (sha256 of each file, verified before loading):",
    ]
    for name, model in env["models"].items():
        files = ", ".join(
            f"{p} {f['sha256'][:16]}…"
            for p, f in model["files"].items()
            if p.endswith((".gguf", ".safetensors")) or len(model["files"]) == 1
        )
        files = files or f"{len(model['files'])} files"
        lines.append(f"  - {name} ({model['role']}): {files}")
    lines += [
        "",
        "Full per-question rows, per-add records and every file hash: the JSON beside this file.",
        "",
    ]
    return "\n".join(lines)


def _round(value: Any) -> Any:
    return round(value) if isinstance(value, float) else value


def plots(report: dict[str, Any], stem: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = report["summary"]
    names = list(s)
    if not names:
        return []
    caption = config_line(report)
    types = [t for t in TYPE_ORDER if any(t in s[n]["f1_by_type"] for n in names)]
    groups = [*types, "overall", "evidence recall"]
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(names)
    for i, n in enumerate(names):
        values = [s[n]["f1_by_type"].get(t) or 0.0 for t in types]
        values += [s[n]["f1"] or 0.0, s[n]["evidence_recall"] or 0.0]
        ax.bar([g + i * width for g in range(len(groups))], values, width, label=n)
    ax.set_xticks([g + width * (len(names) - 1) / 2 for g in range(len(groups))], groups)
    ax.set_ylim(0, 1)
    ax.set_ylabel("answer F1 (evidence recall for the last group)")
    ax.set_title("Answer quality by question type", fontsize=11)
    ax.legend()
    fig.text(0.01, 0.01, caption, fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    quality = stem.with_name(stem.name + "_quality.png")
    fig.savefig(quality, dpi=110)
    plt.close(fig)

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5))
    systems = report["systems"]
    adds = [[a["seconds"] for a in systems[n].get("adds", [])] or [0.0] for n in names]
    searches = [
        [1000 * q["search_s"] for q in systems[n].get("questions", [])] or [0.0] for n in names
    ]
    left.boxplot(adds, tick_labels=names, showfliers=True)
    left.set_yscale("symlog", linthresh=0.1)
    left.set_ylabel("seconds per add (chunk)")
    left.set_title("Add latency", fontsize=11)
    right.boxplot(searches, tick_labels=names, showfliers=True)
    right.set_ylabel("milliseconds per search")
    right.set_title("Search latency", fontsize=11)
    fig.text(0.01, 0.01, caption, fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    latency = stem.with_name(stem.name + "_latency.png")
    fig.savefig(latency, dpi=110)
    plt.close(fig)
    return [quality, latency]


def write_all(report: dict[str, Any], out_dir: Path, stem_name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / stem_name
    json_path = stem.with_suffix(".json")
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    md_path = table_path(out_dir, f"{stem_name}.md")
    md_path.write_text(markdown(report))
    return [json_path, md_path, *plots(report, stem)]
