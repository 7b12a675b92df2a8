r"""Noise calibration and accounting of DP consensus ADMM (horizontal learning with a server).

Paper 002 (Li & Chi, "Distributed machine learning with differential privacy", 2020). ``n``
clients, client ``i`` holds ``m_i`` samples; local models :math:`w_i`, global model :math:`w`,
duals :math:`\gamma_i`. In round :math:`k` client :math:`i` solves

.. math::

    w_i^k = \arg\min_{w_i}\ \underbrace{\frac{1}{m_i}\sum_{j=1}^{m_i} \ell(x_{ij}, y_{ij}, w_i)
            + \frac{\lambda}{n} R(w_i) - \gamma_i^{k-1\,\top}(w_i - w^{k-1})
            + \frac{\rho}{2}\|w_i - w^{k-1}\|^2}_{\mathcal{L}_{\rho,i}}

and uploads :math:`\tilde w_i^k = w_i^k + N(0, \sigma_{i,k}^2 I)` (eq. 5); the server averages
(eq. 6) and the duals are updated from released quantities only.

Sensitivity (derivation; the paper states only the result)
----------------------------------------------------------
Let :math:`D_i, D_i'` differ in one record of client :math:`i` (replace-one adjacency). The two
local objectives differ by :math:`g(w) = \frac{1}{m_i}(\ell(x', y', w) - \ell(x, y, w))`, with
:math:`\|\nabla g\| \le 2 c_1 / m_i` when :math:`\|\nabla_w \ell\| \le c_1` everywhere. If
:math:`\ell` is convex and :math:`R` is :math:`\mu`-strongly convex, :math:`\mathcal{L}_{\rho,i}`
is :math:`(\lambda\mu/n + \rho)`-strongly convex, and for the minimisers :math:`w, w'` of two
:math:`\kappa`-strongly convex functions differing by :math:`g`,
:math:`\kappa\|w - w'\| \le \|\nabla g(w')\|`. Hence

.. math::

    \Delta_2 = \frac{2 c_1}{(\lambda \mu / n + \rho)\, m_i}
    \;\overset{\mu = 1}{=}\; \frac{2 c_1}{(\lambda/n + \rho)\, m_i},

the paper's sensitivity (its formula has :math:`\mu = 1`, e.g. :math:`R = \tfrac12\|w\|^2`). The
classic Gaussian mechanism then gives the paper's per-round noise

.. math::

    \sigma_{i,k} = \frac{2 c_1 \sqrt{2 \ln(1.25/\delta)}}{(\lambda/n + \rho)\, m_i\, \varepsilon},

:math:`(\varepsilon, \delta)`-DP per round **for** :math:`\varepsilon \le 1` (the classic
theorem's hypothesis). :func:`consensus_sigma` refuses a larger :math:`\varepsilon`: there the
formula is no guarantee (at :math:`\delta = 10^{-5}` and :math:`\varepsilon = 20` the exact
epsilon of that noise is 25.4); :func:`calibrate_consensus` with ``"pld"`` or ``"rdp"`` sets
the noise for any target instead.

Assumptions and who must enforce them
-------------------------------------
* :math:`\|\nabla_w \ell\| \le c_1` for every record and every :math:`w`: for a margin loss
  with :math:`|\ell'| \le 1` (logistic) this is :math:`\|x\| \le c_1`; **the code must clip or
  normalise rows** (and use a loss with a bounded derivative).
* :math:`\ell` convex and :math:`R` :math:`\mu`-strongly convex (the paper says
  ":math:`\ell` L-smooth, :math:`R` :math:`\mu`-strongly convex"; smoothness is needed for its
  convergence proof, convexity of :math:`\ell` for the sensitivity): **the code must refuse
  other losses / regularisers** or pass the right ``mu``. A weakly convex loss
  (:math:`\nabla^2 \ell \succeq -wI`, e.g. the sigmoid with rows of norm 1) keeps the
  argument with :math:`\kappa = \lambda\mu/n + \rho - w`, which must be positive:
  :func:`consensus_sensitivity` takes :math:`w` and refuses :math:`\kappa \le 0`.
* the local problem is solved exactly (the sensitivity is that of the exact minimiser): an
  inexact solver adds its own error, :math:`\|w - w^\star\| \le \|\nabla \mathcal{L}(w)\| /
  \kappa`, which the code must keep negligible against :math:`\sigma` or add to
  :math:`\Delta_2`.
* the dual and server updates use released quantities only (they do), so rounds compose
  adaptively.

Accounting over :math:`T` rounds
--------------------------------
A round is one Gaussian release with noise multiplier
:math:`z = \sigma/\Delta_2 = \sqrt{2\ln(1.25/\delta_s)}/\varepsilon_s`. The paper's moments
accountant (eq. 7) has log moment :math:`\alpha(\tau) = T\tau(\tau+1)\varepsilon_s^2 /
(4\ln(1.25/\delta_s)) = T\tau(\tau+1)/(2z^2)`, which is exactly the log moment of :math:`T`
Gaussian releases with multiplier :math:`z` used by
:func:`dpfed.privacy.accounting.moments_accountant_epsilon`; this module reuses it, and the
numerical accountants (PLD, RDP) of :mod:`dpfed.privacy.accounting` for the same :math:`z`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.privacy.accountants import get_accountant
from dpfed.privacy.accounting import (
    calibrate_noise_multiplier,
    check_accountant,
    classic_gaussian_sigma,
    classic_range_message,
    gaussian_epsilon,
    gaussian_releases_epsilon,
    in_classic_range,
    moments_accountant_epsilon,
)
from dpfed.privacy.coupling import calibration_delta

__all__ = [
    "ConsensusCalibration",
    "calibrate_consensus",
    "consensus_epsilon",
    "consensus_moments_epsilon",
    "consensus_moments_minimiser",
    "consensus_noise_multiplier",
    "consensus_sensitivity",
    "consensus_sigma",
]


def consensus_sensitivity(
    *,
    c1: float,
    lam: float,
    n_clients: int,
    rho: float,
    m_i: int,
    mu: float = 1.0,
    weak_convexity: float = 0.0,
) -> float:
    r"""l2 sensitivity of client ``i``'s exact local minimiser (one record replaced).

    .. math::

        \Delta_2 = \frac{2 c_1}{(\lambda \mu / n + \rho - w)\, m_i}

    (the paper's :math:`2 c_1 / ((\lambda/n + \rho) m_i)` for the default :math:`\mu = 1` and
    a convex loss, :math:`w = 0`); see the module docstring for the derivation and the
    assumptions (:math:`\|\nabla \ell\| \le c_1`, a loss whose Hessian in :math:`w` is at
    least :math:`-w I`, :math:`\mu`-strongly convex :math:`R`, exact minimisation).

    Parameters
    ----------
    c1 : float
        Bound :math:`c_1 > 0` on the l2 norm of the gradient of the per-record loss.
    lam : float
        Regularisation weight :math:`\lambda \ge 0` of the global objective (eq. 1a).
    n_clients : int
        Number of clients :math:`n \ge 1`.
    rho : float
        ADMM penalty :math:`\rho > 0`.
    m_i : int
        Number of records :math:`m_i \ge 1` of client ``i``.
    mu : float, default 1.0
        Strong-convexity modulus of :math:`R` (1 for :math:`\tfrac12\|w\|^2`).
    weak_convexity : float, default 0.0
        :math:`w \ge 0` with :math:`\nabla^2_w \ell \succeq -w I` for every record: for a
        margin loss :math:`h(y x^\top w)` with :math:`h'' \ge -w_h` and rows of norm at most 1
        (clipped), :math:`w = w_h` (0 for a convex loss; :math:`1/(6\sqrt3)` for the sigmoid).

    Returns
    -------
    float
        :math:`\Delta_2`.

    Raises
    ------
    DpfedInputError
        If :math:`\lambda\mu/n + \rho \le w`: the local problem is then not strongly convex
        on every data set and its minimiser has no bounded sensitivity.

    Examples
    --------
    >>> consensus_sensitivity(c1=1.0, lam=0.5, n_clients=5, rho=0.9, m_i=100)
    0.02
    """
    c = check_positive("c1", c1)
    lm = check_positive("lam", lam, allow_zero=True)
    n = check_int("n_clients", n_clients, minimum=1)
    r = check_positive("rho", rho)
    m = check_int("m_i", m_i, minimum=1)
    u = check_positive("mu", mu, allow_zero=True)
    w = check_positive("weak_convexity", weak_convexity, allow_zero=True)
    modulus = lm * u / n + r - w
    if not modulus > 0:
        raise DpfedInputError(
            "the gaussian mechanism's sensitivity needs a strongly convex local problem: "
            f"lam*mu/n + rho = {lm * u / n + r:.4g} must exceed the loss's weak-convexity "
            f"modulus {w:.4g} (its curvature can be as low as -{w:.4g} per record). Raise rho "
            "or lam, or use a convex loss (logistic, smoothed_hinge)."
        )
    return 2.0 * c / (modulus * m)


def consensus_sigma(
    *,
    c1: float,
    lam: float,
    n_clients: int,
    rho: float,
    m_i: int,
    epsilon: float,
    delta: float,
    mu: float = 1.0,
    weak_convexity: float = 0.0,
) -> float:
    r"""The paper's per-round noise standard deviation :math:`\sigma_{i,k}`.

    .. math::

        \sigma_{i,k} = \frac{2 c_1 \sqrt{2 \ln(1.25/\delta)}}{(\lambda/n + \rho)\, m_i\,
        \varepsilon} = \frac{\sqrt{2\ln(1.25/\delta)}}{\varepsilon}\, \Delta_2 ,

    the classic Gaussian mechanism on :func:`consensus_sensitivity`. It certifies
    :math:`(\varepsilon, \delta)`-DP per round only for :math:`\varepsilon \le 1` (the classic
    theorem's hypothesis), so a larger ``epsilon`` is refused; :func:`calibrate_consensus` with
    ``"pld"`` or ``"rdp"`` calibrates the noise for any target.

    Parameters
    ----------
    c1, lam, n_clients, rho, m_i, mu, weak_convexity
        As in :func:`consensus_sensitivity`.
    epsilon : float
        Per-round :math:`\varepsilon \in (0, 1]`.
    delta : float
        Per-round :math:`\delta \in (0, 1)`.

    Returns
    -------
    float
        :math:`\sigma_{i,k}`.

    Raises
    ------
    DpfedInputError
        For bad arguments, or for ``epsilon > 1`` (the message names the proved range).
    """
    sens = consensus_sensitivity(
        c1=c1, lam=lam, n_clients=n_clients, rho=rho, m_i=m_i, mu=mu, weak_convexity=weak_convexity
    )
    eps = check_positive("epsilon", epsilon)
    d = check_open_unit("delta", delta)
    if not in_classic_range(eps):
        raise DpfedInputError(
            classic_range_message(
                "consensus_sigma uses",
                d,
                f"epsilon {eps:g}",
                unit="round",
                advice="Use calibrate_consensus with accountant 'pld' or 'rdp', which sets the "
                "noise for a total epsilon without this restriction.",
            )
        )
    return classic_gaussian_sigma(eps, d, sens)


def consensus_noise_multiplier(epsilon_step: float, delta_step: float) -> float:
    r"""Noise multiplier :math:`z = \sigma/\Delta_2 = \sqrt{2\ln(1.25/\delta_s)}/\varepsilon_s`.

    Every :math:`\varepsilon_s > 0` is accepted: this only names the noise by the paper's
    per-round parameters, and the accountants that read :math:`z` directly (``"pld"``,
    ``"rdp"``, ``"moments"``) hold for any :math:`z`. The per-round reading
    :math:`(\varepsilon_s, \delta_s)` itself is a guarantee only for :math:`\varepsilon_s \le 1`
    (:func:`consensus_sigma` refuses beyond).

    Parameters
    ----------
    epsilon_step : float
        Per-round :math:`\varepsilon_s > 0`.
    delta_step : float
        Per-round :math:`\delta_s \in (0, 1)`.

    Returns
    -------
    float
        :math:`z`.
    """
    e = check_positive("epsilon_step", epsilon_step)
    d = check_open_unit("delta_step", delta_step)
    return math.sqrt(2.0 * math.log(1.25 / d)) / e


def consensus_moments_minimiser(
    epsilon_step: float, delta_step: float, steps: int, delta: float
) -> tuple[float, float]:
    r"""The paper's moments-accountant total in closed form, with its minimising order.

    With :math:`A = T\varepsilon_s^2 / (4\ln(1.25/\delta_s))` (so :math:`\alpha(\tau) =
    A\tau(\tau+1)`) and :math:`L = \ln(1/\delta)`, the bound
    :math:`f(\tau) = (\alpha(\tau) + L)/\tau = A(\tau + 1) + L/\tau` is convex in
    :math:`\tau > 0` with minimiser :math:`\sqrt{L/A}`. Over the orders :math:`\tau \ge 1`
    searched by :func:`dpfed.privacy.accounting.moments_accountant_epsilon`:

    .. math::

        \tau^\star = \max\big(1, \sqrt{L/A}\big), \qquad
        \varepsilon = \begin{cases}
            A + 2\sqrt{A L} & \text{if } L \ge A \ (\tau^\star = \sqrt{L/A}),\\
            2A + L & \text{otherwise } (\tau^\star = 1).
        \end{cases}

    Parameters
    ----------
    epsilon_step : float
        Per-round :math:`\varepsilon_s > 0`.
    delta_step : float
        Per-round :math:`\delta_s \in (0, 1)` (it only enters through the noise multiplier).
    steps : int
        Rounds :math:`T \ge 1`.
    delta : float
        Total :math:`\delta \in (0, 1)`.

    Returns
    -------
    tuple of float
        ``(tau_star, epsilon)``.
    """
    z = consensus_noise_multiplier(epsilon_step, delta_step)
    t = check_int("steps", steps, minimum=1)
    big_l = math.log(1.0 / check_open_unit("delta", delta))
    a = t / (2.0 * z * z)
    if big_l >= a:
        return math.sqrt(big_l / a), a + 2.0 * math.sqrt(a * big_l)
    return 1.0, 2.0 * a + big_l


def consensus_moments_epsilon(
    epsilon_step: float, delta_step: float, steps: int, delta: float
) -> float:
    r"""Total epsilon of ``steps`` rounds by the paper's moments accountant (eq. 7).

    .. math::

        \alpha(\tau) = \frac{T\tau(\tau+1)\varepsilon_s^2}{4\ln(1.25/\delta_s)}, \qquad
        \varepsilon = \min_{\tau \ge 1} \frac{\alpha(\tau) + \ln(1/\delta)}{\tau}.

    This is :func:`dpfed.privacy.accounting.moments_accountant_epsilon` at the noise multiplier
    :math:`z = \sqrt{2\ln(1.25/\delta_s)}/\varepsilon_s` (its log moment is
    :math:`T\tau(\tau+1)/(2z^2)`, the same function), which is what is returned; it equals the
    closed form :func:`consensus_moments_minimiser`. The log moment of a Gaussian release is
    exact for every real :math:`\tau > 0`, and every :math:`\tau` gives a valid bound, so the
    restriction to :math:`\tau \ge 1` (kept for agreement with the accounting module) only
    costs tightness when :math:`\sqrt{L/A} < 1`.

    Parameters
    ----------
    epsilon_step : float
        Per-round :math:`\varepsilon_s > 0`.
    delta_step : float
        Per-round :math:`\delta_s \in (0, 1)`.
    steps : int
        Rounds :math:`T \ge 1`.
    delta : float
        Total :math:`\delta \in (0, 1)`.

    Returns
    -------
    float
        The total epsilon at total delta ``delta``.
    """
    z = consensus_noise_multiplier(epsilon_step, delta_step)
    return moments_accountant_epsilon(z, steps, delta)


def consensus_epsilon(
    epsilon_step: float,
    delta_step: float,
    steps: int,
    delta: float,
    accountant: str = "moments",
) -> float:
    r"""Total epsilon of ``steps`` rounds of the paper's per-round Gaussian noise.

    Every accountant is evaluated on the noise itself, i.e. on the noise multiplier
    :math:`z = \sqrt{2\ln(1.25/\delta_s)}/\varepsilon_s`, through
    :func:`dpfed.privacy.accounting.gaussian_epsilon`:

    ``"moments"``
        the paper's accountant (eq. 7), :func:`consensus_moments_epsilon`;
    ``"pld"``, ``"rdp"``
        dp-accounting's privacy-loss-distribution and Rényi accountants (tight / tighter);
    ``"basic"``
        :math:`T \sqrt{2\ln(1.25 T/\delta)}/z`, i.e. basic composition with the total delta
        split as :math:`\delta/T` per round. When ``delta == steps * delta_step`` this is
        exactly :math:`T\varepsilon_s`;
    ``"advanced"``
        advanced composition with :math:`\delta/(2T)` per round and :math:`\delta' = \delta/2`.

    ``"basic"`` and ``"advanced"`` read every round through the classic Gaussian theorem at
    their own per-round delta (:math:`\delta/T`, :math:`\delta/(2T)`), proved only for a
    per-round epsilon at most 1; outside that range they raise
    (:func:`dpfed.privacy.accounting.check_classic_range`).

    Parameters
    ----------
    epsilon_step : float
        Per-round :math:`\varepsilon_s > 0` of :func:`consensus_sigma`.
    delta_step : float
        Per-round :math:`\delta_s \in (0, 1)` of :func:`consensus_sigma`.
    steps : int
        Rounds :math:`T \ge 1`.
    delta : float
        Total :math:`\delta \in (0, 1)`.
    accountant : str, default "moments"
        One of ``"moments"``, ``"pld"``, ``"rdp"``, ``"basic"``, ``"advanced"``.

    Returns
    -------
    float
        The total epsilon.

    Raises
    ------
    DpfedInputError
        For bad arguments, or with ``"basic"``/``"advanced"`` outside the classic range.
    """
    z = consensus_noise_multiplier(epsilon_step, delta_step)
    acc = check_accountant(accountant)
    return gaussian_epsilon(z, steps, delta, accountant=acc)


@dataclass(frozen=True)
class ConsensusCalibration:
    r"""Per-round noise of DP consensus ADMM calibrated to a total :math:`(\varepsilon, \delta)`.

    Parameters
    ----------
    noise_multiplier : float
        :math:`z = \sigma_{i,k} / \Delta_2`, the same for every client and round; client ``i``
        uses :math:`\sigma_{i,k} = z\, \Delta_{2,i}` (:meth:`sigma`).
    epsilon_step, delta_step : float
        The same noise read as the paper's classic per-round guarantee:
        :math:`\varepsilon_s = \sqrt{2\ln(1.25/\delta_s)}/z` at :math:`\delta_s`
        (``delta / steps`` unless chosen). A proved per-round guarantee only when
        ``classic_valid``.
    epsilon : float
        The total the accountant certifies for ``steps`` rounds at ``delta`` (at most the
        target).
    delta : float
        Total delta.
    steps : int
        Rounds :math:`T`.
    accountant : str
        The accountant that certifies ``epsilon``.
    """

    noise_multiplier: float
    epsilon_step: float
    delta_step: float
    epsilon: float
    delta: float
    steps: int
    accountant: str

    @property
    def classic_valid(self) -> bool:
        """Whether the per-round reading is inside the classic theorem (``epsilon_step <= 1``,
        up to rounding), so that :func:`consensus_sigma` accepts it."""
        return in_classic_range(self.epsilon_step)

    def sigma(self, l2_sensitivity: float) -> float:
        r"""Noise standard deviation :math:`z\, \Delta_2` for a client's sensitivity."""
        return self.noise_multiplier * check_positive("l2_sensitivity", l2_sensitivity)


def calibrate_consensus(
    epsilon: float,
    delta: float,
    steps: int,
    *,
    accountant: str = "pld",
    delta_step: float | None = None,
    coordinates: int = 0,
) -> ConsensusCalibration:
    r"""Per-round noise multiplier for a target total :math:`(\varepsilon, \delta)` over T rounds.

    Every accountant calibrates through the registry
    (:func:`dpfed.privacy.accounting.calibrate_noise_multiplier`). ``"moments"`` inverts the
    paper's closed form exactly
    (:meth:`dpfed.privacy.accountants.MomentsAccountant.calibrate`):

    .. math::

        z = \sqrt{T} \big/ \big(\sqrt{2(L + \varepsilon)} - \sqrt{2L}\big)
        \quad (\varepsilon \le 3L), \qquad
        z = \sqrt{T / (\varepsilon - L)} \quad (\varepsilon > 3L), \qquad L = \ln(1/\delta);

    the others give the smallest :math:`z` whose epsilon is at most the target (``"basic"``
    and ``"advanced"`` refuse a target that would need a per-round epsilon above 1). The
    per-round reading
    :math:`(\varepsilon_s, \delta_s)` of the same noise is reported for the paper's formula
    :func:`consensus_sigma`, beside the certified total; it is a guarantee only where
    :attr:`ConsensusCalibration.classic_valid`.

    Parameters
    ----------
    epsilon : float
        Target total epsilon > 0.
    delta : float
        Total delta in (0, 1).
    steps : int
        Rounds :math:`T \ge 1`.
    accountant : str, default "pld"
        One of ``"pld"``, ``"rdp"``, ``"moments"``, ``"basic"``, ``"advanced"``.
    delta_step : float or None
        Per-round delta of the classic reading; ``delta / steps`` by default.
    coordinates : int, default 0
        Coordinates a client releases in all from the exact grid sampler (``steps`` times
        the model's length): their coupling's delta (:mod:`dpfed.privacy.coupling`) is set
        aside from ``delta`` before calibrating and included in the certified total (where
        it would take more than half of delta, RDP certifies instead). ``"rdp"`` and the
        ``"moments"`` closed form bound Rényi divergences, which hold for the discrete
        Gaussian as they are (Canonne, Kamath and Steinke 2020), so they charge none.

    Returns
    -------
    ConsensusCalibration
        The multiplier, its per-round reading and the certified total.

    Raises
    ------
    DpfedInputError
        For bad arguments, or with ``"basic"``/``"advanced"`` for a target outside the classic
        range.
    """
    eps = check_positive("epsilon", epsilon)
    d = check_open_unit("delta", delta)
    t = check_int("steps", steps, minimum=1)
    acc = check_accountant(accountant)
    d_step = d / t if delta_step is None else check_open_unit("delta_step", delta_step)
    c = check_int("coordinates", coordinates, minimum=0)
    coupled = get_accountant(acc).coupled
    z = calibrate_noise_multiplier(
        eps, calibration_delta(d, c, eps) if coupled else d, t, accountant=acc
    )
    certified = gaussian_releases_epsilon([z] * t, d, acc, coordinates=c)
    if certified > eps:  # the coupling is too large at this epsilon: RDP reports
        z = calibrate_noise_multiplier(eps, d, t, accountant="rdp")
        certified = gaussian_releases_epsilon([z] * t, d, acc, coordinates=c)
    if certified > eps:  # pragma: no cover - calibrate_noise_multiplier guarantees this
        raise DpfedInputError(
            f"calibration failed: noise multiplier {z} certifies epsilon {certified} > {eps}."
        )
    eps_step = math.sqrt(2.0 * math.log(1.25 / d_step)) / z
    return ConsensusCalibration(
        noise_multiplier=z,
        epsilon_step=eps_step,
        delta_step=d_step,
        epsilon=certified,
        delta=d,
        steps=t,
        accountant=acc,
    )
