"""The whole secure sum: exact totals, reproducible noise, dropouts, streaming, workers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.dca import MaskStream, secure_sum
from dpfed.dca.fixedpoint import decode, encode
from dpfed.dca.noise import client_noise
from dpfed.dca.synthetic import UniformClients

KEY = bytes(range(50, 82))


@pytest.fixture(scope="module")
def z():
    return np.random.default_rng(5).uniform(-3.0, 3.0, size=(57, 11))


def _expected_encoded(z, seed, std, f=24, clients=None):
    """sum_i enc(z_i + eta_i) with each client's noise computed on its own."""
    n, d = z.shape
    clients = range(n) if clients is None else clients
    rows = [z[i] + client_noise(seed, i, d, std) for i in clients]
    return encode(np.array(rows), n_summands=n, fractional_bits=f).sum(axis=0, dtype=np.uint64)


def test_total_is_the_sum_of_each_clients_noisy_encoding(z):
    res = secure_sum(z, noise_std=0.7, rng=123, compute_nodes=4, noise="gaussian")
    np.testing.assert_array_equal(res.total_encoded, _expected_encoded(z, 123, 0.7))
    np.testing.assert_array_equal(res.total, decode(res.total_encoded, 24))
    assert res.included.tolist() == list(range(57)) and res.dropped.size == 0
    assert res.received.tolist() == [57] * 4 and res.noise_std == 0.7


def test_without_noise_the_total_is_the_sum_up_to_rounding(z):
    res = secure_sum(z, noise_std=0.0, compute_nodes=3)
    assert np.max(np.abs(res.total - z.sum(axis=0))) <= 57 * 2.0**-25 + 1e-12


def test_node_sums_add_up_and_alone_reveal_nothing(z):
    res = secure_sum(z, noise_std=0.0, compute_nodes=5)
    assert res.node_sums.shape == (5, 11)
    np.testing.assert_array_equal(res.node_sums.sum(axis=0, dtype=np.uint64), res.total_encoded)
    small = encode(z.sum(axis=0), 1)  # the true sum is small; node sums are spread over 2^64
    for k in range(5):
        assert not np.array_equal(res.node_sums[k], small)
    top = (res.node_sums >> np.uint64(60)).reshape(-1)
    assert len(set(top.tolist())) > 8


def test_same_seed_same_sum_and_generator_seeds_work(z):
    a = secure_sum(z, noise_std=0.5, rng=np.random.default_rng(9), compute_nodes=3)
    b = secure_sum(z, noise_std=0.5, rng=np.random.default_rng(9), compute_nodes=7)
    c = secure_sum(z, noise_std=0.5, rng=np.random.default_rng(10), compute_nodes=3)
    np.testing.assert_array_equal(a.total, b.total)  # masks differ, the sum does not
    assert not np.array_equal(a.node_sums[0], b.node_sums[0])
    assert not np.array_equal(a.total, c.total)


@pytest.mark.parametrize("block_size", [1, 4, 13, 57, 100])
def test_streaming_blocks_give_the_same_result_as_one_array(z, block_size):
    whole = secure_sum(z, noise_std=0.3, rng=1, compute_nodes=4, mask_stream=MaskStream(KEY))
    by_callable = secure_sum(
        lambda a, b: z[a:b],
        n_clients=57,
        dim=11,
        noise_std=0.3,
        rng=1,
        compute_nodes=4,
        block_size=block_size,
        mask_stream=MaskStream(KEY),
    )
    pieces = [z[:5], z[5:6], z[6:40], z[40:]]
    by_iterable = secure_sum(
        iter(pieces),
        n_clients=57,
        noise_std=0.3,
        rng=1,
        compute_nodes=4,
        block_size=block_size,
        mask_stream=MaskStream(KEY),
    )
    for res in (by_callable, by_iterable):
        np.testing.assert_array_equal(res.total_encoded, whole.total_encoded)
        np.testing.assert_array_equal(res.node_sums, whole.node_sums)


@pytest.mark.parametrize(("m", "noise"), [(1, "gaussian"), (2, "discrete"), (6, "gaussian")])
def test_fast_explicit_and_encrypted_paths_agree_bit_for_bit(z, m, noise):
    noise_std = np.linspace(0.0, 1.0, 11) if noise == "gaussian" else 0.6
    kwargs = dict(
        noise_std=noise_std,
        rng=4,
        compute_nodes=m,
        noise=noise,
        dropped={3: [0], 20: [m - 1]},
        tolerated=2,
    )
    fast = secure_sum(z, mask_stream=MaskStream(KEY), **kwargs)
    explicit = secure_sum(z, mask_stream=MaskStream(KEY), materialize=True, block_size=8, **kwargs)
    sealed = secure_sum(z[:, :], mask_stream=MaskStream(KEY), encrypt=True, **kwargs)
    for res in (explicit, sealed):
        np.testing.assert_array_equal(res.node_sums, fast.node_sums)
        np.testing.assert_array_equal(res.total, fast.total)
    assert sealed.encrypted and sealed.materialized and not fast.materialized
    assert sealed.timing["encrypt"] > 0 and sealed.timing["decrypt"] > 0


@pytest.mark.parametrize("n, d, m", [(5, 30000, 6), (7, 1000, 3), (300, 37, 4)])
def test_mask_sums_across_stream_segments(n, d, m):
    """Clients wider than a 1 MiB stream segment, narrower, and not dividing it."""
    z = np.random.default_rng(n).uniform(-1, 1, size=(n, d))
    kwargs = dict(noise_std=0.0, compute_nodes=m, tolerated=2, dropped=[1, n - 1])
    fast = secure_sum(z, mask_stream=MaskStream(KEY), **kwargs)
    explicit = secure_sum(z, mask_stream=MaskStream(KEY), materialize=True, **kwargs)
    np.testing.assert_array_equal(fast.node_sums, explicit.node_sums)
    kept = [i for i in range(n) if i not in (1, n - 1)]
    assert np.max(np.abs(fast.total - z[kept].sum(axis=0))) < n * 2.0**-24


