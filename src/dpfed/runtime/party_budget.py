"""A party's privacy budget for one networked job (the budget side of
:class:`~dpfed.runtime.party.PartyNode`).

When the job opens, the party decides whether it may run it against its data at all (a
simulation, a release without noise, a release the ledger cannot account, exact evaluation: all
refused on budgeted data) and reserves the job's planned releases in its ledger. While the job
runs, every release is recorded there before the message carrying it leaves the party
(write-ahead); the leader may ask what the job has spent so far.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from dpfed._validation import DpfedInputError
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.runtime.budget import BudgetLedger
from dpfed.runtime.hosting import ProtocolHost
from dpfed.runtime.jobfile import JobSpec
from dpfed.runtime.jobspec import PartySpec

__all__ = ["PartyBudget"]


class PartyBudget:
    """Party ``party``'s budget reservations and releases for job ``spec``.

    Parameters
    ----------
    spec : JobSpec
    party : PartySpec
        The party (its data set, budget and ledger).
    host : ProtocolHost
        Its side of the job (its plan of releases, its releases so far).
    allow_exact_disclosure : bool
        The party's own policy on exact disclosure (see
        :class:`~dpfed.runtime.party.PartyNode`).

    Attributes
    ----------
    ledger : BudgetLedger or None
        The ledger the job is opened in (None until it opens, and for a job with nothing to
        account).
    """

    def __init__(
        self, spec: JobSpec, party: PartySpec, host: ProtocolHost, *, allow_exact_disclosure: bool
    ) -> None:
        self.spec = spec
        self.party = party
        self.name = party.name
        self.host = host
        self.allow_exact_disclosure = allow_exact_disclosure
        self.ledger: BudgetLedger | None = None
        self._epsilon_cache: tuple[int, float] | None = None  # (releases, epsilon)

    def budgeted(self) -> bool:
        """Whether this party has a privacy budget on its data set (in the job file or its
        ledger)."""
        return self.party.budget is not None or self.stored_budget() is not None

    def stored_budget(self) -> tuple[float, float] | None:
        """The ledger's budget on this data set, without creating a ledger to look."""
        if not self.party.ledger.exists():
            return None
        with BudgetLedger(self.party.ledger) as ledger:
            return ledger.budget(self.party.dataset, self.name)

    def open(self) -> None:
        """The job opens: refuse it if it may not run against this party's data, else reserve
        its releases in the ledger (a ledger attached before is closed first).

        Raises
        ------
        DpfedInputError
            If the party refuses the job (before anything is reserved).
        """
        if self.ledger is not None:
            self.ledger.close()
            self.ledger = None  # a refusal below must not leave a closed ledger attached
        self._check_and_reserve()

    def _check_and_reserve(self) -> None:
        party, host = self.party, self.host
        if not host.holds_data:
            return  # e.g. a consensus server: nothing of its own to protect
        if self.spec.simulation:
            if party.budget is not None or self.stored_budget() is not None:
                raise DpfedInputError(
                    f"job {self.spec.id} is a simulation ([job].simulation = true): every "
                    "party's noise comes from [params].seed, which every party holds, so it "
                    f"protects nothing; {self.name} has a privacy budget on {party.dataset!r} "
                    "and refuses to run it. Leave the seed out to run a private job."
                )
            return  # no privacy to account: nothing enters the ledger
        if not host.ledger_support and not host.exact_release:
            if party.budget is not None or self.stored_budget() is not None:
                reason = host.ledger_refusal
                raise DpfedInputError(
                    f"job {self.spec.id}: {reason}; {self.name} refuses to run it against "
                    f"{party.dataset!r}, which has a privacy budget."
                )
            return
        if host.exact_release:
            if self.stored_budget() is not None or party.budget is not None:
                raise DpfedInputError(
                    f"job {self.spec.id} would release {self.name}'s data on {party.dataset!r} "
                    f"without noise (mechanism {self.spec.params.get('mechanism', 'none')!r}), "
                    "but that data set has a privacy budget."
                )
            return
        if self.spec.evaluate == "full" and not self.allow_exact_disclosure and self.budgeted():
            # before the ledger is touched: nothing is reserved, nothing recorded
            raise DpfedInputError(
                f'job {self.spec.id} has [job].evaluate = "full": {self.name} would send values '
                f"computed exactly from its rows of {party.dataset!r} (exact training scores or "
                "losses, which no epsilon covers), but it has a privacy budget on that data set "
                "and its own configuration does not allow exact disclosure (the job file cannot "
                'grant it). Run the job with evaluate = "test" or "none", or start '
                f"{self.name} with `dpfed party --allow-exact-disclosure` if its own policy "
                "allows it."
            )
        ledger = BudgetLedger(party.ledger)
        try:
            self._reserve(ledger)
        except BaseException:
            ledger.close()
            raise
        self.ledger = ledger

    def _reserve(self, ledger: BudgetLedger) -> None:
        """Check the budget and reserve this job's releases (one transaction)."""
        party, host = self.party, self.host
        stored = ledger.budget(party.dataset, self.name)
        if stored is None:
            if party.budget is None:
                raise DpfedInputError(
                    f"no privacy budget is set for {self.name} on {party.dataset!r}: give the "
                    "party a budget in the job file or run `dpfed budget set`."
                )
            ledger.set_budget(party.dataset, self.name, party.budget.epsilon, party.budget.delta)
        elif party.budget is not None and (party.budget.epsilon, party.budget.delta) != stored:
            raise DpfedInputError(
                f"the job file gives {self.name} the budget epsilon={party.budget.epsilon}, "
                f"delta={party.budget.delta} on {party.dataset!r}, but the ledger holds "
                f"epsilon={stored[0]}, delta={stored[1]}; change it with `dpfed budget set`."
            )
        ledger.open_job(self.spec.id, party.dataset, self.name, host.plan, rows=host.rows_digest)

    def reattach(self) -> None:
        """A restarted party's ledger: the job was opened in it before anything was journaled
        (none for a job that releases without noise or a simulation)."""
        if not self.host.exact_release and not self.spec.simulation:
            self.ledger = BudgetLedger(self.party.ledger)

    def record(self, events: Sequence[PrivacyEvent], payloads: Sequence[bytes]) -> None:
        """Record ``events``, the releases made by the messages ``payloads``, before these
        leave (a simulation has nothing to account).

        Raises
        ------
        RuntimeError
            If the job has releases but was not opened in the ledger.
        """
        if not events or self.spec.simulation:
            return
        if self.ledger is None:
            raise RuntimeError("a release before the job was opened in the ledger")
        digest = hashlib.sha256(b"".join(payloads)).hexdigest()
        self.ledger.record(self.spec.id, events, digest=digest)

    def spent_epsilon(self) -> float | None:
        """What this job has spent so far on the party's budget (its ledger's accountant at
        the budget's delta), or None without a ledger. A function of the job's public
        parameters and round, so telling the leader widens nothing; recomputed only when a
        release was recorded since the last answer."""
        if self.ledger is None:
            return None
        releases = len(self.host.events)
        if self._epsilon_cache is None or self._epsilon_cache[0] != releases:
            epsilon = self.ledger.spent_epsilon(self.party.dataset, self.name, job_id=self.spec.id)
            self._epsilon_cache = (releases, epsilon)
        return self._epsilon_cache[1]

    def withdraw(self, reason: str) -> bool:
        """Withdraw the job's reservation (nothing was spent), so that the same job can run
        again; whether there was one to withdraw."""
        if self.ledger is None:
            return False
        self.ledger.withdraw_job(self.spec.id, self.name, reason=reason)
        return True

    def close_job(self) -> None:
        """The job finished: close it in the ledger (if it was opened in one)."""
        if self.ledger is not None:
            self.ledger.close_job(self.spec.id, self.name)

    def close(self) -> None:
        """Close the ledger (if one is attached)."""
        if self.ledger is not None:
            self.ledger.close()
