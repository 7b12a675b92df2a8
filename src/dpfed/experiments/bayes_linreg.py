r"""DP Bayesian linear regression on UCI data (Heikkilä et al., NeurIPS 2017, figure 2).

:func:`run_bayes_linreg_reproduction` (``dpfed reproduce bayes-linreg``) reruns the paper's
utility experiment and writes, into one folder:

``bayes_linreg.png``, ``bayes_linreg.json``
    Median test mean absolute error (MAE) with interquartile range against
    :math:`\varepsilon \in \{1, 1.78, 3.16, 5.62, 10, 31.6\}` at :math:`\delta = 10^{-4}`,
    one panel per data set (red wine, abalone, white wine), for the methods of
    :data:`METHODS`; the JSON holds every run's MAE.
``summary.md``, ``summary.json``
    The medians, the test of "distributed and trusted aggregation are indistinguishable",
    whether projection beats no projection at :math:`\varepsilon = 1`, and the notes
    (written last).

:func:`cross_validate` is the same loop for one method and one budget
(``dpfed train bayes-linreg``).

Decisions:

* **Data.** Each data set is scaled column by column to a range of length 10, as the paper
  does, but by declared public bounds (:data:`dpfed.data.specs.DATASET_SPECS`) instead of the
  whole data's mean, min and max (the paper's code): values are clipped to each column's
  declared range, centred at its midpoint and scaled to length 10, so every row is scaled on
  its own and lies in :math:`[-5, 5]` (:func:`dpfed.data.regression.scale_to_range`). Per run
  :math:`r` a random
  split (``numpy.random.default_rng([seed, 0, r])``) holds out 500 (red wine) or 1,000
  (white wine, abalone) test rows; every other row is a training client. The same split
  serves every method and budget of run :math:`r`, so method comparisons are paired.
* **Centring** (default, ``BayesLinregPlan.centre``). The declared ranges are wider than the
  data, so the scaled columns are far from zero-centred, which the model (no intercept) and
  the projection assume. Every private method centres the rows by DP column means
  (:mod:`dpfed.protocols.bayes_linreg.centring`): with projection the column sums ride in the
  standard-deviation release, without projection they are a release of their own with 30 %
  of the budget; prediction adds back the DP target mean. The non-private baseline centres by
  the exact means. ``centre=False`` (``--no-centre``) runs the paper's algorithm exactly.
* **Methods.** Non-private; trusted aggregator (TA) and distributed (DDP, the secure sum
  :func:`dpfed.dca.secure_sum` with :math:`M = 10` compute nodes and :math:`T = 0`), each
  without and with projection (Algorithm 2, 30 % of the budget for the standard deviations,
  thresholds from 10 repetitions on auxiliary data); input perturbation (every client adds
  the full Gaussian-mechanism noise to its own statistics). Assumed bounds
  :math:`[-7.5, 7.5]` for every feature and the target.
* **Privacy.** ``"tight"`` calibration by default (the exact Gaussian mechanism, both releases
  of the projection calibrated jointly, :mod:`dpfed.protocols.bayes_linreg.calibration`); the paper
  used the
  classical formula, which is not a proven guarantee for :math:`\varepsilon \ge 1`.
* **Noise.** Run :math:`r`, method :math:`m` and budget :math:`k` draw their noise from
  ``numpy.random.default_rng([seed, 1, r, m, k])``: independent across methods.
* **Indistinguishability test.** For each (data set, :math:`\varepsilon`, with or without
  projection) a two-sided Wilcoxon signed-rank test on the 25 paired MAE differences DDP - TA
  (pairs share the split); the family of all these tests is corrected with Holm's method at
  :math:`\alpha = 0.05`. "Indistinguishable" means no test rejects after the correction (not
  rejecting is not a proof of equality; the median relative difference is reported too).
* **Projection at** :math:`\varepsilon = 1`: the medians over the 25 runs, with and without
  projection, for TA and for DDP on each data set; "beats" means a lower median MAE (a paired
  Wilcoxon p-value is reported alongside).

Failure semantics: files are written atomically; ``summary.md`` / ``summary.json`` are
written last and are absent if anything fails.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import wilcoxon

from dpfed._validation import DpfedInputError, check_int
from dpfed.data.regression import (
    REGRESSION_DATASETS,
    load_regression_dataset,
    random_split,
    scale_to_range,
)
from dpfed.experiments.plotting_bayes import plot_bayes_linreg
from dpfed.experiments.report import ReportTemplate, fmt, summary_markdown
from dpfed.experiments.runner import Reproduction
from dpfed.protocols.bayes_linreg import ThresholdCache, fit_dp_linreg, mean_absolute_error
from dpfed.protocols.bayes_linreg.projection import cache_multiplier

__all__ = [
    "METHODS",
    "BayesLinregPlan",
    "MethodSpec",
    "cross_validate",
    "full_plan",
    "holm_adjust",
    "load_scaled",
    "quick_plan",
    "run_bayes_linreg_reproduction",
    "split_rng",
]

_SPLIT_STREAM = 0
_NOISE_STREAM = 1
TARGET_EPSILON = 1.0
#: The prose of the report (summary.md and the notes).
REPORT = ReportTemplate("bayes_linreg.md")


@dataclass(frozen=True)
class MethodSpec:
    """One method of the comparison."""

    label: str
    mode: str
    projection: bool


#: The methods of the paper's figure 2 (key -> label, aggregation mode, projection).
METHODS: dict[str, MethodSpec] = {
    "nonprivate": MethodSpec("non-private (NP)", "nonprivate", False),
    "trusted": MethodSpec("trusted aggregator (TA)", "trusted", False),
    "distributed": MethodSpec("distributed (DDP)", "distributed", False),
    "trusted_proj": MethodSpec("TA with projection", "trusted", True),
    "distributed_proj": MethodSpec("DDP with projection", "distributed", True),
    "input": MethodSpec("input perturbation", "input", False),
}

_PANEL_TITLES = {
    "wine-red": "(a) red wine",
    "abalone": "(b) abalone",
    "wine-white": "(c) white wine",
}


@dataclass(frozen=True)
class BayesLinregPlan:
    """Sizes and settings of one reproduction (:func:`full_plan` or :func:`quick_plan`)."""

    quick: bool
    datasets: tuple[str, ...]
    epsilons: tuple[float, ...]
    runs: int
    delta: float = 1e-4
    methods: tuple[str, ...] = tuple(METHODS)
    calibration: str = "tight"
    bound: float = 7.5
    std_share: float = 0.3
    centre: bool = True
    centre_share: float = 0.3
    threshold_repeats: int = 10
    compute_nodes: int = 10
    tolerated: int = 0
    repair: str = "abs"
    seed: int = 0
    alpha: float = 0.05
    replication_runs: int = 100


def full_plan() -> BayesLinregPlan:
    """The paper's experiment: 3 data sets, 6 budgets, 25 runs (a few minutes)."""
    return BayesLinregPlan(
        quick=False,
        datasets=("wine-red", "abalone", "wine-white"),
        epsilons=(1.0, 1.78, 3.16, 5.62, 10.0, 31.6),
        runs=25,
    )


