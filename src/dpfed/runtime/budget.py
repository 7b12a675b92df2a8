r"""A persistent privacy-budget ledger per data set and party (SQLite).

Each party of a networked job keeps its own ledger file. For every pair (data set, party) the
ledger holds a *budget* :math:`(\varepsilon_B, \delta_B)`, the *jobs* run on that pair, and every
noisy release those jobs made (Gaussian or pure-DP l2-Laplace), recorded *before* the release
left the party.

Accounting rule
---------------
The privacy a party has spent on a data set is that of composing **all** releases ever recorded
for (data set, party), over all jobs and mechanisms, at the budget's delta:

.. math::

    \varepsilon_{spent} = \varepsilon_{acc}\big((m_1, z_1), \dots, (m_T, z_T);\ \delta_B\big),
    \qquad z_t = \sigma_t / C_t,

where :math:`m_t` is the release's mechanism and :math:`\varepsilon_{acc}` is
:func:`dpfed.privacy.accounting.releases_epsilon` (the function the per-job
:class:`~dpfed.privacy.ledger.PrivacyLedger` accounts with too) with the ledger's accountant
(``"pld"`` or ``"rdp"``, fixed when the file is created). Pure :math:`\varepsilon`-DP releases
of decentralized ADMM therefore compose with the Gaussian releases of the other protocols.

A job declares its *plan* (the mechanism and noise multiplier of every release it will make) when
it is opened, and the plan is reserved. The *committed* multiset of a pair is

.. math::

    \mathcal{Z}_{committed} = \{\text{releases of closed jobs}\}
        \ \uplus \biguplus_{\text{open jobs}} \max(\text{plan}, \text{releases}),

(multiset union; as releases of an open job must match its plan, an open job counts exactly its
plan) and :math:`\varepsilon_{committed} = \varepsilon_{acc}(\mathcal{Z}_{committed}; \delta_B)`.
A new job with plan :math:`P` is admitted only if

.. math::

    \varepsilon_{acc}\big(\mathcal{Z}_{committed} \uplus P;\ \delta_B\big) \le \varepsilon_B,

checked and reserved in one ``BEGIN IMMEDIATE`` transaction, so two processes cannot both take
the last of a budget. Closing a job returns its unspent reservation: afterwards only its
recorded releases count. Epsilons do not add; the *reserved* figure reported is the increment
:math:`\varepsilon_{committed} - \varepsilon_{spent}`.

Recording is write-ahead and idempotent: a release is keyed by (job, party, round, label); the
same release recorded again is a no-op, a different one under the same key is refused, and so is
a release whose (mechanism, noise multiplier) is not in the job's remaining plan (it was never
reserved).

Notes
-----
The file uses WAL journaling with ``synchronous=FULL`` and a busy timeout; it can be shared by
several processes on one machine (not over a network file system). A file of schema version 1
(Gaussian plans only) or 2 (no grid coordinates) is upgraded in place when opened: its plan
entries become Gaussian, and its entries and releases count no grid coordinates (their noise
was drawn in floating point, which has no coupling delta to charge). Open one
:class:`BudgetLedger` per process; an instance serialises its own threads.
:meth:`~BudgetLedger.open_job` computes the epsilon while it holds the write lock (with
``"pld"`` this can take a second or more), so other writers may wait that long.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from dpfed._validation import DpfedInputError, check_open_unit, check_positive
from dpfed.privacy.accounting import (
    MECHANISMS,
    NUMERICAL_ACCOUNTANTS,
    Release,
    as_release,
    releases_epsilon,
)
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.runtime.private_files import private_file, private_folder

__all__ = [
    "LEDGER_ACCOUNTANTS",
    "SCHEMA_VERSION",
    "BudgetExceeded",
    "BudgetLedger",
    "LedgerConflict",
    "Reservation",
    "format_summary",
]

#: Accountants a budget ledger can use (the numerical ones, which account every mechanism).
LEDGER_ACCOUNTANTS = NUMERICAL_ACCOUNTANTS

#: Version of the table layout. Versions 1 to 3 are upgraded when opened; others are refused.
SCHEMA_VERSION = 4

# Statements that upgrade a file of each older version to the next one: version 1's plans were
# Gaussian only; versions 1 and 2 knew no exact grid sampler (no coordinates to charge);
# versions 1 to 3 recorded no digest of the rows a job read (jobs on column ranges have none).
_MIGRATIONS = {
    "1": ("ALTER TABLE plan_entries ADD COLUMN mechanism TEXT NOT NULL DEFAULT 'gaussian'",),
    "2": (
        "ALTER TABLE plan_entries ADD COLUMN coordinates INTEGER NOT NULL DEFAULT 0 "
        "CHECK (coordinates >= 0)",
        "ALTER TABLE releases ADD COLUMN coordinates INTEGER NOT NULL DEFAULT 0 "
        "CHECK (coordinates >= 0)",
        "CREATE TABLE withdrawals (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, "
        "party TEXT NOT NULL, dataset TEXT NOT NULL, planned INTEGER NOT NULL, "
        "opened_at TEXT NOT NULL, withdrawn_at TEXT NOT NULL, reason TEXT NOT NULL)",
    ),
    "3": ("ALTER TABLE jobs ADD COLUMN rows TEXT",),
}

_FORMAT = "dpfed-budget-ledger"
_MAX_SQLITE_INT = 2**63 - 1

_SCHEMA = """
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE budgets (
    dataset TEXT NOT NULL,
    party TEXT NOT NULL,
    epsilon REAL NOT NULL CHECK (epsilon > 0),
    delta REAL NOT NULL CHECK (delta > 0 AND delta < 1),
    set_at TEXT NOT NULL,
    PRIMARY KEY (dataset, party)
);
CREATE TABLE budget_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL,
    party TEXT NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    changed_at TEXT NOT NULL
);
CREATE TABLE jobs (
    job_id TEXT NOT NULL,
    party TEXT NOT NULL,
    dataset TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'closed')),
    opened_at TEXT NOT NULL,
    closed_at TEXT,
    rows TEXT,
    PRIMARY KEY (job_id, party),
    FOREIGN KEY (dataset, party) REFERENCES budgets (dataset, party)
);
CREATE INDEX jobs_by_pair ON jobs (dataset, party);
CREATE TABLE plan_entries (
    job_id TEXT NOT NULL,
    party TEXT NOT NULL,
    idx INTEGER NOT NULL,
    noise_multiplier REAL NOT NULL CHECK (noise_multiplier > 0),
    mechanism TEXT NOT NULL DEFAULT 'gaussian',
    coordinates INTEGER NOT NULL DEFAULT 0 CHECK (coordinates >= 0),
    PRIMARY KEY (job_id, party, idx),
    FOREIGN KEY (job_id, party) REFERENCES jobs (job_id, party)
);
CREATE TABLE releases (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    party TEXT NOT NULL,
    round INTEGER NOT NULL CHECK (round >= 0),
    label TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    noise_multiplier REAL NOT NULL CHECK (noise_multiplier > 0),
    sigma REAL NOT NULL CHECK (sigma > 0),
    l2_sensitivity REAL NOT NULL CHECK (l2_sensitivity > 0),
    plan_idx INTEGER NOT NULL,
    digest TEXT,
    recorded_at TEXT NOT NULL,
    coordinates INTEGER NOT NULL DEFAULT 0 CHECK (coordinates >= 0),
    UNIQUE (job_id, party, round, label),
    UNIQUE (job_id, party, plan_idx),
    FOREIGN KEY (job_id, party, plan_idx) REFERENCES plan_entries (job_id, party, idx)
);
CREATE TABLE withdrawals (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    party TEXT NOT NULL,
    dataset TEXT NOT NULL,
    planned INTEGER NOT NULL,
    opened_at TEXT NOT NULL,
    withdrawn_at TEXT NOT NULL,
    reason TEXT NOT NULL
);
"""


class BudgetExceeded(DpfedInputError):
    """A job or release that the privacy budget does not cover (nothing was written)."""


class LedgerConflict(DpfedInputError):
    """Something already recorded under the same key with different values."""


@dataclass(frozen=True)
class Reservation:
    """The reservation of an open job, as :meth:`BudgetLedger.open_job` returns it.

    Attributes
    ----------
    job_id, dataset, party : str
        The job and the (data set, party) it runs on.
    plan : tuple of Release
        The reserved releases (mechanism, noise multiplier), in the order given when the job
        was opened.
    recorded : int
        Releases already recorded for the job (> 0 only for a resumed job).
    resumed : bool
        True if the job was already open (nothing new was reserved).
    committed_epsilon : float
        Epsilon of everything committed on (dataset, party), this job's plan included.
    budget_epsilon, budget_delta : float
        The budget of (dataset, party).
    accountant : str
        The ledger's accountant.
    """

    job_id: str
    dataset: str
    party: str
    plan: tuple[Release, ...]
    recorded: int
    resumed: bool
    committed_epsilon: float
    budget_epsilon: float
    budget_delta: float
    accountant: str


# ------------------------------------------------------------------------------------------------
# validation helpers
# ------------------------------------------------------------------------------------------------


def _check_name(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise DpfedInputError(f"{name} must be a non-empty string. Found {value!r}.")
    return value


PlanItem = Release | tuple[str, float] | float
"""One planned release: a :class:`~dpfed.privacy.accounting.Release`, a ``(mechanism, z)`` pair
or a bare noise multiplier (a Gaussian release)."""


def _check_plan(plan: Sequence[PlanItem]) -> list[Release]:
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


def _check_events(events: Sequence[PrivacyEvent]) -> list[PrivacyEvent]:
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
        if event.round > _MAX_SQLITE_INT:
            raise DpfedInputError(
                f"events[{i}].round must be at most {_MAX_SQLITE_INT}. Found {event.round!r}."
            )
    parties = list(dict.fromkeys(e.party for e in items))
    if len(parties) > 1:
        raise DpfedInputError(
            f"events recorded in one call must all belong to one party. Found parties {parties}."
        )
    return items


def _check_accountant(accountant: object) -> str:
    if not isinstance(accountant, str) or accountant not in LEDGER_ACCOUNTANTS:
        raise DpfedInputError(
            f"accountant must be one of {LEDGER_ACCOUNTANTS}. Found {accountant!r}."
        )
    return accountant


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _fmt(x: float) -> str:
    return f"{x:.6g}"


# ------------------------------------------------------------------------------------------------
# the ledger
# ------------------------------------------------------------------------------------------------


class BudgetLedger:
    """Persistent per-(data set, party) privacy budget with reservations and a release log.

    See the module docstring for the accounting rule.

    Parameters
    ----------
    path : str or os.PathLike
        The ledger file; created (with its folder) if missing.
    accountant : {"pld", "rdp"} or None
        Accountant of a new file (default ``"pld"``). For an existing file, ``None`` uses the
        stored one, and any other value must equal it.
    timeout : float, default 30.0
        Seconds to wait for another process's write lock before failing
        (``sqlite3.OperationalError: database is locked``).

    Raises
    ------
    DpfedInputError
        If the file is not a dpfed budget ledger, has another schema version, or was created
        with another accountant; or for a bad argument.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        accountant: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            raise DpfedInputError(f"path must be a non-empty path. Found {path!r}.")
        if accountant is not None:
            _check_accountant(accountant)
        self._timeout = check_positive("timeout", timeout, allow_zero=True)
        self._path = Path(os.fspath(path))
        if self._path.is_dir():
            raise DpfedInputError(f"path must be a file, not a folder. Found {str(self._path)!r}.")
        self._lock = threading.RLock()
        try:
            private_folder(self._path.parent, narrow_existing=False)
            private_file(self._path)  # owner-only; SQLite gives its WAL files the same mode
        except OSError as err:
            raise DpfedInputError(
                f"path must be in a folder that exists or can be created. "
                f"Found {str(self._path)!r} ({err})."
            ) from None
        try:
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                self._path,
                timeout=self._timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as err:
            raise DpfedInputError(
                f"path must be a file that can be opened as a budget ledger. "
                f"Found {str(self._path)!r} ({err})."
            ) from None
        try:
            self._accountant = self._setup(accountant)
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    # ---------------------------------------------------------------- opening and closing

    def _setup(self, accountant: str | None) -> str:
        conn = self._conn
        assert conn is not None
        where = str(self._path)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            tables = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if tables and "meta" not in tables:
                raise DpfedInputError(
                    f"path must be a dpfed budget ledger. Found {where!r}: an SQLite database "
                    "without the ledger's meta table."
                )
            if not tables:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("BEGIN IMMEDIATE")
                try:
                    exists = conn.execute(
                        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
                    ).fetchone()
                    if exists is None:  # no other process created it meanwhile
                        for statement in _SCHEMA.split(";"):
                            if statement.strip():
                                conn.execute(statement)
                        conn.executemany(
                            "INSERT INTO meta (key, value) VALUES (?, ?)",
                            [
                                ("format", _FORMAT),
                                ("schema_version", str(SCHEMA_VERSION)),
                                ("accountant", accountant or "pld"),
                                ("created_at", _now()),
                            ],
                        )
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as err:
            raise DpfedInputError(
                f"path must be a dpfed budget ledger (an SQLite file). Found {where!r} ({err})."
            ) from None
        if meta.get("format") != _FORMAT:
            raise DpfedInputError(
                f"path must be a dpfed budget ledger. Found {where!r}: its meta table has "
                f"format {meta.get('format')!r}, not {_FORMAT!r}."
            )
        version = meta.get("schema_version")
        if version in _MIGRATIONS:
            version = self._migrate(conn)
        if version != str(SCHEMA_VERSION):
            raise DpfedInputError(
                f"the budget ledger {where!r} has schema version {version}; this dpfed reads "
                f"schema version {SCHEMA_VERSION}."
            )
        stored = meta.get("accountant")
        if stored not in LEDGER_ACCOUNTANTS:
            raise DpfedInputError(
                f"the budget ledger {where!r} names an unknown accountant {stored!r}; expected "
                f"one of {LEDGER_ACCOUNTANTS}."
            )
        if accountant is not None and accountant != stored:
            raise DpfedInputError(
                f"accountant must match the one the budget ledger {where!r} was created with "
                f"({stored!r}). Found {accountant!r}."
            )
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as err:  # pragma: no cover - exotic file systems
            raise DpfedInputError(f"cannot configure the budget ledger {where!r}: {err}") from None
        return str(stored)

    def _migrate(self, conn: sqlite3.Connection) -> str:
        """Upgrade an older file to :data:`SCHEMA_VERSION` in one transaction (plan entries
        gain their mechanism, Gaussian; plan entries and releases their grid coordinates, 0);
        another process may have upgraded it meanwhile."""
        old = "?"
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT value FROM meta WHERE key = 'schema_version'"
                ).fetchone()
                old = str(row[0]) if row is not None else "?"
                if row is not None and row[0] in _MIGRATIONS:
                    version = str(row[0])
                    while version in _MIGRATIONS:
                        for statement in _MIGRATIONS[version]:
                            conn.execute(statement)
                        version = str(int(version) + 1)
                    conn.execute(
                        "UPDATE meta SET value = ? WHERE key = 'schema_version'",
                        (str(SCHEMA_VERSION),),
                    )
                    conn.execute(
                        "INSERT OR REPLACE INTO meta (key, value) VALUES ('migrated_at', ?)",
                        (_now(),),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as err:
            raise DpfedInputError(
                f"cannot upgrade the budget ledger {str(self._path)!r} from schema version {old}: "
                f"{err}"
            ) from None
        return str(row[0]) if row is not None else "?"

    @property
    def path(self) -> Path:
        """The ledger file."""
        return self._path

    @property
    def accountant(self) -> str:
        """The accountant fixed when the file was created."""
        return self._accountant

    def close(self) -> None:
        """Close the connection (idempotent); the instance cannot be used afterwards."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> BudgetLedger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"BudgetLedger({str(self._path)!r}, accountant={self._accountant!r}, {state})"

    # ---------------------------------------------------------------- transactions

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise DpfedInputError(f"the budget ledger {str(self._path)!r} is closed.")
        return self._conn

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction: ``BEGIN IMMEDIATE`` (write lock taken up front) or a read snapshot."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # ---------------------------------------------------------------- accounting (in a txn)

    def _epsilon(self, releases: Sequence[Release], delta: float) -> float:
        return releases_epsilon(list(releases), delta, self._accountant)

    @staticmethod
    def _stored_budget(
        conn: sqlite3.Connection, dataset: str, party: str
    ) -> tuple[float, float] | None:
        """The budget ``(epsilon, delta)`` of (dataset, party) in ``conn``, or None."""
        row = conn.execute(
            "SELECT epsilon, delta FROM budgets WHERE dataset = ? AND party = ?",
            (dataset, party),
        ).fetchone()
        return None if row is None else (float(row[0]), float(row[1]))

    @classmethod
    def _budget_row(cls, conn: sqlite3.Connection, dataset: str, party: str
                    ) -> tuple[float, float]:
        row = cls._stored_budget(conn, dataset, party)
        if row is None:
            raise DpfedInputError(
                f"no privacy budget is set for dataset {dataset!r}, party {party!r}; "
                "set one with set_budget."
            )
        return float(row[0]), float(row[1])

    @staticmethod
    def _spent_releases(conn: sqlite3.Connection, dataset: str, party: str,
                        job_id: str | None = None) -> list[Release]:
        """The releases recorded on (dataset, party), of job ``job_id`` only if given."""
        rows = conn.execute(
            "SELECT r.mechanism, r.noise_multiplier, r.coordinates FROM releases r "
            "JOIN jobs j ON j.job_id = r.job_id AND j.party = r.party "
            "WHERE j.dataset = ? AND j.party = ? AND (? IS NULL OR r.job_id = ?) "
            "ORDER BY r.seq",
            (dataset, party, job_id, job_id),
        ).fetchall()
        return [Release(str(r[0]), float(r[1]), int(r[2])) for r in rows]

    @staticmethod
    def _reserved_releases(conn: sqlite3.Connection, dataset: str, party: str) -> list[Release]:
        """Planned entries of open jobs not yet matched by a recorded release."""
        rows = conn.execute(
            "SELECT p.mechanism, p.noise_multiplier, p.coordinates FROM plan_entries p "
            "JOIN jobs j ON j.job_id = p.job_id AND j.party = p.party "
            "WHERE j.dataset = ? AND j.party = ? AND j.status = 'open' AND NOT EXISTS ("
            "  SELECT 1 FROM releases r "
            "  WHERE r.job_id = p.job_id AND r.party = p.party AND r.plan_idx = p.idx"
            ") ORDER BY p.job_id, p.idx",
            (dataset, party),
        ).fetchall()
        return [Release(str(r[0]), float(r[1]), int(r[2])) for r in rows]

    def _committed_releases(
        self, conn: sqlite3.Connection, dataset: str, party: str
    ) -> list[Release]:
        # Every recorded release consumed one planned entry of its job, so "releases + unmatched
        # plan entries of open jobs" is max(plan, releases) per open job and the releases of
        # closed jobs.
        return self._spent_releases(conn, dataset, party) + self._reserved_releases(
            conn, dataset, party
        )

    # ---------------------------------------------------------------- budgets

    def set_budget(self, dataset: str, party: str, epsilon: float, delta: float) -> None:
        """Set (or change) the budget of (dataset, party); the change is logged with its time.

        Lowering a budget below what is already spent or committed is allowed: open jobs keep
        their reservations, but every new job is refused until the budget is raised again.

        Parameters
        ----------
        dataset, party : str
            Non-empty names.
        epsilon : float
            Total epsilon > 0.
        delta : float
            Total delta in (0, 1); the accounting uses it.
        """
        dataset = _check_name("dataset", dataset)
        party = _check_name("party", party)
        eps = check_positive("epsilon", epsilon)
        d = check_open_unit("delta", delta)
        now = _now()
        with self._transaction(write=True) as conn:
            conn.execute(
                "INSERT INTO budgets (dataset, party, epsilon, delta, set_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (dataset, party) DO UPDATE SET "
                "epsilon = excluded.epsilon, delta = excluded.delta, set_at = excluded.set_at",
                (dataset, party, eps, d, now),
            )
            conn.execute(
                "INSERT INTO budget_changes (dataset, party, epsilon, delta, changed_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (dataset, party, eps, d, now),
            )

    def budget(self, dataset: str, party: str) -> tuple[float, float] | None:
        """The budget ``(epsilon, delta)`` of (dataset, party), or None if none is set."""
        dataset = _check_name("dataset", dataset)
        party = _check_name("party", party)
        with self._transaction(write=False) as conn:
            return self._stored_budget(conn, dataset, party)

    def budget_history(
        self, dataset: str | None = None, party: str | None = None
    ) -> list[dict[str, Any]]:
        """Every budget change, oldest first: dataset, party, epsilon, delta, changed_at."""
        where, args = self._filters(dataset=("dataset", dataset), party=("party", party))
        with self._transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT dataset, party, epsilon, delta, changed_at FROM budget_changes"
                + (" WHERE " + " AND ".join(where) if where else "")
                + " ORDER BY seq",
                args,
            ).fetchall()
        keys = ("dataset", "party", "epsilon", "delta", "changed_at")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def spent_epsilon(self, dataset: str, party: str, *, job_id: str | None = None) -> float:
        """Epsilon of the releases recorded on (dataset, party), at the budget's delta.

        With ``job_id``, of that job's releases alone: what the job has spent so far (a
        function of its public parameters; the party's other jobs are not in it).

        Raises
        ------
        DpfedInputError
            If no budget is set for (dataset, party) (its delta defines the epsilon).
        """
        dataset = _check_name("dataset", dataset)
        party = _check_name("party", party)
        with self._transaction(write=False) as conn:
            _, delta = self._budget_row(conn, dataset, party)
            zs = self._spent_releases(conn, dataset, party, job_id)
        return self._epsilon(zs, delta)

    def committed_epsilon(self, dataset: str, party: str) -> float:
        """Epsilon of the recorded releases plus the open jobs' unspent reservations.

        Raises
        ------
        DpfedInputError
            If no budget is set for (dataset, party).
        """
        dataset = _check_name("dataset", dataset)
        party = _check_name("party", party)
        with self._transaction(write=False) as conn:
            _, delta = self._budget_row(conn, dataset, party)
            zs = self._committed_releases(conn, dataset, party)
        return self._epsilon(zs, delta)

    # ---------------------------------------------------------------- jobs

    def check_plan(self, dataset: str, party: str, plan: Sequence[PlanItem]) -> dict[str, Any]:
        """Whether a job with ``plan`` would fit the budget of (dataset, party) now, without
        reserving anything: what :meth:`open_job` would decide.

        Returns
        -------
        dict
            ``budget_epsilon``, ``delta``, ``spent`` and ``committed`` (epsilon of the recorded
            releases, and with the open jobs' reservations), ``total`` (epsilon of everything
            committed with this plan: releases compose, so it is below ``committed`` plus the
            job's own epsilon) and ``fits`` (``total <= budget_epsilon``); the budget keys are
            None, and ``fits`` False, when no budget is set.
        """
        dataset = _check_name("dataset", dataset)
        party = _check_name("party", party)
        zs = _check_plan(plan)
        with self._transaction(write=False) as conn:
            budget = self._stored_budget(conn, dataset, party)
            if budget is None:
                return {"budget_epsilon": None, "delta": None, "spent": None,
                        "committed": None, "total": None, "fits": False}
            eps_budget, delta = budget
            committed = self._committed_releases(conn, dataset, party)
            spent = self._spent_releases(conn, dataset, party)
            total = self._epsilon(committed + zs, delta)
            return {
                "budget_epsilon": eps_budget, "delta": delta,
                "spent": self._epsilon(spent, delta),
                "committed": self._epsilon(committed, delta),
                "total": total, "fits": total <= eps_budget,
            }

    def open_job(
        self, job_id: str, dataset: str, party: str, plan: Sequence[PlanItem],
        *, rows: str | None = None,
    ) -> Reservation:
        """Open a job on (dataset, party) and reserve its plan, if the budget allows it.

        The check and the reservation happen in one ``BEGIN IMMEDIATE`` transaction. Opening a
        job that is already open with the same data set and plan (a resumed job) returns its
        reservation without reserving again.

        Parameters
        ----------
        job_id : str
            Identifier of the job (unique per party in this ledger).
        dataset, party : str
            Where the job runs.
        plan : sequence of Release, (mechanism, z) pairs or floats
            Every release the job will make: its mechanism (one of
            :data:`~dpfed.privacy.accounting.MECHANISMS`) and noise multiplier (finite, > 0);
            a bare float is a Gaussian release. May be empty.
        rows : str, optional
            The digest of the rows the job reads, when they were agreed by ID (an alignment's
            :func:`~dpfed.data.psi.alignment_digest`): which customers the spending is on.

        Returns
        -------
        Reservation

        Raises
        ------
        BudgetExceeded
            If no budget is set, or the committed epsilon with this plan would exceed it;
            nothing is written.
        LedgerConflict
            If the job is already open with another data set or plan.
        DpfedInputError
            If the job was closed, or for a bad argument.
        """
        job_id = _check_name("job_id", job_id)
        dataset = _check_name("dataset", dataset)
        party = _check_name("party", party)
        zs = _check_plan(plan)
        with self._transaction(write=True) as conn:
            job = conn.execute(
                "SELECT dataset, status, rows FROM jobs WHERE job_id = ? AND party = ?",
                (job_id, party),
            ).fetchone()
            if job is not None:
                if job[2] != rows:
                    raise LedgerConflict(
                        f"job {job_id!r} (party {party!r}) is open on the rows of digest "
                        f"{job[2]}. Found rows of digest {rows}: a resumed job must read the "
                        "same rows."
                    )
                return self._resume(conn, job_id, dataset, party, zs, job[0], job[1])
            budget = self._stored_budget(conn, dataset, party)
            if budget is None:
                raise BudgetExceeded(
                    f"cannot open job {job_id!r}: no privacy budget is set for dataset "
                    f"{dataset!r}, party {party!r}; set one with set_budget."
                )
            eps_budget, delta = budget
            committed = self._committed_releases(conn, dataset, party)
            total = self._epsilon(committed + zs, delta)
            if total > eps_budget:
                spent = self._epsilon(self._spent_releases(conn, dataset, party), delta)
                eps_committed = self._epsilon(committed, delta)
                raise BudgetExceeded(
                    f"cannot open job {job_id!r} on dataset {dataset!r} for party {party!r}: "
                    f"its {len(zs)} planned release(s) would bring the epsilon to "
                    f"{_fmt(total)}, over the budget epsilon {_fmt(eps_budget)} (delta "
                    f"{delta:g}, accountant {self._accountant}). Already spent {_fmt(spent)} "
                    f"and reserved {_fmt(eps_committed - spent)} by open jobs (committed "
                    f"{_fmt(eps_committed)})."
                )
            conn.execute(
                "INSERT INTO jobs (job_id, party, dataset, status, opened_at, rows) "
                "VALUES (?, ?, ?, 'open', ?, ?)",
                (job_id, party, dataset, _now(), rows),
            )
            conn.executemany(
                "INSERT INTO plan_entries (job_id, party, idx, noise_multiplier, mechanism, "
                "coordinates) VALUES (?, ?, ?, ?, ?, ?)",
                [(job_id, party, i, r.noise_multiplier, r.mechanism, r.coordinates)
                 for i, r in enumerate(zs)],
            )
        return Reservation(
            job_id=job_id,
            dataset=dataset,
            party=party,
            plan=tuple(zs),
            recorded=0,
            resumed=False,
            committed_epsilon=total,
            budget_epsilon=eps_budget,
            budget_delta=delta,
            accountant=self._accountant,
        )

    def _resume(
        self,
        conn: sqlite3.Connection,
        job_id: str,
        dataset: str,
        party: str,
        zs: list[Release],
        stored_dataset: str,
        status: str,
    ) -> Reservation:
        if status != "open":
            raise DpfedInputError(
                f"job_id must not name a closed job. Found {job_id!r} (party {party!r}, "
                f"dataset {stored_dataset!r}), which was closed; open a new job instead."
            )
        if stored_dataset != dataset:
            raise LedgerConflict(
                f"job {job_id!r} (party {party!r}) is open on dataset {stored_dataset!r}. "
                f"Found dataset {dataset!r}."
            )
        stored = [
            Release(str(r[0]), float(r[1]), int(r[2]))
            for r in conn.execute(
                "SELECT mechanism, noise_multiplier, coordinates FROM plan_entries "
                "WHERE job_id = ? AND party = ? "
                "ORDER BY idx",
                (job_id, party),
            )
        ]
        if sorted(stored) != sorted(zs):
            raise LedgerConflict(
                f"job {job_id!r} (party {party!r}) is open with a plan of {len(stored)} "
                f"release(s) that differs from the one given ({len(zs)} release(s)); a resumed "
                "job must present the same plan."
            )
        recorded = conn.execute(
            "SELECT COUNT(*) FROM releases WHERE job_id = ? AND party = ?", (job_id, party)
        ).fetchone()[0]
        eps_budget, delta = self._budget_row(conn, dataset, party)
        total = self._epsilon(self._committed_releases(conn, dataset, party), delta)
        return Reservation(
            job_id=job_id,
            dataset=dataset,
            party=party,
            plan=tuple(stored),
            recorded=int(recorded),
            resumed=True,
            committed_epsilon=total,
            budget_epsilon=eps_budget,
            budget_delta=delta,
            accountant=self._accountant,
        )

    def record(
        self, job_id: str, events: Sequence[PrivacyEvent], *, digest: str | None = None
    ) -> int:
        """Record releases of an open job, before they leave the party (write-ahead).

        All events are written in one transaction (all or none). A release is keyed by
        (job, party, round, label): recording the same release again (same mechanism, noise
        multiplier, sigma and sensitivity, and the same digest when one is given) is a no-op.

        Parameters
        ----------
        job_id : str
            An open job of the events' party.
        events : sequence of PrivacyEvent
            Gaussian releases, all of one party.
        digest : str or None
            Optional fingerprint of the released payload, stored with every event of the call.

        Returns
        -------
        int
            Number of new rows (0 for a replay).

        Raises
        ------
        LedgerConflict
            If a key is already recorded with other values.
        BudgetExceeded
            If an event's noise multiplier is not in the job's remaining plan, or the job is
            closed (its reservation was returned).
        DpfedInputError
            For an unknown job or a bad argument.
        """
        job_id = _check_name("job_id", job_id)
        if digest is not None:
            digest = _check_name("digest", digest)
        items = _check_events(events)
        if not items:
            return 0
        party = items[0].party
        with self._transaction(write=True) as conn:
            job = conn.execute(
                "SELECT dataset, status FROM jobs WHERE job_id = ? AND party = ?",
                (job_id, party),
            ).fetchone()
            if job is None:
                others = [
                    r[0]
                    for r in conn.execute(
                        "SELECT party FROM jobs WHERE job_id = ? ORDER BY party", (job_id,)
                    )
                ]
                hint = f" (it exists for parties {others})" if others else ""
                raise DpfedInputError(
                    f"job_id must name a job opened for party {party!r}. Found {job_id!r}{hint}."
                )
            if job[1] != "open":
                raise BudgetExceeded(
                    f"cannot record into job {job_id!r} (party {party!r}, dataset {job[0]!r}): "
                    "it is closed and its reservation was returned."
                )
            plan = [
                (int(i), Release(str(m), float(pz), int(c)))
                for i, m, pz, c in conn.execute(
                    "SELECT idx, mechanism, noise_multiplier, coordinates FROM plan_entries "
                    "WHERE job_id = ? AND party = ? ORDER BY idx",
                    (job_id, party),
                )
            ]
            used = {
                int(r[0])
                for r in conn.execute(
                    "SELECT plan_idx FROM releases WHERE job_id = ? AND party = ?",
                    (job_id, party),
                )
            }
            new = 0
            now = _now()
            for event in items:
                old = conn.execute(
                    "SELECT mechanism, noise_multiplier, sigma, l2_sensitivity, digest "
                    "FROM releases WHERE job_id = ? AND party = ? AND round = ? AND label = ?",
                    (job_id, party, event.round, event.label),
                ).fetchone()
                if old is not None:
                    self._check_replay(job_id, event, digest, old)
                    continue
                z = float(event.noise_multiplier)
                wanted = Release(event.mechanism, z, int(event.coordinates))
                idx = next((i for i, pr in plan if pr == wanted and i not in used), None)
                if idx is None:
                    remaining = Counter(pr for i, pr in plan if i not in used)
                    shown = (
                        ", ".join(
                            f"{pr.mechanism} {pr.noise_multiplier!r} x{n}"
                            for pr, n in sorted(remaining.items())[:8]
                        )
                        or "nothing"
                    )
                    raise BudgetExceeded(
                        f"cannot record the release of job {job_id!r} (party {party!r}, round "
                        f"{event.round}, label {event.label!r}): its {event.mechanism} release "
                        f"with noise multiplier {z!r} is not in the job's remaining plan "
                        f"({shown}); it was never reserved."
                    )
                conn.execute(
                    "INSERT INTO releases (job_id, party, round, label, mechanism, "
                    "noise_multiplier, sigma, l2_sensitivity, plan_idx, digest, recorded_at, "
                    "coordinates) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        job_id,
                        party,
                        event.round,
                        event.label,
                        event.mechanism,
                        z,
                        float(event.sigma),
                        float(event.l2_sensitivity),
                        idx,
                        digest,
                        now,
                        int(event.coordinates),
                    ),
                )
                used.add(idx)
                new += 1
        return new

    @staticmethod
    def _check_replay(
        job_id: str, event: PrivacyEvent, digest: str | None, old: tuple[Any, ...]
    ) -> None:
        mechanism, z, sigma, sens, old_digest = old
        same = (
            mechanism == event.mechanism
            and float(z) == float(event.noise_multiplier)
            and float(sigma) == float(event.sigma)
            and float(sens) == float(event.l2_sensitivity)
            and (digest is None or digest == old_digest)
        )
        if not same:
            raise LedgerConflict(
                f"the release of job {job_id!r} (party {event.party!r}, round {event.round}, "
                f"label {event.label!r}) is already recorded with mechanism {mechanism!r}, "
                f"noise_multiplier={z!r}, sigma={sigma!r}, l2_sensitivity={sens!r}, "
                f"digest={old_digest!r}. Found mechanism {event.mechanism!r}, "
                f"noise_multiplier={event.noise_multiplier!r}, sigma={event.sigma!r}, "
                f"l2_sensitivity={event.l2_sensitivity!r}, digest={digest!r}."
            )

    def close_job(self, job_id: str, party: str) -> dict[str, Any]:
        """Mark a job finished, returning its unspent reservation (idempotent).

        Afterwards only the job's recorded releases count against the budget.

        Returns
        -------
        dict
            The job, as in :meth:`jobs`.

        Raises
        ------
        DpfedInputError
            If there is no such job.
        """
        job_id = _check_name("job_id", job_id)
        party = _check_name("party", party)
        with self._transaction(write=True) as conn:
            row = conn.execute(
                "SELECT status FROM jobs WHERE job_id = ? AND party = ?", (job_id, party)
            ).fetchone()
            if row is None:
                raise DpfedInputError(
                    f"job_id must name a job of party {party!r}. Found {job_id!r}."
                )
            if row[0] == "open":
                conn.execute(
                    "UPDATE jobs SET status = 'closed', closed_at = ? "
                    "WHERE job_id = ? AND party = ?",
                    (_now(), job_id, party),
                )
            return self._job_rows(conn, ["j.job_id = ?", "j.party = ?"], [job_id, party])[0]

    def withdraw_job(self, job_id: str, party: str, reason: str = "") -> dict[str, Any]:
        """Withdraw a job that released nothing: its reservation is returned and its id is
        free to run again (a closed job's id never is).

        The job's row and plan entries are removed and the withdrawal is recorded in the
        ``withdrawals`` table (job, dataset, planned releases, when, why). A job with a
        recorded release cannot be withdrawn: its spending stays, and it can only be closed.

        Returns
        -------
        dict
            The job as it was (as in :meth:`jobs`), with ``status`` ``"withdrawn"``.

        Raises
        ------
        DpfedInputError
            If there is no such job, or it has recorded releases.
        """
        job_id = _check_name("job_id", job_id)
        party = _check_name("party", party)
        with self._transaction(write=True) as conn:
            rows = self._job_rows(conn, ["j.job_id = ?", "j.party = ?"], [job_id, party])
            if not rows:
                raise DpfedInputError(
                    f"job_id must name a job of party {party!r}. Found {job_id!r}."
                )
            job = rows[0]
            if job["recorded"]:
                raise DpfedInputError(
                    f"job {job_id!r} of {party!r} has {job['recorded']} recorded release(s): its "
                    "spending stays in the ledger, so it cannot be withdrawn (close it instead)."
                )
            conn.execute(
                "INSERT INTO withdrawals (job_id, party, dataset, planned, opened_at, "
                "withdrawn_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (job_id, party, job["dataset"], job["planned"], job["opened_at"], _now(),
                 str(reason)),
            )
            conn.execute("DELETE FROM plan_entries WHERE job_id = ? AND party = ?",
                         (job_id, party))
            conn.execute("DELETE FROM jobs WHERE job_id = ? AND party = ?", (job_id, party))
        return job | {"status": "withdrawn"}

    def withdrawals(self) -> list[dict[str, Any]]:
        """Every withdrawn job, oldest first: ``job``, ``party``, ``dataset``, ``planned``,
        ``opened_at``, ``withdrawn_at``, ``reason``."""
        with self._transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT job_id, party, dataset, planned, opened_at, withdrawn_at, reason "
                "FROM withdrawals ORDER BY seq"
            ).fetchall()
        keys = ("job", "party", "dataset", "planned", "opened_at", "withdrawn_at", "reason")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    # ---------------------------------------------------------------- queries

    @staticmethod
    def _filters(**filters: tuple[str, str | None]) -> tuple[list[str], list[str]]:
        """``name=(column, value)`` -> SQL conditions and arguments for the values not None."""
        where, args = [], []
        for name, (column, value) in filters.items():
            if value is not None:
                where.append(f"{column} = ?")
                args.append(_check_name(name, value))
        return where, args

    @staticmethod
    def _job_rows(
        conn: sqlite3.Connection, where: list[str], args: Sequence[str]
    ) -> list[dict[str, Any]]:
        rows = conn.execute(
            "SELECT j.job_id, j.dataset, j.party, j.status, "
            "(SELECT COUNT(*) FROM plan_entries p WHERE p.job_id = j.job_id AND p.party = j.party),"
            " (SELECT COUNT(*) FROM releases r WHERE r.job_id = j.job_id AND r.party = j.party),"
            " j.opened_at, j.closed_at, j.rows FROM jobs j"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY j.rowid",
            list(args),
        ).fetchall()
        keys = ("id", "dataset", "party", "status", "planned", "recorded", "opened_at", "closed_at",
                "rows")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def jobs(self, *, dataset: str | None = None, party: str | None = None) -> list[dict[str, Any]]:
        """Jobs in opening order, optionally of one data set and/or party.

        Returns
        -------
        list of dict
            Keys ``id``, ``dataset``, ``party``, ``status`` (``"open"``/``"closed"``),
            ``planned`` and ``recorded`` (release counts), ``opened_at``, ``closed_at``
            (ISO 8601 UTC; None while open), ``rows`` (the digest of rows agreed by ID, or
            None).
        """
        where, args = self._filters(dataset=("j.dataset", dataset), party=("j.party", party))
        with self._transaction(write=False) as conn:
            return self._job_rows(conn, where, args)

    def releases(
        self,
        job_id: str | None = None,
        dataset: str | None = None,
        party: str | None = None,
    ) -> list[dict[str, Any]]:
        """Recorded releases in recording order, optionally filtered.

        Returns
        -------
        list of dict
            Keys ``job``, ``dataset``, ``party``, ``round``, ``label``, ``noise_multiplier``,
            ``sigma``, ``l2_sensitivity``, ``mechanism``, ``digest``, ``recorded_at``.
        """
        where, args = self._filters(
            job_id=("r.job_id", job_id), dataset=("j.dataset", dataset), party=("r.party", party)
        )
        with self._transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT r.job_id, j.dataset, r.party, r.round, r.label, r.noise_multiplier, "
                "r.sigma, r.l2_sensitivity, r.mechanism, r.digest, r.recorded_at "
                "FROM releases r JOIN jobs j ON j.job_id = r.job_id AND j.party = r.party"
                + (" WHERE " + " AND ".join(where) if where else "")
                + " ORDER BY r.seq",
                args,
            ).fetchall()
        keys = (
            "job",
            "dataset",
            "party",
            "round",
            "label",
            "noise_multiplier",
            "sigma",
            "l2_sensitivity",
            "mechanism",
            "digest",
            "recorded_at",
        )
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def summary(self) -> dict[str, Any]:
        """Budgets, spending and jobs of every (data set, party) (JSON-serialisable).

        Returns
        -------
        dict
            ``{"path", "accountant", "schema_version", "entries": [...]}``; one entry per
            (dataset, party) with a budget, sorted, with keys ``dataset``, ``party``,
            ``epsilon`` (the budget), ``delta``, ``accountant``, ``budget_set_at``, ``spent``
            (the epsilon of all recorded releases, every mechanism composed), ``released``
            (recorded releases per mechanism), ``committed``, ``reserved``
            (``committed - spent``), ``remaining`` (``epsilon - committed``; negative if the
            budget was lowered below it) and
            ``jobs`` (as in :meth:`jobs`).
        """
        with self._transaction(write=False) as conn:
            budgets = conn.execute(
                "SELECT dataset, party, epsilon, delta, set_at FROM budgets ORDER BY dataset, party"
            ).fetchall()
            data = [
                (
                    row,
                    self._spent_releases(conn, row[0], row[1]),
                    self._reserved_releases(conn, row[0], row[1]),
                    self._job_rows(conn, ["j.dataset = ?", "j.party = ?"], [row[0], row[1]]),
                )
                for row in budgets
            ]
        entries = []
        for (dataset, party, eps, delta, set_at), spent_zs, reserved_zs, jobs in data:
            spent = self._epsilon(spent_zs, float(delta))
            committed = self._epsilon(spent_zs + reserved_zs, float(delta))
            entries.append(
                {
                    "dataset": dataset,
                    "party": party,
                    "epsilon": float(eps),
                    "delta": float(delta),
                    "accountant": self._accountant,
                    "budget_set_at": set_at,
                    "spent": spent,
                    "released": dict(sorted(Counter(r.mechanism for r in spent_zs).items())),
                    "committed": committed,
                    "reserved": committed - spent,
                    "remaining": float(eps) - committed,
                    "jobs": jobs,
                }
            )
        return {
            "path": str(self._path),
            "accountant": self._accountant,
            "schema_version": SCHEMA_VERSION,
            "entries": entries,
        }


# ------------------------------------------------------------------------------------------------
# display
# ------------------------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, *rows]
    ]


def format_summary(summary: Mapping[str, Any]) -> str:
    """Human-readable table of :meth:`BudgetLedger.summary` (for ``dpfed budget show``).

    One line per (dataset, party) with its budget, spent epsilon (all mechanisms composed), the
    releases it composes per mechanism, reserved and remaining epsilon, then one line per job.

    Raises
    ------
    DpfedInputError
        If ``summary`` is not a summary dict.
    """
    if not isinstance(summary, Mapping) or not isinstance(summary.get("entries"), list):
        raise DpfedInputError(
            f"summary must be the dict BudgetLedger.summary returns. Found {summary!r}."
        )
    lines = [
        f"Privacy budget ledger {summary.get('path', '?')} "
        f"(accountant {summary.get('accountant', '?')}, "
        f"schema {summary.get('schema_version', '?')})"
    ]
    entries = summary["entries"]
    if not entries:
        lines.append("No budgets are set.")
        return "\n".join(lines)
    budget_rows = []
    job_rows = []
    for e in entries:
        jobs = e.get("jobs", [])
        n_open = sum(1 for j in jobs if j.get("status") == "open")
        budget_rows.append(
            [
                str(e["dataset"]),
                str(e["party"]),
                _fmt(e["epsilon"]),
                f"{e['delta']:g}",
                _fmt(e["spent"]),
                " + ".join(f"{n} {m}" for m, n in e.get("released", {}).items()) or "-",
                _fmt(e["reserved"]),
                _fmt(e["remaining"]),
                f"{len(jobs)} ({n_open} open)",
            ]
        )
        for j in jobs:
            job_rows.append(
                [
                    str(j["id"]),
                    str(j["dataset"]),
                    str(j["party"]),
                    str(j["status"]),
                    f"{j['recorded']}/{j['planned']}",
                    str(j["opened_at"]),
                    str(j["closed_at"] or "-"),
                    str(j["rows"])[:16] if j.get("rows") else "-",
                ]
            )
    lines.append("")
    lines += _table(
        ["dataset", "party", "budget", "delta", "spent", "released", "reserved", "remaining",
         "jobs"],
        budget_rows,
    )
    lines.append(
        "remaining = budget - committed epsilon. Releases compose, so the epsilon a new job "
        "adds is less than its own epsilon: a job asking for more than 'remaining' may still "
        "fit. `dpfed budget check --config JOB.toml` says whether one does, and the largest "
        "epsilon a job of that shape could have."
    )
    if job_rows:
        lines.append("")
        lines += _table(
            ["job", "dataset", "party", "status", "released", "opened", "closed", "rows"],
            job_rows
        )
    return "\n".join(lines)
