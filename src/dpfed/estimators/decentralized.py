"""The decentralized ADMM estimator, simulated in one process.

``X`` holds every node's rows; ``fit`` cuts them into graph nodes, each row scaled to unit
norm as the privacy analyses assume, and runs the protocol. Prediction uses the nodes' average
model on rows scaled the same way.
"""

from __future__ import annotations

from dpfed.core.rows import DEFAULT_INTERCEPT_SCALE
from dpfed.data import make_graph
from dpfed.estimators._base import config_of, refuse_fit_params
from dpfed.estimators.rows import RowClassifier
from dpfed.protocols.decentralized.driver import DecentralizedConfig, train_decentralized

__all__ = ["DecentralizedLogisticRegression"]


class DecentralizedLogisticRegression(RowClassifier):
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
