r"""DP consensus ADMM (paper 002, Li & Chi) on Adult: accuracy against the privacy budget.

Paper 002 states the algorithm and its privacy analysis but reports **no experiments**, so
there is nothing to reproduce number for number; :func:`run_consensus_reproduction`
(``dpfed reproduce consensus``) runs the experiment the paper's setting calls for and writes,
into one folder:

``consensus.{png,json}``
    Test accuracy per iteration at each total privacy budget
    :math:`\varepsilon \in \{0.1, 0.5, 1, 2, 5\}` (mean over seeds) and without noise, the
    :math:`\varepsilon` spent per iteration, and the final accuracy against
    :math:`\varepsilon` with the non-private run and a centralised scikit-learn
    ``LogisticRegression(fit_intercept=False)`` of the same objective as references.
``summary.md``, ``summary.json``
    The :math:`\varepsilon = 1` accuracy (mean and worst seed; the target is 0.83), the noise
    multiplier of every level and the notes (written last).

Decisions:

* **Data.** UCI Adult (105 columns), every row scaled to unit l2 norm (the sensitivity needs
  :math:`\|x\| \le 1`), split evenly over 10 clients with ``horizontal_split(n, 10, rng=0)``;
  the official test file for the test accuracy.
* **Problem.** Logistic loss, :math:`\lambda = 10^{-5}` (weight of :math:`\|w\|^2/2` in
  :math:`\sum_i \frac1{m_i}\sum_j \ell_{ij} + \lambda R`), ADMM penalty
  :math:`\rho = 0.015`, 20 iterations. The penalty also sets the sensitivity
  :math:`2c_1/((\lambda/n + \rho) m_i)`, so a larger :math:`\rho` means less noise but
  slower progress.
* **Privacy.** Each client's upload is a Gaussian release; the per-round noise multiplier is
  calibrated once per level so that the total over the 20 rounds is
  :math:`(\varepsilon, 10^{-5})`-DP under the PLD accountant
  (:func:`dpfed.protocols.consensus.calibration.calibrate_consensus`), and the same multiplier is
  used for
  every seed. The :math:`\varepsilon` per iteration is the accountant's total so far.
* **Centralised reference.** scikit-learn's ``LogisticRegression(C=n/(\lambda N),
  fit_intercept=False)`` on all training rows minimises the same objective (up to the
  near-equal client sizes); a large C, as asked for a weakly regularised model.
* **Failed local solves.** As in :mod:`dpfed.experiments.decentralized`: a run whose Newton
  solve misses its tolerance (:class:`dpfed.core.local.LocalSolveError`) is retried with the
  seed shifted by 1000 (at most twice) and the attempts are recorded.

Failure semantics: files are written atomically; ``summary.md`` / ``summary.json`` are
written last and are absent if anything fails.
"""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import Executor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from dpfed.core.threads import limit_blas_threads
from dpfed.experiments.adult import AdultParts, adult_folder, load_adult_parts
from dpfed.experiments.plotting_horizontal import plot_consensus
from dpfed.experiments.report import ReportTemplate, fmt, summary_markdown
from dpfed.experiments.runner import Reproduction, with_retries
from dpfed.protocols.consensus.calibration import calibrate_consensus
from dpfed.protocols.consensus.driver import ConsensusConfig, train_consensus

TARGET_ACCURACY = 0.83
TARGET_EPSILON = 1.0
#: The prose of the report (summary.md and the notes).
REPORT = ReportTemplate("consensus.md")


@dataclass(frozen=True)
class ConsensusPlan:
    """Sizes of one consensus reproduction (:func:`full_plan` or :func:`quick_plan`)."""

    quick: bool
    clients: int
    lam: float
    rho: float
    iterations: int
    epsilons: tuple[float, ...]
    seeds: tuple[int, ...]
    delta: float = 1e-5
    accountant: str = "pld"
    max_train_rows: int | None = None
    max_test_rows: int | None = None
    split_seed: int = 0


def full_plan() -> ConsensusPlan:
    """The configuration of ``dpfed reproduce consensus`` (a few minutes)."""
    return ConsensusPlan(
        quick=False,
        clients=10,
        lam=1e-5,
        rho=0.015,
        iterations=20,
        epsilons=(0.1, 0.5, 1.0, 2.0, 5.0),
        seeds=(0, 1, 2),
    )


