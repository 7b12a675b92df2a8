"""Run a consensus ADMM job (a server and horizontally partitioned clients) in one process.

:func:`train_consensus` is what ``dpfed train consensus`` and the estimator call: it calibrates
the noise (paper 002's Gaussian mechanism, to a target total epsilon through the chosen
accountant), builds the roles of :mod:`dpfed.protocols.consensus`, runs them over the
in-process transport and evaluates the global model every round.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol, cast

import numpy as np

from dpfed._validation import (
    DpfedInputError,
    check_binary_labels,
    check_finite_matrix,
)
from dpfed.core.losses import Loss, get_loss, score_metrics
from dpfed.core.rows import (
    DEFAULT_INTERCEPT_SCALE,
    Matrix,
    model_rows,
    split_intercept,
)
from dpfed.core.threads import vector_work
from dpfed.engines import Engine, EngineReport, engine_block, engine_summary, get_engine
from dpfed.parameters import check_params, param
from dpfed.privacy.accountants import accountant_names
from dpfed.privacy.accounting import gaussian_releases_epsilon, moments_accountant_epsilon
from dpfed.privacy.coupling import SAMPLER
from dpfed.privacy.gaussian import GaussianRelease
from dpfed.privacy.ledger import PrivacyEvent, PrivacyLedger
from dpfed.privacy.noise_source import simulation_generator
from dpfed.protocols.base import Training
from dpfed.protocols.consensus.calibration import calibrate_consensus, consensus_sensitivity
from dpfed.protocols.consensus.roles import (
    ConsensusClient,
    ConsensusServer,
    ServerRecord,
    check_relaxation,
)
from dpfed.runtime.disclosure import exact_values, in_process_seed_note, with_exact_values
from dpfed.runtime.progress import progress_bar

CONSENSUS_MECHANISMS = ("none", "gaussian")
#: The accountants a consensus job may use: those that hold at every noise multiplier (the
#: classical ones would refuse most calibrations).
CONSENSUS_ACCOUNTANTS = accountant_names(classic=False)
SERVER = "server"


@dataclass(frozen=True)
class ConsensusConfig:
    r"""Everything a consensus job needs besides the data.

    Parameters
    ----------
    loss : str
        A loss with bounded derivative for the private mechanism (logistic).
    lam : float
        Weight :math:`\lambda` of :math:`R(w) = \|w\|^2/2` in the whole problem
        :math:`\sum_i \frac{1}{m_i}\sum_j \ell_{ij} + \lambda R` (paper 002, eq. 1a).
    rho : float
        ADMM penalty; with noise it also sets the sensitivity
        :math:`2 c_1 / ((\lambda/n + \rho) m_i)`.
    iterations : int
    mechanism : {"none", "gaussian"}
    epsilon, delta : float or None
        Target total privacy of every client over all iterations (gaussian).
    noise_multiplier : float or None
        Instead of epsilon: the per-round noise multiplier :math:`z = \sigma / \Delta`.
    accountant : {"pld", "rdp", "moments"}
        How the total is computed and calibrated (``moments``: the paper's closed form).
    seed : int or None
    relaxation : float
        Over-relaxation :math:`\alpha \in (0, 2)` of the server's average and of every
        client's dual update (1: paper 002's ADMM); see :mod:`dpfed.protocols.consensus.roles`.
    average_last : int
        The job's model after round :math:`k` is the mean of the global models of its last
        ``average_last`` rounds (1: the global model itself); post-processing of broadcasts.
    """

    loss: str = param("logistic", help="loss of every client's local problem")
    lam: float = param(1e-3, help="regulariser weight (eq. 1a)", interval=(0, None))
    rho: float = param(1.0, help="ADMM penalty", interval=(0, None))
    iterations: int = param(20, help="ADMM rounds", interval=(1, None), closed="left")
    mechanism: str = param("none", help="privacy mechanism", choices=CONSENSUS_MECHANISMS)
    epsilon: float | None = param(help="target total epsilon of every client", interval=(0, None))
    delta: float | None = param(help="target total delta of every client", interval=(0, 1))
    noise_multiplier: float | None = param(
        help="instead of epsilon: the per-round multiplier", interval=(0, None)
    )
    accountant: str = param("pld", help="accountant of the total", choices=CONSENSUS_ACCOUNTANTS)
    seed: int | None = param(help="seed of the noise (in process or a simulation)", public=False)
    relaxation: float = param(
        1.0, help="over-relaxation alpha in (0, 2) of the average (1: paper 002's ADMM)"
    )
    average_last: int = param(
        1,
        help="the model is the mean of the last k global models",
        interval=(1, None),
        closed="left",
    )
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

    def prepare_rows(self, X: Matrix) -> Matrix:
        """Rows as the clients train on them (:func:`dpfed.core.rows.model_rows`: clipped to
        norm 1 under a private mechanism, then the intercept column)."""
        return model_rows(
            X,
            bounded=self.mechanism != "none",
            fit_intercept=self.fit_intercept,
            scale=self.intercept_scale,
        )

    def intercept_of(self, model: np.ndarray) -> tuple[np.ndarray, float]:
        """``(coef, intercept)`` of a model, for the rows before the intercept column."""
        return split_intercept(model, fit_intercept=self.fit_intercept, scale=self.intercept_scale)

    def validated(self) -> ConsensusConfig:
        """Check every value (each against its declaration, :func:`~dpfed.parameters.
        check_params`, then the rules between fields); return the config."""
        check_params(self)
        loss = get_loss(self.loss)
        check_relaxation(self.relaxation)
        if self.mechanism == "none":
            if self.epsilon is not None or self.noise_multiplier is not None:
                raise DpfedInputError(
                    "epsilon and noise_multiplier need mechanism 'gaussian'. Found 'none'."
                )
            return self
        if loss.lipschitz is None or not math.isfinite(loss.lipschitz):
            raise DpfedInputError(
                f"the gaussian mechanism needs a loss with a bounded derivative (c1). Found "
                f"{loss.name!r}."
            )
        if not self.rho + self.lam > loss.weak_convexity:  # lam/n <= lam for every n
            raise DpfedInputError(
                "the gaussian mechanism's sensitivity needs a strongly convex local problem: "
                f"rho + lam/n must exceed the {loss.name} loss's weak-convexity modulus "
                f"{loss.weak_convexity:.4g}. Found rho={self.rho}, lam={self.lam}. Raise rho, "
                "or use a convex loss (logistic, smoothed_hinge)."
            )
        if self.delta is None:
            raise DpfedInputError("the gaussian mechanism needs delta. Found none.")
        if (self.epsilon is None) == (self.noise_multiplier is None):
            raise DpfedInputError(
                "the gaussian mechanism takes exactly one of epsilon or noise_multiplier. "
                f"Found epsilon={self.epsilon}, noise_multiplier={self.noise_multiplier}."
            )
        return self


@dataclass
class ConsensusResult:
    """Outcome of a consensus job: the global model, per-round history and privacy."""

    model: np.ndarray
    history: list[dict[str, Any]]
    privacy: dict[str, Any]
    ledger: PrivacyLedger
    config: ConsensusConfig
    rounds: list[ServerRecord]
    seconds: float
    client_sizes: dict[str, int] = field(default_factory=dict)
    exact: dict[str, Any] | None = None  # history figures computed from exact private values
    engine: dict[str, Any] | None = None  # where the roles ran, unless in this process

    @property
    def final(self) -> dict[str, Any]:
        return dict(self.history[-1]) if self.history else {}

    def to_json(self) -> dict[str, Any]:
        return with_exact_values(
            {
                "protocol": "consensus",
                "config": asdict(self.config),
                "parties": [{"name": k, "n_samples": v} for k, v in self.client_sizes.items()],
                "history": self.history,
                "final": self.final,
                "privacy": self.privacy,
                "seconds": self.seconds,
            }
            | engine_block(self.engine),
            self.exact,
        )


def client_names(n: int) -> list[str]:
    return [f"client{i}" for i in range(1, n + 1)]


def noise_multiplier_of(cfg: ConsensusConfig, n_features: int) -> float | None:
    """The per-round multiplier: given, or calibrated to the target total (a client releases
    ``iterations`` models of ``n_features`` coordinates from the exact grid sampler)."""
    if cfg.mechanism == "none":
        return None
    if cfg.noise_multiplier is not None:
        return float(cfg.noise_multiplier)
    # a validated gaussian configuration without a multiplier has epsilon and delta
    return calibrate_consensus(
        cast(float, cfg.epsilon),
        cast(float, cfg.delta),
        cfg.iterations,
        accountant=cfg.accountant,
        coordinates=cfg.iterations * int(n_features),
    ).noise_multiplier


def output_model(models: Sequence[np.ndarray], average_last: int) -> np.ndarray:
    """The job's model after the last of ``models`` (the global models so far): the mean of
    the last ``average_last`` of them (fewer in the first rounds); the last one for 1."""
    if average_last == 1 or len(models) == 1:
        return np.array(models[-1], dtype=float)
    return cast(np.ndarray, np.mean(np.asarray(models[-average_last:], dtype=float), axis=0))


def client_release(
    cfg: ConsensusConfig, z: float | None, n_clients: int, m_i: int
) -> GaussianRelease | None:
    """Client release of a client with ``m_i`` rows (None without noise)."""
    if z is None:
        return None
    loss = get_loss(cfg.loss)
    c1 = float(cast(float, loss.lipschitz))  # |l'| <= L and rows clipped to norm 1
    delta_i = consensus_sensitivity(
        c1=c1,
        lam=cfg.lam,
        n_clients=n_clients,
        rho=cfg.rho,
        m_i=m_i,
        weak_convexity=loss.weak_convexity,
    )
    return GaussianRelease.from_multiplier("model", delta_i, z)


class ReleasingClient(Protocol):
    """What :func:`consensus_privacy` reads of a client (a :class:`ConsensusClient`)."""

    @property
    def name(self) -> str: ...

    @property
    def events(self) -> list[PrivacyEvent]: ...

    @property
    def release(self) -> GaussianRelease | None: ...


def client_epsilon(events: Sequence[PrivacyEvent], cfg: ConsensusConfig) -> float:
    """Epsilon one client has spent (the configured accountant)."""
    if not events:
        return 0.0
    if cfg.accountant == "moments":
        zs = {e.noise_multiplier for e in events}
        if len(zs) == 1:
            return moments_accountant_epsilon(zs.pop(), len(events), cast(float, cfg.delta))
        raise DpfedInputError("the moments closed form needs one noise level per client.")
    return gaussian_releases_epsilon(
        [e.noise_multiplier for e in events],
        cast(float, cfg.delta),
        cfg.accountant,
        coordinates=sum(e.coordinates for e in events),
    )


def _check_clients(parts: Sequence[tuple[Matrix, np.ndarray]], what: str) -> None:
    if len(parts) < 1:
        raise DpfedInputError(f"{what} needs at least one client. Found none.")
    widths = {X.shape[1] for X, _ in parts}
    if len(widths) != 1:
        raise DpfedInputError(f"every client must have the same columns. Found {sorted(widths)}.")
    for k, (X, y) in enumerate(parts):
        check_finite_matrix(f"{what} rows of client {k + 1}", X)
        if np.asarray(y).reshape(-1).shape[0] != X.shape[0]:
            raise DpfedInputError(
                f"client {k + 1} has {X.shape[0]} rows but {np.asarray(y).size} labels."
            )


def client_loss(model: np.ndarray, X: Matrix, y: np.ndarray, *, loss: Loss) -> float:
    """A client's mean training loss at ``model``."""
    return float(np.mean(loss.value(np.asarray(X @ model).reshape(-1), y)))


