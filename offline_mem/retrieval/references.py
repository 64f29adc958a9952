"""Relational references in a query: "<owner>'s neighbour", "my sister", "the dog of <owner>'s
partner".

A question about a person named only through a relation ("Which city does <owner>'s neighbour live
in?") needs two memories: who the neighbour is ("Did I tell you about my neighbour, <name>?") and
the fact about that person ("<name> has been living in Aarhus"). The second shares no word with the
question but the city, so a single search ranks it low and a small answer model, seeing the user's
own city first, answers that. Search therefore resolves such a reference from its own first results
and searches again with the name in its place ("Which city does <name> live in?").

Pure functions over strings (no model: the small spaCy pipeline labels some first names an
organisation and "Valencia" a person). `search_resolving` is the one way a search (of facts or of
messages, memory_parts/reads.py) resolves them: it is handed the search to run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..pinned.entities import normalize_entity
from .ranking import interleave

# Nouns that name a person by their relation to another. Kept to people: "<owner>'s favourite
# movie" must not be "resolved" to a title and searched again.
# fmt: off
RELATION_NOUNS = frozenset([
    "partner", "wife", "husband", "spouse", "fiance", "fiancee", "girlfriend", "boyfriend", "ex",
    "mother", "mom", "mum", "father", "dad", "parent", "son", "daughter", "child", "kid",
    "brother", "sister", "sibling", "twin", "cousin", "aunt", "uncle", "niece", "nephew",
    "grandmother", "grandma", "grandfather", "grandpa", "grandparent", "grandson", "granddaughter",
    "grandchild", "stepmother", "stepfather", "stepson", "stepdaughter", "stepbrother",
    "stepsister", "mother-in-law", "father-in-law", "brother-in-law", "sister-in-law", "friend",
    "bestie", "roommate", "flatmate", "housemate", "neighbour", "neighbor", "colleague",
    "coworker", "co-worker", "boss", "manager", "supervisor", "mentor", "teacher", "tutor",
    "coach", "doctor", "dentist", "therapist", "landlord", "landlady",
])
# fmt: on
# Words allowed between the owner and the relation noun: "<owner>'s best friend".
_MODIFIERS = r"(?:(?:best|close|closest|oldest|old|older|younger|youngest|little|big|new|former|\
elder|eldest|baby|twin|step|childhood|school|work)\s+)*"
_OWNER = r"(?P<owner>\b(?:[Mm]y|[Oo]ur)|\b[A-Z][\w-]*(?:\s+[A-Z][\w-]*)*['’]s?)"
_RELATION = r"(?P<relation>[A-Za-z-]+)\b"
_POSSESSIVE_REFERENCE = re.compile(rf"{_OWNER}\s+{_MODIFIERS}{_RELATION}")
_SELF_OWNERS = frozenset({"my", "our", "user", "the user", "i", "me"})
# Other people's relations, in a stored text: "<other>'s cousin", "your cousin", "his cousin".
_OWNER_IN_TEXT = re.compile(rf"{_OWNER}\s+{_MODIFIERS}$|\b(?P<pronoun>your|his|her|their)\s+$")
# A name: a run of capitalised words (a double first name too), never the pronoun "I".
_NAME = r"(?P<name>(?!I\b)[A-Z][\w-]*(?:\s+(?!I\b)[A-Z][\w-]*)*)"
# Right after the relation noun: "my cousin, <name>", "cousin <name>", "partner is named <name>".
_NAME_AFTER = re.compile(
    rf"^,?\s+(?:(?:who|whose name)\s+is\s+|is\s+|was\s+)?(?:called\s+|named\s+)?{_NAME}"
)
# Right before the owner: "<name> is <owner>'s neighbour", "<name>, my brother".
_NAME_BEFORE = re.compile(rf"\b{_NAME}(?:\s+(?:is|was)|,)\s+$")


@dataclass(frozen=True)
class Candidate:
    """A first result to resolve from: its text, who said it (a message's name, a verbatim
    memory's actor; None for an extracted fact) and whether the user said it."""

    text: str
    speaker: str | None = None
    by_user: bool = True


@dataclass(frozen=True)
class Resolution:
    """The rewritten query and the positions of the candidates that gave its names."""

    query: str
    sources: tuple[int, ...]


@dataclass(frozen=True)
class Reference:
    """One relational reference of a query: `query[start:end]` is the span to replace
    ("<owner>'s best friend"), `owner` its normalised possessor ("my" for the user) and
    `relation` the relation noun ("friend")."""

    start: int
    end: int
    owner: str
    relation: str


def _relation(word: str) -> str | None:
    """The relation noun, or None. Plurals are not references: "my brothers" names no one."""
    lowered = word.lower()
    return lowered if lowered in RELATION_NOUNS else None


def _owner_norm(owner: str) -> str:
    norm = normalize_entity(owner)
    return "my" if norm in _SELF_OWNERS else norm


def find_references(query: str) -> list[Reference]:
    """The relational references of `query`, in order: "<Name>'s <relation>" or
    "my <relation>", with optional modifiers between ("<owner>'s best friend")."""
    found = []
    for match in _POSSESSIVE_REFERENCE.finditer(query):
        owner = match.group("owner")
        relation = _relation(match.group("relation"))
        if relation is None:
            continue
        if owner.lower() not in {"my", "our"} and not re.search(r"['’]s?$", owner):
            continue  # "<owner> partner" is not a possessive
        found.append(Reference(match.start(), match.end(), _owner_norm(owner), relation))
    return found


def _relation_spans(text: str, relation: str) -> list[tuple[int, int]]:
    pattern = re.compile(rf"\b{re.escape(relation)}s?\b", re.IGNORECASE)
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def _belongs_to_other(owned: re.Match[str] | None, reference: Reference, said: Candidate) -> bool:
    """True when the relation noun is someone else's than the reference's owner: another
    named owner ("<other>'s cousin"), "your cousin", "his cousin" said by someone (in an
    extracted fact "his" is usually the user), or "my cousin" said by someone other than the
    owner (for "my sister": by anyone but the user)."""
    if owned is None:
        return False
    pronoun = owned.group("pronoun")
    if pronoun:
        return pronoun == "your" or said.speaker is not None
    owner = _owner_norm(owned.group("owner"))
    if owner != "my":
        return owner != reference.owner
    if reference.owner == "my" or said.speaker is None:
        return not said.by_user
    return normalize_entity(said.speaker) != reference.owner


def bridge_name(reference: Reference, said: Candidate) -> str | None:
    """The name `said` gives the reference's relation, or None. The name must stand next to the
    relation noun: after it ("my neighbour, <name>", "cousin <name>", "partner is named <name>")
    or before its owner ("<name> is <owner>'s neighbour"); it is never the owner or the speaker.
    "<other>'s cousin moved to Valencia" (for <owner>'s cousin) -> None: someone else's cousin, and
    no name beside the noun."""
    text = said.text
    excluded = {reference.owner, "user", "my"}
    if said.speaker:
        excluded.add(normalize_entity(said.speaker))
    for start, end in _relation_spans(text, reference.relation):
        owned = _OWNER_IN_TEXT.search(text[:start])  # the possessor right before the noun
        if _belongs_to_other(owned, reference, said):
            continue
        after = _NAME_AFTER.match(text[end:])
        before = _NAME_BEFORE.search(text[: owned.start()]) if owned is not None else None
        for found in (after, before):
            if found is not None and normalize_entity(found.group("name")) not in excluded:
                return found.group("name")
    return None


def rewrite(query: str, reference: Reference, name: str) -> str:
    """The query with the reference replaced by the name it resolves to."""
    return f"{query[: reference.start]}{name}{query[reference.end :]}"


MAX_REFERENCES = 2  # resolved per query; a third is rare


def resolve_query(query: str, candidates: Sequence[Candidate]) -> Resolution | None:
    """`query` with each relational reference replaced by the name the best-ranked candidate
    gives it, or None when the query has no reference or no candidate names one."""
    references = find_references(query)[:MAX_REFERENCES]
    if not references:
        return None
    names: dict[Reference, tuple[str, int]] = {}
    for ref in references:
        for position, said in enumerate(candidates):
            name = bridge_name(ref, said)
            if name is not None:
                names[ref] = (name, position)
                break
    if not names:
        return None
    rewritten = query
    for ref in sorted(names, key=lambda r: r.start, reverse=True):
        rewritten = rewrite(rewritten, ref, names[ref][0])
    return Resolution(rewritten, tuple(dict.fromkeys(pos for _, pos in names.values())))


# How many first results a relational reference is resolved from: the memory naming "<owner>'s
# neighbour" shares only those words with the question, and can rank below the top-k.
RESOLVE_POOL = 20
Hit = TypeVar("Hit")


def search_resolving(
    query: str,
    search: Callable[[str, int, float | None], Sequence[Hit]],
    *,
    limit: int,
    floor: float | None,
    score: Callable[[Hit], float],
    candidate: Callable[[Hit], Candidate],
    key: Callable[[Hit], Hashable],
) -> tuple[list[Hit], str | None]:
    """`search(query, limit, floor)`'s hits, with the query's relational references resolved,
    and the rewritten query (None when there is none). A query without a reference is searched
    as given: a wider pool would only cost time. One with a reference is searched with a wider
    pool (RESOLVE_POOL, no floor); when a hit of the pool names the person (`resolve_query`), the
    rewritten query is searched too, and the hits are the ones that gave the name (kept whatever
    their score), then the two rankings taken in turn (`interleave`), each hit once."""
    if not find_references(query):
        return list(search(query, limit, floor)), None
    pool = list(search(query, max(limit, RESOLVE_POOL), None))
    hits = [hit for hit in pool if floor is None or score(hit) >= floor]
    resolved = resolve_query(query, [candidate(hit) for hit in pool])
    if resolved is None:
        return hits[:limit], None
    again = search(resolved.query, limit, floor)
    bridges = [pool[i] for i in resolved.sources]
    return interleave([bridges, again, hits], key=key, limit=limit), resolved.query
