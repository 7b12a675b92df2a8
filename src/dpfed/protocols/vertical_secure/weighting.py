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
:math:`C_3 = 1/(6\sqrt3) \ge |\ell'''|` and the per-row remainder coefficients :math:`u, w
\in [0, 1]` of :func:`~dpfed.protocols.vertical.weighting.logistic_remainder_coefficients`
at :math:`a` for steps of at most :math:`PV` (:math:`P` passive parties),

.. math::

    \frac1N \sum_i \ell(P_{\beta,i}) \le \frac1N \sum_i \ell(a_i) + \beta g
    + \frac{\beta^2}{2} H + \frac{\beta^3}{6} C_3 K,
    \quad g = \tfrac1N \langle r, v\rangle,\ H = \tfrac1N \langle c, v^2\rangle,\
    K = \tfrac1N \textstyle\sum_i u_i (v_i^+)^3 + w_i (v_i^-)^3,

and :math:`\beta` minimises the right-hand side, so the chosen model's training loss is below
the label holder's own whenever the bounds hold (each with probability about 0.977 at two
standard deviations of its public noise). It is 0 when the passive scores do not help.

**Under encryption.** The label holder sends :math:`\mathrm{Enc}_L(r)`,
:math:`\mathrm{Enc}_L(c)` and :math:`\mathrm{Enc}_L([u; w])` (N-vectors and a 2N-vector
under its own key, never in the clear); the passive party computes
:math:`\mathrm{Enc}_L(g/s_g + \eta_g)`, :math:`\mathrm{Enc}_L(H/s_H + \eta_H)` and
:math:`\mathrm{Enc}_L(K/s_K + \eta_K)` (plaintext products and slot sums; :math:`K` as the
product of :math:`[u; w]` with :math:`[(v^+)^3; (v^-)^3]`), where :math:`s_k` is statistic
:math:`k`'s scale (:class:`ScoreStatisticsRelease`) and the :math:`\eta` are Gaussian draws
of its own generator (:meth:`ScoreStatisticsRelease.noise`: ``rng.normal`` inside the
ciphertexts, as the evaluator's noise of a round). The label holder decrypts three numbers
and learns the three noisy statistics only.

**Privacy.** One row of the passive party moves :math:`v_i` within :math:`[-V, V]`; with
:math:`|r_i| \le 1` and :math:`0 \le c_i \le 1/4`, the statistics move by at most
:math:`2V/N`, :math:`V^2/(4N)` and, with :math:`0 \le u_i, w_i \le 1`, :math:`V^3/N`.
Scaled by :math:`s_k = \Delta_k/\sqrt{f_k}`
(:data:`~dpfed.protocols.vertical.weighting.STATISTICS_FRACTIONS`) the vector's l2
sensitivity is 1, and its Gaussian noise of multiplier :math:`z` (the rounds' own) makes it one
more Gaussian release of the passive party's rows: :math:`T + 2` in all. The label holder's
:math:`r`, :math:`c`, :math:`u` and :math:`w` depend on its own data only; a
label holder that sent larger values (not semi-honest) would raise the sensitivity, which the
passive party cannot check under encryption (docs/privacy.md, the threat model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

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
    "encrypted_request",
    "encrypted_statistics",
    "plain_statistics",
    "split_request",
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
        r"""The three normalised noise draws, shape ``(3,)``, of deviation
        :attr:`noise_multiplier`, by ``rng.normal``: they are added inside the ciphertexts, to
        values that cannot be rounded there (a lattice noise on an unrounded value would reveal
        the value modulo the grid step), as the evaluator's noise of a round."""
        return rng.normal(0.0, self.release.sigma, 3)

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


def weighting_request(own_scores: np.ndarray, y01: np.ndarray, reach: float) -> WeightingRequest:
    r"""The label holder's :math:`r = \ell'(a)`, :math:`c = \ell''(a)` and remainder
    coefficients :math:`u, w` (steps of at most ``reach``, :math:`PV`) at its own scores
    ``a`` (shape ``(N,)``), labels in {0, 1}."""
    labels = np.where(np.asarray(y01) > 0, 1.0, -1.0)
    a = np.asarray(own_scores, dtype=np.float64)
    return WeightingRequest.at(get_loss("logistic"), a, labels, np.zeros_like(a), reach)


def encrypted_request(keys: ckks.KeyHolder, request: WeightingRequest) -> list[bytes]:
    r"""The label holder's serialised :math:`\mathrm{Enc}_L(r)`, :math:`\mathrm{Enc}_L(c)`
    and :math:`\mathrm{Enc}_L([u; w])`, in that order (:func:`split_request` cuts them
    apart)."""
    assert request.rising is not None and request.falling is not None
    coefficients = np.concatenate([request.rising, request.falling])
    return (
        keys.encrypt(request.gradient)
        + keys.encrypt(request.curvature)
        + keys.encrypt(coefficients)
    )


def split_request(items: list[Any], n_samples: int, slots: int) -> list[list[Any]]:
    """:func:`encrypted_request`'s ciphertexts as its three vectors' chunks, or a
    :class:`~dpfed._validation.DpfedInputError` naming the count expected."""
    one, two = ckks.chunk_count(n_samples, slots), ckks.chunk_count(2 * n_samples, slots)
    if len(items) != 2 * one + two:
        raise DpfedInputError(
            f"the weighting request of {n_samples} rows holds {2 * one + two} ciphertexts; "
            f"found {len(items)}."
        )
    return [items[:one], items[one : 2 * one], items[2 * one :]]


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
    return cast(np.ndarray, release.normalised(clipped, request) + noise)


def encrypted_statistics(
    release: ScoreStatisticsRelease,
    public: ckks.PublicContext,
    encrypted_request: list[list[bytes]],
    scores: np.ndarray,
    noise: np.ndarray,
) -> list[bytes]:
    r"""The passive party's side: :math:`\mathrm{Enc}_L(g/s_g + \eta_g)`,
    :math:`\mathrm{Enc}_L(H/s_H + \eta_H)` and :math:`\mathrm{Enc}_L(K/s_K + \eta_K)`.

    Parameters
    ----------
    release : ScoreStatisticsRelease
    public : ckks.PublicContext
        The label holder's.
    encrypted_request : three lists of ciphertexts
        The chunks of :math:`\mathrm{Enc}_L(r)`, :math:`\mathrm{Enc}_L(c)` and
        :math:`\mathrm{Enc}_L([u; w])` (:func:`split_request`).
    scores : numpy.ndarray, shape (N,)
        Its final block's scores (clipped here to :math:`\pm V`).
    noise : numpy.ndarray, shape (3,)
        :meth:`ScoreStatisticsRelease.noise`.

    Returns
    -------
    list of three serialised ciphertexts
        Each holds its statistic in slot 0 (:meth:`dpfed.secure.ckks.KeyHolder.decrypt_sums`).
    """
    if len(encrypted_request) != 3:
        raise DpfedInputError(
            f"the request holds Enc(r), Enc(c) and Enc([u; w]); found {len(encrypted_request)} "
            "vectors."
        )
    v = np.clip(np.asarray(scores, dtype=np.float64), -release.score_bound, release.score_bound)
    n = release.n_samples
    scales = release.scales
    cubes = np.concatenate([np.maximum(v, 0.0) ** 3, np.maximum(-v, 0.0) ** 3])
    out = []
    for k, (chunks, column) in enumerate(zip(encrypted_request, (v, v * v, cubes), strict=True)):
        product = ckks.transposed_product(
            public.load(chunks), (column / (n * scales[k]))[:, None], offset=noise[k : k + 1]
        )
        out.extend(product)
    return out


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
