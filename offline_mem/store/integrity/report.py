"""What `verify` found: each check's problems, by check name, listed up to a bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..db import Database

MAX_LISTED = 20  # problems listed per check; the rest are counted


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
    def __init__(self, db: Database, report: VerifyReport) -> None:
        self.db = db
        self.report = report

    def problems(self, check: str, details: list[str]) -> None:
        listed = details[:MAX_LISTED]
        self.report.problems += [Problem(check, d) for d in listed]
        if len(details) > MAX_LISTED:
            more = len(details) - MAX_LISTED
            self.report.problems.append(Problem(check, f"... and {more} more"))
