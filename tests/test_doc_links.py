"""Every relative link in README.md, CONTRIBUTING.md, CHANGELOG.md and docs/ points at a file
that exists, and a `#fragment` at a heading of that file (GitHub's anchors). A broken link
fails here instead of on a reader."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULT_TABLES = ROOT / "docs" / "results"
PAGES = sorted(
    [
        ROOT / name
        for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")
        if (ROOT / name).exists()
    ]
    + list((ROOT / "docs").rglob("*.md"))
    + [ROOT / "benchmarks" / "results" / "README.md"]
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def prose(text: str) -> str:
    """The page without its fenced code blocks (a `# comment` there is no heading)."""
    return FENCE.sub("", text)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation out, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", prose(path.read_text(encoding="utf-8")), re.M):
        slug = anchor(heading)
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text(encoding="utf-8")))


def test_the_anchor_rule() -> None:
    assert anchor("Search returns evidence: facts and the turns behind them") == (
        "search-returns-evidence-facts-and-the-turns-behind-them"
    )
    assert anchor("How `add` extracts facts") == "how-add-extracts-facts"
    assert anchor("The llama.cpp build") == "the-llamacpp-build"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, fragment = target.partition("#")
        path = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, broken


def test_the_readme_links_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in (ROOT / "docs").rglob("*.md"):
        if page.parent == RESULT_TABLES:
            continue  # a rendered results table; the results index links it
        assert str(page.relative_to(ROOT)) in readme, f"README.md does not link {page}"


def test_the_results_index_links_every_rendered_table() -> None:
    index = (ROOT / "benchmarks" / "results" / "README.md").read_text(encoding="utf-8")
    for table in RESULT_TABLES.glob("*.md"):
        assert f"docs/results/{table.name}" in index, f"the results index does not link {table}"


def test_the_results_index_names_every_result_file() -> None:
    """benchmarks/results/README.md says what each file is and how it was made: a file it does
    not name is one nobody can place."""
    folder = ROOT / "benchmarks" / "results"
    index = (folder / "README.md").read_text()
    unnamed = [
        path.name
        for path in sorted(folder.iterdir())
        if path.name != "README.md" and path.name not in index
    ]
    assert not unnamed, unnamed


def test_the_results_folder_holds_one_file_per_benchmark() -> None:
    """One current result per benchmark: the folder stays small enough to read (at most 25 files
    beside its index); a superseded run leaves it, and its figures go to the history page."""
    files = [p for p in (ROOT / "benchmarks" / "results").iterdir() if p.name != "README.md"]
    assert len(files) <= 25, sorted(p.name for p in files)