def consensus_objective(client_losses: Sequence[float], model: np.ndarray, *, lam: float) -> float:
    """:math:`F(w)/n`: the clients' mean losses averaged, plus :math:`(\\lambda/n) R(w)`."""
    n = len(client_losses)
    return sum(client_losses) / n + (lam / n) * 0.5 * float(model @ model)


def test_metrics(
    model: np.ndarray, X_test: Matrix | None, y_test: np.ndarray | None
) -> dict[str, Any]:
    """Test log loss and accuracy of a linear model (None without test rows)."""
    if X_test is None:
        return {"test_log_loss": None, "test_accuracy": None}
    # test rows come with their labels
    return score_metrics(np.asarray(X_test @ model), cast(np.ndarray, y_test))


def global_metrics(
    model: np.ndarray,
    parts: Sequence[tuple[Matrix, np.ndarray]],
    *,
    loss: Loss,
    lam: float,
    X_test: Matrix | None,
    y_test: np.ndarray | None,
) -> dict[str, Any]:
    """Objective :math:`F(w)/n` (eq. 1a over the clients), test log loss and accuracy."""
    losses = [client_loss(model, X, y, loss=loss) for X, y in parts]
    return {"train_objective": consensus_objective(losses, model, lam=lam)} | test_metrics(
        model, X_test, y_test
    )


