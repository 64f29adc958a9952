"""Timestamps (ISO-8601 UTC) and the parsing of user-supplied dates. Pure."""

from __future__ import annotations

from datetime import date, datetime, time, timezone

from .errors import ValidationError, shown


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def iso(moment: datetime) -> str:
    """ISO-8601 in UTC with microseconds, so that string order is time order."""
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


def parse_datetime(value: object, *, what: str) -> datetime:
    """A datetime from a datetime, a date (midnight UTC) or an ISO-8601 string; naive means UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValidationError(
                f"{what} must be an ISO-8601 date or datetime such as '2026-05-01' or "
                f"'2026-05-01T09:30:00Z', got {shown(value)}"
            ) from None
    else:
        raise ValidationError(
            f"{what} must be a date, datetime or ISO-8601 string, got {shown(value)}"
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:  # e.g. 0001-01-01T00:00+01:00 is before year 1 in UTC
        raise ValidationError(
            f"{what} is outside the years 1-9999 in UTC: {shown(value)}"
        ) from None


def parse_as_of(value: object, *, what: str = "as_of") -> datetime:
    """The moment a read asks about. A date (or a date-only string) means the end of that day
    (UTC), so a fact said at noon on it counts; a datetime is that moment."""
    if isinstance(value, date) and not isinstance(value, datetime):
        day = value
    elif isinstance(value, str) and len(value.strip()) == 10:
        day = parse_datetime(value, what=what).date()
    else:
        return parse_datetime(value, what=what)
    return datetime.combine(day, time.max, tzinfo=timezone.utc)


def parse_expiration(value: object) -> str:
    """Normalise an expiration date. A date (or date-only string) stays a date, 'YYYY-MM-DD',
    and the memory is valid through that whole day (UTC); a datetime becomes ISO UTC."""
    if isinstance(value, datetime):
        return iso(parse_datetime(value, what="expiration_date"))
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str) and len(value.strip()) == 10:
        try:
            return date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            pass
    return iso(parse_datetime(value, what="expiration_date"))


def is_expired(expiration: str | None, now: datetime) -> bool:
    if expiration is None:
        return False
    if len(expiration) == 10:
        return expiration < now.date().isoformat()
    return expiration <= iso(now)


EXPIRY_SQL = (
    "({col} IS NULL OR (length({col}) = 10 AND {col} >= ?) OR (length({col}) > 10 AND {col} > ?))"
)


def unexpired_clause(column: str, now: datetime) -> tuple[str, list[str]]:
    """SQL that keeps rows whose expiration (as `parse_expiration` writes it) has not passed."""
    return EXPIRY_SQL.format(col=column), [now.date().isoformat(), iso(now)]
