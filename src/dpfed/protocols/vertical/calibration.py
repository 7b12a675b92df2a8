r"""Sensitivity bounds and noise calibration of DP ADMM sharing (vertical learning).

Two mechanisms; the derivations are in ``docs/privacy.md``.

``paper``
    Eq. (10) of Hu et al. (AAAI 2020): after its x-update, party ``m`` adds
    :math:`\xi \sim N(0, \sigma^2 (D_m^\top D_m)^{-1})`, so that its message
    :math:`D_m \tilde x_m` carries Gaussian noise of variance :math:`\sigma^2` in the column
    space of :math:`D_m`. Lemma 1 bounds the l2 sensitivity by
    :math:`C = \frac{3}{d_m \rho}(\lambda c_1 + (1 + M\rho) b_1)` under Assumption 1 and
    Theorem 1 sets :math:`\sigma = \sqrt{2\ln(1.25/\delta)}\, C / \varepsilon` for
    :math:`\varepsilon \in (0, 1]`. ``lambda`` here is the weight of the summed-loss form of
    the objective (``N`` times that of the averaged form). The resulting figure is the paper's
    formula, not a guarantee: Lemma 1's proof needs the noisy models in the ball of radius
    :math:`b_1` (unbounded Gaussian noise breaks it) and :math:`\lambda_{\min}(D_m^\top
    D_m) \ge d_m` (:class:`EigenvaluePremise`), so dpfed reports it as ``paper_epsilon`` and
    certifies no epsilon for this mechanism.

``sound``
    A calibration that holds for sample-level adjacency (one row of one party's block, or one
    label, is replaced) with every bound enforced in code. Per round, party ``m``

    1. clips its rows to norm :math:`R`, clips its target :math:`c` entrywise to
       :math:`[-B_c, B_c]` (``c`` is computed from public messages only),
    2. solves the x-update exactly over the ball :math:`\|x\| \le B_x` with strong convexity
       :math:`\mu = \lambda_s \mu_R + \tau`; one replaced row moves the minimiser by at most
       :math:`\Delta_x = 2\rho R (R B_x + B_c) / \mu`,
    3. releases (to itself) :math:`\tilde x = \Pi_{B_x}(x + N(0, \sigma_x^2 I))`,
    4. sends :math:`\tilde u = \operatorname{clip}(D \tilde x, \pm B_u) + N(0, \sigma_u^2 I_N)`;
       one replaced row changes one entry, by at most :math:`\Delta_u = 2\min(B_u, R B_x)`.

    The target :math:`c` depends on the private rows only through earlier releases, so round
    :math:`t` is, conditionally on them, two Gaussian mechanisms (adaptive composition). The
    scores of the last round only enter the central node's final z- and dual updates, never
    a model, so they are not released (``score_rounds = T - 1``): T rounds spend
    :math:`T` model and :math:`S = T - 1` scores releases, i.e. exactly
    :math:`\mu`-GDP with :math:`\mu^2 = T/z_x^2 + S/z_u^2`; the accountant (PLD by default)
    certifies the target :math:`(\varepsilon, \delta)`. With a warm-started label holder and
    :math:`T = 1` this is plain output perturbation of one x-update (a Newton-like step on the
    label holder's residual) with ridge weight :math:`\lambda_s + \tau`.
    :func:`sound_defaults` is the public rule (a function of epsilon and N) for T and the
    bounds.

    A protected label holder also releases its model this way and broadcasts
    :math:`\tilde y = \operatorname{clip}(y, \pm B_y) + N(0, \sigma_y^2 I_N)` with
    :math:`\Delta_y = 2 B_y` (for a loss with :math:`|\ell'| \le L`, :math:`y^{t+1} = \ell'(z)`
    and :math:`B_y = L` clips nothing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from dpfed._validation import DpfedInputError, check_positive


def lemma1_bound(
    *, d_m: int, rho: float, lam: float, c1: float, b1: float, n_parties: int
) -> float:
    r"""Lemma 1: :math:`C = \frac{3}{d_m \rho} (\lambda c_1 + (1 + M \rho) b_1)`.

    >>> round(lemma1_bound(d_m=10, rho=0.5, lam=2.0, c1=1.0, b1=4.0, n_parties=2), 6)
    3.6
    """
    return 3.0 / (d_m * rho) * (lam * c1 + (1.0 + n_parties * rho) * b1)


@dataclass(frozen=True)
class EigenvaluePremise:
    r"""Lemma 1's eigenvalue premise on one party's block: :math:`\lambda_{\min}(D_m^\top
    D_m) \ge d_m`.

    The proof of Lemma 1 bounds :math:`\|(D_m^\top D_m)^{-1}\|` by :math:`1/d_m`, i.e. it
    assumes :math:`\lambda_{\min}(D_m^\top D_m) \ge d_m`. That is a property of the data, not
    something a mechanism can enforce. The shapes alone rule it out in two cases: with rows of
    l2 norm at most 1 (Assumption 1.3, enforced), :math:`\operatorname{tr}(D_m^\top D_m) =
    \sum_i \|d_i\|^2 \le N`, so

    .. math::

        \lambda_{\min}(D_m^\top D_m) \le \frac{N}{d_m} < d_m
        \quad\text{whenever}\quad d_m^2 > N,

    and :math:`D_m^\top D_m` (rank at most :math:`N`) is singular whenever :math:`d_m > N`.

    Parameters
    ----------
    n_samples : int
        :math:`N`, rows of the block.
    n_features : int
        :math:`d_m`, columns of the block.
    min_eigenvalue : float or None
        :math:`\lambda_{\min}(D_m^\top D_m)` of the prepared (row-normalised) block; None when
        only the shapes are known (a party's spectrum is a fact about its private rows).
    """

    n_samples: int
    n_features: int
    min_eigenvalue: float | None = None

    @property
    def excluded_by_shape(self) -> bool:
        """Whether the shapes alone prove the premise false (:math:`d_m^2 > N`)."""
        return self.n_features * self.n_features > self.n_samples

    @property
    def holds(self) -> bool | None:
        """True or False when decided (by the shapes or the spectrum), None otherwise."""
        if self.excluded_by_shape:
            return False
        if self.min_eigenvalue is None:
            return None
        return self.min_eigenvalue >= self.n_features

    def reason(self, party: str) -> str | None:
        """Why the premise fails or is unchecked for ``party``; None when it holds."""
        n, d = self.n_samples, self.n_features
        need = (
            f"{party}: Lemma 1 assumes ||(D_m^T D_m)^-1|| <= 1/d_m, i.e. lambda_min(D_m^T D_m) "
            f">= d_m = {d}"
        )
        if d > n:
            return f"{need}; with d_m = {d} > N = {n} rows, D_m^T D_m is singular (lambda_min = 0)."
        if self.excluded_by_shape:
            return (
                f"{need}; with unit-norm rows trace(D_m^T D_m) <= N = {n}, so lambda_min <= "
                f"N/d_m = {n / d:.4g} < d_m (d_m^2 = {d * d} > N)."
            )
        if self.min_eigenvalue is None:
            return (
                f"{need}; the shapes (d_m^2 = {d * d} <= N = {n}) do not rule it out, and the "
                f"spectrum is a fact about {party}'s private rows, which {party} checks and keeps "
                "to itself: not checked across parties."
            )
        if self.min_eigenvalue < d:
            return f"{need}; found lambda_min = {self.min_eigenvalue:.4g} < {d}."
        return None


def paper_epsilon_reasons(b1: float | None, premises: Mapping[str, EigenvaluePremise]) -> list[str]:
    r"""Why the paper mechanism's Theorem 1 / Corollary 1 figure is not a guarantee.

    Always: Lemma 1 bounds the noisy models :math:`\|\tilde x_k\| \le b_1`, which unbounded
    Gaussian noise breaks with positive probability; and the scores :math:`D_m \tilde x` lie in
    the column space of :math:`D_m`, which a replaced row moves (an audit tells the two data
    sets apart on every run when :math:`d_m < N`). Then, per party, the eigenvalue premise
    (:class:`EigenvaluePremise`) where it fails or is unchecked.

    Parameters
    ----------
    b1 : float or None
        The radius :math:`b_1` (None: not known here).
    premises : mapping of str to EigenvaluePremise
        Per party, what is known of its eigenvalue premise.

    Returns
    -------
    list of str
        The unbounded-noise reason first, then one line per party whose premise fails or is
        unchecked (none for a party whose premise holds).
    """
    radius = "b1" if b1 is None else f"b1 = {b1:.4g}"
    reasons = [
        f"Lemma 1 bounds the sensitivity assuming the released models x~_k = x_k + xi_k stay in "
        f"the l2 ball of radius {radius} (Assumption 1.1); xi_k is unbounded Gaussian noise, "
        "so no run can enforce it. And the noise lies in the row space of the block: the "
        "released scores D_m x~ stay in the column space of D_m, so where a block has fewer "
        "columns than rows, replacing one row changes that space and the label holder sees "
        "it on every run, whatever sigma (dpfed audit --mechanism vertical-paper)."
    ]
    for party, premise in premises.items():
        reason = premise.reason(party)
        if reason is not None:
            reasons.append(reason)
    return reasons


def theorem1_sigma(*, l2_bound: float, epsilon: float, delta: float) -> float:
    r"""Theorem 1: :math:`\sigma = \sqrt{2 \ln(1.25/\delta)}\, C / \varepsilon`."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) * l2_bound / epsilon


def theorem1_epsilon(*, l2_bound: float, sigma: float, delta: float) -> float:
    r"""Theorem 1 read backwards: the per-iteration :math:`\varepsilon` of noise ``sigma``."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) * l2_bound / sigma


def local_model_strong_convexity(
    *, ridge: float, weak_convexity: float, n_samples: int, row_norm: float
) -> float:
    r"""The strong convexity of a protected label holder's local objective, for every data set.

    The objective :math:`F(x) = \sum_{i=1}^N \ell(\langle d_i, x\rangle; y_i) +
    \frac{\mu}{2}\|x\|^2` has Hessian :math:`\sum_i \ell''(\cdot)\, d_i d_i^\top + \mu I`.
    A loss with :math:`\ell'' \ge -w` (``weak_convexity`` :math:`w`; 0 for a convex loss)
    and rows of norm at most :math:`R` give :math:`\sum_i \ell'' d_i d_i^\top \succeq -w N
    R^2 I`, so :math:`F` is :math:`(\mu - wNR^2)`-strongly convex on every data set with
    :math:`N` rows: a public bound (the data's own curvature would be a fact about the rows).
    The sensitivity of the minimiser (:meth:`SoundMechanism.local_model_release
    <dpfed.protocols.vertical.mechanisms.SoundMechanism.local_model_release>`) needs it
    positive.

    Parameters
    ----------
    ridge : float
        :math:`\mu`, the ridge of the summed form (``N lam`` times the regulariser's modulus
        plus the prox weight :math:`\tau`).
    weak_convexity : float
        :math:`w = \max(0, -\inf \ell'')` of the loss.
    n_samples : int
        :math:`N`.
    row_norm : float
        :math:`R`, the rows' clip.

    Returns
    -------
    float
        :math:`\mu - wNR^2 > 0`.

    Raises
    ------
    DpfedInputError
        If it is not positive: the minimisers of two neighbouring non-convex objectives can be
        arbitrarily far apart, so no sensitivity holds.
    """
    floor = weak_convexity * n_samples * row_norm**2
    modulus = ridge - floor
    if not modulus > 0:
        raise DpfedInputError(
            "a protected label holder releases its local model with a sensitivity that needs "
            "a strongly convex objective. The loss curves down by up to "
            f"{weak_convexity:.4g} per row, so over N = {n_samples} rows of norm {row_norm:g} "
            f"the losses can curve down by {floor:.4g}, and the ridge N*lam + prox_weight = "
            f"{ridge:.4g} does not exceed it. Use a convex loss (logistic, smoothed_hinge) or "
            f"a ridge above {floor:.4g} (lam or bounds.prox_weight)."
        )
    return modulus


@dataclass(frozen=True)
class SoundBounds:
    r"""The enforced bounds of the ``sound`` mechanism.

    Parameters
    ----------
    row_norm : float
        :math:`R`, rows of every protected block are clipped to this l2 norm.
    model_radius : float
        :math:`B_x`, the local model is constrained to this l2 ball.
    target_clip : float
        :math:`B_c`, entrywise clip of the x-update target.
    score_clip : float
        :math:`B_u`, entrywise clip of the released scores :math:`D \tilde x`.
    prox_weight : float
        :math:`\tau`, weight of the proximal term centred at the previous released model.
    dual_clip : float
        :math:`B_y`, entrywise clip of the broadcast dual (protected label holder only).
    """

    row_norm: float = 1.0
    model_radius: float = 10.0
    target_clip: float = 4.0
    score_clip: float = 2.0
    prox_weight: float = 0.0
    dual_clip: float = 1.0

    def __post_init__(self) -> None:
        for name in ("row_norm", "model_radius", "target_clip", "score_clip", "dual_clip"):
            check_positive(name, getattr(self, name))
        check_positive("prox_weight", self.prox_weight, allow_zero=True)

    def model_sensitivity(self, *, rho: float, strong_convexity: float) -> float:
        r""":math:`\Delta_x = 2 \rho R (R B_x + B_c) / \mu` for :math:`\mu` = ``strong_convexity``.

        The minimisers :math:`x, x'` of two :math:`\mu`-strongly convex objectives over one
        convex set that differ by :math:`g` satisfy :math:`\mu \|x - x'\| \le \|\nabla g(x)\|`;
        here :math:`g = \tfrac\rho2[(\langle d', x\rangle - c_i)^2 - (\langle d, x\rangle -
        c_i)^2]` with :math:`\|d\|, \|d'\| \le R`, :math:`\|x\| \le B_x`, :math:`|c_i| \le B_c`.
        """
        if not strong_convexity > 0:
            raise DpfedInputError(
                "the sound mechanism needs a strongly convex x-update (an L2 or elastic-net "
                f"term with lam > 0, or prox_weight > 0). Found modulus {strong_convexity}."
            )
        r = self.row_norm
        return 2.0 * rho * r * (r * self.model_radius + self.target_clip) / strong_convexity

    @property
    def message_sensitivity(self) -> float:
        r""":math:`\Delta_u = 2 \min(B_u, R B_x)`: one row moves one clipped score."""
        return 2.0 * min(self.score_clip, self.row_norm * self.model_radius)

    @property
    def dual_sensitivity(self) -> float:
        r""":math:`\Delta_y = 2 B_y`: one label or row moves one clipped dual entry."""
        return 2.0 * self.dual_clip


def split_noise_multiplier(noise_multiplier: float, model_fraction: float) -> tuple[float, float]:
    r"""Split a per-round Gaussian budget between two releases.

    A round that releases two Gaussian mechanisms with multipliers :math:`z_1, z_2` is,
    exactly, one Gaussian mechanism with :math:`z^{-2} = z_1^{-2} + z_2^{-2}` (Gaussian
    differential privacy composes by adding :math:`\mu^2`). Giving the first release the
    fraction ``model_fraction`` of :math:`z^{-2}`:

    .. math::

        z_1 = z / \sqrt{f}, \qquad z_2 = z / \sqrt{1 - f}.
    """
    if not 0.0 < model_fraction < 1.0:
        raise DpfedInputError(
            f"model_fraction must be in the open interval (0, 1). Found {model_fraction}."
        )
    return (
        noise_multiplier / math.sqrt(model_fraction),
        noise_multiplier / math.sqrt(1.0 - model_fraction),
    )


@dataclass(frozen=True)
class SoundDefaults:
    """A public rule's choice for the sound mechanism: rounds, bounds and budget split."""

    iterations: int
    bounds: SoundBounds
    model_fraction: float


def sound_defaults(
    epsilon: float | None,
    n_samples: int,
    *,
    rho: float = 0.25,
    loss_slope: float = 1.0,
    protect_label_holder: bool = False,
) -> SoundDefaults:
    r"""Rounds, bounds and budget split of the sound mechanism as a public rule.

    A function of the public target ``epsilon`` and row count ``n_samples`` only (never of
    the data), tuned once on a9a (train split; rows are one-hot, so every block has rows of
    norm :math:`\sqrt{\#\text{groups}}`, clipped here to :math:`R = 1`, a common rescaling).

    * :math:`R = 1`, :math:`B_c = L/\rho` (the target :math:`-y/\rho` of a loss with
      :math:`|\ell'| \le L` then clips nothing at the start of the protocol),
    * prox weight :math:`\tau = 0.003 N` (:math:`0.001 N` for :math:`1.5 \le \varepsilon < 3`):
      the strong convexity that sets :math:`\Delta_x`; with the label holder warm-started, the
      first round's prox centre is 0, so :math:`\tau` is then a ridge on the passive party,
    * rounds :math:`T`: 1 below :math:`\varepsilon = 3` (one model release, no scores:
      output perturbation of one Newton-like step on the label holder's residual), 2 up to 6,
      3 up to 12, 5 up to 24, 8 above; :math:`B_x = 2` for :math:`T = 1` and 4 otherwise;
      :math:`B_u = 0.5` (1 from :math:`\varepsilon \ge 24`),
    * half of the budget (in :math:`\mu^2` of Gaussian DP) on the models.

    With ``protect_label_holder`` the label holder releases its regularised local model and
    one noisy dual in round 0 and keeps its block: one round (the passive parties' fit of what
    it leaves unexplained) at every epsilon, since more rounds split the budget into noisier
    duals (measured on a9a: epsilon 8 with 2 and 3 rounds is 0.9 and 1.5 points of accuracy
    below one round); :math:`\tau` (here also the local model's ridge) falls with epsilon:
    :math:`0.003 N` below 1.5, :math:`0.001 N` below 3, :math:`0.0003 N` above,
    :math:`B_x = 4` from epsilon 3, and the dual is clipped to :math:`B_y = L/2` (the dual
    :math:`\ell'(z)` of a row its model classifies correctly is below :math:`L/2`; halving
    :math:`\Delta_y` halves the noise of the only release that carries the labels).

    ``epsilon=None`` (a fixed noise multiplier instead of a target) gives the
    :math:`\varepsilon = 8` setting.
    """
    check_positive("n_samples", n_samples)
    eps = 8.0 if epsilon is None else float(epsilon)
    check_positive("epsilon", eps)
    if eps < 3.0:
        iterations, radius, tau_per_row = 1, 2.0, (0.003 if eps < 1.5 else 0.001)
    elif protect_label_holder:
        iterations, radius, tau_per_row = 1, 4.0, 0.0003
    else:
        iterations = 2 if eps < 6.0 else 3 if eps < 12.0 else 5 if eps < 24.0 else 8
        radius, tau_per_row = 4.0, 0.003
    bounds = SoundBounds(
        row_norm=1.0,
        model_radius=radius,
        target_clip=loss_slope / rho,
        score_clip=1.0 if eps >= 24.0 else 0.5,
        prox_weight=tau_per_row * n_samples,
        dual_clip=loss_slope / 2.0 if protect_label_holder else loss_slope,
    )
    return SoundDefaults(iterations=iterations, bounds=bounds, model_fraction=0.5)
