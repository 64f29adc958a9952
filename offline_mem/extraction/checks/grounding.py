"""Which new message a fact comes from, decided by the words they share, not by the model alone.

The 1.5B extractor often cites the wrong message ("from_messages") and, in a conversation between
two people, credits one speaker's words to the other: measured on the side-by-side benchmark, one
speaker's "I have a hamster called Noodle" became "<other> has a hamster called Noodle", under the
other speaker's name and citing their message about a car. Provenance is what `search_messages`
reports under `memory_ids` and what a user follows to check a memory, so it has to be right.

For each fact: its content words (stop words and the speakers' names left out, crudely
stemmed by `content_words.stem` so "adopted" meets "adopt") are counted in each new message. The
fact keeps the model's citation unless another message shares strictly more of them; then that
message becomes the source. When the source so found was said by the other side than the model
claimed, and the fact names the claimed speaker but not the real one, the fact is about the wrong
person and is dropped; otherwise only its attribution is corrected. A fact that shares no word
with any new message (a paraphrase such as "User is vegetarian" from "I don't eat meat") is left
as the model wrote it: too little to judge.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from ...store.records import NewMessage
from ..admission import Fact
from ..lexicon import ENGLISH, Lexicon
from .base import CheckContext, Dropped, Speakers, user_names
from .content_words import WORD, content_stems, words_of


def speaker_names(messages: Sequence[NewMessage]) -> frozenset[str]:
    """Every word that names a side of the conversation: the role words and the speakers' names."""
    return Speakers.of(messages).every


def ground_facts(
    facts: Sequence[Fact],
    messages: Sequence[NewMessage],
    shown: Sequence[int],
    *,
    speakers: Speakers | None = None,
    lexicon: Lexicon = ENGLISH,
) -> tuple[list[Fact], list[Dropped]]:
    """The facts with sources (and attribution) corrected, and those dropped with the reason.
    `shown` are the plan indexes of the new messages the model saw."""
    sides = (speakers or Speakers.of(messages)).sides
    every_name = frozenset().union(*sides.values())
    stems = {i: content_stems(messages[i].content, every_name, lexicon) for i in shown}
    kept: list[Fact] = []
    dropped: list[Dropped] = []
    for fact in facts:
        words = content_stems(fact.text, every_name, lexicon)
        overlap = {i: len(words & stems[i]) for i in shown}
        cited = max((overlap.get(i, 0) for i in fact.sources), default=0)
        best = max(shown, key=lambda i: (overlap[i], i in fact.sources, -i), default=None)
        if best is None or overlap[best] <= cited:
            kept.append(fact)
            continue
        speaker = messages[best].role
        if fact.attributed_to in sides and speaker in sides and speaker != fact.attributed_to:
            mentioned = {w.lower() for w in WORD.findall(fact.text)}
            if mentioned & sides[fact.attributed_to] and not mentioned & sides[speaker]:
                dropped.append((fact.text, f"said by the {speaker}, credited to the other side"))
                continue
        kept.append(replace(fact, sources=(best,), attributed_to=speaker))
    return kept, dropped


# spaCy's small model often labels a first name ORG or GPE, and a city PERSON (in "<name> has been
# living in <city>"), so any named entity counts; the first one is the likely subject. Unlabelled
# proper-noun runs ("PROPER") do not: a capitalised first word is too often one ("Sadly", "Hey").
NAME_KINDS = frozenset({"PERSON", "ORG", "GPE", "NORP"})
SENTENCE = re.compile(r"[^.!?]+[.!?]*")  # one sentence, with its end


def drop_subject_swaps(
    facts: Sequence[Fact],
    messages: Sequence[NewMessage],
    people_in: Callable[[Sequence[str]], list[list[str]]],
    *,
    speakers: Speakers | None = None,
    lexicon: Lexicon = ENGLISH,
) -> tuple[list[Fact], list[Dropped]]:
    """Facts that move what a named third person did onto the user are dropped: "<friend> adopted a
    cat called Pepper" written as "<user> adopted a cat called Pepper" (measured on the
    side-by-side benchmark; word overlap cannot see it, the words are the same). A fact is
    dropped when it is the user's and names the user, its source sentence (the one sharing most
    words) has no first-person word, and the first person that sentence names is not in the
    fact. `people_in` gives the names in each text, in order (from the entity extractor)."""
    speakers = speakers or Speakers.of(messages)
    user_side = speakers.sides["user"]
    every_name = speakers.every
    kept: list[Fact] = []
    dropped: list[Dropped] = []
    for fact in facts:
        mentioned = set(words_of(fact.text))
        if fact.attributed_to != "user" or not mentioned & user_side:
            kept.append(fact)
            continue
        sentence = source_sentence(fact, messages, every_name, lexicon)
        people = [p for p in people_in([sentence])[0] if p.lower() not in every_name]
        first_person = bool(set(words_of(sentence)) & lexicon.first_person)
        if people and not first_person and not set(words_of(people[0])) <= mentioned:
            dropped.append((fact.text, f"about {people[0]}, not the user"))
            continue
        kept.append(fact)
    return kept, dropped


