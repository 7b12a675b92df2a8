r"""What a party does to its x-update before anything derived from it leaves the party.

A :class:`PartyMechanism` is built per party (its calibration depends on the party's block).
It enforces the assumptions its privacy analysis needs on the party's own data
(:meth:`prepare_block`, :meth:`feasible_set`, :meth:`clip_target`; the label holder's
intercept column is added to its bounded rows there) and turns the exact
x-update into the released model and scores (:meth:`release`), returning the privacy events
that the release spent. Formulas and proofs: :mod:`dpfed.protocols.vertical.calibration`,
``docs/privacy.md``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import cast

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.constraints import Ball, FeasibleSet, Unconstrained
from dpfed.core.losses import Loss
from dpfed.core.regularizers import L2, ElasticNet, Regularizer
from dpfed.core.rows import Matrix, clip_rows, normalize_rows, with_constant_column, with_intercept
from dpfed.core.spectral import GramSpectrum
from dpfed.privacy.accounting import corollary1_epsilon
from dpfed.privacy.gaussian import GaussianRelease
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.protocols.vertical.calibration import (
    EigenvaluePremise,
    SoundBounds,
    lemma1_bound,
    local_model_strong_convexity,
    theorem1_epsilon,
    theorem1_sigma,
)

#: :math:`s`, the constant of the intercept column of unbounded rows (liblinear's
#: ``intercept_scaling``): the intercept's weight is penalised :math:`1/s^2` as a feature's.
UNBOUNDED_INTERCEPT_SCALING = 4.0


def _matvec(block: Matrix, x: np.ndarray) -> np.ndarray:
    return np.asarray(block @ x).reshape(-1)


@dataclass
class XUpdate:
    """What one x-update produced: the model kept for later rounds, the scores it sends
    (``None``: no new scores; the party re-sends the ones it released last), and the privacy
    events spent."""

    model: np.ndarray
    scores: np.ndarray | None
    events: list[PrivacyEvent]


class PartyMechanism(ABC):
    """Privacy treatment of one party's releases."""

    name: str = ""
    prox_weight: float = 0.0
    #: :math:`c` of the intercept column the label holder's rows get (None: no intercept).
    intercept_scale: float | None = None

    def bound_rows(self, block: Matrix) -> Matrix:
        """Enforce the row assumptions on a block (training or prediction rows alike)."""
        return block

    def row_norm_bound(self) -> float | None:
        """:math:`R`, the largest row norm :meth:`bound_rows` leaves (None: unbounded)."""
        return None

    def prepare_block(self, block: Matrix) -> Matrix:
        r"""The rows the party trains and predicts on: :meth:`bound_rows`, then, with an
        ``intercept_scale`` :math:`c`, the intercept column.

        * Rows bounded to norm :math:`R` (a mechanism's): :math:`[\sqrt{1 - c^2}\,x,\ cR]`
          (:func:`dpfed.core.rows.with_intercept` at the scale of :math:`R`), a fixed row-wise
          map onto rows of norm at most :math:`R`, so every sensitivity derived for the
          bounded rows holds as it is; the intercept :math:`cR\,w_d` is regularised with the
          other weights, which keeps the local problems strongly convex.
        * Unbounded rows (a party without a mechanism, whose data nothing protects):
          :math:`[x,\ s]` with liblinear's ``intercept_scaling``
          :math:`s` = :data:`UNBOUNDED_INTERCEPT_SCALING`, so the intercept :math:`s\,w_d` is
          penalised :math:`1/s^2` as much as a feature's weight (on Adult, a9a and breast
          cancer the label holder's model is then scikit-learn's with its unregularised
          intercept, to 0.001 in test log loss).
        """
        rows = self.bound_rows(block)
        if self.intercept_scale is None:
            return rows
        bound = self.row_norm_bound()
        if bound is None:
            return with_constant_column(rows, UNBOUNDED_INTERCEPT_SCALING)
        rows = with_intercept(rows / bound, self.intercept_scale) * bound
        return clip_rows(rows, bound)  # the bound exactly, in floating point too

    def intercept_column(self) -> float | None:
        """The constant of the intercept column :meth:`prepare_block` appends (:math:`cR`, or
        :math:`s` for unbounded rows; None without an intercept): the intercept is the
        column's weight times it."""
        if self.intercept_scale is None:
            return None
        bound = self.row_norm_bound()
        return UNBOUNDED_INTERCEPT_SCALING if bound is None else self.intercept_scale * bound

    def split_intercept(self, model: np.ndarray) -> tuple[np.ndarray, float]:
        r"""``(coef, intercept)`` of a model on :meth:`prepare_block`'s columns, ``coef`` for
        the rows :meth:`bound_rows` leaves: :math:`(\sqrt{1 - c^2}\,w_{:d},\ cR\,w_d)`
        for bounded rows, :math:`(w_{:d},\ s\,w_d)` for unbounded ones, or ``(w, 0)``
        without an intercept column."""
        w = np.asarray(model, dtype=np.float64).reshape(-1)
        column = self.intercept_column()
        if column is None:
            return w, 0.0
        scaled = self.row_norm_bound() is not None  # with_intercept scales the features
        c = cast(float, self.intercept_scale)
        factor = math.sqrt(1.0 - c * c) if scaled else 1.0
        return w[:-1] * factor, float(w[-1] * column)

    def feasible_set(self) -> FeasibleSet:
        return Unconstrained()

    def clip_target(self, target: np.ndarray) -> np.ndarray:
        return target

    def check_regularizer(self, regularizer: Regularizer, reg_weight: float) -> None:  # noqa: B027
        """Refuse a regulariser the analysis does not cover."""

    @abstractmethod
    def release(
        self,
        x: np.ndarray,
        *,
        block: Matrix,
        spectrum: GramSpectrum | None,
        rho: float,
        round: int,
        party: str,
        rng: np.random.Generator,
        send_scores: bool = True,
    ) -> XUpdate:
        """Turn the exact x-update ``x`` (shape ``(d,)``) into what the party releases."""


