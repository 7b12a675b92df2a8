"""Run an audit and write what it found: ``dpfed audit``.

The result (``audit.json``) holds, besides the mechanism and its configuration:

``claimed_epsilon``
    The epsilon dpfed prints for the audited configuration (its accountant's figure).
``delta``
    The delta of the claim and of the bound.
``epsilon_lower_bound``
    The audited lower bound on epsilon, valid with probability ``confidence``.
``confidence``
    0.95 by default (Clopper-Pearson, union bound over the two rates).
``runs``
    Runs on each of the two neighbouring data sets.
``tpr``, ``fpr``
    The test's rates at the chosen threshold, on the evaluation half of the runs.
``statistic``, ``neighbours``
    What the attacker computes, and the two data sets.
``loss``
    The loss of the audited configuration (null for a mechanism without one).
``realised_epsilon``
    The analytic epsilon at the sensitivity the runs realised (None where the statistic is not
    a likelihood ratio), the ceiling the lower bound can approach.
``threshold``, ``seconds``, ``broken``, ``factor``
    The test's threshold, the wall-clock time, and the deliberate breakage, if any.

A one-run audit (:func:`run_one_run_audit`) has ``runs`` 1 and, instead of ``threshold``,
``canaries``, ``guesses`` and ``correct``; its ``tpr`` is the share of right "in" guesses and
its ``fpr`` the share of wrong "out" guesses.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.audit.auditors import get_auditor, realised_epsilon
from dpfed.audit.statistics import (
    epsilon_lower_bound,
    one_run_epsilon_lower_bound,
    roc_curve,
)
from dpfed.core.threads import vector_work


@vector_work
def run_audit(
    mechanism: str,
    *,
    epsilon: float = 1.0,
    delta: float = 1e-5,
    runs: int = 500,
    seed: int = 0,
    broken: str | None = None,
    factor: float = 100.0,
    confidence: float = 0.95,
    progress: Any = None,
    loss: str | None = None,
) -> dict[str, Any]:
    """Audit ``mechanism`` with ``runs`` runs on each neighbour; return the result record.

    Parameters
    ----------
    mechanism : str
        A key of :data:`dpfed.audit.auditors.AUDITORS`.
    epsilon, delta : float
        The target the mechanism is calibrated to.
    runs : int
        Runs per neighbouring data set (half choose the threshold, half bound epsilon).
    seed : int
        Seed of the runs' noise (an audit is a simulation: the attacker's uncertainty is the
        noise, drawn here from a seeded generator).
    broken, factor
        A deliberately broken configuration (see :mod:`dpfed.audit.auditors`).
    progress : callable or None
        Called with the number of runs done after each pair of runs.
    loss : str or None
        The loss of the audited configuration (None: the mechanism's default; see
        :attr:`dpfed.audit.auditors.Auditor.losses`).
    """
    started = time.perf_counter()
    auditor = get_auditor(
        mechanism, epsilon=epsilon, delta=delta, broken=broken, factor=factor, loss=loss
    )
    rng = np.random.default_rng(seed)
    scores = np.zeros((2, runs))
    precision = 0.0
    for r in range(runs):
        for neighbour in (0, 1):
            outcome = auditor.run(neighbour, rng)
            scores[neighbour, r] = outcome.statistic
            precision = max(precision, outcome.precision)
        if progress is not None:
            progress(r + 1)
    delta = auditor.claimed_delta()
    bound = epsilon_lower_bound(scores[0], scores[1], delta, confidence=confidence)
    fpr, tpr = roc_curve(scores[0], scores[1])
    return {
        "mechanism": auditor.name,
        "loss": auditor.loss_name if type(auditor).losses else None,
        "claimed_epsilon": auditor.claimed_epsilon(),
        "delta": delta,
        "epsilon_lower_bound": bound.epsilon,
        "confidence": confidence,
        "runs": runs,
        "tpr": bound.tpr,
        "fpr": bound.fpr,
        "threshold": bound.threshold,
        "statistic": auditor.statistic,
        "neighbours": auditor.neighbours,
        "realised_epsilon": realised_epsilon(precision, delta) if precision > 0 else None,
        "target_epsilon": epsilon,
        "broken": broken,
        "factor": factor if broken == "sensitivity" else None,
        "seed": seed,
        "seconds": time.perf_counter() - started,
        "roc": {"fpr": fpr.tolist(), "tpr": tpr.tolist()},
    }


@vector_work
def run_one_run_audit(
    mechanism: str,
    *,
    epsilon: float = 1.0,
    delta: float = 1e-5,
    canaries: int = 1000,
    guesses: int | None = None,
    seed: int = 0,
    broken: str | None = None,
    factor: float = 100.0,
    confidence: float = 0.95,
    loss: str | None = None,
) -> dict[str, Any]:
    """Audit ``mechanism`` in one run with ``canaries`` canaries (Steinke, Nasr and Jagielski
    2023): each canary is included with probability 1/2, the attacker guesses "in" for the
    ``guesses / 2`` highest scores and "out" for as many lowest (default: a fifth of the
    canaries in all, fixed before the run), and the bound comes from its correct guesses
    (:func:`dpfed.audit.statistics.one_run_epsilon_lower_bound`)."""
    started = time.perf_counter()
    auditor = get_auditor(
        mechanism, epsilon=epsilon, delta=delta, broken=broken, factor=factor, loss=loss
    )
    guesses = guesses if guesses is not None else max(2, canaries // 5)
    if not 2 <= guesses <= canaries:
        raise DpfedInputError(f"--guesses must be in [2, {canaries}]. Found {guesses}.")
    rng = np.random.default_rng(seed)
    scores, included = auditor.one_run(canaries, rng)
    order = np.argsort(scores, kind="stable")
    half = guesses // 2
    said_in, said_out = order[len(order) - half :], order[: guesses - half]
    right_in, right_out = int(included[said_in].sum()), int((~included[said_out]).sum())
    correct = right_in + right_out
    delta = auditor.claimed_delta()
    bound = one_run_epsilon_lower_bound(canaries, guesses, correct, delta, confidence=confidence)
    return {
        "mechanism": auditor.name,
        "loss": auditor.loss_name if type(auditor).losses else None,
        "claimed_epsilon": auditor.claimed_epsilon(),
        "delta": delta,
        "epsilon_lower_bound": bound,
        "confidence": confidence,
        "runs": 1,
        "canaries": canaries,
        "guesses": guesses,
        "correct": correct,
        "tpr": right_in / max(half, 1),
        "fpr": 1.0 - right_out / max(guesses - half, 1),
        "statistic": auditor.statistic,
        "neighbours": auditor.neighbours,
        "realised_epsilon": None,
        "target_epsilon": epsilon,
        "broken": broken,
        "factor": factor if broken == "sensitivity" else None,
        "seed": seed,
        "seconds": time.perf_counter() - started,
    }


__all__ = ["run_audit", "run_one_run_audit"]
