r"""Run a decentralized ADMM job (nodes on a graph, no server) in one process.

:func:`train_decentralized` builds one :class:`~dpfed.protocols.decentralized.DecentralizedNode`
per graph node, runs them over the in-process transport (every node starts on its own; there
is no central process) and evaluates every round from the nodes' recorded primal estimates:

* ``train_objective``: :math:`J(\bar f(t)) = \frac1P \sum_p Z_p(\bar f(t))` at the nodes'
  average :math:`\bar f(t)`, the objective the nodes jointly minimise;
* ``test_log_loss``, ``test_accuracy`` and ``misclassification_rate`` of :math:`\bar f(t)`;
* ``node_misclassification_rate``: the nodes' mean test error with their own :math:`f_p(t)`;
* ``disagreement``: :math:`\max_p \|f_p(t) - \bar f(t)\|`;
* ``alpha``: the round's per-release privacy, and ``epsilon``: the honest total over rounds
  1..t of the most exposed node
  (:func:`dpfed.protocols.decentralized.calibration.decentralized_total`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import networkx as nx
import numpy as np

from dpfed._validation import (
    DpfedInputError,
    check_binary_labels,
    check_finite_matrix,
    check_positive,
)
from dpfed.core.local import LocalProblem, solve_local
from dpfed.core.losses import Loss, get_loss
from dpfed.core.rows import (
    DEFAULT_INTERCEPT_SCALE,
    Matrix,
    model_rows,
    split_intercept,
)
from dpfed.core.threads import vector_work
from dpfed.engines import Engine, engine_block, engine_summary, get_engine
from dpfed.parameters import check_params, param
from dpfed.privacy.noise_source import simulation_generator
from dpfed.protocols.decentralized.calibration import SCHEDULES, alpha_schedule, decentralized_total
from dpfed.protocols.decentralized.roles import PERTURBATIONS, DecentralizedNode
from dpfed.runtime.disclosure import exact_values, in_process_seed_note, with_exact_values


@dataclass(frozen=True)
class DecentralizedConfig:
    r"""Everything a decentralized job needs besides the data and the graph.

    Parameters
    ----------
    loss_scale : float
        :math:`C^R`.
    rho : float
        Weight of :math:`R(f) = \|f\|^2/2` in every node's objective.
    eta : float
        ADMM penalty.
    iterations : int
    perturbation : {"none", "dvp", "pvp"}
    alpha : float or None
        Per-release privacy of every node's first round (with a perturbation).
    node_alphas : sequence of float or None
        Instead of ``alpha``: one first-round :math:`\alpha_p` per node (nodes in the order of
        the parts), each moved over rounds by ``schedule``.
    schedule : {"constant", "geometric", "linear"}
        How :math:`\alpha_p(t)` moves over rounds (see
        :func:`dpfed.protocols.decentralized.calibration.alpha_schedule`); ``rate`` for "geometric".
    delta : float or None
        If given, the honest total is also bounded by advanced composition at this delta.
    seed : int or None
    """

    loss: str = param("logistic", help="loss of every node's local problem")
    loss_scale: float = param(1750.0, help="C^R, the weight of the loss", interval=(0, None))
    rho: float = param(10**-2.5, help="regulariser weight", interval=(0, None))
    eta: float = param(1.0, help="ADMM penalty", interval=(0, None))
    iterations: int = param(100, help="ADMM rounds", interval=(1, None), closed="left")
    perturbation: str = param("none", help="privacy mechanism", choices=PERTURBATIONS)
    alpha: float | None = param(help="per-round privacy of every broadcast", interval=(0, None))
    node_alphas: tuple[float, ...] | None = param(
        help="instead of alpha: one first-round privacy per node (nodes in graph order)"
    )
    schedule: str = param("constant", help="how alpha moves over rounds", choices=SCHEDULES)
    rate: float | None = param(help="ratio of the geometric schedule")
    delta: float | None = param(
        help="also bound the total by advanced composition", interval=(0, 1)
    )
    seed: int | None = param(help="seed of the noise (in process or a simulation)", public=False)
    fit_intercept: bool = param(
        True,
        help="fit an intercept: every row gets a constant "
        "column (regularised with the other weights)",
    )
    intercept_scale: float = param(
        DEFAULT_INTERCEPT_SCALE,
        help="c in (0, 1): rows become [sqrt(1 - c^2) x, c]",
        interval=(0, 1),
    )

    def __post_init__(self) -> None:
        if self.node_alphas is not None and not isinstance(self.node_alphas, tuple):
            object.__setattr__(self, "node_alphas", tuple(self.node_alphas))

    def prepare_rows(self, X: Matrix) -> Matrix:
        """Rows as the nodes train on them (:func:`dpfed.core.rows.model_rows`: clipped to
        norm 1, then the intercept column)."""
        return model_rows(
            X, bounded=True, fit_intercept=self.fit_intercept, scale=self.intercept_scale
        )

    def intercept_of(self, model: np.ndarray) -> tuple[np.ndarray, float]:
        """``(coef, intercept)`` of a model, for the rows before the intercept column."""
        return split_intercept(model, fit_intercept=self.fit_intercept, scale=self.intercept_scale)

    def validated(self) -> DecentralizedConfig:
        """Check every value (each against its declaration, :func:`~dpfed.parameters.
        check_params`, then the rules between fields); return the config."""
        check_params(self)
        loss = get_loss(self.loss)
        if self.loss != "logistic" and self.perturbation != "none":
            raise DpfedInputError(
                "DVP and PVP are calibrated for the logistic loss (|L'| <= 1, L'' <= 1/4). "
                f"Found {loss.name!r}."
            )
        if self.perturbation == "none":
            for key in ("alpha", "node_alphas"):
                if getattr(self, key) is not None:
                    raise DpfedInputError(f"{key} needs perturbation dvp or pvp. Found 'none'.")
        elif self.alpha is None and self.node_alphas is None:
            raise DpfedInputError(
                f"perturbation {self.perturbation!r} needs alpha (or node_alphas). Found neither."
            )
        elif self.alpha is not None and self.node_alphas is not None:
            raise DpfedInputError("give alpha or node_alphas, not both.")
        elif self.alpha is None:
            if not self.node_alphas:
                raise DpfedInputError("node_alphas needs one alpha per node. Found none.")
            for p, a in enumerate(self.node_alphas):
                check_positive(f"node_alphas[{p}]", a)
        return self

    def alpha_schedules(self, n_nodes: int) -> np.ndarray | None:
        r""":math:`\alpha_p(t)` of every node and round, shape ``(n_nodes, iterations)``
        (``None`` without a perturbation)."""
        if self.perturbation == "none":
            return None
        # a validated perturbation has alpha when it has no node_alphas
        firsts = (
            [cast(float, self.alpha)] * n_nodes
            if self.node_alphas is None
            else list(self.node_alphas)
        )
        if len(firsts) != n_nodes:
            raise DpfedInputError(
                f"node_alphas needs one alpha per node ({n_nodes}). Found {len(firsts)}."
            )
        return np.vstack(
            [alpha_schedule(a, self.iterations, kind=self.schedule, rate=self.rate) for a in firsts]
        )


def most_exposed_total(alphas: np.ndarray, *, delta: float | None) -> tuple[int, dict[str, Any]]:
    r"""The node whose releases compose to the largest total, and that total.

    Parameters
    ----------
    alphas : ndarray of shape (n_nodes, rounds)
        :math:`\alpha_p(t)` of the rounds released so far.
    delta : float or None
        See :func:`dpfed.protocols.decentralized.calibration.decentralized_total`.
    """
    rows, first = np.unique(alphas, axis=0, return_index=True)
    totals = [decentralized_total(r, delta=delta) for r in rows]
    k = max(range(len(totals)), key=lambda i: totals[i]["epsilon"])
    return int(first[k]), totals[k]


@dataclass
class DecentralizedResult:
    """Outcome of a decentralized job."""

    models: dict[str, np.ndarray]
    history: list[dict[str, Any]]
    privacy: dict[str, Any]
    config: DecentralizedConfig
    graph: dict[str, Any]
    seconds: float
    node_sizes: dict[str, int] = field(default_factory=dict)
    exact: dict[str, Any] | None = None  # history figures computed from exact private values
    engine: dict[str, Any] | None = None  # where the roles ran, unless in this process

    @property
    def final(self) -> dict[str, Any]:
        return dict(self.history[-1]) if self.history else {}

    @property
    def average_model(self) -> np.ndarray:
        return cast(np.ndarray, np.mean(list(self.models.values()), axis=0))

    def to_json(self) -> dict[str, Any]:
        return with_exact_values(
            {
                "protocol": "decentralized",
                "config": asdict(self.config),
                "graph": self.graph,
                "parties": [{"name": k, "n_samples": v} for k, v in self.node_sizes.items()],
                "history": self.history,
                "final": self.final,
                "privacy": self.privacy,
                "seconds": self.seconds,
            }
            | engine_block(self.engine),
            self.exact,
        )


def node_names(n: int) -> list[str]:
    return [f"node{p}" for p in range(n)]


def node_objective_weights(
    parts: Sequence[tuple[Matrix, np.ndarray]], loss_scale: float
) -> np.ndarray:
    """Per-row weights :math:`C^R/B_p` of the joint objective, rows in node order."""
    return np.concatenate([np.full(X.shape[0], loss_scale / X.shape[0]) for X, _ in parts])


def node_loss(f: np.ndarray, X: Matrix, y: np.ndarray, *, loss: Loss, loss_scale: float) -> float:
    r"""One node's scaled loss :math:`\frac{C^R}{B_p}\sum_i \mathcal L(y_i f^\top x_i)`."""
    return loss_scale * float(np.mean(loss.value(np.asarray(X @ f).reshape(-1), y)))


