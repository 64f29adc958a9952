"""`offline-mem add | search | list | get | update | delete | delete-all | history`, with fake
models: human output, --json output, one-line errors and exit codes."""

from __future__ import annotations

import json

import pytest
from cli_helpers import Cli, install

from offline_mem.errors import ExtractionError, ScopeRequiredError
from offline_mem.testing import answer


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Cli:
    return install(monkeypatch, tmp_path)


def test_add_search_list_get_without_inference(cli: Cli) -> None:
    out = cli.ok(
        "add",
        "--user",
        "u1",
        "--no-infer",
        "--metadata",
        '{"topic": "home"}',
        "The wifi password is tulip-42",
    )
    assert out.startswith("ADD ") and out.rstrip().endswith("The wifi password is tulip-42")
    added = cli.json(
        "add", "--user", "u1", "--no-infer", "--expires", "2999-01-01", "I like green tea"
    )["results"]
    assert [r["memory"] for r in added] == ["I like green tea"]
    cli.ok("add", "--user", "u2", "--no-infer", "u2 has a wifi password too")

    hits = cli.json("search", "--user", "u1", "wifi password")["results"]
    assert hits[0]["memory"] == "The wifi password is tulip-42"
    assert {h["user_id"] for h in hits} == {"u1"}
    text = cli.ok("search", "--user", "u1", "--explain", "wifi password")
    first = text.splitlines()[0].split("  ")
    assert float(first[0]) == pytest.approx(hits[0]["score"], abs=1e-3)
    assert "semantic" in text.splitlines()[1]
    assert "no memories found" in cli.ok("search", "--user", "nobody", "wifi")

    listed = cli.json("list", "--user", "u1")["results"]
    assert [m["memory"] for m in listed] == ["I like green tea", "The wifi password is tulip-42"]
    assert cli.ok("list", "--user", "u1", "--filters", '{"topic": "home"}').count("\n") == 1
    item = cli.json("get", "--sources", hits[0]["id"])
    assert item["metadata"] == {"topic": "home"}
    assert item["sources"][0]["content"] == "The wifi password is tulip-42"
    human = cli.ok("get", added[0]["id"])
    assert human.splitlines()[0] == "I like green tea" and "expiration_date: 2999-01-01" in human


def test_add_messages_from_stdin_with_inference(cli: Cli) -> None:
    cli.script.append(answer("User lives in Lisbon.", "User likes tea."))
    messages = [
        {"role": "user", "content": "I live in Lisbon and I like tea"},
        {"role": "assistant", "content": "Noted."},
    ]
    out = cli.ok("add", "--user", "u1", "--messages", "-", input=json.dumps(messages))
    assert [line.split("  ")[-1] for line in out.splitlines()] == [
        "User lives in Lisbon.",
        "User likes tea.",
    ]
    assert cli.extractors[-1].calls[0].kind == "facts"
    cli.script.append(ExtractionError("the model timed out"))
    result = cli.run("add", "--user", "u1", "I moved to Porto")
    assert result.exit_code == 1
    assert result.stderr == "error: the model timed out\n"
    cli.script.append({})
    assert cli.ok("add", "--user", "u1", "Hello") == "nothing new to remember\n"


def test_update_history_delete(cli: Cli) -> None:
    mid = cli.json("add", "--user", "u1", "--no-infer", "I live in Lisbon")["results"][0]["id"]
    out = cli.ok("update", mid, "I live in Porto", "--metadata", '{"city": "Porto"}')
    assert out == f"updated {mid}  I live in Porto\n"
    item = cli.json("update", mid, "--expires", "2999-12-31")
    assert item["metadata"] == {"city": "Porto"} and item["expiration_date"] == "2999-12-31"
    assert "expiration_date" not in cli.json("update", mid, "--no-expiry")
    events = [row["event"] for row in cli.json("history", mid)]
    assert events == ["ADD", "UPDATE", "UPDATE", "UPDATE"]
    assert "I live in Lisbon -> I live in Porto" in cli.ok("history", mid)
    assert cli.run("delete", "--user", "someone-else", mid).exit_code == 1
    assert cli.ok("delete", mid) == f"deleted {mid}  I live in Porto\n"
    assert cli.json("history", mid)[-1]["event"] == "DELETE"
    result = cli.run("get", mid)
    assert result.exit_code == 1 and result.stderr == f"error: no memory with id {mid!r}\n"


def test_delete_all_asks_unless_yes(cli: Cli) -> None:
    for text in ("one fact", "another fact"):
        cli.ok("add", "--user", "u1", "--no-infer", text)
    cli.ok("add", "--user", "u2", "--no-infer", "kept")
    result = cli.run("delete-all", "--user", "u1", input="n\n")
    assert result.exit_code == 1 and "Aborted" in result.stderr
    assert cli.ok("delete-all", "--user", "u1", input="y\n").endswith("deleted 2 memories\n")
    assert cli.json("delete-all", "--user", "u2", "--yes") == {"deleted": 1}
    assert cli.run("delete-all").exit_code == 2  # no scope named: a usage error


def test_errors_are_one_line_with_exit_1(cli: Cli) -> None:
    cases = [
        (["add", "--no-infer", "no scope"], "error: at least one of user_id"),
        (["add", "--user", "u1", "--metadata", "{nope", "x"], "error: --metadata is not valid"),
        (["add", "--user", "u1", "--metadata", "[1]", "x"], "error: --metadata must be a JSON"),
        (["add", "--user", "u1", "--expires", "soon", "x"], "error: expiration_date must be"),
        (["search", "--user", "u 1", "x"], "error: user_id must not contain whitespace"),
        (["history", "no-such-id"], "error: no history for memory id"),
    ]
    for args, start in cases:
        result = cli.run(*args)
        assert result.exit_code == 1, args
        assert result.stderr.startswith(start), (args, result.stderr)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert cli.run("add", "--user", "u1").exit_code == 2  # neither TEXT nor --messages
    with pytest.raises(ScopeRequiredError):  # --debug: the exception itself, with its traceback
        cli.run("--debug", "add", "--no-infer", "no scope")


def test_search_explain_shows_a_resolved_reference(cli: Cli) -> None:
    cli.ok("add", "--user", "u1", "--no-infer", "My neighbour, Bruno, is a carpenter.")
    cli.ok("add", "--user", "u1", "--no-infer", "Bruno lives in Aarhus.")
    text = cli.ok("search", "--user", "u1", "--explain", "Where does my neighbour live?")
    assert text.splitlines()[0] == "also searched as: Where does Bruno live?"
    plain = cli.ok("search", "--user", "u1", "Where does my neighbour live?")
    assert "also searched as" not in plain
