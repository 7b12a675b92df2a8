r"""Reproduction of Zhang & Zhu (paper 001): decentralized ADMM with dynamic DP (DVP, PVP).

:func:`run_decentralized_reproduction` (``dpfed reproduce decentralized``) writes, into one
folder:

``nonprivate.{png,json}``
    Non-private decentralized ADMM (Algorithm 1, :math:`\rho = 10^{-10}`, :math:`C^R = 1750`)
    on a ring and on an Erdos-Renyi graph: relative objective gap
    :math:`(J(\bar f(t)) - J^\star)/J^\star` to the centralised optimum of the same objective,
    and the test misclassification error rate (MER) of the nodes' average model, per iteration.
``fig3_convergence.{png,json}``
    The paper's figure 3: DVP (:math:`\rho = 10^{-2.5}`, :math:`C^R = 1750`) and PVP
    (:math:`\rho = 10^{-1}`, :math:`C^R = 146`) at :math:`\alpha \in \{0.01, 0.1, 0.5, 1\}`
    (constant schedule): empirical loss (the objective :math:`J` at the nodes' average) and MER
    per iteration, with the non-private runs of the same :math:`(\rho, C^R)` as references.
``fig4_tradeoff.{png,json}``
    The paper's figures 4-5: final empirical loss and MER against :math:`\alpha` on a denser
    grid, the fitted :math:`L_{acc}(\alpha) = c_4 e^{-c_5\alpha} + c_6`
    (:func:`dpfed.protocols.decentralized.alpha_design.fit_accuracy_loss`) and the
    :math:`\alpha^\star`
    chosen by :func:`~dpfed.protocols.decentralized.alpha_design.choose_alpha` with the paper's
    weights.
``fig5_seeds.{png,json}``
    Spread (std, min, max) of the final empirical loss and MER of DVP and PVP over seeds at
    :math:`\alpha = 1` and :math:`0.1` (the paper claims DVP varies less; the measured answer
    is reported either way).
``eta_sensitivity.{png,json}``
    Beyond the paper (which does not give :math:`\eta`): DVP and PVP at :math:`\alpha = 1`
    over a grid of the ADMM penalty :math:`\eta`, and the :math:`\eta` of lowest final
    *training* objective.
``summary.md``, ``summary.json``
    Headline numbers, which targets are met, notes and the file names (written last).

Decisions (the paper leaves them open; they are also recorded in the JSON files):

* **Data.** UCI Adult as read by :func:`dpfed.data.load_dataset` (105 columns), every row
  scaled to unit l2 norm (:func:`dpfed.core.rows.normalize_rows`; the theorems need
  :math:`\|x\| \le 1`), split evenly among the nodes with
  ``horizontal_split(n, nodes, rng=0)``. Test rows: the official Adult test file.
* **Network and penalty.** 10 nodes on a ring (``make_graph("ring", 10)``); the Erdos-Renyi
  graph of the non-private comparison is ``make_graph("erdos-renyi", 10, rng=0)``.
  :math:`\eta = 0.003` for the non-private Algorithm 1 (measured with the declared public
  scaling of Adult: relative gap to the centralised optimum :math:`8.8 \cdot 10^{-5}` on the ring
  and :math:`6.1 \cdot 10^{-4}` on the Erdos-Renyi graph after 100 iterations, where
  :math:`\eta = 0.03` leaves :math:`7.4 \cdot 10^{-3}` and :math:`1.2 \cdot 10^{-2}`: with the
  almost unregularised :math:`\rho = 10^{-10}` the optimum has large weights on the sparse
  monetary columns, and a smaller penalty lets the nodes move to them faster), :math:`\eta = 3`
  for DVP and
  :math:`\eta = 0.03` for PVP (and for the non-private runs with their settings): the
  ``eta_sensitivity`` sweep shows these give each scheme its lowest training objective.
* **Empirical loss.** Figure 3 plots the objective :math:`J(\bar f(t)) = \frac1P\sum_p
  Z_p(\bar f(t))` the nodes jointly minimise (as reported by the runtime). Figures 4-5 and
  the seed spread use the *mean training log loss* of the final average model,
  :math:`(J(\bar f) - \rho\|\bar f\|^2/2)/C^R`: DVP and PVP use different :math:`C^R`
  (1750 vs 146) and :math:`\rho`, so their :math:`J` are not on one scale, while the mean log
  loss is, and it is on the scale of the paper's own fitted constants (:math:`c_4 = 0.2`).
  The JSON also carries the raw :math:`J` and :math:`C^R`-scaled empirical loss.
* **Choosing alpha.** :math:`\alpha^\star = \arg\max_{\alpha \in [0.01, 1]}
  U_{priv}(\alpha) - L_{acc}(\alpha)` with :math:`w = (0.02, 6, 9, 1)` (the reading of
  :mod:`dpfed.protocols.decentralized.alpha_design`).
* **Privacy totals.** Every broadcast is :math:`\alpha`-DP (the paper's dynamic DP); the
  honest total of a node over all rounds is reported from the runs' privacy blocks: basic
  composition :math:`T\alpha` and advanced composition at :math:`\delta = 10^{-5}`.
* **Failed local solves.** A node's update must be the exact minimiser (objective
  perturbation); the runtime refuses to release an update whose Newton solve misses its
  tolerance (:class:`dpfed.core.local.LocalSolveError`). A private run that hits this is
  retried with the seed shifted by 1000 (at most twice); the attempts are recorded in the
  JSON and counted in the summary's notes, and a run that fails every attempt is reported as
  failed (its value is missing) instead of aborting the reproduction.

Runs are independent and, in the full configuration, executed by two worker processes (spawn
start method; BLAS limited to one thread per process, which is also much faster for these
105-column problems than a shared multi-threaded BLAS).

Failure semantics: every file is written atomically, an experiment writes its JSON and PNG
only after all of its runs and its figure are done, and ``summary.md`` / ``summary.json`` are
written last: if anything fails midway, they are absent.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.losses import get_loss
from dpfed.core.threads import limit_blas_threads
from dpfed.data import make_graph
from dpfed.experiments.adult import AdultParts, adult_folder, load_adult_parts
from dpfed.experiments.plotting_horizontal import (
    plot_convergence,
    plot_eta,
    plot_nonprivate,
    plot_seeds,
    plot_tradeoff,
)
from dpfed.experiments.report import ReportTemplate, fmt, summary_markdown
from dpfed.experiments.runner import (
    Reproduction,
    stopwatch,
    with_retries,
    without_runs,
)
from dpfed.protocols.decentralized.alpha_design import (
    PAPER_WEIGHTS,
    LossCurve,
    choose_alpha,
    fit_accuracy_loss,
    privacy_utility,
)
from dpfed.protocols.decentralized.calibration import dvp_noise, pvp_zeta
from dpfed.protocols.decentralized.driver import (
    DecentralizedConfig,
    centralized_optimum,
    joint_objective,
    train_decentralized,
)

#: (rho, C^R) of the paper's section V for each algorithm.
PAPER_SETTINGS: dict[str, tuple[float, float]] = {
    "none": (1e-10, 1750.0),
    "dvp": (10**-2.5, 1750.0),
    "pvp": (1e-1, 146.0),
}
#: The paper's fitted curves (section V): DVP c4 = 0.2, c5 = 25; PVP c4 = 20, c5 = 20.
PAPER_CURVES = {"dvp": (0.2, 25.0), "pvp": (20.0, 20.0)}
TARGET_RELATIVE_GAP = 1e-3
TARGET_MER_POINTS = 2.0
#: The prose of the report (summary.md and the notes).
REPORT = ReportTemplate("decentralized.md")


@dataclass(frozen=True)
class DecentralizedPlan:
    """Sizes of one reproduction run (:func:`full_plan` or :func:`quick_plan`)."""

    quick: bool
    nodes: int
    iterations: int
    eta: float
    graphs: tuple[str, ...]
    convergence_alphas: tuple[float, ...]
    tradeoff_alphas: tuple[float, ...]
    seed_alphas: tuple[float, ...]
    seeds: tuple[int, ...]
    eta_grid: tuple[float, ...]
    eta_alpha: float
    delta: float = 1e-5
    max_train_rows: int | None = None
    max_test_rows: int | None = None
    split_seed: int = 0
    workers: int = 1
    dvp_eta: float = 3.0
    pvp_eta: float = 0.03

    def eta_for(self, setting: str) -> float:
        """The ADMM penalty of runs with ``setting``'s (rho, C^R): ``eta`` for the non-private
        Algorithm 1, ``dvp_eta`` and ``pvp_eta`` for the private schemes and the non-private runs
        with their settings."""
        return {"dvp": self.dvp_eta, "pvp": self.pvp_eta}.get(setting, self.eta)

    def eta_text(self) -> str:
        """The penalties in words, for titles and summaries."""
        return f"η = {self.eta:g} (non-private), {self.dvp_eta:g} (DVP), {self.pvp_eta:g} (PVP)"


def full_plan() -> DecentralizedPlan:
    """The configuration of ``dpfed reproduce decentralized`` (about 10-15 minutes, 2 cores)."""
    return DecentralizedPlan(
        quick=False,
        nodes=10,
        iterations=100,
        eta=0.003,
        graphs=("ring", "erdos-renyi"),
        convergence_alphas=(0.01, 0.1, 0.5, 1.0),
        tradeoff_alphas=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0),
        seed_alphas=(1.0, 0.1),
        seeds=tuple(range(10)),
        eta_grid=(0.03, 0.3, 1.0, 3.0, 10.0),
        eta_alpha=1.0,
        workers=max(1, min(2, os.cpu_count() or 1)),
    )


def quick_plan() -> DecentralizedPlan:
    """A small configuration for tests and smoke runs (well under a minute).

    3,000 training and 3,000 test rows (``default_rng(0)``), 4 nodes, 20 iterations, two
    alphas in figure 3 (three for the fit of figure 4), two seeds, two etas, one process.
    """
    return DecentralizedPlan(
        quick=True,
        nodes=4,
        iterations=20,
        eta=0.03,
        graphs=("ring", "erdos-renyi"),
        convergence_alphas=(0.1, 1.0),
        tradeoff_alphas=(0.1, 0.5, 1.0),
        seed_alphas=(1.0,),
        seeds=(0, 1),
        eta_grid=(0.03, 3.0),
        eta_alpha=1.0,
        max_train_rows=3000,
        max_test_rows=3000,
        workers=1,
    )


# ---------------------------------------------------------------------------------------------
# Runs


@dataclass(frozen=True)
class RunSpec:
    """One decentralized run."""

    perturbation: str
    rho: float
    loss_scale: float
    alpha: float | None = None
    seed: int = 0
    graph: str = "ring"
    eta: float = 0.03
    iterations: int = 100
    delta: float | None = None

    @property
    def key(self) -> str:
        parts = [self.perturbation]
        if self.alpha is not None:
            parts.append(f"alpha={self.alpha:g}")
        parts += [f"rho={self.rho:.3g}", f"CR={self.loss_scale:g}", f"eta={self.eta:g}", self.graph]
        if self.perturbation != "none":
            parts.append(f"seed={self.seed}")
        return ",".join(parts)


def paper_spec(
    method: str,
    plan: DecentralizedPlan,
    *,
    alpha: float | None = None,
    seed: int = 0,
    graph: str = "ring",
    eta: float | None = None,
    setting: str | None = None,
) -> RunSpec:
    """A run with the paper's (rho, C^R) of ``setting`` (default: of ``method``)."""
    rho, scale = PAPER_SETTINGS[setting or method]
    return RunSpec(
        perturbation=method,
        rho=rho,
        loss_scale=scale,
        alpha=None if method == "none" else alpha,
        seed=seed,
        graph=graph,
        eta=plan.eta_for(setting or method) if eta is None else eta,
        iterations=plan.iterations,
        delta=None if method == "none" else plan.delta,
    )