def quick_plan() -> BayesLinregPlan:
    """A small configuration for tests: budgets 1 and 3.16, 4 runs, 2 threshold repetitions."""
    return BayesLinregPlan(
        quick=True,
        datasets=("wine-red", "abalone", "wine-white"),
        epsilons=(1.0, 3.16),
        runs=4,
        threshold_repeats=2,
        replication_runs=8,
    )


# ---------------------------------------------------------------------------------------------
# shared by ``dpfed train bayes-linreg``


def load_scaled(name: str, data_dir: str | os.PathLike[str] | None):
    """The named regression set scaled to the paper's range of length 10 by its declared
    public bounds: ``(scaled RegressionData, Scaling)``."""
    return scale_to_range(load_regression_dataset(name, data_dir))


def split_rng(seed: int, run: int) -> np.random.Generator:
    """Generator of run ``run``'s train/test split: ``default_rng([seed, 0, run])``."""
    return np.random.default_rng([int(seed), _SPLIT_STREAM, int(run)])


def _noise_rng(seed: int, run: int, method: int, level: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), _NOISE_STREAM, int(run), int(method), int(level)])


def _quartiles(values: Sequence[float]) -> dict:
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {"median": None, "q25": None, "q75": None, "n": 0}
    q25, med, q75 = np.percentile(v, [25, 50, 75])
    return {"median": float(med), "q25": float(q25), "q75": float(q75), "n": int(v.size)}


def cross_validate(
    data,
    scaling,
    *,
    runs: int,
    seed: int = 0,
    n_test: int,
    mode: str,
    projection: bool = False,
    epsilon: float | None = None,
    delta: float | None = None,
    calibration: str = "tight",
    bound: float = 7.5,
    std_share: float = 0.3,
    centre: bool = True,
    centre_share: float = 0.3,
    compute_nodes: int = 10,
    tolerated: int = 0,
    repair: str = "abs",
    threshold_repeats: int = 10,
    method_index: int = 0,
    level_index: int = 0,
    threshold_cache=None,
    aggregate: Callable[..., Any] | None = None,
    on_run: Callable[[int], None] | None = None,
    executor: Executor | None = None,
) -> dict:
    """Fit one method on ``runs`` random splits and report the test MAE of each.

    Parameters
    ----------
    data : RegressionData
        Scaled rows (:func:`load_scaled`).
    scaling : Scaling
        The scaling used (for the MAE in the target's own units).
    runs : int
    seed : int, default 0
        Seeds the splits (:func:`split_rng`) and the noise.
    n_test : int
        Test rows per split.
    centre, centre_share : bool, float
        As :func:`dpfed.protocols.bayes_linreg.fit_dp_linreg` (centring by DP means, on by default).
    mode, projection, epsilon, delta, calibration, std_share, compute_nodes, tolerated, repair
        As :func:`dpfed.protocols.bayes_linreg.fit_dp_linreg`; ``bound`` is both ``bound_x`` and
        ``bound_y``.
    threshold_repeats : int, default 10
    method_index, level_index : int, default 0
        Select the noise stream (``default_rng([seed, 1, run, method_index, level_index])``).
    threshold_cache : ThresholdCache or None
        Shared across calls (default: one for this call).
    aggregate : callable or None
        Secure sum for ``distributed`` (default :func:`dpfed.dca.secure_sum`).
    on_run : callable or None
        Called with the run index after each run (as runs finish, with an executor).
    executor : concurrent.futures.Executor, optional
        Fits the runs as tasks (e.g. a :class:`dpfed.engines.tasks.RayExecutor`); each run
        has its own seeds, so the results are the same. The threshold searches are then not
        shared between runs (the counts of ``threshold_cache`` cover this process only).

    Returns
    -------
    dict
        ``mae`` (list, scaled target), ``median``, ``iqr`` ([q25, q75]),
        ``mae_target_units`` and ``median_target_units`` (divided by the target's scale
        factor), ``privacy`` (the first run's report, notes merged over runs), ``runs``
        (per-run details), ``n_train``, ``n_test``.
    """
    runs = check_int("runs", runs, minimum=1)
    cache = threshold_cache if threshold_cache is not None else ThresholdCache()
    fit = functools.partial(
        _fit_run,
        data,
        seed=seed,
        n_test=n_test,
        method_index=method_index,
        level_index=level_index,
        epsilon=epsilon,
        delta=delta,
        mode=mode,
        projection=projection,
        bound_x=bound,
        bound_y=bound,
        calibration=calibration,
        std_share=std_share,
        centre=centre,
        centre_share=centre_share,
        repair=repair,
        compute_nodes=compute_nodes,
        tolerated=tolerated,
        threshold_repeats=threshold_repeats,
        aggregate=aggregate,
    )
    fits: list[dict] = []
    if executor is None:
        for r in range(runs):
            fits.append(fit(r, threshold_cache=cache))
            if on_run is not None:
                on_run(r)
    else:
        futures = {executor.submit(fit, r): r for r in range(runs)}
        done: dict[int, dict] = {}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            if on_run is not None:
                on_run(futures[future])
        fits = [done[r] for r in range(runs)]
    return _summarise(fits, scaling, mode=mode, repair=repair, n_test=n_test)


