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
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from dpfed._validation import DpfedInputError, check_open_unit, check_positive
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.runtime.budget_jobs import (
    BudgetExceeded,
    JobReservations,
    LedgerConflict,
    ReleaseRecorder,
    Reservation,
)
from dpfed.runtime.budget_reports import LedgerReports
from dpfed.runtime.budget_store import SCHEMA_VERSION, LedgerStore, write_budget
from dpfed.runtime.budget_values import (
    LEDGER_ACCOUNTANTS,
    PlanItem,
    check_name,
    format_epsilon,
    utc_now,
)

__all__ = [
    "LEDGER_ACCOUNTANTS",
    "SCHEMA_VERSION",
    "BudgetExceeded",
    "BudgetLedger",
    "LedgerConflict",
    "Reservation",
    "format_summary",
]


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
        self._store = LedgerStore(path, accountant=accountant, timeout=timeout)
        self._jobs = JobReservations(self._store)
        self._recorder = ReleaseRecorder(self._store)
        self._reports = LedgerReports(self._store)

    # ---------------------------------------------------------------- opening and closing

    @property
    def path(self) -> Path:
        """The ledger file."""
        return self._store.path

    @property
    def accountant(self) -> str:
        """The accountant fixed when the file was created."""
        return self._store.accountant

    def close(self) -> None:
        """Close the connection (idempotent); the instance cannot be used afterwards."""
        self._store.close()

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
        state = "closed" if self._store.closed else "open"
        return f"BudgetLedger({str(self.path)!r}, accountant={self.accountant!r}, {state})"

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
        dataset = check_name("dataset", dataset)
        party = check_name("party", party)
        eps = check_positive("epsilon", epsilon)
        d = check_open_unit("delta", delta)
        now = utc_now()
        with self._store.transaction(write=True) as conn:
            write_budget(conn, dataset, party, eps, d, now)

    def budget(self, dataset: str, party: str) -> tuple[float, float] | None:
        """The budget ``(epsilon, delta)`` of (dataset, party), or None if none is set."""
        return self._reports.budget(dataset, party)

    def budget_history(
        self, dataset: str | None = None, party: str | None = None
    ) -> list[dict[str, Any]]:
        """Every budget change, oldest first: dataset, party, epsilon, delta, changed_at."""
        return self._reports.budget_history(dataset, party)

    def spent_epsilon(self, dataset: str, party: str, *, job_id: str | None = None) -> float:
        """Epsilon of the releases recorded on (dataset, party), at the budget's delta.

        With ``job_id``, of that job's releases alone: what the job has spent so far (a
        function of its public parameters; the party's other jobs are not in it).

        Raises
        ------
        DpfedInputError
            If no budget is set for (dataset, party) (its delta defines the epsilon).
        """
        return self._reports.spent_epsilon(dataset, party, job_id=job_id)

    def committed_epsilon(self, dataset: str, party: str) -> float:
        """Epsilon of the recorded releases plus the open jobs' unspent reservations.

        Raises
        ------
        DpfedInputError
            If no budget is set for (dataset, party).
        """
        return self._reports.committed_epsilon(dataset, party)

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
        return self._jobs.check_plan(dataset, party, plan)

    def open_job(
        self,
        job_id: str,
        dataset: str,
        party: str,
        plan: Sequence[PlanItem],
        *,
        rows: str | None = None,
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
        return self._jobs.open_job(job_id, dataset, party, plan, rows=rows)

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
        return self._recorder.record(job_id, events, digest=digest)

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
        return self._jobs.close_job(job_id, party)

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
        return self._jobs.withdraw_job(job_id, party, reason)

    def withdrawals(self) -> list[dict[str, Any]]:
        """Every withdrawn job, oldest first: ``job``, ``party``, ``dataset``, ``planned``,
        ``opened_at``, ``withdrawn_at``, ``reason``."""
        return self._reports.withdrawals()

    # ---------------------------------------------------------------- queries

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
        return self._reports.jobs(dataset=dataset, party=party)

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
        return self._reports.releases(job_id, dataset, party)

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
        return self._reports.summary()


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
                format_epsilon(e["epsilon"]),
                f"{e['delta']:g}",
                format_epsilon(e["spent"]),
                " + ".join(f"{n} {m}" for m, n in e.get("released", {}).items()) or "-",
                format_epsilon(e["reserved"]),
                format_epsilon(e["remaining"]),
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
        [
            "dataset",
            "party",
            "budget",
            "delta",
            "spent",
            "released",
            "reserved",
            "remaining",
            "jobs",
        ],
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
            ["job", "dataset", "party", "status", "released", "opened", "closed", "rows"], job_rows
        )
    return "\n".join(lines)
