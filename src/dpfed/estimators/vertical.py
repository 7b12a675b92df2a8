"""Estimators for vertically partitioned data, simulated in one process.

``X`` holds all parties' columns side by side; ``split`` says how many columns each party
holds (the label holder's first). Fitting runs the ADMM sharing protocol between the parties;
the learned per-party models stay per party in ``party_models_``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError
from dpfed.core.rows import DEFAULT_INTERCEPT_SCALE
from dpfed.estimators._base import BinaryScoreClassifier, config_of, refuse_fit_params
from dpfed.protocols.vertical.calibration import SoundBounds
from dpfed.protocols.vertical.driver import VerticalConfig, VerticalResult, train_vertical
from dpfed.protocols.vertical.roles import predicted_scores
from dpfed.protocols.vertical_secure import (
    SecureSetup,
    SecureVerticalResult,
    train_secure_vertical,
)
from dpfed.protocols.vertical_secure.setup import secure_protection


def _split_columns(X, split: Sequence[int]) -> list:
    total = int(sum(split))
    if any(int(k) <= 0 for k in split) or total != X.shape[1]:
        shown = "+".join(str(k) for k in split)
        raise DpfedInputError(
            f"split must be positive column counts summing to the {X.shape[1]} features. "
            f"Found {shown}={total}."
        )
    edges = np.cumsum([0, *split])
    X = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X, dtype=float)
    return [X[:, a:b] for a, b in itertools.pairwise(edges)]


class VerticalLinearClassifier(BinaryScoreClassifier):
    """Binary linear classifier trained by (DP) ADMM sharing across column blocks.

    Parameters
    ----------
    split : sequence of int or None
        Columns per party, label holder first. None: two parties with halves.
    loss : {"logistic", "smoothed_hinge", "sigmoid", "squared"}
    regularizer : {"l2", "l1", "elasticnet"}
    lam : float
        Weight of the regulariser in the averaged objective.
    rho : float or None
        ADMM penalty of the summed form.
    iterations : int or None
        ADMM rounds; None: 20 without noise, the sound mechanism's public rule with it.
    mechanism : {"none", "paper", "sound"}
    epsilon, delta : float or None
        Target total privacy.
    noise_multiplier : float or None
        Sound mechanism, instead of epsilon: the per-round noise multiplier.
    noise_sigma : float or None
        Paper mechanism, instead of epsilon: the paper's absolute sigma.
    accountant : {"pld", "rdp"}
    bounds : SoundBounds or None
        None: the sound mechanism's public rule
        (:func:`dpfed.protocols.vertical.calibration.sound_defaults`).
    protect_label_holder : bool
    label_holder_keeps_model : bool
        With ``secure`` and ``protect_label_holder``: protect the labels and the label
        holder's rows from the passive party only; the label holder keeps an exact model of
        its own and weighs the passive scores against it (its predictions, here
        :meth:`decision_function`, are for it alone).
    secure : bool
        The secure mode (:func:`dpfed.protocols.vertical_secure.train_secure_vertical`): two
        to seven parties, products under CKKS encryption, noise on d-vectors only; needs ``epsilon``
        and ``delta``, the logistic loss and the l2 regulariser (``lam`` and ``rho`` are not
        used: its ridge and steps come from its own public rule), and ``dpfed[secure]``.
    fit_intercept : bool or None
        An intercept (``intercept_``), held by the label holder: a constant column appended
        to its bounded rows (:class:`~dpfed.protocols.vertical.driver.VerticalConfig`).
        Default: on, except under ``mechanism="paper"`` (the paper's algorithm).
    intercept_scale : float
        :math:`c \\in (0, 1)`: the label holder's rows become :math:`[\\sqrt{1 - c^2} x, c R]`.
    adaptive_rho, tol, model_fraction, b1, warm_start_rounds, inner_iterations, score_rounds, \
acceleration, passive_weighting
        As the fields of :class:`~dpfed.protocols.vertical.driver.VerticalConfig` (residual
        balancing, the stopping tolerances, the sound mechanism's model share of each round's
        budget, the paper mechanism's radius, the label holder's warm start, the inexact
        x-update's iterations, the sound mechanism's score rounds, the rounds' acceleration,
        the passive weighting); None decides them from the other values as the
        configuration does.
    random_state : int or None
        Seeds every party's noise; with the same seed, ``fit`` gives the same model.

    Attributes
    ----------
    classes_ : ndarray, shape (2,)
        The two labels seen in ``fit``, sorted; ``classes_[1]`` is the positive class (+1).
    n_features_in_ : int
        Columns of ``X`` in ``fit`` (all parties together).
    coef_ : ndarray, shape (1, n_features)
        All parties' models side by side, each for its bounded rows (only a simulation sees
        them together); the label holder's without its intercept's weight.
    party_models_ : dict of str to ndarray
    history_ : list of dict
        Per-round objective, test metrics (none here) and epsilon spent (None under the
        paper mechanism).
    privacy_spent_ : dict
        ``mechanism``, ``epsilon``, ``delta``, ``accountant`` and per-party figures.
        ``epsilon`` is the certified total; under ``mechanism="paper"`` it is None and the
        paper's Theorem 1 / Corollary 1 formula is in ``paper_epsilon``, with
        ``paper_epsilon_reason`` saying why it is not a guarantee.

    intercept_ : ndarray, shape (1,)
        The label holder's intercept (0 without ``fit_intercept``).
    passive_weight_ : float or None
        ``secure`` without ``protect_label_holder`` or with ``label_holder_keeps_model``: the
        weight of the passive party's scores, clipped to ``+-2`` (the label holder's block is
        then its own model and
        :meth:`decision_function` adds ``passive_weight_ * clip(scores)``,
        :mod:`dpfed.protocols.vertical_secure.weighting`); None otherwise, and with
        ``protect_label_holder`` alone nothing then bounds the model by the label holder's
        own or by the base rate
        (:data:`~dpfed.protocols.vertical_secure.setup.NO_FALLBACK`).

    Notes
    -----
    Sparse rows are taken (as CSR) and cut into the parties' blocks like dense ones.
    """

    def __init__(
        self,
        split: Sequence[int] | None = None,
        *,
        loss: str = "logistic",
        regularizer: str = "l2",
        lam: float = 1e-4,
        rho: float | None = None,
        iterations: int | None = None,
        mechanism: str = "none",
        epsilon: float | None = None,
        delta: float | None = None,
        noise_multiplier: float | None = None,
        noise_sigma: float | None = None,
        accountant: str = "pld",
        bounds: SoundBounds | None = None,
        protect_label_holder: bool = False,
        label_holder_keeps_model: bool = False,
        secure: bool = False,
        fit_intercept: bool | None = None,
        intercept_scale: float = DEFAULT_INTERCEPT_SCALE,
        adaptive_rho: bool | None = None,
        tol: tuple[float, float] | None = None,
        model_fraction: float | None = None,
        b1: float | None = None,
        warm_start_rounds: int | None = None,
        inner_iterations: int = 100,
        score_rounds: int | None = None,
        acceleration: str | None = None,
        passive_weighting: bool | None = None,
        random_state: int | None = None,
    ) -> None:
        self.split = split
        self.loss = loss
        self.regularizer = regularizer
        self.lam = lam
        self.rho = rho
        self.iterations = iterations
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.noise_sigma = noise_sigma
        self.accountant = accountant
        self.bounds = bounds
        self.protect_label_holder = protect_label_holder
        self.label_holder_keeps_model = label_holder_keeps_model
        self.secure = secure
        self.fit_intercept = fit_intercept
        self.intercept_scale = intercept_scale
        self.adaptive_rho = adaptive_rho
        self.tol = tol
        self.model_fraction = model_fraction
        self.b1 = b1
        self.warm_start_rounds = warm_start_rounds
        self.inner_iterations = inner_iterations
        self.score_rounds = score_rounds
        self.acceleration = acceleration
        self.passive_weighting = passive_weighting
        self.random_state = random_state

    def _config(self) -> VerticalConfig:
        return config_of(self, VerticalConfig)

    def _blocks(self, X) -> list:
        split = self.split
        if split is None:
            half = X.shape[1] // 2
            split = [X.shape[1] - half, half] if half else [X.shape[1]]
        return _split_columns(X, split)

    def _adds_noise(self) -> bool:
        return self.mechanism != "none" or self.secure

    def _secure_setup(self, blocks: list) -> SecureSetup:
        refusals = []
        if self.epsilon is None or self.delta is None:
            refusals.append("secure=True needs epsilon and delta")
        if self.mechanism == "paper":
            refusals.append("secure=True is its own mechanism; found mechanism='paper'")
        if self.loss != "logistic" or self.regularizer != "l2":
            refusals.append(
                f"secure=True fits the logistic loss with an l2 ridge; found "
                f"loss={self.loss!r}, regularizer={self.regularizer!r}"
            )
        if self.noise_multiplier is not None or self.noise_sigma is not None:
            refusals.append(
                "secure=True calibrates its own noise: leave noise_multiplier and noise_sigma unset"
            )
        if self.label_holder_keeps_model and not self.protect_label_holder:
            refusals.append("label_holder_keeps_model=True goes with protect_label_holder=True")
        if refusals:
            raise DpfedInputError("; ".join(refusals) + ".")
        assert self.epsilon is not None and self.delta is not None
        rounds = {} if self.iterations is None else {"rounds": self.iterations}
        return SecureSetup(
            int(blocks[0].shape[0]),
            tuple(int(b.shape[1]) for b in blocks),
            self.epsilon,
            self.delta,
            protect=secure_protection(self.protect_label_holder, self.label_holder_keeps_model),
            fit_intercept=self.fit_intercept is not False,
            **rounds,
        )

    def fit(self, X, y, **fit_params) -> VerticalLinearClassifier:
        """Run the protocol on the rows ``X`` and their labels ``y``.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            All parties' columns side by side, cut by ``split``.
        y : array-like, shape (n_samples,)
            Two distinct labels of any type; ``classes_[0]`` is trained as -1 and
            ``classes_[1]`` as +1 (so {0, 1} and {-1, 1} are used as they are).

        Returns
        -------
        VerticalLinearClassifier
            ``self``, fitted.
        """
        refuse_fit_params(self, fit_params)
        X, y_pm = self._validate_fit(X, y)
        blocks = self._blocks(X)
        if self.secure:
            secure = train_secure_vertical(
                blocks, y_pm, self._secure_setup(blocks), seed=self.random_state
            )
            self.result_ = secure
            self.party_models_ = {f"party{j}": w for j, w in enumerate(secure.blocks)}
            self.coef_ = np.concatenate(secure.blocks)[None, :]
            self.intercept_ = np.array([secure.intercept])
            self.history_ = [
                {
                    "round": i // len(blocks),
                    "block": c.block,
                    "seconds": c.seconds,
                    "bytes": c.bytes_sent,
                }
                for i, c in enumerate(secure.costs)
            ]
            self.privacy_spent_ = secure.privacy()
            self.passive_weight_ = None if secure.weighting is None else secure.weighting.beta
            return self
        if self.label_holder_keeps_model:
            raise DpfedInputError("label_holder_keeps_model=True is an option of secure=True.")
        result: VerticalResult = train_vertical(blocks, y_pm, self._config())
        self.result_ = result
        coefs, intercept = result.coefficients()
        self.intercept_ = np.array([intercept])
        self.party_models_ = result.models
        self.coef_ = np.concatenate(list(coefs.values()))[None, :]
        self.history_ = result.history
        self.privacy_spent_ = result.privacy
        self.passive_weight_ = None
        return self

    def decision_function(self, X) -> np.ndarray:
        """Summed party scores of the rows of ``X``; each party scores its own (prepared)
        columns, as in the prediction protocol.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)

        Returns
        -------
        ndarray, shape (n_samples,)
            Positive for ``classes_[1]``.
        """
        X = self._validate_rows(X)
        blocks = self._blocks(X)
        if isinstance(self.result_, SecureVerticalResult):
            return self.result_.decision_function(blocks)
        total = np.zeros(X.shape[0])
        mechs = self.result_.mechanisms
        bounds = self.result_.score_bounds
        for mech, block, (name, model) in zip(
            mechs, blocks, self.party_models_.items(), strict=True
        ):
            total += predicted_scores(mech.prepare_block(block), model, bounds.get(name))
        return total


class VerticalLogisticRegression(VerticalLinearClassifier):
    """:class:`VerticalLinearClassifier` with the logistic loss (the papers' experiments)."""
