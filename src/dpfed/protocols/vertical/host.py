"""The vertical protocol as the networked runtime hosts it.

:class:`VerticalHost` is one party's side: it reads the party's own columns of its data file,
builds the same role :func:`dpfed.protocols.vertical.driver.train_vertical` builds for it (same
configuration, same noise stream), wraps it for per-round evaluation and states the releases it
will make (its budget plan). :data:`PROTOCOL` is the protocol as the runtime sees it, and
:func:`vertical_result` the leader's side: it turns the round
reports and the parties' final accounts into the ``result.json`` of ``dpfed train``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dpfed._validation import DpfedInputError, check_binary_labels
from dpfed.core.losses import get_loss
from dpfed.core.rows import Matrix
from dpfed.data import load_dataset
from dpfed.data.prediction import prediction_rows, row_digests
from dpfed.data.psi import alignment_digest
from dpfed.data.specs import parties_preprocessing
from dpfed.data.tables import PartyTable, load_schema, read_table
from dpfed.parameters import config_from_table, job_parameters, param
from dpfed.privacy.ledger import PrivacyEvent, PrivacyLedger
from dpfed.protocols.base import BaseProtocol
from dpfed.protocols.psi_align.messages import ALIGNMENT_MESSAGES
from dpfed.protocols.vertical.calibration import EigenvaluePremise
from dpfed.protocols.vertical.driver import (
    VerticalConfig,
    make_vertical_role,
    party_epsilon,
    planned_multipliers,
    privacy_summary,
    sound_rounds,
    vertical_setup,
    weighting_note,
)
from dpfed.protocols.vertical.evaluation import (
    EvalShare,
    EvaluatedLabelHolder,
    EvaluatedPassiveParty,
    RoundReport,
)
from dpfed.protocols.vertical.mechanisms import NoPrivacy, PaperMechanism
from dpfed.protocols.vertical.messages import Broadcast, Scores
from dpfed.protocols.vertical.roles import LabelHolder, PassiveParty
from dpfed.runtime.alignment import own_table_path, read_alignment
from dpfed.runtime.disclosure import exact_values, with_exact_values
from dpfed.runtime.hosting import PartyShare, RoleDelegate, noise_generator
from dpfed.runtime.jobspec import LEADER, JobSpec, PartySpec, describe
from dpfed.runtime.logs import process_logger
from dpfed.runtime.messages import Message
from dpfed.runtime.registry import JobRecord
from dpfed.runtime.wire import register_message

#: The messages of a networked vertical job.
VERTICAL_MESSAGES = (Scores, Broadcast, EvalShare, RoundReport)
for _kind in VERTICAL_MESSAGES:
    register_message(_kind)


@dataclass(frozen=True)
class JobRounds:
    """A ``[params]`` key of the job, not of the training configuration."""

    rounds_above_rule: bool = param(
        False, help="run a sound job's iterations even above the public rule's rounds"
    )
    secure: bool = param(
        False, help="true: the secure mode (protocol vertical_secure, its own [params])"
    )


#: Keys of ``[params]`` and the types they take: every field of :class:`VerticalConfig`, and
#: ``rounds_above_rule``.
VERTICAL_PARAMS = job_parameters(VerticalConfig) | job_parameters(JobRounds)

EVALUATION_NOTE = (
    "evaluation: every round each party sent the label holder the scores of its current model "
    "on the training rows (for the training objective); those messages are exact and not "
    'covered by the epsilon above. Set [job].evaluate = "test" or "none" to keep them home.'
)


TEST_EVALUATION_NOTE = (
    "evaluation: every round each party sent the label holder the scores of its current "
    "(released) model on its test rows; the test rows themselves are not protected."
)


#: The ``[params]`` key that lets a private job run more rounds than the public rule picks.
ROUNDS_ABOVE_RULE = "rounds_above_rule"


def vertical_config(params: Mapping[str, Any]) -> VerticalConfig:
    """The validated :class:`VerticalConfig` of a job file's ``[params]``
    (:data:`ROUNDS_ABOVE_RULE` is the job's, not the configuration's)."""
    config = config_from_table(VerticalConfig, params, exclude=(ROUNDS_ABOVE_RULE, "secure"))
    return cast(VerticalConfig, config).validated()


def rounds_above_rule(params: Mapping[str, Any]) -> bool:
    """Whether the job file allows more rounds than the sound mechanism's public rule.

    Raises
    ------
    DpfedInputError
        If ``[params].rounds_above_rule`` is not a boolean.
    """
    value = params.get(ROUNDS_ABOVE_RULE, False)
    if not isinstance(value, bool):
        raise DpfedInputError(
            f"[params].{ROUNDS_ABOVE_RULE} must be true or false. Found {value!r}."
        )
    return value


def check_rounds(
    cfg: VerticalConfig, params: Mapping[str, Any], n_samples: int, n_features: Sequence[int]
) -> None:
    """Refuse a sound job with a target epsilon whose ``iterations`` exceed the public rule's
    unless ``[params].rounds_above_rule = true``: every extra round makes each release
    noisier for the same budget, and past the rule the model gets worse while the budgets are
    spent (the message gives the per-round noise of both).

    Raises
    ------
    DpfedInputError
        Naming the rounds, the rule's, their per-round noise and the two ways out.
    """
    if cfg.mechanism != "sound" or cfg.epsilon is None or rounds_above_rule(params):
        return
    plan = sound_rounds(cfg, n_samples, n_features)
    if plan.above_rule:
        raise DpfedInputError(
            f"[params].iterations = {plan.iterations} is above the {plan.rule_iterations} "
            f"round(s) the sound mechanism's public rule picks for epsilon {cfg.epsilon:g} and "
            f"{n_samples} rows: per-round noise multiplier {plan.noise_multiplier:.3g} against "
            f"{plan.rule_noise_multiplier:.3g} at the rule. Leave iterations out of [params] to "
            f"use the rule, or set [params].{ROUNDS_ABOVE_RULE} = true to run these rounds."
        )


def column_block(X: Matrix, first: int, end: int) -> Matrix:
    """Columns ``first:end`` of ``X`` as :func:`dpfed.data.vertical_split` cuts them."""
    import scipy.sparse as sp

    if sp.issparse(X):
        return cast(sp.spmatrix, X).tocsr()[:, first:end].tocsr()
    return np.array(np.asarray(X)[:, first:end], order="C", copy=True)


@dataclass(frozen=True)
class PartyRows:
    """What one party of a job on columns reads (:func:`party_rows`).

    Attributes
    ----------
    block : matrix, shape (N, d)
        Its training columns.
    labels : numpy.ndarray or None, shape (N,)
        The label holder's labels as read (None for other parties of an aligned job).
    test_block : matrix or None, shape (N_test, d)
        Its test columns, when the job evaluates and there are test rows.
    test_labels : numpy.ndarray or None
    widths : list of int
        Every party's width, in job-file order.
    total_features : int
        The width of rows it is asked to score (its data set's, or its table's).
    alignment : dict or None
        What it agreed in an aligned job's alignment (:func:`dpfed.runtime.alignment.
        read_alignment`).
    """

    block: Any
    labels: np.ndarray | None
    test_block: Any
    test_labels: np.ndarray | None
    widths: list[int]
    total_features: int
    alignment: dict[str, Any] | None = None


def party_rows(spec: JobSpec, name: str) -> PartyRows:
    """Party ``name``'s rows of job ``spec``: its column range of a named data set or file,
    or, in an aligned job, its own table's rows in the order its alignment job agreed.

    Raises
    ------
    DpfedInputError
        Columns outside the data set; a table that no longer holds the agreed rows.
    """
    party = spec.party(name)
    if spec.align:
        alignment = read_alignment(spec, name)
        schema = load_schema(str(party.schema))
        parts = alignment["parts"]
        label_holder = spec.names.index(name) == 0

        def rows(part: str) -> PartyTable:
            path = party.data if part == "train" else party.test
            table = read_table(path, id_column=party.id_column, schema=schema, labels=label_holder)
            taken = table.take(parts[part]["ids"])
            if alignment_digest(taken.ids) != parts[part]["digest"]:
                raise DpfedInputError(f"{path} no longer holds the rows its alignment agreed.")
            return taken

        train = rows("train")
        test = rows("test") if "test" in parts and spec.evaluate != "none" else None
        return PartyRows(
            train.X,
            train.y,
            None if test is None else test.X,
            None if test is None else test.y,
            [int(w) for w in alignment["widths"]],
            int(train.X.shape[1]),
            alignment,
        )
    dataset = load_dataset(party.data, party.data_dir)
    first, end = cast(tuple[int, int], party.columns)  # a job on columns names every party's
    if end > dataset.n_features:
        raise DpfedInputError(
            f"party {name!r}: columns [{first}, {end}) lie outside {party.data!r}, "
            f"which has {dataset.n_features} columns."
        )
    test_block = None
    if spec.evaluate != "none" and dataset.X_test is not None:
        test_block = column_block(dataset.X_test, first, end)
    return PartyRows(
        column_block(dataset.X_train, first, end),
        dataset.y_train,
        test_block,
        dataset.y_test,
        [p.n_features for p in spec.parties],
        dataset.n_features,
    )


class ColumnPrediction:
    """Prediction with a finished vertical job's part of the model, for a host whose party
    holds a column block (:class:`VerticalHost`, the secure mode's host): by position
    (:meth:`prediction_share`) or, on aligned tables, by ID (:meth:`prediction_by_id`), with
    the party's own training rows recognised and flagged.

    The host provides ``spec``, ``name``, ``finished``, ``round``, ``alignment``,
    ``total_features``, ``training_block`` (its training rows as loaded),
    ``_training_digests`` (None until needed) and :meth:`scores_of`.
    """

    spec: JobSpec
    name: str
    alignment: dict[str, Any] | None
    total_features: int
    training_block: Any
    _training_digests: list[bytes] | None

    if TYPE_CHECKING:  # the host's (its role's), read only

        @property
        def finished(self) -> bool: ...

        @property
        def round(self) -> int: ...

    def scores_of(self, block: Any) -> np.ndarray:
        """Its share of the scores of raw rows of its columns, shape ``(n_rows,)``."""
        raise NotImplementedError

    def prediction_share(self, data: str) -> PartyShare:
        """This party's scores of its columns of the rows named by ``data``, shape
        ``(n_rows,)`` (:meth:`scores_of`). ``data``: see
        :func:`dpfed.data.prediction.prediction_rows`.

        The rows are this party's training rows when the request names them: the training
        part of the data set it trained on (``NAME:train``), its training file, or a file
        holding exactly its training rows in their order (whatever its name). Rows named by
        position have no identifiers (:meth:`prediction_by_id` has), so a new row that merely
        equals a training row in this party's columns is scored: on categorical data most new
        rows do (a9a's test rows: 11,415 to 16,277 of 16,281 per party's columns), and the
        share of a row that is not a training record is a function of the released model
        alone. See ``docs/networked.md``."""
        self._check_finished()
        if self.alignment is not None:
            raise DpfedInputError(
                f"job {self.spec.id} aligns its parties' rows by ID: its predictions match "
                "rows by ID too (a file of each party's own table)."
            )
        party = self.spec.party(self.name)
        rows = prediction_rows(
            data,
            n_features=self.total_features,
            data_dir=party.data_dir,
            base=self.spec.path.parent,
        )
        first, end = cast(tuple[int, int], party.columns)  # a job on columns names every party's
        block = column_block(rows, first, end)
        training = self._names_training_rows(data, party) or self._is_training_block(block)
        scores = self.scores_of(block)
        return PartyShare(scores, np.full(scores.shape[0], training, dtype=bool))

    def _check_finished(self) -> None:
        if not self.finished:
            raise DpfedInputError(
                f"{self.name} has not finished job {self.spec.id} (round {self.round}): there "
                "is no model to score new rows with yet."
            )

    def prediction_by_id(self, request: str, data: str, recipient: str) -> Any:
        """Its side of a prediction by ID (:mod:`dpfed.protocols.psi_align.prediction`) of
        the rows of ``data``, a CSV in its data folder read through its schema (labels, if
        any, are not read). Its share of a row is :meth:`scores_of` its columns, as
        :meth:`prediction_share`'s; a row whose ID is one of its training rows' is flagged as
        a training row."""
        self._check_finished()
        if self.alignment is None:
            raise DpfedInputError(
                "this job's rows have no IDs to predict by: name rows every party holds in the "
                "same order."
            )
        party = self.spec.party(self.name)
        table = read_table(
            own_table_path(self.spec, self.name, data),
            id_column=party.id_column,
            schema=load_schema(str(party.schema)),
            labels=False,
        )

        def score(ids: list[str]) -> np.ndarray:
            return self.scores_of(table.take(ids).X)

        # on first use: the PSI roles are only needed by a prediction by ID
        from dpfed.protocols.psi_align.prediction import RowsById

        return RowsById(
            self.name,
            request,
            data,
            recipient,
            self.spec.names,
            table.ids,
            score=score,
            training_ids=frozenset(self.alignment["parts"]["train"]["ids"]),
        )

    def _names_training_rows(self, data: str, party: PartySpec) -> bool:
        """Whether ``data`` names this party's training rows: ``NAME:train`` of its data set,
        or its training file."""
        name, _, part = data.rpartition(":")
        if name == party.data and part == "train":
            return True
        candidates = [Path(data).expanduser()]
        if not candidates[0].is_absolute():
            candidates.append(self.spec.path.parent / candidates[0])
        trained = Path(party.data).expanduser()
        if not trained.is_file():
            return False
        return any(c.is_file() and os.path.samefile(c, trained) for c in candidates)

    def _is_training_block(self, block: Matrix) -> bool:
        """Whether ``block`` holds exactly this party's training rows, in their order."""
        if block.shape != self.training_block.shape:
            return False
        if self._training_digests is None:
            self._training_digests = row_digests(self.training_block)
        return row_digests(block) == self._training_digests


class VerticalHost(ColumnPrediction, RoleDelegate):
    """One party of a networked vertical job.

    Parameters
    ----------
    spec : JobSpec
    name : str
        This party's name; the first party of the job file holds the labels.
    """

    # its role wrapped for evaluation, which is no RoleDelegate Role: the host forwards round,
    # finished and start to the wrapped role itself
    role: EvaluatedLabelHolder | EvaluatedPassiveParty  # type: ignore[assignment]

    def __init__(self, spec: JobSpec, name: str) -> None:
        self.spec, self.name = spec, name
        self.index = spec.names.index(name)
        cfg = vertical_config(spec.params)
        if cfg.mechanism == "paper" and cfg.adaptive_rho:
            raise DpfedInputError(
                "the paper mechanism's noise multiplier moves with rho, so a job with adaptive "
                "rho cannot reserve its releases in the budget ledger in advance; set "
                "adaptive_rho = false."
            )
        rows = party_rows(spec, name)
        self.alignment = rows.alignment
        self.total_features = rows.total_features
        block, y_train, test_block, y_test, widths = (
            rows.block,
            rows.labels,
            rows.test_block,
            rows.test_labels,
            rows.widths,
        )
        # its training rows as loaded, to recognise them among rows it is asked to score
        self.training_block = block
        self._training_digests: list[bytes] | None = None
        self.n_samples, self.n_features = block.shape
        check_rounds(cfg, spec.params, self.n_samples, widths)
        self.setup = vertical_setup(cfg, widths, self.n_samples)
        rng = noise_generator(spec, name, index=self.index, n_parties=len(spec.parties))
        eps = self._epsilon
        if self.index == 0:
            loss = get_loss(cfg.loss)
            # the label holder reads its labels (and its test labels with its test rows)
            labels = (
                check_binary_labels("labels", cast(np.ndarray, y_train))
                if loss.binary
                else np.asarray(y_train, dtype=float)
            )
            holder = cast(
                LabelHolder,
                make_vertical_role(self.setup, 0, spec.names, block, rng=rng, labels=labels),
            )
            test_labels = (
                None
                if test_block is None
                else check_binary_labels("test labels", cast(np.ndarray, y_test))
            )
            # a protected label holder's residuals are exact functions of its rows and labels
            protected = self.setup.dual_release is not None
            self.role = EvaluatedLabelHolder(
                holder,
                leader=LEADER,
                lam=cfg.lam,
                test_block=test_block,
                test_labels=test_labels,
                epsilon_of=eps,
                train=spec.evaluate == "full",
                exact_residuals=spec.evaluate == "full" or not protected,
            )
        else:
            party_role = cast(
                PassiveParty, make_vertical_role(self.setup, self.index, spec.names, block, rng=rng)
            )
            self.role = EvaluatedPassiveParty(
                party_role,
                test_block=test_block,
                epsilon_of=eps,
                train=spec.evaluate == "full",
            )
        self.plan = planned_multipliers(self.setup, self.index, self.n_features)
        self.eigenvalue_premise: EigenvaluePremise | None = None
        if cfg.mechanism == "paper":
            own = self.role.role
            mechanism = cast(PaperMechanism, own.mechanism)
            self.eigenvalue_premise = mechanism.eigenvalue_premise(own.solver.spectrum)
            self._log_premise()

    def _log_premise(self) -> None:
        """Log Lemma 1's eigenvalue premise on this party's own standard error.

        Its outcome is a fact about this party's private rows: it never goes into a message,
        :meth:`describe` or :meth:`final`.
        """
        p = cast(EigenvaluePremise, self.eigenvalue_premise)  # logged once it is measured
        verdict = "holds" if p.holds else "fails"
        process_logger(__name__, self.name).info(
            f"paper mechanism: Lemma 1's premise lambda_min(D^T D) >= d_m on this "
            f"party's block {verdict} (lambda_min = {p.min_eigenvalue:.4g}, d_m = {p.n_features}, "
            f"N = {p.n_samples}); kept on this party, not sent. The paper's epsilon is not a "
            "guarantee either way (the noise is unbounded)."
        )

    def _epsilon(self, events: Sequence[PrivacyEvent]) -> float | None:
        return party_epsilon(events, self.setup.config)

    # -- what the runtime asks of a hosted protocol -----------------------------------------
    @property
    def exact_release(self) -> bool:
        """Whether this party's data leave it without noise under this job."""
        return isinstance(self.setup.mechanisms[self.index], NoPrivacy)

    @property
    def ledger_support(self) -> bool:
        """Whether the budget ledger can account this job's releases.

        False under the paper mechanism: its only epsilon is the paper's Theorem 1 /
        Corollary 1 formula, which is not a certified figure, so the party refuses the job
        when it holds a budget on the data set.
        """
        return self.setup.config.mechanism != "paper"

    ledger_refusal = (
        "the paper mechanism's epsilon is the paper's formula, not a certified figure, so the "
        "budget ledger cannot account its releases"
    )
    holds_data = True  # every vertical party holds columns

    def losses(self, models: list[list[float]]) -> list[float]:
        """Refused: a vertical job evaluates through the label holder's round reports."""
        raise DpfedInputError(
            "a vertical job is evaluated through the label holder's round reports, not by "
            "losses at given models."
        )

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
        return cast(EvaluatedLabelHolder, self.role).start() if self.index == 0 else []

    def model(self) -> np.ndarray:
        return self.role.role.model

    def model_details(self) -> dict[str, Any]:
        """The label holder's intercept: ``coef``'s last weight is that of the constant
        column (``intercept_column``) its mechanism appends to its prepared rows
        (:meth:`~dpfed.protocols.vertical.mechanisms.PartyMechanism.prepare_block`)."""
        mechanism = self.role.role.mechanism
        column = mechanism.intercept_column()
        if column is None:
            return {}
        return {"intercept": mechanism.split_intercept(self.model())[1], "intercept_column": column}

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n_samples": self.n_samples, "n_features": self.n_features}
        if self.alignment is not None:
            out["alignment"] = self._alignment_account()
        return out

    @property
    def rows_digest(self) -> str | None:
        """The digest of its agreed training rows in an aligned job, else None."""
        if self.alignment is None:
            return None
        return str(self.alignment["parts"]["train"]["digest"])

    def _alignment_account(self) -> dict[str, Any]:
        """Its alignment's counts and digests (no ID)."""
        assert self.alignment is not None
        return {
            part: {"rows": len(v["ids"]), "digest": v["digest"]}
            for part, v in self.alignment["parts"].items()
        }

    def scores_of(self, block: Any) -> np.ndarray:
        """Its scores of raw rows of its columns: prepared as in training (row clipping or
        normalisation) times its final model, clipped to its prediction bound when it has
        one, exactly as :meth:`dpfed.estimators.VerticalLinearClassifier.decision_function`
        computes its share."""
        role = self.role.role
        return np.asarray(role.scores(role.mechanism.prepare_block(block)), dtype=np.float64)

    def final(self) -> dict[str, Any]:
        """What the leader needs at the end: the party's releases (public) and its shape."""
        out = {"events": [asdict(e) for e in self.events], "n_features": self.n_features}
        if self.alignment is not None:
            out["alignment"] = self._alignment_account()
        return out


class VerticalProtocol(BaseProtocol):
    """Vertical learning by ADMM sharing: parties hold column ranges of the same rows, the
    first party holds the labels and reports every round to the leader."""

    name = "vertical"
    params = VERTICAL_PARAMS
    holds = "columns"
    dataless_role = None
    same_rows = True
    messages = VERTICAL_MESSAGES
    prediction_messages = ALIGNMENT_MESSAGES  # a prediction by ID agrees its rows by PSI
    report = RoundReport

    def check_parties(self, parties: Sequence[PartySpec]) -> None:
        """Any two or more column holders (the job file checks the count)."""

    def private(self, params: Mapping[str, Any]) -> bool:
        return cast(bool, params.get("mechanism", "none") != "none")

    def variant(self, params: Mapping[str, Any]) -> str | None:
        """``[params] secure = true``: the secure mode, protocol ``vertical_secure``
        (:mod:`dpfed.protocols.vertical_secure.host`)."""
        return "vertical_secure" if params.get("secure") is True else None

    def check_job(self, spec: JobSpec) -> None:
        vertical_config(spec.params)
        rounds_above_rule(spec.params)

    def host(self, spec: JobSpec, name: str) -> VerticalHost:
        return VerticalHost(spec, name)

    def prediction_output(self, spec: JobSpec, scores: np.ndarray) -> dict[str, Any]:
        """The summed scores, and for a binary loss the probability of the positive class
        :math:`1 / (1 + e^{-s})` (as ``predict_proba``'s second column)."""
        out: dict[str, Any] = {"scores": scores.tolist()}
        if get_loss(vertical_config(spec.params).loss).binary:
            out["probability"] = (1.0 / (1.0 + np.exp(-scores))).tolist()
        return out

    def result(self, spec: JobSpec, record: JobRecord) -> dict[str, Any]:
        """The ``result.json`` of a networked vertical job (the keys of ``dpfed train``'s)."""
        return vertical_result(
            spec,
            record.history,
            record.accounts,
            n_samples=next(iter(record.n_samples.values())),
            seconds=record.seconds,
        )


#: The vertical protocol, as registered in :data:`dpfed.runtime.registry.PROTOCOL_REGISTRY`.
PROTOCOL = VerticalProtocol()


def vertical_result(
    spec: JobSpec,
    history: list[dict[str, Any]],
    finals: dict[str, dict[str, Any]],
    *,
    n_samples: int,
    seconds: float,
) -> dict[str, Any]:
    """The ``result.json`` of a networked vertical job from the round reports' ``history``,
    every party's final account and the common number of rows."""

    cfg = vertical_config(spec.params)
    widths = [int(finals[n]["n_features"]) for n in spec.names]
    setup = vertical_setup(cfg, widths, n_samples)
    ledger = PrivacyLedger()
    for name in spec.names:
        for event in finals[name]["events"]:
            ledger.record(PrivacyEvent(**event))
    notes = list(setup.notes)
    if cfg.mechanism == "sound" and cfg.epsilon is not None:
        plan = sound_rounds(cfg, n_samples, widths)
        if plan.above_rule:
            notes.append(
                f"rounds: {plan.iterations}, above the {plan.rule_iterations} the sound "
                f"mechanism's public rule picks for epsilon {cfg.epsilon:g}: per-round noise "
                f"multiplier {plan.noise_multiplier:.3g} against {plan.rule_noise_multiplier:.3g}"
                " (leave iterations out of the job file to use the rule)."
            )
    weight = history[-1].get("passive_weight") if history else None
    if weight is not None:
        notes.append(weighting_note(weight))
    if spec.evaluate == "full":
        notes.append(EVALUATION_NOTE)
    elif spec.evaluate == "test" and setup.config.mechanism != "none":
        notes.append(TEST_EVALUATION_NOTE)
    premises = None
    if cfg.mechanism == "paper":
        # only what the public shapes prove: each party's spectrum stays with the party
        premises = {
            name: EigenvaluePremise(n_samples, int(finals[name]["n_features"]))
            for name in spec.names
        }
    privacy = privacy_summary(setup.config, ledger, spec.names, notes, premises=premises)
    exact = None
    if spec.evaluate == "full" and cfg.mechanism != "none":
        protected = setup.dual_release is not None
        exact = exact_values(
            ["train_objective", *(("primal_residual", "dual_residual") if protected else ())],
            left_parties=True,
            what="every party's exact scores on the training rows, every round"
            + (", and the protected label holder's residuals" if protected else ""),
        )
    data = None
    if spec.align:
        agreed = {n: finals[n].get("alignment") for n in spec.names}
        if len({repr(a) for a in agreed.values()}) != 1:
            raise DpfedInputError(f"the parties trained on different alignments: {agreed}.")
        data = {"alignment": {"align": spec.align, "parts": agreed[spec.names[0]]}}
    return with_exact_values(
        {
            "protocol": "vertical",
            "config": asdict(setup.config),
            **({"data": data} if data else {}),
            "parties": [
                {"name": n, "n_features": int(finals[n]["n_features"])} for n in spec.names
            ],
            "history": history,
            "final": dict(history[-1]) if history else {},
            "privacy": privacy,
            "preprocessing": (
                {
                    "scaling": "each party's schema: declared public bounds and categories",
                    "schemas": {p.name: p.schema.name if p.schema else None for p in spec.parties},
                }
                if spec.align
                else parties_preprocessing(spec.parties)
            ),
            "seconds": seconds,
            "job": describe(spec),
        },
        exact,
    )
