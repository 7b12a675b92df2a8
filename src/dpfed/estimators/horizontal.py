"""Estimators for sample-partitioned data, simulated in one process.

``X`` holds every party's rows; ``fit`` cuts them into clients (consensus ADMM with a server)
or graph nodes (decentralized ADMM), each row scaled to unit norm as the privacy analyses
assume, and runs the protocol. Prediction uses the learned global model (consensus) or the
nodes' average model (decentralized) on rows scaled the same way.
"""

from __future__ import annotations

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.rows import DEFAULT_INTERCEPT_SCALE, normalize_rows
from dpfed.data import horizontal_split, make_graph
from dpfed.estimators._base import BinaryScoreClassifier, config_of, refuse_fit_params
from dpfed.protocols.consensus.driver import ConsensusConfig, train_consensus
from dpfed.protocols.decentralized.driver import DecentralizedConfig, train_decentralized


class _HorizontalClassifier(BinaryScoreClassifier):
    """Rows cut into parties, each row scaled to unit norm; the model is one vector."""

    def _parts(self, X, y_pm: np.ndarray, count: int, seed: int | None, what: str) -> list:
        """``count`` parties' rows (scaled to unit norm) and labels in {-1, +1}."""
        if isinstance(count, int | np.integer) and X.shape[0] < count:
            raise DpfedInputError(
                f"X has {X.shape[0]} sample(s), but {type(self).__name__} cuts the rows into "
                f"{what} = {count} parts and every part needs at least one row."
            )
        X = normalize_rows(X)
        index = horizontal_split(X.shape[0], count, rng=seed)
        return [(X[i], y_pm[i]) for i in index]

    def _set_model(self, model: np.ndarray, config: ConsensusConfig | DecentralizedConfig) -> None:
        coef, intercept = config.intercept_of(model)
        self.coef_ = coef[None, :]
        self.intercept_ = np.array([intercept])

    def decision_function(self, X) -> np.ndarray:
        """Scores of the rows of ``X`` (scaled to unit norm), plus the intercept.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)

        Returns
        -------
        ndarray, shape (n_samples,)
            Positive for ``classes_[1]``.
        """
        X = self._validate_rows(X)
        return np.asarray(normalize_rows(X) @ self.coef_[0]).reshape(-1) + self.intercept_[0]


