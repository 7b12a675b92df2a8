"""Tests that could fail if a noise scale or sensitivity of the vertical mechanisms is wrong."""

import itertools
import math

import numpy as np
import pytest

from dpfed import DpfedInputError
from dpfed.core import L2, Ball
from dpfed.core.losses import get_loss
from dpfed.core.rows import clip_rows
from dpfed.core.spectral import GramSpectrum
from dpfed.core.xupdate import make_local_solver
from dpfed.privacy.accounting import corollary1_epsilon
from dpfed.protocols.vertical.calibration import (
    SoundBounds,
    lemma1_bound,
    split_noise_multiplier,
    theorem1_epsilon,
    theorem1_sigma,
)
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical
from dpfed.protocols.vertical.mechanisms import PaperMechanism, SoundMechanism
from dpfed.protocols.vertical.roles import LOCAL_MODEL_TOLERANCE
from dpfed.protocols.vertical.weighting import fit_local_model

from ...conftest import make_vertical_problem


def test_theorem1_sigma_with_hand_computed_numbers():
    # d_m=66, rho=0.25, lam=3.2561, c1=1, b1=10, M=2:
    # C = 3/(66*0.25) * (3.2561 + (1 + 0.5)*10) = 0.181818... * 18.2561 = 3.31929...
    c = lemma1_bound(d_m=66, rho=0.25, lam=3.2561, c1=1.0, b1=10.0, n_parties=2)
    assert c == pytest.approx(3.0 / 16.5 * 18.2561, rel=1e-12)
    # sigma = sqrt(2 ln(1.25/1e-5)) * C / 0.5 = 4.84481... * C * 2
    sigma = theorem1_sigma(l2_bound=c, epsilon=0.5, delta=1e-5)
    assert sigma == pytest.approx(math.sqrt(2 * math.log(125000.0)) * c / 0.5, rel=1e-12)
    assert sigma == pytest.approx(32.1627, rel=1e-4)
    assert theorem1_epsilon(l2_bound=c, sigma=sigma, delta=1e-5) == pytest.approx(0.5)


def test_paper_noise_has_variance_sigma_squared_in_the_column_space():
    rng = np.random.default_rng(0)
    D = rng.normal(size=(30, 4))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    spectrum = GramSpectrum(D)
    mech = PaperMechanism(
        d_m=4, n_parties=2, reg_weight=1.0, c1=1.0, b1=3.0, delta_step=1e-5, sigma=0.7
    )
    noise = np.array(
        [
            mech.release(
                np.zeros(4), block=D, spectrum=spectrum, rho=1.0, round=1, party="p", rng=rng
            ).scores
            for _ in range(20000)
        ]
    )
    # D xi has covariance sigma^2 P with P the projection onto the column space of D
    q, _ = np.linalg.qr(D)
    coords = noise @ q
    assert np.allclose(np.var(coords, axis=0), 0.49, rtol=0.05)
    assert np.allclose(noise - coords @ q.T, 0.0, atol=1e-9)


def test_sound_release_noise_matches_the_calibration():
    rng = np.random.default_rng(1)
    D = rng.normal(size=(50, 3))
    bounds = SoundBounds(row_norm=1.0, model_radius=2.0, target_clip=1.0, score_clip=1.0)
    mech = SoundMechanism(
        bounds=bounds, reg_weight=5.0, model_multiplier=3.0, scores_multiplier=2.0
    )
    mech.check_regularizer(L2(), 5.0)
    block = mech.prepare_block(D)
    assert np.all(np.linalg.norm(block, axis=1) <= 1.0 + 1e-12)
    model_release, scores_release = mech.releases(rho=0.5)
    assert model_release.l2_sensitivity == pytest.approx(2 * 0.5 * 1 * (2 + 1) / 5.0)
    assert model_release.sigma == pytest.approx(3.0 * model_release.l2_sensitivity)
    assert scores_release.l2_sensitivity == pytest.approx(2.0)
    assert scores_release.sigma == pytest.approx(4.0)
    draws = np.array(
        [
            mech.release(
                np.zeros(3), block=block, spectrum=None, rho=0.5, round=1, party="p", rng=rng
            ).scores
            for _ in range(4000)
        ]
    )
    signal = np.clip(block @ np.zeros(3), -1, 1)
    # the model noise moves the scores a little; the scores noise dominates
    assert np.var(draws - signal) == pytest.approx(16.0, rel=0.08)


def test_model_sensitivity_bound_holds_against_adversarial_rows():
    """Replace one row in many ways; the exact x-update never moves more than Delta_x."""
    rng = np.random.default_rng(2)
    n, d = 60, 4
    bounds = SoundBounds(row_norm=1.0, model_radius=1.5, target_clip=2.0, score_clip=1.0)
    lam_s, rho = 2.0, 1.5
    bound = bounds.model_sensitivity(rho=rho, strong_convexity=lam_s)
    worst = 0.0
    for trial in range(200):
        D = rng.normal(size=(n, d))
        D /= np.maximum(1.0, np.linalg.norm(D, axis=1, keepdims=True))
        c = np.clip(3 * rng.normal(size=n), -2, 2)
        D2 = D.copy()
        row = rng.normal(size=d)
        D2[trial % n] = row / np.linalg.norm(row)
        x1 = make_local_solver(D, L2(), lam_s, Ball(1.5)).solve(c, rho, np.zeros(d))
        x2 = make_local_solver(D2, L2(), lam_s, Ball(1.5)).solve(c, rho, np.zeros(d))
        worst = max(worst, np.linalg.norm(x1 - x2))
    assert worst <= bound
    assert worst > 0.05 * bound  # the bound is not vacuous for this problem


