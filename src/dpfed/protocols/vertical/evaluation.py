r"""Per-round evaluation of a vertical job, for runs whose parties live in different processes.

Evaluation is a diagnostic beside the protocol, not part of it. After its x-update in round
``t`` every passive party sends the label holder an :class:`EvalShare`: the partial scores
:math:`D_m \tilde x_m^t` of its current model on the training rows (for the training objective)
and on its test rows, its regulariser value and the epsilon it has spent. The label holder adds
its own share, computes the figures of :func:`round_metrics` and sends a :class:`RoundReport`
to the job's leader.

The partial scores on training rows are exact functions of a party's rows and are **not**
covered by the privacy accounting; a deployment that must keep every message private evaluates
on test rows only (``train=False``) or not at all. Test scores are computed from the parties'
released (noisy) models. A protected label holder's primal and dual residuals are exact
functions of its rows and labels: they reach the leader only with ``exact_residuals=True``.
The in-process runtime computes the same figures with the same function, so both give
identical histories.

Each passive party sends its share *before* its scores: links deliver in order, so when the
last scores of a round complete it at the label holder, every share of that round is there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from dpfed.core.losses import Loss, score_metrics
from dpfed.core.rows import Matrix
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.protocols.vertical.messages import Scores
from dpfed.protocols.vertical.roles import LabelHolder, PassiveParty, RoundRecord
from dpfed.runtime.messages import Message, ProtocolError

EpsilonOf = Callable[[Sequence[PrivacyEvent]], float | None]  # None: no certified figure


@dataclass(frozen=True)
class EvalShare(Message):
    """Passive party -> label holder: what the label holder needs to evaluate round ``round``.

    ``train_scores`` has shape ``(N,)`` (or ``(0,)`` when training rows are not evaluated),
    ``test_scores`` shape ``(N_test,)`` (or ``(0,)``). ``epsilon`` is None under a
    mechanism that certifies none (the paper mechanism).
    """

    train_scores: np.ndarray
    test_scores: np.ndarray
    regularization: float
    epsilon: float | None


@dataclass(frozen=True)
class RoundReport(Message):
    """Label holder -> leader: the figures of one round (one history entry)."""

    train_objective: float | None
    test_log_loss: float | None
    test_accuracy: float | None
    epsilon: float | None
    rho: float
    primal_residual: float | None
    dual_residual: float | None
    finished: bool
    passive_weight: float | None = None

    def entry(self) -> dict[str, Any]:
        """The history entry, as :func:`round_metrics` returns it."""
        return {
            "iteration": self.round,
            "seconds": None,
            "train_objective": self.train_objective,
            "test_log_loss": self.test_log_loss,
            "test_accuracy": self.test_accuracy,
            "epsilon": self.epsilon,
            "rho": self.rho,
            "primal_residual": self.primal_residual,
            "dual_residual": self.dual_residual,
            "passive_weight": self.passive_weight,
        }


def round_metrics(
    record: RoundRecord,
    *,
    loss: Loss,
    labels: np.ndarray,
    lam: float,
    train_scores: Sequence[np.ndarray] | None,
    regularization: Sequence[float],
    test_scores: Sequence[np.ndarray] | None,
    test_labels: np.ndarray | None,
    epsilons: Sequence[float | None],
) -> dict[str, Any]:
    r"""One history entry from every party's partial scores (label holder first).

    .. math::

        \text{objective} = \frac1N \sum_i \ell\Big(\sum_m (D_m \tilde x_m)_i, y_i\Big)
        + \lambda \sum_m R(\tilde x_m),

    the test log loss and accuracy of :math:`\sum_m D^{test}_m \tilde x_m`, and the largest
    epsilon any party has spent (None when some party's spending has no certified figure).
    A record with a passive weight :math:`\beta` (the label holder's last round of a weighted
    job) scales the passive parties' scores by :math:`\beta` and their (quadratic) regulariser
    values by :math:`\beta^2`, as their models are scaled when they receive it.
    """
    weight = record.passive_weight
    if weight is not None:
        train_scores = None if train_scores is None else _weighted(train_scores, weight)
        test_scores = None if test_scores is None else _weighted(test_scores, weight)
        regularization = [regularization[0], *(weight * weight * r for r in regularization[1:])]
    certified = [e for e in epsilons if e is not None]
    epsilon = None if len(certified) < len(epsilons) else max(certified, default=0.0)
    entry: dict[str, Any] = {
        "iteration": record.round,
        "seconds": None,
        "train_objective": None,
        "test_log_loss": None,
        "test_accuracy": None,
        "epsilon": epsilon,
        "rho": record.rho,
        "primal_residual": record.residuals.primal,
        "dual_residual": record.residuals.dual,
        "passive_weight": weight,
    }
    if train_scores is not None:
        s = cast(np.ndarray, sum(train_scores))
        entry["train_objective"] = float(np.mean(loss.value(s, labels))) + lam * sum(regularization)
    if test_scores is not None and test_labels is not None:
        st = cast(np.ndarray, sum(test_scores))
        entry.update(score_metrics(st, test_labels))
    return entry


def _weighted(scores: Sequence[np.ndarray], weight: float) -> list[np.ndarray]:
    return [scores[0], *(weight * s for s in scores[1:])]


class _Evaluated:
    """What both evaluated roles share: the wrapped role's prepared test rows and shares."""

    def __init__(
        self,
        role: LabelHolder | PassiveParty,
        *,
        test_block: Matrix | None,
        epsilon_of: EpsilonOf,
        train: bool,
    ) -> None:
        self.role = role
        self.name = role.name
        self.test_block = None if test_block is None else role.mechanism.prepare_block(test_block)
        self.epsilon_of = epsilon_of
        self.train = train

    def _own_share(self) -> tuple[np.ndarray | None, np.ndarray | None, float, float | None]:
        role = self.role
        train = role.scores(role.block) if self.train else None
        test = None if self.test_block is None else role.scores(self.test_block)
        return train, test, role.regularization(), self.epsilon_of(role.events)

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return self.role.state_dict()

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.role.load_state_dict(arrays, meta)


class EvaluatedPassiveParty(_Evaluated):
    """A :class:`PassiveParty` that sends an :class:`EvalShare` before each of its scores."""

    role: PassiveParty

    def __init__(
        self,
        party: PassiveParty,
        *,
        test_block: Matrix | None = None,
        epsilon_of: EpsilonOf,
        train: bool = True,
    ) -> None:
        super().__init__(party, test_block=test_block, epsilon_of=epsilon_of, train=train)

    def handle(self, message: Message) -> list[Message]:
        out = self.role.handle(message)
        if not out:
            return out
        train, test, reg, eps = self._own_share()
        empty = np.zeros(0)
        share = EvalShare(
            self.name,
            self.role.label_holder,
            self.role.round,
            empty if train is None else train,
            empty if test is None else test,
            reg,
            eps,
        )
        return [share, *out]


class EvaluatedLabelHolder(_Evaluated):
    """A :class:`LabelHolder` that reports every finished round to ``leader``."""

    role: LabelHolder

    def __init__(
        self,
        holder: LabelHolder,
        *,
        leader: str,
        lam: float,
        test_block: Matrix | None = None,
        test_labels: np.ndarray | None = None,
        epsilon_of: EpsilonOf,
        train: bool = True,
        exact_residuals: bool = True,
    ) -> None:
        super().__init__(holder, test_block=test_block, epsilon_of=epsilon_of, train=train)
        self.exact_residuals = exact_residuals
        self.leader = leader
        self.lam = lam
        self.test_labels = test_labels
        self.shares: dict[str, EvalShare] = {}

    def start(self) -> list[Message]:
        return list(self.role.start())

    def handle(self, message: Message) -> list[Message]:
        holder: LabelHolder = self.role
        if isinstance(message, EvalShare):
            self._check_share(message)
            self.shares[message.sender] = message
            return []
        if isinstance(message, Scores) and message.sender not in self.shares:
            raise ProtocolError(
                f"{self.name} expected the evaluation share of {message.sender!r} before its "
                f"scores of round {message.round}."
            )
        rounds_before = len(holder.history)
        out = list(holder.handle(message))
        if len(holder.history) == rounds_before:
            return out
        return [self._report(holder.history[-1]), *out]

    def _check_share(self, share: EvalShare) -> None:
        holder: LabelHolder = self.role
        if share.sender not in holder.parties or share.round != holder.round + 1:
            raise ProtocolError(
                f"{self.name} expected evaluation shares of round {holder.round + 1} from "
                f"{holder.parties}. Found round {share.round} from {share.sender!r}."
            )
        if share.sender in self.shares:
            raise ProtocolError(
                f"{self.name} already holds round {share.round}'s share from {share.sender}."
            )
        n_train = holder.n_samples if self.train else 0
        n_test = 0 if self.test_block is None else self.test_block.shape[0]
        if share.train_scores.shape != (n_train,) or share.test_scores.shape != (n_test,):
            raise ProtocolError(
                f"evaluation share from {share.sender} must hold ({n_train},) training and "
                f"({n_test},) test scores. Found {share.train_scores.shape} and "
                f"{share.test_scores.shape}."
            )

    def _report(self, record: RoundRecord) -> RoundReport:
        holder: LabelHolder = self.role
        missing = [p for p in holder.parties if p not in self.shares]
        if missing:
            raise ProtocolError(
                f"round {record.round} finished without evaluation shares from {missing}."
            )
        train, test, reg, eps = self._own_share()
        shares = [self.shares[p] for p in holder.parties]
        self.shares = {}
        entry = round_metrics(
            record,
            loss=holder.loss,
            labels=holder.labels,
            lam=self.lam,
            train_scores=None if train is None else [train, *(s.train_scores for s in shares)],
            regularization=[reg, *(s.regularization for s in shares)],
            test_scores=None if test is None else [test, *(s.test_scores for s in shares)],
            test_labels=self.test_labels,
            epsilons=[eps, *(s.epsilon for s in shares)],
        )
        residuals = (entry["primal_residual"], entry["dual_residual"])
        if not self.exact_residuals:
            residuals = (None, None)
        return RoundReport(
            self.name,
            self.leader,
            record.round,
            entry["train_objective"],
            entry["test_log_loss"],
            entry["test_accuracy"],
            entry["epsilon"],
            entry["rho"],
            *residuals,
            record.finished,
            record.passive_weight,
        )

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays, meta = self.role.state_dict()
        for name, share in self.shares.items():
            arrays[f"share/{name}/train"] = share.train_scores
            arrays[f"share/{name}/test"] = share.test_scores
            meta.setdefault("shares", {})[name] = [share.round, share.regularization, share.epsilon]
        return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.role.load_state_dict(arrays, meta)
        self.shares = {
            name: EvalShare(
                name,
                self.name,
                int(rnd),
                np.array(arrays[f"share/{name}/train"]),
                np.array(arrays[f"share/{name}/test"]),
                float(reg),
                None if eps is None else float(eps),
            )
            for name, (rnd, reg, eps) in meta.get("shares", {}).items()
        }
