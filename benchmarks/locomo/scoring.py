"""Scores, the LoCoMo way. Pure functions.

Token F1 follows LoCoMo's evaluation code: lowercase, drop commas and punctuation, drop the
articles (and "and", as LoCoMo does), Porter-stem every token, then the multiset F1 of prediction
and gold tokens. Multi-hop gold answers that list several items ("a, b") are scored as LoCoMo does:
each gold item against its best predicted item, averaged. A not-mentioned question scores 1 when
the answer says so ("not mentioned" / "no information available"), else 0.

The stemmer is nltk's PorterStemmer (what LoCoMo uses) when nltk is installed (the `bench`
extra), else `porter_stem` below, Porter's original algorithm; they agree on ordinary words.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
NOT_MENTIONED_MARKERS = ("not mentioned", "no information available")


_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def spell_iso_dates(text: str) -> str:
    """'2023-05-07' -> '7 May 2023' (the gold style), so a date's format is not scored as wrong.
    Applied to predictions of every system alike, before the LoCoMo normalisation."""

    def spell(match: re.Match[str]) -> str:
        year, month, day = (int(g) for g in match.groups())
        if not 1 <= month <= 12 or not 1 <= day <= 31:
            return match.group(0)
        return f"{day} {_MONTHS[month - 1]} {year}"

    return _ISO_DAY.sub(spell, str(text))


def normalize_answer(text: str) -> str:
    text = str(text).replace(",", "").lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _stemmer() -> tuple[str, Callable[[str], str]]:
    try:
        from nltk.stem import PorterStemmer
    except ImportError:
        return "builtin-porter", lambda word: porter_stem(word)  # defined below
    return "nltk-porter", PorterStemmer().stem


STEMMER_NAME, _stem = _stemmer()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    return _stem(word)


def tokens(text: str) -> list[str]:
    return [stem(w) for w in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = tokens(prediction), tokens(gold)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """LoCoMo's multi-hop F1: each comma-separated gold item against its best predicted item."""
    predictions = [p.strip() for p in str(prediction).split(",") if p.strip()] or [""]
    golds = [g.strip() for g in str(gold).split(",") if g.strip()]
    if not golds:
        return 0.0
    return sum(max(token_f1(p, g) for p in predictions) for g in golds) / len(golds)


def says_not_mentioned(answer: str) -> bool:
    lowered = " ".join(str(answer).lower().split())
    return any(marker in lowered for marker in NOT_MENTIONED_MARKERS)


def answer_score(prediction: str, gold: str, qtype: str) -> float:
    prediction = spell_iso_dates(prediction)
    if qtype == "not_mentioned":
        return 1.0 if says_not_mentioned(prediction) else 0.0
    if qtype == "multi_hop":
        return multi_answer_f1(prediction, gold)
    return token_f1(prediction, gold)


def evidence_recall(evidence: Iterable[str], retrieved: Sequence[Iterable[str]]) -> float | None:
    """Share of the evidence dia_ids that some retrieved memory came from; None without evidence.

    `retrieved` holds, for each retrieved memory (the top-k), the dia_ids it came from."""
    wanted = set(evidence)
    if not wanted:
        return None
    found: set[str] = set()
    for sources in retrieved:
        found.update(sources)
    return len(wanted & found) / len(wanted)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


# -- Porter's original stemmer (used only when nltk is absent) --------------------------------

_VOWELS = set("aeiou")


def _cons(w: str, i: int) -> bool:
    if w[i] in _VOWELS:
        return False
    if w[i] == "y":
        return i == 0 or not _cons(w, i - 1)
    return True


def _measure(stem_: str) -> int:
    forms = "".join("c" if _cons(stem_, i) else "v" for i in range(len(stem_)))
    return len(re.findall(r"v+c+", forms))


def _has_vowel(stem_: str) -> bool:
    return any(not _cons(stem_, i) for i in range(len(stem_)))


def _double_cons(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    return (
        len(w) >= 3
        and _cons(w, len(w) - 3)
        and not _cons(w, len(w) - 2)
        and _cons(w, len(w) - 1)
        and w[-1] not in "wxy"
    )


def _replace(w: str, rules: Sequence[tuple[str, str]], min_m: int) -> str:
    for suffix, repl in rules:
        if w.endswith(suffix):
            base = w[: len(w) - len(suffix)]
            return base + repl if _measure(base) > min_m else w
    return w


_STEP2 = [
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("abli", "able"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
]
_STEP3 = [
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
]
_STEP4 = [
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
]


def porter_stem(word: str) -> str:
    """M. F. Porter (1980), 'An algorithm for suffix stripping'."""
    w = word.lower()
    if len(w) <= 2:
        return w
    # step 1a
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    # step 1b
    extra = False
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
                w, extra = w[: -len(suffix)], True
                break
    if extra:
        if w.endswith(("at", "bl", "iz")):
            w += "e"
        elif _double_cons(w) and w[-1] not in "lsz":
            w = w[:-1]
        elif _measure(w) == 1 and _cvc(w):
            w += "e"
    # step 1c, with nltk's refinement: only after a consonant ("day" stays, "happy" -> "happi")
    if w.endswith("y") and len(w) > 2 and _cons(w, len(w) - 2):
        w = w[:-1] + "i"
    w = _replace(w, _STEP2, 0)
    w = _replace(w, _STEP3, 0)
    # step 4
    for suffix in sorted(_STEP4, key=len, reverse=True):
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if _measure(base) > 1 and (suffix != "ion" or base.endswith(("s", "t"))):
                w = base
            break
    # step 5
    if w.endswith("e"):
        base = w[:-1]
        if _measure(base) > 1 or (_measure(base) == 1 and not _cvc(base)):
            w = base
    if _measure(w) > 1 and _double_cons(w) and w.endswith("l"):
        w = w[:-1]
    return w
