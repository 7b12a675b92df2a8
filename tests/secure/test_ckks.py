"""CKKS over TenSEAL: 128-bit parameters, no secret key in the public context, and the
products the protocol needs, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("tenseal")

from dpfed._validation import DpfedInputError
from dpfed.secure import ckks
from dpfed.secure.sigmoid import SigmoidPolynomial


@pytest.fixture(scope="module")
def holder():
    return ckks.KeyHolder()


def test_seal_refuses_parameters_above_the_128_bit_bound():
    ts = ckks.tenseal()
    with pytest.raises(ValueError, match="not set correctly"):
        ts.context(
            ts.SCHEME_TYPE.CKKS,
            poly_modulus_degree=ckks.POLY_MODULUS_DEGREE,
            coeff_mod_bit_sizes=[60, 60, 60, 60],
        )
    assert sum(ckks.COEFF_MODULUS_BITS) <= 218  # HomomorphicEncryption.org, N = 8192


def test_the_public_context_has_no_secret_key(holder):
    public = ckks.PublicContext.from_bytes(holder.public_bytes())
    assert not public.context.is_private()
    assert not public.context.has_secret_key()


def test_a_context_with_its_secret_key_is_refused_as_public(holder):
    data = holder._context.serialize(save_secret_key=True)
    with pytest.raises(DpfedInputError, match="secret key"):
        ckks.PublicContext.from_bytes(data)


def test_transposed_product_of_the_polynomial_residual_matches_numpy(holder):
    rng = np.random.default_rng(1)
    n, d = 9000, 7  # three chunks, the last one padded
    X = sp.random(n, d, density=0.2, random_state=2, format="csr")
    poly = SigmoidPolynomial.fit(5, 10.0)
    t_other = rng.uniform(-0.5, 0.5, n)
    t_own = rng.uniform(-0.5, 0.5, n)
    y = rng.integers(0, 2, n).astype(float)
    public = ckks.PublicContext.from_bytes(holder.public_bytes())
    powers = [public.load(holder.encrypt(t_other**m)) for m in range(1, 6)]
    coefficients = poly.shifted(t_own)
    coefficients[0] = coefficients[0] - y
    residual = ckks.combine_powers(powers, coefficients)
    offset = rng.normal(0, 3, d)
    out = holder.decrypt_sums(ckks.transposed_product(residual, X, offset=offset))
    expected = X.T @ (poly(10.0 * (t_own + t_other)) - y) + offset
    np.testing.assert_allclose(out, expected, atol=1e-3)


def test_mismatched_chunks_and_rows_are_refused(holder):
    public = ckks.PublicContext.from_bytes(holder.public_bytes())
    chunks = public.load(holder.encrypt(np.ones(10)))
    with pytest.raises(DpfedInputError, match="chunks"):
        ckks.transposed_product(chunks, np.ones((5000, 2)))
    with pytest.raises(DpfedInputError, match="finite"):
        holder.encrypt(np.array([1.0, np.nan]))


def test_a_key_pair_pickles_as_itself(holder):
    """An engine moves a party's role, key pair included, to the process that runs it."""
    import pickle

    moved = pickle.loads(pickle.dumps(holder))
    ciphertexts = holder.encrypt(np.array([0.25, -1.5]))
    np.testing.assert_allclose(moved.decrypt_sums(ciphertexts), [0.25], atol=1e-6)
    back = moved.encrypt(np.array([3.0]))
    np.testing.assert_allclose(holder.decrypt_sums(back), [3.0], atol=1e-6)


def test_contexts_with_more_levels_stay_within_the_128_bit_bound():
    ts = ckks.tenseal()
    assert ckks.parameters(2) == (ckks.POLY_MODULUS_DEGREE, ckks.COEFF_MODULUS_BITS)
    for levels in range(3, ckks.MAX_LEVELS + 1):
        ring, bits = ckks.parameters(levels)
        assert ring == ckks.WIDE_POLY_MODULUS_DEGREE and len(bits) == levels + 2
        assert sum(bits) <= ckks.WIDE_MODULUS_BOUND
    with pytest.raises(ValueError, match="not set correctly"):
        ts.context(
            ts.SCHEME_TYPE.CKKS,
            poly_modulus_degree=ckks.WIDE_POLY_MODULUS_DEGREE,
            coeff_mod_bit_sizes=[60] * 8,
        )  # 480 bits
    for levels in (1, ckks.MAX_LEVELS + 1, True):
        with pytest.raises(DpfedInputError, match="multiplicative levels"):
            ckks.parameters(levels)


def test_folded_powers_are_the_powers_of_the_sum_and_feed_the_residual():
    """Three parties: the key holder's powers, folded by a second party, combined by the
    third, then the transposed product: as numpy computes it, at 8,192 slots."""
    rng = np.random.default_rng(4)
    keys = ckks.KeyHolder(levels=3)
    public = ckks.PublicContext(keys._context)  # (serialising a wide context takes seconds)
    assert public.slots == 8192
    # a folder's context has no rotation keys: 1 MB, where the evaluator's is 118 MB
    folding = ckks.PublicContext.from_bytes(keys.public_bytes(rotations=False))
    assert not folding.context.has_galois_keys() and folding.slots == 8192
    n, d, degree = 9000, 3, 5  # two chunks, the last one padded
    t_holder, t_folder, t_own = (rng.uniform(-0.3, 0.3, n) for _ in range(3))
    powers = [folding.load(keys.encrypt(t_holder**m)) for m in range(1, degree + 1)]
    folded = ckks.fold_powers(powers, t_folder)
    folded = [public.load([bytes(c.serialize()) for c in chunks]) for chunks in folded]
    assert len(folded) == degree and all(len(chunks) == 2 for chunks in folded)
    for m in (1, degree):
        got = np.concatenate(
            [np.asarray(c.decrypt(keys._context.secret_key())) for c in folded[m - 1]]
        )[:n]
        np.testing.assert_allclose(got, (t_holder + t_folder) ** m, atol=1e-5)
    poly = SigmoidPolynomial.fit(degree, 10.0)
    residual = ckks.combine_powers(folded, poly.shifted(t_own))
    X = rng.uniform(0, 1, (n, d))
    out = keys.decrypt_sums(ckks.transposed_product(residual, X))
    expected = X.T @ poly(10.0 * (t_holder + t_folder + t_own))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-2)
