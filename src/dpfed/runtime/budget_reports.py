"""Read-only queries of a budget ledger: budgets and their history, spent and committed epsilon,
jobs, releases, withdrawals and the summary of every (data set, party).

The public entry points are the methods of :class:`~dpfed.runtime.budget.BudgetLedger`, which
delegate here and document the results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from dpfed.privacy.accounting import Release, releases_epsilon
from dpfed.runtime.budget_store import (
    SCHEMA_VERSION,
    LedgerStore,
    committed_releases,
    job_rows,
    require_budget,
    reserved_releases,
    spent_releases,
    stored_budget,
)
from dpfed.runtime.budget_values import check_name

__all__ = ["LedgerReports"]


class LedgerReports:
    """Answers the questions asked of a budget ledger, each in one read transaction.

    The methods behind the queries of :class:`~dpfed.runtime.budget.BudgetLedger`
    (:meth:`~dpfed.runtime.budget.BudgetLedger.budget`,
    :meth:`~dpfed.runtime.budget.BudgetLedger.budget_history`,
    :meth:`~dpfed.runtime.budget.BudgetLedger.spent_epsilon`,
    :meth:`~dpfed.runtime.budget.BudgetLedger.committed_epsilon`,
    :meth:`~dpfed.runtime.budget.BudgetLedger.jobs`,
    :meth:`~dpfed.runtime.budget.BudgetLedger.releases`,
    :meth:`~dpfed.runtime.budget.BudgetLedger.withdrawals` and
    :meth:`~dpfed.runtime.budget.BudgetLedger.summary`), which document their results.

    Parameters
    ----------
    store : LedgerStore
        The ledger file.
    """

    def __init__(self, store: LedgerStore) -> None:
        self._store = store

    def _epsilon(self, releases: Sequence[Release], delta: float) -> float:
        return releases_epsilon(list(releases), delta, self._store.accountant)

    @staticmethod
    def _filters(**filters: tuple[str, str | None]) -> tuple[list[str], list[str]]:
        """``name=(column, value)`` -> SQL conditions and arguments for the values not None."""
        where, args = [], []
        for name, (column, value) in filters.items():
            if value is not None:
                where.append(f"{column} = ?")
                args.append(check_name(name, value))
        return where, args

    # ---------------------------------------------------------------- budgets

    def budget(self, dataset: str, party: str) -> tuple[float, float] | None:
        """The budget ``(epsilon, delta)`` of (dataset, party), or None if none is set."""
        dataset = check_name("dataset", dataset)
        party = check_name("party", party)
        with self._store.transaction(write=False) as conn:
            return stored_budget(conn, dataset, party)

    def budget_history(
        self, dataset: str | None = None, party: str | None = None
    ) -> list[dict[str, Any]]:
        """Every budget change, oldest first: dataset, party, epsilon, delta, changed_at."""
        where, args = self._filters(dataset=("dataset", dataset), party=("party", party))
        with self._store.transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT dataset, party, epsilon, delta, changed_at FROM budget_changes"
                + (" WHERE " + " AND ".join(where) if where else "")
                + " ORDER BY seq",
                args,
            ).fetchall()
        keys = ("dataset", "party", "epsilon", "delta", "changed_at")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def spent_epsilon(self, dataset: str, party: str, *, job_id: str | None = None) -> float:
        """Epsilon of the releases recorded on (dataset, party) (of job ``job_id`` only if
        given), at the budget's delta.

        Raises
        ------
        DpfedInputError
            If no budget is set for (dataset, party).
        """
        dataset = check_name("dataset", dataset)
        party = check_name("party", party)
        with self._store.transaction(write=False) as conn:
            _, delta = require_budget(conn, dataset, party)
            zs = spent_releases(conn, dataset, party, job_id)
        return self._epsilon(zs, delta)

    def committed_epsilon(self, dataset: str, party: str) -> float:
        """Epsilon of the recorded releases plus the open jobs' unspent reservations.

        Raises
        ------
        DpfedInputError
            If no budget is set for (dataset, party).
        """
        dataset = check_name("dataset", dataset)
        party = check_name("party", party)
        with self._store.transaction(write=False) as conn:
            _, delta = require_budget(conn, dataset, party)
            zs = committed_releases(conn, dataset, party)
        return self._epsilon(zs, delta)

    # ---------------------------------------------------------------- jobs and releases

    def withdrawals(self) -> list[dict[str, Any]]:
        """Every withdrawn job, oldest first."""
        with self._store.transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT job_id, party, dataset, planned, opened_at, withdrawn_at, reason "
                "FROM withdrawals ORDER BY seq"
            ).fetchall()
        keys = ("job", "party", "dataset", "planned", "opened_at", "withdrawn_at", "reason")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def jobs(self, *, dataset: str | None = None, party: str | None = None) -> list[dict[str, Any]]:
        """Jobs in opening order, optionally of one data set and/or party."""
        where, args = self._filters(dataset=("j.dataset", dataset), party=("j.party", party))
        with self._store.transaction(write=False) as conn:
            return job_rows(conn, where, args)

    def releases(
        self,
        job_id: str | None = None,
        dataset: str | None = None,
        party: str | None = None,
    ) -> list[dict[str, Any]]:
        """Recorded releases in recording order, optionally filtered."""
        where, args = self._filters(
            job_id=("r.job_id", job_id), dataset=("j.dataset", dataset), party=("r.party", party)
        )
        with self._store.transaction(write=False) as conn:
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

    # ---------------------------------------------------------------- summary

    def summary(self) -> dict[str, Any]:
        """Budgets, spending and jobs of every (data set, party) (JSON-serialisable)."""
        with self._store.transaction(write=False) as conn:
            budgets = conn.execute(
                "SELECT dataset, party, epsilon, delta, set_at FROM budgets ORDER BY dataset, party"
            ).fetchall()
            data = [
                (
                    row,
                    spent_releases(conn, row[0], row[1]),
                    reserved_releases(conn, row[0], row[1]),
                    job_rows(conn, ["j.dataset = ?", "j.party = ?"], [row[0], row[1]]),
                )
                for row in budgets
            ]
        accountant = self._store.accountant
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
                    "accountant": accountant,
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
            "path": str(self._store.path),
            "accountant": accountant,
            "schema_version": SCHEMA_VERSION,
            "entries": entries,
        }
