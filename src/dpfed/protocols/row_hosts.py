"""What the sample-partitioned protocols (consensus and decentralized ADMM) share as the
networked runtime hosts them.

Each party reads its own rows (``rows = [first, end)`` of its data file's training part, rows
scaled to unit norm as ``dpfed train consensus|decentralized`` does), builds the role the
in-process runner builds for it (same configuration, same noise stream) and, at the end, hands
the leader what it needs to compute the history: the per-round models (the server's global
models, or every node's primal estimates) and, on request, its loss at given models. The leader
then evaluates the per-round figures exactly as the in-process runner does.

Per-round figures therefore travel only once, after training. With ``[job].evaluate = "test"``
(the default under a mechanism) only released values reach the leader: the server's global
models (computed from the noisy uploads) or every node's broadcasts, at which the leader
computes test figures on its own held-out rows; there is no training objective. Only
``evaluate = "full"`` asks the parties for exact values (each party's mean training loss at
the per-round models, once, and a decentralized node's exact per-round iterates, which under
PVP are never broadcast); the result then says so at its top (``exact_values``).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from dpfed._validation import DpfedInputError, check_binary_labels
from dpfed.core.losses import Loss
from dpfed.core.rows import Matrix, normalize_rows
from dpfed.data import Dataset, load_dataset
from dpfed.privacy.accounting import Release
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.runtime.hosting import RoleDelegate
from dpfed.runtime.jobspec import JobSpec
from dpfed.runtime.messages import Message

EVALUATION_NOTE = (
    "evaluation: after training every party reported its mean training loss at the per-round "
    "models the leader sent it{extra}; those figures are not covered by the epsilon above. "
    'Set [job].evaluate = "test" or "none" to keep them home.'
)
TEST_EVALUATION_NOTE = (
    "evaluation: the leader computed test figures at the released models{extra} on the test "
    "rows of the first party's data set; no training losses left the parties."
)


def party_rows(spec: JobSpec, name: str) -> tuple[Dataset, Matrix | None, np.ndarray | None]:
    """The party's rows (unit norm) and labels, and its data set (for shapes)."""

    party = spec.party(name)
    data = load_dataset(party.data, party.data_dir)
    if party.rows is None:
        return data, None, None
    first, end = party.rows
    if end > data.X_train.shape[0]:
        raise DpfedInputError(
            f"party {name!r}: rows [{first}, {end}) lie outside {party.data!r}, which has "
            f"{data.X_train.shape[0]} training rows."
        )
    X = normalize_rows(data.X_train[first:end])
    return data, X, check_binary_labels("labels", data.y_train[first:end])


def held_out_rows(spec: JobSpec) -> tuple[Matrix | None, np.ndarray | None]:
    """The leader's held-out rows: the test part of the first party's data set."""
    if spec.evaluate == "none":
        return None, None

    first = spec.parties[0]
    data = load_dataset(first.data, first.data_dir)
    if data.X_test is None:
        return None, None
    # a data set's test rows come with their labels
    return normalize_rows(data.X_test), check_binary_labels(
        "test labels", cast(np.ndarray, data.y_test)
    )


class RowHost(RoleDelegate):
    """What both hosts share: the wrapped role's state, status and losses at given models."""

    role: Any
    X: Any = None
    y: np.ndarray | None = None
    plan: list[float | Release]
    loss: Loss  # the role's loss and the factor of its mean (set by the subclass)
    loss_factor: float
    holds_data = True
    ledger_support = True
    ledger_refusal = "its releases are not ones the budget ledger can account"

    @property
    def exact_release(self) -> bool:
        return not self.plan and self.holds_data

    @property
    def events(self) -> list[PrivacyEvent]:
        return getattr(self.role, "events", [])

    def start(self) -> list[Message]:
        return self.role.start() if hasattr(self.role, "start") else []

    def describe(self) -> dict[str, Any]:
        return {"n_samples": 0 if self.X is None else int(self.X.shape[0])}

    def losses(self, models: list[list[float]]) -> list[float]:
        """Mean training loss at each model (the evaluation request)."""
        if self.X is None:
            return []
        y = cast(np.ndarray, self.y)  # a party's rows come with their labels
        return [
            self.loss_factor
            * float(
                np.mean(
                    self.loss.value(np.asarray(self.X @ np.asarray(m, dtype=float)).reshape(-1), y)
                )
            )
            for m in models
        ]