def _client_names_checked(names: Sequence[str] | None, n: int) -> list[str]:
    """The clients' names (given, or ``client1, client2, ...``), checked distinct."""
    out = list(names) if names is not None else client_names(n)
    if len(out) != n or len(set(out)) != n:
        raise DpfedInputError(f"need {n} distinct client names. Found {out}.")
    return out


def _prepared_parts(
    cfg: ConsensusConfig, parts: Sequence[tuple[Matrix, np.ndarray]], loss: Loss
) -> list[tuple[Matrix, np.ndarray]]:
    """Every client's rows as it trains on them, and its checked labels."""
    prepared = []
    for X, y in parts:
        labels = check_binary_labels("labels", y) if loss.binary else np.asarray(y, float)
        prepared.append((cfg.prepare_rows(X), labels))
    return prepared


def _prepared_test(
    cfg: ConsensusConfig, X_test: Matrix | None, y_test: np.ndarray | None
) -> tuple[Matrix | None, np.ndarray | None]:
    """The test rows as the model sees them, and their checked labels (as given without
    test rows)."""
    if X_test is None:
        return X_test, y_test
    # test rows come with their labels
    labels = check_binary_labels("test labels", cast(np.ndarray, y_test))
    return cfg.prepare_rows(X_test), labels


def _make_clients(
    cfg: ConsensusConfig,
    prepared: Sequence[tuple[Matrix, np.ndarray]],
    names: Sequence[str],
    loss: Loss,
    z: float | None,
    rngs: Sequence[np.random.Generator] | None,
) -> list[ConsensusClient]:
    """The client roles, each with its release and noise generator."""
    n = len(prepared)
    if rngs is None:
        rngs = [simulation_generator(cfg.seed, i, n) for i in range(n)]
    elif len(rngs) != n:
        raise DpfedInputError(f"rngs must hold one generator per client ({n}). Found {len(rngs)}.")
    return [
        ConsensusClient(
            names[i],
            X,
            y,
            server=SERVER,
            loss=loss,
            lam=cfg.lam,
            n_clients=n,
            rho=cfg.rho,
            release=client_release(cfg, z, n, X.shape[0]),
            rng=rngs[i],
            relaxation=cfg.relaxation,
        )
        for i, (X, y) in enumerate(prepared)
    ]