def quick_plan() -> ConsensusPlan:
    """A small configuration for tests: 3,000 / 3,000 rows, two levels, two seeds."""
    return ConsensusPlan(
        quick=True,
        clients=10,
        lam=1e-5,
        rho=0.015,
        iterations=10,
        epsilons=(1.0, 5.0),
        seeds=(0, 1),
        max_train_rows=3000,
        max_test_rows=3000,
    )


def _grid_run(
    data: AdultParts, plan: ConsensusPlan, cell: tuple[float | None, float | None, int]
) -> dict:
    """The run of one cell ``(epsilon, noise multiplier, seed)`` of the grid (a task)."""
    with limit_blas_threads():
        return _run(data, plan, noise_multiplier=cell[1], seed=cell[2])


def _describe(cell: tuple[float | None, float | None, int]) -> str:
    eps, _, seed = cell
    return "non-private" if eps is None else f"ε={eps:g} seed {seed}"


def _run(
    data: AdultParts, plan: ConsensusPlan, *, noise_multiplier: float | None, seed: int
) -> dict:
    """One consensus run (retrying a failed local solve with a shifted seed)."""

    def train(s: int):
        if noise_multiplier is None:
            cfg = ConsensusConfig(
                lam=plan.lam, rho=plan.rho, iterations=plan.iterations, seed=s, fit_intercept=False
            )  # the paper's model has none
        else:
            cfg = ConsensusConfig(
                lam=plan.lam,
                rho=plan.rho,
                iterations=plan.iterations,
                mechanism="gaussian",
                noise_multiplier=noise_multiplier,
                delta=plan.delta,
                accountant=plan.accountant,
                seed=s,
                fit_intercept=False,
            )
        return train_consensus(data.parts, cfg, X_test=data.X_test, y_test=data.y_test)

    done = with_retries(train, seed, retry=noise_multiplier is not None)
    if done.result is None:
        return {
            "seed": seed,
            "seed_used": None,
            "attempts": done.attempts,
            "failed": done.error,
            "final": None,
            "iterations": [],
            "test_accuracy": [],
            "epsilon": [],
            "privacy": None,
        }
    result = done.result
    history = result.history
    per_party = result.privacy.get("per_party", {})
    first = next(iter(per_party.values()), {})
    return {
        "seed": seed,
        "seed_used": done.seed_used,
        "attempts": done.attempts,
        "failed": None,
        "iterations": [h["iteration"] for h in history],
        "test_accuracy": [h["test_accuracy"] for h in history],
        "test_log_loss": [h["test_log_loss"] for h in history],
        "train_objective": [h["train_objective"] for h in history],
        "epsilon": [h["epsilon"] for h in history],
        "final": {
            k: history[-1][k]
            for k in ("iteration", "test_accuracy", "test_log_loss", "train_objective")
        },
        "privacy": {
            "epsilon": result.privacy.get("epsilon"),
            "delta": result.privacy.get("delta"),
            "accountant": result.privacy.get("accountant"),
            "noise_multiplier": result.privacy.get("noise_multiplier"),
            "sigma_client1": first.get("sigma"),
            "l2_sensitivity_client1": first.get("l2_sensitivity"),
        },
        "rounds": len(result.rounds),
        "seconds": done.seconds,
    }


def _centralized(data: AdultParts, plan: ConsensusPlan) -> dict:
    X, y = data.stacked()
    C = plan.clients / (plan.lam * X.shape[0])
    model = LogisticRegression(C=C, fit_intercept=False, max_iter=5000, tol=1e-8)
    model.fit(X, y)
    s = data.X_test @ model.coef_.ravel()
    return {
        "label": "centralised scikit-learn LogisticRegression",
        "C": C,
        "C_choice": "n / (lambda N): the same objective as the consensus problem",
        "test_accuracy": float(np.mean(np.where(s > 0, 1.0, -1.0) == data.y_test)),
        "test_log_loss": float(np.mean(np.logaddexp(0.0, -data.y_test * s))),
    }


def _mean_curve(runs: list[dict], key: str) -> list[float | None]:
    ok = [r[key] for r in runs if not r.get("failed")]
    if not ok:
        return []
    length = min(len(c) for c in ok)
    return [float(np.mean([c[t] for c in ok])) for t in range(length)]


def _stats(values: list[float]) -> dict:
    if not values:
        return {"mean": None, "min": None, "max": None, "std": None}
    v = np.asarray(values, dtype=float)
    return {
        "mean": float(v.mean()),
        "min": float(v.min()),
        "max": float(v.max()),
        "std": float(v.std(ddof=1)) if v.size > 1 else 0.0,
    }