#: History figures computed from the nodes' per-round iterates: exact values under PVP, whose
#: broadcasts are the iterates plus noise.
ITERATE_FIGURES = (
    "test_log_loss",
    "test_accuracy",
    "misclassification_rate",
    "node_misclassification_rate",
    "disagreement",
)


def combine_objective(node_losses: Sequence[float], f: np.ndarray, *, rho: float) -> float:
    r""":math:`J(f)` from every node's scaled loss at ``f`` (node order)."""
    return sum(node_losses) / len(node_losses) + rho * 0.5 * float(f @ f)


def joint_objective(
    f: np.ndarray,
    parts: Sequence[tuple[Matrix, np.ndarray]],
    *,
    loss: Loss,
    loss_scale: float,
    rho: float,
) -> float:
    r""":math:`J(f) = \frac1P \sum_p Z_p(f)`."""
    return combine_objective(
        [node_loss(f, X, y, loss=loss, loss_scale=loss_scale) for X, y in parts], f, rho=rho
    )


def centralized_optimum(
    parts: Sequence[tuple[Matrix, np.ndarray]], *, loss: Loss, loss_scale: float, rho: float
) -> np.ndarray:
    r"""The minimiser of :math:`J` over all nodes' rows (the reference of the consensus)."""
    import scipy.sparse as sp

    P = len(parts)
    blocks = [X for X, _ in parts]
    X = sp.vstack(blocks).tocsr() if any(sp.issparse(b) for b in blocks) else np.vstack(blocks)
    y = np.concatenate([y for _, y in parts])
    problem = LocalProblem(loss_weight=node_objective_weights(parts, loss_scale) / P, l2=rho)
    return solve_local(X, y, loss, problem, tol=1e-12).x


