"""Secure vertical logistic regression: the protocol against its simulation, the noise each
party adds, the sensitivities, the accounting and the refusals."""

from __future__ import annotations

import dp_accounting as dpa
import numpy as np
import pytest
import scipy.sparse as sp

from dpfed._validation import DpfedInputError
from dpfed.core.rows import clip_rows
from dpfed.protocols.vertical_secure import SecureSetup, train_secure_vertical
from dpfed.protocols.vertical_secure import party as party_module
from dpfed.protocols.vertical_secure.setup import DEFAULT_RIDGE

from ...conftest import make_vertical_problem_with_test


def _problem(n=400):
    blocks, y, test_blocks, y_test = make_vertical_problem_with_test(n=n, split=(4, 3))
    return blocks, y, test_blocks, y_test


def test_the_ckks_protocol_gives_the_model_of_its_plaintext_simulation():
    pytest.importorskip("tenseal")
    blocks, y, _, _ = _problem()
    setup = SecureSetup(400, (4, 3), 2.0, 1e-5, rounds=3)
    secure = train_secure_vertical(blocks, y, setup, seed=5, backend="ckks")
    plain = train_secure_vertical(blocks, y, setup, seed=5, backend="plain")
    for a, b in zip(secure.blocks, plain.blocks, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-3)
    assert secure.intercept == pytest.approx(plain.intercept, abs=2e-3)
    costs = secure.cost_summary()
    assert costs["bytes_per_round"] > 0 and costs["setup_bytes"] > 0
    assert len(secure.costs) == 2 * setup.rounds


def test_a_seed_makes_the_simulation_bit_identical():
    blocks, y, _, _ = _problem()
    setup = SecureSetup(400, (4, 3), 1.0, 1e-5)
    a = train_secure_vertical(blocks, y, setup, seed=3, backend="plain")
    b = train_secure_vertical(blocks, y, setup, seed=3, backend="plain")
    assert all(np.array_equal(u, v) for u, v in zip(a.blocks, b.blocks, strict=True))


def test_the_private_model_learns():
    blocks, y, test_blocks, y_test = _problem(n=3000)
    setup = SecureSetup(3000, (4, 3), 8.0, 1e-5)
    result = train_secure_vertical(blocks[:], y, setup, seed=0, backend="plain")
    accuracy = np.mean(np.sign(result.decision_function(test_blocks)) == y_test)
    assert accuracy > 0.85


class _Recorder(party_module.SecureParty):
    """Records the gradient each step receives instead of stepping."""

    def step(self, gradient, inverse):
        self.seen = gradient


def _noise_of(protect, evaluator_index, trials=400, split=(4, 3)):
    blocks, y, _, _ = make_vertical_problem_with_test(n=200, split=split)
    setup = SecureSetup(200, split, 1.0, 1e-5, protect=protect)
    y01 = (y > 0).astype(float)
    rngs = np.random.default_rng(0).spawn(len(split))
    parties = [
        _Recorder(j, X, setup, rngs[j], y=y01 if j == 0 else None, backend="plain")
        for j, X in enumerate(blocks)
    ]
    holder, folders = party_module.exchange_order(evaluator_index, len(split))
    evaluator = parties[evaluator_index]
    rows = evaluator.rows
    r = setup.polynomial(np.zeros(200)) - y01
    exact = np.asarray(rows.T @ r).ravel()
    draws = []
    for _ in range(trials):
        party_module.block_update(
            evaluator, parties[holder], np.eye(rows.shape[1]), None, [parties[f] for f in folders]
        )
        draws.append(evaluator.seen - exact)
    return np.array(draws), setup.gradient_sigma


@pytest.mark.parametrize(
    ("protect", "evaluator", "noises", "split"),
    [
        ("all", 0, 2, (4, 3)),
        ("all", 1, 2, (4, 3)),
        ("parties", 0, 2, (4, 3)),
        ("parties", 1, 2, (4, 3)),
        ("passive", 0, 1, (4, 3)),
        ("passive", 1, 1, (4, 3)),
        # a third party's scores are in every residual: an unprotected
        # label holder as key holder hides them from the passive evaluator
        ("passive", 0, 1, (4, 3, 2)),
        ("passive", 1, 2, (4, 3, 2)),
        ("passive", 2, 2, (4, 3, 2)),
        ("all", 2, 2, (4, 3, 2)),
    ],
)
def test_each_block_carries_the_noises_its_protection_needs(protect, evaluator, noises, split):
    draws, sigma = _noise_of(protect, evaluator, split=split)
    variance = draws.var(axis=0).mean()
    # 400 x d draws: the sample variance is within 10 % of noises * sigma^2
    assert variance == pytest.approx(noises * sigma**2, rel=0.1)
    assert abs(draws.mean()) < 4 * sigma * np.sqrt(noises / draws.size)