_SERIES = (
    "train_objective",
    "misclassification_rate",
    "node_misclassification_rate",
    "test_log_loss",
    "disagreement",
    "epsilon",
)


def execute_run(spec: RunSpec, data: AdultParts) -> dict:
    """Train one run and digest it (retrying a private run whose local solve failed)."""
    graph = make_graph(spec.graph, len(data.parts), rng=0)

    def train(seed: int):
        cfg = DecentralizedConfig(
            loss_scale=spec.loss_scale,
            rho=spec.rho,
            eta=spec.eta,
            iterations=spec.iterations,
            perturbation=spec.perturbation,
            alpha=spec.alpha,
            schedule="constant",
            delta=spec.delta,
            seed=seed,
            fit_intercept=False,  # the paper's model has none
        )
        return train_decentralized(data.parts, graph, cfg, X_test=data.X_test, y_test=data.y_test)

    done = with_retries(train, spec.seed, retry=spec.perturbation != "none")
    if done.result is not None:
        return _digest(spec, done.result, done.seed_used, done.attempts, done.seconds)
    return {
        "key": spec.key,
        "spec": asdict(spec),
        "failed": done.error,
        "attempts": done.attempts,
        "seed_used": None,
        "final": None,
        "privacy": None,
        "iterations": [],
        **{k: [] for k in _SERIES},
        "seconds": sum(a["seconds"] for a in done.attempts),
    }


def _digest(spec: RunSpec, result, seed: int, attempts: list[dict], seconds: float) -> dict:
    history = result.history
    mean = result.average_model
    last = history[-1]
    empirical = float(last["train_objective"]) - 0.5 * spec.rho * float(mean @ mean)
    privacy = result.privacy
    total = privacy.get("total") or {}
    before = history[-2] if len(history) > 1 else last
    return {
        "key": spec.key,
        "spec": asdict(spec),
        "failed": None,
        "attempts": attempts,
        "seed_used": seed,
        "iterations": [h["iteration"] for h in history],
        **{k: [h.get(k) for h in history] for k in _SERIES},
        "final": {
            "iteration": last["iteration"],
            "train_objective": last["train_objective"],
            "empirical_loss": empirical,
            "mean_log_loss": empirical / spec.loss_scale,
            "model_norm": float(np.linalg.norm(mean)),
            "misclassification_rate": last["misclassification_rate"],
            "node_misclassification_rate": last["node_misclassification_rate"],
            "test_log_loss": last["test_log_loss"],
            "test_accuracy": last["test_accuracy"],
            "disagreement": last["disagreement"],
        },
        # the last round of a private run is the stop step (PVP: one DVP step, eq. 21-23)
        "before_stop": {
            k: before[k]
            for k in ("iteration", "train_objective", "misclassification_rate", "test_log_loss")
        },
        "privacy": {
            "mechanism": privacy.get("mechanism"),
            "alpha_per_release": spec.alpha,
            "epsilon": privacy.get("epsilon"),
            "delta": privacy.get("delta"),
            "accountant": privacy.get("accountant"),
            "basic_epsilon": total.get("basic_epsilon", 0.0 if spec.alpha is None else None),
            "advanced_epsilon": total.get("advanced_epsilon"),
            "rounds": len(history),
        },
        "graph": {k: v for k, v in result.graph.items() if k != "edge_list"},
        "seconds": seconds,
    }