def _level(plan: ConsensusPlan, eps: float, cal: Any, level_runs: list[dict]) -> dict:
    """One privacy level of the JSON: its calibration and the statistics over its seeds."""
    ok = [r for r in level_runs if not r.get("failed")]
    accs = [float(r["final"]["test_accuracy"]) for r in ok]
    first = ok[0] if ok else None
    return {
        "epsilon": eps,
        "label": f"ε = {eps:g}",
        "noise_multiplier": float(cal.noise_multiplier),
        # epsilon_step is the classic per-round reading of the noise, a guarantee
        # only where classic_valid; the certified figure is epsilon
        "calibration": {
            k: v for k, v in asdict(cal).items() if isinstance(v, int | float | str | type(None))
        }
        | {"classic_valid": cal.classic_valid},
        "sigma_client1": first["privacy"]["sigma_client1"] if first else None,
        "l2_sensitivity_client1": first["privacy"]["l2_sensitivity_client1"] if first else None,
        "epsilon_spent": max((r["privacy"]["epsilon"] for r in ok), default=None),
        "seeds": list(plan.seeds),
        "seeds_used": [r["seed_used"] for r in level_runs],
        "final_accuracy": [r["final"]["test_accuracy"] if r["final"] else None for r in level_runs],
        "accuracy": {**_stats(accs), "n": len(accs)},
        "test_log_loss_mean": float(np.mean([r["final"]["test_log_loss"] for r in ok]))
        if ok
        else None,
        "failed": [r["seed"] for r in level_runs if r.get("failed")],
        "retries": sum(len(r["attempts"]) for r in level_runs),
        "iterations": first["iterations"] if first else [],
        "test_accuracy_mean": _mean_curve(level_runs, "test_accuracy"),
        "epsilon_spent_per_iteration": first["epsilon"] if first else [],
    }


def _markdown(summary: dict) -> str:
    plan, h = summary["plan"], summary["headlines"]
    ds = summary["dataset"]
    mode = "quick (subsampled; a smoke test, not the experiment)" if summary["quick"] else "full"
    head = REPORT.render(
        "head",
        mode=mode,
        seconds=f"{summary['seconds']:.1f}",
        n_train=ds["n_train"],
        n_features=ds["n_features"],
        clients=plan["clients"],
        n_test=ds["n_test"],
        lam=f"{plan['lam']:g}",
        rho=f"{plan['rho']:g}",
        iterations=plan["iterations"],
        delta=f"{plan['delta']:g}",
        accountant=plan["accountant"].upper(),
        seeds=plan["seeds"],
    )
    acc = h["epsilon1_accuracy"]
    target = f"{TARGET_ACCURACY:g}"
    if acc is not None:

        def verdict(flag: bool) -> str:
            return "**met**" if flag else "**not met**"

        targets = [
            REPORT.render(
                "target-mean",
                target=target,
                mean=fmt(acc["mean"]),
                n=acc["n"],
                verdict=verdict(h["target_met_mean"]),
            ),
            REPORT.render(
                "target-every-seed",
                target=target,
                min=fmt(acc["min"]),
                verdict=verdict(h["target_met_every_seed"]),
            ),
        ]
    else:
        targets = [REPORT.render("target-not-run", target=target)]
    rows = [
        REPORT.render(
            "level-row",
            epsilon=f"{lv['epsilon']:g}",
            z=fmt(lv["noise_multiplier"]),
            sigma=fmt(lv["sigma_client1"]),
            spent=fmt(lv["epsilon_spent"]),
            mean=fmt(lv["accuracy"]["mean"]),
            min=fmt(lv["accuracy"]["min"]),
            max=fmt(lv["accuracy"]["max"]),
            std=fmt(lv["accuracy"]["std"], 2),
            log_loss=fmt(lv["test_log_loss_mean"]),
        )
        for lv in summary["levels"]
    ]
    np_, cen = summary["nonprivate"], summary["centralized"]
    levels = REPORT.render(
        "levels",
        rows=rows,
        nonprivate_accuracy=fmt(np_["test_accuracy"]),
        nonprivate_log_loss=fmt(np_["test_log_loss"]),
        C=f"{cen['C']:.3g}",
        centralized_accuracy=fmt(cen["test_accuracy"]),
        centralized_log_loss=fmt(cen["test_log_loss"]),
    )
    return summary_markdown([head, REPORT.render("target", rows=targets), levels], summary)