def test_a_block_gradient_moves_within_its_sensitivity_between_neighbours():
    """Worst cases of one record's change: flip the label, move every block's row to the
    norm bound in the direction that moves the score most, at random models on the balls."""
    rng = np.random.default_rng(1)
    setup = SecureSetup(50, (3, 2), 1.0, 1e-5)
    poly = setup.polynomial
    worst = 0.0
    for _ in range(300):
        w = [rng.normal(size=d) for d in setup.block_widths]
        w = [v * (r / np.linalg.norm(v)) for v, r in zip(w, setup.block_radii, strict=True)]
        x = [clip_rows(rng.normal(size=(2, 3)), 1.0), clip_rows(rng.normal(size=(2, 2)), 1.0)]
        x[0] = np.hstack([x[0], np.full((2, 1), setup.intercept_scale)])
        # push the second row to the extreme score -Z
        x[0][1, :3] = -w[0][:3] / np.linalg.norm(w[0][:3])
        x[1][1] = -w[1] / np.linalg.norm(w[1])
        z = x[0] @ w[0] + x[1] @ w[1]
        assert np.all(np.abs(z) <= poly.half_width * (1 + 1e-12))
        y = np.array([1.0, 0.0])
        g = [xj[0] * (poly(z[0]) - y[0]) - xj[1] * (poly(z[1]) - y[1]) for xj in x]
        worst = max(worst, float(np.sqrt(sum(np.sum(gj**2) for gj in g))))
    assert worst <= setup.gradient_sensitivity


def test_the_noise_multiplier_composes_to_the_target_in_dp_accounting():
    setup = SecureSetup(32561, (66, 57), 1.0, 1e-5)
    z, rounds = setup.noise_multiplier, setup.rounds
    event = dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(z), rounds + 1)
    accountant = dpa.pld.PLDAccountant()
    accountant.compose(event)
    epsilon = accountant.get_epsilon(1e-5)
    assert epsilon <= 1.0 + 1e-3
    assert epsilon >= 0.99
    assert setup.epsilon_spent() <= 1.0 + 1e-9


def test_the_ridge_is_a_public_constant_unless_the_job_sets_one():
    # the noise does not move it: the preconditioner's damping answers the noise
    ridges = {
        SecureSetup(n, (66, 57), epsilon, 1e-5).ridge_strength
        for n in (398, 32561)
        for epsilon in (0.5, 8.0)
    }
    assert ridges == {DEFAULT_RIDGE}
    assert SecureSetup(398, (15, 15), 1.0, 1e-5, ridge=0.01).ridge_strength == 0.01
    with pytest.raises(DpfedInputError, match="ridge"):
        SecureSetup(398, (15, 15), 1.0, 1e-5, ridge=0.0)


def test_setups_that_cannot_run_are_refused_by_name():
    for widths in ((2,), (2,) * 8):
        with pytest.raises(DpfedInputError, match="1 to 6 passive parties"):
            SecureSetup(100, widths, 1.0, 1e-5)
    with pytest.raises(DpfedInputError, match="protect"):
        SecureSetup(100, (2, 2), 1.0, 1e-5, protect="labels")
    blocks, y, _, _ = _problem()
    setup = SecureSetup(400, (4, 3), 1.0, 1e-5)
    with pytest.raises(DpfedInputError, match="widths"):
        train_secure_vertical([blocks[0], blocks[0]], y, setup, backend="plain")
    with pytest.raises(DpfedInputError, match="labels"):
        train_secure_vertical(blocks, y + 2, setup, backend="plain")


def test_sparse_blocks_are_accepted():
    blocks, y, _, _ = _problem()
    setup = SecureSetup(400, (4, 3), 1.0, 1e-5, rounds=2)
    dense = train_secure_vertical(blocks, y, setup, seed=1, backend="plain")
    sparse = train_secure_vertical(
        [sp.csr_matrix(b) for b in blocks], y, setup, seed=1, backend="plain"
    )
    for a, b in zip(dense.blocks, sparse.blocks, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-9)


def test_an_unprotected_label_holder_starts_from_its_own_model_and_no_other_does():
    from sklearn.linear_model import LogisticRegression

    blocks, y, _, _ = _problem()
    y01 = (y > 0).astype(float)
    rng = np.random.default_rng(0)
    passive_setup = SecureSetup(400, (4, 3), 1.0, 1e-5, protect="passive", radius=1e3)
    label = party_module.SecureParty(0, blocks[0], passive_setup, rng, y=y01, backend="plain")
    label.warm_start()
    own = LogisticRegression(C=1.0, max_iter=3000).fit(label.rows[:, :-1], y01)
    np.testing.assert_allclose(label.w[:-1], own.coef_[0])
    assert label.w[-1] * passive_setup.intercept_scale == pytest.approx(own.intercept_[0])
    protected = party_module.SecureParty(
        0, blocks[0], SecureSetup(400, (4, 3), 1.0, 1e-5), rng, y=y01, backend="plain"
    )
    with pytest.raises(DpfedInputError, match="unprotected label holder"):
        protected.warm_start()


