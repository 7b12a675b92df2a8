r"""From a distinguisher's scores to a statistically valid lower bound on epsilon.

An :math:`(\varepsilon, \delta)`-DP mechanism bounds every test that tells a data set
:math:`D` from a neighbour :math:`D'` (Kairouz, Oh and Viswanath 2015): with false positive rate
:math:`\alpha` (calling :math:`D'` on a run of :math:`D`) and true positive rate :math:`\beta`,

.. math::

    \beta \le e^{\varepsilon}\alpha + \delta, \qquad
    1 - \alpha \le e^{\varepsilon}(1 - \beta) + \delta .

An audit (Jagielski, Ullman and Oprea 2020; Nasr et al. 2021) runs the mechanism many times on
each data set, thresholds a test statistic, and turns the empirical rates into

.. math::

    \varepsilon \ge \max\Big(\ln\frac{\beta_{lo} - \delta}{\alpha_{hi}},\
                             \ln\frac{1 - \alpha_{hi} - \delta}{1 - \beta_{lo}}\Big),

with :math:`\alpha_{hi}` and :math:`\beta_{lo}` one-sided Clopper-Pearson bounds, each failing
with probability :math:`(1 - c)/2` so that the bound holds with confidence :math:`c` (union
bound). The threshold is the one with the best such bound on half of the runs, and the bound
is computed on the other half, so choosing it costs no confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from dpfed._validation import DpfedInputError


def clopper_pearson(successes: int, trials: int, level: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds of a binomial proportion.

    Returns ``(lo, hi)``: ``P(p < lo) <= 1 - level`` and ``P(p > hi) <= 1 - level`` (each bound
    alone holds with probability ``level``).
    """
    if trials < 1 or not 0 <= successes <= trials:
        raise DpfedInputError(
            f"need 0 <= successes <= trials, trials >= 1. Found {successes}/{trials}."
        )
    a = 1.0 - level
    lo = 0.0 if successes == 0 else float(stats.beta.ppf(a, successes, trials - successes + 1))
    hi = (
        1.0
        if successes == trials
        else float(stats.beta.ppf(1 - a, successes + 1, trials - successes))
    )
    return lo, hi


def _bound(tp: int, n_in: int, fp: int, n_out: int, delta: float, level: float) -> float:
    """The epsilon lower bound of one threshold's counts (0 when none is shown)."""
    tpr_lo, _ = clopper_pearson(tp, n_in, level)
    _, fpr_hi = clopper_pearson(fp, n_out, level)
    best = 0.0
    if tpr_lo - delta > 0 and fpr_hi > 0:
        best = max(best, math.log((tpr_lo - delta) / fpr_hi))
    if 1 - fpr_hi - delta > 0 and 1 - tpr_lo > 0:
        best = max(best, math.log((1 - fpr_hi - delta) / (1 - tpr_lo)))
    return best


def _rates(out: np.ndarray, inn: np.ndarray, threshold: float) -> tuple[int, int, int, int]:
    """``(tp, n_in, fp, n_out)`` at ``threshold``, as :func:`_bound` takes them."""
    tp, fp = _counts(out, inn, threshold)
    return tp, inn.size, fp, out.size


def _counts(out: np.ndarray, inn: np.ndarray, threshold: float) -> tuple[int, int]:
    """``(true positives, false positives)`` of calling ``D'`` when the score >= threshold."""
    return int(np.sum(inn >= threshold)), int(np.sum(out >= threshold))


@dataclass(frozen=True)
class EpsilonLowerBound:
    """An audit's result.

    Attributes
    ----------
    epsilon : float
        The lower bound (0 when the runs show nothing), valid with probability ``confidence``.
    threshold : float
        The score above which the test says ``D'`` (chosen on the selection half).
    tpr, fpr : float
        The test's empirical rates on the evaluation half.
    confidence : float
    runs : int
        Runs per data set (both halves).
    """

    epsilon: float
    threshold: float
    tpr: float
    fpr: float
    confidence: float
    runs: int