def _fit_run(
    data, run: int, *, seed: int, n_test: int, method_index: int, level_index: int, **fit: Any
) -> dict:
    """Run ``run`` of :func:`cross_validate`: fit on its split, score on its test rows.

    ``fit`` holds the keywords of :func:`dpfed.protocols.bayes_linreg.fit_dp_linreg` but ``rng`` and
    ``threshold_seed`` (``seed``). Returns ``mae``, ``detail`` (the entry of ``runs``),
    ``privacy`` (the fit's report) and ``n_train``.
    """
    train, test = random_split(data.n_samples, n_test, split_rng(seed, run))
    model = fit_dp_linreg(
        data.X[train],
        data.y[train],
        threshold_seed=seed,
        rng=_noise_rng(seed, run, method_index, level_index),
        **fit,
    )
    mae = float(mean_absolute_error(data.y[test], model.predict(data.X[test])))
    info = model.to_json()
    detail = {
        "run": run,
        "mae": mae,
        "posterior_repaired": info["posterior_repaired"],
        "thresholds": info.get("thresholds"),
        "bounds": info["bounds"],
        "marginal_stds": info.get("marginal_stds"),
        "marginal_std_fallback": info.get("marginal_std_fallback"),
        "centring": info["centring"],
        "intercept": info["intercept"],
    }
    return {"mae": mae, "detail": detail, "privacy": model.privacy(), "n_train": int(train.size)}


def _summarise(fits: Sequence[dict], scaling, *, mode: str, repair: str, n_test: int) -> dict:
    """The result of :func:`cross_validate` from its runs (:func:`_fit_run`, in run order)."""
    runs = len(fits)
    maes = [f["mae"] for f in fits]
    details = [f["detail"] for f in fits]
    reports = [f["privacy"] for f in fits]
    n_train = fits[-1]["n_train"]
    repaired = sum(1 for d in details if d["posterior_repaired"])
    fallback = sum(1 for d in details if any(d["marginal_std_fallback"] or []))
    calibration_notes = list(reports[0]["notes"]) if mode != "nonprivate" else []
    calibration_notes = [
        n
        for n in calibration_notes
        if "negative eigenvalue" not in n and "variance estimate" not in n
    ]
    notes = list(calibration_notes)
    if repaired:
        notes.append(
            f"in {repaired} of {runs} runs the noisy Gram matrix had a negative "
            f"eigenvalue and was repaired ({repair}) so the posterior precision stays "
            "positive definite"
        )
    if fallback:
        notes.append(
            f"in {fallback} of {runs} runs at least one noisy variance estimate was "
            "not positive and its standard deviation was set to 0.5"
        )
    privacy = {**reports[0], "notes": notes}
    q = _quartiles(maes)
    factor = scaling.factor_y
    in_units = [m / factor for m in maes] if factor > 0 else [None] * len(maes)
    return {
        "mae": maes,
        "median": q["median"],
        "iqr": [q["q25"], q["q75"]],
        "mae_target_units": in_units,
        "median_target_units": q["median"] / factor if factor > 0 else None,
        "privacy": privacy,
        "calibration_notes": calibration_notes,
        "repaired_runs": repaired,
        "fallback_runs": fallback,
        "runs": details,
        "n_train": n_train,
        "n_test": int(n_test),
    }