_WORKER_DATA: AdultParts | None = None


def _init_worker(data: AdultParts) -> None:
    global _WORKER_DATA
    limit_blas_threads()  # for the life of the worker process
    _WORKER_DATA = data


def _run_with(data: AdultParts, spec: RunSpec) -> dict:
    """One run on ``data`` (a task of an executor that is sent the data with it)."""
    with limit_blas_threads():
        return execute_run(spec, data)


def _worker_run(spec: RunSpec) -> dict:
    if _WORKER_DATA is None:  # pragma: no cover - the initializer always ran
        raise RuntimeError("worker data not initialised")
    return execute_run(spec, _WORKER_DATA)


class RunCache:
    """Runs each spec once: on ``executor`` when given (e.g. Ray tasks), else in worker
    processes when there are several workers, else here."""

    def __init__(
        self,
        data: AdultParts,
        workers: int,
        step: Callable[[str], None],
        executor: Executor | None = None,
    ) -> None:
        self.data, self.step = data, step
        self._done: dict[RunSpec, dict] = {}
        self._pending: dict[RunSpec, Future] = {}
        self._pool: Executor | None = None
        self._owned = False
        self._run: Callable[[RunSpec], dict] = _worker_run
        if executor is not None:
            self._pool = executor
            self._run = functools.partial(_run_with, data)
        elif workers > 1:
            self._owned = True
            self._pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(data,),
            )

    def submit(self, specs: Iterable[RunSpec]) -> None:
        """Start runs in the background (no-op without workers)."""
        if self._pool is None:
            return
        for spec in specs:
            if spec not in self._done and spec not in self._pending:
                self._pending[spec] = self._pool.submit(self._run, spec)

    def get(self, spec: RunSpec) -> dict:
        if spec not in self._done:
            future = self._pending.pop(spec, None)
            if future is not None:
                self._done[spec] = future.result()
            else:
                self._done[spec] = execute_run(spec, self.data)
            self.step(spec.key)
        return self._done[spec]

    def many(self, specs: Sequence[RunSpec]) -> list[dict]:
        self.submit(specs)
        return [self.get(s) for s in specs]

    def all_runs(self) -> list[dict]:
        return list(self._done.values())

    def close(self) -> None:
        if self._pool is not None and self._owned:
            self._pool.shutdown(wait=True, cancel_futures=True)
        else:
            for future in self._pending.values():
                future.cancel()
        self._pool = None


# ---------------------------------------------------------------------------------------------
# Experiments


@dataclass
class _Context:
    plan: DecentralizedPlan
    data: AdultParts
    run: Reproduction
    runs: RunCache
    optima: dict[tuple[float, float], dict] = field(default_factory=dict)

    def optimum(self, rho: float, loss_scale: float) -> dict:
        """Centralised optimum of J for (rho, C^R): objective, norm and test MER."""
        key = (rho, loss_scale)
        if key not in self.optima:
            loss = get_loss("logistic")
            f = centralized_optimum(self.data.parts, loss=loss, loss_scale=loss_scale, rho=rho)
            value = joint_objective(f, self.data.parts, loss=loss, loss_scale=loss_scale, rho=rho)
            s = self.data.X_test @ f
            mer = float(np.mean(np.where(s > 0, 1.0, -1.0) != self.data.y_test))
            self.optima[key] = {
                "rho": rho,
                "loss_scale": loss_scale,
                "objective": value,
                "norm": float(np.linalg.norm(f)),
                "test_mer": mer,
            }
        return self.optima[key]


def _final(run: Mapping[str, Any], key: str) -> float | None:
    final = run.get("final")
    if not final:
        return None
    value = final.get(key)
    return None if value is None or not math.isfinite(float(value)) else float(value)


def _label(run: Mapping[str, Any]) -> str:
    spec = run["spec"]
    name = {"none": "non-private", "dvp": "DVP", "pvp": "PVP"}[spec["perturbation"]]
    text = f"{name} (ρ={spec['rho']:.3g}, C^R={spec['loss_scale']:g})"
    if spec["alpha"] is not None:
        text = f"{name} α={spec['alpha']:g}"
    return text + (" [failed]" if run.get("failed") else "")


def _curve(run: Mapping[str, Any], label: str | None = None) -> dict | None:
    if run.get("failed"):
        return None
    return {
        "label": label or _label(run),
        "iterations": run["iterations"],
        "train_objective": run["train_objective"],
        "misclassification_rate": run["misclassification_rate"],
    }


def _brief(run: Mapping[str, Any]) -> dict:
    out = {
        "key": run["key"],
        "failed": run.get("failed"),
        "seed_used": run.get("seed_used"),
        "retries": len(run.get("attempts", [])),
    }
    out |= dict(run.get("final") or {})
    if run.get("before_stop"):
        out["misclassification_rate_before_stop"] = run["before_stop"]["misclassification_rate"]
        out["train_objective_before_stop"] = run["before_stop"]["train_objective"]
    if run.get("privacy"):
        out["epsilon_total"] = run["privacy"]["epsilon"]
        out["epsilon_delta"] = run["privacy"]["delta"]
    return out


def noise_calibration(
    plan: DecentralizedPlan,
    data: AdultParts,
    alpha: float,
    eta: float | None = None,
    n_neighbours: int = 2,
) -> dict:
    """DVP's (zeta, Phi) and PVP's zeta at ``alpha`` for the smallest node, and the mean norm
    of the noise each draws (l2-Laplace in d dimensions: norm ~ Gamma(d, 1/zeta))."""
    dvp_eta = plan.eta_for("dvp") if eta is None else eta
    pvp_eta = plan.eta_for("pvp") if eta is None else eta
    B = min(X.shape[0] for X, _ in data.parts)
    d = data.X_test.shape[1]
    rho, scale = PAPER_SETTINGS["dvp"]
    dvp = dvp_noise(alpha, c1=0.25, CR=scale, B=B, rho=rho, eta=dvp_eta, n_neighbours=n_neighbours)
    prho, pscale = PAPER_SETTINGS["pvp"]
    pz = pvp_zeta(alpha, rho=prho, B=B, CR=pscale)
    stop = dvp_noise(
        alpha, c1=0.25, CR=pscale, B=B, rho=prho, eta=pvp_eta, n_neighbours=n_neighbours
    )
    return {
        "alpha": alpha,
        "eta": {"dvp": dvp_eta, "pvp": pvp_eta},
        "B_p": B,
        "n_neighbours": n_neighbours,
        "d": d,
        "dvp": {
            "zeta": dvp.zeta,
            "phi": dvp.phi,
            "a": dvp.a,
            "mean_noise_norm": d / dvp.zeta,
            "mean_dual_perturbation_norm": dvp.dual_scale * d / dvp.zeta,
        },
        "pvp": {"zeta": pz, "mean_noise_norm": d / pz},
        "pvp_stop_step": {
            "zeta": stop.zeta,
            "phi": stop.phi,
            "a": stop.a,
            "mean_noise_norm": d / stop.zeta,
            "mean_dual_perturbation_norm": stop.dual_scale * d / stop.zeta,
        },
    }


