"""A deterministic synthetic long-conversation set in the LoCoMo format, generated from a seed.

    from benchmarks.locomo.dataset import generate
    samples = generate(seed=7, personas=1, sessions=6, turns_per_session=6, per_type=3)

    .venv/bin/python -m benchmarks.locomo.dataset --seed 7 --out /tmp/synth.json

Each sample is one persona (speaker_a) talking to a friend (speaker_b) over dated sessions. The
persona states facts; some change later (a move, a new job); some events are told with a relative
date ("yesterday", "last Saturday"); some people are introduced in one session and described in a
later one. The friend answers and mentions facts of their own (distractors: other cities, other
pets, other employers). Questions come in five types, each with its gold answer and the dia_ids of
the turns that hold the evidence:

    single_fact    a stable fact stated once
    latest         the current value of a fact that changed (evidence: the turn of the change)
    temporal       when an event happened; the turn gives a relative date, the answer is absolute
    multi_hop      an attribute of a person named by relation in another turn (two evidence turns)
    not_mentioned  the conversation does not say; gold answer "Not mentioned", no evidence

`category` follows LoCoMo's numbering where it has one (1 multi-hop, 2 temporal, 4 single-hop,
5 adversarial/not mentioned); "latest" has no LoCoMo category and uses 6. Each QA also carries its
`type` by name. The same seed and arguments always give the same JSON.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

TYPES = ("single_fact", "latest", "temporal", "multi_hop", "not_mentioned")
CATEGORY = {"multi_hop": 1, "temporal": 2, "single_fact": 4, "not_mentioned": 5, "latest": 6}
NOT_MENTIONED = "Not mentioned"

PERSONAS = [
    "Maya",
    "Tomas",
    "Priya",
    "Jonah",
    "Leila",
    "Oskar",
    "Nadia",
    "Felix",
    "Ingrid",
    "Rafael",
    "Zara",
    "Mateo",
]
FRIENDS = ["Sam", "Robin", "Alex", "Jordan", "Casey", "Morgan", "Quinn", "Riley"]
RELATIVES = [
    "Ana",
    "Dev",
    "Kofi",
    "Lena",
    "Marco",
    "Sofia",
    "Yusuf",
    "Hana",
    "Elif",
    "Bruno",
    "Ines",
    "Theo",
]
CITIES = [
    "Lisbon",
    "Porto",
    "Tallinn",
    "Ghent",
    "Bergen",
    "Valencia",
    "Krakow",
    "Lyon",
    "Galway",
    "Ljubljana",
    "Bologna",
    "Aarhus",
]
EMPLOYERS = [
    "Brightwave Labs",
    "Northwind Traders",
    "Halcyon Bio",
    "Copperleaf Media",
    "Bluefin Logistics",
    "Tidewater Bank",
    "Juniper Robotics",
    "Saltmarsh Games",
]
ROLES = ["data analyst", "nurse", "product designer", "civil engineer", "accountant", "copywriter"]
JOBS = [
    "chemistry teacher",
    "paramedic",
    "architect",
    "pastry chef",
    "pilot",
    "librarian",
    "veterinarian",
    "carpenter",
]
CARS = ["Honda Civic", "Volvo XC40", "Fiat Panda", "Mazda MX-5", "Skoda Octavia", "Kia Niro"]
BANDS = ["Arcade Fire", "Khruangbin", "Fleet Foxes", "Tame Impala", "Bon Iver", "Wet Leg"]
SPECIES = ["dog", "cat", "parrot", "rabbit", "tortoise", "hamster"]
PET_NAMES = ["Biscuit", "Pepper", "Mango", "Ziggy", "Noodle", "Olive", "Waffles", "Pickle"]
SINGLE_FACTS = [  # (statement with {x}, question with {a}, values)
    (
        "By the way, I'm allergic to {x}, so I always check the menu.",
        "What is {a} allergic to?",
        ["peanuts", "shellfish", "sesame", "penicillin"],
    ),
    (
        "My favourite cuisine is {x}, I could eat it every day.",
        "What is {a}'s favourite cuisine?",
        ["Ethiopian", "Georgian", "Peruvian", "Lebanese"],
    ),
    (
        "I've started learning to play the {x}.",
        "Which instrument is {a} learning to play?",
        ["cello", "banjo", "theremin", "harp"],
    ),
    (
        "Every Sunday morning I go {x} with a small group.",
        "What does {a} do every Sunday morning?",
        ["rock climbing", "rowing", "birdwatching"],
    ),
    (
        "I'm taking evening classes in {x} at the community college.",
        "Which language is {a} studying?",
        ["Portuguese", "Japanese", "Swahili", "Icelandic"],
    ),
    (
        "I just finished reading {x} and loved it.",
        "Which book did {a} just finish reading?",
        ["Piranesi", "The Overstory", "Circe"],
    ),
]
EVENTS = [  # (past tense, base form for the question)
    ("ran my first half marathon", "run a half marathon"),
    ("passed my driving test", "pass a driving test"),
    ("had my wisdom teeth taken out", "have wisdom teeth taken out"),
    ("planted a vegetable garden", "plant a vegetable garden"),
    ("baked my first sourdough loaf", "bake a sourdough loaf"),
    ("went to my first pottery class", "go to a pottery class"),
    ("got my scuba diving certificate", "get a scuba diving certificate"),
    ("sang at an open mic night", "sing at an open mic night"),
]
RELATIONS = ["sister", "brother", "best friend", "cousin", "partner", "boss", "neighbour"]
NOT_MENTIONED_QUESTIONS = [
    "Which university did {a} study at?",
    "What is {a}'s favourite movie?",
    "Where did {a} go on honeymoon?",
    "What is {a}'s blood type?",
    "What is the name of {a}'s grandfather?",
    "Which football team does {a} support?",
]
REACTIONS = [
    "That's great to hear!",
    "Oh wow, tell me more.",
    "Nice! How do you feel about it?",
    "Sounds lovely.",
    "Good for you!",
    "Haha, I can imagine.",
    "Interesting!",
    "I'm really happy for you.",
]


@dataclass
class Statement:
    """A persona turn to place; `phase` orders introductions before changes and descriptions."""

    key: str
    phase: int
    text: str | Callable[[date], str]


@dataclass
class PlannedQA:
    type: str
    question: str
    answer: str | Callable[[dict[str, date]], str]  # from the session date of each statement
    evidence_keys: tuple[str, ...]


@dataclass
class Plan:
    statements: list[Statement] = field(default_factory=list)
    questions: list[PlannedQA] = field(default_factory=list)


def article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"


def long_date(day: date) -> str:
    """LoCoMo's answer style: '7 May 2023'."""
    return f"{day.day} {day:%B} {day.year}"