def _notes(
    plan: ConsensusPlan, levels: list[dict], nonprivate: dict, centralized: dict, acc: dict | None
) -> list[str]:
    notes = [
        REPORT.paragraph("note-no-experiments", target=f"{TARGET_ACCURACY:g}"),
        REPORT.paragraph("note-noise"),
        REPORT.paragraph("note-nonprivate"),
    ]
    if nonprivate["test_accuracy"] is not None:
        gap = 100.0 * (centralized["test_accuracy"] - nonprivate["test_accuracy"])
        common = {"iterations": plan.iterations, "gap": f"{gap:.2f}", "rho": f"{plan.rho:g}"}
        if acc is not None:
            cost = 100.0 * (nonprivate["test_accuracy"] - acc["mean"])
            notes.append(REPORT.paragraph("note-gap", cost=f"{cost:.2f}", **common))
        else:
            notes.append(REPORT.paragraph("note-gap-no-epsilon1", **common))
    retried = sum(lv["retries"] for lv in levels)
    if retried:
        notes.append(REPORT.paragraph("note-retried", retried=retried))
    failed = [(lv["epsilon"], s) for lv in levels for s in lv["failed"]]
    if failed:
        notes.append(REPORT.paragraph("note-failed", failed=str(failed)))
    if plan.quick:
        notes.append(REPORT.paragraph("note-quick"))
    return notes


def _calibrations(plan: ConsensusPlan, data: AdultParts) -> list[Any]:
    """The calibration of every privacy level of ``plan``."""
    # every upload draws its model's coordinates from the exact grid sampler
    coordinates = plan.iterations * int(data.parts[0][0].shape[1])
    return [
        calibrate_consensus(
            eps, plan.delta, plan.iterations, accountant=plan.accountant, coordinates=coordinates
        )
        for eps in plan.epsilons
    ]


def _run_grid(
    run: Reproduction, data: AdultParts, plan: ConsensusPlan, calibrations: list[Any]
) -> tuple[list[dict], list[dict], dict, dict]:
    """Every run of the grid and the centralised reference: the non-private runs, the levels'
    JSON, the runs by level, and the reference."""
    # every run on its own seed: (epsilon or None, noise multiplier or None, seed)
    grid: list[tuple[float | None, float | None, int]] = [
        (None, None, s) for s in plan.seeds[:1]
    ] + [
        (eps, float(cal.noise_multiplier), s)
        for eps, cal in zip(plan.epsilons, calibrations, strict=True)
        for s in plan.seeds
    ]
    with run.running(len(grid)):
        done = run.map(functools.partial(_grid_run, data, plan), grid, describe=_describe)
        nonprivate = done[: len(plan.seeds[:1])]
        levels, runs = [], {"nonprivate": nonprivate}
        for k, (eps, cal) in enumerate(zip(plan.epsilons, calibrations, strict=True)):
            first = len(nonprivate) + k * len(plan.seeds)
            level_runs = done[first : first + len(plan.seeds)]
            runs[f"epsilon={eps:g}"] = level_runs
            levels.append(_level(plan, eps, cal, level_runs))
        centralized = _centralized(data, plan)
    return nonprivate, levels, runs, centralized


def _nonprivate_summary(np_run: dict) -> dict:
    """The non-private run's block of the JSON."""
    return {
        "label": "non-private consensus ADMM",
        "test_accuracy": np_run["final"]["test_accuracy"] if np_run["final"] else None,
        "test_log_loss": np_run["final"]["test_log_loss"] if np_run["final"] else None,
        "iterations": np_run["iterations"],
        "test_accuracy_mean": np_run["test_accuracy"],
        "final_mean": np_run["final"]["test_accuracy"] if np_run["final"] else None,
    }


def _emit_figure(
    run: Reproduction,
    plan: ConsensusPlan,
    data: AdultParts,
    levels: list[dict],
    np_summary: dict,
    centralized: dict,
    runs: dict,
) -> None:
    """Write ``consensus.json`` and ``consensus.png``."""
    plot_levels = [
        {
            **lv,
            "epsilon_spent": lv["epsilon_spent_per_iteration"],
            "final_mean": lv["accuracy"]["mean"],
            "final_min": lv["accuracy"]["min"],
            "final_max": lv["accuracy"]["max"],
        }
        for lv in levels
        if lv["accuracy"]["n"]
    ]
    payload = {
        "experiment": "consensus",
        "paper": "002 (Li & Chi): no experiments in the paper",
        "dataset": data.describe(),
        "plan": asdict(plan),
        "levels": levels,
        "nonprivate": np_summary,
        "centralized": centralized,
        "runs": runs,
    }
    title = (
        f"DP consensus ADMM on Adult: {plan.clients} clients, λ={plan.lam:g}, ρ={plan.rho:g}, "
        f"{plan.iterations} iterations, δ={plan.delta:g} ({plan.accountant.upper()}), "
        f"{len(plan.seeds)} seeds"
    )
    run.emit(
        "consensus",
        payload,
        lambda: plot_consensus(
            plot_levels,
            title=title,
            nonprivate=np_summary,
            centralized_accuracy=centralized["test_accuracy"],
            target_accuracy=TARGET_ACCURACY,
        ),
    )