def nonprivate_experiment(ctx: _Context) -> dict:
    """Non-private runs on each graph: relative gap to the centralised optimum, test MER."""
    elapsed = stopwatch()
    plan = ctx.plan
    rho, scale = PAPER_SETTINGS["none"]
    optimum = ctx.optimum(rho, scale)
    specs = [paper_spec("none", plan, graph=g) for g in plan.graphs]
    runs = ctx.runs.many(specs)
    curves, table = {}, {}
    for graph, run in zip(plan.graphs, runs, strict=True):
        if run.get("failed"):
            table[graph] = {"failed": run["failed"]}
            continue
        gaps = [
            None if v is None else (float(v) - optimum["objective"]) / abs(optimum["objective"])
            for v in run["train_objective"]
        ]
        run["relative_gap"] = gaps
        at = {str(t): gaps[t - 1] for t in (1, 10, 25, 50, 100) if t <= len(gaps)}
        table[graph] = {
            "edges": run["graph"].get("edges"),
            "final_relative_gap": gaps[-1],
            "relative_gap_at": at,
            "final_misclassification_rate": _final(run, "misclassification_rate"),
            "final_node_misclassification_rate": _final(run, "node_misclassification_rate"),
            "final_disagreement": _final(run, "disagreement"),
            "target_met": gaps[-1] is not None and gaps[-1] <= TARGET_RELATIVE_GAP,
        }
        curves[graph] = {
            "label": f"{graph} ({run['graph'].get('edges')} edges)",
            "iterations": run["iterations"],
            "relative_gap": gaps,
            "misclassification_rate": run["misclassification_rate"],
        }
    payload = {
        "experiment": "nonprivate",
        "dataset": ctx.data.describe(),
        "setting": {
            "rho": rho,
            "loss_scale": scale,
            "eta": plan.eta,
            "iterations": plan.iterations,
            "nodes": plan.nodes,
        },
        "optimum": optimum,
        "graphs": table,
        "final_relative_gap": {g: t.get("final_relative_gap") for g, t in table.items()},
        "target_relative_gap": TARGET_RELATIVE_GAP,
        "target_met": all(t.get("target_met", False) for t in table.values()),
        "runs": {g: r for g, r in zip(plan.graphs, runs, strict=True)},
        "seconds": elapsed(),
    }
    title = (
        f"Non-private decentralized ADMM (Algorithm 1) on Adult: {plan.nodes} nodes, "
        f"ρ={rho:g}, C^R={scale:g}, η={plan.eta:g}"
    )
    return ctx.run.emit(
        "nonprivate",
        payload,
        lambda: plot_nonprivate(
            curves, title=title, centralized_mer=optimum["test_mer"], target_gap=TARGET_RELATIVE_GAP
        ),
    )


def _references(ctx: _Context) -> dict[str, dict]:
    plan = ctx.plan
    specs = {
        "none_dvp": paper_spec("none", plan, setting="dvp"),
        "none_pvp": paper_spec("none", plan, setting="pvp"),
        "none_paper": paper_spec("none", plan),
    }
    runs = dict(zip(specs, ctx.runs.many(list(specs.values())), strict=True))
    labels = {
        "none_dvp": "non-private, DVP's ρ and C^R",
        "none_pvp": "non-private, PVP's ρ and C^R",
        "none_paper": "non-private, Algorithm 1 (ρ=1e-10, C^R=1750)",
    }
    return {k: {"run": r, "label": labels[k]} for k, r in runs.items()}


def convergence_experiment(ctx: _Context) -> dict:
    """Figure 3: DVP and PVP at each alpha, empirical loss and MER per iteration."""
    elapsed = stopwatch()
    plan = ctx.plan
    refs = _references(ctx)
    panels, table, runs_out = [], [], {}
    for alpha in plan.convergence_alphas:
        pair = {m: ctx.runs.get(paper_spec(m, plan, alpha=alpha)) for m in ("dvp", "pvp")}
        panels.append({"alpha": alpha, "runs": {m: _curve(r, m.upper()) for m, r in pair.items()}})
        for m, r in pair.items():
            runs_out[r["key"]] = r
            table.append({"alpha": alpha, "method": m, **_brief(r)})
    references = {k: _curve(v["run"], v["label"]) for k, v in refs.items()}
    references = {k: v for k, v in references.items() if v is not None}
    payload = {
        "figure": "3",
        "dataset": ctx.data.describe(),
        "settings": {
            m: {"rho": PAPER_SETTINGS[m][0], "loss_scale": PAPER_SETTINGS[m][1]}
            for m in ("none", "dvp", "pvp")
        },
        "eta": {m: plan.eta_for(m) for m in ("none", "dvp", "pvp")},
        "iterations": plan.iterations,
        "nodes": plan.nodes,
        "graph": "ring",
        "schedule": "constant",
        "alphas": list(plan.convergence_alphas),
        "final": table,
        "references": {k: {"label": v["label"], **_brief(v["run"])} for k, v in refs.items()},
        "noise_calibration": [
            noise_calibration(plan, ctx.data, a) for a in plan.convergence_alphas
        ],
        "runs": runs_out | {v["run"]["key"]: v["run"] for v in refs.values()},
        "seconds": elapsed(),
    }
    title = (
        f"Figure 3: convergence of DVP (ρ=10^-2.5, C^R=1750) and PVP (ρ=0.1, C^R=146)\n"
        f"on Adult, {plan.nodes} nodes on a ring, {plan.eta_text()}, constant α"
    )
    return ctx.run.emit(
        "fig3_convergence",
        payload,
        lambda: plot_convergence(panels, references=references, title=title),
    )


def _fit(
    alphas: Sequence[float], losses: Sequence[float]
) -> tuple[dict | None, dict | None, dict | None]:
    """Fitted curve, chosen alpha and the net-utility curve (``None`` with < 3 points)."""
    if len(set(alphas)) < 3:
        return None, None, None
    curve = fit_accuracy_loss(alphas, losses)
    choice = choose_alpha(curve, w=PAPER_WEIGHTS)
    grid = np.geomspace(0.01, 1.0, 200)
    net = {
        "alpha": grid.tolist(),
        "value": (privacy_utility(grid, PAPER_WEIGHTS) - curve(grid)).tolist(),
    }
    order = np.argsort(alphas)
    ordered = np.asarray(losses, dtype=float)[order]
    spread = float(ordered.max() - ordered.min())
    fit = {
        "c4": curve.c4,
        "c5": curve.c5,
        "c6": curve.c6,
        "rms": curve.rms,
        "losses_decrease_with_alpha": bool(np.all(np.diff(ordered) <= 0)),
        # the model describes the data if its residual is small against the data's range and
        # it stays positive (a loss) where it is used
        "describes_data": bool(curve.rms <= 0.1 * spread and curve.c6 > 0 and choice.loss > 0),
    }
    return fit, asdict(choice), net


