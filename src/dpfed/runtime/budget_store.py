"""SQLite storage of a budget ledger: the file's tables, opening and upgrading it,
transactions, and the rows several parts of :class:`~dpfed.runtime.budget.BudgetLedger` read.

See :mod:`dpfed.runtime.budget` for the accounting rule and the file's journaling. The row
functions take the connection of an open transaction (:meth:`LedgerStore.transaction`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpfed._validation import DpfedInputError, check_positive
from dpfed.privacy.accounting import Release
from dpfed.runtime.budget_values import LEDGER_ACCOUNTANTS, check_accountant, utc_now
from dpfed.runtime.private_files import private_file, private_folder

__all__ = [
    "SCHEMA_VERSION",
    "LedgerStore",
    "committed_releases",
    "job_rows",
    "require_budget",
    "reserved_releases",
    "spent_releases",
    "stored_budget",
    "write_budget",
]

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


class LedgerStore:
    """The SQLite connection of a budget ledger file, checked (and upgraded) when opened.

    Creates the file and its tables when missing, refuses a file that is not a dpfed budget
    ledger of a readable schema version, and serialises the threads of one process around
    its transactions.

    Parameters
    ----------
    path : str or os.PathLike
        The ledger file; created (with its folder) if missing.
    accountant : {"pld", "rdp"} or None
        Accountant of a new file (default ``"pld"``). For an existing file, ``None`` uses the
        stored one, and any other value must equal it.
    timeout : float
        Seconds to wait for another process's write lock before failing.

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
        accountant: str | None,
        timeout: float,
    ) -> None:
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            raise DpfedInputError(f"path must be a non-empty path. Found {path!r}.")
        if accountant is not None:
            check_accountant(accountant)
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

    # ---------------------------------------------------------------- opening

    def _setup(self, accountant: str | None) -> str:
        """Create the tables of a new file, check (and upgrade) an existing one, set the
        pragmas; return the file's accountant."""
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
                self._create_tables(conn, accountant)
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as err:
            raise DpfedInputError(
                f"path must be a dpfed budget ledger (an SQLite file). Found {where!r} ({err})."
            ) from None
        stored = self._check_meta(conn, meta, accountant)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as err:  # pragma: no cover - exotic file systems
            raise DpfedInputError(f"cannot configure the budget ledger {where!r}: {err}") from None
        return stored

    @staticmethod
    def _create_tables(conn: sqlite3.Connection, accountant: str | None) -> None:
        """Create the tables and meta rows of an empty file, unless another process did so
        meanwhile (in one ``BEGIN IMMEDIATE`` transaction)."""
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
                        ("created_at", utc_now()),
                    ],
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _check_meta(
        self, conn: sqlite3.Connection, meta: dict[Any, Any], accountant: str | None
    ) -> str:
        """Check the meta table's format, schema version (upgrading an older file) and
        accountant; return the accountant."""
        where = str(self._path)
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
        return str(stored)

    def _migrate(self, conn: sqlite3.Connection) -> str:
        """Upgrade an older file to :data:`SCHEMA_VERSION` in one transaction (plan entries
        gain their mechanism, Gaussian; plan entries and releases their grid coordinates, 0);
        another process may have upgraded it meanwhile."""
        old = "?"
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
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
                        (utc_now(),),
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

    # ---------------------------------------------------------------- state and closing

    @property
    def path(self) -> Path:
        """The ledger file."""
        return self._path

    @property
    def accountant(self) -> str:
        """The accountant fixed when the file was created."""
        return self._accountant

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._conn is None

    def close(self) -> None:
        """Close the connection (idempotent); the store cannot be used afterwards."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # ---------------------------------------------------------------- transactions

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise DpfedInputError(f"the budget ledger {str(self._path)!r} is closed.")
        return self._conn

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction: ``BEGIN IMMEDIATE`` (write lock taken up front) or a read snapshot.

        Committed when the block ends, rolled back if it raises; the threads of this process
        wait for each other.

        Parameters
        ----------
        write : bool
            Whether the transaction writes (takes the write lock up front).

        Yields
        ------
        sqlite3.Connection
            The connection, inside the transaction.

        Raises
        ------
        DpfedInputError
            If the store is closed.
        """
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


# ------------------------------------------------------------------------------------------------
# rows (in an open transaction)
# ------------------------------------------------------------------------------------------------


def write_budget(
    conn: sqlite3.Connection, dataset: str, party: str, epsilon: float, delta: float, now: str
) -> None:
    """Set the budget of (dataset, party) and log the change, both stamped ``now``.

    Parameters
    ----------
    conn : sqlite3.Connection
        The connection of a write transaction.
    dataset, party : str
        The pair.
    epsilon, delta : float
        The budget (already checked).
    now : str
        The time of the change (:func:`~dpfed.runtime.budget_values.utc_now`).
    """
    conn.execute(
        "INSERT INTO budgets (dataset, party, epsilon, delta, set_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (dataset, party) DO UPDATE SET "
        "epsilon = excluded.epsilon, delta = excluded.delta, set_at = excluded.set_at",
        (dataset, party, epsilon, delta, now),
    )
    conn.execute(
        "INSERT INTO budget_changes (dataset, party, epsilon, delta, changed_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (dataset, party, epsilon, delta, now),
    )