def session_stamp(day: date, minutes: int) -> str:
    """LoCoMo's session_<n>_date_time style: '1:56 pm on 8 May, 2023'."""
    hour, minute = divmod(minutes, 60)
    suffix = "am" if hour < 12 else "pm"
    return f"{(hour - 1) % 12 + 1}:{minute:02d} {suffix} on {day.day} {day:%B}, {day.year}"


RELATIVE_DATES: dict[str, Callable[[date], str]] = {
    "Yesterday": lambda d: long_date(d - timedelta(days=1)),
    "Two days ago": lambda d: long_date(d - timedelta(days=2)),
    "Last Saturday": lambda d: long_date(d - timedelta(days=(d.weekday() - 5) % 7 or 7)),
    "Last week": lambda d: f"the week before {long_date(d)}",
}


def _plan_persona(rng: random.Random, name: str, per_type: dict[str, int]) -> Plan:
    plan = Plan()
    cities, employers = rng.sample(CITIES, len(CITIES)), rng.sample(EMPLOYERS, len(EMPLOYERS))
    names, species = rng.sample(RELATIVES, len(RELATIVES)), rng.sample(SPECIES, len(SPECIES))
    pets = rng.sample(PET_NAMES, len(PET_NAMES))

    for i, (text, question, values) in enumerate(
        rng.sample(SINGLE_FACTS, min(per_type["single_fact"], len(SINGLE_FACTS)))
    ):
        value = rng.choice(values)
        plan.statements.append(Statement(f"single{i}", rng.choice((0, 1)), text.format(x=value)))
        plan.questions.append(
            PlannedQA("single_fact", question.format(a=name), value, (f"single{i}",))
        )

    changes = [
        lambda: _change_city(cities.pop(), cities.pop(), name),
        lambda: _change_job(employers.pop(), employers.pop(), rng.choice(ROLES), name),
        lambda: _change_car(*rng.sample(CARS, 2), name),
        lambda: _change_band(*rng.sample(BANDS, 2), name),
    ]
    for i, make in enumerate(changes[: per_type["latest"]]):
        first, second, qa = make()
        plan.statements += [Statement(f"latest{i}a", 0, first), Statement(f"latest{i}b", 2, second)]
        plan.questions.append(PlannedQA("latest", qa[0], qa[1], (f"latest{i}b",)))

    for i, (past, base) in enumerate(rng.sample(EVENTS, min(per_type["temporal"], len(EVENTS)))):
        relative = rng.choice(sorted(RELATIVE_DATES))
        key = f"temporal{i}"
        plan.statements.append(Statement(key, 1, f"{relative} I {past}!"))
        plan.questions.append(
            PlannedQA(
                "temporal",
                f"When did {name} {base}?",
                lambda dates, k=key, r=relative: RELATIVE_DATES[r](dates[k]),
                (key,),
            )
        )

    relations = rng.sample(RELATIONS, len(RELATIONS))
    hops = [_hop_job, _hop_city, _hop_pet]
    for i in range(per_type["multi_hop"]):
        relation, person = relations.pop(), names.pop()
        hop = hops[i % len(hops)]
        naming = rng.choice(
            (
                f"My {relation} {person} is coming to visit soon.",
                f"Did I tell you about my {relation}, {person}? We are very close.",
            )
        )
        detail, question, answer = hop(rng, person, relation, name, cities, species, pets)
        plan.statements += [Statement(f"hop{i}a", 0, naming), Statement(f"hop{i}b", 1, detail)]
        plan.questions.append(PlannedQA("multi_hop", question, answer, (f"hop{i}a", f"hop{i}b")))

    unused = [f"What is the name of {name}'s {r}?" for r in relations]
    pool = [q.format(a=name) for q in NOT_MENTIONED_QUESTIONS] + unused
    for question in rng.sample(pool, min(per_type["not_mentioned"], len(pool))):
        plan.questions.append(PlannedQA("not_mentioned", question, NOT_MENTIONED, ()))
    return plan