# ---------------------------------------------------------------------------------------------
# statistics


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control).

    The :math:`k`-th smallest p-value :math:`p_{(k)}` of :math:`m` becomes
    :math:`\\max_{j \\le k} \\min(1, (m - j + 1) p_{(j)})`; reject where the adjusted value is
    at most :math:`\\alpha`.

    Parameters
    ----------
    pvalues : sequence of float

    Returns
    -------
    list of float
        Adjusted p-values in the input order.
    """
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        adjusted[idx] = running
    return adjusted.tolist()


def _wilcoxon(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired Wilcoxon signed-rank p-value of ``a - b`` (1.0 if all equal)."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if diff.size == 0 or np.all(diff == 0):
        return 1.0
    return float(wilcoxon(diff, alternative="two-sided").pvalue)


def _indistinguishability(results: dict, plan: BayesLinregPlan) -> dict:
    tests = []
    for ds in plan.datasets:
        for proj in (False, True):
            ta_key = "trusted_proj" if proj else "trusted"
            ddp_key = "distributed_proj" if proj else "distributed"
            if ta_key not in results[ds] or ddp_key not in results[ds]:
                continue
            for eps in plan.epsilons:
                ta = results[ds][ta_key][f"{eps:g}"]
                ddp = results[ds][ddp_key][f"{eps:g}"]
                rel = (np.asarray(ddp) - np.asarray(ta)) / np.asarray(ta)
                tests.append(
                    {
                        "dataset": ds,
                        "projection": proj,
                        "epsilon": eps,
                        "median_ta": float(np.median(ta)),
                        "median_ddp": float(np.median(ddp)),
                        "median_relative_difference": float(np.median(rel)),
                        "p_value": _wilcoxon(ddp, ta),
                    }
                )
    adjusted = holm_adjust([t["p_value"] for t in tests]) if tests else []
    for t, adj in zip(tests, adjusted, strict=True):
        t["p_holm"] = adj
        t["reject"] = bool(adj <= plan.alpha)
    rejected = [t for t in tests if t["reject"]]
    return {
        "test": "two-sided paired Wilcoxon signed-rank test of DDP - TA MAE over the runs "
        "(same splits), per (data set, epsilon, projection); Holm correction over all "
        f"{len(tests)} tests",
        "alpha": plan.alpha,
        "n_tests": len(tests),
        "n_rejected": len(rejected),
        "indistinguishable": None if not tests else not rejected,
        "smallest_p_raw": min((t["p_value"] for t in tests), default=None),
        "smallest_p_holm": min((t["p_holm"] for t in tests), default=None),
        "tests": tests,
    }


def _replicate(
    indist: dict,
    plan: BayesLinregPlan,
    run_cells: Callable[[list[tuple[str, bool, float]]], list[tuple[list[float], list[float]]]],
) -> dict:
    """Test every rejected DDP-vs-TA cell again on fresh splits and noise.

    ``run_cells(cells)`` returns, for each ``(dataset, projection, epsilon)`` of ``cells``,
    the TA and DDP test MAEs of ``plan.replication_runs`` new runs (seed ``plan.seed + 1``).
    A rejection counts only if the fresh runs reject too (Holm over the replications):
    requiring both stages keeps the family-wise error of the verdict below ``plan.alpha``, and
    a single chance rejection among many tests (expected about once in twenty reproductions)
    does not overturn it.
    """
    rejected = [t for t in indist["tests"] if t["reject"]]
    fresh = run_cells([(t["dataset"], t["projection"], t["epsilon"]) for t in rejected])
    replications = []
    for t, (ta, ddp) in zip(rejected, fresh, strict=True):
        replications.append(
            {
                "dataset": t["dataset"],
                "projection": t["projection"],
                "epsilon": t["epsilon"],
                "runs": len(ta),
                "median_ta": float(np.median(ta)),
                "median_ddp": float(np.median(ddp)),
                "p_value": _wilcoxon(ddp, ta),
            }
        )
    for r, adj in zip(replications, holm_adjust([r["p_value"] for r in replications]), strict=True):
        r["p_holm"] = adj
        r["replicated"] = bool(adj <= plan.alpha)
    n_replicated = sum(r["replicated"] for r in replications)
    out = dict(indist)
    out["replications"] = replications
    out["n_replicated"] = n_replicated
    if indist["indistinguishable"] is not None:
        out["indistinguishable"] = n_replicated == 0
    return out


def _projection_gain(results: dict, plan: BayesLinregPlan) -> dict:
    key = next((f"{e:g}" for e in plan.epsilons if math.isclose(e, TARGET_EPSILON)), None)
    rows = []
    if key is not None:
        for ds in plan.datasets:
            for setting, plain, proj in (
                ("trusted", "trusted", "trusted_proj"),
                ("distributed", "distributed", "distributed_proj"),
            ):
                if plain not in results[ds] or proj not in results[ds]:
                    continue
                a, b = results[ds][plain][key], results[ds][proj][key]
                rows.append(
                    {
                        "dataset": ds,
                        "setting": setting,
                        "epsilon": TARGET_EPSILON,
                        "median_without": float(np.median(a)),
                        "median_with": float(np.median(b)),
                        "projection_beats": bool(np.median(b) < np.median(a)),
                        "p_value": _wilcoxon(b, a),
                    }
                )
    return {
        "epsilon": TARGET_EPSILON,
        "criterion": "median test MAE over the runs with projection below the median without",
        "rows": rows,
        "all_beat": None if not rows else all(r["projection_beats"] for r in rows),
    }


# ---------------------------------------------------------------------------------------------
# tasks


@dataclass(frozen=True)
class _Runs:
    """Runs of one method at one budget on one data set: a task of the reproduction."""

    dataset: str
    #: A key of :data:`METHODS`.
    method: str
    #: The budget's index in ``plan.epsilons`` (the noise stream), ``None`` for non-private.
    level: int | None
    epsilon: float | None
    #: Seeds the splits, the noise and the threshold search (:func:`cross_validate`).
    seed: int
    runs: tuple[int, ...]


@dataclass(frozen=True)
class _Grid:
    """What every task of a reproduction shares (sent once to an executor)."""

    plan: BayesLinregPlan
    #: Data set name -> (scaled RegressionData, Scaling).
    loaded: dict[str, tuple[Any, Any]]
    aggregate: Callable[..., Any] | None
    #: The threshold searches shared by the tasks run in this process; ``None``: a task
    #: searches for itself (in a worker).
    cache: ThresholdCache | None


def _run_task(grid: _Grid, task: _Runs) -> list[dict]:
    """The runs of ``task`` (:func:`_fit_run` of each, in order), as :func:`cross_validate`
    runs them."""
    plan = grid.plan
    data, _ = grid.loaded[task.dataset]
    spec = METHODS[task.method]
    cache = grid.cache if grid.cache is not None else ThresholdCache()
    private = task.epsilon is not None
    return [
        _fit_run(
            data,
            r,
            seed=task.seed,
            n_test=REGRESSION_DATASETS[task.dataset].test_size,
            method_index=list(METHODS).index(task.method),
            level_index=task.level or 0,
            epsilon=task.epsilon,
            delta=plan.delta if private else None,
            mode=spec.mode,
            projection=spec.projection,
            bound_x=plan.bound,
            bound_y=plan.bound,
            calibration=plan.calibration,
            std_share=plan.std_share,
            centre=plan.centre,
            centre_share=plan.centre_share,
            repair=plan.repair,
            compute_nodes=plan.compute_nodes,
            tolerated=plan.tolerated,
            threshold_repeats=plan.threshold_repeats,
            threshold_cache=cache,
            aggregate=grid.aggregate,
        )
        for r in task.runs
    ]


def _describe(task: _Runs) -> str:
    """The task, for the progress bar (``"wine-red trusted ε=1 run 0"``)."""
    what = "NP" if task.epsilon is None else f"{task.method} ε={task.epsilon:g}"
    runs = f"run {task.runs[0]}" if len(task.runs) == 1 else f"runs {task.runs[0]}-{task.runs[-1]}"
    return f"{task.dataset} {what} {runs}"


def _grid_tasks(plan: BayesLinregPlan, *, per_run: bool) -> list[_Runs]:
    """The tasks of the figure: every (data set, method, budget), the run order of the figure;
    one task per run if ``per_run``, else one per cell."""
    tasks = []
    for ds in plan.datasets:
        for key in plan.methods:
            levels: list[tuple[int | None, float | None]] = (
                [(None, None)] if key == "nonprivate" else list(enumerate(plan.epsilons))
            )
            for level, eps in levels:
                runs = [(r,) for r in range(plan.runs)] if per_run else [tuple(range(plan.runs))]
                tasks += [_Runs(ds, key, level, eps, plan.seed, rs) for rs in runs]
    return tasks


def _by_cell(tasks: Sequence[_Runs], done: Sequence[list[dict]]) -> dict[tuple, list[dict]]:
    """The runs of each ``(dataset, method, level, seed)``, in the tasks' order."""
    cells: dict[tuple, list[dict]] = {}
    for task, fits in zip(tasks, done, strict=True):
        cells.setdefault((task.dataset, task.method, task.level, task.seed), []).extend(fits)
    return cells