def stored_budget(conn: sqlite3.Connection, dataset: str, party: str) -> tuple[float, float] | None:
    """The budget ``(epsilon, delta)`` of (dataset, party) in ``conn``, or None.

    Parameters
    ----------
    conn : sqlite3.Connection
        The connection of an open transaction.
    dataset, party : str
        The pair.

    Returns
    -------
    tuple of float or None
    """
    row = conn.execute(
        "SELECT epsilon, delta FROM budgets WHERE dataset = ? AND party = ?",
        (dataset, party),
    ).fetchone()
    return None if row is None else (float(row[0]), float(row[1]))


def require_budget(conn: sqlite3.Connection, dataset: str, party: str) -> tuple[float, float]:
    """The budget ``(epsilon, delta)`` of (dataset, party), which must be set.

    Parameters
    ----------
    conn : sqlite3.Connection
        The connection of an open transaction.
    dataset, party : str
        The pair.

    Returns
    -------
    tuple of float

    Raises
    ------
    DpfedInputError
        If no budget is set for the pair.
    """
    row = stored_budget(conn, dataset, party)
    if row is None:
        raise DpfedInputError(
            f"no privacy budget is set for dataset {dataset!r}, party {party!r}; "
            "set one with set_budget."
        )
    return float(row[0]), float(row[1])


def spent_releases(
    conn: sqlite3.Connection, dataset: str, party: str, job_id: str | None = None
) -> list[Release]:
    """The releases recorded on (dataset, party), of job ``job_id`` only if given.

    Parameters
    ----------
    conn : sqlite3.Connection
        The connection of an open transaction.
    dataset, party : str
        The pair.
    job_id : str, optional
        Only this job's releases.

    Returns
    -------
    list of Release
        In recording order.
    """
    rows = conn.execute(
        "SELECT r.mechanism, r.noise_multiplier, r.coordinates FROM releases r "
        "JOIN jobs j ON j.job_id = r.job_id AND j.party = r.party "
        "WHERE j.dataset = ? AND j.party = ? AND (? IS NULL OR r.job_id = ?) "
        "ORDER BY r.seq",
        (dataset, party, job_id, job_id),
    ).fetchall()
    return [Release(str(r[0]), float(r[1]), int(r[2])) for r in rows]


def reserved_releases(conn: sqlite3.Connection, dataset: str, party: str) -> list[Release]:
    """Planned entries of open jobs not yet matched by a recorded release.

    Parameters
    ----------
    conn : sqlite3.Connection
        The connection of an open transaction.
    dataset, party : str
        The pair.

    Returns
    -------
    list of Release
    """
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


def committed_releases(conn: sqlite3.Connection, dataset: str, party: str) -> list[Release]:
    """The committed multiset of (dataset, party): recorded releases and open reservations.

    Parameters
    ----------
    conn : sqlite3.Connection
        The connection of an open transaction.
    dataset, party : str
        The pair.

    Returns
    -------
    list of Release
    """
    # Every recorded release consumed one planned entry of its job, so "releases + unmatched
    # plan entries of open jobs" is max(plan, releases) per open job and the releases of
    # closed jobs.
    return spent_releases(conn, dataset, party) + reserved_releases(conn, dataset, party)


def job_rows(
    conn: sqlite3.Connection, where: list[str], args: Sequence[str]
) -> list[dict[str, Any]]:
    """Jobs matching SQL conditions on ``jobs j``, in opening order.

    Parameters
    ----------
    conn : sqlite3.Connection
        The connection of an open transaction.
    where : list of str
        Conditions joined with AND (none: every job).
    args : sequence of str
        Their arguments.

    Returns
    -------
    list of dict
        As :meth:`~dpfed.runtime.budget.BudgetLedger.jobs` returns them.
    """
    rows = conn.execute(
        "SELECT j.job_id, j.dataset, j.party, j.status, "
        "(SELECT COUNT(*) FROM plan_entries p WHERE p.job_id = j.job_id AND p.party = j.party),"
        " (SELECT COUNT(*) FROM releases r WHERE r.job_id = j.job_id AND r.party = j.party),"
        " j.opened_at, j.closed_at, j.rows FROM jobs j"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY j.rowid",
        list(args),
    ).fetchall()
    keys = (
        "id",
        "dataset",
        "party",
        "status",
        "planned",
        "recorded",
        "opened_at",
        "closed_at",
        "rows",
    )
    return [dict(zip(keys, r, strict=True)) for r in rows]