def _consensus_result(
    cfg: ConsensusConfig,
    clients: Sequence[ConsensusClient],
    z: float | None,
    models: Sequence[np.ndarray],
    history: list[dict[str, Any]],
    server: ConsensusServer,
    seconds: float,
    report: EngineReport,
) -> ConsensusResult:
    """The job's result: the final model, the history, the privacy block and its ledger."""
    private = cfg.mechanism != "none"
    ledger = PrivacyLedger()
    for c in clients:
        for e in c.events:
            ledger.record(e)
    privacy = consensus_privacy(cfg, clients, z)
    if private:
        privacy["notes"] += in_process_seed_note(cfg.seed)
    final = output_model(models, cfg.average_last) if models else server.model.copy()
    return ConsensusResult(
        final,
        history,
        privacy,
        ledger,
        replace(cfg),
        server.history,
        seconds,
        {c.name: c.n_samples for c in clients},
        exact_values(["train_objective"] if private else [], left_parties=False),
        engine_summary(report),
    )


@vector_work
def train_consensus(
    parts: Sequence[tuple[Matrix, np.ndarray]],
    config: ConsensusConfig | None = None,
    *,
    names: Sequence[str] | None = None,
    X_test: Matrix | None = None,
    y_test: np.ndarray | None = None,
    progress: bool = False,
    rngs: Sequence[np.random.Generator] | None = None,
    engine: str | Engine | None = None,
) -> ConsensusResult:
    """Train by (DP) consensus ADMM over clients holding ``parts = [(X_i, y_i), ...]``.

    Parameters
    ----------
    parts : sequence of (X_i, y_i)
        Client ``i``'s rows, shape ``(m_i, d)``, and labels in {-1, 1}, shape ``(m_i,)``.
    config : ConsensusConfig
    names : sequence of str, optional
        Client names (default ``client1, client2, ...``).
    X_test, y_test : optional
        Held-out rows for the per-round test figures.
    progress : bool
    rngs : sequence of numpy.random.Generator, optional
        One noise generator per client (default: the streams of ``config.seed``).
    engine : str or Engine, optional
        Where the roles run: ``"inprocess"`` (default) or ``"ray"``, or an engine instance
        (:func:`dpfed.engines.get_engine`); every engine gives the same run bit for bit.

    Notes
    -----
    The history's ``train_objective`` is computed from the clients' exact rows, which this one
    process holds; the result says so in ``exact_values``.
    """
    cfg = (config or ConsensusConfig()).validated()
    _check_clients(parts, "training")
    n = len(parts)
    names = _client_names_checked(names, n)
    loss = get_loss(cfg.loss)
    private = cfg.mechanism != "none"
    prepared = _prepared_parts(cfg, parts, loss)
    X_test, y_test = _prepared_test(cfg, X_test, y_test)
    d = prepared[0][0].shape[1]
    z = noise_multiplier_of(cfg, d)
    clients = _make_clients(cfg, prepared, names, loss, z, rngs)
    history: list[dict[str, Any]] = []
    models: list[np.ndarray] = []
    clock = {"train": 0.0, "since": time.perf_counter()}
    bar = progress_bar(cfg.iterations, progress)

    def observe(record: ServerRecord) -> None:
        clock["train"] += time.perf_counter() - clock["since"]
        entry = {"iteration": record.round, "seconds": clock["train"]}
        models.append(record.model)
        entry |= global_metrics(
            output_model(models, cfg.average_last),
            prepared,
            loss=loss,
            lam=cfg.lam,
            X_test=X_test,
            y_test=y_test,
        )
        entry["epsilon"] = max(client_epsilon(c.events, cfg) for c in clients) if private else 0.0
        entry["primal_residual"] = record.primal_residual
        entry["dual_residual"] = record.dual_residual
        history.append(entry)
        if bar is not None:
            bar.update(1)
        clock["since"] = time.perf_counter()

    server = ConsensusServer(
        SERVER,
        names,
        n_features=d,
        rho=cfg.rho,
        max_rounds=cfg.iterations,
        observer=observe,
        relaxation=cfg.relaxation,
    )
    clock["since"] = time.perf_counter()
    report = get_engine(engine).run({SERVER: server} | {c.name: c for c in clients}, server.start())
    if bar is not None:
        bar.close()
    return _consensus_result(cfg, clients, z, models, history, server, clock["train"], report)


