"""Comments and docstrings in offline_mem/ say why, not when: no rounds, sessions or issue
numbers, no prompt-version log, no result files of past runs. History lives in CHANGELOG.md and
docs/benchmark-history.md; measurements behind constants on docs/design/ pages."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "offline_mem"
NARRATION = [
    re.compile(r"\b(round|session)s? \d+", re.IGNORECASE),  # "round 18", "session 17"
    re.compile(r"\bissues? #?\d+", re.IGNORECASE),  # "issue 19"
    re.compile(r"#\d{2,}\b"),  # "#43"
    re.compile(r"\b(facts|check)-\d+\b"),  # prompt versions: CHANGELOG.md
    re.compile(r"results/\S*_(s\d+|rerun|quiet|facts\d+|replay\w*)\b"),  # runs by history
    re.compile(r"\b(this|last|previous|earlier|next) round\b", re.IGNORECASE),
    re.compile(r"\bcommit [0-9a-f]{7,40}\b"),
]


def comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):  # docstrings: string statements, wherever they stand
        value = node.value if isinstance(node, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found.append((node.lineno, value.value))
    return found


@pytest.mark.parametrize("pattern", NARRATION, ids=lambda p: p.pattern)
def test_the_patterns_catch_narration_and_spare_ordinary_words(pattern: re.Pattern[str]) -> None:
    narration = {
        "Measured in round 18", "session 17", "issue 19 asks", "see #43", "facts-9 keeps",
        "results/locomo_dev8_s20.md", "the previous round", "at commit 48169d9",
    }  # fmt: skip
    ordinary = {
        "earlier exchanges of this chat session", "the MCP session", "rounded up", "4 sessions",
        "round-trip", "the previous session's turns", "results/retrieval.md", "sha256 cc324af0",
    }  # fmt: skip
    assert any(pattern.search(text) for text in narration)
    assert not any(pattern.search(text) for text in ordinary)


def test_no_narration_in_the_package() -> None:
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, text in comments_and_docstrings(path):
            for pattern in NARRATION:
                match = pattern.search(text)
                if match:
                    hits.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {match.group(0)!r}")
    assert not hits, "\n".join(hits)
