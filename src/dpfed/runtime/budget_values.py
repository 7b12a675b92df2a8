"""Checking, time-stamping and showing the values a budget ledger stores.

The argument checks shared by the parts of :class:`~dpfed.runtime.budget.BudgetLedger`
(names, plans, privacy events, accountants), the timestamp written with every row, and the
format of an epsilon in messages and tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from dpfed._validation import DpfedInputError, check_positive
from dpfed.privacy.accounting import MECHANISMS, NUMERICAL_ACCOUNTANTS, Release, as_release
from dpfed.privacy.ledger import PrivacyEvent

__all__ = [
    "LEDGER_ACCOUNTANTS",
    "MAX_SQLITE_INT",
    "PlanItem",
    "check_accountant",
    "check_events",
    "check_name",
    "check_plan",
    "format_epsilon",
    "utc_now",
]

#: Accountants a budget ledger can use (the numerical ones, which account every mechanism).
LEDGER_ACCOUNTANTS = NUMERICAL_ACCOUNTANTS

#: Largest integer an SQLite INTEGER column holds (the bound on a release's round).
MAX_SQLITE_INT = 2**63 - 1

PlanItem = Release | tuple[str, float] | float
"""One planned release: a :class:`~dpfed.privacy.accounting.Release`, a ``(mechanism, z)`` pair
or a bare noise multiplier (a Gaussian release)."""


def check_name(name: str, value: object) -> str:
    """Check that ``value`` is a non-empty string (a data set, party, job id or digest).

    Parameters
    ----------
    name : str
        The argument's name, for the error message.
    value : object
        The value to check.

    Returns
    -------
    str
        ``value``.

    Raises
    ------
    DpfedInputError
        If ``value`` is not a non-empty string.
    """
    if not isinstance(value, str) or not value:
        raise DpfedInputError(f"{name} must be a non-empty string. Found {value!r}.")
    return value


def check_plan(plan: Sequence[PlanItem]) -> list[Release]:
    """Check a job's plan and return its releases, in the order given.

    Parameters
    ----------
    plan : sequence of Release, (mechanism, z) pairs or floats
        The planned releases; a bare float is a Gaussian release.

    Returns
    -------
    list of Release

    Raises
    ------
    DpfedInputError
        If ``plan`` is not such a sequence or an item is invalid.
    """
    expected = "a sequence of noise multipliers or (mechanism, noise_multiplier) releases"
    if isinstance(plan, str | bytes | Mapping):
        raise DpfedInputError(f"plan must be {expected}. Found {plan!r}.")
    try:
        items = list(plan)
    except TypeError:
        raise DpfedInputError(f"plan must be {expected}. Found {plan!r}.") from None
    out = []
    for i, item in enumerate(items):
        if isinstance(item, tuple):
            out.append(as_release(item))
        else:
            out.append(Release("gaussian", check_positive(f"plan[{i}]", item)))
    return out


def check_events(events: Sequence[PrivacyEvent]) -> list[PrivacyEvent]:
    """Check the privacy events of one call to record: valid, accounted, all of one party.

    Parameters
    ----------
    events : sequence of PrivacyEvent
        The releases to record.

    Returns
    -------
    list of PrivacyEvent
        ``events``, as a list.

    Raises
    ------
    DpfedInputError
        If ``events`` is not such a sequence, an event is invalid, has a mechanism the ledger
        does not account for or a round SQLite cannot store, or the events belong to several
        parties.
    """
    if isinstance(events, PrivacyEvent | str | bytes | Mapping):
        raise DpfedInputError(f"events must be a sequence of PrivacyEvent. Found {events!r}.")
    try:
        items = list(events)
    except TypeError:
        raise DpfedInputError(
            f"events must be a sequence of PrivacyEvent. Found {events!r}."
        ) from None
    for i, event in enumerate(items):
        if not isinstance(event, PrivacyEvent):
            raise DpfedInputError(f"events[{i}] must be a PrivacyEvent. Found {event!r}.")
        event.validate()
        if event.mechanism not in MECHANISMS:
            raise DpfedInputError(
                f"events[{i}].mechanism must be one of {MECHANISMS}, the mechanisms the budget "
                f"ledger accounts for. Found {event.mechanism!r}."
            )
        if event.round > MAX_SQLITE_INT:
            raise DpfedInputError(
                f"events[{i}].round must be at most {MAX_SQLITE_INT}. Found {event.round!r}."
            )
    parties = list(dict.fromkeys(e.party for e in items))
    if len(parties) > 1:
        raise DpfedInputError(
            f"events recorded in one call must all belong to one party. Found parties {parties}."
        )
    return items


def check_accountant(accountant: object) -> str:
    """Check that ``accountant`` is one of :data:`LEDGER_ACCOUNTANTS`.

    Parameters
    ----------
    accountant : object
        The value to check.

    Returns
    -------
    str
        ``accountant``.

    Raises
    ------
    DpfedInputError
        If it is not.
    """
    if not isinstance(accountant, str) or accountant not in LEDGER_ACCOUNTANTS:
        raise DpfedInputError(
            f"accountant must be one of {LEDGER_ACCOUNTANTS}. Found {accountant!r}."
        )
    return accountant


def utc_now() -> str:
    """The current time as the ledger stores it: ISO 8601, UTC, in microseconds.

    Returns
    -------
    str
    """
    return datetime.now(UTC).isoformat(timespec="microseconds")


def format_epsilon(x: float) -> str:
    """An epsilon as messages and tables show it (6 significant digits).

    Parameters
    ----------
    x : float

    Returns
    -------
    str
    """
    return f"{x:.6g}"
