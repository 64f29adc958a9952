"""When a stored fact became true: the date its text names, else the date it was said.

"User painted a harbour at dawn in 2022", said on 8 May 2023, has been true since 2022; "User
lost the job", said that day, since that day. A fact's text has its relative dates resolved
already (checks/relative_dates.py); a raw turn's are resolved here the same way, so "I painted
that harbour last year!" gives 2022 too. A named period counts from its start (a year
from 1 January). Only dates up to the message's own count: one after it names a plan ("moving
to Oslo in May"), which is not yet true when said. Where a text names several dates, the latest
is when the last of them happened.

The store sets the other end, `valid_to`, when a later fact supersedes this one (writes.py).
"""

from __future__ import annotations

from datetime import date, datetime, timezone

from ..timeutil import iso, utc_now
from .checks.relative_dates import resolve_relative_dates
from .lexicon import Lexicon


def valid_from(text: str, observed_at: str | None, lexicon: Lexicon) -> str | None:
    """The moment `text` became true, ISO 8601 UTC: the latest date it names that is not after
    `observed_at` (the message's date), else `observed_at` itself (None when the message has no
    date: the store then uses the time it is stored)."""
    said = _day(observed_at) if observed_at is not None else utc_now().date()
    named = [d for d in stated_dates(resolve_relative_dates(text, said, lexicon), said, lexicon)
             if d < said]  # fmt: skip
    if not named:
        return observed_at
    return iso(datetime.combine(max(named), datetime.min.time(), tzinfo=timezone.utc))


def stated_dates(text: str, said: date, lexicon: Lexicon) -> list[date]:
    """Every date `text` writes out: days ("7 May 2023"; a day without a year is in the year it
    was said) and periods by their first day ("May 2023", "in 2022")."""
    found: list[date] = []
    for match in lexicon.written_date.finditer(text):
        found += _written_day(match.groupdict(), said, lexicon)
    rest = lexicon.written_date.sub(" ", text)  # "7 May 2023" is not also "May 2023"
    for match in lexicon.written_period.finditer(rest):
        parts = match.groupdict()
        if parts.get("month"):
            month = lexicon.month_names.index(parts["month"].lower()) + 1
            found += _safe_date(int(parts["month_year"]), month, 1)
        elif parts.get("year"):
            found += _safe_date(int(parts["year"]), 1, 1)
    return found


def _written_day(parts: dict[str, str | None], said: date, lexicon: Lexicon) -> list[date]:
    if parts.get("iso"):
        try:
            return [date.fromisoformat(str(parts["iso"]))]
        except ValueError:
            return []
    day, month, year = (parts.get("d1"), parts.get("m1"), parts.get("y1"))
    if day is None:
        day, month, year = (parts.get("d2"), parts.get("m2"), parts.get("y2"))
    if day is None or month is None:
        return []
    number = lexicon.month_names.index(month.lower()) + 1
    return _safe_date(int(year) if year else said.year, number, int(day))


def _safe_date(year: int, month: int, day: int) -> list[date]:
    try:
        return [date(year, month, day)]
    except ValueError:  # "31 February", year 0
        return []


def _day(stamp: str) -> date:
    return datetime.fromisoformat(stamp).date()