def test_the_gram_release_carries_its_noise_and_its_sensitivity_holds():
    blocks, y, _, _ = _problem(n=200)
    setup = SecureSetup(200, (4, 3), 1.0, 1e-5)
    party = party_module.SecureParty(1, blocks[1], setup, np.random.default_rng(3), backend="plain")
    exact = np.asarray(party.rows.T @ party.rows)
    upper = np.triu_indices(exact.shape[0])
    draws = np.array([(party.gram_release() - exact)[upper] for _ in range(2000)])
    # each coordinate's noise has deviation sigma_G (the grid raises it by < 1e-6)
    assert draws.std() == pytest.approx(setup.gram_sigma, rel=0.03)
    released = party.gram_release()
    np.testing.assert_array_equal(released, released.T)
    # one row changed anywhere on the unit sphere, block by block: within Delta_G together
    rng = np.random.default_rng(4)
    worst = 0.0
    for _ in range(2000):
        moved = []
        for b in setup.row_bounds:
            x, x2 = rng.normal(size=(2, 4))
            x, x2 = b * x / np.linalg.norm(x), b * x2 / np.linalg.norm(x2)
            change = np.outer(x, x) - np.outer(x2, x2)
            moved.append(np.sum(change[np.triu_indices(4)] ** 2))
        worst = max(worst, float(np.sqrt(sum(moved))))
    assert worst <= setup.gram_sensitivity
    # and a label holder whose data is not protected releases its Gram exactly
    label = party_module.SecureParty(
        0,
        blocks[0],
        SecureSetup(200, (4, 3), 1.0, 1e-5, protect="passive"),
        np.random.default_rng(5),
        y=(y > 0).astype(float),
        backend="plain",
    )
    np.testing.assert_array_equal(label.gram_release(), label.rows.T @ label.rows)


def test_three_parties_run_the_ckks_protocol_as_its_simulation():
    """Each block update's powers pass through the third party, which folds its scores in
    under the key holder's key; the model is the plaintext simulation's up to CKKS rounding,
    with the passive weighting of two passive parties."""
    pytest.importorskip("tenseal")
    blocks, y, _, _ = make_vertical_problem_with_test(n=300, split=(3, 2, 2), n_test=10)
    setup = SecureSetup(300, (3, 2, 2), 2.0, 1e-5, rounds=2, degree=7, protect="parties")
    secure = train_secure_vertical(blocks, y, setup, seed=5, backend="ckks")
    plain = train_secure_vertical(blocks, y, setup, seed=5, backend="plain")
    for a, b in zip(secure.blocks, plain.blocks, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-3)
    assert secure.weighting is not None and plain.weighting is not None
    assert secure.weighting.beta == pytest.approx(plain.weighting.beta, abs=2e-3)
    assert len(secure.costs) == 3 * setup.rounds
    assert [c.block for c in secure.costs[:3]] == [0, 1, 2]


def test_only_an_evaluator_under_a_key_gets_its_rotation_keys():
    """Party 1's key serves block 0 (the label holder evaluates); the label holder's every
    other block: every passive party evaluates its own under it, and folds under party 1's."""
    from dpfed.protocols.vertical_secure.party import needs_rotations

    assert [needs_rotations(p, 1, 4) for p in (0, 2, 3)] == [True, False, False]
    assert [needs_rotations(p, 0, 4) for p in (1, 2, 3)] == [True, True, True]
    assert needs_rotations(0, 1, 2) and needs_rotations(1, 0, 2)


def test_a_third_party_adds_its_scores_to_every_other_block_update():
    """The simulation's residual of each block is the polynomial of all three parties'
    scores: a third party whose columns carry the signal makes the model learn."""
    blocks, y, test_blocks, y_test = make_vertical_problem_with_test(n=3000, split=(2, 2, 3))
    setup = SecureSetup(3000, (2, 2, 3), 8.0, 1e-5)
    result = train_secure_vertical(blocks, y, setup, seed=0, backend="plain")
    accuracy = np.mean(np.sign(result.decision_function(test_blocks)) == y_test)
    assert accuracy > 0.85
    assert len(result.blocks) == 3 and result.blocks[2].shape == (3,)
    assert np.linalg.norm(result.blocks[2]) > 0.1


def test_each_passive_partys_statistics_share_one_release_in_the_label_holders_view():
    two = SecureSetup(1000, (3, 2), 1.0, 1e-5, protect="passive")
    four = SecureSetup(1000, (3, 2, 2, 2), 1.0, 1e-5, protect="passive")
    assert four.release_count == two.release_count == four.rounds + 2
    ratio = four.statistics_release().noise_multiplier / four.noise_multiplier
    assert ratio == pytest.approx(np.sqrt(3))
    assert two.statistics_release().noise_multiplier == two.noise_multiplier
    # two more blocks of width 2: their gradients and Gram triangles (the statistics are off
    # the grid)
    assert four.coordinates - two.coordinates == four.rounds * 4 + 2 * 3
