"""Memory in time: each fact's valid_from and valid_to, reads as of a date, and history that
keeps when a change happened beside when it was recorded. Fake models; a hand-written timeline
of one person's moves, jobs and a relationship that ends. The API's tests run on a SQLite file
and on a PostgreSQL database (`module_store`, `any_store`); those of the file's own migration
and `verify` on the file only."""

from __future__ import annotations

import itertools
from datetime import date, datetime, timezone
from typing import Any

import pytest
from store_export import export_lines

from offline_mem.errors import ImportRefusedError, ValidationError
from offline_mem.extraction.lexicon import ENGLISH
from offline_mem.extraction.validity import valid_from
from offline_mem.memory import Memory
from offline_mem.store.candidates import MAX_SUPERSESSIONS, follow_supersessions
from offline_mem.store.db import Database
from offline_mem.store.integrity import verify_file
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer, changes
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.reader import read_export

LISBON = "User lives in Lisbon."
NURSE = "User works as a nurse."
DATING = "User has been dating Tom since 2020."
PORTO = "User lives in Porto now, not in Lisbon."
TEACHER = "User works as a teacher now, no longer as a nurse."
ENDED = "User has stopped dating Tom: they broke up in June 2023."

# (the day it was said, what was said, the fact the model finds in it)
TIMELINE = [
    ("2021-03-10", "I live in Lisbon.", LISBON),
    ("2021-06-01", "I work as a nurse.", NURSE),
    ("2022-02-15", "I have been dating Tom since 2020.", DATING),
    ("2022-09-01", "I live in Porto now, not in Lisbon.", PORTO),
    ("2023-01-20", "I work as a teacher now, no longer as a nurse.", TEACHER),
    ("2023-07-04", "I have stopped dating Tom, we broke up last month.", ENDED),
]
CHANGES = changes((LISBON, PORTO), (NURSE, TEACHER), (DATING, ENDED))

# what was true at the end of each day, as the file knew it then
EXPECTED = {
    "2021-01-01": set(),
    "2021-03-10": {LISBON},
    "2021-12-31": {LISBON, NURSE},
    "2022-03-01": {LISBON, NURSE, DATING},
    "2022-08-31": {LISBON, NURSE, DATING},
    "2022-09-01": {PORTO, NURSE, DATING},
    "2023-02-01": {PORTO, TEACHER, DATING},
    "2023-07-03": {PORTO, TEACHER, DATING},
    "2023-08-01": {PORTO, TEACHER, ENDED},
    "2030-01-01": {PORTO, TEACHER, ENDED},
}


def timeline_memory(store: dict[str, Any]) -> Memory:
    extractor = FakeExtractor(*(answer(fact) for _, _, fact in TIMELINE), still_true=CHANGES)
    m = Memory(store, embedder=FakeEmbedder(), extractor=extractor,
               entities=FakeEntities())  # fmt: skip
    for day, said, _ in TIMELINE:
        m.add(said, user_id="lena", timestamp=f"{day}T10:00:00Z")
    return m


def texts(items: list[dict]) -> set[str]:
    return {item["memory"] for item in items if item.get("kind", "fact") == "fact"}


def by_text(m: Memory) -> dict[str, dict]:
    found = m.get_all(filters={"user_id": "lena"}, include_superseded=True)["results"]
    return {item["memory"]: item for item in found}


@pytest.fixture(scope="module")
def timeline(module_store: dict[str, Any]) -> Memory:
    return timeline_memory(module_store)


def test_the_timeline_was_stored_with_its_three_changes(timeline) -> None:
    stored = by_text(timeline)
    assert set(stored) == {fact for _, _, fact in TIMELINE}
    assert {t for t, item in stored.items() if item["state"] == "superseded"} == {
        LISBON, NURSE, DATING}  # fmt: skip


@pytest.mark.parametrize("day", sorted(EXPECTED))
def test_get_all_as_of_each_date_gives_what_was_true_then(timeline, day) -> None:
    found = timeline.get_all(filters={"user_id": "lena"}, as_of=day)["results"]
    assert texts(found) == EXPECTED[day]


@pytest.mark.parametrize("day", sorted(EXPECTED))
def test_search_as_of_each_date_finds_only_what_was_true_and_said_then(timeline, day) -> None:
    found = timeline.search("Where does she live and work, and with whom?",
                            filters={"user_id": "lena"}, as_of=day, top_k=50,
                            threshold=None)["results"]  # fmt: skip
    assert texts(found) <= EXPECTED[day]
    limit = f"{day}T23:59:59.999999+00:00"
    said = [item for item in found if item["kind"] == "message"]
    assert all(item["observed_at"] <= limit for item in said)
    # every message said by then can be found: the date filter runs before the ranking
    assert len(said) == sum(when <= day for when, _, _ in TIMELINE)