def epsilon_lower_bound(
    scores_out: np.ndarray, scores_in: np.ndarray, delta: float, *, confidence: float = 0.95
) -> EpsilonLowerBound:
    """The epsilon lower bound of a test that says ``D'`` for high scores.

    Parameters
    ----------
    scores_out : numpy.ndarray, shape (R,)
        The statistic on ``R`` runs on ``D`` (negatives).
    scores_in : numpy.ndarray, shape (R,)
        The statistic on ``R`` runs on ``D'`` (positives).
    delta : float
        The delta of the claim.
    confidence : float, default 0.95

    Returns
    -------
    EpsilonLowerBound
        Runs with an even index choose the threshold, runs with an odd index bound epsilon.
    """
    out = np.asarray(scores_out, dtype=float).reshape(-1)
    inn = np.asarray(scores_in, dtype=float).reshape(-1)
    if out.size < 4 or inn.size < 4:
        raise DpfedInputError(
            f"an audit needs at least 4 runs per data set. Found {out.size} and {inn.size}."
        )
    if not 0 < confidence < 1:
        raise DpfedInputError(f"confidence must be in (0, 1). Found {confidence}.")
    pick_out, pick_in = out[0::2], inn[0::2]
    eval_out, eval_in = out[1::2], inn[1::2]
    level = 1.0 - (1.0 - confidence) / 2.0
    # the threshold whose bound is best on the selection half, ties to the median candidate
    candidates = np.unique(np.concatenate([pick_out, pick_in]))
    values = np.array(
        [_bound(*_rates(pick_out, pick_in, float(t)), delta, level) for t in candidates]
    )
    best = np.flatnonzero(values == values.max())
    threshold = float(candidates[best[best.size // 2]])
    tp, fp = _counts(eval_out, eval_in, threshold)
    epsilon = _bound(tp, eval_in.size, fp, eval_out.size, delta, level)
    return EpsilonLowerBound(
        epsilon,
        threshold,
        tp / eval_in.size,
        fp / eval_out.size,
        confidence,
        int(min(out.size, inn.size)),
    )


def one_run_p_value(
    canaries: int, guesses: int, correct: int, epsilon: float, delta: float
) -> float:
    r"""The p-value of ``correct`` right guesses out of ``guesses`` under
    :math:`(\varepsilon, \delta)`-DP, in a one-run audit of ``canaries`` canaries each included
    independently with probability 1/2 (Steinke, Nasr and Jagielski 2023, Theorem 3.3 and
    their Appendix D):

    .. math::

        p = \Pr[\mathrm{Bin}(r, q) \ge v]
            + 2 m \delta \max_{1 \le i \le v} \frac{\Pr[v > \mathrm{Bin}(r, q) \ge v - i]}{i},
        \qquad q = \frac{e^{\varepsilon}}{1 + e^{\varepsilon}} .
    """
    if not 0 <= correct <= guesses <= canaries:
        raise DpfedInputError(
            f"need 0 <= correct <= guesses <= canaries. Found {correct}, {guesses}, {canaries}."
        )
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(stats.binom.sf(correct - 1, guesses, q))
    if delta == 0 or correct == 0:
        return min(tail, 1.0)
    below = stats.binom.pmf(np.arange(correct - 1, -1, -1), guesses, q)  # v-1, v-2, ..., 0
    ratio = float(np.max(np.cumsum(below) / np.arange(1, correct + 1)))
    return min(tail + 2.0 * canaries * delta * ratio, 1.0)


def one_run_epsilon_lower_bound(
    canaries: int, guesses: int, correct: int, delta: float, *, confidence: float = 0.95
) -> float:
    """The largest epsilon whose :func:`one_run_p_value` is below ``1 - confidence`` (0 when
    none is), by bisection to 1e-6."""
    level = 1.0 - confidence
    if one_run_p_value(canaries, guesses, correct, 0.0, delta) >= level:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(canaries, guesses, correct, hi, delta) < level and hi < 1e3:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-6:
        mid = 0.5 * (lo + hi)
        if one_run_p_value(canaries, guesses, correct, mid, delta) < level:
            lo = mid
        else:
            hi = mid
    return lo


def roc_curve(scores_out: np.ndarray, scores_in: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(fpr, tpr)`` of the test at every threshold, from (1, 1) down to (0, 0)."""
    out = np.sort(np.asarray(scores_out, dtype=float))
    inn = np.sort(np.asarray(scores_in, dtype=float))
    thresholds = np.unique(np.concatenate([out, inn, [np.inf]]))
    fpr = 1.0 - np.searchsorted(out, thresholds, side="left") / out.size
    tpr = 1.0 - np.searchsorted(inn, thresholds, side="left") / inn.size
    return fpr, tpr


__all__ = [
    "EpsilonLowerBound",
    "clopper_pearson",
    "epsilon_lower_bound",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
    "roc_curve",
]
