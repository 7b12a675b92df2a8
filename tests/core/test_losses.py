import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from dpfed import DpfedInputError
from dpfed.core import LOSSES, get_loss

BINARY = ["logistic", "smoothed_hinge", "sigmoid"]


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("rho", [0.3, 1.0, 25.0])
def test_prox_solves_the_scalar_problem(name, rho):
    loss = get_loss(name)
    rng = np.random.default_rng(1)
    v = rng.normal(0, 4, 64)
    y = rng.choice([-1.0, 1.0], 64) if loss.binary else rng.normal(size=64)
    z = loss.prox(v, y, rho)

    def objective(t, vi, yi):
        return loss.value(np.array([t]), np.array([yi]))[0] + 0.5 * rho * (t - vi) ** 2

    for zi, vi, yi in zip(z, v, y, strict=True):
        ref = minimize_scalar(objective, args=(vi, yi), bracket=(vi - 10, vi + 10), tol=1e-12).x
        assert objective(zi, vi, yi) <= objective(ref, vi, yi) + 1e-12
    # first-order optimality wherever the loss is differentiable
    grad = loss.derivative(z, y) + rho * (z - v)
    assert np.max(np.abs(grad)) < 1e-8


@pytest.mark.parametrize("name", list(LOSSES))
def test_derivative_matches_finite_differences(name):
    loss = get_loss(name)
    rng = np.random.default_rng(2)
    z = rng.normal(0, 3, 50)
    y = rng.choice([-1.0, 1.0], 50)
    h = 1e-6
    fd = (loss.value(z + h, y) - loss.value(z - h, y)) / (2 * h)
    assert np.allclose(loss.derivative(z, y), fd, atol=1e-6)


@pytest.mark.parametrize("name", ["logistic", "smoothed_hinge", "squared"])
@settings(max_examples=50, deadline=None)
@given(a=st.floats(-50, 50), b=st.floats(-50, 50), rho=st.floats(0.01, 100))
def test_prox_of_convex_loss_is_nonexpansive(name, a, b, rho):
    loss = get_loss(name)
    y = np.array([1.0, 1.0])
    z = loss.prox(np.array([a, b]), y, rho)
    assert abs(z[0] - z[1]) <= abs(a - b) + 1e-9


def test_sigmoid_loss_refuses_a_penalty_below_its_weak_convexity():
    loss = get_loss("sigmoid")
    with pytest.raises(DpfedInputError, match="weak-convexity"):
        loss.prox(np.zeros(3), np.ones(3), 0.05)


def test_sigmoid_curvature_bound_holds():
    loss = get_loss("sigmoid")
    m = np.linspace(-20, 20, 200001)
    assert np.max(np.abs(loss._d2h(m))) <= loss.smoothness + 1e-12
    assert np.max(np.abs(loss._d2h(m))) > 0.99 * loss.smoothness


def test_unknown_loss_is_named():
    with pytest.raises(DpfedInputError, match="'hinge'"):
        get_loss("hinge")