def _paper_curve_choice(method: str) -> dict:
    c4, c5 = PAPER_CURVES[method]
    choice = choose_alpha(LossCurve(c4=c4, c5=c5, c6=0.0))
    return {"c4": c4, "c5": c5, "alpha": choice.alpha, "at_boundary": choice.at_boundary}


def tradeoff_experiment(ctx: _Context) -> dict:
    """Figures 4-5: final loss and MER against alpha, fitted L_acc, chosen alpha."""
    elapsed = stopwatch()
    plan = ctx.plan
    methods, runs_out, fig_methods = {}, {}, {}
    for m in ("dvp", "pvp"):
        runs = ctx.runs.many([paper_spec(m, plan, alpha=a) for a in plan.tradeoff_alphas])
        ok = [
            (a, r) for a, r in zip(plan.tradeoff_alphas, runs, strict=True) if not r.get("failed")
        ]
        alphas = [a for a, _ in ok]
        losses = [_final(r, "mean_log_loss") for _, r in ok]
        fit, choice, net = _fit(alphas, losses)
        methods[m] = {
            "rho": PAPER_SETTINGS[m][0],
            "loss_scale": PAPER_SETTINGS[m][1],
            "alphas": list(plan.tradeoff_alphas),
            "mean_log_loss": [_final(r, "mean_log_loss") for r in runs],
            "empirical_loss": [_final(r, "empirical_loss") for r in runs],
            "train_objective": [_final(r, "train_objective") for r in runs],
            "misclassification_rate": [_final(r, "misclassification_rate") for r in runs],
            "misclassification_rate_before_stop": [
                (r.get("before_stop") or {}).get("misclassification_rate") for r in runs
            ],
            "node_misclassification_rate": [_final(r, "node_misclassification_rate") for r in runs],
            "epsilon_total": [r["privacy"]["epsilon"] if r.get("privacy") else None for r in runs],
            "basic_epsilon": [
                r["privacy"]["basic_epsilon"] if r.get("privacy") else None for r in runs
            ],
            "advanced_epsilon": [
                r["privacy"]["advanced_epsilon"] if r.get("privacy") else None for r in runs
            ],
            "failed": [r["key"] for r in runs if r.get("failed")],
            "fit": fit,
            "choice": choice,
            "paper_curve_choice": _paper_curve_choice(m),
        }
        fig_methods[m] = {
            "alphas": list(plan.tradeoff_alphas),
            "loss": methods[m]["mean_log_loss"],
            "misclassification_rate": methods[m]["misclassification_rate"],
            "misclassification_rate_before_stop": methods[m]["misclassification_rate_before_stop"],
            "fit": fit,
            "choice": choice,
            "net_utility": net,
        }
        runs_out |= {r["key"]: r for r in runs}
    ref = ctx.runs.get(paper_spec("none", plan))
    reference = {
        "label": "non-private (Algorithm 1)",
        "loss": _final(ref, "mean_log_loss"),
        "misclassification_rate": _final(ref, "misclassification_rate"),
    }
    payload = {
        "figure": "4-5",
        "dataset": ctx.data.describe(),
        "iterations": plan.iterations,
        "nodes": plan.nodes,
        "graph": "ring",
        "eta": {m: plan.eta_for(m) for m in ("none", "dvp", "pvp")},
        "fitted_quantity": "mean training log loss of the final average model, "
        "(J - rho ||f||^2 / 2) / C^R",
        "weights": [0.02, 6.0, 9.0, 1.0],
        "search_range": [0.01, 1.0],
        "methods": methods,
        "nonprivate": reference,
        "runs": runs_out,
        "seconds": elapsed(),
    }
    title = (
        f"Privacy-accuracy trade-off at iteration {plan.iterations}: DVP vs PVP on Adult "
        f"({plan.nodes} nodes, ring)\n{plan.eta_text()}"
    )
    return ctx.run.emit(
        "fig4_tradeoff",
        payload,
        lambda: plot_tradeoff(fig_methods, title=title, reference=reference),
    )


def _spread(values: Sequence[float | None]) -> dict:
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return {"n": 0, "mean": None, "std": None, "min": None, "max": None}
    return {
        "n": int(v.size),
        "mean": float(v.mean()),
        "std": float(v.std(ddof=1)) if v.size > 1 else 0.0,
        "min": float(v.min()),
        "max": float(v.max()),
    }


def _less(a: float | None, b: float | None) -> bool | None:
    return None if a is None or b is None else bool(a < b)


def seeds_experiment(ctx: _Context) -> dict:
    """Spread of the final loss and MER of DVP and PVP over seeds."""
    elapsed = stopwatch()
    plan = ctx.plan
    rows, groups, runs_out = [], [], {}
    for alpha in plan.seed_alphas:
        row: dict[str, Any] = {"alpha": alpha}
        for m in ("dvp", "pvp"):
            runs = ctx.runs.many([paper_spec(m, plan, alpha=alpha, seed=s) for s in plan.seeds])
            loss = [_final(r, "mean_log_loss") for r in runs]
            mer = [_final(r, "misclassification_rate") for r in runs]
            row[m] = {
                "seeds": list(plan.seeds),
                "seeds_used": [r.get("seed_used") for r in runs],
                "mean_log_loss": loss,
                "misclassification_rate": mer,
                "loss": _spread(loss),
                "mer": _spread(mer),
                "failed": [r["key"] for r in runs if r.get("failed")],
            }
            groups.append(
                {
                    "alpha": alpha,
                    "method": m,
                    "loss": [x for x in loss if x is not None],
                    "misclassification_rate": [x for x in mer if x is not None],
                }
            )
            runs_out |= {r["key"]: r for r in runs}
        row["dvp_loss_std"] = row["dvp"]["loss"]["std"]
        row["pvp_loss_std"] = row["pvp"]["loss"]["std"]
        row["dvp_mer_std"] = row["dvp"]["mer"]["std"]
        row["pvp_mer_std"] = row["pvp"]["mer"]["std"]
        row["dvp_varies_less"] = _less(row["dvp_loss_std"], row["pvp_loss_std"])
        row["dvp_mer_varies_less"] = _less(row["dvp_mer_std"], row["pvp_mer_std"])
        rows.append(row)
    payload = {
        "figure": "5 (seeds)",
        "dataset": ctx.data.describe(),
        "iterations": plan.iterations,
        "nodes": plan.nodes,
        "graph": "ring",
        "eta": {m: plan.eta_for(m) for m in ("none", "dvp", "pvp")},
        "claim": "the paper: the DVP has a smaller variance of empirical loss than the PVP",
        "loss_quantity": "mean training log loss of the final average model",
        "std": "sample standard deviation (ddof=1) over the seeds",
        "rows": rows,
        "dvp_varies_less": {f"{r['alpha']:g}": r["dvp_varies_less"] for r in rows},
        "runs": runs_out,
        "seconds": elapsed(),
    }
    title = (
        f"Spread over {len(plan.seeds)} seeds at iteration {plan.iterations}: DVP vs PVP "
        f"on Adult ({plan.nodes} nodes, ring)\n{plan.eta_text()}"
    )
    return ctx.run.emit("fig5_seeds", payload, lambda: plot_seeds(groups, title=title))


