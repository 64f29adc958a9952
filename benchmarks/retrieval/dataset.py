"""A deterministic retrieval set for issue 5, generated from a seed (never a committed blob).

    from benchmarks.retrieval.dataset import build
    data = build(seed=5)          # ~550 memories in scope "bench", 120 queries, distractor scopes

Query types, each with its own failure mode for one signal:
  name       a rare surname ("Dr. Okonkwo"). Distractors: the same sentence template with other
             names, so the vector of "what did Dr. Okonkwo say?" is close to all of them.
  number     a locker, code, phone-like number, year, flight or order number. Distractors: the
             same template with other numbers (an embedder barely encodes digits).
  rare_word  an unusual noun (theremin, kohlrabi, orrery). Distractors: the same template with
             other nouns of the same kind, which embed close together.
  paraphrase the query shares no content word with its gold memory (checked here with a crude
             stem and again by run.py with the real analyzer). Distractors: "keyword traps" that
             share the query's words with an unrelated meaning, so BM25 finds the wrong memory.
  entity     a person linked to 3-4 memories; gold = all of them (recall@5 = share found).
             Distractors: other people in the same templates.
Filler memories (everyday facts from templates) bring the scope past 500. Other scopes hold the
same kinds of memories with other values, plus verbatim copies of some gold memories of the main
scope: a search scoped to "bench" must never return them.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

SCOPE = "bench"
KINDS = ("name", "number", "rare_word", "paraphrase", "entity")


@dataclass(frozen=True)
class Item:
    id: str
    text: str
    user_id: str
    kind: str  # the generator that made it (a query kind, "trap" or "filler")


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    kind: str
    gold: tuple[str, ...]


@dataclass(frozen=True)
class RetrievalSet:
    seed: int
    scope: str
    memories: tuple[Item, ...]
    queries: tuple[Query, ...]

    def in_scope(self, user_id: str) -> list[Item]:
        return [m for m in self.memories if m.user_id == user_id]

    def summary(self) -> dict[str, object]:
        scopes: dict[str, int] = {}
        for m in self.memories:
            scopes[m.user_id] = scopes.get(m.user_id, 0) + 1
        kinds: dict[str, int] = {}
        for q in self.queries:
            kinds[q.kind] = kinds.get(q.kind, 0) + 1
        return {
            "seed": self.seed,
            "scope": self.scope,
            "memories_in_scope": scopes.get(self.scope, 0),
            "memories_other_scopes": sum(v for k, v in scopes.items() if k != self.scope),
            "scopes": len(scopes),
            "queries": len(self.queries),
            "queries_per_kind": kinds,
        }


# -- vocabularies ---------------------------------------------------------------------------------

SURNAMES = (
    "Okonkwo", "Lindqvist", "Achterberg", "Oyelaran", "Kowalczyk", "Thistlewood", "Marchetti",
    "Ravindran", "Szymanski", "Quennell", "Abernathy", "Ekwueme", "Brzezinski", "Haldane",
    "Vasquez", "Nakagawa", "Ferreira", "Oduya", "Castellanos", "Petrakis", "Wojcik", "Zeller",
    "Amundsen", "Baptiste", "Cheruiyot", "Delacroix", "Eriksen", "Fitzgerald", "Grunewald",
    "Hakimi", "Iwasaki", "Jankowski", "Kavanagh", "Lombardi", "Mbeki", "Nwachukwu", "Ostrowski",
    "Pellegrino", "Quispe", "Rasmussen", "Sokolova", "Takahashi", "Umarov", "Valverde",
    "Whitcombe", "Yilmaz", "Zielinski", "Adeyemi", "Bergstrom", "Cavendish", "Dragomir",
    "Esposito", "Fonseca", "Gallagher", "Hovhannisyan", "Ibarra", "Jovanovic", "Karlsson",
)  # fmt: skip
TITLES = ("Dr. ", "Mrs. ", "Mr. ", "Ms. ", "Prof. ")
ROLES = (
    "{who} is my dentist and wants to redo the crown on my upper left molar.",
    "{who} is the accountant who files my taxes every April.",
    "{who} is my landlord, and the rent goes up in September.",
    "{who} teaches my piano lessons on Wednesday evenings.",
    "{who} from the housing office is handling my parking permit.",
    "My physiotherapist {who} gave me stretches for my lower back.",
    "{who} is the vet who treated the cat's ear infection.",
    "The plumber {who} fixed the leak under the kitchen sink.",
    "{who} is my manager at work and wants the roadmap by Friday.",
    "{who} coaches the kids' football team on Saturday mornings.",
    "The notary {who} witnessed the signature on the house deeds.",
    "{who} runs the bakery on the corner and saves me a rye loaf.",
    "My cardiologist {who} asked for a follow-up scan in the autumn.",
    "{who} is the neighbour who waters our plants when we travel.",
    "The tax advisor {who} recommended opening a pension account.",
)  # fmt: skip
NAME_QUERIES = (
    "What did {who} tell me?",
    "When do I see {who} next?",
    "Remind me who {who} is.",
    "{who}",
    "what's the story with {who}",
    "Anything I should remember about {who}?",
)

NUMBER_TEMPLATES = (
    ("My gym locker is number {n}.", "locker {n}", "n4"),
    ("The code for the garage door is {n}.", "what is the code {n} for?", "n4"),
    ("The bike lock combination is {n}.", "{n}", "n4"),
    ("The plumber's phone number is {n}.", "whose number is {n}?", "phone"),
    ("The pharmacy on Elm Street can be reached at {n}.", "who answers at {n}?", "phone"),
    ("We bought the lake cabin in {n}.", "what happened in {n}?", "year"),
    ("Grandpa emigrated to Canada in {n}.", "what do I know about {n}?", "year"),
    ("My flight to Lisbon is {n} on the fourteenth.", "flight {n}", "flight"),
    ("The order number for the new sofa is {n}.", "order {n}", "n6"),
    ("Our hotel room in Vienna is {n}.", "room {n}", "n3"),
)
NUMBER_PER_TEMPLATE = 4

RARE_WORDS = {
    "instrument": (
        ("theremin", "ocarina", "bandoneon", "dulcimer", "balalaika", "kalimba", "harpsichord",
         "sousaphone"),
        ("I have been practising the {w} every evening since January.",
         "My uncle gave me an old {w} that needs repairing."),
    ),
    "object": (
        ("astrolabe", "orrery", "sextant", "theodolite", "zoetrope", "samovar", "metronome",
         "barometer"),
        ("I found an antique {w} at the flea market last weekend.",
         "My grandmother left me her {w}, and it sits in the hallway."),
    ),
    "vegetable": (
        ("kohlrabi", "salsify", "celeriac", "romanesco", "tomatillo", "cardoon", "jicama",
         "rutabaga"),
        ("I grew {w} in the allotment this year.",
         "The recipe for Sunday calls for roasted {w}."),
    ),
    "animal": (
        ("axolotl", "pangolin", "capybara", "okapi", "quokka", "tapir", "gharial", "kinkajou"),
        ("At the zoo the kids loved the {w} enclosure.",
         "I watched a documentary about the {w} last night."),
    ),
    "tool": (
        ("spokeshave", "adze", "drawknife", "awl", "froe", "chisel", "rasp", "bradawl"),
        ("I borrowed a {w} from the woodworking club.",
         "The {w} I ordered online arrived broken."),
    ),
}  # fmt: skip
RARE_QUERIES = (
    "{w}?",
    "Where is my {w}?",
    "anything about a {w}",
    "What do I know about the {w}?",
    "{w} plans",
)

# (memory, query, keyword traps): no content word of the query is in the memory; each trap
# shares a query word with an unrelated meaning.
PARAPHRASES = (
    ("I am allergic to peanuts and always carry an EpiPen.",
     "Which nut could send me to hospital?",
     ("The hospital parking costs four euros an hour.",)),
    ("My daughter starts primary school in September.",
     "When does my kid begin her education?",
     ("The kid next door is learning the trumpet.",)),
    ("I moved to Porto three years ago.",
     "How long have I lived in this Portuguese city?",
     ("The city council closed the library for renovation.",)),
    ("I can't eat gluten because of coeliac disease.",
     "Is bread safe for my diet?",
     ("The bread maker broke again.", "My diet plan allows one dessert a week.")),
    ("My car is a blue 2012 Toyota Corolla.",
     "What vehicle do I drive?",
     ("I drive the kids to swimming on Tuesdays.",)),
    ("I work as a nurse on the paediatric ward.",
     "What do I do for a living?",
     ("The living room needs a fresh coat of paint.",)),
    ("I'm vegetarian and haven't eaten meat since 2015.",
     "Do I avoid animal products?",
     ("The cleaning products are under the stairs.",)),
    ("We are expecting a baby boy in November.",
     "Is my partner pregnant?",
     ("My partner loves board games.",)),
    ("I'm terrified of flying and take the train whenever possible.",
     "Do planes make me anxious?",
     ("The planes at the airshow were incredibly loud.",)),
    ("My mother lives alone in a village near Krakow.",
     "Where is mum's home?",
     ("The home insurance renewal is due.",)),
    ("I run a half marathon every spring.",
     "Which races do I jog in each year?",
     ("The kids race their bikes in the park.",)),
    ("I sleep badly when I drink coffee after lunch.",
     "Does caffeine in the afternoon keep me awake at night?",
     ("The night bus stops at the corner.", "We had afternoon tea with the neighbours.")),
    ("My favourite film is Spirited Away.",
     "Which movie do I love most?",
     ("The movie theatre downtown closed.",)),
    ("I broke my left wrist skiing in 2019.",
     "Have I ever fractured a bone?",
     ("The dog chewed a bone on the sofa.",)),
    ("Our wedding anniversary is on the twelfth of June.",
     "When did I get married?",
     ("My cousin got married in Spain.",)),
    ("I'm saving money for a deposit on a flat.",
     "Am I putting cash aside to buy an apartment?",
     ("The apartment upstairs has a leaking roof.",)),
    ("My brother is a pilot for a cargo airline.",
     "What does my sibling do for work?",
     ("Work starts at nine on Mondays.",)),
    ("I learned Japanese while living in Osaka.",
     "Which foreign languages can I speak?",
     ("The language exchange meets on Thursdays.",)),
    ("I prefer tea over coffee in the morning.",
     "What hot drink do I like to start the day with?",
     ("The day trip to the coast was cancelled.",)),
    ("The cat needs her insulin injection twice a day.",
     "Is my pet diabetic?",
     ("The pet shop sells bird seed.",)),
    ("I always get seasick on ferries.",
     "Do boats make me nauseous?",
     ("We watched the boats in the harbour.",)),
    ("My grandfather fought in the Second World War.",
     "Did my dad's dad serve in the army?",
     ("The army surplus store sells boots.",)),
    ("I'm studying for an accountancy qualification in the evenings.",
     "What exam am I preparing for?",
     ("Preparing dinner takes an hour on weekdays.",)),
    ("We adopted a rescue greyhound last winter.",
     "Do we have a dog?",
     ("The dog next door barks all night.",)),
    ("I lost my wallet on the tram on Monday.",
     "Where did I misplace my purse?",
     ("Her purse was stolen at the market.",)),
    ("My son is colour blind.",
     "Can my boy tell red from green?",
     ("The red paint for the fence is in the shed.",)),
    ("I donate blood every three months.",
     "How often do I give plasma at the clinic?",
     ("The clinic moved to a new building.",)),
    ("The boiler was serviced in October.",
     "When was the heating last checked?",
     ("I checked the train times for Sunday.",)),
    ("I play chess online most nights.",
     "Which board game do I enjoy on the internet?",
     ("The board meeting was postponed.",)),
    ("My sister got a scholarship to study architecture in Delft.",
     "Did my sibling win funding for university?",
     ("The university library opens at eight.",)),
)  # fmt: skip

PEOPLE = (
    "Marguerite", "Tobiah", "Annelise", "Ignatius", "Rosalind", "Thaddeus", "Philippa",
    "Leopold", "Wilhelmina", "Cornelius", "Evangeline", "Barnaby", "Octavia", "Percival",
    "Seraphina", "Augustin", "Ottilie", "Benedikt", "Clementine", "Lysander", "Henrietta",
    "Ambrose", "Cordelia", "Fitzroy", "Imogen", "Jasper", "Lavinia", "Montgomery",
)  # fmt: skip
PERSON_TEMPLATES = (
    "{e} is moving to Lyon in the spring.",
    "I still owe {e} forty euros for the concert tickets.",
    "{e}'s birthday is on the third of March.",
    "{e} recommended the novel Piranesi to me.",
    "I had lunch with {e} at the Thai place on Friday.",
    "{e} is getting married next summer in Sicily.",
    "{e} lent me a tent for the camping trip.",
    "I need to call {e} about the holiday plans.",
)
ENTITY_QUERIES = (
    "What do I know about {e}?",
    "Anything new with {e}?",
    "Tell me about {e}.",
    "{e}",
)
ENTITY_TARGETS = 20

# Raw memories (add(infer=False)) are whole chat messages: some facts sit inside small talk,
# which dilutes their embedding but not their keywords.
CHATTER = (
    ("Long day today, the trains were late again and it rained all afternoon. Anyway, ", ""),
    ("", " Also, remind me to water the tomatoes and call the bank about the card."),
    ("So, after the school fair and all the fuss about the new playground, ", ""),
    ("", " Not much else happened this week, just work and the usual errands."),
)
CHATTER_SHARE = 0.4

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ACTIVITIES = (
    "went hiking", "cooked dinner", "watched a documentary", "played tennis",
    "visited the museum", "went to the cinema", "cleaned the garage", "fixed the bike",
    "went swimming", "painted the fence", "baked bread", "walked along the river",
    "went to a concert", "tidied the attic", "played football", "went shopping for shoes",
)  # fmt: skip
COMPANIONS = (
    "my sister", "the neighbours", "two colleagues", "my partner", "an old friend", "the kids",
    "my cousin", "my parents", "the running group", "nobody",
)  # fmt: skip
LIKES = (
    "pizza", "sushi", "green tea", "black coffee", "dark chocolate", "spicy curry", "jazz",
    "crime novels", "board games", "mountain walks", "summer rain", "early mornings",
    "red wine", "podcasts", "old films", "cycling to work",
)  # fmt: skip
ITEMS = (
    "light bulbs", "dog food", "printer ink", "a birthday card", "batteries", "olive oil",
    "a new umbrella", "bin bags", "shampoo", "stamps", "a phone charger", "coffee filters",
)  # fmt: skip
DEADLINES = ("the weekend", "Friday", "the party", "the trip", "the end of the month")
HOUSE = (
    ("kitchen tap", "a new washer"), ("bathroom door", "oiling"), ("garden hose", "replacing"),
    ("bedroom window", "new sealant"), ("hallway light", "a new switch"),
    ("living room sofa", "cleaning"), ("garage roof", "repairs"), ("balcony railing", "paint"),
)  # fmt: skip
TEAMS = ("design", "sales", "budget", "product", "hiring", "quarterly review", "marketing")
TIMES = ("9 am", "10 am", "11 am", "2 pm", "3 pm", "4 pm")


# -- generation -----------------------------------------------------------------------------------


class _Builder:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.items: list[Item] = []
        self.texts: set[tuple[str, str]] = set()

    def add_chatty(self, text: str, user_id: str, kind: str) -> Item | None:
        """Add `text`, sometimes wrapped in small talk (CHATTER_SHARE of the time)."""
        if self.rng.random() < CHATTER_SHARE:
            before, after = self.rng.choice(CHATTER)
            text = before + (text[0].lower() + text[1:] if before else text) + after
        return self.add(text, user_id, kind)

    def add(self, text: str, user_id: str, kind: str) -> Item | None:
        if (user_id, text) in self.texts:
            return None
        self.texts.add((user_id, text))
        item = Item(f"m{len(self.items):05d}", text, user_id, kind)
        self.items.append(item)
        return item


def _number(rng: random.Random, style: str, used: set[str]) -> str:
    while True:
        if style == "n4":
            value = str(rng.randint(1000, 9999))
        elif style == "n3":
            value = str(rng.randint(100, 899))
        elif style == "n6":
            value = str(rng.randint(100000, 999999))
        elif style == "phone":
            value = f"555-{rng.randint(0, 9999):04d}"
        elif style == "year":
            value = str(rng.randint(1950, 2023))
        else:
            value = f"{rng.choice(('TP', 'LH', 'BA', 'KL'))}{rng.randint(100, 9999)}"
        if value not in used:
            used.add(value)
            return value


def _people_names(rng: random.Random, count: int) -> list[str]:
    surnames = list(SURNAMES)
    rng.shuffle(surnames)
    names = []
    for surname in surnames[:count]:
        names.append(f"{rng.choice(TITLES)}{surname}")
    return names


def _typed_memories(
    b: _Builder, user_id: str, rng: random.Random
) -> dict[str, list[tuple[Item, str]]]:
    """Memories of every query kind for one scope; returns, per kind, (gold item, query key)."""
    out: dict[str, list[tuple[Item, str]]] = {k: [] for k in KINDS}
    names = iter(_people_names(rng, len(ROLES) * 3))
    for template in ROLES:
        for _ in range(3):
            who = next(names)
            item = b.add_chatty(template.format(who=who), user_id, "name")
            if item:
                out["name"].append((item, who))
    used: set[str] = set()
    for template, _query, style in NUMBER_TEMPLATES:
        for _ in range(NUMBER_PER_TEMPLATE):
            value = _number(rng, style, used)
            item = b.add_chatty(template.format(n=value), user_id, "number")
            if item:
                out["number"].append((item, value))
    for words, templates in RARE_WORDS.values():
        for word in words:
            item = b.add_chatty(rng.choice(templates).format(w=word), user_id, "rare_word")
            if item:
                out["rare_word"].append((item, word))
    for memory, query, traps in PARAPHRASES:
        item = b.add(memory, user_id, "paraphrase")
        for trap in traps:
            b.add(trap, user_id, "trap")
        if item:
            out["paraphrase"].append((item, query))
    people = list(PEOPLE)
    rng.shuffle(people)
    for index, person in enumerate(people):
        count = (3 + rng.randint(0, 1)) if index < ENTITY_TARGETS else 2
        for template in rng.sample(PERSON_TEMPLATES, count):
            item = b.add(template.format(e=person), user_id, "entity")
            if item and index < ENTITY_TARGETS:
                out["entity"].append((item, person))
    return out


def _filler(b: _Builder, user_id: str, rng: random.Random, count: int) -> None:
    makers = (
        lambda: f"On {rng.choice(DAYS)} I {rng.choice(ACTIVITIES)} with {rng.choice(COMPANIONS)}.",
        lambda: f"I like {rng.choice(LIKES)} more than {rng.choice(LIKES)}.",
        lambda: f"Need to buy {rng.choice(ITEMS)} before {rng.choice(DEADLINES)}.",
        lambda: "The {} needs {}.".format(*rng.choice(HOUSE)),
        lambda: (
            f"The {rng.choice(TEAMS)} meeting moved to {rng.choice(DAYS)} at {rng.choice(TIMES)}."
        ),
    )
    made = 0
    attempts = 0
    while made < count and attempts < count * 50:
        attempts += 1
        text = rng.choice(makers)()
        if "more than" in text and text.count(text.split()[2]) > 1:
            continue  # "I like jazz more than jazz."
        if b.add(text, user_id, "filler"):
            made += 1


def _queries(
    typed: dict[str, list[tuple[Item, str]]], rng: random.Random, per_kind: int
) -> list[Query]:
    queries: list[Query] = []
    for kind in ("name", "number", "rare_word", "paraphrase"):
        chosen = rng.sample(typed[kind], min(per_kind, len(typed[kind])))
        for item, key in chosen:
            if kind == "name":
                text = rng.choice(NAME_QUERIES).format(who=key)
            elif kind == "number":
                template = next(q for m, q, _ in NUMBER_TEMPLATES if _fits(m, item.text, key))
                text = template.format(n=key)
            elif kind == "rare_word":
                text = rng.choice(RARE_QUERIES).format(w=key)
            else:
                text = key
            queries.append(Query(f"q{len(queries):03d}", text, kind, (item.id,)))
    by_person: dict[str, list[str]] = {}
    for item, person in typed["entity"]:
        by_person.setdefault(person, []).append(item.id)
    for person in list(by_person)[:per_kind]:
        text = rng.choice(ENTITY_QUERIES).format(e=person)
        queries.append(Query(f"q{len(queries):03d}", text, "entity", tuple(by_person[person])))
    return queries


def _fits(template: str, text: str, value: str) -> bool:
    fact = template.format(n=value)
    return fact in text or (fact[0].lower() + fact[1:]) in text


_STOP = frozenset(
    str.split(
        "a an the i me my we our you your he she her his it its is am are was were be been do does "
        "did have has had to of in on at for with from by about as and or not can could would will "
        "what which who whom when where why how this that these those each every ever any some "
        "most more than up out so too after before while since into over under there then all only "
        "very just also again"
    )
)


def content_stems(text: str) -> set[str]:
    """A crude, model-free content-word set (lowercase, stopwords out, first 5 letters)."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {w[:5] for w in words if w not in _STOP and len(w) > 1}


def build(
    seed: int = 5,
    *,
    queries_per_kind: int = 25,
    filler: int = 300,
    other_scopes: int = 3,
    other_filler: int = 60,
    copies_per_scope: int = 10,
) -> RetrievalSet:
    rng = random.Random(seed)
    b = _Builder(rng)
    typed = _typed_memories(b, SCOPE, rng)
    _filler(b, SCOPE, rng, filler)
    queries = _queries(typed, rng, queries_per_kind)
    golds = [item for q in queries for item in b.items if item.id in q.gold]
    for index in range(other_scopes):
        other = f"other_{index + 1}"
        _typed_memories(b, other, random.Random(seed * 1000 + index))
        _filler(b, other, rng, other_filler)
        for item in rng.sample(golds, min(copies_per_scope, len(golds))):
            b.add(item.text, other, "copy")
    for q in queries:
        if q.kind == "paraphrase":
            gold = next(i for i in b.items if i.id == q.gold[0])
            shared = content_stems(q.text) & content_stems(gold.text)
            if shared:
                raise AssertionError(f"paraphrase {q.text!r} shares {shared} with {gold.text!r}")
    return RetrievalSet(seed, SCOPE, tuple(b.items), tuple(queries))
