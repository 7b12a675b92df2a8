"""The in-process consensus job: configuration, reproducibility, privacy block, history."""

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.core.local import LocalProblem, solve_local
from dpfed.core.losses import get_loss
from dpfed.core.rows import with_intercept
from dpfed.privacy.accounting import gaussian_epsilon, moments_accountant_epsilon
from dpfed.protocols.consensus.calibration import calibrate_consensus
from dpfed.protocols.consensus.driver import (
    ConsensusConfig,
    client_epsilon,
    client_release,
    train_consensus,
)

HISTORY_KEYS = (
    "iteration",
    "seconds",
    "train_objective",
    "test_log_loss",
    "test_accuracy",
    "epsilon",
)


def make_parts(sizes=(60, 90, 120, 150), d=6, seed=0, n_test=200):
    """Client parts (rows of norm <= 1, labels of a noisy linear rule) and test rows."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)

    def draw(m):
        X = rng.normal(size=(m, d))
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
        return X, np.where(3.0 * X @ w + 0.3 * rng.normal(size=m) > 0, 1.0, -1.0)

    return [draw(m) for m in sizes], *draw(n_test)


PARTS, X_TEST, Y_TEST = make_parts()
PRIVATE = dict(
    lam=0.1, rho=0.5, iterations=6, mechanism="gaussian", epsilon=2.0, delta=1e-5, accountant="rdp"
)


# -- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, match",
    [
        (dict(mechanism="laplace"), "mechanism must be one of"),
        (
            dict(mechanism="gaussian", epsilon=1.0, delta=1e-5, accountant="basic"),
            "accountant must be one of",
        ),
        (dict(epsilon=1.0), "need mechanism 'gaussian'"),
        (dict(noise_multiplier=2.0), "need mechanism 'gaussian'"),
        (dict(mechanism="gaussian", epsilon=1.0), "needs delta"),
        (
            dict(mechanism="gaussian", epsilon=1.0, noise_multiplier=2.0, delta=1e-5),
            "exactly one of epsilon or noise_multiplier",
        ),
        (dict(mechanism="gaussian", delta=1e-5), "exactly one of epsilon or noise_multiplier"),
        (dict(mechanism="gaussian", loss="squared", epsilon=1.0, delta=1e-5), "bounded derivative"),
        (dict(mechanism="gaussian", epsilon=0.0, delta=1e-5), "epsilon"),
        (dict(mechanism="gaussian", noise_multiplier=-1.0, delta=1e-5), "noise_multiplier"),
        (dict(mechanism="gaussian", epsilon=1.0, delta=1.0), "delta"),
        (dict(loss="hinge"), "loss must be one of"),
        (dict(lam=0.0), "lam"),
        (dict(rho=-1.0), "rho"),
        (dict(iterations=0), "iterations"),
        (dict(relaxation=2.0), "relaxation"),
        (dict(relaxation=0.0), "relaxation"),
        (dict(average_last=0), "average_last"),
    ],
)
def test_invalid_configurations_are_refused(changes, match):
    with pytest.raises(DpfedInputError, match=match):
        ConsensusConfig(**changes).validated()


def test_valid_configurations_pass():
    cfg = ConsensusConfig(mechanism="gaussian", epsilon=1.0, delta=1e-5)
    assert cfg.validated() is cfg
    ConsensusConfig(mechanism="gaussian", noise_multiplier=3.0, delta=1e-5).validated()
    ConsensusConfig(loss="squared").validated()  # without noise any loss will do


def test_bad_parts_are_refused():
    (X1, y1), (X2, y2) = PARTS[:2]
    with pytest.raises(DpfedInputError, match="same columns"):
        train_consensus([(X1, y1), (X2[:, :-1], y2)])
    with pytest.raises(DpfedInputError, match="labels"):
        train_consensus([(X1, y1[:-1]), (X2, y2)])
    with pytest.raises(DpfedInputError, match="distinct client names"):
        train_consensus([(X1, y1), (X2, y2)], names=["a", "a"])
    with pytest.raises(DpfedInputError, match="binary"):
        train_consensus([(X1, 2.0 * y1), (X2, y2)])  # labels not binary
    with pytest.raises(DpfedInputError, match="at least one client"):
        train_consensus([])


# -- runs -------------------------------------------------------------------------------------


def _strip_seconds(history):
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history]


def test_seeded_runs_are_reproducible():
    cfg = ConsensusConfig(**PRIVATE, seed=4)
    a = train_consensus(PARTS, cfg, X_test=X_TEST, y_test=Y_TEST)
    b = train_consensus(PARTS, cfg, X_test=X_TEST, y_test=Y_TEST)
    c = train_consensus(PARTS, ConsensusConfig(**PRIVATE, seed=5), X_test=X_TEST, y_test=Y_TEST)
    assert np.array_equal(a.model, b.model)
    assert _strip_seconds(a.history) == _strip_seconds(b.history)
    assert a.privacy == b.privacy
    assert not np.array_equal(a.model, c.model)


def _centralized(lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The minimiser of eq. 1a over every part's rows (each part's loss averaged; the rows
    with the intercept column, as the clients fit them by default), and the stacked rows,
    labels and loss weights."""
    X = with_intercept(np.vstack([X for X, _ in PARTS]))
    y = np.concatenate([y for _, y in PARTS])
    weights = np.concatenate([np.full(X.shape[0], 1.0 / X.shape[0]) for X, _ in PARTS])
    minimiser = solve_local(
        X, y, get_loss("logistic"), LocalProblem(loss_weight=weights, l2=lam), tol=1e-13
    ).x
    return minimiser, X, y, weights