class NoPrivacy(PartyMechanism):
    """The plain ADMM sharing algorithm: no noise, nothing enforced."""

    name = "none"

    def release(
        self,
        x: np.ndarray,
        *,
        block: Matrix,
        spectrum: GramSpectrum | None,
        rho: float,
        round: int,
        party: str,
        rng: np.random.Generator,
        send_scores: bool = True,
    ) -> XUpdate:
        return XUpdate(x, _matvec(block, x), [])


class PaperMechanism(PartyMechanism):
    r"""Eq. (10): :math:`\tilde x = x + \xi`, :math:`\xi \sim N(0, \sigma^2 (D^\top D)^{+})`.

    Assumption 1 is enforced where it can be: rows are normalised to norm 1, the local model
    is constrained to the ball of radius ``b1`` (the central node projects ``z`` and ``y``),
    and the regulariser must be twice differentiable (``c1`` from it). Not enforceable, and
    reported: Lemma 1 also uses :math:`\|(D^\top D)^{-1}\| \le 1/d_m` (checked on the data by
    :meth:`eigenvalue_premise`; false whenever :math:`d_m^2 > N`) and bounds the noisy
    models :math:`\|\tilde x_k\| \le b_1`, which unbounded Gaussian noise can break. So the
    Theorem 1 / Corollary 1 epsilon is the paper's formula, never a certified figure.

    Exactly one of ``epsilon_step`` (noise from Theorem 1) or ``sigma`` (noise fixed, epsilon
    from Theorem 1 read backwards) is given.
    """

    name = "paper"

    def __init__(
        self,
        *,
        d_m: int,
        n_parties: int,
        reg_weight: float,
        c1: float,
        b1: float,
        delta_step: float,
        epsilon_step: float | None = None,
        sigma: float | None = None,
    ) -> None:
        if (epsilon_step is None) == (sigma is None):
            raise DpfedInputError("the paper mechanism takes exactly one of epsilon or sigma.")
        self.d_m, self.n_parties = d_m, n_parties
        self.reg_weight, self.c1, self.b1 = reg_weight, c1, b1
        self.delta_step = delta_step
        self.epsilon_step, self.sigma = epsilon_step, sigma

    def bound_rows(self, block: Matrix) -> Matrix:
        return normalize_rows(block)

    def row_norm_bound(self) -> float:
        return 1.0

    def feasible_set(self) -> FeasibleSet:
        return Ball(self.b1)

    def check_regularizer(self, regularizer: Regularizer, reg_weight: float) -> None:
        if regularizer.curvature_bound is None:
            raise DpfedInputError(
                "the paper mechanism needs a twice differentiable regulariser (Assumption 1.2, "
                f"|R''| <= c1). Found {regularizer!r}; use l2 or the sound mechanism."
            )

    def l2_bound(self, rho: float) -> float:
        """Lemma 1's sensitivity bound ``C`` at penalty ``rho``."""
        return lemma1_bound(
            d_m=self.d_m,
            rho=rho,
            lam=self.reg_weight,
            c1=self.c1,
            b1=self.b1,
            n_parties=self.n_parties,
        )

    def eigenvalue_premise(self, spectrum: GramSpectrum) -> EigenvaluePremise:
        r"""Lemma 1's premise :math:`\lambda_{\min}(D^\top D) \ge d_m` on the prepared block.

        Parameters
        ----------
        spectrum : GramSpectrum
            The spectrum of the party's prepared (row-normalised) block, shape ``(N, d_m)``.

        Returns
        -------
        EigenvaluePremise
            With the measured :math:`\lambda_{\min}` (0 when ``d_m > N`` or rank deficient).
            A fact about the party's private rows: it stays with the party.
        """
        n, d = spectrum.block.shape
        if d != self.d_m:
            raise DpfedInputError(
                f"the spectrum must be of a block with d_m = {self.d_m} columns. Found {d}."
            )
        return EigenvaluePremise(
            n_samples=int(n), n_features=int(d), min_eigenvalue=spectrum.min_eigenvalue
        )

    def noise(self, rho: float) -> tuple[float, float, float]:
        """``(C, sigma, epsilon_step)`` at penalty ``rho``."""
        bound = self.l2_bound(rho)
        if self.sigma is not None:
            sigma = self.sigma
            eps = theorem1_epsilon(l2_bound=bound, sigma=sigma, delta=self.delta_step)
        else:
            eps = cast(float, self.epsilon_step)  # exactly one of the two is given
            sigma = theorem1_sigma(l2_bound=bound, epsilon=eps, delta=self.delta_step)
        return bound, sigma, eps

    def release(
        self,
        x: np.ndarray,
        *,
        block: Matrix,
        spectrum: GramSpectrum | None,
        rho: float,
        round: int,
        party: str,
        rng: np.random.Generator,
        send_scores: bool = True,
    ) -> XUpdate:
        bound, sigma, eps = self.noise(rho)
        gram = cast(GramSpectrum, spectrum)  # the paper mechanism is given its block's spectrum
        g = rng.standard_normal(gram.rank)
        x_tilde = x + sigma * gram.pinv_sqrt_apply(g)
        event = PrivacyEvent(
            party=party,
            round=round,
            mechanism="gaussian",
            noise_multiplier=sigma / bound,
            l2_sensitivity=bound,
            sigma=sigma,
            label="scores",
            epsilon=eps,
            delta=self.delta_step,
        )
        return XUpdate(x_tilde, _matvec(block, x_tilde), [event])


