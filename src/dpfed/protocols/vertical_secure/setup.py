r"""The public set-up of secure vertical logistic regression: bounds, defaults and the noise.

Everything here is computed from public quantities (row count :math:`N`, the parties' widths,
the budget and the options), so every party derives the same set-up.

Bounds enforced by the parties (:mod:`dpfed.protocols.vertical_secure.party`):

* every party scales each of its rows to norm 1 (``row_scaling="normalize"``, the default: a
  row-wise map, so one record still changes one row) or only clips them to norm at most 1
  (``"clip"``), then clips to 1 again so the bound holds exactly in floating point
  (:math:`b_j = 1`); the label holder appends the
  intercept column of constant :math:`c` (``intercept_scale``), so its block's rows have norm
  at most :math:`b_0 = \sqrt{1 + c^2}`;
* party :math:`j` projects its block onto the ball of radius
  :math:`R_j = R\, b_j / \lVert b \rVert` after every update, so every score obeys
  :math:`|z_i| = |\sum_j x_{ij}^\top w_j| \le \sum_j b_j R_j = R \lVert b \rVert = Z`.

Sensitivities (replace-one neighbours, one record: every party's part of one row and its
label). With the residual :math:`r_i = p(z_i) - y_i`, :math:`|r_i| \le r_{max}`
(:class:`dpfed.secure.sigmoid.SigmoidPolynomial`), block :math:`j`'s gradient
:math:`g_j = X_j^\top r` moves by at most :math:`2 r_{max} b_j`; all blocks of one round
together by :math:`\Delta = 2 r_{max} \lVert b \rVert`. Each party's Gram matrix
:math:`X_j^\top X_j` (upper triangle) moves by at most :math:`\sqrt 2\, b_j^2` in Frobenius norm,
all of them together by :math:`\Delta_G = \sqrt{2 \sum_j b_j^4}`.

Noise: every Gaussian noise of a round has standard deviation :math:`\sigma = z \Delta` per
coordinate, every Gram noise :math:`\sigma_G = z \Delta_G`, so a party's view of the others'
data is :math:`T + 1` Gaussian releases of multiplier :math:`z`, which
:func:`secure_noise_multiplier` calibrates (docs/privacy.md, "Secure vertical learning").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.privacy.accounting import Release, calibrate_noise_multiplier, releases_epsilon
from dpfed.privacy.coupling import calibration_delta
from dpfed.protocols.vertical_secure.weighting import (
    LIPSCHITZ,
    SMOOTHNESS,
    ScoreStatisticsRelease,
)
from dpfed.secure.sigmoid import SigmoidPolynomial

#: Who is protected: every party's rows and the labels, from the other party and from whoever
#: receives the model (``"all"``); from the other party, the label holder keeping an exact
#: model of its own and receiving every prediction (``"parties"``); or the passive party's
#: rows only (``"passive"``).
PROTECTIONS = ("all", "parties", "passive")
#: What ``protect="all"`` cannot promise, said with every such model (docs/design.md, "Secure
#: vertical learning"): no party has an exact model to fall back on.
NO_FALLBACK = (
    "every block comes from noisy releases, the labels' included: nothing bounds this model "
    "by the label holder's own or by the base rate (on few rows at small epsilon it can be "
    "worse than both); protect='parties' (--label-holder-keeps-model, a job file's "
    "label_holder_keeps_model) keeps that bound for the label holder's predictions"
)
#: The bound a weighted model has (``protect="passive"`` or ``"parties"``,
#: :mod:`dpfed.protocols.vertical_secure.weighting`).
WEIGHTED_BOUND = (
    "not worse than the label holder's own model on the training rows, at the weighting "
    "statistics' confidence bounds"
)
#: How each party bounds its rows: scale every row to norm 1, or clip the longer ones.
ROW_SCALINGS = ("normalize", "clip")
#: Rounds T (5 did worse at every epsilon measured on a9a; 20 and 40 won on some sets and
#: lost on others: docs/design.md, "Another round count").
DEFAULT_ROUNDS = 10
DEFAULT_DEGREE = 15
DEFAULT_RADIUS = 16.0
DEFAULT_INTERCEPT_SCALE = 0.25
#: :math:`V`, the clip of the passive party's score shares when the label holder weighs them
#: (:mod:`dpfed.protocols.vertical_secure.weighting`): the statistics' sensitivities grow as
#: :math:`V`, :math:`V^2`, :math:`V^3`. On a9a and Adult the passive block's scores stay
#: within about 2 (99th percentile 1.0-1.8 at epsilon 1-8); a bound of 2 gave the weight
#: 0.31-0.45 on Adult at epsilon 1-8 where 3 gave 0.16-0.20 and the block's own radius 0-0.27.
DEFAULT_PASSIVE_SCORE_BOUND = 2.0
#: Parties at most: a block update's ciphertexts pass one multiplicative level per party
#: (:func:`dpfed.secure.ckks.parameters`, at most 7 levels at 128-bit security).
MAX_PARTIES = 7
#: :math:`\lambda`, the ridge of the rounds unless the job gives one. A constant: the
#: preconditioner's damping (:meth:`SecureParty.preconditioner
#: <dpfed.protocols.vertical_secure.party.SecureParty.preconditioner>`) already shortens the
#: steps along directions the noise dominates, and a ridge that grew with the noise
#: (:math:`\max(10^{-5}, \sigma\sqrt d / (40 N))`, the rule before) only biased the model
#: towards 0. With everything protected, on a9a, Adult, arcene, breast cancer and madelon at
#: epsilon 0.5-8 (3 seeds, the same noise draws), the constant gave a lower test log loss in
#: 18 of 20 cells, by up to 0.030 (breast cancer at epsilon 8), and a higher one in two
#: (breast cancer at 0.5 by 0.0026, madelon at 0.5 by 0.0001) (docs/design.md).
DEFAULT_RIDGE = 1e-5


@dataclass(frozen=True)
class SecureSetup:
    r"""Public parameters of one secure vertical job.

    Attributes
    ----------
    n_samples : int
        :math:`N`.
    widths : tuple of int
        Feature columns of each party, the label holder first (without the intercept).
    epsilon, delta : float
        The budget of every party's view.
    protect : str
        One of :data:`PROTECTIONS`: ``"all"`` (labels and every party's rows, the model
        publishable), ``"parties"`` (the same rounds; after them the label holder takes its
        own exact model as its block and weighs the passive scores, so predictions go to it
        alone) or ``"passive"`` (the passive party's rows).
    rounds : int
        :math:`T`, Gauss-Seidel rounds (each updates every block once).
    degree : int
        Degree of the sigmoid polynomial.
    radius : float
        :math:`R`, the model's norm bound.
    fit_intercept : bool
        Whether the label holder appends the intercept column.
    intercept_scale : float
        :math:`c`, the intercept column's constant.
    ridge : float or None
        :math:`\lambda`; ``None`` uses :data:`DEFAULT_RIDGE`.
    row_scaling : str
        One of :data:`ROW_SCALINGS`.
    passive_score_bound : float
        :math:`V`, the clip of the passive party's score shares under ``protect="passive"``,
        where the label holder weighs them against its own model
        (:mod:`dpfed.protocols.vertical_secure.weighting`).
    """

    n_samples: int
    widths: tuple[int, ...]
    epsilon: float
    delta: float
    protect: str = "all"
    rounds: int = DEFAULT_ROUNDS
    degree: int = DEFAULT_DEGREE
    radius: float = DEFAULT_RADIUS
    fit_intercept: bool = True
    intercept_scale: float = DEFAULT_INTERCEPT_SCALE
    ridge: float | None = None
    row_scaling: str = "normalize"
    passive_score_bound: float = DEFAULT_PASSIVE_SCORE_BOUND
    polynomial: SigmoidPolynomial = field(init=False)
    noise_multiplier: float = field(init=False)

    def __post_init__(self) -> None:
        check_int("n_samples", self.n_samples, minimum=2)
        if not 2 <= len(self.widths) <= MAX_PARTIES:
            raise DpfedInputError(
                f"the secure mode runs a label holder and 1 to {MAX_PARTIES - 1} passive "
                f"parties (2 to {MAX_PARTIES} blocks of columns: each party but the evaluator "
                f"and the key holder costs the ciphertexts one multiplicative level); found "
                f"{len(self.widths)}."
            )
        for j, width in enumerate(self.widths):
            check_int(f"width of party {j}", width, minimum=1)
        check_positive("epsilon", self.epsilon)
        check_open_unit("delta", self.delta)
        if self.protect not in PROTECTIONS:
            raise DpfedInputError(f"protect must be one of {PROTECTIONS}; found {self.protect!r}.")
        check_int("rounds", self.rounds, minimum=1)
        if self.row_scaling not in ROW_SCALINGS:
            raise DpfedInputError(
                f"row_scaling must be one of {ROW_SCALINGS}; found {self.row_scaling!r}."
            )
        check_positive("radius", self.radius)
        check_positive("intercept_scale", self.intercept_scale)
        check_positive("passive_score_bound", self.passive_score_bound)
        if self.ridge is not None:
            check_positive("ridge", self.ridge)
        object.__setattr__(
            self, "polynomial", SigmoidPolynomial.fit(self.degree, self.radius * self.bound_norm)
        )
        object.__setattr__(self, "noise_multiplier", secure_noise_multiplier(self))

    @property
    def parties(self) -> int:
        """Parties (blocks), the label holder included; also the CKKS levels a block update
        takes (:func:`dpfed.secure.ckks.parameters`)."""
        return len(self.widths)

    @property
    def row_bounds(self) -> tuple[float, ...]:
        """:math:`b_j`: 1 for every block, :math:`\\sqrt{1 + c^2}` for the label holder's
        with the intercept."""
        first = math.sqrt(1.0 + self.intercept_scale**2) if self.fit_intercept else 1.0
        return (first, *(1.0,) * (len(self.widths) - 1))

    @property
    def bound_norm(self) -> float:
        r""":math:`\lVert b \rVert`."""
        return math.sqrt(sum(b * b for b in self.row_bounds))

    @property
    def block_widths(self) -> tuple[int, ...]:
        """Coordinates of each party's model block (the intercept included)."""
        return (self.widths[0] + int(self.fit_intercept), *self.widths[1:])

    @property
    def block_radii(self) -> tuple[float, ...]:
        """:math:`R_j = R b_j / \\lVert b \\rVert`."""
        return tuple(self.radius * b / self.bound_norm for b in self.row_bounds)

    @property
    def gradient_sensitivity(self) -> float:
        r""":math:`\Delta = 2 r_{max} \lVert b \rVert`."""
        return 2.0 * self.polynomial.residual_bound * self.bound_norm

    @property
    def gram_sensitivity(self) -> float:
        r""":math:`\Delta_G = \sqrt{2 \sum_j b_j^4}`."""
        return math.sqrt(2.0 * sum(b**4 for b in self.row_bounds))

    @property
    def gradient_sigma(self) -> float:
        """:math:`\\sigma = z \\Delta`."""
        return self.noise_multiplier * self.gradient_sensitivity

    @property
    def gram_sigma(self) -> float:
        """:math:`\\sigma_G = z \\Delta_G`."""
        return self.noise_multiplier * self.gram_sensitivity

    @property
    def ridge_strength(self) -> float:
        """:math:`\\lambda` (the given one or :data:`DEFAULT_RIDGE`)."""
        return DEFAULT_RIDGE if self.ridge is None else self.ridge

    @property
    def weighted(self) -> bool:
        """Whether the label holder weighs the passive scores against its own exact model
        (whenever it has one: every protection but ``"all"``, :mod:`.weighting`)."""
        return self.protect != "all"

    @property
    def weighting_reach(self) -> float:
        """:math:`PV`: the most the passive parties' weighted shares move a row's score
        (:math:`P` passive parties, each share clipped to :math:`\\pm V`)."""
        return (self.parties - 1) * self.passive_score_bound

    @property
    def coordinates(self) -> int:
        """Grid coordinates released over the job: the gradients and the Gram triangles (the
        weighting statistics get float noise inside the ciphertexts, off the grid)."""
        d = self.block_widths
        return self.rounds * sum(d) + sum(w * (w + 1) // 2 for w in d)

    @property
    def release_count(self) -> int:
        """Gaussian releases of multiplier :math:`z` in a protected party's view:
        :math:`T + 1`, and :math:`T + 2` with the weighting statistics."""
        return self.rounds + 1 + int(self.weighted)

    def statistics_release(self) -> ScoreStatisticsRelease:
        r"""A passive party's release of its scores' statistics (:mod:`.weighting`).

        The label holder receives every passive party's, each of l2 sensitivity 1 in a
        record's row; with :math:`P` passive parties each draws multiplier :math:`z\sqrt P`,
        so that together they are one Gaussian release of multiplier :math:`z`.
        """
        return ScoreStatisticsRelease(
            self.n_samples,
            self.passive_score_bound,
            LIPSCHITZ,
            SMOOTHNESS,
            self.noise_multiplier * math.sqrt(self.parties - 1),
        )

    def releases(self) -> list[Release]:
        """What every party's view is accounted as: :attr:`release_count` Gaussian releases
        (the grid coordinates counted on the first); the noise is calibrated to them."""
        return self._releases(self.release_count)

    def party_releases(self, index: int) -> list[Release]:
        """The releases of party ``index``'s data (what its budget ledger reserves): those of
        :meth:`releases`, none for an unprotected label holder (``protect="passive"``), and
        without the weighting statistics for a protected one (only the passive party makes
        that release)."""
        if index != 0:
            return self.releases()
        return [] if self.protect == "passive" else self._releases(self.rounds + 1)

    def _releases(self, count: int) -> list[Release]:
        z = self.noise_multiplier
        return [Release("gaussian", z, self.coordinates)] + [Release("gaussian", z, 0)] * (
            count - 1
        )

    def epsilon_spent(self) -> float:
        """The accounted epsilon of :meth:`releases` at :attr:`delta` (coupling included)."""
        return releases_epsilon(self.releases(), self.delta)


def secure_protection(protect_label_holder: bool, label_holder_keeps_model: bool = False) -> str:
    """The :data:`PROTECTIONS` value of the options ``protect_label_holder`` and
    ``label_holder_keeps_model`` (the CLI's, the job file's and the estimator's)."""
    if not protect_label_holder:
        return "passive"
    return "parties" if label_holder_keeps_model else "all"


def secure_noise_multiplier(setup: SecureSetup) -> float:
    r"""The multiplier :math:`z` of :attr:`SecureSetup.release_count` Gaussian releases whose
    PLD epsilon is ``setup.epsilon`` at ``setup.delta`` minus the grid coupling's share
    (:func:`dpfed.privacy.coupling.calibration_delta`)."""
    delta = calibration_delta(setup.delta, setup.coordinates, setup.epsilon)
    return calibrate_noise_multiplier(setup.epsilon, delta, setup.release_count)
