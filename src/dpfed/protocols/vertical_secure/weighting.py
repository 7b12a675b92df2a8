r"""Never worse than the label holder alone: the weight of the passive party's scores in the
secure mode, chosen from statistics computed under encryption.

Whenever the label holder may keep an exact model of its own (``protect="passive"``, whose
label holder's data are not protected, or ``"parties"``, where it fits the model only after
its last release and keeps it and the weight to itself), it fits it on its own rows and
labels: :math:`a = X_0 w_{own}` (scikit-learn's ``LogisticRegression``, C = 1, with an
intercept; not projected, since no round uses it). The secure rounds give the passive party a
block :math:`w_1` trained with the label holder's; its scores :math:`v =
\operatorname{clip}(X_1 w_1, \pm V)` (:math:`V` the public ``passive_score_bound``) are what
it adds. The released model predicts

.. math::

    P_\beta = a + \beta v, \qquad \beta \in [0, 1],

the label holder's own block and the passive block scaled by :math:`\beta` (its shares of a
prediction clipped to :math:`\pm V`). :math:`\beta` is chosen as in
:mod:`dpfed.protocols.vertical.weighting` (a Taylor bound with a third-derivative remainder,
each statistic at its upper confidence bound), with no change of the label holder's own
scores: by Taylor's theorem, with :math:`r = \ell'(a)`, :math:`c = \ell''(a)`,
:math:`C_3 = 1/(6\sqrt3) \ge |\ell'''|`,

.. math::

    \frac1N \sum_i \ell(P_{\beta,i}) \le \frac1N \sum_i \ell(a_i) + \beta g
    + \frac{\beta^2}{2} H + \frac{\beta^3}{6} C_3 K,
    \quad g = \tfrac1N \langle r, v\rangle,\ H = \tfrac1N \langle c, v^2\rangle,\
    K = \tfrac1N \textstyle\sum_i |v_i|^3,

and :math:`\beta` minimises the right-hand side, so the chosen model's training loss is below
the label holder's own whenever the bounds hold (each with probability about 0.977 at two
standard deviations of its public noise). It is 0 when the passive scores do not help.

**Under encryption.** The label holder sends :math:`\mathrm{Enc}_L(r)` and
:math:`\mathrm{Enc}_L(c)` (two N-vectors under its own key, never in the clear); the passive
party computes :math:`\mathrm{Enc}_L(g/s_g + \eta_g)` and :math:`\mathrm{Enc}_L(H/s_H +
\eta_H)` (plaintext products and slot sums) and :math:`K/s_K + \eta_K` in the clear (then
encrypted, so that the three travel alike), where
:math:`s_k` is statistic :math:`k`'s scale (:class:`ScoreStatisticsRelease`) and the
:math:`\eta` are Gaussian draws of its own generator (:meth:`ScoreStatisticsRelease.noise`:
``rng.normal`` inside the ciphertexts, as the evaluator's noise of a round; an exact discrete
Gaussian on the grid for the one rounded in the clear). The label holder decrypts two
numbers (and a third, encrypted by the passive party) and learns the three noisy
statistics only.

**Privacy.** One row of the passive party moves :math:`v_i` within :math:`[-V, V]`; with
:math:`|r_i| \le 1` and :math:`0 \le c_i \le 1/4`, the statistics move by at most
:math:`2V/N`, :math:`V^2/(4N)` and :math:`V^3/N`. Scaled by :math:`s_k = \Delta_k/\sqrt{f_k}`
(:data:`~dpfed.protocols.vertical.weighting.STATISTICS_FRACTIONS`) the vector's l2
sensitivity is 1, and its Gaussian noise of multiplier :math:`z` (the rounds' own) makes it one
more Gaussian release of the passive party's rows: :math:`T + 2` in all. The label holder's
:math:`r` and :math:`c` depend on its own data only, which this mode does not protect; a
label holder that sent larger values (not semi-honest) would raise the sensitivity, which the
passive party cannot check under encryption (docs/privacy.md, the threat model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.losses import get_loss
from dpfed.protocols.vertical.weighting import (
    PassiveWeight,
    StatisticsRelease,
    WeightingRequest,
    choose_passive_weight,
    third_derivative_bound,
)
from dpfed.secure import ckks

__all__ = [
    "ScoreStatisticsRelease",
    "WeightedPassive",
    "choose_weight",
    "encrypted_statistics",
    "plain_statistics",
    "weighting_request",
]

#: The logistic loss's slope and curvature bounds: :math:`|\ell'| \le 1`,
#: :math:`0 \le \ell'' \le 1/4`.
LIPSCHITZ, SMOOTHNESS = 1.0, 0.25


@dataclass(frozen=True)
class ScoreStatisticsRelease(StatisticsRelease):
    r""":class:`~dpfed.protocols.vertical.weighting.StatisticsRelease` of a party's own
    clipped scores alone (the label holder's change is not added to them): one row moves
    :math:`(g, H, K)` by at most :math:`(2LV, SV^2, V^3)/N`."""

    @property
    def sensitivities(self) -> np.ndarray:
        v, n = self.score_bound, self.n_samples
        return np.array([2.0 * self.lipschitz * v, self.smoothness * v * v, v**3]) / n

    def noise(self, rng: np.random.Generator) -> np.ndarray:
        r"""The three normalised noise draws, shape ``(3,)``, each of deviation at least
        :attr:`noise_multiplier`: the first two (added inside the ciphertexts, to values
        that cannot be rounded there) by ``rng.normal``, since a lattice noise on an unrounded
        value would reveal the value modulo the grid step; the third (added in the clear to
        the value rounded to the grid) an exact discrete Gaussian on the grid
        (:class:`~dpfed.privacy.grid_release.GridGaussianRelease`)."""
        grid = self.release.grid(3)
        inside = rng.normal(0.0, self.release.sigma, 2)
        return np.append(inside, grid.grid_step * float(grid.noise(rng, 1)[0]))

    def normalised(self, scores: np.ndarray, request: WeightingRequest) -> np.ndarray:
        """The exact normalised statistics of the clipped ``scores`` (shape ``(N,)``)."""
        return self.statistics(scores, request.without_change())


@dataclass(frozen=True)
class WeightedPassive:
    """The weight the label holder chose and the scores' clip (for the model and result).

    Attributes
    ----------
    weight : PassiveWeight
    score_bound : float
        :math:`V`: the passive party's shares are clipped to :math:`\\pm V`.
    """

    weight: PassiveWeight
    score_bound: float

    @property
    def beta(self) -> float:
        return self.weight.weight

    def share(self, scores: np.ndarray) -> np.ndarray:
        r"""The passive party's share of a prediction: :math:`\beta\,\operatorname{clip}(v,
        \pm V)`."""
        return cast(np.ndarray, self.beta * np.clip(scores, -self.score_bound, self.score_bound))

    def as_dict(self) -> dict[str, float]:
        return {**self.weight.as_dict(), "passive_score_bound": self.score_bound}

    @classmethod
    def from_dict(cls, data: dict[str, float]) -> WeightedPassive:
        """The inverse of :meth:`as_dict`."""
        weight = PassiveWeight(
            float(data["weight"]),
            float(data["gradient_bound"]),
            float(data["curvature_bound"]),
            float(data["cubic_bound"]),
            float(data["predicted_change_bound"]),
        )
        return cls(weight, float(data["passive_score_bound"]))


def weighting_request(own_scores: np.ndarray, y01: np.ndarray) -> WeightingRequest:
    r"""The label holder's :math:`r = \ell'(a)` and :math:`c = \ell''(a)` at its own scores
    ``a`` (shape ``(N,)``), labels in {0, 1}."""
    labels = np.where(np.asarray(y01) > 0, 1.0, -1.0)
    a = np.asarray(own_scores, dtype=np.float64)
    return WeightingRequest.at(get_loss("logistic"), a, labels, np.zeros_like(a))


def plain_statistics(
    release: ScoreStatisticsRelease,
    scores: np.ndarray,
    request: WeightingRequest,
    noise: np.ndarray,
) -> np.ndarray:
    """The released normalised statistics computed in the clear (the plaintext backend's
    simulation: the same numbers the encrypted path gives, up to CKKS rounding), shape
    ``(3,)``."""
    clipped = np.clip(scores, -release.score_bound, release.score_bound)
    grid = release.release.grid(3)
    exact = release.normalised(clipped, request)
    exact[2] = grid.grid_step * np.rint(exact[2] / grid.grid_step)
    return cast(np.ndarray, exact + noise)


def encrypted_statistics(
    release: ScoreStatisticsRelease,
    public: ckks.PublicContext,
    encrypted_request: list[list[bytes]],
    scores: np.ndarray,
    noise: np.ndarray,
) -> list[bytes]:
    r"""The passive party's side: :math:`\mathrm{Enc}_L(g/s_g + \eta_g)`,
    :math:`\mathrm{Enc}_L(H/s_H + \eta_H)` and :math:`\mathrm{Enc}_L(K/s_K + \eta_K)`, the
    last computed in the clear on the grid, then encrypted (so the three travel alike).

    Parameters
    ----------
    release : ScoreStatisticsRelease
    public : ckks.PublicContext
        The label holder's.
    encrypted_request : two lists of bytes
        The chunks of :math:`\mathrm{Enc}_L(r)` and of :math:`\mathrm{Enc}_L(c)`.
    scores : numpy.ndarray, shape (N,)
        Its final block's scores (clipped here to :math:`\pm V`).
    noise : numpy.ndarray, shape (3,)
        :meth:`ScoreStatisticsRelease.noise`.

    Returns
    -------
    list of three serialised ciphertexts
        Each holds its statistic in slot 0 (:meth:`dpfed.secure.ckks.KeyHolder.decrypt_sums`).
    """
    if len(encrypted_request) != 2:
        raise DpfedInputError(
            f"the request holds Enc(r) and Enc(c); found {len(encrypted_request)} vectors."
        )
    v = np.clip(np.asarray(scores, dtype=np.float64), -release.score_bound, release.score_bound)
    n = release.n_samples
    scales = release.scales
    out = []
    for k, (chunks, column) in enumerate(zip(encrypted_request, (v, v * v), strict=True)):
        product = ckks.transposed_product(
            public.load(chunks), (column / (n * scales[k]))[:, None], offset=noise[k : k + 1]
        )
        out.extend(product)
    grid = release.release.grid(3)
    cubic = float(np.sum(np.abs(v) ** 3)) / (n * scales[2])
    released = grid.grid_step * np.rint(cubic / grid.grid_step) + noise[2]
    return out + public.encrypt(np.array([released]))


def choose_weight(
    release: ScoreStatisticsRelease,
    request: WeightingRequest,
    released: np.ndarray | list[np.ndarray],
) -> WeightedPassive:
    """The label holder's choice of :math:`\\beta` from the three released statistics of
    each passive party (one array of shape ``(3,)``, or a list of them), the totals bounded
    by the parts (Minkowski's inequality, :func:`~dpfed.protocols.vertical.weighting.
    choose_passive_weight`)."""
    c3 = third_derivative_bound(get_loss("logistic"))
    assert c3 is not None
    parts = released if isinstance(released, list) else [released]
    upper = [release.upper(np.asarray(part, dtype=np.float64)) for part in parts]
    weight = choose_passive_weight(
        own_change=np.zeros(release.n_samples), request=request, upper_bounds=upper, c3=c3
    )
    return WeightedPassive(weight, release.score_bound)