def named_neighbours(graph: nx.Graph, names: list[str]) -> dict[str, list[str]]:
    """Every part's neighbours by name (parts in the order of ``names``, nodes sorted); the
    graph must have one node per part and be connected."""
    if graph.number_of_nodes() != len(names):
        raise DpfedInputError(
            f"the graph has {graph.number_of_nodes()} nodes but there are {len(names)} parts."
        )
    if not nx.is_connected(graph):
        raise DpfedInputError(
            f"the graph must be connected. Found {nx.number_connected_components(graph)} "
            "components."
        )
    order = sorted(graph.nodes)
    index = {node: k for k, node in enumerate(order)}
    return {
        names[index[node]]: [names[index[j]] for j in sorted(graph.neighbors(node))]
        for node in order
    }


@vector_work
def train_decentralized(
    parts: Sequence[tuple[Matrix, np.ndarray]],
    graph: nx.Graph,
    config: DecentralizedConfig | None = None,
    *,
    names: Sequence[str] | None = None,
    X_test: Matrix | None = None,
    y_test: np.ndarray | None = None,
    rngs: Sequence[np.random.Generator] | None = None,
    engine: str | Engine | None = None,
) -> DecentralizedResult:
    """Train by decentralized ADMM over ``graph``; node ``k`` (sorted graph order) holds
    ``parts[k] = (X_k, y_k)``.

    ``rngs`` holds one noise generator per node (default: the streams of ``config.seed``);
    ``engine`` says where the nodes run (``"inprocess"``, the default, or ``"ray"``; see
    :func:`dpfed.engines.get_engine`), with the same run bit for bit on every engine.
    The history is computed from every node's exact iterates and rows, which this one process
    holds: its ``train_objective`` always, and under PVP (whose iterates are never broadcast)
    the figures of :data:`ITERATE_FIGURES` too; the result says so in ``exact_values``.
    """
    cfg = (config or DecentralizedConfig()).validated()
    if len(parts) < 2:
        raise DpfedInputError(f"a network needs at least two nodes. Found {len(parts)}.")
    names = list(names) if names is not None else node_names(len(parts))
    neighbours = named_neighbours(graph, names)
    loss = get_loss(cfg.loss)
    prepared = []
    for k, (X, y) in enumerate(parts):
        check_finite_matrix(f"rows of node {names[k]}", X)
        prepared.append((cfg.prepare_rows(X), check_binary_labels("labels", y)))
    if len({X.shape[1] for X, _ in prepared}) != 1:
        raise DpfedInputError("every node must have the same columns.")
    if X_test is not None:
        X_test = cfg.prepare_rows(X_test)
        # test rows come with their labels
        y_test = check_binary_labels("test labels", cast(np.ndarray, y_test))
    P = len(prepared)
    alphas = cfg.alpha_schedules(P)
    if rngs is None:
        rngs = [simulation_generator(cfg.seed, k, P) for k in range(P)]
    elif len(rngs) != P:
        raise DpfedInputError(f"rngs must hold one generator per node ({P}). Found {len(rngs)}.")
    nodes = [
        DecentralizedNode(
            names[k],
            X,
            y,
            neighbours=neighbours[names[k]],
            loss=loss,
            loss_scale=cfg.loss_scale,
            rho=cfg.rho,
            eta=cfg.eta,
            max_rounds=cfg.iterations,
            perturbation=cfg.perturbation,
            alphas=None if alphas is None else alphas[k],
            c1=loss.smoothness,
            rng=rngs[k],
        )
        for k, (X, y) in enumerate(prepared)
    ]
    started = time.perf_counter()
    report = get_engine(engine).run(
        {n.name: n for n in nodes}, [m for n in nodes for m in n.start()]
    )
    seconds = time.perf_counter() - started
    history: list[dict[str, Any]] = []
    for t in range(1, cfg.iterations + 1):
        models = [n.models[t] for n in nodes]
        mean = np.mean(models, axis=0)
        losses = [node_loss(mean, X, y, loss=loss, loss_scale=cfg.loss_scale) for X, y in prepared]
        history.append(round_entry(t, models, losses, cfg, X_test, y_test, alphas))
    for entry in history:
        entry["seconds"] = seconds * entry["iteration"] / cfg.iterations
    final_models = {n.name: n.exact.copy() for n in nodes}
    privacy = decentralized_privacy(cfg, alphas, names)
    exact = None
    if alphas is not None:
        privacy["notes"] += in_process_seed_note(cfg.seed)
        exact = exact_values(
            ["train_objective", *(ITERATE_FIGURES if cfg.perturbation == "pvp" else ())],
            left_parties=False,
        )
    position = {node: k for k, node in enumerate(sorted(graph.nodes))}
    edges = sorted([sorted((names[position[a]], names[position[b]])) for a, b in graph.edges])
    return DecentralizedResult(
        final_models,
        history,
        privacy,
        cfg,
        {"nodes": P, "edges": len(edges), "edge_list": edges},
        seconds,
        {n.name: n.n_samples for n in nodes},
        exact,
        engine_summary(report),
    )


