"""Lemma 1's eigenvalue premise, and evidence that the paper's bound C fails without it.

Lemma 1 bounds the change of the released scores ``D_m x_m`` when one row of ``D_m`` is
replaced by ``C = 3 / (d_m rho) (lam c1 + (1 + M rho) b1)``; its proof uses
``||(D_m^T D_m)^-1|| <= 1/d_m``, i.e. ``lambda_min(D_m^T D_m) >= d_m``. On a wide block
(``d_m > N``) that premise is false, and the exact x-update moves the scores by far more
than ``C``: the paper's epsilon is not a guarantee there.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from dpfed.core import L2, Ball
from dpfed.core.rows import normalize_rows
from dpfed.core.spectral import GramSpectrum
from dpfed.core.xupdate import make_local_solver
from dpfed.protocols.vertical.calibration import (
    EigenvaluePremise,
    lemma1_bound,
    paper_epsilon_reasons,
)
from dpfed.protocols.vertical.mechanisms import PaperMechanism

RHO = 0.25  # the default penalty of the logistic loss


def _scores(block: np.ndarray, target: np.ndarray, *, reg_weight: float, b1: float) -> np.ndarray:
    """Scores ``D x`` of the exact paper x-update ``argmin_{||x|| <= b1} reg_weight/2 ||x||^2
    + rho/2 ||D x - target||^2``."""
    solver = make_local_solver(block, L2(), reg_weight, Ball(b1))
    x = solver.solve(target, RHO, np.zeros(block.shape[1]))
    assert np.linalg.norm(x) <= b1 * (1 + 1e-9)
    return block @ x


def _lemma1(block: np.ndarray, reg_weight: float, b1: float) -> float:
    return lemma1_bound(d_m=block.shape[1], rho=RHO, lam=reg_weight, c1=1.0, b1=b1, n_parties=2)


def _unit_row_at_distance_one(row: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A unit row ``r'`` with ``||r' - row|| = 1`` (the paper's adjacency, ||D - D'|| <= 1)."""
    u = rng.normal(size=row.shape)
    u -= (u @ row) * row
    u /= np.linalg.norm(u)
    return 0.5 * row + math.sqrt(3.0) / 2.0 * u


# -- the premise itself -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "d", "excluded"),
    [(100, 5000, True), (100, 11, True), (100, 10, False), (32561, 66, False), (5, 1, False)],
)
def test_shapes_rule_the_premise_out_exactly_when_d_squared_exceeds_n(n, d, excluded):
    premise = EigenvaluePremise(n_samples=n, n_features=d)
    assert premise.excluded_by_shape is excluded
    assert premise.holds is (False if excluded else None)
    reason = premise.reason("bank")
    assert reason.startswith("bank: Lemma 1 assumes")
    if not excluded:
        assert "not checked across parties" in reason


def test_unit_rows_bound_lambda_min_by_n_over_d():
    # the trace argument behind the shape rule: lambda_min <= trace / d = N / d
    rng = np.random.default_rng(3)
    for n, d in ((50, 8), (30, 6), (200, 3)):
        spectrum = GramSpectrum(normalize_rows(rng.normal(size=(n, d))))
        assert spectrum.min_eigenvalue <= n / d + 1e-9


def test_measured_premise_decides_when_the_shapes_do_not():
    holds = EigenvaluePremise(n_samples=200, n_features=3, min_eigenvalue=60.0)
    fails = EigenvaluePremise(n_samples=200, n_features=3, min_eigenvalue=2.5)
    assert holds.holds is True and holds.reason("label") is None
    assert fails.holds is False and "found lambda_min = 2.5 < 3" in fails.reason("label")


def test_the_unbounded_noise_is_always_a_reason():
    holds = {"label": EigenvaluePremise(200, 3, 60.0)}
    reasons = paper_epsilon_reasons(70.7, holds)
    assert len(reasons) == 1 and "unbounded Gaussian noise" in reasons[0]
    assert "b1 = 70.7" in reasons[0]
    wide = holds | {"bank": EigenvaluePremise(200, 500, 0.0)}
    reasons = paper_epsilon_reasons(None, wide)
    assert len(reasons) == 2 and reasons[1].startswith("bank:") and "singular" in reasons[1]


