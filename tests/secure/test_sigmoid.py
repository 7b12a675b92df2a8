"""The sigmoid polynomial: its fit, its certified residual bound and its shifted form."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.secure.sigmoid import SigmoidPolynomial


@pytest.mark.parametrize(("degree", "half_width"), [(1, 4.0), (3, 8.0), (7, 23.0), (9, 30.0)])
def test_the_residual_bound_holds_on_a_dense_grid_and_near_the_ends(degree, half_width):
    poly = SigmoidPolynomial.fit(degree, half_width)
    z = np.concatenate(
        [
            np.linspace(-half_width, half_width, 200_001),
            half_width * (1 - np.logspace(-12, -1, 50)),
            -half_width * (1 - np.logspace(-12, -1, 50)),
        ]
    )
    p = poly(z)
    assert np.max(np.abs(p)) <= poly.residual_bound
    assert np.max(np.abs(1 - p)) <= poly.residual_bound
    # and the bound is not vacuous: within 1 % of the largest residual seen
    assert poly.residual_bound <= 1.01 * max(np.max(np.abs(p)), np.max(np.abs(1 - p)))


def test_degree_seven_tracks_the_sigmoid_where_logistic_scores_live():
    poly = SigmoidPolynomial.fit(7, 23.0)
    z = np.linspace(-6, 6, 1001)
    assert np.max(np.abs(poly(z) - 1 / (1 + np.exp(-z)))) < 0.11
    # it is increasing through 0 and centred
    assert abs(poly(np.array([0.0]))[0] - 0.5) < 1e-9
    assert poly(np.array([2.0]))[0] > poly(np.array([-2.0]))[0]


def test_the_shifted_coefficients_reproduce_the_polynomial_of_a_sum():
    rng = np.random.default_rng(0)
    poly = SigmoidPolynomial.fit(7, 20.0)
    t_own, t_other = rng.uniform(-0.5, 0.5, (2, 1000))
    coefficients = poly.shifted(t_own)
    assert len(coefficients) == 8
    value = sum(c * t_other**m for m, c in enumerate(coefficients))
    np.testing.assert_allclose(value, poly(20.0 * (t_own + t_other)), atol=1e-12)


@pytest.mark.parametrize(("degree", "half_width"), [(0, 4.0), (16, 4.0), (3, 0.0), (3, np.inf)])
def test_bad_parameters_are_refused_by_name(degree, half_width):
    with pytest.raises(DpfedInputError, match=r"degree|half width"):
        SigmoidPolynomial.fit(degree, half_width)
