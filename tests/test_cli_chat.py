"""`offline-mem chat`: answers come first and survive an extraction failure; memories are used and
shown on request; the real small extractor model answers through stdin."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from cli_helpers import Cli, install

from offline_mem.cli import common
from offline_mem.cli.chat import SYSTEM_PROMPT, ChatModel
from offline_mem.errors import ExtractionError
from offline_mem.testing import answer

SMALL = "qwen2.5-coder-0.5b-instruct"


class FakeChat(ChatModel):
    """Answers "answer N" and records each chat it was given."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, str]]] = []
        self.closed = False

    def reply(self, messages: Sequence[dict[str, str]], *, max_tokens: int) -> str:
        self.calls.append(list(messages))
        return f"answer {len(self.calls)}"

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    return install(monkeypatch, tmp_path)


def test_answer_first_then_remember_and_survive_extraction_failure(cli: Cli, monkeypatch) -> None:
    chat = FakeChat()
    names: list[str] = []
    monkeypatch.setattr(common, "MODELS", cli.models(chat=lambda n: names.append(n) or chat))
    cli.ok("add", "--user", "u1", "--no-infer", "The wifi password is tulip-42")
    cli.script += [answer("User lives in Lisbon."), ExtractionError("model timed out")]
    result = cli.run(
        "chat",
        "--user",
        "u1",
        "--show-memories",
        input="I live in Lisbon\n\nwhat is the wifi password?\n/exit\nignored\n",
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-3:] == ["memories used:", lines[-2], "answer 2"]
    assert lines[-2].endswith("The wifi password is tulip-42")
    assert "answer 1" in lines
    assert result.stderr == (
        "warning: the exchange was not remembered: model timed out\n"
    )  # the answer was printed anyway
    assert names == ["qwen2.5-coder-1.5b-instruct"] and chat.closed
    # the first exchange was remembered, and the second message's chat shows it with the turn
    second = chat.calls[1]
    assert second[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert second[1:3] == [
        {"role": "user", "content": "I live in Lisbon"},
        {"role": "assistant", "content": "answer 1"},
    ]
    known = second[3]["content"].split("\n\nMy message:")[0].splitlines()[1:]
    assert known and all(line.startswith("[") and "] " in line for line in known), known
    assert any(line.endswith("] The wifi password is tulip-42") for line in known), known
    assert second[3]["content"].endswith("My message: what is the wifi password?")
    listed = [m["memory"] for m in cli.json("list", "--user", "u1")["results"]]
    assert listed == ["User lives in Lisbon.", "The wifi password is tulip-42"]
    prompt = cli.extractors[1].calls[0].messages[-1]["content"]
    assert "I live in Lisbon" in prompt and "answer 1" in prompt


def test_json_lines_and_no_remember(cli: Cli, monkeypatch) -> None:
    monkeypatch.setattr(common, "MODELS", cli.models(chat=lambda name: FakeChat()))
    cli.script.append(ExtractionError("boom"))
    out = cli.ok("--json", "chat", "--user", "u1", "--model", "any", input="hi\n")
    events = [json.loads(line) for line in out.splitlines()]
    assert events == [
        {"event": "answer", "message": "hi", "answer": "answer 1"},
        {"event": "warning", "warning": "the exchange was not remembered: boom"},
    ]
    out = cli.ok("chat", "--user", "u1", "--no-remember", input="hello\nagain\n")
    assert out == "answer 1\nanswer 2\n"
    assert cli.json("stats")["counts"]["messages"] == 0
    assert cli.run("chat", input="hi\n").exit_code == 2  # --user is required


@pytest.mark.real_model
def test_chat_with_the_real_small_model(cli: Cli) -> None:
    """The real pinned 0.5B GGUF answers from a memory, then the exchange is remembered."""
    cli.ok("add", "--user", "u1", "--no-infer", "My wifi password is tulip-42")
    cli.script.append(answer("User asked for the wifi password."))
    result = cli.run(
        "chat",
        "--user",
        "u1",
        "--model",
        SMALL,
        "--max-tokens",
        "16",
        input="What is my wifi password?\n",
    )
    assert result.exit_code == 0, result.output
    assert "tulip-42" in result.stdout
    assert cli.json("list", "--user", "u1")["results"][0]["memory"] == (
        "User asked for the wifi password."
    )