def test_a_datetime_as_of_is_that_moment_and_a_date_the_end_of_its_day(timeline) -> None:
    before = datetime(2022, 9, 1, 9, 59, tzinfo=timezone.utc)
    at = datetime(2022, 9, 1, 10, 0, tzinfo=timezone.utc)

    def true_at(moment: object) -> set[str]:
        return texts(timeline.get_all(filters={"user_id": "lena"}, as_of=moment)["results"])

    assert PORTO not in true_at(before) and PORTO in true_at(at)
    assert true_at(date(2022, 9, 1)) == EXPECTED["2022-09-01"]


def test_valid_from_and_valid_to(timeline) -> None:
    stored = by_text(timeline)
    said = {fact: f"{day}T10:00:00.000000+00:00" for day, _, fact in TIMELINE}
    assert stored[DATING]["valid_from"] == "2020-01-01T00:00:00.000000+00:00"  # the text's
    assert stored[ENDED]["valid_from"] == "2023-06-01T00:00:00.000000+00:00"  # "in June 2023"
    for fact in (LISBON, NURSE, PORTO, TEACHER):
        assert stored[fact]["valid_from"] == said[fact]  # no date in the text: when said
    # a fact stops holding when the message that replaced it was said
    assert stored[LISBON]["valid_to"] == said[PORTO]
    assert stored[NURSE]["valid_to"] == said[TEACHER]
    assert stored[DATING]["valid_to"] == said[ENDED]
    assert all("valid_to" not in stored[fact] for fact in (PORTO, TEACHER, ENDED))
    assert all(i.get("valid_to", i["valid_from"]) >= i["valid_from"] for i in stored.values())


def test_history_keeps_when_a_change_happened_and_when_it_was_recorded(timeline) -> None:
    lisbon = by_text(timeline)[LISBON]
    added, superseded = timeline.history(lisbon["id"])
    assert (added["event"], added["happened_at"]) == ("ADD", "2021-03-10T10:00:00.000000+00:00")
    assert superseded["event"] == "SUPERSEDE"
    assert superseded["happened_at"] == "2022-09-01T10:00:00.000000+00:00"
    assert superseded["created_at"] > "2026"  # recorded when the add ran, today


def test_a_fact_said_out_of_order_never_ends_before_it_began(any_store) -> None:
    """Messages added after later ones, with earlier dates: valid_to is clamped to valid_from."""
    extractor = FakeExtractor(answer(LISBON), answer(PORTO), still_true=changes((LISBON, PORTO)))
    m = Memory(any_store, embedder=FakeEmbedder(), extractor=extractor, entities=FakeEntities())
    m.add("I live in Lisbon.", user_id="lena", timestamp="2023-05-01T00:00:00Z")
    m.add("I live in Porto now, not in Lisbon.", user_id="lena", timestamp="2020-01-01T00:00:00Z")
    old = by_text(m)[LISBON]
    assert old["state"] == "superseded" and old["valid_to"] == old["valid_from"]


def test_raw_turns_get_their_date_from_the_text_too(any_store) -> None:
    m = Memory(any_store, embedder=FakeEmbedder(), entities=FakeEntities())
    m.add("I painted that lake sunrise last year!", user_id="u", infer=False,
          timestamp="2023-05-08T13:56:00Z")  # fmt: skip
    (item,) = m.get_all(filters={"user_id": "u"})["results"]
    assert item["valid_from"] == "2022-01-01T00:00:00.000000+00:00"
    assert item["observed_at"] == "2023-05-08T13:56:00.000000+00:00"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Jon lost his job.", "2023-05-08T13:56:00.000000+00:00"),
        ("Caroline went to a support group on 7 May 2023.", "2023-05-07T00:00:00.000000+00:00"),
        ("Melanie painted a sunrise in 2022.", "2022-01-01T00:00:00.000000+00:00"),
        ("Gina opened her store in March 2021.", "2021-03-01T00:00:00.000000+00:00"),
        ("Runs since 2016; married in May, 2019.", "2019-05-01T00:00:00.000000+00:00"),
        ("Arjun is moving to Oslo in May 2024.", "2023-05-08T13:56:00.000000+00:00"),  # a plan
        ("Nate walks 2022 steps a day.", "2023-05-08T13:56:00.000000+00:00"),  # not a year
        ("Born on 31 February 2020.", "2023-05-08T13:56:00.000000+00:00"),  # no such day
    ],
)
def test_valid_from_of_a_text(text: str, expected: str) -> None:
    assert valid_from(text, "2023-05-08T13:56:00.000000+00:00", ENGLISH) == expected