def consensus_privacy(
    cfg: ConsensusConfig, clients: Sequence[ReleasingClient], z: float | None
) -> dict[str, Any]:
    """The ``privacy`` block of the result."""
    if cfg.mechanism == "none":
        return {
            "mechanism": "none",
            "epsilon": 0.0,
            "delta": None,
            "accountant": None,
            "per_party": {},
            "notes": ["no privacy mechanism: the uploads are exact"],
        }
    per_party: dict[str, dict[str, Any]] = {}
    for c in clients:
        release = cast(GaussianRelease, c.release)  # a mechanism's clients release with noise
        per_party[c.name] = {
            "releases": len(c.events),
            "noise_multiplier": z,
            "l2_sensitivity": release.l2_sensitivity,
            "sigma": release.sigma,
            "epsilon": client_epsilon(c.events, cfg),
            "grid_coordinates": sum(e.coordinates for e in c.events),
        }
    return {
        "mechanism": "gaussian",
        "epsilon": max(p["epsilon"] for p in per_party.values()),
        "delta": cfg.delta,
        "accountant": cfg.accountant,
        "sampler": SAMPLER,
        "noise_multiplier": z,
        "per_party": per_party,
        "notes": [
            "gaussian mechanism (paper 002): each upload is the exact local minimiser plus "
            "N(0, sigma^2 I) with sigma = z * 2 c1 / ((lam/n + rho) m_i); rows are clipped to "
            "norm 1 and the logistic loss has |l'| <= 1, so c1 = 1; the local problem is solved "
            "by Newton's method to a gradient norm of 1e-10, not exactly.",
        ],
    }


#: How consensus ADMM trains in one process: ``dpfed train consensus`` and
#: :class:`~dpfed.estimators.ConsensusLogisticRegression` are generated from it, with the
#: settings of paper 002 on Adult as their defaults where they differ from the configuration's.
CONSENSUS_TRAINING = Training(
    config=ConsensusConfig,
    train=train_consensus,
    summary="horizontally partitioned learning with a server: (DP) consensus ADMM",
    description="Clients hold different rows; a server averages their noisy local models.",
    estimator="ConsensusLogisticRegression",
    parties="clients",
    defaults={"lam": 1e-5, "rho": 0.015},
    fixed={"loss": "logistic"},
)