def _change_city(old: str, new: str, name: str) -> tuple[str, str, tuple[str, str]]:
    return (
        f"I live in {old} with two roommates.",
        f"Big news: I moved to {new} last weekend, the flat is finally mine!",
        (f"Which city does {name} live in now?", new),
    )


def _change_job(old: str, new: str, role: str, name: str) -> tuple[str, str, tuple[str, str]]:
    return (
        f"I work as {article(role)} {role} at {old}.",
        f"I left {old} and this week I started a new job at {new}.",
        (f"Which company does {name} work for now?", new),
    )


def _change_car(old: str, new: str, name: str) -> tuple[str, str, tuple[str, str]]:
    return (
        f"I drive an old {old}, it still runs fine.",
        f"I finally sold the {old} and bought a {new}.",
        (f"What car does {name} drive now?", new),
    )


def _change_band(old: str, new: str, name: str) -> tuple[str, str, tuple[str, str]]:
    return (
        f"My favourite band is {old}, I know every song.",
        f"Honestly these days my favourite band is {new}, more than {old}.",
        (f"What is {name}'s favourite band now?", new),
    )


def _hop_job(rng, person, relation, name, cities, species, pets):  # type: ignore[no-untyped-def]
    job = rng.choice(JOBS)
    return (
        f"{person} just started working as {article(job)} {job}.",
        f"What does {name}'s {relation} do for work?",
        job,
    )


def _hop_city(rng, person, relation, name, cities, species, pets):  # type: ignore[no-untyped-def]
    city = cities.pop()
    return (
        f"{person} has been living in {city} since the spring.",
        f"Which city does {name}'s {relation} live in?",
        city,
    )


def _hop_pet(rng, person, relation, name, cities, species, pets):  # type: ignore[no-untyped-def]
    kind, pet = species.pop(), pets.pop()
    return (
        f"{person} adopted a {kind} called {pet}.",
        f"What is the name of the {kind} of {name}'s {relation}?",
        pet,
    )


def _friend_turn(rng: random.Random, friend: str) -> str:
    """A reaction, or now and then a fact of the friend's own (a distractor)."""
    if rng.random() < 0.35:
        return rng.choice(
            (
                f"My cousin just moved to {rng.choice(CITIES)}, funny coincidence.",
                f"My neighbour works at {rng.choice(EMPLOYERS)}.",
                f"I have a {rng.choice(SPECIES)} called {rng.choice(PET_NAMES)}, you should meet.",
                f"I {rng.choice(EVENTS)[0]} a few years ago too.",
                f"I've been listening to {rng.choice(BANDS)} a lot lately.",
            )
        )
    return rng.choice(REACTIONS)