def test_dropped_clients_are_excluded_consistently(z):
    res = secure_sum(
        z,
        noise_std=0.2,
        rng=8,
        compute_nodes=3,
        tolerated=3,
        dropped={2: [1], 10: [0, 2], 30: [2]},
        noise="gaussian",
    )
    assert res.dropped.tolist() == [2, 10, 30]
    assert res.received.tolist() == [56, 56, 55]
    kept = [i for i in range(57) if i not in (2, 10, 30)]
    assert res.included.tolist() == kept
    np.testing.assert_array_equal(res.total_encoded, _expected_encoded(z, 8, 0.2, clients=kept))
    # the masks of the dropped clients were excluded at every node, so they cancel
    assert np.max(np.abs(res.total - z[kept].sum(axis=0))) < 10.0


def test_more_dropouts_than_tolerated_are_refused(z):
    with pytest.raises(DpfedInputError, match=r"3 clients.*tolerated = 2"):
        secure_sum(z, noise_std=0.2, rng=8, tolerated=2, dropped=[1, 2, 3])
    with pytest.raises(DpfedInputError, match="tolerated must be at most N - 1 = 56"):
        secure_sum(z, noise_std=0.2, rng=8, tolerated=57)


def test_overflow_names_the_client_and_dimension():
    z = np.zeros((1000, 4))
    z[617, 2] = 6.0e8  # above 2^63 / 1000 / 2^24 = 5.5e8
    with pytest.raises(DpfedInputError) as err:
        secure_sum(z, noise_std=0.0, block_size=100)
    msg = str(err.value)
    assert "values + noise[617, 2] = 600000000.0" in msg and "5.49756e+08" in msg
    res = secure_sum(z, noise_std=0.0, fractional_bits=20)  # fewer bits: fits
    assert res.total[2] == 6.0e8


def test_noise_needs_a_seed_and_zero_noise_does_not(z):
    with pytest.raises(DpfedInputError, match="rng"):
        secure_sum(z, noise_std=1.0)
    secure_sum(z, noise_std=np.zeros(11))


@pytest.mark.networked
def test_workers_give_the_same_sum(z):
    src = UniformClients(7, seed=2)
    one = secure_sum(src, n_clients=300, dim=7, noise_std=0.4, rng=3, block_size=32)
    two = secure_sum(src, n_clients=300, dim=7, noise_std=0.4, rng=3, block_size=32, workers=2)
    np.testing.assert_array_equal(two.total_encoded, one.total_encoded)
    assert two.workers == 2 and math.isfinite(two.timing["wall"])
    with pytest.raises(DpfedInputError, match="picklable"):
        secure_sum(lambda a, b: z[a:b], n_clients=57, dim=11, noise_std=0.0, workers=2)
    with pytest.raises(DpfedInputError, match="iterable"):
        secure_sum(iter([z]), n_clients=57, noise_std=0.0, workers=2)


def test_timing_reports_every_phase(z):
    res = secure_sum(z, noise_std=0.1, rng=0)
    for key in (
        "values",
        "noise_seeding",
        "noise_sampling",
        "encode",
        "masks",
        "sums",
        "agreement",
        "decode",
        "wall",
    ):
        assert res.timing[key] >= 0.0, key
    assert res.timing["wall"] >= res.timing["masks"]


def test_discrete_noise_is_added_exactly_in_the_ring(z):
    from dpfed.dca.discrete_noise import client_discrete_noise, ring_sigma2
    from dpfed.dca.noise import noise_seed

    seed, f = 11, 24
    res = secure_sum(
        z, noise_std=0.5, rng=seed, compute_nodes=3, noise="discrete", fractional_bits=f
    )
    s2 = ring_sigma2(0.5, f)
    base = noise_seed(seed)
    expected = sum(
        np.rint(np.ldexp(z[i], f)).astype(np.int64) + client_discrete_noise(base, i, z.shape[1], s2)
        for i in range(z.shape[0])
    )
    assert np.array_equal(res.total_encoded.view(np.int64), expected)
    assert res.noise == "discrete"
    again = secure_sum(
        z, noise_std=0.5, rng=seed, compute_nodes=3, noise="discrete", fractional_bits=f, workers=2
    )
    assert np.array_equal(again.total_encoded, res.total_encoded)


def test_the_default_noise_is_exact_and_per_coordinate_noise_must_ask_for_floats(z):
    default = secure_sum(z, noise_std=0.5, rng=4, compute_nodes=3)
    exact = secure_sum(z, noise_std=0.5, rng=4, compute_nodes=3, noise="discrete")
    assert default.noise == "discrete"
    np.testing.assert_array_equal(default.total_encoded, exact.total_encoded)
    with pytest.raises(DpfedInputError, match="noise='gaussian'"):
        secure_sum(z, noise_std=np.linspace(0.5, 1.0, 11), rng=1)
    floats = secure_sum(z, noise_std=np.linspace(0.5, 1.0, 11), rng=1, noise="gaussian")
    assert floats.noise == "gaussian"


@pytest.mark.parametrize(
    ("noise_std", "noise", "match"),
    [
        (np.linspace(0.5, 1.0, 11), "discrete", "one noise_std for every coordinate"),
        (1.0, "laplace", "noise must be one of"),
    ],
)
def test_discrete_noise_refuses_what_it_cannot_draw(z, noise_std, noise, match):
    with pytest.raises(DpfedInputError, match=match):
        secure_sum(z, noise_std=noise_std, rng=1, noise=noise)
