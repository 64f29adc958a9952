"""What `verify` found: each check's problems, by check name, listed up to a bound; and the
run of a store's checks, the same for the memory file and a PostgreSQL database."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...errors import OfflineMemError
from ...values import EmbedderIdentity

MAX_LISTED = 20  # problems listed per check; the rest are counted


class CheckedDatabase(Protocol):
    """What the checks read through: the file's `Database` or a PostgreSQL `PgDatabase`. A check
    that both stores run uses SQL that both accept, without parameters."""

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def snapshot(self) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class Problem:
    check: str
    detail: str


@dataclass
class VerifyReport:
    path: str
    checks: list[str] = field(default_factory=list)  # the checks that ran, in order
    problems: list[Problem] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # check -> why it could not run

    @property
    def ok(self) -> bool:
        return not self.problems

    def problems_of(self, check: str) -> list[Problem]:
        return [p for p in self.problems if p.check == check]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "checks": {name: [p.detail for p in self.problems_of(name)] for name in self.checks},
            "skipped": dict(self.skipped),
        }


class Checker:
    """What a check is given: the database, the configured embedder (None: the pin is checked
    for presence only) and the report its problems go to."""

    def __init__(
        self, db: CheckedDatabase, report: VerifyReport, embedder: EmbedderIdentity | None
    ) -> None:
        self.db = db
        self.report = report
        self.embedder = embedder

    def problems(self, check: str, details: list[str]) -> None:
        listed = details[:MAX_LISTED]
        self.report.problems += [Problem(check, d) for d in listed]
        if len(details) > MAX_LISTED:
            more = len(details) - MAX_LISTED
            self.report.problems.append(Problem(check, f"... and {more} more"))


Check = Callable[[Checker], None]


def run_checks(
    db: CheckedDatabase,
    checks: Sequence[tuple[str, Check]],
    *,
    shown: str,
    embedder: EmbedderIdentity | None,
    embedder_unavailable: str | None,
    progress: Callable[[str], None] | None,
) -> VerifyReport:
    """Run `checks` in order over one snapshot of `db` (shown in the report as `shown`)."""
    report = VerifyReport(path=shown)
    checker = Checker(db, report, embedder)
    with db.snapshot():
        for name, check in checks:
            if progress is not None:
                progress(name)
            report.checks.append(name)
            try:
                check(checker)
            except OfflineMemError as exc:  # a damaged row stops this check, not the others
                checker.problems(name, [f"could not run: {exc}"])
    if embedder is None and embedder_unavailable:
        report.skipped["configured embedder"] = embedder_unavailable
    return report
