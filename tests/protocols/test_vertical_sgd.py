"""FDML-style vertical SGD baseline."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dpfed._validation import DpfedInputError
from dpfed.estimators.baselines import fit_centralized
from dpfed.protocols.vertical_sgd import train_vertical_sgd

from ..conftest import make_vertical_problem_with_test

HISTORY_KEYS = {
    "iteration",
    "seconds",
    "train_objective",
    "test_log_loss",
    "test_accuracy",
    "epsilon",
}


def _problem(n: int = 400, widths=(3, 2, 2), seed: int = 1):
    return make_vertical_problem_with_test(n=n, split=widths, seed=seed)


def test_history_has_one_entry_per_epoch_with_the_train_vertical_keys() -> None:
    blocks, y, test, yt = _problem()
    out = train_vertical_sgd(blocks, y, epochs=4, seed=0, test_blocks=test, test_labels=yt)
    hist = out["history"]
    assert [h["iteration"] for h in hist] == [1, 2, 3, 4]
    assert all(HISTORY_KEYS <= set(h) for h in hist)
    assert all(h["epsilon"] == 0.0 for h in hist)
    seconds = [h["seconds"] for h in hist]
    assert seconds == sorted(seconds) and seconds[0] > 0
    assert out["final"] == hist[-1]
    assert list(out["models"]) == ["label", "party1", "party2"]
    assert [x.shape for x in out["models"].values()] == [(3,), (2,), (2,)]


def test_converges_to_the_centralised_optimum() -> None:
    blocks, y, test, yt = _problem()
    lam = 1e-2
    out = train_vertical_sgd(
        blocks,
        y,
        lam=lam,
        learning_rate=1.0,
        batch_size=16,
        epochs=50,
        seed=0,
        test_blocks=test,
        test_labels=yt,
    )
    central = fit_centralized(blocks, y, lam=lam, test_blocks=test, test_labels=yt)
    assert out["final"]["train_objective"] == pytest.approx(central["train_objective"], abs=2e-4)
    coef = np.concatenate(list(out["models"].values()))
    np.testing.assert_allclose(coef, central["coef"], atol=0.05)


def test_seeded_runs_repeat_and_leave_the_global_state_alone() -> None:
    blocks, y, _, _ = _problem()
    # The legacy global state must be untouched: that is what is tested here.
    np.random.seed(123)  # noqa: NPY002
    state = np.random.get_state()[1].copy()  # noqa: NPY002
    a = train_vertical_sgd(blocks, y, epochs=2, seed=5, noise_sigma=0.3)
    b = train_vertical_sgd(blocks, y, epochs=2, seed=5, noise_sigma=0.3)
    c = train_vertical_sgd(blocks, y, epochs=2, seed=6, noise_sigma=0.3)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    for name in a["models"]:
        np.testing.assert_array_equal(a["models"][name], b["models"][name])
    assert not np.allclose(a["models"]["label"], c["models"]["label"])


def test_initialisation_is_random_and_small() -> None:
    blocks, y, _, _ = _problem()
    out = train_vertical_sgd(blocks, y, epochs=1, seed=0, learning_rate=1e-12)
    x = np.concatenate(list(out["models"].values()))
    assert np.all(x != 0.0) and np.max(np.abs(x)) < 0.1
    zero = train_vertical_sgd(blocks, y, epochs=1, seed=0, learning_rate=1e-12, init_scale=0.0)
    assert np.max(np.abs(np.concatenate(list(zero["models"].values())))) < 1e-9


def test_noise_perturbs_training_and_is_not_accounted() -> None:
    blocks, y, _, _ = _problem()
    exact = train_vertical_sgd(blocks, y, epochs=2, seed=0)
    noisy = train_vertical_sgd(blocks, y, epochs=2, seed=0, noise_sigma=1.0)
    assert all(h["epsilon"] is None for h in noisy["history"])
    assert not np.allclose(exact["models"]["party1"], noisy["models"]["party1"])


def test_sparse_and_dense_blocks_give_the_same_run() -> None:
    blocks, y, test, yt = _problem()
    dense = train_vertical_sgd(blocks, y, epochs=2, seed=3, test_blocks=test, test_labels=yt)
    sparse = train_vertical_sgd(
        [sp.csr_matrix(b) for b in blocks],
        (y + 1) / 2,
        epochs=2,
        seed=3,
        test_blocks=[sp.csc_matrix(b) for b in test],
        test_labels=yt,
    )
    for name in dense["models"]:
        np.testing.assert_allclose(sparse["models"][name], dense["models"][name], atol=1e-12)
    assert sparse["final"]["test_log_loss"] == pytest.approx(dense["final"]["test_log_loss"])


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"epochs": 0}, "epochs"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"noise_sigma": -1.0}, "noise_sigma"),
        ({"lam": float("nan")}, "lam"),
        ({"seed": -3}, "seed"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict, fragment: str) -> None:
    blocks, y, _, _ = _problem()
    with pytest.raises(DpfedInputError, match=fragment):
        train_vertical_sgd(blocks, y, **kwargs)


def test_bad_data_is_named() -> None:
    blocks, y, test, yt = _problem()
    with pytest.raises(DpfedInputError, match="row counts differ"):
        train_vertical_sgd([blocks[0], blocks[1][:-1]], y)
    with pytest.raises(DpfedInputError, match="one entry per row"):
        train_vertical_sgd(blocks, y[:-1])
    with pytest.raises(DpfedInputError, match="test block 2 must have 2 columns"):
        train_vertical_sgd(
            blocks, y, test_blocks=[test[0], test[1], test[2][:, :1]], test_labels=yt
        )
    with pytest.raises(DpfedInputError, match="binary"):
        train_vertical_sgd(blocks, y * 2)


def test_a9a_reaches_the_papers_test_log_loss_quickly(a9a) -> None:
    out = train_vertical_sgd(
        a9a["blocks"],
        a9a["y"],
        epochs=4,
        seed=0,
        test_blocks=a9a["test_blocks"],
        test_labels=a9a["y_test"],
    )
    losses = [h["test_log_loss"] for h in out["history"]]
    assert losses[0] < 0.335
    assert losses[-1] < 0.327