class SoundMechanism(PartyMechanism):
    r"""Sample-level DP with every bound enforced (see :mod:`dpfed.protocols.vertical.calibration`).

    Per round: exact x-update over the ball :math:`B_x` from a clipped target, Gaussian noise
    on the model (multiplier ``model_multiplier``), then clipped scores plus Gaussian noise
    (multiplier ``scores_multiplier``). With ``send_scores=False`` (the label holder's own
    block, whose scores never leave it) only the model release is spent.

    ``score_rounds`` (None: every round) limits the scores releases to rounds
    ``1..score_rounds``; in a later round the party re-sends the scores it released last
    (zeros if none), which spends nothing. The scores of the last round only enter the central
    node's final z- and dual updates, never a model, so ``score_rounds = T - 1`` loses
    nothing and saves one release.
    """

    name = "sound"

    def __init__(
        self,
        *,
        bounds: SoundBounds,
        reg_weight: float,
        model_multiplier: float,
        scores_multiplier: float,
        score_rounds: int | None = None,
    ) -> None:
        self.bounds = bounds
        self.reg_weight = reg_weight
        self.prox_weight = bounds.prox_weight
        self.model_multiplier = model_multiplier
        self.scores_multiplier = scores_multiplier
        self.score_rounds = score_rounds
        self._strong_convexity: float | None = None

    def releases_scores(self, round: int) -> bool:
        """Whether round ``round`` (1-based) spends a scores release."""
        return self.score_rounds is None or round <= self.score_rounds

    def bound_rows(self, block: Matrix) -> Matrix:
        return clip_rows(block, self.bounds.row_norm)

    def row_norm_bound(self) -> float:
        return float(self.bounds.row_norm)

    def feasible_set(self) -> FeasibleSet:
        return Ball(self.bounds.model_radius)

    def clip_target(self, target: np.ndarray) -> np.ndarray:
        c = self.bounds.target_clip
        return cast(np.ndarray, np.clip(target, -c, c))

    def check_regularizer(self, regularizer: Regularizer, reg_weight: float) -> None:

        if not (
            isinstance(regularizer, L2)
            or (isinstance(regularizer, ElasticNet) and regularizer.l1_ratio == 0.0)
        ):
            raise DpfedInputError(
                "the sound mechanism's sensitivity bound needs the exact x-update, available "
                f"for the l2 regulariser. Found {regularizer!r}."
            )
        self._strong_convexity = reg_weight * regularizer.strong_convexity + self.prox_weight
        self.bounds.model_sensitivity(rho=1.0, strong_convexity=self._strong_convexity)

    def releases(self, rho: float) -> tuple[GaussianRelease, GaussianRelease]:
        """The model and scores releases at penalty ``rho``."""
        if self._strong_convexity is None:
            raise RuntimeError("check_regularizer must run before release")
        dx = self.bounds.model_sensitivity(rho=rho, strong_convexity=self._strong_convexity)
        model = GaussianRelease.from_multiplier("model", dx, self.model_multiplier)
        scores = GaussianRelease.from_multiplier(
            "scores", self.bounds.message_sensitivity, self.scores_multiplier
        )
        return model, scores

    def local_model_release(self, loss: Loss, tolerance: float, n_samples: int) -> GaussianRelease:
        r"""The release of a protected label holder's regularised local model (its round 0).

        :math:`x = \arg\min_x \sum_i \ell(\langle d_i, x\rangle; y_i) + \frac\mu2\|x\|^2`
        with rows of norm at most :math:`R` and :math:`|\ell'| \le L`: replacing one row and
        its label changes the gradient by at most :math:`2LR`; the objective is
        :math:`\kappa`-strongly convex on every data set with :math:`\kappa = \mu - wNR^2`
        (:func:`~dpfed.protocols.vertical.calibration.local_model_strong_convexity`; a loss
        with :math:`\ell'' \ge -w`, :math:`w = 0` when convex), so the minimisers move by at
        most :math:`2LR/\kappa`; a solve stopped at gradient norm ``tolerance`` adds
        :math:`2\,\mathrm{tolerance}/\kappa` (both solves within it of their minimisers).

        Raises
        ------
        DpfedInputError
            If the loss has no bounded slope, or :math:`\kappa \le 0`.
        """
        if self._strong_convexity is None:
            raise RuntimeError("check_regularizer must run before release")
        slope = loss.lipschitz
        if slope is None or not math.isfinite(slope):
            raise DpfedInputError(
                "a protected label holder's local model needs a loss of bounded slope. Found "
                f"{loss.name}."
            )
        kappa = local_model_strong_convexity(
            ridge=self._strong_convexity,
            weak_convexity=loss.weak_convexity,
            n_samples=n_samples,
            row_norm=self.bounds.row_norm,
        )
        sensitivity = 2.0 * (float(slope) * self.bounds.row_norm + tolerance) / kappa
        return GaussianRelease.from_multiplier("model", sensitivity, self.model_multiplier)

    def release(
        self,
        x: np.ndarray,
        *,
        block: Matrix,
        spectrum: GramSpectrum | None,
        rho: float,
        round: int,
        party: str,
        rng: np.random.Generator,
        send_scores: bool = True,
    ) -> XUpdate:
        model_release, scores_release = self.releases(rho)
        radius = self.bounds.model_radius
        x_tilde = model_release.noisy(rng, x)
        norm = float(np.linalg.norm(x_tilde))
        if norm > radius:
            x_tilde = x_tilde * (radius / norm)
        events = [ledger_event(party, round, model_release, coordinates=x.size)]
        clip = self.bounds.score_clip
        if not send_scores:
            return XUpdate(x_tilde, np.clip(_matvec(block, x_tilde), -clip, clip), events)
        if not self.releases_scores(round):
            return XUpdate(x_tilde, None, events)  # the party re-sends its last scores
        scores = np.clip(_matvec(block, x_tilde), -clip, clip)
        scores = scores_release.noisy(rng, scores)
        events.append(ledger_event(party, round, scores_release, coordinates=scores.size))
        return XUpdate(x_tilde, scores, events)