def first_sentence(text: str) -> str:
    """A fact's first sentence: its claim, when the model ran on with its message's words
    ("<speaker> found the perfect spot for the store. Way to go!")."""
    return next((s.strip() for s in SENTENCE.findall(text) if s.strip()), text)


def source_sentence(
    fact: Fact, messages: Sequence[NewMessage], names: frozenset[str], lexicon: Lexicon
) -> str:
    return closest_sentence(fact.text, [messages[i].content for i in fact.sources], names, lexicon)


def claim_source_sentence(
    fact: Fact, messages: Sequence[NewMessage], names: frozenset[str], lexicon: Lexicon
) -> str:
    """The source sentence of a fact's claim, its first sentence (`first_sentence`): a fact that
    runs on with its message's words is judged by what it says first, and the words copied on
    after it (cut off later by CopiedTails) do not pick the sentence."""
    claim = Fact(first_sentence(fact.text), fact.attributed_to, fact.sources)
    return source_sentence(claim, messages, names, lexicon)


def closest_sentence(
    text: str, sources: Sequence[str], names: frozenset[str], lexicon: Lexicon
) -> str:
    """The sentence of `sources` that shares the most content words with `text` (the first
    on a tie; "" when they hold none)."""
    words = content_stems(text, names, lexicon)
    sentences = [s.strip() for source in sources for s in SENTENCE.findall(source) if s.strip()]
    return max(sentences, key=lambda s: len(words & content_stems(s, names, lexicon)), default="")


# Content words a fact must share with one context text to count as copied from it. One shared
# word is common between unrelated facts of one person ("cat", "moved"); two are rarely chance.
COPY_MIN_SHARED = 2


def drop_context_copies(
    facts: Sequence[Fact],
    messages: Sequence[NewMessage],
    shown: Sequence[int],
    context: Sequence[str],
    *,
    speakers: Speakers | None = None,
    lexicon: Lexicon = ENGLISH,
) -> tuple[list[Fact], list[Dropped]]:
    """Facts copied from the context instead of taken from the new messages are dropped. A copy
    shares at least COPY_MIN_SHARED content words with one `context` text (a similar memory of
    the scope, or a recent message shown to the model), more than it shares with the new
    messages, and no word with the new messages that this text lacks.

    Measured on the side-by-side benchmark: the 1.5B model wrote "<speaker>'s cousin just moved to
    Ghent, funny coincidence." from the speaker's "I started a new job at Larkspur Bio", re-using
    the memory "<other>'s cousin just moved to Ghent, funny coincidence." with the name
    swapped, and it superseded the true memory. A copy may share a word with the new messages by
    chance: "<other> got a scuba diving certificate two days ago", copied from a recent message,
    shares "day" with the new "I could eat it every day". An update shares words with the memory it
    updates, but also the new value: "User's favourite colour is green now." has "green" from the
    new message, and stays. A fact that shares no word with anything is a paraphrase and stays too
    (see `ground_facts`)."""
    every_name = (speakers or Speakers.of(messages)).every
    new_words = set().union(
        *(content_stems(messages[i].content, every_name, lexicon) for i in shown)
    )
    context_words = [content_stems(text, every_name, lexicon) for text in context]
    kept: list[Fact] = []
    dropped: list[Dropped] = []
    for fact in facts:
        words = content_stems(fact.text, every_name, lexicon)
        from_new = words & new_words
        copied = any(
            len(words & other) >= max(COPY_MIN_SHARED, len(from_new) + 1) and from_new <= other
            for other in context_words
        )
        if copied:
            dropped.append((fact.text, "copied from the context, not in the new messages"))
        else:
            kept.append(fact)
    return kept, dropped


def drop_invented_names(
    facts: Sequence[Fact],
    messages: Sequence[NewMessage],
    context: Sequence[str],
    *,
    speakers: Speakers | None = None,
    lexicon: Lexicon = ENGLISH,
) -> tuple[list[Fact], list[Dropped]]:
    """Facts that name a person, place or thing that no text the model saw says are dropped:
    every capitalised word of the fact must occur (in any case) in the new messages, the
    speakers' names or `context` (the recent messages and the memories retrieved). Measured on the
    side-by-side benchmark: after "I moved to Galway last weekend" the 1.5B model wrote the
    prompt's worked example back ("User moved from Galway to Porto", the visit of the user's
    sister), and it invented the city a user moved from ("from Madrid")."""
    known = set(always_known(lexicon)) | set((speakers or Speakers.of(messages)).every)
    for text in [*(m.content for m in messages), *context]:
        known.update(words_of(text))
    kept: list[Fact] = []
    dropped: list[Dropped] = []
    for fact in facts:
        invented = [w for w in WORD.findall(fact.text) if w[0].isupper() and w.lower() not in known]
        if invented:
            dropped.append((fact.text, f"names {invented[0]!r}, which no message says"))
        else:
            kept.append(fact)
    return kept, dropped


def always_known(lexicon: Lexicon) -> frozenset[str]:
    """Capitalised words a fact may hold though no message says them: the calendar (the model
    writes absolute dates) and the words the prompt uses for the two sides."""
    return lexicon.months | frozenset(lexicon.weekdays) | lexicon.side_words