def _searches(fits: Sequence[dict]) -> tuple[int, int]:
    """Threshold searches run and reused by ``fits`` had they all shared one
    :class:`ThresholdCache` (one search per distinct setting, reused by every other fit with
    it): the same counts however the tasks ran."""
    seen: set[tuple] = set()
    lookups = 0
    for fit in fits:
        found = fit["detail"]["thresholds"]
        if found is None:
            continue
        lookups += 1
        # the settings that tell two searches of a reproduction apart, as the cache keys them
        seen.add(
            (
                found["n"],
                found["d"],
                cache_multiplier(found["noise_multiplier"]),
                found["repeats"],
                found["seed"],
            )
        )
    return len(seen), lookups - len(seen)


# ---------------------------------------------------------------------------------------------
# report


def _markdown(summary: dict) -> str:
    """The reproduction's summary in markdown: settings, targets, one section per data set,
    the tests."""
    plan = summary["plan"]
    mode = "quick (few runs; a smoke test, not the experiment)" if summary["quick"] else "full"
    centring = (
        REPORT.render("centring", centre_share=f"{plan['centre_share']:g}")
        if plan["centre"]
        else REPORT.render("no-centring")
    )
    head = REPORT.render(
        "head",
        mode=mode,
        seconds=f"{summary['seconds']:.1f}",
        runs=plan["runs"],
        delta=f"{plan['delta']:g}",
        calibration=plan["calibration"],
        bound=f"{plan['bound']:g}",
        std_share=f"{plan['std_share']:g}",
        compute_nodes=plan["compute_nodes"],
        tolerated=plan["tolerated"],
        centring=centring,
    )
    sections = [head, _targets(summary), *_dataset_sections(summary)]
    ind = summary["indistinguishable"]
    tests = [
        REPORT.render(
            "test-row",
            dataset=t["dataset"],
            projection="yes" if t["projection"] else "no",
            epsilon=f"{t['epsilon']:g}",
            median_ta=fmt(t["median_ta"]),
            median_ddp=fmt(t["median_ddp"]),
            difference=fmt(100 * t["median_relative_difference"], 3),
            p=fmt(t["p_value"], 3),
            p_holm=fmt(t["p_holm"], 3),
        )
        for t in ind["tests"]
    ]
    sections.append(REPORT.render("tests", rows=tests))
    return summary_markdown(sections, summary)