def test_as_of_and_reference_date_are_checked(timeline) -> None:
    for bad in ("yesterday", 12, "2023-13-01"):
        with pytest.raises(ValidationError):
            timeline.get_all(filters={"user_id": "lena"}, as_of=bad)
        with pytest.raises(ValidationError):
            timeline.search("x", filters={"user_id": "lena"}, reference_date=bad)
    same = timeline.search("Tom", filters={"user_id": "lena"}, reference_date="2022-03-01")
    assert same == timeline.search("Tom", filters={"user_id": "lena"}, as_of="2022-03-01")


def test_validity_survives_export_and_import_and_an_old_export_gets_its_dates(
    timeline, tmp_path
) -> None:
    """Exported from either store, imported into a new file."""
    lines = list(export_lines(timeline))
    target = Memory({"path": str(tmp_path / "b.db")}, embedder=FakeEmbedder(),
                    entities=FakeEntities())  # fmt: skip
    import_data(target, read_export(lines))
    assert by_text(target) == by_text(timeline)
    assert list(export_lines(target))[1:] == lines[1:]  # the header has the time
    # an export written before the columns existed: import gives the message dates
    old_lines = [_without(line, ("valid_from", "valid_to", "happened_at")) for line in lines]
    older = Memory({"path": str(tmp_path / "c.db")}, embedder=FakeEmbedder(),
                   entities=FakeEntities())  # fmt: skip
    import_data(older, read_export(old_lines))
    stored = by_text(older)
    assert stored[DATING]["valid_from"] == "2022-02-15T10:00:00.000000+00:00"  # message date
    assert stored[LISBON]["valid_to"] == "2022-09-01T10:00:00.000000+00:00"
    assert texts(older.get_all(filters={"user_id": "lena"}, as_of="2022-08-31")["results"]) == (
        EXPECTED["2022-08-31"])  # fmt: skip


def _without(line: str, keys: tuple[str, ...]) -> str:
    import json

    row = json.loads(line)
    return json.dumps({k: v for k, v in row.items() if k not in keys})


def test_a_file_from_before_validity_migrates_with_its_messages_dates(tmp_path) -> None:
    path = tmp_path / "old.db"
    timeline_memory({"path": str(path)}).close()
    db = Database(str(path))  # back to what schema 10 wrote
    with db.atomic():
        db.execute("ALTER TABLE memories DROP COLUMN valid_from")
        db.execute("ALTER TABLE memories DROP COLUMN valid_to")
        db.execute("ALTER TABLE history DROP COLUMN happened_at")
        db.execute("DELETE FROM migrations WHERE name = '011_validity'")
        db.execute("UPDATE meta SET value = '10' WHERE key = 'schema_version'")
    db.close()
    m = Memory({"path": str(path)}, embedder=FakeEmbedder(), entities=FakeEntities())
    stored = by_text(m)
    assert stored[DATING]["valid_from"] == "2022-02-15T10:00:00.000000+00:00"
    assert stored[NURSE]["valid_to"] == "2023-01-20T10:00:00.000000+00:00"
    for day, expected in EXPECTED.items():
        assert texts(m.get_all(filters={"user_id": "lena"}, as_of=day)["results"]) == expected
    added, superseded = m.history(stored[LISBON]["id"])
    assert added["happened_at"] == "2021-03-10T10:00:00.000000+00:00"
    assert superseded["happened_at"] == "2022-09-01T10:00:00.000000+00:00"
    assert verify_file(m.store.db, embedder=m.embedder.identity).ok


def test_verify_and_import_check_validity_as_the_store_writes_it(timeline, tmp_path) -> None:
    path = tmp_path / "copy.db"
    lines = list(export_lines(timeline))
    m = Memory({"path": str(path)}, embedder=FakeEmbedder(), entities=FakeEntities())
    import_data(m, read_export(lines))
    assert verify_file(m.store.db, embedder=m.embedder.identity).ok
    with m.store.db.atomic():  # a minute off, as a flipped digit leaves it: still a date
        m.store.db.execute(
            "UPDATE memories SET valid_from = replace(valid_from, '10:00:00', '10:03:00') "
            "WHERE text = ?", (NURSE,),
        )  # fmt: skip
        m.store.db.execute("UPDATE memories SET valid_to = NULL WHERE text = ?", (LISBON,))
    report = verify_file(m.store.db, embedder=m.embedder.identity)
    assert len(report.problems_of("validity")) == 2, report.problems
    for bad in ({"valid_from": "2021-06-01T10:03:00.000000+00:00"}, {"valid_to": None}):
        edited = [_edited(line, NURSE if "valid_from" in bad else LISBON, bad) for line in lines]
        target = Memory({"path": str(tmp_path / f"t{len(bad)}{id(bad)}.db")},
                        embedder=FakeEmbedder(), entities=FakeEntities())  # fmt: skip
        with pytest.raises(ImportRefusedError, match="valid"):
            import_data(target, read_export(edited))


