"""Centralised and local-only logistic-regression baselines."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from dpfed._validation import DpfedInputError
from dpfed.estimators.baselines import fit_centralized, fit_local_only

from ..conftest import make_vertical_problem_with_test

KEYS = {"train_objective", "test_log_loss", "test_accuracy", "coef", "intercept"}


def _problem(n: int = 300, widths=(4, 3), seed: int = 0):
    return make_vertical_problem_with_test(n=n, split=widths, seed=seed)


def _optimum(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    def f(w):
        m = y * (X @ w)
        value = np.mean(np.logaddexp(0.0, -m)) + 0.5 * lam * w @ w
        grad = X.T @ (-y / (1.0 + np.exp(m))) / len(y) + lam * w
        return value, grad

    return minimize(
        f, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12}
    ).x


def test_centralized_is_the_optimum_of_the_averaged_objective() -> None:
    blocks, y, test, yt = _problem()
    lam = 1e-2
    out = fit_centralized(blocks, y, lam=lam, test_blocks=test, test_labels=yt)
    assert set(out) == KEYS and isinstance(out["coef"], list) and len(out["coef"]) == 7
    X = np.hstack(blocks)
    w = _optimum(X, y, lam)
    np.testing.assert_allclose(out["coef"], w, atol=1e-6)
    expected = np.mean(np.logaddexp(0.0, -y * (X @ w))) + 0.5 * lam * w @ w
    assert out["train_objective"] == pytest.approx(expected, abs=1e-10)
    st = np.hstack(test) @ w
    assert out["test_log_loss"] == pytest.approx(np.mean(np.logaddexp(0.0, -yt * st)), abs=1e-7)
    assert out["test_accuracy"] == pytest.approx(np.mean(np.sign(st) == yt))


def test_local_only_uses_the_label_holders_block_only() -> None:
    blocks, y, test, yt = _problem()
    out = fit_local_only(blocks, y, lam=1e-2, test_blocks=test, test_labels=yt)
    alone = fit_centralized(blocks[:1], y, lam=1e-2, test_blocks=test[:1], test_labels=yt)
    assert len(out["coef"]) == 4
    np.testing.assert_allclose(out["coef"], alone["coef"], atol=1e-10)
    assert out["test_log_loss"] == pytest.approx(alone["test_log_loss"])
    central = fit_centralized(blocks, y, lam=1e-2)
    assert central["train_objective"] < out["train_objective"]


def test_sparse_and_dense_blocks_and_01_labels_agree() -> None:
    blocks, y, test, yt = _problem()
    dense = fit_centralized(blocks, y, lam=1e-3, test_blocks=test, test_labels=yt)
    mixed = fit_centralized(
        [sp.csr_matrix(blocks[0]), blocks[1]],
        (y + 1) / 2,
        lam=1e-3,
        test_blocks=[test[0], sp.csc_matrix(test[1])],
        test_labels=(yt + 1) / 2,
    )
    np.testing.assert_allclose(mixed["coef"], dense["coef"], atol=1e-6)
    assert mixed["test_log_loss"] == pytest.approx(dense["test_log_loss"], abs=1e-7)


def test_without_test_data_the_test_metrics_are_none() -> None:
    blocks, y, _, _ = _problem()
    out = fit_local_only(blocks, y, lam=1e-2)
    assert out["test_log_loss"] is None and out["test_accuracy"] is None


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"lam": 0.0}, "lam"),
        ({"lam": -1.0}, "lam"),
        ({"lam": 1e-2, "labels": "three"}, "binary"),
        ({"lam": 1e-2, "rows": True}, "row counts differ"),
        ({"lam": 1e-2, "test_cols": True}, "test block 1 must have 3 columns"),
        ({"lam": 1e-2, "only_test_blocks": True}, "together"),
        ({"lam": 1e-2, "nan": True}, "finite"),
    ],
)
def test_bad_input_is_named(kwargs: dict, fragment: str) -> None:
    blocks, y, test, yt = _problem()
    lam = kwargs["lam"]
    test_labels = yt
    if kwargs.get("labels") == "three":
        y = y.copy()
        y[0] = 3.0
    if kwargs.get("rows"):
        blocks = [blocks[0], blocks[1][:-1]]
    if kwargs.get("test_cols"):
        test = [test[0], test[1][:, :2]]
    if kwargs.get("only_test_blocks"):
        test_labels = None
    if kwargs.get("nan"):
        blocks = [blocks[0].copy(), blocks[1]]
        blocks[0][2, 1] = np.nan
    with pytest.raises(DpfedInputError, match=fragment):
        fit_centralized(blocks, y, lam=lam, test_blocks=test, test_labels=test_labels)


def test_a9a_baselines_match_the_known_test_log_losses(a9a) -> None:
    blocks, y, test, yt = a9a["blocks"], a9a["y"], a9a["test_blocks"], a9a["y_test"]
    central = fit_centralized(blocks, y, lam=1e-4, test_blocks=test, test_labels=yt)
    local = fit_local_only(blocks, y, lam=1e-4, test_blocks=test, test_labels=yt)
    assert central["test_log_loss"] == pytest.approx(0.3238, abs=5e-4)
    assert local["test_log_loss"] == pytest.approx(0.3494, abs=5e-4)
    assert len(central["coef"]) == 123 and len(local["coef"]) == 66
    assert central["train_objective"] < local["train_objective"]


def test_with_an_intercept_the_baselines_are_scikit_learns() -> None:
    from sklearn.linear_model import LogisticRegression

    blocks, y, test, yt = _problem()
    lam = 1e-2
    out = fit_local_only(blocks, y, lam=lam, test_blocks=test, test_labels=yt, fit_intercept=True)
    ref = LogisticRegression(C=1.0 / (lam * len(y)), tol=1e-10, max_iter=10000).fit(blocks[0], y)
    np.testing.assert_allclose(out["coef"], ref.coef_.ravel(), atol=1e-6)
    assert out["intercept"] == pytest.approx(float(ref.intercept_[0]), abs=1e-6)
    scores = test[0] @ ref.coef_.ravel() + ref.intercept_[0]
    assert out["test_log_loss"] == pytest.approx(
        float(np.mean(np.logaddexp(0.0, -yt * scores))), abs=1e-6
    )
    assert fit_centralized(blocks, y, lam=lam)["intercept"] == 0.0  # the paper's: none
