"""The job lifecycle of a budget ledger: reserving a job's plan, recording its releases
write-ahead, and closing or withdrawing it.

See :mod:`dpfed.runtime.budget` for the accounting rule these follow; the public entry points
are the methods of :class:`~dpfed.runtime.budget.BudgetLedger`, which delegate here.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dpfed._validation import DpfedInputError
from dpfed.privacy.accounting import Release, releases_epsilon
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.runtime.budget_store import (
    LedgerStore,
    committed_releases,
    job_rows,
    require_budget,
    spent_releases,
    stored_budget,
)
from dpfed.runtime.budget_values import (
    PlanItem,
    check_events,
    check_name,
    check_plan,
    format_epsilon,
    utc_now,
)

__all__ = [
    "BudgetExceeded",
    "JobReservations",
    "LedgerConflict",
    "ReleaseRecorder",
    "Reservation",
]


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


class JobReservations:
    """Opens jobs against the budget (reserving their plans), closes and withdraws them.

    The methods behind :meth:`~dpfed.runtime.budget.BudgetLedger.check_plan`,
    :meth:`~dpfed.runtime.budget.BudgetLedger.open_job`,
    :meth:`~dpfed.runtime.budget.BudgetLedger.close_job` and
    :meth:`~dpfed.runtime.budget.BudgetLedger.withdraw_job` (which document their arguments,
    results and errors); every call is one transaction of ``store``.

    Parameters
    ----------
    store : LedgerStore
        The ledger file.
    """

    def __init__(self, store: LedgerStore) -> None:
        self._store = store

    def _epsilon(self, releases: Sequence[Release], delta: float) -> float:
        return releases_epsilon(list(releases), delta, self._store.accountant)

    # ---------------------------------------------------------------- opening

    def check_plan(self, dataset: str, party: str, plan: Sequence[PlanItem]) -> dict[str, Any]:
        """Whether a job with ``plan`` would fit the budget of (dataset, party) now.

        Returns
        -------
        dict
            As :meth:`~dpfed.runtime.budget.BudgetLedger.check_plan` returns it.
        """
        dataset = check_name("dataset", dataset)
        party = check_name("party", party)
        zs = check_plan(plan)
        with self._store.transaction(write=False) as conn:
            budget = stored_budget(conn, dataset, party)
            if budget is None:
                return {
                    "budget_epsilon": None,
                    "delta": None,
                    "spent": None,
                    "committed": None,
                    "total": None,
                    "fits": False,
                }
            eps_budget, delta = budget
            committed = committed_releases(conn, dataset, party)
            spent = spent_releases(conn, dataset, party)
            total = self._epsilon(committed + zs, delta)
            return {
                "budget_epsilon": eps_budget,
                "delta": delta,
                "spent": self._epsilon(spent, delta),
                "committed": self._epsilon(committed, delta),
                "total": total,
                "fits": total <= eps_budget,
            }

    def open_job(
        self,
        job_id: str,
        dataset: str,
        party: str,
        plan: Sequence[PlanItem],
        *,
        rows: str | None = None,
    ) -> Reservation:
        """Open a job on (dataset, party) and reserve its plan, or resume it if already open.

        Returns
        -------
        Reservation

        Raises
        ------
        BudgetExceeded
            If no budget is set, or the committed epsilon with this plan would exceed it.
        LedgerConflict
            If the job is already open with other rows, data set or plan.
        DpfedInputError
            If the job was closed, or for a bad argument.
        """
        job_id = check_name("job_id", job_id)
        dataset = check_name("dataset", dataset)
        party = check_name("party", party)
        zs = check_plan(plan)
        with self._store.transaction(write=True) as conn:
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
            eps_budget, delta, total = self._admit(conn, job_id, dataset, party, zs)
            conn.execute(
                "INSERT INTO jobs (job_id, party, dataset, status, opened_at, rows) "
                "VALUES (?, ?, ?, 'open', ?, ?)",
                (job_id, party, dataset, utc_now(), rows),
            )
            conn.executemany(
                "INSERT INTO plan_entries (job_id, party, idx, noise_multiplier, mechanism, "
                "coordinates) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (job_id, party, i, r.noise_multiplier, r.mechanism, r.coordinates)
                    for i, r in enumerate(zs)
                ],
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
            accountant=self._store.accountant,
        )

    def _admit(
        self, conn: sqlite3.Connection, job_id: str, dataset: str, party: str, zs: list[Release]
    ) -> tuple[float, float, float]:
        """Check that a new job's plan fits the budget; return the budget's epsilon and delta
        and the committed epsilon with the plan."""
        budget = stored_budget(conn, dataset, party)
        if budget is None:
            raise BudgetExceeded(
                f"cannot open job {job_id!r}: no privacy budget is set for dataset "
                f"{dataset!r}, party {party!r}; set one with set_budget."
            )
        eps_budget, delta = budget
        committed = committed_releases(conn, dataset, party)
        total = self._epsilon(committed + zs, delta)
        if total > eps_budget:
            spent = self._epsilon(spent_releases(conn, dataset, party), delta)
            eps_committed = self._epsilon(committed, delta)
            raise BudgetExceeded(
                f"cannot open job {job_id!r} on dataset {dataset!r} for party {party!r}: "
                f"its {len(zs)} planned release(s) would bring the epsilon to "
                f"{format_epsilon(total)}, over the budget epsilon {format_epsilon(eps_budget)} "
                f"(delta {delta:g}, accountant {self._store.accountant}). Already spent "
                f"{format_epsilon(spent)} and reserved {format_epsilon(eps_committed - spent)} "
                f"by open jobs (committed {format_epsilon(eps_committed)})."
            )
        return eps_budget, delta, total

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
        eps_budget, delta = require_budget(conn, dataset, party)
        total = self._epsilon(committed_releases(conn, dataset, party), delta)
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
            accountant=self._store.accountant,
        )

    # ---------------------------------------------------------------- ending

    def close_job(self, job_id: str, party: str) -> dict[str, Any]:
        """Mark a job finished, returning its unspent reservation (idempotent).

        Returns
        -------
        dict
            The job, as :meth:`~dpfed.runtime.budget.BudgetLedger.jobs` lists it.

        Raises
        ------
        DpfedInputError
            If there is no such job.
        """
        job_id = check_name("job_id", job_id)
        party = check_name("party", party)
        with self._store.transaction(write=True) as conn:
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
                    (utc_now(), job_id, party),
                )
            return job_rows(conn, ["j.job_id = ?", "j.party = ?"], [job_id, party])[0]

    def withdraw_job(self, job_id: str, party: str, reason: str = "") -> dict[str, Any]:
        """Withdraw a job that released nothing, logging the withdrawal.

        Returns
        -------
        dict
            The job as it was, with ``status`` ``"withdrawn"``.

        Raises
        ------
        DpfedInputError
            If there is no such job, or it has recorded releases.
        """
        job_id = check_name("job_id", job_id)
        party = check_name("party", party)
        with self._store.transaction(write=True) as conn:
            rows = job_rows(conn, ["j.job_id = ?", "j.party = ?"], [job_id, party])
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
                (
                    job_id,
                    party,
                    job["dataset"],
                    job["planned"],
                    job["opened_at"],
                    utc_now(),
                    str(reason),
                ),
            )
            conn.execute("DELETE FROM plan_entries WHERE job_id = ? AND party = ?", (job_id, party))
            conn.execute("DELETE FROM jobs WHERE job_id = ? AND party = ?", (job_id, party))
        return job | {"status": "withdrawn"}


class ReleaseRecorder:
    """Records the releases of open jobs, write-ahead and idempotently, against their plans.

    The method behind :meth:`~dpfed.runtime.budget.BudgetLedger.record` (which documents its
    arguments, result and errors). A release is keyed by (job, party, round, label); each new
    one consumes an unused entry of its job's plan with the same mechanism, noise multiplier
    and grid coordinates.

    Parameters
    ----------
    store : LedgerStore
        The ledger file.
    """

    def __init__(self, store: LedgerStore) -> None:
        self._store = store

    def record(
        self, job_id: str, events: Sequence[PrivacyEvent], *, digest: str | None = None
    ) -> int:
        """Record releases of an open job in one transaction (write-ahead, idempotent).

        Returns
        -------
        int
            Number of new rows (0 for a replay).

        Raises
        ------
        LedgerConflict
            If a key is already recorded with other values.
        BudgetExceeded
            If a release is not in the job's remaining plan, or the job is closed.
        DpfedInputError
            For an unknown job or a bad argument.
        """
        job_id = check_name("job_id", job_id)
        if digest is not None:
            digest = check_name("digest", digest)
        items = check_events(events)
        if not items:
            return 0
        party = items[0].party
        with self._store.transaction(write=True) as conn:
            self._check_open(conn, job_id, party)
            plan = self._numbered_plan(conn, job_id, party)
            used = self._used_plan_entries(conn, job_id, party)
            new = 0
            now = utc_now()
            for event in items:
                if self._is_recorded(conn, job_id, party, event, digest):
                    continue
                idx = self._plan_entry_for(job_id, party, event, plan, used)
                self._insert_release(conn, job_id, party, event, idx, digest, now)
                used.add(idx)
                new += 1
        return new

    @staticmethod
    def _check_open(conn: sqlite3.Connection, job_id: str, party: str) -> None:
        """Check that ``job_id`` is an open job of ``party``."""
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

    @staticmethod
    def _numbered_plan(
        conn: sqlite3.Connection, job_id: str, party: str
    ) -> list[tuple[int, Release]]:
        """The job's plan entries ``(idx, release)``, in plan order."""
        return [
            (int(i), Release(str(m), float(pz), int(c)))
            for i, m, pz, c in conn.execute(
                "SELECT idx, mechanism, noise_multiplier, coordinates FROM plan_entries "
                "WHERE job_id = ? AND party = ? ORDER BY idx",
                (job_id, party),
            )
        ]

    @staticmethod
    def _used_plan_entries(conn: sqlite3.Connection, job_id: str, party: str) -> set[int]:
        """Indices of the job's plan entries that a recorded release already consumed."""
        return {
            int(r[0])
            for r in conn.execute(
                "SELECT plan_idx FROM releases WHERE job_id = ? AND party = ?",
                (job_id, party),
            )
        }

    def _is_recorded(
        self,
        conn: sqlite3.Connection,
        job_id: str,
        party: str,
        event: PrivacyEvent,
        digest: str | None,
    ) -> bool:
        """Whether the event's key is already recorded (with the same values: else raise)."""
        old = conn.execute(
            "SELECT mechanism, noise_multiplier, sigma, l2_sensitivity, digest "
            "FROM releases WHERE job_id = ? AND party = ? AND round = ? AND label = ?",
            (job_id, party, event.round, event.label),
        ).fetchone()
        if old is None:
            return False
        self._check_replay(job_id, event, digest, old)
        return True

    @staticmethod
    def _plan_entry_for(
        job_id: str,
        party: str,
        event: PrivacyEvent,
        plan: list[tuple[int, Release]],
        used: set[int],
    ) -> int:
        """The first unused plan entry the event's release matches (else BudgetExceeded)."""
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
        return idx

    @staticmethod
    def _insert_release(
        conn: sqlite3.Connection,
        job_id: str,
        party: str,
        event: PrivacyEvent,
        idx: int,
        digest: str | None,
        now: str,
    ) -> None:
        """Write the event's release, consuming plan entry ``idx``."""
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
                float(event.noise_multiplier),
                float(event.sigma),
                float(event.l2_sensitivity),
                idx,
                digest,
                now,
                int(event.coordinates),
            ),
        )

    @staticmethod
    def _check_replay(
        job_id: str, event: PrivacyEvent, digest: str | None, old: tuple[Any, ...]
    ) -> None:
        """Check that a release recorded again has the values recorded the first time.

        Parameters
        ----------
        job_id : str
            The job.
        event : PrivacyEvent
            The release recorded again.
        digest : str or None
            Its payload digest, if given (then it must match too).
        old : tuple
            The stored ``(mechanism, noise_multiplier, sigma, l2_sensitivity, digest)``.

        Raises
        ------
        LedgerConflict
            If the values differ.
        """
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
