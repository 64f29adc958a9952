"""The fact checks in the order an add runs them (base.FactCheck), and `check_facts`.

Order matters: grounding first corrects each fact's source message and speaker, which the later
checks read; then the drops (facts of a named speaker that share too few words with their
message; advice or an order written as a deed; a hope stated as done; copies of a new message;
facts about the person a message speaks to, moved to them or dropped; copies of the context,
invented names, a third person's deed moved onto the user); then a fact running on with its
message's own words is cut back to its third-person opening (a named speaker's, to its clauses in
the third person), and facts that only name a speaker go; last the rewrites of the facts that
stay ("User" named, relative dates resolved), so a dropped fact costs no rewrite.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..admission import Fact
from .addressee import AddressedFacts
from .advice import AdviceFacts
from .base import CheckContext, Dropped, FactCheck
from .copied_tails import CopiedTails, PersonClauses
from .fact_dates import RelativeDates
from .grounding import (
    ContextCopies,
    InventedNames,
    Misattributions,
    NameOnlyFacts,
    SubjectSwaps,
    UserPlaceholders,
)
from .hedges import HedgedFacts
from .turn_copies import TurnCopies
from .unsupported import UnsupportedFacts

FACT_CHECKS: tuple[FactCheck, ...] = (
    Misattributions(),
    UnsupportedFacts(),
    AdviceFacts(),
    HedgedFacts(),
    TurnCopies(),
    AddressedFacts(),
    ContextCopies(),
    InventedNames(),
    SubjectSwaps(),
    CopiedTails(),
    PersonClauses(),
    NameOnlyFacts(),
    UserPlaceholders(),
    RelativeDates(),
)


def check_facts(
    facts: Sequence[Fact], context: CheckContext, checks: Sequence[FactCheck] = FACT_CHECKS
) -> tuple[list[Fact], list[Dropped]]:
    """The facts every check keeps, as the checks left them, and every drop with its reason, in
    the order the checks made them."""
    kept = list(facts)
    dropped: list[Dropped] = []
    for check in checks:
        kept, out = check.check(kept, context)
        dropped.extend(out)
    return kept, dropped