def test_paper_mechanism_reads_the_premise_off_the_block_spectrum():
    rng = np.random.default_rng(0)
    tall = normalize_rows(rng.normal(size=(200, 3)))
    mech = PaperMechanism(
        d_m=3, n_parties=2, reg_weight=1.0, c1=1.0, b1=10.0, delta_step=1e-6, sigma=1.0
    )
    premise = mech.eigenvalue_premise(GramSpectrum(tall))
    assert premise.min_eigenvalue == pytest.approx(np.linalg.eigvalsh(tall.T @ tall).min())
    assert premise.holds is True
    wide = normalize_rows(rng.normal(size=(20, 300)))
    mech = PaperMechanism(
        d_m=300, n_parties=2, reg_weight=1.0, c1=1.0, b1=10.0, delta_step=1e-6, sigma=1.0
    )
    premise = mech.eigenvalue_premise(GramSpectrum(wide))
    assert premise.min_eigenvalue == 0.0 and premise.holds is False


# -- why the premise matters: one replaced row moves the scores by more than C ------------------
def _wide_problem(n: int = 20, d: int = 2000, seed: int = 0):
    """A wide block (d > N) with rows 0 and 1 equal but labels +1 and -1 (the same features
    seen with both labels), and the x-update's target at the start of the protocol for the
    logistic loss: ``z = 0``, ``y = l'(0) = -label/2``, so ``target = -y / rho``; then
    ``||y|| <= b1`` and ``||z|| <= b1`` as Assumption 1.1 asks."""
    rng = np.random.default_rng(seed)
    block = normalize_rows(rng.normal(size=(n, d)))
    block[1] = block[0]
    labels = np.where(rng.random(n) > 0.5, 1.0, -1.0)
    labels[:2] = (1.0, -1.0)
    target = labels / (2.0 * RHO)
    return block, target, n * 1e-4, 5.0 * math.sqrt(n)


@pytest.mark.parametrize("change", ["negate", "distance_one"])
def test_on_a_wide_block_one_row_moves_the_scores_far_beyond_lemma1(change):
    block, target, reg_weight, b1 = _wide_problem()
    assert EigenvaluePremise(*block.shape).holds is False
    bound = _lemma1(block, reg_weight, b1)
    neighbour = block.copy()
    if change == "negate":
        neighbour[0] = -block[0]
    else:
        neighbour[0] = _unit_row_at_distance_one(block[0], np.random.default_rng(1))
        assert np.linalg.norm(neighbour[0] - block[0]) == pytest.approx(1.0)
    assert np.linalg.norm(neighbour[0]) == pytest.approx(1.0)  # Assumption 1.3 still holds
    moved = np.linalg.norm(
        _scores(block, target, reg_weight=reg_weight, b1=b1)
        - _scores(neighbour, target, reg_weight=reg_weight, b1=b1)
    )
    # rows 0 and 1 can now be fitted to +2 and -2 instead of both near 0: ||(2, -2)|| = 2.83
    assert moved > 2.5
    assert moved > 10 * bound  # C = 0.20 here


def test_on_a_tall_well_conditioned_block_the_premise_holds():
    rng = np.random.default_rng(2)
    block = normalize_rows(rng.normal(size=(200, 3)))
    assert GramSpectrum(block).min_eigenvalue >= 3  # lambda_min about N/d = 67
    premise = PaperMechanism(
        d_m=3,
        n_parties=2,
        reg_weight=0.02,
        c1=1.0,
        b1=5 * math.sqrt(200),
        delta_step=1e-6,
        sigma=1.0,
    ).eigenvalue_premise(GramSpectrum(block))
    assert premise.holds is True and premise.reason("label") is None


def _arcene_dir() -> Path:
    value = os.environ.get("DPFED_DATA", "")
    base = Path(value) if value else None
    if base is None or not (base / "arcene" / "arcene_train.data").is_file():
        pytest.skip("arcene not found under $DPFED_DATA (arcene/arcene_train.{data,labels})")
    return base


def test_on_arcene_negating_a_row_moves_the_scores_beyond_lemma1():
    from dpfed.data import load_dataset

    data = load_dataset("arcene", _arcene_dir())
    block = normalize_rows(np.asarray(data.X_train, dtype=float)[:, :5000])
    labels = np.where(np.asarray(data.y_train) > 0, 1.0, -1.0)
    n = block.shape[0]
    target, reg_weight, b1 = labels / (2.0 * RHO), n * 1e-4, 5.0 * math.sqrt(n)
    assert EigenvaluePremise(*block.shape).holds is False  # d_m = 5000 > N = 100
    bound = _lemma1(block, reg_weight, b1)
    assert bound == pytest.approx(0.18, abs=0.005)
    scores = _scores(block, target, reg_weight=reg_weight, b1=b1)
    moved = []
    for i in range(5):
        neighbour = block.copy()
        neighbour[i] = -block[i]
        moved.append(
            np.linalg.norm(scores - _scores(neighbour, target, reg_weight=reg_weight, b1=b1))
        )
    assert max(moved) > 10 * bound  # measured: 2.16 for row 1, 12x C