def test_without_noise_the_job_reaches_the_centralized_minimiser():
    lam = 0.1
    res = train_consensus(
        PARTS, ConsensusConfig(lam=lam, rho=0.1, iterations=80), X_test=X_TEST, y_test=Y_TEST
    )
    reference, X, y, weights = _centralized(lam)
    np.testing.assert_allclose(res.model, reference, rtol=0, atol=1e-6)
    # train_objective is F(w)/n of eq. 1a
    n = len(PARTS)
    F = np.sum(weights * np.logaddexp(0.0, -y * (X @ reference)))
    F += lam / 2 * reference @ reference
    assert res.final["train_objective"] == pytest.approx(F / n, rel=1e-9)
    assert res.privacy["mechanism"] == "none" and res.privacy["epsilon"] == 0.0
    assert all(h["epsilon"] == 0.0 for h in res.history)
    assert len(res.ledger.events("client1")) == 0
    assert res.final["test_accuracy"] > 0.85


@pytest.mark.parametrize(
    "accountant, relaxation, average_last", [("rdp", 1.0, 1), ("pld", 1.0, 1), ("pld", 1.6, 3)]
)
def test_privacy_block_matches_the_events_and_the_hand_computed_noise(
    accountant, relaxation, average_last
):
    """Also with over-relaxation and averaging: both post-process released values, so the
    noise, its sensitivity and the spent epsilon are those of plain ADMM."""
    cfg = ConsensusConfig(
        **(PRIVATE | dict(accountant=accountant, iterations=4)),
        seed=0,
        relaxation=relaxation,
        average_last=average_last,
    )
    res = train_consensus(PARTS, cfg, X_test=X_TEST, y_test=Y_TEST)
    privacy = res.privacy
    T, n = cfg.iterations, len(PARTS)
    assert privacy["mechanism"] == "gaussian" and privacy["accountant"] == accountant
    assert privacy["delta"] == cfg.delta
    assert privacy["epsilon"] <= cfg.epsilon
    assert privacy["epsilon"] > 0.9 * cfg.epsilon  # calibrated, not wasteful
    z = privacy["noise_multiplier"]
    d = PARTS[0][0].shape[1] + 1  # each upload: d + 1 coordinates (the intercept's too)
    assert (
        z
        == calibrate_consensus(
            cfg.epsilon, cfg.delta, T, accountant=accountant, coordinates=T * d
        ).noise_multiplier
    )
    # the coupling's delta is far below delta: the epsilon is the continuous one's, to 1e-6
    assert privacy["epsilon"] == pytest.approx(
        gaussian_epsilon(z, T, cfg.delta, accountant=accountant), rel=1e-6
    )
    assert privacy["epsilon"] >= gaussian_epsilon(z, T, cfg.delta, accountant=accountant)
    assert set(privacy["per_party"]) == {f"client{i}" for i in range(1, n + 1)}
    c1 = 1.0  # logistic: |l'| <= 1, rows of norm <= 1
    for i, (X, _) in enumerate(PARTS, start=1):
        name = f"client{i}"
        block = privacy["per_party"][name]
        m_i = X.shape[0]
        sensitivity = 2.0 * c1 / ((cfg.lam / n + cfg.rho) * m_i)
        assert block["l2_sensitivity"] == pytest.approx(sensitivity, rel=1e-12)
        assert block["sigma"] == pytest.approx(z * sensitivity, rel=1e-12)
        assert block["noise_multiplier"] == z
        assert block["releases"] == T
        events = res.ledger.events(name)
        assert [e.round for e in events] == list(range(1, T + 1))
        assert all(e.party == name and e.mechanism == "gaussian" for e in events)
        assert all(e.sigma == pytest.approx(z * sensitivity, rel=1e-12) for e in events)
        assert block["epsilon"] == client_epsilon(events, cfg)
        release = client_release(cfg, z, n, m_i)
        assert release.sigma == pytest.approx(z * sensitivity, rel=1e-12)
        assert release.noise_multiplier == z
    assert privacy["epsilon"] == max(b["epsilon"] for b in privacy["per_party"].values())
    assert res.history[-1]["epsilon"] == privacy["epsilon"]