def eta_experiment(ctx: _Context) -> dict:
    """DVP and PVP at one alpha over the ADMM penalty eta (the paper does not give eta)."""
    elapsed = stopwatch()
    plan = ctx.plan
    alpha = plan.eta_alpha
    methods, fig_methods, runs_out = {}, {}, {}
    ref = ctx.runs.get(paper_spec("none", plan))
    ref_mer = _final(ref, "misclassification_rate")
    for m in ("dvp", "pvp"):
        runs = ctx.runs.many([paper_spec(m, plan, alpha=alpha, eta=e) for e in plan.eta_grid])
        objective = [_final(r, "train_objective") for r in runs]
        candidates = [
            (o, e) for o, e in zip(objective, plan.eta_grid, strict=True) if o is not None
        ]
        chosen = min(candidates)[1] if candidates else None
        mer = [_final(r, "misclassification_rate") for r in runs]
        chosen_mer = mer[plan.eta_grid.index(chosen)] if chosen is not None else None
        methods[m] = {
            "eta": list(plan.eta_grid),
            "train_objective": objective,
            "mean_log_loss": [_final(r, "mean_log_loss") for r in runs],
            "misclassification_rate": mer,
            "node_misclassification_rate": [_final(r, "node_misclassification_rate") for r in runs],
            "disagreement": [_final(r, "disagreement") for r in runs],
            "retries": [len(r.get("attempts", [])) for r in runs],
            "failed": [r["key"] for r in runs if r.get("failed")],
            "chosen_eta": chosen,
            "chosen_by": "lowest final training objective J (training data only)",
            "misclassification_rate_at_chosen_eta": chosen_mer,
            "points_above_nonprivate_at_chosen_eta": None
            if chosen_mer is None or ref_mer is None
            else 100.0 * (chosen_mer - ref_mer),
            "noise_calibration": [
                noise_calibration(plan, ctx.data, alpha, eta=e) for e in plan.eta_grid
            ],
        }
        fig_methods[m] = {
            "eta": list(plan.eta_grid),
            "loss": methods[m]["mean_log_loss"],
            "misclassification_rate": mer,
            "chosen_eta": chosen,
        }
        runs_out |= {r["key"]: r for r in runs}
    reference = {
        "label": f"non-private (Algorithm 1, η={plan.eta:g})",
        "loss": _final(ref, "mean_log_loss"),
        "misclassification_rate": ref_mer,
    }
    payload = {
        "experiment": "eta_sensitivity",
        "dataset": ctx.data.describe(),
        "alpha": alpha,
        "iterations": plan.iterations,
        "nodes": plan.nodes,
        "graph": "ring",
        "methods": methods,
        "nonprivate": reference,
        "runs": runs_out,
        "seconds": elapsed(),
    }
    title = (
        f"Beyond the paper: DVP and PVP at α={alpha:g} against the ADMM penalty η "
        f"(Adult, {plan.nodes} nodes, ring, {plan.iterations} iterations)"
    )
    return ctx.run.emit(
        "eta_sensitivity", payload, lambda: plot_eta(fig_methods, title=title, reference=reference)
    )


# ---------------------------------------------------------------------------------------------
# Summary


def _met(flag: bool | None) -> str:
    return "n/a" if flag is None else ("**met**" if flag else "**not met**")


def _headlines(figs: Mapping[str, dict], plan: DecentralizedPlan) -> dict:
    nonpriv = figs["nonprivate"]
    conv = figs["convergence"]
    trade = figs["tradeoff"]
    seeds = figs["seeds"]
    eta = figs["eta"]
    ref = conv["references"]["none_paper"]
    ref_mer = ref.get("misclassification_rate")
    dvp1 = next((r for r in conv["final"] if r["method"] == "dvp" and r["alpha"] == 1.0), None)
    dvp1_mer = dvp1.get("misclassification_rate") if dvp1 else None
    diff = None if dvp1_mer is None or ref_mer is None else 100.0 * (dvp1_mer - ref_mer)
    dvp_eta = eta["methods"]["dvp"]
    tuned_diff = dvp_eta["points_above_nonprivate_at_chosen_eta"]
    epsilons = []
    d = trade["methods"]["dvp"]
    for k, a in enumerate(d["alphas"]):
        epsilons.append(
            {
                "alpha": a,
                "rounds": plan.iterations,
                "basic_epsilon": d["basic_epsilon"][k],
                "advanced_epsilon": d["advanced_epsilon"][k],
                "delta": plan.delta,
                "reported_epsilon": d["epsilon_total"][k],
            }
        )
    return {
        "nonprivate_relative_gap": nonpriv["final_relative_gap"],
        "nonprivate_gap_target": TARGET_RELATIVE_GAP,
        "nonprivate_gap_target_met": nonpriv["target_met"],
        "dvp_alpha1_mer": dvp1_mer,
        "nonprivate_mer": ref_mer,
        "dvp_alpha1_mer_points_above_nonprivate": diff,
        "dvp_mer_target_points": TARGET_MER_POINTS,
        "dvp_mer_target_met": None if diff is None else bool(diff <= TARGET_MER_POINTS),
        "dvp_eta_sensitivity": {
            "chosen_eta": dvp_eta["chosen_eta"],
            "mer": dvp_eta["misclassification_rate_at_chosen_eta"],
            "points_above_nonprivate": tuned_diff,
            "target_met": None if tuned_diff is None else bool(tuned_diff <= TARGET_MER_POINTS),
        },
        "seed_robustness": [
            {
                k: r[k]
                for k in (
                    "alpha",
                    "dvp_loss_std",
                    "pvp_loss_std",
                    "dvp_mer_std",
                    "pvp_mer_std",
                    "dvp_varies_less",
                    "dvp_mer_varies_less",
                )
            }
            for r in seeds["rows"]
        ],
        "fits": {
            m: {
                "fit": v["fit"],
                "choice": v["choice"],
                "paper_curve_choice": v["paper_curve_choice"],
            }
            for m, v in trade["methods"].items()
        },
        "epsilon_totals": epsilons,
    }


def _retry_notes(runs: Sequence[dict]) -> list[str]:
    retried = [r for r in runs if r.get("attempts") and not r.get("failed")]
    failed = [r for r in runs if r.get("failed")]
    notes = []
    if retried:
        notes.append(
            REPORT.paragraph(
                "note-retried",
                retried=len(retried),
                runs=len(runs),
                reruns=", ".join(f"{r['key']} -> seed {r['seed_used']}" for r in retried),
            )
        )
    if failed:
        notes.append(
            REPORT.paragraph(
                "note-failed", failed=len(failed), keys=", ".join(r["key"] for r in failed)
            )
        )
    return notes


def _etas(plan: dict) -> dict[str, str]:
    """The step sizes ``eta`` and ``dvp_eta`` of the plan, formatted."""
    return {"eta": f"{plan['eta']:g}", "dvp_eta": f"{plan['dvp_eta']:g}"}