def drop_name_only_facts(
    facts: Sequence[Fact],
    messages: Sequence[NewMessage],
    *,
    speakers: Speakers | None = None,
    lexicon: Lexicon = ENGLISH,
) -> tuple[list[Fact], list[Dropped]]:
    """Facts that say nothing but what a speaker is called are dropped: "<speaker> is named
    <speaker>." (the side-by-side benchmark, medium configuration: it matched the speaker's name and
    nothing else, and took 4th place in the results of most questions about that speaker). The
    messages' names say it already."""
    every_name = (speakers or Speakers.of(messages)).every
    kept: list[Fact] = []
    dropped: list[Dropped] = []
    for fact in facts:
        words = {
            w for w in words_of(fact.text) if w not in lexicon.stop_words and w not in every_name
        }
        if words <= lexicon.naming_words:
            dropped.append((fact.text, "says only what a speaker is called"))
        else:
            kept.append(fact)
    return kept, dropped


_USER = re.compile(r"\bUser\b")  # the prompt's word for the user (prompts.py)


def name_the_user(
    facts: Sequence[Fact], messages: Sequence[NewMessage], *, speakers: Speakers | None = None
) -> list[Fact]:
    """Facts with "User" replaced by the user's name: the name of the user-side speaker of the
    fact's source messages when they give exactly one, else the name of the user side of the
    whole add when it gives exactly one. The prompt asks for "User" (an application's user
    often has no name), but a conversation between named people is searched by name: measured
    on the side-by-side benchmark, "User left Juniper Robotics and started a new job at Larkspur
    Bio" was not found for "Which company does <speaker> work for now?", where "<speaker> left
    Juniper Robotics ..." is. In a dialogue where both people write as the user, the fact's own
    message tells who "User" is."""
    every = (speakers or Speakers.of(messages)).user_names
    named = []
    for fact in facts:
        own = user_names([messages[i] for i in fact.sources if 0 <= i < len(messages)])
        names = own if len(own) == 1 else every
        if len(names) == 1:
            (name,) = names
            fact = replace(fact, text=_USER.sub(name, fact.text))
        named.append(fact)
    return named


# -- the checks (base.FactCheck), in the order pipeline.py runs them -------------------------------


class Misattributions:
    """A fact's source message and speaker corrected by the words they share (`ground_facts`),
    among the messages of the model call that wrote it."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        if len(ctx.groups) <= 1:
            return ground_facts(
                facts, ctx.messages, ctx.shown, speakers=ctx.speakers, lexicon=ctx.lexicon
            )
        kept: list[Fact] = []
        dropped: list[Dropped] = []
        for group in ctx.groups:  # read_facts gives each fact one source, in its call's group
            own = [f for f in facts if f.sources[0] in group]
            k, d = ground_facts(
                own, ctx.messages, group, speakers=ctx.speakers, lexicon=ctx.lexicon
            )
            kept += k
            dropped += d
        return kept, dropped


class ContextCopies:
    """Facts copied from the similar memories or recent messages dropped (`drop_context_copies`).
    With one model call per message, a call's context also holds the add's earlier messages:
    measured on real dialogue, the 1.5B model restated the other person's message just before
    under the writer's name ("<writer> won the regional cup at sixteen" from the writer's "Winning
    the cup is amazing! Do you still sail?", right after the other person told of her cup)."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        if len(ctx.groups) <= 1:
            return drop_context_copies(
                facts, ctx.messages, ctx.shown, ctx.seen, speakers=ctx.speakers,
                lexicon=ctx.lexicon,
            )  # fmt: skip
        kept: list[Fact] = []
        dropped: list[Dropped] = []
        for group in ctx.groups:
            own = [f for f in facts if f.sources[0] in group]
            earlier = [ctx.messages[i].content for i in ctx.shown if i < group[0]]
            k, d = drop_context_copies(
                own, ctx.messages, group, [*ctx.seen, *earlier], speakers=ctx.speakers,
                lexicon=ctx.lexicon,
            )  # fmt: skip
            kept += k
            dropped += d
        return kept, dropped


class InventedNames:
    """Facts naming what no text the model saw names dropped (`drop_invented_names`)."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        return drop_invented_names(
            facts, ctx.messages, ctx.seen, speakers=ctx.speakers, lexicon=ctx.lexicon
        )


class SubjectSwaps:
    """Facts moving a third person's deed onto the user dropped (`drop_subject_swaps`)."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        return drop_subject_swaps(
            facts, ctx.messages, ctx.people_in, speakers=ctx.speakers, lexicon=ctx.lexicon
        )


class NameOnlyFacts:
    """Facts saying only what a speaker is called dropped (`drop_name_only_facts`)."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        return drop_name_only_facts(facts, ctx.messages, speakers=ctx.speakers, lexicon=ctx.lexicon)


class UserPlaceholders:
    """ "User" in a fact replaced by the user's name (`name_the_user`); drops nothing."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        return name_the_user(facts, ctx.messages, speakers=ctx.speakers), []
