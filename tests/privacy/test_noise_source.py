"""Noise from a simulation seed or from a party's own secret."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from dpfed._validation import DpfedInputError
from dpfed.privacy.noise_source import (
    SECRET_BYTES,
    generator_state,
    new_secret,
    restore_generator_state,
    secret_generator,
    simulation_generator,
)


def test_simulation_streams_are_the_seed_sequence_spawns():
    want = np.random.default_rng(np.random.SeedSequence(7).spawn(3)[2]).standard_normal(5)
    np.testing.assert_array_equal(simulation_generator(7, 2, 3).standard_normal(5), want)
    with pytest.raises(DpfedInputError, match="index must be below n_parties = 3"):
        simulation_generator(7, 3, 3)


def test_a_secret_gives_the_same_stream_and_another_secret_another():
    secret = new_secret()
    assert len(secret) == SECRET_BYTES and secret != new_secret()
    a = secret_generator(secret).standard_normal(1000)
    np.testing.assert_array_equal(secret_generator(secret).standard_normal(1000), a)
    assert not np.allclose(secret_generator(new_secret()).standard_normal(1000), a)
    assert not np.allclose(secret_generator(secret, "other purpose").standard_normal(1000), a)


def test_secret_noise_is_standard_normal():
    draws = secret_generator(b"\x01" * 32).standard_normal(200_000)
    assert stats.kstest(draws, "norm").pvalue > 1e-3
    assert draws.var() == pytest.approx(1.0, rel=0.02)


def test_the_secret_stream_is_not_a_seeded_numpy_stream():
    """Knowing the secret's bytes as a numpy seed does not give the stream (it is keyed)."""
    secret = bytes(range(32))
    stream = secret_generator(secret).standard_normal(10)
    as_seed = np.random.default_rng(int.from_bytes(secret, "little")).standard_normal(10)
    assert not np.allclose(stream, as_seed)


@pytest.mark.parametrize(
    "make",
    [
        lambda: simulation_generator(3, 0, 2),
        lambda: secret_generator(b"k" * 32),
    ],
)
def test_states_survive_json_and_continue_the_stream(make):
    rng = make()
    rng.standard_normal(17)
    saved = json.loads(json.dumps(generator_state(rng)))
    want = rng.standard_normal(50)
    other = make()
    restore_generator_state(other, saved)
    np.testing.assert_array_equal(other.standard_normal(50), want)


def test_a_state_of_another_kind_of_generator_is_refused():
    saved = generator_state(simulation_generator(3, 0, 2))
    with pytest.raises(DpfedInputError, match="noise source changed"):
        restore_generator_state(secret_generator(b"k" * 32), saved)


def test_short_secrets_are_refused():
    with pytest.raises(DpfedInputError, match="at least 16 bytes"):
        secret_generator(b"short")
