"""Driving `offline-mem` in-process with fake models: `Cli` runs commands against one file."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from offline_mem.cli import common, main
from offline_mem.pinned.extractor import Prompt
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor


@dataclass
class Cli:
    """Runs `offline-mem --db <db> ...`; every Memory the CLI builds gets `embedder`, a
    FakeExtractor answering from `script` (its supersession checks from `still_true`), and
    FakeEntities."""

    db: Path
    embedder: FakeEmbedder = field(default_factory=FakeEmbedder)
    script: list[Any] = field(default_factory=list)
    extractors: list[FakeExtractor] = field(default_factory=list)
    still_true: Callable[[Prompt], bool] | None = None

    def models(self, chat: Callable[[str], Any] | None = None) -> common.CliModels:
        def extractor(name: str) -> FakeExtractor:
            fake = FakeExtractor(still_true=self.still_true)
            fake.script = self.script  # shared: items appended later answer later calls
            self.extractors.append(fake)
            return fake

        return common.CliModels(
            embedder=lambda: self.embedder, extractor=extractor, entities=FakeEntities, chat=chat
        )

    def run(self, *args: str, input: str | None = None, db: Path | None = None) -> Result:
        result = CliRunner().invoke(main, ["--db", str(db or self.db), *args], input=input)
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result

    def ok(self, *args: str, input: str | None = None, db: Path | None = None) -> str:
        result = self.run(*args, input=input, db=db)
        assert result.exit_code == 0, result.output + result.stderr
        return result.stdout

    def json(self, *args: str, input: str | None = None, db: Path | None = None) -> Any:
        return json.loads(self.ok("--json", *args, input=input, db=db))


def install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    cli = Cli(db=tmp_path / "m.db")
    monkeypatch.setattr(common, "MODELS", cli.models())
    return cli
