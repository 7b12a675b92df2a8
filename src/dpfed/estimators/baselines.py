r"""The paper's non-federated baselines: logistic regression on all columns (centralised) and
on the label holder's columns only (local-only), both by scikit-learn.

Both minimise the same averaged objective as :func:`dpfed.protocols.vertical.driver.train_vertical`,

.. math::

    \frac1N \sum_{i=1}^N \log\bigl(1 + e^{-y_i\, d_i^\top w}\bigr) + \frac{\lambda}{2} \|w\|^2 ,

with labels in :math:`\{-1, 1\}` and no intercept (the paper's). scikit-learn's
``LogisticRegression`` minimises :math:`\tfrac12\|w\|^2 + C \sum_i \log(1 + e^{-y_i
d_i^\top w})`; with :math:`C = 1/(\lambda N)` that is :math:`1/\lambda` times the objective
above, so both have the same minimiser. It is solved to ``tol=1e-10`` so that the baselines
are the optima. With ``fit_intercept=True`` the scores are :math:`d_i^\top w + b` with
:math:`b` unregularised, scikit-learn's own intercept: the reference a user of the field
compares with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from dpfed._validation import (
    DpfedInputError,
    check_binary_labels,
    check_finite_matrix,
    check_positive,
    check_same_rows,
)

Block = np.ndarray | sp.spmatrix


def _stack(blocks: Sequence[Block], what: str) -> Block:
    """Validate the blocks and put them side by side; shape ``(N, sum d_m)``."""
    if isinstance(blocks, np.ndarray | sp.spmatrix) or not isinstance(blocks, Sequence):
        raise DpfedInputError(
            f"{what} blocks must be a sequence of matrices, one per party. "
            f"Found {type(blocks).__name__}."
        )
    if len(blocks) == 0:
        raise DpfedInputError(f"{what} blocks must hold at least one matrix. Found none.")
    prepared = []
    for m, block in enumerate(blocks):
        if not sp.issparse(block):
            block = np.asarray(block, dtype=float)
            if block.ndim != 2:
                raise DpfedInputError(
                    f"{what} block {m} must be 2-D (N, d_m). Found shape {block.shape}."
                )
        check_finite_matrix(f"{what} block {m}", block)
        prepared.append(block)
    check_same_rows(
        [f"{what} block {m}" for m in range(len(prepared))], [b.shape[0] for b in prepared]
    )
    if len(prepared) == 1:
        return sp.csr_matrix(prepared[0]) if sp.issparse(prepared[0]) else prepared[0]
    if any(sp.issparse(b) for b in prepared):
        return sp.hstack([sp.csr_matrix(b) for b in prepared], format="csr")
    return np.hstack(prepared)


def _labels(name: str, labels, n: int) -> np.ndarray:
    y = check_binary_labels(name, labels)
    if y.shape[0] != n:
        raise DpfedInputError(f"{name} must have one entry per row ({n}). Found {y.shape[0]}.")
    return y


def _fit(
    X: Block,
    y: np.ndarray,
    lam: float,
    X_test: Block | None,
    y_test: np.ndarray | None,
    fit_intercept: bool,
) -> dict:
    n = X.shape[0]
    model = LogisticRegression(
        C=1.0 / (lam * n), fit_intercept=bool(fit_intercept), tol=1e-10, max_iter=10000
    )
    model.fit(X, y)
    coef = np.asarray(model.coef_, dtype=float).reshape(-1)
    intercept = float(model.intercept_[0]) if fit_intercept else 0.0
    scores = np.asarray(X @ coef).reshape(-1) + intercept
    objective = float(np.mean(np.logaddexp(0.0, -y * scores))) + 0.5 * lam * float(coef @ coef)
    result: dict = {
        "train_objective": objective,
        "test_log_loss": None,
        "test_accuracy": None,
        "coef": coef.tolist(),
        "intercept": intercept,
    }
    if X_test is not None and y_test is not None:
        st = np.asarray(X_test @ coef).reshape(-1) + intercept
        result["test_log_loss"] = float(np.mean(np.logaddexp(0.0, -y_test * st)))
        result["test_accuracy"] = float(np.mean(np.where(st > 0, 1.0, -1.0) == y_test))
    return result


def _prepare(blocks, y, lam, test_blocks, test_labels, *, only_first: bool):
    lam = check_positive("lam", lam)
    X = _stack(blocks, "training")
    widths = [b.shape[1] for b in blocks]
    y = _labels("labels", y, X.shape[0])
    X_test = y_test = None
    if (test_blocks is None) != (test_labels is None):
        raise DpfedInputError(
            "test_blocks and test_labels must be given together. Found only "
            f"{'test_blocks' if test_labels is None else 'test_labels'}."
        )
    if test_blocks is not None:
        if len(test_blocks) != len(blocks):
            raise DpfedInputError(
                f"test data must have {len(blocks)} blocks like training. Found {len(test_blocks)}."
            )
        for m, (d, tb) in enumerate(zip(widths, test_blocks, strict=True)):
            if tb.shape[1] != d:
                raise DpfedInputError(
                    f"test block {m} must have {d} columns like training. Found {tb.shape[1]}."
                )
        X_test = _stack(test_blocks, "test")
        y_test = _labels("test labels", test_labels, X_test.shape[0])
    if only_first:
        X = X[:, : widths[0]]
        if X_test is not None:
            X_test = X_test[:, : widths[0]]
    return X, y, lam, X_test, y_test


def fit_centralized(
    blocks: Sequence[Block],
    y: np.ndarray,
    *,
    lam: float,
    test_blocks: Sequence[Block] | None = None,
    test_labels: np.ndarray | None = None,
    fit_intercept: bool = False,
) -> dict:
    """L2-regularised logistic regression on all parties' columns together.

    Parameters
    ----------
    blocks : sequence of ndarray or sparse matrix, shapes ``(N, d_m)``
        Column blocks of the same rows (label holder first); dense or sparse.
    y : ndarray, shape (N,)
        Labels in {-1, 1} or {0, 1}.
    lam : float
        Weight of :math:`\\tfrac12\\|w\\|^2` in the averaged objective (> 0).
    test_blocks : sequence of matrices, shapes ``(N_test, d_m)``, optional
    test_labels : ndarray, shape (N_test,), optional
    fit_intercept : bool, default False
        Add scikit-learn's unregularised intercept (False: the paper's model, none).

    Returns
    -------
    dict
        ``train_objective`` (float), ``test_log_loss`` and ``test_accuracy`` (float, or
        None without test data), ``coef`` (list of ``sum d_m`` floats, block by block),
        ``intercept`` (0.0 without one).
    """
    X, yy, lam, X_test, y_test = _prepare(
        blocks, y, lam, test_blocks, test_labels, only_first=False
    )
    return _fit(X, yy, lam, X_test, y_test, fit_intercept)


def fit_local_only(
    blocks: Sequence[Block],
    y: np.ndarray,
    *,
    lam: float,
    test_blocks: Sequence[Block] | None = None,
    test_labels: np.ndarray | None = None,
    fit_intercept: bool = False,
) -> dict:
    """L2-regularised logistic regression on the label holder's block ``blocks[0]`` only.

    The other blocks are checked (same rows) but not used: this is what the label holder
    can learn without any collaboration.

    Parameters
    ----------
    blocks : sequence of ndarray or sparse matrix, shapes ``(N, d_m)``
    y : ndarray, shape (N,)
    lam : float
    test_blocks : sequence of matrices, shapes ``(N_test, d_m)``, optional
    test_labels : ndarray, shape (N_test,), optional
    fit_intercept : bool, default False

    Returns
    -------
    dict
        As :func:`fit_centralized`, with ``coef`` of length ``d_0``.
    """
    X, yy, lam, X_test, y_test = _prepare(blocks, y, lam, test_blocks, test_labels, only_first=True)
    return _fit(X, yy, lam, X_test, y_test, fit_intercept)
