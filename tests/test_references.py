"""Relational references ("Mateo's neighbour") resolved from the first results and searched
again: the pure parts (references.py, ranking.fuse_rankings) and both searches, on fake models."""

from __future__ import annotations

import pytest

from offline_mem import Memory
from offline_mem.retrieval.ranking import interleave
from offline_mem.retrieval.references import (
    RESOLVE_POOL,
    Candidate,
    Reference,
    bridge_name,
    find_references,
    resolve_query,
)
from offline_mem.testing import FakeEmbedder, FakeEntities


def ref(query: str) -> Reference:
    (found,) = find_references(query)
    return found


@pytest.mark.parametrize(
    ("query", "span", "owner", "relation"),
    [
        ("Which city does Mateo's neighbour live in?", "Mateo's neighbour", "mateo", "neighbour"),
        ("What does Mateo's best friend do?", "Mateo's best friend", "mateo", "friend"),
        ("the dog of Ana Lima's partner", "Ana Lima's partner", "ana lima", "partner"),
        ("Where does my sister work?", "my sister", "my", "sister"),
        ("My older brother's job?", "My older brother", "my", "brother"),
        ("James' cousin lives where?", "James' cousin", "james", "cousin"),
    ],
)
def test_finds_possessive_relations(query, span, owner, relation):
    found = ref(query)
    assert query[found.start : found.end] == span
    assert (found.owner, found.relation) == (owner, relation)


@pytest.mark.parametrize(
    "query",
    [
        "What is Mateo's favourite movie?",  # not a person
        "Where do my brothers live?",  # a plural names no one
        "Which city does the neighbour live in?",  # no owner
        "Ana partner city",  # no possessive
    ],
)
def test_ignores_what_is_not_a_relational_reference(query):
    assert find_references(query) == []


NEIGHBOUR = "Which city does Mateo's neighbour live in?"


@pytest.mark.parametrize(
    ("said", "name"),
    [
        (Candidate("Did I tell you about my neighbour, Bruno? We are close.", "Mateo"), "Bruno"),
        (Candidate("My neighbour Kofi is coming to visit soon.", "Mateo"), "Kofi"),
        (Candidate("Marco is Mateo's neighbour."), "Marco"),
        (Candidate("User's neighbour is named Mary Ann."), "Mary Ann"),
        (Candidate("Bruno, my neighbour, moved out.", "Mateo"), "Bruno"),
        (Candidate("User told Casey about his neighbour Theo."), "Theo"),  # "his" in a fact
        (Candidate("My neighbour is Lars."), "Lars"),  # kept verbatim, no speaker recorded
    ],
)
def test_bridge_name_next_to_the_relation(said, name):
    assert bridge_name(ref(NEIGHBOUR), said) == name


@pytest.mark.parametrize(
    "said",
    [
        Candidate("Did I tell you about my neighbour, Bruno?", "Casey", False),  # Casey's
        Candidate("My neighbour is Lars.", None, False),  # the assistant's, kept verbatim
        Candidate("Casey's neighbour Bruno moved to Valencia."),  # someone else's, by name
        Candidate("Is your neighbour Bruno nice?", "Mateo"),  # the other speaker's
        Candidate("I told Casey about his neighbour Bruno.", "Mateo"),  # "his" in a message
        Candidate("My neighbour moved to Valencia last year.", "Mateo"),  # no name beside it
        Candidate("My neighbour and I went out. Bruno came too.", "Mateo"),  # a name elsewhere
        Candidate("My neighbour, I think, is nice.", "Mateo"),  # "I" is no name
        Candidate("Mateo is my neighbour.", "Casey", False),  # Casey's neighbour, Mateo
    ],
)
def test_no_bridge_name(said):
    assert bridge_name(ref(NEIGHBOUR), said) is None


def test_my_relation_is_the_users_whoever_the_user_is():
    sister = ref("Where does my sister work?")
    assert bridge_name(sister, Candidate("My sister Ana is a nurse.", "Mateo", True)) == "Ana"
    assert bridge_name(sister, Candidate("My sister Eva is a nurse.", "Casey", False)) is None
    assert bridge_name(sister, Candidate("User's sister is Ana.")) == "Ana"
    assert bridge_name(sister, Candidate("Oskar's sister is Lena.")) is None


def test_resolve_query_takes_the_best_ranked_candidate_that_names_the_relation():
    hits = [
        Candidate("Mateo lives in Porto."),
        Candidate("Casey's cousin Sofia moved to Valencia."),
        Candidate("Did I tell you about my cousin, Ines?", "Mateo"),
        Candidate("My cousin Lucas visited.", "Mateo"),
    ]
    query = "Which city does Mateo's cousin live in?"
    resolved = resolve_query(query, hits)
    assert resolved is not None
    assert (resolved.query, resolved.sources) == ("Which city does Ines live in?", (2,))
    assert resolve_query(query, hits[:2]) is None
    assert resolve_query("Which city does Mateo live in?", hits) is None