def test_budget_split_composes_to_the_round_multiplier():
    zx, zu = split_noise_multiplier(2.0, 0.3)
    assert 1 / zx**2 + 1 / zu**2 == pytest.approx(1 / 4.0)
    with pytest.raises(DpfedInputError, match="model_fraction"):
        split_noise_multiplier(2.0, 1.0)


def test_calibrated_sound_run_spends_at_most_its_target_and_more_rounds_spend_more():
    blocks, y = make_vertical_problem(split=(3, 2))
    spent = []
    for iterations in (2, 4):
        res = train_vertical(
            blocks,
            y,
            VerticalConfig(
                mechanism="sound", epsilon=2.0, delta=1e-5, iterations=iterations, seed=0, lam=1e-2
            ),
        )
        assert res.privacy["epsilon"] <= 2.0
        assert res.privacy["epsilon"] >= 1.95
        eps_path = [h["epsilon"] for h in res.history]
        assert all(b > a for a, b in itertools.pairwise(eps_path))
        spent.append(eps_path[0])
    assert spent[0] > spent[1]  # fewer rounds: more budget (less noise) per round


def test_paper_noise_sigma_reports_theorem1_and_corollary1_however_large():
    blocks, y = make_vertical_problem(split=(3, 2))
    res = train_vertical(
        blocks,
        y,
        VerticalConfig(
            mechanism="paper", noise_sigma=0.01, delta=1e-5, iterations=3, seed=0, lam=1e-2
        ),
    )
    party = res.privacy["per_party"]["party1"]
    n = y.shape[0]
    c = lemma1_bound(d_m=2, rho=0.25, lam=n * 1e-2, c1=1.0, b1=5 * math.sqrt(n), n_parties=2)
    eps_step = theorem1_epsilon(l2_bound=c, sigma=0.01, delta=1e-5 / 6)
    assert party["epsilon_step"] == pytest.approx(eps_step)
    assert party["epsilon_step"] > 1000
    assert party["paper_epsilon"] == math.inf or party["paper_epsilon"] > 1e6
    assert party["epsilon"] is None and res.privacy["epsilon"] is None
    assert any("outside Theorem 1" in note for note in res.privacy["notes"])


def test_paper_target_epsilon_is_met_by_corollary1():
    blocks, y = make_vertical_problem(split=(3, 2))
    res = train_vertical(
        blocks,
        y,
        VerticalConfig(mechanism="paper", epsilon=1.0, delta=1e-5, iterations=4, seed=0, lam=1e-2),
    )
    party = res.privacy["per_party"]["party1"]
    assert corollary1_epsilon(party["epsilon_step"], 4, 0.5e-5) == pytest.approx(1.0, rel=1e-6)
    assert party["paper_delta"] == pytest.approx(1e-5)
    assert party["paper_epsilon_pld"] <= party["paper_epsilon"]
    # the formula is met, but it is the paper's, not a certified epsilon
    assert res.privacy["epsilon"] is None
    assert res.privacy["paper_epsilon"] == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mechanism="sound", epsilon=0.0, delta=1e-5), "epsilon"),
        (dict(mechanism="sound", epsilon=-1.0, delta=1e-5), "epsilon"),
        (dict(mechanism="sound", epsilon=1.0, delta=1.0), "delta"),
        (dict(mechanism="sound", epsilon=1.0), "needs delta"),
        (dict(mechanism="none", epsilon=1.0), "need a privacy mechanism"),
        (
            dict(mechanism="paper", regularizer="l1", epsilon=1.0, delta=1e-5),
            "twice differentiable",
        ),
        (
            dict(
                mechanism="sound",
                epsilon=1.0,
                delta=1e-5,
                protect_label_holder=True,
                adaptive_rho=True,
            ),
            "adaptive rho",
        ),
    ],
)
def test_bad_privacy_settings_are_refused(kwargs, match):
    blocks, y = make_vertical_problem(split=(3, 2))
    with pytest.raises(DpfedInputError, match=match):
        train_vertical(blocks, y, VerticalConfig(iterations=2, **kwargs))


