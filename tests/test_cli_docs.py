"""Every `offline-mem` command is documented in README.md's "Command line" section and has --help
(as sqlite-utils' tests/test_docs.py does for its CLI)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from offline_mem.cli import main

README = Path(__file__).resolve().parent.parent / "README.md"


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from command_paths(command, (*prefix, name))


def cli_section() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## Command line\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert match, "README.md has no '## Command line' section"
    return match.group(1)


PATHS = list(command_paths(main))


def test_the_tree_holds_every_command() -> None:
    top = {path[0] for path in PATHS}
    assert top >= {
        "add",
        "search",
        "list",
        "get",
        "update",
        "delete",
        "delete-all",
        "history",
        "stats",
        "export",
        "import",
        "verify",
        "backup",
        "chat",
        "mcp",
        "models",
    }


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_command_is_in_the_readme(path: tuple[str, ...]) -> None:
    section = cli_section()
    if len(path) == 1:
        assert re.search(rf"^offline-mem {re.escape(path[0])}\b", section, re.MULTILINE), path
    else:  # a subcommand: on a line `offline-mem GROUP ...` naming it
        lines = [
            line
            for line in section.splitlines()
            if line.startswith(f"offline-mem {' '.join(path[:-1])} ")
        ]
        assert any(re.search(rf"\b{re.escape(path[-1])}\b", line) for line in lines), path


@pytest.mark.parametrize("path", [(), *PATHS], ids=lambda p: " ".join(p) or "main")
def test_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: ")
    help_text = result.stdout.split("\n\n", 2)[1].strip()
    assert help_text and not help_text.startswith("Options:"), f"{path} has no description"