class ConsensusLogisticRegression(_HorizontalClassifier):
    """Logistic regression by (DP) consensus ADMM between ``n_clients`` and a server.

    Parameters
    ----------
    n_clients : int
        Clients the rows are cut into: at random with ``random_state``, else in contiguous
        blocks.
    lam, rho : float
        Regulariser weight of the whole problem and ADMM penalty.
    iterations : int
    mechanism : {"none", "gaussian"}
    epsilon, delta : float or None
        Target total privacy of every client (gaussian).
    noise_multiplier : float or None
        Instead of ``epsilon``: the per-round noise multiplier.
    accountant : {"pld", "rdp", "moments"}
    relaxation : float
        Over-relaxation :math:`\alpha \\in (0, 2)` of the average (1: the paper's ADMM).
    average_last : int
        The model is the mean of the global models of the last ``average_last`` rounds.
    fit_intercept : bool
        Fit an intercept: every client's rows get a constant column
        (:func:`dpfed.core.rows.with_intercept`), its weight regularised with the others.
    intercept_scale : float
        :math:`c \\in (0, 1)`: rows become :math:`[\\sqrt{1 - c^2} x, c]`.
    random_state : int or None
        Seeds the client split and the noise.

    Attributes
    ----------
    classes_ : ndarray, shape (2,)
        The two labels seen in ``fit``, sorted; ``classes_[1]`` is the positive class (+1).
    n_features_in_ : int
        Columns of ``X`` in ``fit``.
    coef_ : ndarray, shape (1, n_features)
        The global model's weights of the rows scaled to unit norm.
    intercept_ : ndarray, shape (1,)
        Its intercept (0 without ``fit_intercept``).
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
        noise_multiplier: float | None = None,
        accountant: str = "pld",
        relaxation: float = 1.0,
        average_last: int = 1,
        fit_intercept: bool = True,
        intercept_scale: float = DEFAULT_INTERCEPT_SCALE,
        random_state: int | None = None,
    ) -> None:
        self.n_clients = n_clients
        self.noise_multiplier = noise_multiplier
        self.relaxation = relaxation
        self.average_last = average_last
        self.intercept_scale = intercept_scale
        self.fit_intercept = fit_intercept
        self.lam = lam
        self.rho = rho
        self.iterations = iterations
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.delta = delta
        self.accountant = accountant
        self.random_state = random_state

    def _adds_noise(self) -> bool:
        return self.mechanism != "none"

    def fit(self, X, y, **fit_params) -> ConsensusLogisticRegression:
        """Cut the rows into ``n_clients`` clients and run consensus ADMM.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            At least ``n_clients`` rows.
        y : array-like, shape (n_samples,)
            Two distinct labels of any type; ``classes_[0]`` is trained as -1 and
            ``classes_[1]`` as +1.

        Returns
        -------
        ConsensusLogisticRegression
            ``self``, fitted.
        """
        refuse_fit_params(self, fit_params)
        X, y_pm = self._validate_fit(X, y)
        config = config_of(self, ConsensusConfig, loss="logistic")
        parts = self._parts(X, y_pm, self.n_clients, self.random_state, "n_clients")
        result = train_consensus(parts, config)
        self.result_ = result
        self._set_model(result.model, config)
        self.history_ = result.history
        self.privacy_spent_ = result.privacy
        return self


class DecentralizedLogisticRegression(_HorizontalClassifier):
    r"""Logistic regression by decentralized ADMM over a graph, optionally with DVP or PVP.

    Parameters
    ----------
    n_nodes : int
        Graph nodes the rows are cut into: at random with ``random_state``, else in
        contiguous blocks.
    graph : {"ring", "grid", "complete", "erdos-renyi", "geometric"}
    perturbation : {"none", "dvp", "pvp"}
    alpha : float or None
        Per-round privacy of every broadcast (with a perturbation).
    node_alphas : sequence of float or None
        Instead of ``alpha``: one per-round privacy per node.
    schedule : {"constant", "geometric", "linear"}
        How each node's :math:`\alpha_p(t)` moves over rounds; ``rate`` for "geometric" and
        "linear" (see :func:`dpfed.protocols.decentralized.calibration.alpha_schedule`).
    delta : float or None
        Also bound every node's total by advanced composition at this delta.
    loss_scale, rho, eta : float
        :math:`C^R`, the regulariser weight and the ADMM penalty.
    iterations : int
    fit_intercept : bool
        Fit an intercept: every node's rows get a constant column
        (:func:`dpfed.core.rows.with_intercept`), its weight regularised with the others.
    intercept_scale : float
        :math:`c \in (0, 1)`: rows become :math:`[\sqrt{1 - c^2} x, c]`.
    random_state : int or None
        Seeds the node split, the graph and the noise.

    Attributes
    ----------
    classes_ : ndarray, shape (2,)
        The two labels seen in ``fit``, sorted; ``classes_[1]`` is the positive class (+1).
    n_features_in_ : int
        Columns of ``X`` in ``fit``.
    coef_ : ndarray, shape (1, n_features)
        The nodes' average model's weights of the rows scaled to unit norm.
    intercept_ : ndarray, shape (1,)
        Its intercept (0 without ``fit_intercept``).
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
        delta: float | None = None,
        loss_scale: float = 1750.0,
        rho: float = 10**-2.5,
        eta: float = 1.0,
        iterations: int = 100,
        fit_intercept: bool = True,
        intercept_scale: float = DEFAULT_INTERCEPT_SCALE,
        random_state: int | None = None,
    ) -> None:
        self.n_nodes = n_nodes
        self.delta = delta
        self.intercept_scale = intercept_scale
        self.fit_intercept = fit_intercept
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

    def _adds_noise(self) -> bool:
        return self.perturbation != "none"

    def fit(self, X, y, **fit_params) -> DecentralizedLogisticRegression:
        """Cut the rows into ``n_nodes`` graph nodes and run decentralized ADMM.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            At least ``n_nodes`` rows.
        y : array-like, shape (n_samples,)
            Two distinct labels of any type; ``classes_[0]`` is trained as -1 and
            ``classes_[1]`` as +1.

        Returns
        -------
        DecentralizedLogisticRegression
            ``self``, fitted.
        """
        refuse_fit_params(self, fit_params)
        X, y_pm = self._validate_fit(X, y)
        config = config_of(self, DecentralizedConfig, loss="logistic")
        graph = make_graph(self.graph, self.n_nodes, rng=self.random_state)
        parts = self._parts(X, y_pm, self.n_nodes, self.random_state, "n_nodes")
        result = train_decentralized(parts, graph, config)
        self.result_ = result
        self.node_models_ = result.models
        self._set_model(result.average_model, config)
        self.history_ = result.history
        self.privacy_spent_ = result.privacy
        return self