def _summary(
    plan: ConsensusPlan, data: AdultParts, levels: list[dict], np_summary: dict, centralized: dict
) -> dict[str, Any]:
    """The content of ``summary.json`` (before the runner adds the files and seconds)."""
    at_one = next((lv for lv in levels if math.isclose(lv["epsilon"], TARGET_EPSILON)), None)
    acc = at_one["accuracy"] if at_one and at_one["accuracy"]["n"] else None
    headlines = {
        "epsilon1_accuracy": acc,
        "target_accuracy": TARGET_ACCURACY,
        "target_met_mean": None if acc is None else bool(acc["mean"] >= TARGET_ACCURACY),
        "target_met_every_seed": None if acc is None else bool(acc["min"] >= TARGET_ACCURACY),
        "noise_multiplier": {f"{lv['epsilon']:g}": lv["noise_multiplier"] for lv in levels},
        "nonprivate_accuracy": np_summary["test_accuracy"],
        "centralized_accuracy": centralized["test_accuracy"],
    }
    return {
        "quick": plan.quick,
        "plan": asdict(plan),
        "dataset": data.describe(),
        "headlines": headlines,
        "levels": [
            {
                k: v
                for k, v in lv.items()
                if k not in ("iterations", "test_accuracy_mean", "epsilon_spent_per_iteration")
            }
            for lv in levels
        ],
        "nonprivate": {
            k: v for k, v in np_summary.items() if k not in ("iterations", "test_accuracy_mean")
        },
        "centralized": centralized,
        "notes": _notes(plan, levels, np_summary, centralized, acc),
    }


def run_consensus_reproduction(
    out_dir: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    quick: bool = False,
    progress: bool = False,
    executor: Executor | None = None,
) -> dict:
    """Run DP consensus ADMM on Adult at several privacy budgets; write a figure and summary.

    Parameters
    ----------
    out_dir : str or os.PathLike
        Output folder, created if missing. Receives ``consensus.png``, ``consensus.json``,
        then ``summary.md`` and ``summary.json``.
    data_dir : str or os.PathLike or None, default None
        Folder holding ``adult/adult.data`` and ``adult/adult.test`` (``None``: the
        ``DPFED_DATA`` environment variable).
    quick : bool, default False
        Small configuration (:func:`quick_plan`) for tests.
    progress : bool, default False
        Show a progress bar over the runs when standard error is a terminal.
    executor : concurrent.futures.Executor, optional
        Runs the grid's runs (e.g. a :class:`dpfed.engines.tasks.RayExecutor`); default: one
        after another here. Every run has its own seed: the results are the same.

    Returns
    -------
    dict
        The content of ``summary.json``: ``plan``, ``dataset``, ``headlines`` (the
        :math:`\\varepsilon = 1` accuracy and whether the target is met), ``levels`` (per
        :math:`\\varepsilon`: noise multiplier and accuracy statistics), ``nonprivate``,
        ``centralized``, ``notes``, ``files`` and ``seconds``.

    Raises
    ------
    DpfedInputError
        If matplotlib is missing, or the data folder or the Adult files are missing.
    """
    plan = quick_plan() if quick else full_plan()
    run = Reproduction("consensus", out_dir, progress=progress, executor=executor)
    base = adult_folder(data_dir, "consensus")
    with limit_blas_threads():
        data = load_adult_parts(
            base,
            parties=plan.clients,
            max_train_rows=plan.max_train_rows,
            max_test_rows=plan.max_test_rows,
            seed=plan.split_seed,
        )
        calibrations = _calibrations(plan, data)
        nonprivate, levels, runs, centralized = _run_grid(run, data, plan, calibrations)
    np_summary = _nonprivate_summary(nonprivate[0])
    _emit_figure(run, plan, data, levels, np_summary, centralized, runs)
    return run.finish(_summary(plan, data, levels, np_summary, centralized), _markdown)
