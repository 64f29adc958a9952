"""The docs say what the code does: docs/api.md's configuration table lists exactly the keys
`MemoryConfig` accepts, and its Errors section names every error class the library raises on
purpose (as tests/test_cli_docs.py does for the commands)."""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import fields
from pathlib import Path

import pytest

import offline_mem
from offline_mem import errors
from offline_mem.config import MemoryConfig
from offline_mem.errors import ConfigError, OfflineMemError

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
API_PAGE = ROOT / "docs" / "api.md"
SEARCH_PAGE = ROOT / "docs" / "search.md"


def section(title: str, page: Path = API_PAGE) -> str:
    text = page.read_text(encoding="utf-8")
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"{page.name} has no {title!r} section"
    return match.group(1)


def documented_config_keys() -> list[str]:
    return re.findall(r"^\| `([a-z_]+)` \|", section("Configuration"), re.MULTILINE)


def error_classes() -> set[str]:
    """Every class of the package that derives from OfflineMemError, wherever it is defined
    (read from the source, so no optional dependency has to be importable)."""
    found = {"OfflineMemError"}
    classes = []
    for path in (ROOT / "offline_mem").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in
                         node.bases}  # fmt: skip
                classes.append((node.name, bases))
    grown = True
    while grown:
        grown = False
        for name, bases in classes:
            if name not in found and bases & found:
                found.add(name)
                grown = True
    return found


def test_the_config_table_lists_exactly_the_accepted_keys() -> None:
    documented = documented_config_keys()
    assert len(documented) == len(set(documented)), documented
    assert set(documented) == {f.name for f in fields(MemoryConfig)}


@pytest.mark.parametrize("key", ["extra", "vector_store", "llm"])
def test_an_undocumented_key_is_an_error(key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        MemoryConfig.from_dict({key: {}})


def test_every_error_class_is_named_in_the_errors_section() -> None:
    text = section("Errors")
    named = set(re.findall(r"`([A-Za-z]+Error)`", text))
    the_builtins = {name for name in named if hasattr(builtins, name)}  # "also a ValueError"
    assert error_classes() == named - the_builtins


def test_every_class_of_the_errors_module_is_exported() -> None:
    defined = {
        name for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, OfflineMemError)
    }  # fmt: skip
    assert defined <= set(offline_mem.__all__)
    assert defined == error_classes()  # the source scan sees them too, and no error elsewhere


@pytest.mark.parametrize("page", [README, SEARCH_PAGE], ids=lambda p: p.name)
def test_the_docs_say_how_the_keyword_index_works(page: Path) -> None:
    """Our own BM25 over postings tables, not SQLite's FTS5 (which the code never uses)."""
    text = " ".join(page.read_text(encoding="utf-8").split())
    assert "postings tables" in text and "not SQLite's FTS5" in text
    keyword_tables = "".join(
        path.read_text(encoding="utf-8")
        for path in sorted((ROOT / "offline_mem" / "store" / "migrations").glob("*.py"))
    )
    assert "CREATE TABLE keyword_postings" in keyword_tables
    assert not re.search(r"USING\s+fts5", keyword_tables, re.IGNORECASE)