def _head_section(summary: dict) -> str:
    """The report's head: the mode, the data and the plan."""
    plan, ds = summary["plan"], summary["dataset"]
    mode = (
        "quick (subsampled, few iterations; a smoke test, not the reproduction)"
        if summary["quick"]
        else "full"
    )
    return REPORT.render(
        "head",
        mode=mode,
        seconds=f"{summary['seconds']:.1f}",
        workers=summary["workers"],
        processes="processes" if summary["workers"] > 1 else "process",
        n_train=ds["n_train"],
        n_features=ds["n_features"],
        nodes=plan["nodes"],
        n_test=ds["n_test"],
        iterations=plan["iterations"],
        pvp_eta=f"{plan['pvp_eta']:g}",
        **_etas(plan),
    )


def _targets_section(h: dict, plan: dict) -> str:
    """The targets: the non-private gaps, DVP's error rate and the seeds' robustness."""
    iterations = plan["iterations"]
    gap_rows = [
        REPORT.render(
            "gap-row",
            iterations=iterations,
            graph=g,
            target=f"{TARGET_RELATIVE_GAP:g}",
            gap=fmt(v, 3),
            verdict=_met(None if v is None else v <= TARGET_RELATIVE_GAP),
        )
        for g, v in h["nonprivate_relative_gap"].items()
    ]
    seed_rows = [
        REPORT.render(
            "seed-row",
            alpha=f"{r['alpha']:g}",
            dvp_loss_std=fmt(r["dvp_loss_std"], 3),
            pvp_loss_std=fmt(r["pvp_loss_std"], 3),
            dvp_mer_std=fmt(r["dvp_mer_std"], 3),
            pvp_mer_std=fmt(r["pvp_mer_std"], 3),
            verdict="confirmed" if r["dvp_varies_less"] else "not confirmed",
            mer_verdict="DVP varies less" if r["dvp_mer_varies_less"] else "PVP varies less",
        )
        for r in h["seed_robustness"]
    ]
    tuned = h["dvp_eta_sensitivity"]
    return REPORT.render(
        "targets",
        gap_rows=gap_rows,
        iterations=iterations,
        target_points=f"{TARGET_MER_POINTS:g}",
        dvp_mer=fmt(h["dvp_alpha1_mer"]),
        nonprivate_mer=fmt(h["nonprivate_mer"]),
        points=fmt(h["dvp_alpha1_mer_points_above_nonprivate"], 3),
        verdict=_met(h["dvp_mer_target_met"]),
        chosen_eta=fmt(tuned["chosen_eta"]),
        tuned_mer=fmt(tuned["mer"]),
        tuned_points=fmt(tuned["points_above_nonprivate"], 3),
        tuned_verdict=_met(tuned["target_met"]),
        seed_rows=seed_rows,
        **_etas(plan),
    )


def _convergence_section(figs: dict, iterations: int) -> str:
    """The final figures of every convergence run and of the references."""
    rows = []
    for r in figs["convergence"]["final"]:
        if r.get("failed"):
            rows.append(
                REPORT.render(
                    "convergence-failed-row",
                    alpha=f"{r['alpha']:g}",
                    method=r["method"].upper(),
                    failed=r["failed"],
                )
            )
            continue
        rows.append(
            REPORT.render(
                "convergence-row",
                alpha=f"{r['alpha']:g}",
                method=r["method"].upper(),
                objective=fmt(r.get("train_objective")),
                log_loss=fmt(r.get("mean_log_loss")),
                mer=fmt(r.get("misclassification_rate")),
                mer_before_stop=fmt(r.get("misclassification_rate_before_stop")),
                node_mer=fmt(r.get("node_misclassification_rate")),
                disagreement=fmt(r.get("disagreement"), 3),
                epsilon=fmt(r.get("epsilon_total")),
                delta=fmt(r.get("epsilon_delta"), 2),
            )
        )
    for r in figs["convergence"]["references"].values():
        rows.append(
            REPORT.render(
                "convergence-reference-row",
                label=r["label"],
                objective=fmt(r.get("train_objective")),
                log_loss=fmt(r.get("mean_log_loss")),
                mer=fmt(r.get("misclassification_rate")),
                node_mer=fmt(r.get("node_misclassification_rate")),
                disagreement=fmt(r.get("disagreement"), 3),
            )
        )
    return REPORT.render(
        "convergence", iterations=iterations, before_stop=iterations - 1, rows=rows
    )


def _fits_section(h: dict, figs: dict, plan: dict) -> str:
    """The fitted trade-off curves and the trade-off figures per alpha."""
    fit_rows = []
    for m, v in h["fits"].items():
        fit, ch, paper = v["fit"] or {}, v["choice"] or {}, v["paper_curve_choice"]
        fit_rows.append(
            REPORT.render(
                "fit-row",
                method=m.upper(),
                c4=fmt(fit.get("c4")),
                c5=fmt(fit.get("c5")),
                c6=fmt(fit.get("c6")),
                rms=fmt(fit.get("rms"), 3),
                describes=fmt(fit.get("describes_data")),
                alpha=fmt(ch.get("alpha"), 3),
                loss=fmt(ch.get("loss")),
                utility=fmt(ch.get("utility")),
                at_boundary=fmt(ch.get("at_boundary")),
                paper_alpha=fmt(paper["alpha"], 3),
                paper_c4=f"{paper['c4']:g}",
                paper_c5=f"{paper['c5']:g}",
            )
        )
    trade = figs["tradeoff"]["methods"]
    tradeoff_rows = [
        REPORT.render(
            "tradeoff-row",
            alpha=f"{a:g}",
            dvp_loss=fmt(trade["dvp"]["mean_log_loss"][k]),
            dvp_mer=fmt(trade["dvp"]["misclassification_rate"][k]),
            pvp_loss=fmt(trade["pvp"]["mean_log_loss"][k]),
            pvp_mer=fmt(trade["pvp"]["misclassification_rate"][k]),
        )
        for k, a in enumerate(trade["dvp"]["alphas"])
    ]
    return REPORT.render(
        "fits",
        alphas=", ".join(f"{a:g}" for a in plan["tradeoff_alphas"]),
        fit_rows=fit_rows,
        tradeoff_rows=tradeoff_rows,
    )


def _totals_section(h: dict, plan: dict) -> str:
    """The total epsilon of every alpha, basic and advanced composition."""
    return REPORT.render(
        "totals",
        iterations=plan["iterations"],
        delta=f"{plan['delta']:g}",
        rows=[
            REPORT.render(
                "total-row",
                alpha=f"{e['alpha']:g}",
                basic=fmt(e["basic_epsilon"]),
                advanced=fmt(e["advanced_epsilon"]),
            )
            for e in h["epsilon_totals"]
        ],
    )