def _targets(summary: dict) -> str:
    """The targets' section: the replications and the projection's verdicts."""
    ind = summary["indistinguishable"]
    replications = [
        REPORT.render(
            "replication-row",
            dataset=r["dataset"],
            kind="with" if r["projection"] else "without",
            epsilon=f"{r['epsilon']:g}",
            runs=r["runs"],
            verdict="**replicated**" if r["replicated"] else "did not replicate",
            median_ta=fmt(r["median_ta"]),
            median_ddp=fmt(r["median_ddp"]),
            p=fmt(r["p_value"], 3),
            p_holm=fmt(r["p_holm"], 3),
        )
        for r in ind.get("replications", [])
    ]
    projection = [
        REPORT.render(
            "projection-row",
            dataset=row["dataset"],
            setting=row["setting"],
            verdict="**yes**" if row["projection_beats"] else "**no**",
            median_with=fmt(row["median_with"]),
            median_without=fmt(row["median_without"]),
            p=fmt(row["p_value"], 3),
        )
        for row in summary["projection_at_epsilon1"]["rows"]
    ]
    targets = REPORT.render(
        "targets",
        n_tests=ind["n_tests"],
        alpha=f"{ind['alpha']:g}",
        verdict={True: "**yes**", False: "**no**", None: "n/a"}[ind["indistinguishable"]],
        n_rejected=ind["n_rejected"],
        n_replicated=ind.get("n_replicated", 0),
        smallest_p=fmt(ind["smallest_p_raw"], 3),
        smallest_p_holm=fmt(ind["smallest_p_holm"], 3),
        replications=replications,
        projection=projection,
    )
    return targets


def _dataset_sections(summary: dict) -> list[str]:
    """One section per data set: each method's median error at each epsilon."""
    plan = summary["plan"]
    sections: list[str] = []
    for ds in summary["datasets"]:
        info, medians = summary["data"][ds], summary["medians"][ds]
        rows = []
        for key in plan["methods"]:
            if key == "nonprivate":
                continue
            cells = []
            for e in plan["epsilons"]:
                s = medians[key][f"{e:g}"]
                cells.append(f"{fmt(s['median'])} ({fmt(s['q25'], 3)}–{fmt(s['q75'], 3)})")
            rows.append(
                REPORT.render("dataset-row", method=METHODS[key].label, cells=" | ".join(cells))
            )
        sections.append(
            REPORT.render(
                "dataset",
                dataset=ds,
                n_rows=info["n_rows"],
                d=info["d"],
                n_train=info["n_train"],
                n_test=info["n_test"],
                median=fmt(medians["nonprivate"]["median"]),
                q25=fmt(medians["nonprivate"]["q25"]),
                q75=fmt(medians["nonprivate"]["q75"]),
                epsilons=" | ".join(f"ε = {e:g}" for e in plan["epsilons"]),
                align="---:|" * len(plan["epsilons"]),
                rows=rows,
            )
        )
    return sections


def _notes(
    plan: BayesLinregPlan,
    *,
    repaired: int,
    fallback: int,
    searches: int,
    reused: int,
    seen: list[str],
) -> list[str]:
    private = [m for m in plan.methods if m != "nonprivate"]
    n_private = len(plan.datasets) * len(private) * len(plan.epsilons) * plan.runs
    n_projected = (
        len(plan.datasets)
        * plan.runs
        * len(plan.epsilons)
        * sum(METHODS[m].projection for m in private)
    )
    notes = [
        REPORT.paragraph("note-scaling"),
        REPORT.paragraph("note-training-set"),
        REPORT.paragraph("note-range"),
        REPORT.paragraph("note-centring", centre_share=f"{plan.centre_share:g}")
        if plan.centre
        else REPORT.paragraph("note-no-centring"),
        REPORT.paragraph("note-repair", repair=plan.repair),
        REPORT.paragraph(
            "note-repairs-counted",
            repaired=repaired,
            private=n_private,
            fallback=fallback,
            projected=n_projected,
        ),
        REPORT.paragraph("note-thresholds", searches=searches, reused=reused),
        REPORT.paragraph("note-calibration", calibration=plan.calibration),
        REPORT.paragraph("note-indistinguishable", replication_runs=plan.replication_runs),
        *seen,
    ]
    if plan.quick:
        notes.append(REPORT.paragraph("note-quick"))
    return notes