def test_average_last_reports_the_mean_of_the_last_global_models():
    cfg = ConsensusConfig(**PRIVATE, seed=2)
    plain = train_consensus(PARTS, cfg, X_test=X_TEST, y_test=Y_TEST)
    averaged = train_consensus(PARTS, replace(cfg, average_last=3), X_test=X_TEST, y_test=Y_TEST)
    models = [r.model for r in plain.rounds]
    # the same run (averaging is post-processing), reported at the mean of the last three
    for a, b in zip(plain.rounds, averaged.rounds, strict=True):
        assert np.array_equal(a.model, b.model)
    np.testing.assert_allclose(averaged.model, np.mean(models[-3:], axis=0), rtol=0, atol=1e-15)
    first = averaged.history[1]  # round 2: the mean of the two models so far
    s = cfg.prepare_rows(X_TEST) @ ((models[0] + models[1]) / 2)
    assert first["test_accuracy"] == np.mean(np.where(s > 0, 1.0, -1.0) == Y_TEST)
    assert averaged.history[0]["test_accuracy"] == plain.history[0]["test_accuracy"]


def test_over_relaxation_converges_to_the_centralized_minimiser():
    lam = 0.1
    res = train_consensus(PARTS, ConsensusConfig(lam=lam, rho=0.1, iterations=60, relaxation=1.6))
    np.testing.assert_allclose(res.model, _centralized(lam)[0], rtol=0, atol=1e-6)


def test_history_has_the_vertical_schema_and_epsilon_grows():
    res = train_consensus(PARTS, ConsensusConfig(**PRIVATE, seed=1), X_test=X_TEST, y_test=Y_TEST)
    assert [h["iteration"] for h in res.history] == list(range(1, PRIVATE["iterations"] + 1))
    for entry in res.history:
        for key in HISTORY_KEYS:
            assert key in entry
        assert 0.0 <= entry["test_accuracy"] <= 1.0
        assert np.isfinite(entry["test_log_loss"]) and np.isfinite(entry["train_objective"])
    epsilons = [h["epsilon"] for h in res.history]
    assert np.all(np.diff(epsilons) > 0)
    seconds = [h["seconds"] for h in res.history]
    assert seconds == sorted(seconds) and seconds[0] >= 0.0
    assert res.final == res.history[-1]
    # without test rows the test figures are None
    bare = train_consensus(PARTS, ConsensusConfig(**PRIVATE, seed=1))
    assert bare.final["test_accuracy"] is None and bare.final["test_log_loss"] is None
    assert np.array_equal(bare.model, res.model)


