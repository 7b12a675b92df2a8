"""The label holder's weight of the passive scores in the secure mode: the statistics'
sensitivities, the encrypted path against the clear one, the accounting, and the bound."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.core.losses import get_loss
from dpfed.data import load_dataset
from dpfed.privacy.accounting import releases_epsilon
from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical
from dpfed.protocols.vertical_secure.weighting import (
    LIPSCHITZ,
    SMOOTHNESS,
    ScoreStatisticsRelease,
    choose_weight,
    encrypted_request,
    encrypted_statistics,
    plain_statistics,
    split_request,
    weighting_request,
)


def _release(n, bound=2.0, z=1.0):
    return ScoreStatisticsRelease(n, bound, LIPSCHITZ, SMOOTHNESS, z)


def _mean_loss(scores, y01):
    return float(np.mean(get_loss("logistic").value(scores, np.where(y01 > 0, 1.0, -1.0))))


def test_one_row_moves_the_normalised_statistics_by_at_most_one():
    """Replace one passive row: its score moves anywhere in [-V, V]; the worst case over the
    label holder's r and c at their bounds stays within the release's l2 sensitivity 1."""
    rng = np.random.default_rng(0)
    n, bound = 50, 2.0
    release = _release(n, bound)
    worst = 0.0
    for _ in range(200):
        own = rng.normal(0.0, 3.0, n)
        y01 = (rng.random(n) < 0.5).astype(float)
        request = weighting_request(own, y01, bound)
        scores = rng.uniform(-bound, bound, n)
        base = release.normalised(scores, request)
        for value in (-bound, -0.5 * bound, 0.0, 0.5 * bound, bound, 10.0 * bound):
            changed = scores.copy()
            changed[rng.integers(n)] = value  # beyond V is clipped, as the party does
            moved = float(np.linalg.norm(release.normalised(changed, request) - base))
            worst = max(worst, moved)
    assert 0.3 < worst <= 1.0 + 1e-12


def test_the_weight_bounds_the_training_loss_it_predicts_and_refuses_useless_scores():
    rng = np.random.default_rng(1)
    n = 20_000
    x_own, x_passive = rng.normal(size=n), rng.normal(size=n)
    y01 = (rng.random(n) < 1.0 / (1.0 + np.exp(-(x_own + 1.5 * x_passive)))).astype(float)
    own = 0.8 * x_own
    request = weighting_request(own, y01, 2.0)
    release = _release(n, z=0.5)
    for scores, helps in ((1.2 * x_passive, True), (rng.normal(size=n), False)):
        noise = release.noise(np.random.default_rng(2))
        chosen = choose_weight(release, request, plain_statistics(release, scores, request, noise))
        change = _mean_loss(own + chosen.share(scores), y01) - _mean_loss(own, y01)
        assert change <= chosen.weight.predicted_change + 1e-12
        if helps:
            assert chosen.beta > 0.3 and change < -0.01
        else:
            assert chosen.beta == 0.0 and change == 0.0


def test_the_encrypted_statistics_are_the_clear_ones():
    pytest.importorskip("tenseal")
    from dpfed.secure import ckks

    rng = np.random.default_rng(3)
    n = 5000  # two ciphertext chunks
    request = weighting_request(rng.normal(size=n), (rng.random(n) < 0.4).astype(float), 2.0)
    scores = rng.normal(0.0, 1.5, n)
    release = _release(n)
    noise = release.noise(np.random.default_rng(4))
    keys = ckks.KeyHolder()
    public = ckks.PublicContext.from_bytes(keys.public_bytes())
    encrypted = split_request(encrypted_request(keys, request), n, keys.slots)
    assert [len(v) for v in encrypted] == [2, 2, 3]
    decrypted = keys.decrypt_sums(encrypted_statistics(release, public, encrypted, scores, noise))
    np.testing.assert_allclose(
        decrypted, plain_statistics(release, scores, request, noise), atol=1e-4
    )


def test_weighing_costs_one_more_release_of_the_passive_rows_and_the_budget_holds():
    passive = SecureSetup(1000, (5, 5), 1.0, 1e-5, protect="passive")
    everything = SecureSetup(1000, (5, 5), 1.0, 1e-5, protect="all")
    assert passive.weighted and not everything.weighted
    assert (passive.release_count, everything.release_count) == (12, 11)
    assert len(passive.releases()) == 12
    for setup in (passive, everything):
        assert releases_epsilon(setup.releases(), setup.delta) <= setup.epsilon + 1e-9
    assert passive.noise_multiplier > everything.noise_multiplier


@pytest.mark.parametrize("epsilon", [0.5, 8.0])
def test_the_weighed_model_is_not_worse_than_the_label_holders_own_on_its_training_rows(epsilon):
    data = load_dataset("breast_cancer")
    blocks = [data.X_train[:, :15], data.X_train[:, 15:]]
    setup = SecureSetup(blocks[0].shape[0], (15, 15), epsilon, 1e-5, protect="passive", rounds=3)
    result = train_secure_vertical(blocks, data.y_train, setup, seed=0, backend="plain")
    assert result.weighting is not None
    y01 = (data.y_train > 0).astype(float)
    own = result.blocks[0]
    alone = result.decision_function([blocks[0], 0.0 * blocks[1]])  # its own model alone
    weighed = _mean_loss(result.decision_function(blocks), y01)
    assert weighed <= _mean_loss(alone, y01) + 1e-12
    assert own.shape == (15,) and result.privacy()["releases"] == setup.rounds + 2


def test_the_statistics_noise_has_the_release_deviation():
    """2,000 draws, all three added inside the ciphertexts: deviation ``z`` each, within 10 %
    (the sample deviation of 2,000 normal draws is within 5 % with probability above 0.99)."""
    z = 3.0
    release = _release(1000, z=z)
    rng = np.random.default_rng(5)
    draws = np.array([release.noise(rng) for _ in range(2000)])
    np.testing.assert_allclose(draws.std(axis=0), z, rtol=0.1)
    assert np.all(np.abs(draws.mean(axis=0)) < 4 * z / np.sqrt(2000))


def test_a_request_of_the_wrong_length_is_refused_naming_the_count():
    with pytest.raises(DpfedInputError, match="holds 7 ciphertexts; found 6"):
        split_request([b""] * 6, 5000, 4096)


def test_the_per_row_remainder_beats_the_constant_one_and_the_weight_grows():
    """The same statistics with the constant bound (coefficients 1) and with the per-row
    ones: the per-row cubic statistic is smaller, the weight larger, and the training loss it
    predicts still bounds the true one."""
    rng = np.random.default_rng(6)
    n = 20_000
    x_own, x_passive = rng.normal(size=n), rng.normal(size=n)
    y01 = (rng.random(n) < 1.0 / (1.0 + np.exp(-(2.0 * x_own + 1.5 * x_passive)))).astype(float)
    own, scores = 1.6 * x_own, 1.2 * x_passive
    release = _release(n, z=0.5)
    per_row = weighting_request(own, y01, 2.0)
    constant = replace(per_row, rising=np.ones(n), falling=np.ones(n))
    noise = np.zeros(3)
    chosen = {}
    for name, request in (("per row", per_row), ("constant", constant)):
        released = plain_statistics(release, scores, request, noise)
        chosen[name] = choose_weight(release, request, released)
        change = _mean_loss(own + chosen[name].share(scores), y01) - _mean_loss(own, y01)
        assert change <= chosen[name].weight.predicted_change + 1e-12
    assert chosen["per row"].weight.cubic < 0.5 * chosen["constant"].weight.cubic
    assert chosen["per row"].beta > chosen["constant"].beta
