"""Where a benchmark's Markdown table goes.

`benchmarks/results/` holds one data file (JSON) per benchmark; the human-readable table rendered
from it belongs with the documentation, in `docs/results/`, where the topic pages link it. A run
written anywhere else (a scratch folder, a temp dir) keeps its table beside its JSON.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
TABLES = ROOT / "docs" / "results"


def table_path(out_dir: Path, name: str) -> Path:
    """The Markdown file for results named `name` (e.g. "scale.md") written to `out_dir`."""
    if out_dir.resolve() == RESULTS.resolve():
        TABLES.mkdir(parents=True, exist_ok=True)
        return TABLES / name
    return out_dir / name