def round_entry(
    t: int,
    models: Sequence[np.ndarray],
    node_losses: Sequence[float] | None,
    cfg: DecentralizedConfig,
    X_test: Matrix | None,
    y_test: np.ndarray | None,
    alphas: np.ndarray | None,
) -> dict[str, Any]:
    """One history entry from the nodes' primal estimates of round ``t`` and every node's
    scaled loss at their average (:func:`node_loss`; None: no training objective); ``alphas`` is
    :meth:`DecentralizedConfig.alpha_schedules` (the entry's ``alpha`` is the round's largest,
    its ``epsilon`` the total of the most exposed node)."""
    mean = np.mean(models, axis=0)
    entry: dict[str, Any] = {
        "iteration": t,
        "seconds": None,
        "train_objective": (
            None if node_losses is None else combine_objective(node_losses, mean, rho=cfg.rho)
        ),
        "test_log_loss": None,
        "test_accuracy": None,
        "misclassification_rate": None,
        "node_misclassification_rate": None,
        "disagreement": float(max(np.linalg.norm(m - mean) for m in models)),
        "alpha": None if alphas is None else float(np.max(alphas[:, t - 1])),
        "epsilon": 0.0
        if alphas is None
        else most_exposed_total(alphas[:, :t], delta=cfg.delta)[1]["epsilon"],
    }
    if X_test is not None:
        y_test = cast(np.ndarray, y_test)  # test rows come with their labels
        s = np.asarray(X_test @ mean).reshape(-1)
        entry["test_log_loss"] = float(np.mean(np.logaddexp(0.0, -y_test * s)))
        entry["test_accuracy"] = float(np.mean(np.where(s > 0, 1.0, -1.0) == y_test))
        entry["misclassification_rate"] = 1.0 - entry["test_accuracy"]
        errors = [
            float(np.mean(np.where(np.asarray(X_test @ m).reshape(-1) > 0, 1.0, -1.0) != y_test))
            for m in models
        ]
        entry["node_misclassification_rate"] = float(np.mean(errors))
    return entry


