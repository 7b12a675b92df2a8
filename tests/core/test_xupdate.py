import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from dpfed.core import L1, L2, Ball, Box, ElasticNet, Unconstrained
from dpfed.core.spectral import GramSpectrum
from dpfed.core.xupdate import ProximalGradientSolver, SpectralSolver, make_local_solver


def _problem(n, d, seed=0, sparse=False):
    rng = np.random.default_rng(seed)
    D = rng.normal(size=(n, d))
    if sparse:
        D[rng.random((n, d)) < 0.6] = 0.0
        D = sp.csr_matrix(D)
    return D, rng.normal(size=n), rng.normal(size=d)


def _objective(D, c, x, lam, rho, tau=0.0, center=None):
    r = np.asarray(D @ x).reshape(-1) - c
    val = 0.5 * lam * x @ x + 0.5 * rho * r @ r
    if tau:
        val += 0.5 * tau * np.sum((x - center) ** 2)
    return val


@pytest.mark.parametrize("shape", [(40, 5), (6, 30)])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("tau", [0.0, 0.8])
def test_spectral_solver_matches_the_normal_equations(shape, sparse, tau):
    D, c, center = _problem(*shape, sparse=sparse)
    lam, rho = 0.3, 1.7
    solver = make_local_solver(D, L2(), lam, Unconstrained())
    assert isinstance(solver, SpectralSolver)
    assert solver.spectrum.mode == ("primal" if shape[1] <= shape[0] else "dual")
    x = solver.solve(c, rho, np.zeros(shape[1]), tau=tau, center=center)
    Dd = D.toarray() if sparse else D
    A = (lam + tau) * np.eye(shape[1]) + rho * Dd.T @ Dd
    ref = np.linalg.solve(A, rho * Dd.T @ c + tau * center)
    assert np.allclose(x, ref, atol=1e-9)


@pytest.mark.parametrize("shape", [(40, 5), (6, 30)])
def test_spectral_solver_on_a_ball_is_the_constrained_minimiser(shape):
    D, c, _ = _problem(*shape, seed=4)
    c = 10 * c
    lam, rho, radius = 0.2, 1.0, 0.3
    solver = make_local_solver(D, L2(), lam, Ball(radius))
    x = solver.solve(c, rho, np.zeros(shape[1]))
    assert np.linalg.norm(x) <= radius * (1 + 1e-9)
    ref = minimize(
        lambda u: _objective(D, c, u, lam, rho),
        np.zeros(shape[1]),
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": lambda u: radius**2 - u @ u}],
        options={"ftol": 1e-14, "maxiter": 1000},
    ).x
    ref = Ball(radius).project(ref)  # SLSQP may step just outside the ball
    assert _objective(D, c, x, lam, rho) <= _objective(D, c, ref, lam, rho) + 1e-7


def test_rank_deficient_block_without_regularisation_gives_minimum_norm_solution():
    D, c, _ = _problem(30, 4, seed=5)
    D = np.hstack([D, D[:, :1]])  # duplicated column: rank 4 of 5
    solver = make_local_solver(D, L2(), 0.0)
    x = solver.solve(c, 1.0, np.zeros(5))
    assert np.allclose(x, np.linalg.pinv(D) @ c, atol=1e-8)


@pytest.mark.parametrize("reg", [L1(), ElasticNet(0.5)])
@pytest.mark.parametrize("feasible", [Unconstrained(), Box(-0.2, 0.2), Ball(0.4)])
def test_fista_reaches_the_composite_minimum(reg, feasible):
    D, c, _ = _problem(50, 6, seed=6)
    lam, rho = 2.0, 1.0
    solver = make_local_solver(D, reg, lam, feasible, inner_iterations=5000)
    assert isinstance(solver, ProximalGradientSolver)
    x = solver.solve(c, rho, np.zeros(6))
    assert feasible.contains(x, tol=1e-9)

    def f(u):
        r = D @ u - c
        return lam * reg.value(u) + 0.5 * rho * r @ r

    rng = np.random.default_rng(0)
    for _ in range(300):
        u = feasible.project(x + 0.02 * rng.normal(size=6))
        assert f(x) <= f(u) + 1e-8


def test_spectrum_noise_has_the_pseudo_inverse_covariance():
    D, _, _ = _problem(20, 4, seed=7)
    spec = GramSpectrum(D)
    rng = np.random.default_rng(0)
    draws = np.array([spec.pinv_sqrt_apply(rng.standard_normal(spec.rank)) for _ in range(40000)])
    cov = np.cov(draws.T)
    target = np.linalg.inv(D.T @ D)
    assert np.allclose(cov, target, rtol=0.05, atol=0.05 * np.abs(target).max())


def test_wide_spectrum_noise_projects_to_unit_variance_scores():
    D, _, _ = _problem(5, 12, seed=8)
    spec = GramSpectrum(D)
    assert spec.mode == "dual" and spec.rank == 5
    rng = np.random.default_rng(1)
    scores = np.array([D @ spec.pinv_sqrt_apply(rng.standard_normal(5)) for _ in range(40000)])
    assert np.allclose(np.cov(scores.T), np.eye(5), atol=0.05)