def ledger_event(
    party: str, round: int, release: GaussianRelease, *, coordinates: int
) -> PrivacyEvent:
    """The ledger entry of ``release`` made by ``party`` in ``round``, of ``coordinates``
    coordinates drawn on the exact grid (:meth:`GaussianRelease.noisy`)."""
    return PrivacyEvent(
        party=party,
        round=round,
        mechanism="gaussian",
        noise_multiplier=release.noise_multiplier,
        l2_sensitivity=release.l2_sensitivity,
        sigma=release.sigma,
        label=release.label,
        coordinates=coordinates,
    )


class DualRelease:
    r"""A protected label holder's broadcast: :math:`\tilde y = \operatorname{clip}(y, \pm B_y)
    + N(0, \sigma_y^2 I)`, one label or row moving one entry by at most :math:`2 B_y`."""

    def __init__(self, *, bounds: SoundBounds, noise_multiplier: float) -> None:
        self.bounds = bounds
        self.release = GaussianRelease.from_multiplier(
            "dual", bounds.dual_sensitivity, noise_multiplier
        )

    def apply(
        self, dual: np.ndarray, *, party: str, round: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, PrivacyEvent]:
        clip = self.bounds.dual_clip
        noisy = self.release.noisy(rng, np.clip(dual, -clip, clip))
        return noisy, ledger_event(party, round, self.release, coordinates=dual.size)


MECHANISMS = ("none", "paper", "sound")


def corollary1_step_epsilon(epsilon_total: float, steps: int, delta_prime: float) -> float:
    """Per-step epsilon whose Corollary 1 total over ``steps`` equals ``epsilon_total``."""

    lo, hi = 0.0, epsilon_total
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if corollary1_epsilon(mid, steps, delta_prime) > epsilon_total:
            hi = mid
        else:
            lo = mid
    if lo <= 0 or not math.isfinite(lo):
        raise DpfedInputError(f"no per-step epsilon reaches total epsilon {epsilon_total}.")
    return lo
