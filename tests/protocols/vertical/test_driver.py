"""The vertical job on the real a9a data (skipped when $DPFED_DATA lacks it)."""

import numpy as np

from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical


def test_a9a_no_noise_reaches_the_target_within_20_iterations(a9a):
    res = train_vertical(
        a9a["blocks"],
        a9a["y"],
        VerticalConfig(lam=1e-4, iterations=20),
        test_blocks=a9a["test_blocks"],
        test_labels=a9a["y_test"],
    )
    best = min(h["test_log_loss"] for h in res.history)
    assert best <= 0.3290
    assert res.final["test_log_loss"] <= 0.3290
    assert res.final["test_accuracy"] >= 0.848
    assert len(res.history) == 20
    assert res.privacy["epsilon"] == 0.0


def test_a9a_sound_run_spends_what_it_says(a9a):
    res = train_vertical(
        a9a["blocks"],
        a9a["y"],
        VerticalConfig(mechanism="sound", epsilon=8.0, delta=1e-5, seed=0),
        test_blocks=a9a["test_blocks"],
        test_labels=a9a["y_test"],
    )
    assert res.privacy["epsilon"] <= 8.0
    assert res.privacy["per_party"]["label"]["releases"] == 0
    events = res.ledger.events("party1")
    rounds = len(res.history)
    assert [e.round for e in events if e.label == "model"] == list(range(1, rounds + 1))
    assert 0 < len([e for e in events if e.label == "scores"]) <= rounds
    assert np.isfinite(res.final["test_log_loss"])


def test_a9a_protected_label_holder_beats_central_dp_defaults(a9a):
    """Every row and label protected, epsilon 1 and 2, rounds from the rule: above the majority
    class (0.764) and IBM diffprivlib's central DP logistic regression with its default C
    (0.787 at epsilon 1) on every seed."""
    for epsilon, floor in ((1.0, 0.81), (2.0, 0.825)):
        for seed in range(3):
            res = train_vertical(
                a9a["blocks"],
                a9a["y"],
                VerticalConfig(
                    mechanism="sound",
                    epsilon=epsilon,
                    delta=1e-5,
                    seed=seed,
                    protect_label_holder=True,
                ),
                test_blocks=a9a["test_blocks"],
                test_labels=a9a["y_test"],
            )
            assert res.final["test_accuracy"] >= floor, (epsilon, seed)
            for party in ("label", "party1"):
                assert res.privacy["per_party"][party]["epsilon"] <= epsilon


def test_a9a_sound_is_never_clearly_worse_than_the_label_holder_alone(a9a):
    """Rounds above the rule (20 at epsilon 1): the passive weighting keeps the model within
    0.002 of the local-only model's test log loss (0.3494) instead of 1.1."""
    res = train_vertical(
        a9a["blocks"],
        a9a["y"],
        VerticalConfig(mechanism="sound", epsilon=1.0, delta=1e-5, seed=0, iterations=20),
        test_blocks=a9a["test_blocks"],
        test_labels=a9a["y_test"],
    )
    assert res.final["test_log_loss"] <= 0.3494 + 0.002
    assert res.privacy["epsilon"] <= 1.0