def test_protected_label_holder_spends_on_its_model_and_broadcast():
    blocks, y = make_vertical_problem(split=(3, 2))
    res = train_vertical(
        blocks,
        y,
        VerticalConfig(
            mechanism="sound",
            epsilon=3.0,
            delta=1e-5,
            iterations=3,
            seed=0,
            lam=1e-2,
            protect_label_holder=True,
        ),
    )
    events = [(e.round, e.label) for e in res.ledger.events("label")]
    # round 0: its regularised local model and the first dual; then one dual per round but
    # the last (nothing goes out after it); its block stays as released
    assert sorted(events) == [(0, "dual"), (0, "model"), (1, "dual"), (2, "dual")]
    assert res.privacy["per_party"]["label"]["epsilon"] <= 3.0
    assert res.privacy["per_party"]["party1"]["epsilon"] <= 3.0
    assert not any("not protected" in n for n in res.privacy["notes"])
    with pytest.raises(DpfedInputError, match="warm start"):
        train_vertical(
            blocks,
            y,
            VerticalConfig(
                mechanism="sound",
                epsilon=3.0,
                delta=1e-5,
                iterations=3,
                protect_label_holder=True,
                warm_start_rounds=5,
            ),
        )


def test_last_round_scores_are_not_released_and_nothing_new_is_sent(monkeypatch):
    from dpfed.protocols.vertical import Scores

    blocks, y = make_vertical_problem(split=(3, 2))
    cfg = VerticalConfig(mechanism="sound", epsilon=8.0, delta=1e-5, iterations=3, seed=0)
    res = train_vertical(blocks, y, cfg)
    labels = [(e.round, e.label) for e in res.ledger.events("party1")]
    assert labels == [
        (1, "model"),
        (1, "scores"),
        (2, "model"),
        (2, "scores"),
        (3, "model"),
        (3, "statistics"),  # the passive weighting's three numbers, not scores
    ]
    # replay the protocol and watch the wire: round 3 carries round 2's scores again
    from dpfed.engines import inprocess

    sent = []
    original = inprocess.InProcessEngine.run

    def spy(self, roles, initial):
        for role in roles.values():
            handle = role.handle

            def wrapped(message, _handle=handle):
                out = _handle(message)
                sent.extend(m for m in out if isinstance(m, Scores))
                return out

            role.handle = wrapped
        return original(self, roles, initial)

    monkeypatch.setattr(inprocess.InProcessEngine, "run", spy)
    train_vertical(blocks, y, cfg)
    assert [m.round for m in sent] == [1, 2, 3]
    assert np.array_equal(sent[2].scores, sent[1].scores)
    assert not np.array_equal(sent[1].scores, sent[0].scores)


def test_a_protected_label_holders_local_model_moves_at_most_its_sensitivity():
    """Round 0's output perturbation: replacing one row and its label moves the regularised
    local model by at most 2(LR + g)/mu; adversarial replacements come near the bound."""
    rng = np.random.default_rng(3)
    n, d, R, mu = 200, 5, 1.0, 4.0
    X = clip_rows(rng.normal(0, 1, (n, d)), R)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    loss = get_loss("logistic")
    bounds = SoundBounds(
        row_norm=R, model_radius=2.0, target_clip=4.0, score_clip=0.5, prox_weight=mu
    )
    mech = SoundMechanism(
        bounds=bounds, reg_weight=0.0, model_multiplier=1.0, scores_multiplier=1.0
    )
    mech.check_regularizer(L2(), 0.0)
    g = LOCAL_MODEL_TOLERANCE * R
    bound = mech.local_model_release(loss, g, n).l2_sensitivity
    assert bound == pytest.approx(2 * (R + g) / mu)
    x = fit_local_model(X, y, loss, mu, tolerance=g)
    worst = 0.0
    for _ in range(100):
        i = rng.integers(n)
        X2, y2 = X.copy(), y.copy()
        direction = -y[i] * x / max(np.linalg.norm(x), 1e-12)  # against the model, label flipped
        X2[i] = R * (direction if rng.random() < 0.7 else clip_rows(rng.normal(0, 1, (1, d)), R)[0])
        y2[i] = -y[i]
        moved = float(np.linalg.norm(fit_local_model(X2, y2, loss, mu, tolerance=g) - x))
        assert moved <= bound
        worst = max(worst, moved)
    assert worst > bound / 20  # the bound is not vacuous


@pytest.mark.parametrize("row_norm", [1.0, 2.5])
def test_the_intercept_column_keeps_the_row_bound_and_splits_back(row_norm):
    """The label holder's bounded rows with the intercept column stay within R (so every
    sensitivity holds as derived), and (coef, intercept) reproduce the prepared rows' scores."""
    bounds = SoundBounds(
        row_norm=row_norm, model_radius=5.0, target_clip=3.0, score_clip=2.0, dual_clip=1.0
    )
    mech = SoundMechanism(
        bounds=bounds, reg_weight=1.0, model_multiplier=2.0, scores_multiplier=2.0
    )
    mech.intercept_scale = 0.25
    X = np.random.default_rng(0).normal(scale=3.0, size=(50, 4))
    rows = mech.prepare_block(X)
    assert rows.shape == (50, 5)
    assert np.max(np.linalg.norm(rows, axis=1)) <= row_norm
    np.testing.assert_allclose(rows[:, -1], 0.25 * row_norm)
    assert mech.intercept_column() == 0.25 * row_norm
    w = np.random.default_rng(1).normal(size=5)
    coef, intercept = mech.split_intercept(w)
    np.testing.assert_allclose(rows @ w, mech.bound_rows(X) @ coef + intercept, atol=1e-9)
