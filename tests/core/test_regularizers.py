import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpfed.core import L1, L2, Ball, Box, ElasticNet

vectors = arrays(np.float64, 5, elements=st.floats(-100, 100))


@pytest.mark.parametrize("reg", [L2(), L1(), ElasticNet(0.3)])
@settings(max_examples=60, deadline=None)
@given(v=vectors, w=vectors, t=st.floats(0.0, 10.0))
def test_prox_is_nonexpansive(reg, v, w, t):
    assert np.linalg.norm(reg.prox(v, t) - reg.prox(w, t)) <= np.linalg.norm(v - w) + 1e-9


@pytest.mark.parametrize("reg", [L2(), L1(), ElasticNet(0.3)])
def test_prox_minimises_its_objective(reg):
    rng = np.random.default_rng(0)
    v, t = rng.normal(size=6), 0.7
    x = reg.prox(v, t)

    def f(u):
        return t * reg.value(u) + 0.5 * np.sum((u - v) ** 2)

    for _ in range(200):
        assert f(x) <= f(x + 0.05 * rng.normal(size=6)) + 1e-12


@pytest.mark.parametrize("feasible", [Ball(2.0), Box(-0.5, 1.0)])
@settings(max_examples=60, deadline=None)
@given(v=vectors)
def test_projection_is_feasible_and_idempotent(feasible, v):
    p = feasible.project(v)
    assert feasible.contains(p)
    assert np.allclose(feasible.project(p), p)


@pytest.mark.parametrize("reg", [L2(), L1(), ElasticNet(0.5)])
def test_prox_then_ball_projection_is_the_constrained_prox(reg):
    rng = np.random.default_rng(3)
    ball = Ball(0.5)
    v, t = 3 * rng.normal(size=4), 0.4
    x = ball.project(reg.prox(v, t))

    def f(u):
        return t * reg.value(u) + 0.5 * np.sum((u - v) ** 2)

    for _ in range(500):
        u = ball.project(x + 0.1 * rng.normal(size=4))
        assert f(x) <= f(u) + 1e-10