def test_resolve_query_replaces_two_references():
    hits = [Candidate("User's boss is Rui."), Candidate("User's partner is Ana.")]
    resolved = resolve_query("Do my partner and my boss know each other?", hits)
    assert resolved is not None
    assert resolved.query == "Do Ana and Rui know each other?"
    assert resolved.sources == (1, 0)  # in the query's order


def test_interleave_takes_turns_and_keeps_each_item_once():
    first = [("b", 1), ("c", 1)]
    second = [("a", 2), ("b", 2), ("d", 2)]
    merged = interleave([first, second], key=lambda item: item[0], limit=4)
    assert merged == [("b", 1), ("a", 2), ("c", 1), ("d", 2)]  # b gains nothing from both
    assert interleave([first, second], key=lambda item: item[0], limit=2) == [("b", 1), ("a", 2)]
    assert interleave([[], []], key=lambda item: item, limit=5) == []


# -- both searches, on fake models ------------------------------------------------------------

MATEO = [
    "Mateo lives in Porto with two roommates.",
    "Did I tell you about my neighbour, Bruno? We are very close.",
    "Bruno lives in Aarhus.",
    "Mateo works in Porto as a city engineer.",
    "Mateo visited the city museum in Porto.",
    "Which city should Mateo visit in June?",
    "Mateo does like to live in the city.",
]
QUESTION = "Which city does Mateo's neighbour live in?"


@pytest.fixture
def mateo(any_store):
    """On a SQLite file and on a PostgreSQL database."""
    with Memory(any_store, embedder=FakeEmbedder(), entities=FakeEntities()) as m:
        for text in MATEO:
            m.add(
                [{"role": "user", "content": text, "name": "Mateo"}], user_id="mateo", infer=False
            )
        lars = "My neighbour, Lars, lives in Oslo."
        m.add([{"role": "assistant", "content": lars, "name": "Casey"}], user_id="mateo",
              infer=False)  # fmt: skip
        yield m


def test_search_finds_the_fact_about_the_resolved_person(mateo):
    scope = {"user_id": "mateo"}
    plain = mateo.search(QUESTION, filters=scope, top_k=3, resolve_references=False)
    assert "Bruno lives in Aarhus." not in [
        r["memory"] for r in plain["results"]
    ]  # the case this exists for: one search ranks the answer low
    found = mateo.search(QUESTION, filters=scope, top_k=3, explain=True)
    texts = [r["memory"] for r in found["results"]]
    assert "Bruno lives in Aarhus." in texts
    assert found["resolved_query"] == "Which city does Bruno live in?"
    assert len(texts) == 3


def test_search_messages_resolves_only_the_owners_relation(mateo):
    scope = {"user_id": "mateo"}
    plain = mateo.search_messages(QUESTION, filters=scope, top_k=3, resolve_references=False)
    found = mateo.search_messages(QUESTION, filters=scope, top_k=3)
    aarhus = "Bruno lives in Aarhus."
    assert aarhus not in [r["content"] for r in plain["results"]]
    assert aarhus in [r["content"] for r in found["results"]]
    assert found["results"][0]["content"].startswith("Did I tell you about my neighbour, Bruno?")
    # Casey's "my neighbour" is Casey's: Lars, not Bruno.
    casey = "Where does Casey's neighbour live?"
    in_messages = mateo.search_messages(casey, filters=scope, top_k=3)
    assert in_messages["results"][0]["content"] == "My neighbour, Lars, lives in Oslo."
    in_memories = mateo.search(casey, filters=scope, top_k=3, explain=True)
    assert in_memories["resolved_query"] == "Where does Lars live?"


def test_a_query_without_reference_is_searched_once(mateo):
    calls = []
    embed = mateo._query_embedder.embed
    mateo._query_embedder.embed = lambda text: calls.append(text) or embed(text)  # type: ignore[method-assign]
    result = mateo.search(
        "Which city does Mateo live in?", filters={"user_id": "mateo"}, explain=True
    )
    # the facts and the stored messages both ask for the query's vector (cached), nothing else
    assert set(calls) == {"Which city does Mateo live in?"}
    assert result["resolved_query"] is None


def test_a_query_without_reference_is_not_widened(mateo):
    """The wider pool serves only to find a bridge name; a plain query is searched as asked."""
    asked = []
    hybrid = mateo._reader.retriever.facts
    mateo._reader.retriever.facts = lambda request, mentions: (
        asked.append(request.top_k)
        or hybrid(  # type: ignore[method-assign]
            request, mentions
        )
    )
    scope = {"user_id": "mateo"}
    plain = mateo.search("Which city does Mateo live in?", filters=scope, top_k=3)
    assert asked == [3]
    given = mateo.search(
        "Which city does Mateo live in?", filters=scope, top_k=3, resolve_references=False
    )
    assert plain == given
    mateo.search(QUESTION, filters=scope, top_k=3)
    assert asked[2] == RESOLVE_POOL  # the relational query still looks wider
