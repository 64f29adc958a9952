"""One ranking of facts and the messages behind them: what `Memory.search` returns by default.

Facts are short, dated and attributed, but a small extractor leaves things out and gets some
wrong; the turns they came from hold the rest. So `search` ranks both kinds on the fixed [0, 1]
scale of ranking.py:

- a fact scores as in ranking.py (semantic, keyword and entity signals, `ranking_weights`);
- a message scores on the same three signals of its own: semantic (cosine of the query and the
  message's "Name: content" vector), keyword (BM25 over the messages' own keyword index, on
  [0, 1] as a fact's) and entity (the share of the query's known entities its text names), with
  MESSAGE_WEIGHTS.

Facts take at most FACT_SHARE of the places: being short, a fact is closer to a question than
the chatty turn it came from, and by score alone facts pushed out the turns that held the
answer. A turn that asks something lends its reply REPLY_SHARE of its score: in a dialogue the
answer is in the reply. A turn is scored by its own text only. The measurements behind each
constant: docs/design/evidence-ranking.md.

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from .ranking import Ranked, Weights, score_details

Kind = Literal["fact", "message"]
_NON_WORD = re.compile(r"[^\w]+")


@dataclass(frozen=True)
class MessageSignals:
    seq: int
    cosine: float | None
    text: str  # as embedded: "Name: content" when the message has a name
    keyword: float = 0.0  # on [0, 1], as a fact's (ranking.keyword_share)


@dataclass(frozen=True)
class Evidence:
    """One item of the ranking: a fact (key = memory rowid) or a message (key = seq)."""

    kind: Kind
    key: int
    score: float
    semantic: float
    keyword: float
    entity: float
    lent: float = 0.0  # a reply's score lent by the question it answers (REPLY_SHARE), if higher

    def explain(self, weights: Weights, threshold: float | None) -> dict[str, float | None]:
        details = score_details(self, weights, threshold)
        if self.lent:
            details["score_lent_by_question"] = round(self.lent, 6)
        return details


def _words(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " " + " ".join(_NON_WORD.sub(" ", folded).split()) + " "


def entity_share(text: str, known_entities: Iterable[str]) -> float:
    """The share of the query's known entity norms that `text` names, as whole words."""
    known = [_words(norm) for norm in known_entities]
    known = [norm for norm in known if norm.strip()]
    if not known:
        return 0.0
    words = _words(text)
    return sum(1 for norm in known if norm in words) / len(known)


# A message's weights (a fact's are the configured `ranking_weights`): chatty turns hold the names
# of things the embedder misses, and the speakers' names, in most turns, carry nothing (entity 0).
# Measured: docs/design/evidence-ranking.md.
MESSAGE_WEIGHTS = Weights(semantic=0.5, keyword=0.5, entity=0.0)
FACT_SHARE = 0.2  # of the places, at most (rounded up): 2 of 10
# A message that asks something lends its reply (the scope's next message) this share of its
# score: the answer to a question is in the reply, which often shares no word with the query.
REPLY_SHARE = 0.9
QUESTION_MARKS = frozenset("?\uff1f\u061f")  # "?", fullwidth "？", Arabic "؟"


def asks(text: str) -> bool:
    """Whether a message asks something (holds a question mark of any script)."""
    return not QUESTION_MARKS.isdisjoint(text)


def fact_places(top_k: int) -> int:
    return max(1, math.ceil(FACT_SHARE * top_k))


def rank_evidence(
    facts: Sequence[Ranked],
    messages: Sequence[MessageSignals],
    *,
    known_entities: Iterable[str],
    threshold: float | None,
    top_k: int,
    message_weights: Weights = MESSAGE_WEIGHTS,
    replies: Mapping[int, int] | None = None,
) -> list[Evidence]:
    """Facts and messages in one list, best first, cut at `top_k`; at most `fact_places(top_k)`
    facts when there are messages to rank.

    `facts` come as the memory search ranked and filtered them (best first; a fact that named a
    person the query asked about by relation leads whatever its score, see references.py) and
    keep that order; the messages, scored here and filtered by `threshold`, are merged in by
    score, a fact first on a tie."""
    known = list(known_entities)
    w = message_weights
    texts = {message.seq: message.text for message in messages}
    scored = []
    for message in messages:
        semantic = max(0.0, min(1.0, message.cosine or 0.0))
        # at weight 0 the entity share changes no score: read only for the items returned
        entity = entity_share(message.text, known) if w.entity else 0.0
        keyword = message.keyword
        score = w.semantic * semantic + w.keyword * keyword + w.entity * entity
        scored.append(Evidence("message", message.seq, score, semantic, keyword, entity))
    own = {e.key: e.score for e in scored}
    lent: dict[int, float] = {}
    for asker, reply in (replies or {}).items():
        if asker in own and reply in own:
            lent[reply] = max(lent.get(reply, 0.0), REPLY_SHARE * own[asker])
    turns = []
    for e in scored:
        if lent.get(e.key, 0.0) > e.score:
            e = replace(e, score=lent[e.key], lent=lent[e.key])
        if threshold is None or e.score >= threshold:
            turns.append(e)
    turns.sort(key=lambda e: (-e.score, e.key))
    kept_facts = facts[: fact_places(top_k)] if turns else facts
    merged: list[Evidence] = []
    next_turn = 0
    for f in kept_facts:
        while next_turn < len(turns) and turns[next_turn].score > f.score:
            merged.append(turns[next_turn])
            next_turn += 1
        merged.append(Evidence("fact", f.rowid, f.score, f.semantic, f.keyword, f.entity))
    merged.extend(turns[next_turn:])
    if w.entity:
        return merged[:top_k]
    return [
        replace(e, entity=entity_share(texts[e.key], known)) if e.kind == "message" else e
        for e in merged[:top_k]
    ]