#: What a result's ``privacy.sampler`` says of each perturbation's noise.
SAMPLERS = {
    "dvp": "objective perturbation: l2-Laplace drawn in float64 inside the local objective "
    "(the release is the solver's minimiser, not value + noise)",
    "pvp": "output perturbation: the grid point nearest f + e, e l2-Laplace drawn exactly "
    "(dpfed.privacy.l2_laplace_grid, grid 2^(floor(log2(1/zeta)) - 20)); the final "
    "step is objective perturbation, l2-Laplace in float64 inside the objective",
}


def decentralized_privacy(
    cfg: DecentralizedConfig, alphas: np.ndarray | None, names: Sequence[str]
) -> dict[str, Any]:
    """The ``privacy`` block: per-release alpha and the honest total of the most exposed node
    (with ``node_alphas``, also every node's total)."""
    if alphas is None:
        return {
            "mechanism": "none",
            "epsilon": 0.0,
            "delta": None,
            "accountant": None,
            "per_party": {},
            "notes": ["no perturbation: the broadcasts are exact"],
        }
    worst, total = most_exposed_total(alphas, delta=cfg.delta)
    per_node: dict[str, dict[str, Any]] = {}
    if cfg.node_alphas is not None:
        per_node = {
            name: {"alpha": float(row[0]), **decentralized_total(row, delta=cfg.delta)}
            for name, row in zip(names, alphas, strict=True)
        }
    return {
        "mechanism": cfg.perturbation,
        "epsilon": total["epsilon"],
        "delta": total["delta"] if total["delta"] is not None else 0.0,
        "accountant": total["method"],
        "alpha_per_release": [float(a) for a in alphas[worst]],
        "alpha_max": float(np.max(alphas)),
        "total": total,
        "most_exposed_node": names[worst],
        "per_node": per_node,
        "sampler": SAMPLERS[cfg.perturbation],
        "notes": [
            f"{cfg.perturbation}: every broadcast of every node is alpha_p(t)-DP for that "
            "node's rows (the paper's dynamic DP); the epsilon above is the honest total over "
            f"all {alphas.shape[1]} rounds of the most exposed node, which the per-round alpha "
            "is not. It is a bound by adaptive composition: besides the node's rows and fresh "
            "noise every round reads only broadcast values and the dual computed from them"
            + (
                " (PVP: the node's own last broadcast V_p(t) replaces the paper's unreleased "
                "f_p(t) - e_p(t) of eq. 18, also in the final DVP step)."
                if cfg.perturbation == "pvp"
                else "."
            ),
            "objective perturbation (DVP, PVP's final round) assumes the exact minimiser; it is "
            "computed by Newton's method to a gradient norm of 1e-10 relative to C^R.",
            "objective perturbation's noise is drawn in float64: its alpha-DP proof is about "
            "continuous noise and the exact minimiser, and covers neither the float draw nor "
            "the solver's (docs/privacy.md, 'Samplers').",
        ],
        "nodes": len(names),
    }