def _filler(rng: random.Random) -> str:
    return rng.choice(
        (
            "The weather has been strange this week, sun and hail on the same day.",
            "I watched a documentary about octopuses last night, they are so clever.",
            "Work has been busy but fine, nothing special to report.",
            "I tried a new coffee place near the station, decent but pricey.",
            "I need a holiday, honestly, even a short one.",
            "I've been sleeping badly, too much screen time I think.",
        )
    )


def generate_sample(
    rng: random.Random,
    index: int,
    *,
    sessions: int,
    turns_per_session: int,
    per_type: dict[str, int],
    seed: int,
) -> dict[str, Any]:
    name = rng.choice(PERSONAS)
    friend = rng.choice(FRIENDS)
    plan = _plan_persona(rng, name, per_type)
    slots = sessions * (turns_per_session // 2)
    if len(plan.statements) > slots:
        raise ValueError(
            f"{len(plan.statements)} fact turns do not fit in {slots} persona turns: "
            "add sessions or turns per session, or ask fewer questions per type"
        )
    ordered = sorted(plan.statements, key=lambda s: (s.phase, rng.random()))
    positions = sorted(rng.sample(range(slots), len(ordered)))
    at = dict(zip(positions, ordered, strict=True))

    day = date(2023, 1, 2) + timedelta(days=rng.randint(0, 240))
    conversation: dict[str, Any] = {"speaker_a": name, "speaker_b": friend}
    where: dict[str, str] = {}
    dates: dict[str, date] = {}
    slot = 0
    for s in range(1, sessions + 1):
        turns = []
        for t in range(turns_per_session):
            dia_id = f"D{s}:{t + 1}"
            if t % 2 == 0:
                statement = at.get(slot)
                slot += 1
                if statement is None:
                    text = _filler(rng)
                else:
                    text = statement.text(day) if callable(statement.text) else statement.text
                    where[statement.key], dates[statement.key] = dia_id, day
                if t == 0:
                    text = f"Hey {friend}! {text}"
                turns.append({"speaker": name, "dia_id": dia_id, "text": text})
            else:
                turns.append(
                    {"speaker": friend, "dia_id": dia_id, "text": _friend_turn(rng, friend)}
                )
        conversation[f"session_{s}_date_time"] = session_stamp(day, rng.randint(8 * 60, 22 * 60))
        conversation[f"session_{s}"] = turns
        day += timedelta(days=rng.randint(4, 21))

    qa = []
    for item in plan.questions:
        answer = item.answer(dates) if callable(item.answer) else item.answer
        qa.append(
            {
                "question": item.question,
                "answer": answer,
                "evidence": [where[k] for k in item.evidence_keys],
                "category": CATEGORY[item.type],
                "type": item.type,
            }
        )
    return {"sample_id": f"synth-{seed}-{index}", "conversation": conversation, "qa": qa}


def generate(
    seed: int = 7,
    *,
    personas: int = 1,
    sessions: int = 7,
    turns_per_session: int = 6,
    per_type: int | dict[str, int] = 3,
) -> list[dict[str, Any]]:
    """LoCoMo-format samples, one per persona; the same arguments always give the same data."""
    counts = per_type if isinstance(per_type, dict) else dict.fromkeys(TYPES, per_type)
    counts = {t: int(counts.get(t, 0)) for t in TYPES}
    if turns_per_session < 2 or turns_per_session % 2:
        raise ValueError("turns_per_session must be an even number >= 2")
    rng = random.Random(seed)
    return [
        generate_sample(
            rng,
            i,
            sessions=sessions,
            turns_per_session=turns_per_session,
            per_type=counts,
            seed=seed,
        )
        for i in range(personas)
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--personas", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=7)
    parser.add_argument("--turns-per-session", type=int, default=6)
    parser.add_argument("--per-type", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    samples = generate(
        args.seed,
        personas=args.personas,
        sessions=args.sessions,
        turns_per_session=args.turns_per_session,
        per_type=args.per_type,
    )
    args.out.write_text(json.dumps(samples, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