@dataclass
class _Collected:
    """The figure's runs gathered per data set, method and epsilon (the JSON's blocks)."""

    results: dict[str, dict] = field(default_factory=dict)
    privacy: dict[str, dict] = field(default_factory=dict)
    data_info: dict[str, dict] = field(default_factory=dict)
    notes_seen: list[str] = field(default_factory=list)
    repairs: dict[str, dict] = field(default_factory=dict)
    fallbacks: dict[str, dict] = field(default_factory=dict)


def _collect_dataset(
    plan: BayesLinregPlan,
    ds: str,
    scaling: Any,
    n_test: int,
    cells: dict[tuple, list[dict]],
    out: _Collected,
) -> int:
    """Summarise the runs of every method and budget on ``ds`` into ``out``; the number of
    training rows."""
    out.results[ds] = {}
    out.privacy[ds] = {}
    out.repairs[ds] = {}
    out.fallbacks[ds] = {}
    for key in plan.methods:
        spec = METHODS[key]
        if key == "nonprivate":
            res = _summarise(
                cells[ds, key, None, plan.seed],
                scaling,
                mode=spec.mode,
                repair=plan.repair,
                n_test=n_test,
            )
            out.results[ds][key] = res["mae"]
            n_train = res["n_train"]
            continue
        out.results[ds][key] = {}
        out.privacy[ds][key] = {}
        for level, eps in enumerate(plan.epsilons):
            res = _summarise(
                cells[ds, key, level, plan.seed],
                scaling,
                mode=spec.mode,
                repair=plan.repair,
                n_test=n_test,
            )
            out.results[ds][key][f"{eps:g}"] = res["mae"]
            out.privacy[ds][key][f"{eps:g}"] = res["privacy"]
            out.repairs[ds].setdefault(key, {})[f"{eps:g}"] = res["repaired_runs"]
            out.fallbacks[ds].setdefault(key, {})[f"{eps:g}"] = res["fallback_runs"]
            n_train = res["n_train"]
            kind = "with projection" if spec.projection else "without projection"
            for note in res["calibration_notes"]:
                text = f"ε = {eps:g}, {kind}: {note}"
                if text not in out.notes_seen:
                    out.notes_seen.append(text)
    return n_train


def _collect(
    plan: BayesLinregPlan, loaded: dict[str, tuple[Any, Any]], cells: dict[tuple, list[dict]]
) -> _Collected:
    """Summarise the figure's runs, data set by data set."""
    out = _Collected()
    for ds in plan.datasets:
        data, scaling = loaded[ds]
        n_test = REGRESSION_DATASETS[ds].test_size
        n_train = _collect_dataset(plan, ds, scaling, n_test, cells, out)
        out.data_info[ds] = {
            "name": ds,
            "source": data.source,
            "n_rows": data.n_samples,
            "d": data.n_features,
            "n_train": n_train,
            "n_test": n_test,
            "target": data.target_name,
            "target_scale_factor": scaling.factor_y,
            "preprocessing": data.preprocessing,
        }
    return out


def _medians(plan: BayesLinregPlan, results: dict) -> dict[str, dict]:
    """Median and quartiles of the MAEs per data set, method (and epsilon)."""
    medians: dict[str, dict] = {}
    for ds in plan.datasets:
        medians[ds] = {}
        for key in plan.methods:
            if key == "nonprivate":
                medians[ds][key] = _quartiles(results[ds][key])
            else:
                medians[ds][key] = {e: _quartiles(v) for e, v in results[ds][key].items()}
    return medians


def _replication_cells(
    run: Reproduction,
    task: Callable[[_Runs], list[dict]],
    plan: BayesLinregPlan,
    fits: list[dict],
    wanted: list[tuple[str, bool, float]],
) -> list[tuple[list[float], list[float]]]:
    """The ``run_cells`` of :func:`_replicate`: the fresh runs, whose fits join ``fits``."""
    # TA then DDP of each cell, the fresh runs of one task each
    again = [
        _Runs(
            ds,
            key,
            plan.epsilons.index(eps),
            eps,
            plan.seed + 1,
            tuple(range(plan.replication_runs)),
        )
        for ds, projection, eps in wanted
        for key in (
            ("trusted_proj", "distributed_proj") if projection else ("trusted", "distributed")
        )
    ]
    redone = run.map(task, again, describe=_describe)
    fits.extend(fit for runs in redone for fit in runs)
    maes = [[fit["mae"] for fit in runs] for runs in redone]
    return list(zip(maes[::2], maes[1::2], strict=True))


