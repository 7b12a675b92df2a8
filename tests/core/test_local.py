"""Newton's method on the weighted, ridge, linear-shifted, proximal local problem."""

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp

from dpfed._validation import DpfedInputError
from dpfed.core.local import (
    LocalProblem,
    LocalSolveError,
    local_objective,
    solve_local,
)
from dpfed.core.losses import get_loss


def _data(n=80, d=6, seed=0, real=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    w = rng.normal(size=d)
    score = 3.0 * X @ w + 0.3 * rng.normal(size=n)
    y = score if real else np.where(score > 0, 1.0, -1.0)
    return X, y


def _problem(n, d, seed, *, per_row: bool, terms: str = "all") -> LocalProblem:
    rng = np.random.default_rng(100 + seed)
    weight = rng.uniform(0.2, 2.0, size=n) if per_row else float(rng.uniform(0.5, 3.0))
    if terms == "ridge":
        return LocalProblem(loss_weight=weight, l2=0.3)
    if terms == "prox":
        return LocalProblem(loss_weight=weight, l2=0.0, prox=0.7, center=rng.normal(size=d))
    return LocalProblem(
        loss_weight=weight,
        l2=float(rng.uniform(0.05, 1.0)),
        linear=rng.normal(size=d),
        prox=float(rng.uniform(0.1, 2.0)),
        center=rng.normal(size=d),
    )


def _gradient(X, y, loss, p: LocalProblem, f):
    g = X.T @ (p.loss_weight * loss.derivative(X @ f, y)) + p.l2 * f
    if p.linear is not None:
        g = g + p.linear
    if p.prox:
        g = g + p.prox * (f - (0.0 if p.center is None else p.center))
    return g


def _reference(X, y, loss, p: LocalProblem):
    res = scipy.optimize.minimize(
        lambda f: local_objective(X, y, loss, p, f),
        np.zeros(X.shape[1]),
        jac=lambda f: _gradient(X, y, loss, p, f),
        method="L-BFGS-B",
        options={"gtol": 1e-13, "ftol": 1e-16, "maxiter": 20000, "maxcor": 30},
    )
    return res.x


CASES = [
    ("logistic", False, "all"),
    ("logistic", True, "all"),
    ("logistic", True, "ridge"),
    ("logistic", False, "prox"),
    ("squared", False, "all"),
    ("squared", True, "all"),
    ("smoothed_hinge", True, "all"),
]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name, per_row, terms", CASES)
def test_newton_matches_lbfgs(name, per_row, terms, seed):
    X, y = _data(seed=seed, real=name == "squared")
    loss = get_loss(name)
    p = _problem(*X.shape, seed, per_row=per_row, terms=terms)
    sol = solve_local(X, y, loss, p)
    ref = _reference(X, y, loss, p)
    np.testing.assert_allclose(sol.x, ref, atol=1e-6)
    assert local_objective(X, y, loss, p, sol.x) <= local_objective(X, y, loss, p, ref) + 1e-12
    # the reported gradient norm is the true one and below the tolerance
    g = _gradient(X, y, loss, p, sol.x)
    scale = max(1.0, float(np.sum(np.broadcast_to(p.loss_weight, (X.shape[0],)))))
    assert sol.gradient_norm == pytest.approx(np.linalg.norm(g), rel=1e-6, abs=1e-14)
    assert np.linalg.norm(g) <= 1e-10 * scale
    assert sol.iterations >= 1


@pytest.mark.parametrize("per_row", [False, True])
def test_sparse_and_dense_rows_give_the_same_minimiser(per_row):
    X, y = _data(n=120, d=8, seed=3)
    X[np.abs(X) < 0.2] = 0.0  # some structural zeros
    loss = get_loss("logistic")
    p = _problem(*X.shape, 3, per_row=per_row)
    dense = solve_local(X, y, loss, p)
    sparse = solve_local(sp.csr_matrix(X), y, loss, p)
    np.testing.assert_allclose(sparse.x, dense.x, rtol=0, atol=1e-10)
    scale = max(1.0, float(np.sum(np.broadcast_to(p.loss_weight, (X.shape[0],)))))
    assert sparse.gradient_norm <= 1e-10 * scale


def test_warm_start_reaches_the_same_minimiser_in_fewer_iterations():
    X, y = _data(n=150, d=6, seed=4)
    loss = get_loss("logistic")
    p = _problem(*X.shape, 4, per_row=True)
    cold = solve_local(X, y, loss, p)
    far = solve_local(X, y, loss, p, x0=np.full(X.shape[1], 5.0))
    near = solve_local(X, y, loss, p, x0=cold.x + 1e-3)
    np.testing.assert_allclose(far.x, cold.x, atol=1e-10)
    np.testing.assert_allclose(near.x, cold.x, atol=1e-10)
    assert near.iterations <= cold.iterations
    # the starting point is not modified in place
    x0 = np.ones(X.shape[1])
    solve_local(X, y, loss, p, x0=x0)
    np.testing.assert_array_equal(x0, np.ones(X.shape[1]))


def test_already_optimal_start_takes_no_iteration():
    X, y = _data(seed=5)
    loss = get_loss("logistic")
    p = _problem(*X.shape, 5, per_row=False)
    sol = solve_local(X, y, loss, p)
    again = solve_local(X, y, loss, p, x0=sol.x)
    assert again.iterations == 0
    np.testing.assert_array_equal(again.x, sol.x)


def test_too_few_iterations_raise_local_solve_error():
    X, y = _data(seed=6)
    loss = get_loss("logistic")
    p = LocalProblem(loss_weight=50.0, l2=1e-3)  # far from the start, badly conditioned
    with pytest.raises(LocalSolveError, match="not released"):
        solve_local(X, y, loss, p, max_iterations=1)
    with pytest.raises(LocalSolveError):
        solve_local(X, y, loss, p, max_iterations=0)
    assert solve_local(X, y, loss, p).gradient_norm <= 1e-10 * 50.0 * X.shape[0]


def test_quadratic_problem_has_the_closed_form_minimiser():
    X, y = _data(seed=7, real=True)
    rng = np.random.default_rng(7)
    a, q, s = 0.4, 0.2, 1.3
    b, c = rng.normal(size=X.shape[1]), rng.normal(size=X.shape[1])
    p = LocalProblem(loss_weight=a, l2=q, linear=b, prox=s, center=c)
    sol = solve_local(X, y, get_loss("squared"), p)
    H = a * X.T @ X + (q + s) * np.eye(X.shape[1])
    expected = np.linalg.solve(H, a * X.T @ y - b + s * c)
    np.testing.assert_allclose(sol.x, expected, atol=1e-11)
    assert sol.iterations <= 2  # Newton is exact on a quadratic


@pytest.mark.parametrize("weight", [0.0, -1.0, np.nan, np.inf, np.array([1.0, 0.0, 2.0])])
def test_bad_loss_weights_are_refused(weight):
    with pytest.raises(DpfedInputError, match="loss_weight"):
        LocalProblem(loss_weight=weight, l2=1.0)


@pytest.mark.parametrize(
    "l2, prox", [(0.0, 0.0), (-1.0, 2.0), (1.0, -0.5), (np.nan, 1.0), (1.0, np.inf)]
)
def test_problems_without_strong_convexity_are_refused(l2, prox):
    with pytest.raises(DpfedInputError, match="strong"):
        LocalProblem(loss_weight=1.0, l2=l2, prox=prox)


def test_prox_alone_or_ridge_alone_is_enough():
    LocalProblem(loss_weight=1.0, l2=0.0, prox=0.1)
    LocalProblem(loss_weight=np.ones(3), l2=0.1, prox=0.0)


@pytest.mark.parametrize("name", ["logistic", "squared", "smoothed_hinge", "sigmoid"])
def test_second_derivative_matches_finite_differences(name):
    loss = get_loss(name)
    rng = np.random.default_rng(11)
    z = rng.uniform(-4.0, 4.0, size=400)
    y = rng.normal(size=z.size) if name == "squared" else rng.choice([-1.0, 1.0], size=z.size)
    h = 1e-6
    if name == "smoothed_hinge":  # keep away from the kinks of h'' at m = 1 and m = 1 - gamma
        m = y * z
        keep = (np.abs(m - 1.0) > 1e-3) & (np.abs(m - (1.0 - loss.gamma)) > 1e-3)
        z, y = z[keep], y[keep]
    numeric = (loss.derivative(z + h, y) - loss.derivative(z - h, y)) / (2.0 * h)
    np.testing.assert_allclose(loss.second_derivative(z, y), numeric, rtol=1e-6, atol=1e-8)
    assert loss.second_derivative(z, y).shape == z.shape


def test_a_warm_start_next_to_the_minimiser_is_not_refused():
    """A strongly convex problem whose terms are ~1e6 and cancel (F* ~ 0); the warm start lies
    1e-7 from the minimiser (gradient ~1e-7, far above the tolerance ~6e-9) at the point of
    its neighbourhood where F happens to round lowest."""
    loss = get_loss("logistic")
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X, y = _data(n=60, d=5, seed=seed)
        R = 1e3
        c = rng.normal(size=5)
        c *= R / np.linalg.norm(c)
        u = rng.normal(size=5)
        u *= np.sqrt(2.0) * R / np.linalg.norm(u)
        p = LocalProblem(loss_weight=1.0, l2=1.0, linear=c + u, prox=1.0, center=c)
        near = solve_local(X, y, loss, p, tol=1e-6).x
        candidates = near + 1e-7 * rng.normal(size=(1000, 5))
        x0 = candidates[np.argmin([local_objective(X, y, loss, p, x) for x in candidates])]
        sol = solve_local(X, y, loss, p, x0=x0)  # raises LocalSolveError
        np.testing.assert_allclose(sol.x, near, atol=1e-5)
