"""Per-client noise: the same for a client whatever computes it."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.dca.noise import client_noise, client_noise_generator, noise_seed, resolve_noise_std


def test_client_noise_is_numpys_spawned_child_stream():
    seed = 2**100 + 17
    child = np.random.SeedSequence(seed).spawn(6)[5]
    expected = np.random.Generator(np.random.SFC64(child)).standard_normal(9) * 0.3
    np.testing.assert_array_equal(client_noise(seed, 5, 9, 0.3), expected)


def test_clients_get_different_noise_and_per_dimension_scales():
    a = client_noise(1, 0, 1000, 1.0)
    b = client_noise(1, 1, 1000, 1.0)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.15
    scale = np.linspace(0.0, 2.0, 1000)
    np.testing.assert_array_equal(client_noise(1, 0, 1000, scale), a * scale)
    g = client_noise_generator(1, 0)
    np.testing.assert_array_equal(g.standard_normal(1000), a)


def test_seed_from_a_generator_is_reproducible():
    s1 = noise_seed(np.random.default_rng(3))
    assert s1 == noise_seed(np.random.default_rng(3)) and 0 <= s1 < 2**128
    assert noise_seed(42) == 42
    with pytest.raises(DpfedInputError, match="Generator or an integer"):
        noise_seed(-1)
    with pytest.raises(DpfedInputError, match="Generator or an integer"):
        noise_seed(np.random.RandomState(0))


def test_noise_std_is_validated():
    assert resolve_noise_std(0.5, 3)[0] == 0.5
    scalar, per_dim = resolve_noise_std([0.0, 1.0, 2.0], 3)
    assert scalar is None and per_dim.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(DpfedInputError, match="shape \\(3,\\)"):
        resolve_noise_std([1.0, 2.0], 3)
    with pytest.raises(DpfedInputError, match="finite and >= 0"):
        resolve_noise_std(-1.0, 3)
    with pytest.raises(DpfedInputError, match="at 1"):
        resolve_noise_std([1.0, np.nan, 1.0], 3)
