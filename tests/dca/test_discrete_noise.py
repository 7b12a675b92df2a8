"""Tests for dpfed.dca.discrete_noise: each client's exact noise in the ring."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfed.dca.discrete_noise import client_discrete_noise, ring_sigma2
from dpfed.privacy.discrete import discrete_gaussian_variance


def test_ring_sigma2_rounds_up_exactly():
    assert ring_sigma2(1.0, 24) == 2**48
    s2 = ring_sigma2(0.3, 10)
    assert s2 >= (0.3 * 1024) ** 2 and s2 - (0.3 * 1024) ** 2 < 1


def test_client_noise_is_reproducible_per_client():
    a = client_discrete_noise(7, 3, 500, 10**6)
    assert a.dtype == np.int64 and a.shape == (500,)
    assert np.array_equal(a, client_discrete_noise(7, 3, 500, 10**6))
    assert not np.array_equal(a, client_discrete_noise(7, 4, 500, 10**6))
    assert not np.array_equal(a, client_discrete_noise(8, 3, 500, 10**6))


@pytest.mark.parametrize("sigma2", [3, 2**40])
def test_sum_of_clients_noise_has_n_times_the_variance(sigma2):
    # the distributed discrete Gaussian: the sum over n clients has variance n Var(N_Z(0, s^2))
    n, d = 200, 2000
    total = np.zeros(d, dtype=np.int64)
    for i in range(n):
        total += client_discrete_noise(11, i, d, sigma2)
    var = n * discrete_gaussian_variance(sigma2)
    assert total.var() == pytest.approx(var, rel=5 * math.sqrt(2 / d))
    assert abs(total.mean()) < 5 * math.sqrt(var / d)
