"""Estimators for sample-partitioned data, simulated in one process.

``X`` holds every party's rows; ``fit`` cuts them into clients (consensus ADMM with a server)
or graph nodes (decentralized ADMM), each row scaled to unit norm as the privacy analyses
assume, and runs the protocol. Prediction uses the learned global model (consensus) or the
nodes' average model (decentralized) on rows scaled the same way.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from dpfed._validation import DpfedInputError, check_binary_labels
from dpfed.core.rows import normalize_rows
from dpfed.data import horizontal_split, make_graph
from dpfed.estimators._scores import ScoreClassifierMixin
from dpfed.protocols.consensus.driver import ConsensusConfig, train_consensus
from dpfed.protocols.decentralized.driver import DecentralizedConfig, train_decentralized


class _HorizontalClassifier(ScoreClassifierMixin, ClassifierMixin, BaseEstimator):
    def _parts(self, X, y, count: int, seed: int | None):

        X = normalize_rows(X)
        index = horizontal_split(X.shape[0], count, rng=seed)
        return [(X[i], y[i]) for i in index]

    def _labels(self, y) -> np.ndarray:
        y_pm = check_binary_labels("y", y)
        labels = np.unique(np.asarray(y))
        self.classes_ = labels if labels.size == 2 else np.array([-1.0, 1.0])
        return y_pm

    def decision_function(self, X) -> np.ndarray:
        """Scores of the rows of ``X`` (scaled to unit norm), shape ``(N,)``."""
        check_is_fitted(self, "coef_")
        if X.shape[1] != self.n_features_in_:
            raise DpfedInputError(f"X must have {self.n_features_in_} columns. Found {X.shape[1]}.")
        return np.asarray(normalize_rows(X) @ self.coef_[0]).reshape(-1)



class ConsensusLogisticRegression(_HorizontalClassifier):
    """Logistic regression by (DP) consensus ADMM between ``n_clients`` and a server.

    Parameters
    ----------
    n_clients : int
    lam, rho : float
        Regulariser weight of the whole problem and ADMM penalty.
    iterations : int
    mechanism : {"none", "gaussian"}
    epsilon, delta : float or None
        Target total privacy of every client (gaussian).
    accountant : {"pld", "rdp", "moments"}
    random_state : int or None
        Seeds the client split and the noise.

    Attributes
    ----------
    coef_ : ndarray, shape (1, n_features)
        The global model.
    history_ : list of dict
    privacy_spent_ : dict
    """

    def __init__(
        self,
        n_clients: int = 10,
        *,
        lam: float = 1e-5,
        rho: float = 0.015,
        iterations: int = 20,
        mechanism: str = "none",
        epsilon: float | None = None,
        delta: float | None = None,
        accountant: str = "pld",
        random_state: int | None = None,
    ) -> None:
        self.n_clients = n_clients
        self.lam = lam
        self.rho = rho
        self.iterations = iterations
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.delta = delta
        self.accountant = accountant
        self.random_state = random_state

    def fit(self, X, y) -> ConsensusLogisticRegression:

        y_pm = self._labels(y)
        config = ConsensusConfig(
            lam=self.lam, rho=self.rho, iterations=self.iterations, mechanism=self.mechanism,
            epsilon=self.epsilon, delta=self.delta, accountant=self.accountant,
            seed=self.random_state,
        )
        result = train_consensus(self._parts(X, y_pm, self.n_clients, self.random_state), config)
        self.result_ = result
        self.coef_ = result.model[None, :]
        self.history_ = result.history
        self.privacy_spent_ = result.privacy
        self.n_features_in_ = X.shape[1]
        return self


class DecentralizedLogisticRegression(_HorizontalClassifier):
    """Logistic regression by decentralized ADMM over a graph, optionally with DVP or PVP.

    Parameters
    ----------
    n_nodes : int
    graph : {"ring", "grid", "complete", "erdos-renyi", "geometric"}
    perturbation : {"none", "dvp", "pvp"}
    alpha : float or None
        Per-round privacy of every broadcast (with a perturbation).
    node_alphas : sequence of float or None
        Instead of ``alpha``: one per-round privacy per node.
    schedule : {"constant", "geometric", "linear"}
        How each node's :math:`\alpha_p(t)` moves over rounds; ``rate`` for "geometric" and
        "linear" (see :func:`dpfed.protocols.decentralized.calibration.alpha_schedule`).
    loss_scale, rho, eta : float
        :math:`C^R`, the regulariser weight and the ADMM penalty.
    iterations : int
    random_state : int or None
        Seeds the node split, the graph and the noise.

    Attributes
    ----------
    coef_ : ndarray, shape (1, n_features)
        The nodes' average model.
    node_models_ : dict of str to ndarray
    history_ : list of dict
    privacy_spent_ : dict
    """

    def __init__(
        self,
        n_nodes: int = 10,
        *,
        graph: str = "ring",
        perturbation: str = "none",
        alpha: float | None = None,
        node_alphas: tuple[float, ...] | None = None,
        schedule: str = "constant",
        rate: float | None = None,
        loss_scale: float = 1750.0,
        rho: float = 10 ** -2.5,
        eta: float = 1.0,
        iterations: int = 100,
        random_state: int | None = None,
    ) -> None:
        self.n_nodes = n_nodes
        self.graph = graph
        self.perturbation = perturbation
        self.alpha = alpha
        self.node_alphas = node_alphas
        self.schedule = schedule
        self.rate = rate
        self.loss_scale = loss_scale
        self.rho = rho
        self.eta = eta
        self.iterations = iterations
        self.random_state = random_state

    def fit(self, X, y) -> DecentralizedLogisticRegression:

        y_pm = self._labels(y)
        config = DecentralizedConfig(
            loss_scale=self.loss_scale, rho=self.rho, eta=self.eta, iterations=self.iterations,
            perturbation=self.perturbation, alpha=self.alpha, node_alphas=self.node_alphas,
            schedule=self.schedule, rate=self.rate, seed=self.random_state,
        )
        graph = make_graph(self.graph, self.n_nodes, rng=self.random_state)
        parts = self._parts(X, y_pm, self.n_nodes, self.random_state)
        result = train_decentralized(parts, graph, config)
        self.result_ = result
        self.node_models_ = result.models
        self.coef_ = result.average_model[None, :]
        self.history_ = result.history
        self.privacy_spent_ = result.privacy
        self.n_features_in_ = X.shape[1]
        return self
