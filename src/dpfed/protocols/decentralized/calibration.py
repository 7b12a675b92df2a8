r"""Noise calibration of decentralized ADMM with dynamic DP: DVP and PVP (paper 001).

Zhang & Zhu, "Dynamic differential privacy for ADMM-based distributed classification
learning". ``P`` nodes on a connected graph; node ``p`` has ``N_p`` neighbours and ``B_p``
records :math:`(x_{ip}, y_{ip})`, and minimises (eq. 3, 9)

.. math::

    Z_p(f) = \frac{C^R}{B_p}\sum_{i} \mathcal{L}(y_{ip} f^\top x_{ip}) + \rho R(f),
    \qquad
    L^N_p(f) = Z_p(f) + 2\lambda_p(t)^\top f
        + \eta \sum_{i \in N_p}\big\|f - \tfrac12 (f_p(t) + f_i(t))\big\|^2 .

Here :math:`\rho` weights the regulariser and :math:`\eta` is the ADMM penalty. Both schemes
draw l2-Laplace noise :math:`K(e) \propto e^{-\zeta\|e\|}`
(:func:`dpfed.privacy.l2_laplace.sample_l2_laplace`).

Assumptions of both privacy theorems (Assumptions 1-3)
------------------------------------------------------
* rows :math:`\|x_{ip}\| \le 1`, labels :math:`y \in \{-1, 1\}` (**the code must clip or
  normalise rows**);
* :math:`\mathcal{L}` convex, twice differentiable, :math:`|\mathcal{L}'| \le 1`,
  :math:`0 \le \mathcal{L}'' \le c_1` (logistic: :math:`c_1 = 1/4`; **the code must allow only
  losses with known bounds**);
* :math:`R` twice differentiable and 1-strongly convex (:math:`\tfrac12\|f\|^2`);
* the perturbed local problem is minimised **exactly** (objective perturbation's change of
  variables needs the exact stationary point; see ``docs/privacy.md`` for the tolerance);
* fresh noise in every iteration; replace-one adjacency within one node's data.

What the guarantee means
------------------------
Theorems 1 and 2 bound the density ratio of the iterate node ``p`` releases at iteration
``t`` by :math:`e^{\alpha_p(t)}`, for fixed values of everything else the update reads. That is
a per-iteration ("dynamic") guarantee, **not** a guarantee for the run: every iterate is
released to the neighbours, so the adversary of the paper (who sees all iterates) learns the
composition of all of them. :func:`decentralized_total` reports that total.

That composition is a proof when every iteration is an :math:`\alpha_p(t)`-DP mechanism
*given everything released before* (adaptive composition), i.e. when the update reads,
besides the node's rows and fresh noise, only released values. For DVP these are
:math:`f_p(t)` (its broadcast), the neighbours' :math:`f_i(t)` and :math:`\lambda_p(t)`
(computed from broadcasts only). For PVP, the node
(:class:`~dpfed.protocols.decentralized.DecentralizedNode`) puts its own last broadcast
:math:`V_p(t) = f_p(t) + e_p(t)` in the proximal centre, :math:`\tfrac12(V_p(t) + V_i(t))`,
in every output-perturbed round and in the final DVP step, and updates its dual from
broadcasts only; each round is then Theorem 2's output perturbation (sensitivity
:math:`2C^R/(\rho B_p)`) or, the last, Theorem 1's objective perturbation, given public
inputs. **This departs from the paper's eq. 18**, whose centre
:math:`\tfrac12(f_p(t) + V_i(t) - e_p(t))` (and the final step's exact :math:`f_p(t_s - 1)`)
reads the node's *unreleased* exact iterate and noise: given the past broadcasts those are
still functions of the data, so the paper's per-iteration bound holds only conditionally on
them and its figures do not compose into a proved total.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.privacy.accounting import advanced_composition

__all__ = [
    "SCHEDULES",
    "DVPNoise",
    "alpha_schedule",
    "decentralized_total",
    "dvp_noise",
    "pvp_zeta",
]

SCHEDULES = ("constant", "geometric", "linear")


@dataclass(frozen=True)
class DVPNoise:
    r"""Noise rate and extra penalty of one DVP iteration (Algorithm 2, Appendix A).

    Parameters
    ----------
    zeta : float
        Rate :math:`\zeta` of the l2-Laplace noise :math:`e_p(t)`, density
        :math:`\propto e^{-\zeta\|e\|}`.
    phi : float
        Extra penalty :math:`\Phi \ge 0` (the term :math:`\tfrac{\Phi}{2}\|f\|^2`).
    a : float
        :math:`a = \alpha - 2\ln\big(1 + \frac{c_1 C^R}{B_p(\rho + 2\eta N_p)}\big)`, the budget
        left for the noise density when :math:`\Phi = 0` (the paper's first
        :math:`\hat\alpha_p`).
    alpha : float
        Target per-iteration :math:`\alpha_p(t)`.
    dual_scale : float
        :math:`C^R / (2 B_p)`: the perturbed dual is :math:`\mu_p = \lambda_p(t) +
        \frac{C^R}{2B_p} e_p` (eq. 14).
    """

    zeta: float
    phi: float
    a: float
    alpha: float
    dual_scale: float

    @property
    def alpha_hat(self) -> float:
        r""":math:`\hat\alpha = 2\zeta`, the share of :math:`\alpha` spent by the noise density."""
        return 2.0 * self.zeta

    @property
    def alpha_bar(self) -> float:
        r""":math:`\bar\alpha = \alpha - \hat\alpha`, the share spent by the Jacobian ratio."""
        return self.alpha - self.alpha_hat


def _check_alpha(name: str, value: float) -> float:
    return check_positive(name, value)


def dvp_noise(
    alpha: float,
    *,
    c1: float,
    CR: float,  # the paper's C^R
    B: int,  # the paper's B_p
    rho: float,
    eta: float,
    n_neighbours: int,
) -> DVPNoise:
    r"""DVP noise for a per-iteration target :math:`\alpha_p(t)` (Algorithm 2, Theorem 1).

    The perturbed update is :math:`f_p(t+1) = \arg\min_f L^N_p(f)
    + \frac{C^R}{B_p} e^\top f + \frac{\Phi}{2}\|f\|^2` (eqs. 13-15). For a fixed output, the
    stationarity condition (28) gives the noise as a bijective function of :math:`f`, and
    replacing one record changes it by at most 2 (:math:`|\mathcal{L}'| \le 1`,
    :math:`\|x\| \le 1`); the density ratio of :math:`f_p(t+1)` is the noise-density ratio,
    at most :math:`e^{2\zeta}`, times the Jacobian ratio, at most
    :math:`e^{\bar\alpha}` with (30)

    .. math::

        \bar\alpha = 2\ln\Big(1 + \frac{c_1 C^R}{B_p(\rho + \Phi + 2\eta N_p)}\Big).

    The calibration (Appendix A):

    .. math::

        a = \alpha - 2\ln\Big(1 + \frac{c_1 C^R}{B_p(\rho + 2\eta N_p)}\Big);\quad
        \begin{cases}
        a \ge \alpha/2: & \Phi = 0,\ \hat\alpha = a,\\
        a < \alpha/2: & \Phi = \dfrac{c_1 C^R}{B_p(e^{\alpha/4} - 1)} - \rho - 2\eta N_p,\
                   \hat\alpha = \alpha/2 \ (\text{then } \bar\alpha = \alpha/2),
        \end{cases}
        \qquad \zeta = \hat\alpha / 2,

    so that :math:`2\zeta + \bar\alpha = \alpha`. The paper switches to the penalty branch
    only at :math:`a \le 0`, so a slightly positive :math:`a` gives almost unbounded noise
    (:math:`\zeta = a/2 \to 0`); switching at :math:`a = \alpha/2` instead, where
    :math:`\Phi = 0` and both branches draw :math:`\zeta = \alpha/4`, makes
    :math:`\zeta = \max(a, \alpha/2)/2` continuous in every parameter, never smaller than the
    paper's, and the guarantee is unchanged (:math:`\Phi \ge 0` exactly when
    :math:`a \le \alpha/2`). **Differs from Algorithm 2 as printed**, which
    draws with :math:`\zeta = \hat\alpha` (and SPEC.md, which restates it): that is half the
    noise, and the proof then only bounds the ratio by :math:`e^{2\alpha - \bar\alpha}`. The
    proof's last step ("selecting :math:`\zeta = \hat\alpha/2`"), its Appendix D
    (:math:`\zeta = \alpha/4` when :math:`\Phi > 0`) and Chaudhuri et al.'s objective
    perturbation (:math:`\beta = \varepsilon'/2`) all use :math:`\zeta = \hat\alpha/2`, which is
    what is returned.

    Guarantee: for fixed :math:`\lambda_p(t), f_p(t), f_i(t)`, the released :math:`f_p(t+1)` is
    :math:`\alpha`-DP (pure), under :math:`\|x\| \le 1`, :math:`|\mathcal{L}'| \le 1`,
    :math:`0 \le \mathcal{L}'' \le c_1` (logistic: :math:`c_1 = 1/4`), :math:`R` 1-strongly
    convex (:math:`\tfrac12\|f\|^2`) and the exact minimisation of the perturbed objective.

    Parameters
    ----------
    alpha : float
        Per-iteration target :math:`\alpha_p(t) > 0`.
    c1 : float
        Bound :math:`c_1 > 0` on :math:`\mathcal{L}''`.
    CR : float
        Loss weight :math:`C^R > 0`.
    B : int
        Number of records :math:`B_p \ge 1` of the node.
    rho : float
        Regulariser weight :math:`\rho > 0`.
    eta : float
        ADMM penalty :math:`\eta \ge 0`.
    n_neighbours : int
        :math:`N_p \ge 0`.

    Returns
    -------
    DVPNoise
        :math:`\zeta, \Phi, a, \alpha` and the dual scale :math:`C^R/(2B_p)`.
    """
    al = _check_alpha("alpha", alpha)
    c = check_positive("c1", c1)
    cr = check_positive("CR", CR)
    b = check_int("B", B, minimum=1)
    r = check_positive("rho", rho)
    e = check_positive("eta", eta, allow_zero=True)
    n_p = check_int("n_neighbours", n_neighbours, minimum=0)
    strong = r + 2.0 * e * n_p
    a = al - 2.0 * math.log1p(c * cr / (b * strong))
    if a >= al / 2.0:
        phi, alpha_hat = 0.0, a
    else:
        phi = c * cr / (b * math.expm1(al / 4.0)) - strong
        phi = max(phi, 0.0)  # >= 0 analytically when a <= alpha/2; clip rounding
        alpha_hat = al / 2.0
    return DVPNoise(zeta=alpha_hat / 2.0, phi=phi, a=a, alpha=al, dual_scale=cr / (2.0 * b))


def pvp_zeta(alpha: float, *, rho: float, B: int, CR: float) -> float:
    r"""PVP noise rate :math:`\zeta = \rho B_p \alpha / (2 C^R)` (Algorithm 3, Theorem 2).

    PVP releases :math:`V_p(t+1) = f_p(t+1) + e_p(t+1)` (output perturbation). The local
    objective is :math:`\rho`-strongly convex (:math:`R` 1-strongly convex; the proof ignores
    the extra :math:`2\eta N_p`, which is conservative) and replacing one record changes its
    gradient by at most :math:`2C^R/B_p` (:math:`|\mathcal{L}'| \le 1`, :math:`\|x\| \le 1`), so
    the exact minimiser moves by at most :math:`\Delta = 2C^R/(\rho B_p)` (33), and l2-Laplace
    noise of rate :math:`\zeta = \alpha/\Delta` makes :math:`V_p(t+1)` :math:`\alpha`-DP for
    fixed values of what the update reads. dpfed's update reads only released values (its
    own last broadcast :math:`V_p(t)` in place of eq. 18's unreleased
    :math:`f_p(t) - e_p(t)`, the neighbours' :math:`V_i(t)`, :math:`\lambda_p(t)`), so the
    per-iteration figures compose into a proved total (see the module docstring).

    Needs :math:`\|x\| \le 1`, :math:`|\mathcal{L}'| \le 1`, :math:`\mathcal{L}` convex,
    :math:`R` 1-strongly convex, the exact minimiser. No bound on :math:`\mathcal{L}''` is used.

    Parameters
    ----------
    alpha : float
        Per-iteration target :math:`\alpha_p(t) > 0`.
    rho : float
        Regulariser weight :math:`\rho > 0`.
    B : int
        Number of records :math:`B_p \ge 1`.
    CR : float
        Loss weight :math:`C^R > 0`.

    Returns
    -------
    float
        :math:`\zeta`.
    """
    al = _check_alpha("alpha", alpha)
    r = check_positive("rho", rho)
    b = check_int("B", B, minimum=1)
    cr = check_positive("CR", CR)
    return r * b * al / (2.0 * cr)


def alpha_schedule(
    alpha: float, steps: int, *, kind: str = "constant", rate: float | None = None
) -> np.ndarray:
    r"""Per-iteration privacy parameters :math:`\alpha_p(t)`, :math:`t = 0, \dots, T-1`.

    The paper lets :math:`\alpha_p(t)` vary with :math:`t` (Definition 1: "dynamic") but names
    no schedule and uses a constant one in its experiments. Offered here:

    ``"constant"``
        :math:`\alpha_t = \alpha` (``rate`` must be ``None``);
    ``"geometric"``
        :math:`\alpha_t = \alpha\, r^t`, :math:`r > 0` (:math:`r < 1` spends less later);
    ``"linear"``
        :math:`\alpha_t = \alpha + r t`; every :math:`\alpha_t` must be > 0.

    Parameters
    ----------
    alpha : float
        :math:`\alpha_0 > 0`.
    steps : int
        :math:`T \ge 1`.
    kind : str, default "constant"
        One of :data:`SCHEDULES`.
    rate : float or None
        :math:`r` for ``"geometric"`` and ``"linear"``.

    Returns
    -------
    numpy.ndarray
        Shape ``(steps,)``, all entries finite and > 0.
    """
    a0 = _check_alpha("alpha", alpha)
    t = check_int("steps", steps, minimum=1)
    if kind not in SCHEDULES:
        raise DpfedInputError(f"kind must be one of {SCHEDULES}. Found {kind!r}.")
    idx = np.arange(t, dtype=float)
    if kind == "constant":
        if rate is not None:
            raise DpfedInputError(f"rate must be None for a constant schedule. Found {rate!r}.")
        return np.full(t, a0)
    if rate is None:
        raise DpfedInputError(f"rate is required for a {kind} schedule. Found None.")
    if kind == "geometric":
        r = check_positive("rate", rate)
        out = a0 * np.power(r, idx)
    else:
        try:
            r = float(rate)
        except (TypeError, ValueError):
            raise DpfedInputError(f"rate must be a number. Found {rate!r}.") from None
        if not math.isfinite(r):
            raise DpfedInputError(f"rate must be finite. Found {rate!r}.")
        out = a0 + r * idx
    if not np.all(np.isfinite(out)) or not np.all(out > 0.0):
        bad = int(np.flatnonzero(~(np.isfinite(out) & (out > 0.0)))[0])
        raise DpfedInputError(
            f"every alpha_t must be finite and > 0; the {kind} schedule with alpha={a0}, "
            f"rate={rate} gives alpha_{bad} = {out[bad]}."
        )
    return cast(np.ndarray, out)


def decentralized_total(
    alphas: Sequence[float] | np.ndarray, *, delta: float | None = None
) -> dict[str, Any]:
    r"""Honest total privacy of one node over all its released iterates.

    The paper guarantees :math:`\alpha_p(t)`-DP for *each* released iterate (Theorems 1, 2).
    Every iterate of a node is broadcast to its neighbours, so what an observer of the whole run
    learns is bounded by the composition:

    * basic composition (pure DP): :math:`\varepsilon = \sum_t \alpha_t`, :math:`\delta = 0`;
    * with ``delta`` given, advanced composition
      (:func:`dpfed.privacy.accounting.advanced_composition`, per-release delta 0):
      :math:`\varepsilon' = \sqrt{2\ln(1/\delta)\sum_t\alpha_t^2}
      + \sum_t \alpha_t(e^{\alpha_t} - 1)` at :math:`\delta`.

    The smaller is reported as ``"epsilon"`` (with its ``"delta"`` and ``"method"``). Both
    compositions hold for adaptively chosen mechanisms, so the total is a proved bound for DVP
    and PVP alike: each iteration reads the data only through the minimisation and otherwise
    released values plus fresh noise (for PVP this needs dpfed's departure from eq. 18; see
    the module docstring), under the exact-minimisation assumption.

    Parameters
    ----------
    alphas : sequence of float
        Per-iteration :math:`\alpha_t > 0` of one node, one per released iterate (e.g.
        :func:`alpha_schedule`).
    delta : float or None
        Slack :math:`\delta \in (0, 1)` for advanced composition; ``None`` for pure DP only.

    Returns
    -------
    dict
        ``epsilon``, ``delta``, ``method`` (``"basic"`` or ``"advanced"``), ``basic_epsilon``,
        ``advanced_epsilon`` (``None`` without ``delta``), ``steps``.
    """
    if isinstance(alphas, str | bytes):
        raise DpfedInputError(f"alphas must be a sequence of numbers. Found {alphas!r}.")
    try:
        items = np.asarray(alphas, dtype=float).reshape(-1).tolist()
    except (TypeError, ValueError):
        raise DpfedInputError(f"alphas must be a sequence of numbers. Found {alphas!r}.") from None
    values = [_check_alpha(f"alphas[{i}]", a) for i, a in enumerate(items)]
    if not values:
        raise DpfedInputError("alphas must hold at least one iteration. Found none.")
    basic = math.fsum(values)
    out: dict[str, Any] = {
        "epsilon": basic,
        "delta": 0.0,
        "method": "basic",
        "basic_epsilon": basic,
        "advanced_epsilon": None,
        "steps": len(values),
    }
    if delta is not None:
        d = check_open_unit("delta", delta)
        adv, _ = advanced_composition(values, 0.0, d)
        out["advanced_epsilon"] = adv
        if adv < basic:
            out.update(epsilon=adv, delta=d, method="advanced")
    return out
