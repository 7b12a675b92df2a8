import numpy as np
import pytest

from dpfed.core.anderson import AndersonAcceleration


def _linear_map(n=20, contraction=0.95, seed=0):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    a = q @ np.diag(np.linspace(0.1, contraction, n)) @ q.T
    b = rng.standard_normal(n)
    fixed = np.linalg.solve(np.eye(n) - a, b)
    return (lambda w: a @ w + b), fixed


def _iterations_to(tol, step, g, start):
    w = start
    for k in range(1, 500):
        value = g(w)
        if np.linalg.norm(value - w) <= tol:
            return k
        w = step(w, value)
    return 500


def test_anderson_reaches_the_fixed_point_in_fewer_evaluations_than_plain_iteration():
    g, fixed = _linear_map()
    start = np.zeros_like(fixed)
    plain = _iterations_to(1e-8, lambda w, v: v, g, start)
    aa = AndersonAcceleration(5)
    accelerated = _iterations_to(1e-8, aa.step, g, start)
    assert accelerated < plain / 3
    assert aa.rejections == 0


def test_an_extrapolation_whose_residual_grows_is_rejected_and_the_memory_cleared():
    aa = AndersonAcceleration(3)
    aa.step(np.zeros(2), np.ones(2))
    nxt = aa.step(np.ones(2), np.full(2, 1.5))
    assert aa.extrapolated
    # the next evaluation is worse than the one before: plain step, memory of one
    out = aa.step(nxt, nxt + 10.0)
    assert aa.rejections == 1 and len(aa.points) == 1 and not aa.extrapolated
    np.testing.assert_array_equal(out, nxt + 10.0)


def test_state_round_trip_continues_identically():
    g, _ = _linear_map(seed=1)
    a, b = AndersonAcceleration(4), AndersonAcceleration(4)
    w = np.zeros(20)
    for _ in range(6):
        w = a.step(w, g(w))
    b.load_state_dict(*a.state_dict())
    wa = wb = w
    for _ in range(5):
        wa, wb = a.step(wa, g(wa)), b.step(wb, g(wb))
    np.testing.assert_array_equal(wa, wb)


def test_bad_memory_or_state_is_refused():
    with pytest.raises(ValueError, match="memory"):
        AndersonAcceleration(0)
    with pytest.raises(ValueError, match="both"):
        AndersonAcceleration(2).load_state_dict(
            {"points": np.zeros((2, 3))},
            {"last_norm": None, "extrapolated": False, "rejections": 0},
        )