def _emit_figure(
    run: Reproduction,
    plan: BayesLinregPlan,
    collected: _Collected,
    medians: dict[str, dict],
    indist: dict,
    gain: dict,
) -> None:
    """Write ``bayes_linreg.json`` and ``bayes_linreg.png``."""
    labels = {k: METHODS[k].label for k in plan.methods}
    panels = []
    for ds in plan.datasets:
        panels.append(
            {
                "title": _PANEL_TITLES.get(ds, ds),
                "nonprivate": medians[ds].get("nonprivate"),
                "methods": {
                    k: [medians[ds][k][f"{e:g}"] for e in plan.epsilons]
                    for k in plan.methods
                    if k != "nonprivate"
                },
            }
        )
    title = (
        f"DP Bayesian linear regression: median test MAE and IQR over {plan.runs} runs, "
        f"δ = {plan.delta:g}, {plan.calibration} calibration"
    )
    payload = {
        "experiment": "bayes-linreg",
        "paper": "004 (Heikkilä et al., NeurIPS 2017), figure 2",
        "plan": asdict(plan),
        "methods": {k: asdict(METHODS[k]) for k in plan.methods},
        "data": collected.data_info,
        "mae": collected.results,
        "medians": medians,
        "privacy": collected.privacy,
        "repaired_runs": collected.repairs,
        "std_fallback_runs": collected.fallbacks,
        "indistinguishable": indist,
        "projection_at_epsilon1": gain,
    }
    run.emit(
        "bayes_linreg",
        payload,
        lambda: plot_bayes_linreg(panels, epsilons=plan.epsilons, labels=labels, title=title),
        names=("png",),
    )


def _summary(
    plan: BayesLinregPlan,
    collected: _Collected,
    medians: dict[str, dict],
    indist: dict,
    gain: dict,
    fits: Sequence[dict],
) -> dict[str, Any]:
    """The content of ``summary.json`` (before the runner adds the files and seconds)."""
    repairs, fallbacks = collected.repairs, collected.fallbacks
    n_repaired = sum(c for ds in repairs.values() for m in ds.values() for c in m.values())
    n_fallback = sum(c for ds in fallbacks.values() for m in ds.values() for c in m.values())
    searches, reused = _searches(fits)
    notes = _notes(
        plan,
        repaired=n_repaired,
        fallback=n_fallback,
        searches=searches,
        reused=reused,
        seen=collected.notes_seen,
    )
    return {
        "quick": plan.quick,
        "plan": asdict(plan),
        "datasets": list(plan.datasets),
        "data": collected.data_info,
        "medians": medians,
        "indistinguishable": indist,
        "projection_at_epsilon1": gain,
        "cache": {"searches": searches, "reused": reused},
        "notes": notes,
    }


def run_bayes_linreg_reproduction(
    out_dir: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    quick: bool = False,
    progress: bool = False,
    plan: BayesLinregPlan | None = None,
    aggregate: Callable[..., Any] | None = None,
    executor: Executor | None = None,
) -> dict:
    """Run the paper's DP Bayesian linear regression experiment; write a figure and summary.

    Parameters
    ----------
    out_dir : str or os.PathLike
        Output folder, created if missing. Receives ``bayes_linreg.png``,
        ``bayes_linreg.json``, then ``summary.md`` and ``summary.json``.
    data_dir : str or os.PathLike or None, default None
        Folder holding ``wine_quality/`` and ``abalone/`` (``None``: ``DPFED_DATA``).
    quick : bool, default False
        Small configuration (:func:`quick_plan`) for tests.
    progress : bool, default False
        Progress bar over the runs when standard error is a terminal.
    plan : BayesLinregPlan or None
        Overrides :func:`full_plan` / :func:`quick_plan`.
    aggregate : callable or None
        Secure sum for DDP (default :func:`dpfed.dca.secure_sum`); picklable if an
        ``executor`` is given.
    executor : concurrent.futures.Executor, optional
        Runs the independent cells of the figure (data set, method, budget) and of the
        replication of rejected tests, e.g. a :class:`dpfed.engines.tasks.RayExecutor`;
        default: every run one after another here. Every run draws its split and noise from
        its own seeds: the results are the same.

    Returns
    -------
    dict
        The content of ``summary.json``: ``plan``, ``data``, ``medians`` (per data set,
        method and epsilon: median, q25, q75), ``indistinguishable`` (the DDP-vs-TA tests),
        ``projection_at_epsilon1``, ``cache`` (threshold searches run and reused), ``notes``,
        ``files``, ``seconds``.

    Raises
    ------
    DpfedInputError
        If matplotlib is missing, or the data folder or a data file is missing.
    """
    run = Reproduction("bayes-linreg", out_dir, progress=progress, executor=executor)
    if plan is None:
        plan = quick_plan() if quick else full_plan()
    unknown = [m for m in plan.methods if m not in METHODS]
    if unknown:
        raise DpfedInputError(f"plan methods must be among {tuple(METHODS)}. Found {unknown}.")
    loaded = {ds: load_scaled(ds, data_dir) for ds in plan.datasets}
    # here one task per run (a step of the bar each) sharing one cache of threshold searches;
    # on an executor one task per cell, whose runs share its one search
    grid = _Grid(plan, loaded, aggregate, None if executor is not None else ThresholdCache())
    task = functools.partial(_run_task, grid)
    tasks = _grid_tasks(plan, per_run=executor is None)
    with run.running(len(tasks)):
        done = run.map(task, tasks, describe=_describe)
    fits = [fit for runs in done for fit in runs]
    collected = _collect(plan, loaded, _by_cell(tasks, done))
    medians = _medians(plan, collected.results)
    run_cells = functools.partial(_replication_cells, run, task, plan, fits)
    indist = _replicate(_indistinguishability(collected.results, plan), plan, run_cells)
    gain = _projection_gain(collected.results, plan)
    _emit_figure(run, plan, collected, medians, indist, gain)
    return run.finish(_summary(plan, collected, medians, indist, gain, fits), _markdown)
