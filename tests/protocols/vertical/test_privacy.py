"""What a vertical run reports as its privacy: the paper mechanism certifies no epsilon.

Its Theorem 1 / Corollary 1 figure moves to ``paper_epsilon`` with the reasons it is not a
guarantee (``paper_epsilon_reason``): always the unbounded noise, and per party Lemma 1's
eigenvalue premise where the party's block breaks it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical

PAPER = dict(mechanism="paper", epsilon=1.0, delta=1e-5, iterations=3, seed=0, lam=1e-2)


def _blocks(n: int, widths: tuple[int, ...], seed: int = 0):
    rng = np.random.default_rng(seed)
    blocks = [rng.normal(size=(n, d)) for d in widths]
    y = np.where(blocks[0][:, 0] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return blocks, y


def _check_paper_privacy(privacy: dict) -> None:
    assert privacy["mechanism"] == "paper"
    assert privacy["epsilon"] is None and privacy["accountant"] is None
    assert math.isfinite(privacy["paper_epsilon"]) and privacy["paper_epsilon"] > 0
    assert privacy["paper_accountant"] == "corollary1"
    assert all(p["epsilon"] is None for p in privacy["per_party"].values())
    assert all(math.isfinite(p["paper_epsilon"]) for p in privacy["per_party"].values())
    assert "epsilon_pld" not in privacy  # only as paper_epsilon_pld, never as a headline
    assert "unbounded Gaussian noise" in privacy["paper_epsilon_reason"][0]


def test_a_wide_block_names_the_eigenvalue_premise():
    blocks, y = _blocks(40, (3, 300))  # bank: d_m = 300 > N = 40
    res = train_vertical(blocks, y, VerticalConfig(**PAPER), names=["label", "bank"])
    privacy = res.privacy
    _check_paper_privacy(privacy)
    assert privacy["paper_epsilon"] == pytest.approx(1.0, rel=1e-6)  # the formula's target
    reasons = privacy["paper_epsilon_reason"]
    assert len(reasons) == 2
    assert reasons[1].startswith("bank:") and "lambda_min(D_m^T D_m) >= d_m" in reasons[1]
    assert "d_m = 300 > N = 40" in reasons[1]
    assert privacy["per_party"]["bank"]["eigenvalue_premise"] is False
    assert privacy["per_party"]["label"]["eigenvalue_premise"] is True
    assert all(h["epsilon"] is None for h in res.history)
    assert res.to_json()["privacy"]["epsilon"] is None


def test_a_tall_well_conditioned_run_names_only_the_unbounded_noise():
    blocks, y = _blocks(300, (3, 4), seed=1)  # lambda_min about N/d_m, far above d_m
    res = train_vertical(blocks, y, VerticalConfig(**PAPER))
    _check_paper_privacy(res.privacy)
    assert len(res.privacy["paper_epsilon_reason"]) == 1
    assert all(p["eigenvalue_premise"] for p in res.privacy["per_party"].values())


def test_a_measured_premise_failure_is_reported_when_the_shapes_allow_it():
    blocks, y = _blocks(100, (3, 4), seed=2)
    blocks[1][:, 3] = blocks[1][:, 2]  # rank deficient: lambda_min = 0 < d_m = 4 <= N / d_m
    res = train_vertical(blocks, y, VerticalConfig(**PAPER))
    reasons = res.privacy["paper_epsilon_reason"]
    assert len(reasons) == 2 and reasons[1].startswith("party1:")
    assert "found lambda_min = " in reasons[1]


def test_the_sound_mechanism_still_certifies_its_epsilon():
    blocks, y = _blocks(100, (3, 4), seed=3)
    res = train_vertical(
        blocks, y, VerticalConfig(mechanism="sound", epsilon=2.0, delta=1e-5, iterations=2, seed=0)
    )
    assert 0 < res.privacy["epsilon"] <= 2.0
    assert "paper_epsilon" not in res.privacy
    assert all(h["epsilon"] is not None for h in res.history)


def test_arcene_split_in_two_certifies_no_epsilon():
    value = os.environ.get("DPFED_DATA", "")
    base = Path(value) if value else None
    if base is None or not (base / "arcene" / "arcene_train.data").is_file():
        pytest.skip("arcene not found under $DPFED_DATA (arcene/arcene_train.{data,labels})")
    from dpfed.data import load_dataset, vertical_split

    data = load_dataset("arcene", base)
    blocks = vertical_split(np.asarray(data.X_train, dtype=float), [5000, 5000])
    res = train_vertical(
        blocks,
        data.y_train,
        VerticalConfig(mechanism="paper", epsilon=1.0, delta=1e-5, iterations=2, seed=0, lam=1e-4),
    )
    _check_paper_privacy(res.privacy)
    reasons = res.privacy["paper_epsilon_reason"]
    assert len(reasons) == 3
    assert all("d_m = 5000 > N = 100" in r for r in reasons[1:])