def _edited(line: str, text: str, change: dict) -> str:
    import json

    row = json.loads(line)
    if row.get("type") == "memory" and row.get("text") == text:
        row.update(change)
    return json.dumps(row)


# -- what is true now, found by the words of what it replaced -------------------------------------

HOME = "User lives in Lisbon."
MOVED = "User lives in Porto now."
MOVED_AGAIN = "User lives in Berlin now."


def moves(store: dict[str, Any], *facts: str, metadata: list[dict] | None = None) -> Memory:
    """One add per fact, a month apart, each replacing the one before."""
    pairs = tuple(itertools.pairwise(facts))
    extractor = FakeExtractor(*(answer(f) for f in facts), still_true=changes(*pairs))
    m = Memory(store, embedder=FakeEmbedder(), extractor=extractor, entities=FakeEntities())
    for month, fact in enumerate(facts, start=1):
        m.add(fact.replace("User", "I"), user_id="lena", timestamp=f"2023-0{month}-01",
              metadata=(metadata or [{}] * len(facts))[month - 1])  # fmt: skip
    return m


def facts_found(m: Memory, query: str, **kwargs: Any) -> list[dict]:
    found = m.search(query, filters={"user_id": "lena", **kwargs.pop("filters", {})},
                     threshold=None, explain=True, **kwargs)["results"]  # fmt: skip
    return [item for item in found if item["kind"] == "fact"]


def test_a_search_now_gives_the_replacement_the_score_of_what_it_replaced(any_store) -> None:
    m = moves(any_store, HOME, MOVED)
    ids = {text: item["id"] for text, item in by_text(m).items()}
    # searched in the superseded fact's own words, the fact that replaced it comes first, with
    # the higher score of the two, and names the memory its score came from
    (first, *_) = facts_found(m, "Lisbon")
    assert first["memory"] == MOVED
    assert first["score_details"]["score_carried_from"] == ids[HOME]
    assert HOME not in [item["memory"] for item in facts_found(m, "Lisbon")]
    own = m.search("Lisbon", filters={"user_id": "lena"}, threshold=None, explain=True,
                   include_superseded=True)["results"]  # fmt: skip
    scores = {item["memory"]: item["score"] for item in own if item["kind"] == "fact"}
    assert scores[HOME] > scores[MOVED]  # the words are the old fact's...
    assert first["score"] == scores[HOME]  # ...and so is the score the new one is found with
    # a search that shows superseded facts, or one as of a date, ranks each fact by its own words
    assert "score_carried_from" not in own[0].get("score_details", {})
    (then, *_) = facts_found(m, "Lisbon", as_of="2023-01-15")
    assert then["memory"] == HOME and "score_carried_from" not in then["score_details"]


def test_a_chain_of_replacements_ends_at_the_fact_true_now(any_store) -> None:
    m = moves(any_store, HOME, MOVED, MOVED_AGAIN)
    found = [item["memory"] for item in facts_found(m, "Lisbon")]
    assert found[0] == MOVED_AGAIN
    assert HOME not in found and MOVED not in found
    assert found.count(MOVED_AGAIN) == 1


def test_a_replacement_the_filter_leaves_out_carries_nothing(any_store) -> None:
    m = moves(any_store, HOME, MOVED, metadata=[{"topic": "home"}, {"topic": "travel"}])
    assert [item["memory"] for item in facts_found(m, "Lisbon")] == [MOVED]
    assert facts_found(m, "Lisbon", filters={"topic": "home"}) == []


def test_a_fact_whose_replacement_was_deleted_stays_replaced(any_store) -> None:
    m = moves(any_store, HOME, MOVED)
    m.delete(by_text(m)[MOVED]["id"])
    assert facts_found(m, "Lisbon") == []
    assert [i["memory"] for i in facts_found(m, "Lisbon", include_superseded=True)] == [HOME]


def test_chains_of_supersessions_are_followed_to_their_end() -> None:
    links = {1: 2, 2: 3, 4: None, 6: 7, 7: 6}  # 1 -> 2 -> 3; 4's successor gone; 6 <-> 7
    reads: list[list[int]] = []

    def superseded_by(rowids: list[int]) -> dict[int, int | None]:
        reads.append(rowids)
        return {r: links[r] for r in rowids if r in links}

    ends = follow_supersessions([1, 2, 3, 4, 5, 6], superseded_by)
    assert ends == {1: 3, 2: 3, 4: None, 6: None}  # 3 and 5 were not superseded
    assert len(reads) == MAX_SUPERSESSIONS  # the cycle is cut, not followed forever
    assert reads[1] == [2, 3, 7]  # one read per step for all chains
