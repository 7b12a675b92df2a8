import numpy as np

from dpfed.core.admm import ResidualBalancing, Residuals, dual_update, residuals, z_update
from dpfed.core.losses import get_loss


def test_dual_after_z_update_is_the_loss_derivative():
    loss = get_loss("logistic")
    rng = np.random.default_rng(0)
    s, y, lab = rng.normal(size=30), rng.normal(size=30), rng.choice([-1.0, 1.0], 30)
    z = z_update(loss, s, y, lab, 0.7)
    assert np.allclose(dual_update(y, s, z, 0.7), loss.derivative(z, lab), atol=1e-9)


def test_residual_balancing_moves_rho_towards_balance():
    bal = ResidualBalancing(ratio=10, factor=2)
    assert bal.next_rho(1.0, Residuals(100.0, 1.0, 0, 0)) == 2.0
    assert bal.next_rho(1.0, Residuals(1.0, 100.0, 0, 0)) == 0.5
    assert bal.next_rho(1.0, Residuals(5.0, 1.0, 0, 0)) == 1.0


def test_residuals_and_tolerances():
    s, z = np.ones(4), np.zeros(4)
    res = residuals(s, z, z, np.zeros(4), 2.0, abs_tol=0.1, rel_tol=0.0)
    assert res.primal == 2.0 and res.dual == 0.0 and res.eps_primal == 0.2
    assert not res.converged