def _seed_items(figs: dict) -> list[str]:
    """The spread over the seeds of every alpha and method."""
    items = []
    for r in figs["seeds"]["rows"]:
        for m in ("dvp", "pvp"):
            s, t = r[m]["loss"], r[m]["mer"]
            items.append(
                REPORT.render(
                    "seed-item",
                    alpha=f"{r['alpha']:g}",
                    method=m.upper(),
                    n=s["n"],
                    loss_mean=fmt(s["mean"]),
                    loss_std=fmt(s["std"], 3),
                    loss_min=fmt(s["min"]),
                    loss_max=fmt(s["max"]),
                    mer_mean=fmt(t["mean"]),
                    mer_std=fmt(t["std"], 3),
                    mer_min=fmt(t["min"]),
                    mer_max=fmt(t["max"]),
                )
            )
    return items


def _eta_section(figs: dict) -> str:
    """The step-size sweep of every method."""
    eta_rows = []
    for m, v in figs["eta"]["methods"].items():
        for k, e in enumerate(v["eta"]):
            eta_rows.append(
                REPORT.render(
                    "eta-row",
                    method=m.upper(),
                    eta=f"{e:g}",
                    chosen=" (chosen)" if e == v["chosen_eta"] else "",
                    objective=fmt(v["train_objective"][k]),
                    log_loss=fmt(v["mean_log_loss"][k]),
                    mer=fmt(v["misclassification_rate"][k]),
                    retries=v["retries"][k],
                )
            )
    return REPORT.render("eta", alpha=f"{figs['eta']['alpha']:g}", rows=eta_rows)


def _summary_markdown(summary: dict) -> str:
    """The text of ``summary.md``, section by section."""
    h, plan, figs = summary["headlines"], summary["plan"], summary["figures"]
    head = _head_section(summary)
    targets = _targets_section(h, plan)
    convergence = _convergence_section(figs, plan["iterations"])
    fits = _fits_section(h, figs, plan)
    totals = _totals_section(h, plan)
    items = _seed_items(figs)
    eta = _eta_section(figs)
    return summary_markdown(
        [head, targets, convergence, fits, totals, REPORT.render("seeds", rows=items), eta], summary
    )


def _notes(headlines: dict, runs: Sequence[dict], plan: DecentralizedPlan) -> list[str]:
    notes = [
        REPORT.paragraph(
            "note-eta",
            eta=f"{plan.eta:g}",
            dvp_eta=f"{plan.dvp_eta:g}",
            pvp_eta=f"{plan.pvp_eta:g}",
        ),
        REPORT.paragraph("note-empirical-loss"),
        REPORT.paragraph("note-alpha"),
        REPORT.paragraph("note-totals"),
    ]
    if headlines["dvp_mer_target_met"] is False:
        notes.append(REPORT.paragraph("note-dvp-mer-missed", dvp_eta=f"{plan.dvp_eta:g}"))
    notes += _retry_notes(runs)
    if plan.quick:
        notes.append(REPORT.paragraph("note-quick"))
    return notes


def _all_specs(plan: DecentralizedPlan) -> list[RunSpec]:
    specs = [paper_spec("none", plan, graph=g) for g in plan.graphs]
    specs += [paper_spec("none", plan, setting="dvp"), paper_spec("none", plan, setting="pvp")]
    specs += [paper_spec(m, plan, alpha=a) for a in plan.convergence_alphas for m in ("dvp", "pvp")]
    specs += [paper_spec(m, plan, alpha=a) for a in plan.tradeoff_alphas for m in ("dvp", "pvp")]
    specs += [
        paper_spec(m, plan, alpha=a, seed=s)
        for a in plan.seed_alphas
        for m in ("dvp", "pvp")
        for s in plan.seeds
    ]
    specs += [
        paper_spec(m, plan, alpha=plan.eta_alpha, eta=e)
        for m in ("dvp", "pvp")
        for e in plan.eta_grid
    ]
    return list(dict.fromkeys(specs))


def run_decentralized_reproduction(
    out_dir: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    quick: bool = False,
    progress: bool = False,
    workers: int | None = None,
    executor: Executor | None = None,
) -> dict:
    """Rerun the experiments of Zhang & Zhu (paper 001) and write figures, JSON and a summary.

    Parameters
    ----------
    out_dir : str or os.PathLike
        Output folder, created if missing. Receives ``nonprivate``, ``fig3_convergence``,
        ``fig4_tradeoff``, ``fig5_seeds`` and ``eta_sensitivity`` (each a ``.png`` and the
        ``.json`` behind it), then ``summary.md`` and ``summary.json``.
    data_dir : str or os.PathLike or None, default None
        Folder holding ``adult/adult.data`` and ``adult/adult.test`` (``None``: the
        ``DPFED_DATA`` environment variable).
    quick : bool, default False
        Small configuration (:func:`quick_plan`), well under a minute. The full run
        (:func:`full_plan`, 60 runs of 100 iterations on 10 nodes) takes about 10-15 minutes
        on two cores.
    progress : bool, default False
        Show a progress bar over the runs when standard error is a terminal.
    workers : int or None, default None
        Worker processes for the runs (``None``: the plan's, 2 for the full run, 1 for quick).
    executor : concurrent.futures.Executor, optional
        Runs the runs instead (e.g. a :class:`dpfed.engines.tasks.RayExecutor`); ``workers``
        is then unused. Every run has its own seed: the results are the same.

    Returns
    -------
    dict
        The content of ``summary.json``: ``out_dir``, ``quick``, ``plan``, ``dataset``,
        ``headlines`` (the numbers the targets are about), ``figures`` (the JSON payloads
        without their runs), ``notes``, ``files`` and ``seconds``.

    Raises
    ------
    DpfedInputError
        If matplotlib is missing, or the data folder or the Adult files are missing.
    """
    plan = quick_plan() if quick else full_plan()
    if workers is not None:
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise DpfedInputError(f"workers must be an integer >= 1. Found {workers!r}.")
        plan = DecentralizedPlan(**{**asdict(plan), "workers": workers})
    run = Reproduction("decentralized", out_dir, progress=progress, executor=executor)
    base = adult_folder(data_dir, "decentralized")
    with limit_blas_threads():
        data = load_adult_parts(
            base,
            parties=plan.nodes,
            max_train_rows=plan.max_train_rows,
            max_test_rows=plan.max_test_rows,
            seed=plan.split_seed,
        )
        specs = _all_specs(plan)
        with run.running(len(specs)):
            cache = RunCache(data, plan.workers, run.step, executor)
            ctx = _Context(plan=plan, data=data, run=run, runs=cache)
            try:
                cache.submit(specs)
                figs = {
                    "nonprivate": nonprivate_experiment(ctx),
                    "convergence": convergence_experiment(ctx),
                    "tradeoff": tradeoff_experiment(ctx),
                    "seeds": seeds_experiment(ctx),
                    "eta": eta_experiment(ctx),
                }
            finally:
                cache.close()
    headlines = _headlines(figs, plan)
    runs = cache.all_runs()
    summary: dict[str, Any] = {
        "quick": plan.quick,
        "workers": plan.workers,
        "plan": asdict(plan),
        "dataset": data.describe(),
        "headlines": headlines,
        "figures": {k: without_runs(v) for k, v in figs.items()},
        "runs": {
            "total": len(runs),
            "retried": sum(1 for r in runs if r.get("attempts")),
            "failed": [r["key"] for r in runs if r.get("failed")],
        },
        "notes": _notes(headlines, runs, plan),
    }
    return run.finish(summary, _summary_markdown)
