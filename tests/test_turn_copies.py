"""A fact that writes its source turn out again is dropped (offline_mem/turn_copies.py); the turn
stays searchable as a message."""

from __future__ import annotations

from offline_mem import Memory
from offline_mem.admission import Fact
from offline_mem.records import NewMessage
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer
from offline_mem.turn_copies import drop_turn_copies, is_turn_copy, longest_shared_run

TURN = ("Honestly the repair shop took three weeks to fix the bike and then the brakes failed "
        "again on the first ride up the hill")  # fmt: skip


def fact(text: str, sources: tuple[int, ...] = (0,)) -> Fact:
    return Fact(text=text, sources=sources, attributed_to="user")


def test_a_long_verbatim_run_is_a_copy_a_short_restatement_is_not():
    assert longest_shared_run(["a", "b", "c", "d"], ["x", "b", "c", "d", "y"]) == 3
    copy = "Lena says the repair shop took three weeks to fix the bike and then the brakes failed"
    assert is_turn_copy(copy, TURN)
    assert not is_turn_copy("Lena's bike brakes failed again after a three-week repair.", TURN)
    assert not is_turn_copy("Lena adopted a cat named Pixel.", "I adopted a cat named Pixel.")


def test_copies_are_dropped_with_their_reason():
    messages = [NewMessage("m1", "user", TURN, "Lena", None),
                NewMessage("m2", "user", "ok", None, None)]  # fmt: skip
    copy = fact("Lena says the repair shop took three weeks to fix the bike and the brakes failed")
    good = fact("Lena's bike brakes failed after a repair.")
    other = fact(copy.text, (1,))  # cites a message it does not copy
    kept, dropped = drop_turn_copies([copy, good, other], messages)
    assert kept == [good, other]
    assert dropped == [(copy.text, "a copy of its source message, which is kept")]


def test_the_turn_is_still_found_when_its_copy_is_dropped(tmp_path):
    copy = "Lena says the repair shop took three weeks to fix the bike and then the brakes failed"
    m = Memory({"path": str(tmp_path / "m.db")}, embedder=FakeEmbedder(), entities=FakeEntities(),
               extractor=FakeExtractor(answer(copy, "Lena's bike brakes failed.")))  # fmt: skip
    result = m.add([{"role": "user", "content": TURN, "name": "Lena"}], user_id="lena")
    assert [r["memory"] for r in result["results"]] == ["Lena's bike brakes failed."]
    found = m.search("repair shop bike brakes", filters={"user_id": "lena"})["results"]
    assert any(item["kind"] == "message" and item["content"] == TURN for item in found)
    m.close()
