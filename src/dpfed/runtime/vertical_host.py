"""The vertical protocol as the networked runtime hosts it.

:class:`VerticalHost` is one party's side: it reads the party's own columns of its data file,
builds the same role :func:`dpfed.runtime.vertical.train_vertical` builds for it (same
configuration, same noise stream), wraps it for per-round evaluation and states the releases it
will make (its budget plan). :func:`vertical_result` is the leader's side: it turns the round
reports and the parties' final accounts into the ``result.json`` of ``dpfed train``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError, check_binary_labels
from dpfed.core.losses import get_loss
from dpfed.privacy.ledger import PrivacyEvent, PrivacyLedger
from dpfed.protocols.messages import Message
from dpfed.protocols.vertical.evaluation import (
    EvalShare,
    EvaluatedLabelHolder,
    EvaluatedPassiveParty,
    RoundReport,
)
from dpfed.protocols.vertical.mechanisms import NoPrivacy
from dpfed.protocols.vertical.messages import Broadcast, Scores
from dpfed.runtime.hosting import RoleDelegate
from dpfed.runtime.jobfile import LEADER, JobSpec, describe
from dpfed.runtime.vertical import (
    VerticalConfig,
    _privacy_summary,
    make_vertical_role,
    party_epsilon,
    party_rng,
    planned_multipliers,
    vertical_setup,
)
from dpfed.runtime.wire import register_message

for _kind in (Scores, Broadcast, EvalShare, RoundReport):
    register_message(_kind)

EVALUATION_NOTE = (
    "evaluation: every round each party sent the label holder the scores of its current model "
    "on the training rows (for the training objective); those messages are exact and not "
    "covered by the epsilon above. Set [job].evaluate = \"test\" or \"none\" to keep them home."
)


TEST_EVALUATION_NOTE = (
    "evaluation: every round each party sent the label holder the scores of its current "
    "(released) model on its test rows; the test rows themselves are not protected."
)


def vertical_config(params: dict[str, Any]) -> VerticalConfig:
    """The validated :class:`VerticalConfig` of a job file's ``[params]``."""
    kwargs = dict(params)
    if "tol" in kwargs:
        kwargs["tol"] = tuple(kwargs["tol"])
    return VerticalConfig(**kwargs).validated()


def column_block(X, first: int, end: int):
    """Columns ``first:end`` of ``X`` as :func:`dpfed.data.vertical_split` cuts them."""
    import scipy.sparse as sp

    if sp.issparse(X):
        return X.tocsr()[:, first:end].tocsr()
    return np.array(np.asarray(X)[:, first:end], order="C", copy=True)


class VerticalHost(RoleDelegate):
    """One party of a networked vertical job.

    Parameters
    ----------
    spec : JobSpec
    name : str
        This party's name; the first party of the job file holds the labels.
    """

    def __init__(self, spec: JobSpec, name: str) -> None:
        from dpfed.data import load_dataset

        party = spec.party(name)
        self.spec, self.name = spec, name
        self.index = spec.names.index(name)
        cfg = vertical_config(spec.params)
        if cfg.mechanism == "paper" and cfg.adaptive_rho:
            raise DpfedInputError(
                "the paper mechanism's noise multiplier moves with rho, so a job with adaptive "
                "rho cannot reserve its releases in the budget ledger in advance; set "
                "adaptive_rho = false."
            )
        dataset = load_dataset(party.data, party.data_dir)
        first, end = party.columns
        if end > dataset.n_features:
            raise DpfedInputError(
                f"party {name!r}: columns [{first}, {end}) lie outside {party.data!r}, which has "
                f"{dataset.n_features} columns."
            )
        block = column_block(dataset.X_train, first, end)
        test_block = None
        if spec.evaluate != "none" and dataset.X_test is not None:
            test_block = column_block(dataset.X_test, first, end)
        self.n_samples, self.n_features = block.shape
        self.setup = vertical_setup(cfg, [p.n_features for p in spec.parties], self.n_samples)
        rng = party_rng(cfg.seed, self.index, len(spec.parties))
        eps = self._epsilon
        if self.index == 0:
            loss = get_loss(cfg.loss)
            labels = (
                check_binary_labels("labels", dataset.y_train) if loss.binary
                else np.asarray(dataset.y_train, dtype=float)
            )
            holder = make_vertical_role(self.setup, 0, spec.names, block, rng=rng, labels=labels)
            test_labels = (
                None if test_block is None else check_binary_labels("test labels", dataset.y_test)
            )
            self.role = EvaluatedLabelHolder(
                holder, leader=LEADER, lam=cfg.lam, test_block=test_block,
                test_labels=test_labels, epsilon_of=eps, train=spec.evaluate == "full",
            )
        else:
            party_role = make_vertical_role(self.setup, self.index, spec.names, block, rng=rng)
            self.role = EvaluatedPassiveParty(
                party_role, test_block=test_block, epsilon_of=eps,
                train=spec.evaluate == "full",
            )
        self.plan = planned_multipliers(self.setup, self.index)

    def _epsilon(self, events: Sequence[PrivacyEvent]) -> float:
        return party_epsilon(events, self.setup.config)

    # -- what the runtime asks of a hosted protocol -----------------------------------------
    @property
    def exact_release(self) -> bool:
        """Whether this party's data leave it without noise under this job."""
        return isinstance(self.setup.mechanisms[self.index], NoPrivacy)

    @property
    def round(self) -> int:
        return self.role.role.round

    @property
    def finished(self) -> bool:
        return self.role.role.finished

    @property
    def events(self) -> list[PrivacyEvent]:
        return self.role.role.events

    def start(self) -> list[Message]:
        """The first messages of the job (the label holder's round-0 broadcast)."""
        return self.role.start() if self.index == 0 else []

    def model(self) -> np.ndarray:
        return self.role.role.model

    def describe(self) -> dict[str, Any]:
        return {"n_samples": self.n_samples, "n_features": self.n_features}

    def final(self) -> dict[str, Any]:
        """What the leader needs at the end: the party's releases (public) and its shape."""
        return {"events": [asdict(e) for e in self.events], "n_features": self.n_features}


def vertical_result(
    spec: JobSpec,
    history: list[dict[str, Any]],
    finals: dict[str, dict[str, Any]],
    *,
    n_samples: int,
    seconds: float,
) -> dict[str, Any]:
    """The ``result.json`` of a networked vertical job (the keys of ``dpfed train``'s)."""
    cfg = vertical_config(spec.params)
    setup = vertical_setup(cfg, [p.n_features for p in spec.parties], n_samples)
    ledger = PrivacyLedger()
    for name in spec.names:
        for event in finals[name]["events"]:
            ledger.record(PrivacyEvent(**event))
    notes = list(setup.notes)
    if spec.evaluate == "full":
        notes.append(EVALUATION_NOTE)
    elif spec.evaluate == "test" and setup.config.mechanism != "none":
        notes.append(TEST_EVALUATION_NOTE)
    privacy = _privacy_summary(setup.config, ledger, spec.names, notes)
    return {
        "protocol": "vertical",
        "config": asdict(setup.config),
        "parties": [{"name": n, "n_features": int(finals[n]["n_features"])} for n in spec.names],
        "history": history,
        "final": dict(history[-1]) if history else {},
        "privacy": privacy,
        "seconds": seconds,
        "job": describe(spec),
    }
