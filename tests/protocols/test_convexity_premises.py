"""Sensitivities that rest on (strong) convexity hold for every loss a mechanism accepts.

The non-convex sigmoid loss reaches two releases whose sensitivity is a strong-convexity
argument: a protected label holder's local model (vertical) and a consensus client's upload.
With the loss's weak-convexity modulus subtracted from the strong convexity, the bound holds on
the worst cases found by an outside attack; where nothing is left, the configuration is
refused, naming the premise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.cli import main
from dpfed.core import L2
from dpfed.core.local import LocalProblem, solve_local
from dpfed.core.losses import get_loss
from dpfed.protocols.consensus.calibration import consensus_sensitivity
from dpfed.protocols.consensus.driver import ConsensusConfig, client_release
from dpfed.protocols.vertical.calibration import local_model_strong_convexity
from dpfed.protocols.vertical.driver import VerticalConfig, vertical_setup
from dpfed.protocols.vertical.weighting import fit_local_model

SIGMOID = get_loss("sigmoid")


def _three_directions(n: int) -> np.ndarray:
    """Unit rows at 0, 120 and 240 degrees."""
    angles = 2.0 * math.pi * np.arange(n) / 3.0
    return np.column_stack([np.cos(angles), np.sin(angles)])


def test_a_protected_label_holder_with_the_sigmoid_loss_and_the_rule_s_ridge_is_refused():
    cfg = VerticalConfig(
        loss="sigmoid", mechanism="sound", epsilon=1.0, delta=1e-5, protect_label_holder=True
    ).validated()
    with pytest.raises(DpfedInputError, match=r"strongly convex objective.*288\.7"):
        vertical_setup(cfg, [2, 2], 3000)


def test_the_command_refuses_it_too(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(
        [
            "train",
            "vertical",
            "--data",
            "breast_cancer",
            "--split",
            "15,15",
            "--loss",
            "sigmoid",
            "--mechanism",
            "sound",
            "--protect-label-holder",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--out",
            str(out),
        ]
    )
    assert code == 2 and not out.exists()
    assert "strongly convex" in capsys.readouterr().err


def test_a_protected_label_holder_needs_a_loss_of_bounded_slope():
    with pytest.raises(DpfedInputError, match="bounded slope"):
        VerticalConfig(
            loss="squared", mechanism="sound", epsilon=1.0, delta=1e-5, protect_label_holder=True
        ).validated()


@pytest.mark.parametrize("margin", [1.02, 1.5, 4.0])
def test_the_sigmoid_local_model_moves_less_than_its_sensitivity_above_the_floor(margin):
    """The attack's pair (N = 300): flipping one label of rows at 0/120/240 degrees."""
    n = 300
    block = _three_directions(n)
    y = np.ones(n)
    flipped = y.copy()
    flipped[-1] = -1.0
    ridge = margin * SIGMOID.weak_convexity * n
    tolerance = 1e-6
    models = [
        fit_local_model(block, labels, SIGMOID, ridge, tolerance=tolerance)
        for labels in (y, flipped)
    ]
    kappa = local_model_strong_convexity(
        ridge=ridge, weak_convexity=SIGMOID.weak_convexity, n_samples=n, row_norm=1.0
    )
    sensitivity = 2.0 * (SIGMOID.lipschitz + tolerance) / kappa
    assert np.linalg.norm(models[1] - models[0]) <= sensitivity
    # the convex-only bound, 2L/ridge, is what the release used to be calibrated to
    assert kappa < ridge


def test_the_release_is_calibrated_with_the_floor_subtracted():
    cfg = VerticalConfig(
        loss="sigmoid",
        mechanism="sound",
        epsilon=1.0,
        delta=1e-5,
        protect_label_holder=True,
        lam=1.0,
    ).validated()
    setup = vertical_setup(cfg, [2, 2], 300)
    holder = setup.mechanisms[0]
    holder.check_regularizer(L2(), holder.reg_weight)
    release = holder.local_model_release(SIGMOID, 0.0, 300)
    ridge = holder.reg_weight + setup.config.bounds.prox_weight
    expected = 2.0 * SIGMOID.lipschitz / (ridge - SIGMOID.weak_convexity * 300)
    assert release.l2_sensitivity == pytest.approx(expected)
    logistic = holder.local_model_release(get_loss("logistic"), 0.0, 300)
    assert logistic.l2_sensitivity == pytest.approx(2.0 * 1.0 / ridge)


def _consensus_move(
    center: float, rho: float, lam: float = 1e-3, n: int = 2, m: int = 300
) -> float:
    """How far flipping one of ``m`` labels moves a client's exact minimiser (rows e_1, every
    label -1, global model ``(center, 0)``)."""
    X = np.zeros((m, 2))
    X[:, 0] = 1.0
    y = -np.ones(m)
    flipped = y.copy()
    flipped[-1] = 1.0
    problem = LocalProblem(
        loss_weight=1.0 / m, l2=lam / n, prox=rho, center=np.array([center, 0.0])
    )
    a, b = (solve_local(X, labels, SIGMOID, problem, tol=1e-12).x for labels in (y, flipped))
    return float(np.linalg.norm(a - b))


def test_a_consensus_client_with_the_sigmoid_loss_moves_less_than_its_sensitivity():
    """The attack's case, rho 0.1 and the global model (3, 0), moves the minimiser 7.5 times
    the convex-only sensitivity; the weakly convex one covers it at every centre."""
    cfg = ConsensusConfig(
        loss="sigmoid", mechanism="gaussian", epsilon=1.0, delta=1e-5, rho=0.1
    ).validated()
    bound = client_release(cfg, 1.0, 2, 300).l2_sensitivity
    convex_only = 2.0 * SIGMOID.lipschitz / ((1e-3 / 2 + 0.1) * 300)
    moves = [_consensus_move(c, 0.1) for c in np.linspace(0.0, 6.0, 25)]
    assert max(moves) > 7.0 * convex_only  # the hole
    assert max(moves) <= bound


def test_consensus_refuses_a_penalty_at_or_below_the_loss_s_curvature_floor():
    with pytest.raises(DpfedInputError, match="weak-convexity modulus"):
        ConsensusConfig(
            loss="sigmoid", mechanism="gaussian", epsilon=1.0, delta=1e-5, rho=0.05
        ).validated()
    with pytest.raises(DpfedInputError, match="strongly convex local problem"):
        consensus_sensitivity(
            c1=0.25,
            lam=0.05,
            n_clients=10,
            rho=0.09,
            m_i=100,
            weak_convexity=SIGMOID.weak_convexity,
        )
    # a convex loss keeps the paper's formula
    assert consensus_sensitivity(c1=1.0, lam=0.5, n_clients=5, rho=0.9, m_i=100) == 0.02