def test_to_json_is_serialisable():
    res = train_consensus(PARTS, ConsensusConfig(**PRIVATE, seed=2), X_test=X_TEST, y_test=Y_TEST)
    payload = json.loads(json.dumps(res.to_json()))
    assert payload["protocol"] == "consensus"
    assert [p["n_samples"] for p in payload["parties"]] == [X.shape[0] for X, _ in PARTS]
    assert payload["final"] == payload["history"][-1]
    assert payload["config"]["seed"] == 2


def test_moments_accountant_total_is_the_closed_form():
    cfg = ConsensusConfig(**(PRIVATE | dict(accountant="moments", iterations=5)), seed=0)
    res = train_consensus(PARTS, cfg)
    z = res.privacy["noise_multiplier"]
    expected = moments_accountant_epsilon(z, 5, cfg.delta)
    assert res.privacy["epsilon"] == expected
    assert expected <= cfg.epsilon
    for t, entry in enumerate(res.history, start=1):
        assert entry["epsilon"] == moments_accountant_epsilon(z, t, cfg.delta)


def test_a_given_noise_multiplier_is_used_as_is():
    cfg = ConsensusConfig(
        lam=0.1,
        rho=0.5,
        iterations=3,
        mechanism="gaussian",
        noise_multiplier=4.0,
        delta=1e-5,
        accountant="rdp",
        seed=0,
    )
    res = train_consensus(PARTS, cfg)
    assert res.privacy["noise_multiplier"] == 4.0
    assert res.privacy["epsilon"] == pytest.approx(gaussian_epsilon(4.0, 3, 1e-5, accountant="rdp"))
    assert all(e.noise_multiplier == 4.0 for e in res.ledger.events("client2"))


def test_private_runs_clip_the_rows_first():
    """Rows of norm > 1 are clipped before a private run (the sensitivity assumes <= 1)."""
    from dpfed.core.rows import clip_rows

    big = [(3.0 * X, y) for X, y in PARTS]
    assert any(np.any(np.linalg.norm(X, axis=1) > 1.0) for X, _ in big)
    a = train_consensus(big, ConsensusConfig(**PRIVATE, seed=0))
    b = train_consensus(
        [(clip_rows(X, 1.0), y) for X, y in big], ConsensusConfig(**PRIVATE, seed=0)
    )
    np.testing.assert_allclose(a.model, b.model, rtol=0, atol=1e-9)


# -- Adult ------------------------------------------------------------------------------------


def _adult_dir() -> Path | None:
    value = os.environ.get("DPFED_DATA")
    if value and (Path(value) / "adult" / "adult.data").is_file():
        return Path(value)
    return None


@pytest.mark.slow
@pytest.mark.skipif(_adult_dir() is None, reason="$DPFED_DATA/adult/adult.data not found")
def test_adult_ten_clients_epsilon_one_reaches_the_papers_accuracy():
    from dpfed.core.rows import normalize_rows
    from dpfed.data import horizontal_split, load_dataset

    data = load_dataset("adult", _adult_dir())
    X = normalize_rows(data.X_train)
    X_test = normalize_rows(data.X_test)
    parts = [(X[i], data.y_train[i]) for i in horizontal_split(X.shape[0], 10, rng=0)]
    cfg = ConsensusConfig(
        lam=1e-5, rho=0.015, iterations=20, mechanism="gaussian", epsilon=1.0, delta=1e-5, seed=0
    )
    res = train_consensus(parts, cfg, X_test=X_test, y_test=data.y_test)
    assert res.privacy["epsilon"] <= 1.0
    assert res.final["test_accuracy"] >= 0.825
