r"""Reproduction of the experiments of Hu et al. (AAAI 2020), DP ADMM sharing, and beyond.

:func:`run_vertical_reproduction` (``dpfed reproduce vertical``) writes, into one folder:

``figure1_a9a.{png,json}``
    The paper's figure 1: training objective and test log loss per epoch on a9a (split
    66 | 57, :math:`\lambda = 10^{-4}`), ADMM sharing against the FDML-style vertical SGD
    for the same number of epochs, and both with noise of one level on the shared values.
``figure2_{arcene,madelon,gisette}.{png,json}``
    The paper's figure 2 (wide features, gisette 2000 | 2000 | 1000). gisette is often not
    available; arcene (10,000 features, 100 rows: :math:`d_m > N`, split 4000 | 4000 | 2000)
    and madelon (500 features, 200 | 200 | 100) stand in, each set that is present is run.
``figure3_{a9a,arcene}.{png,json}``
    The paper's figure 3: test log loss per iteration of the paper mechanism at several noise
    levels :math:`\sigma` against the local-only and centralised baselines, labelled with the
    epsilon the paper's Theorem 1 / Corollary 1 formula gives each level (``paper_epsilon``;
    not a privacy guarantee, see below).
``frontier_a9a.{png,json}``
    Beyond the paper: the ``sound`` mechanism (every bound enforced, sample-level DP) on a9a
    at total :math:`\varepsilon \in \{0.5, \dots, 64\}`, :math:`\delta = 10^{-5}`, three
    seeds each; median and min-max of the final test log loss, and the smallest epsilon
    whose median beats the local-only model.
``summary.md``, ``summary.json``
    Tables of the key numbers, skipped data sets, notes and the file names.

Decisions (the paper leaves them open; they are also recorded in the JSON files):

* **Features.** Every party scales each of its rows to unit l2 norm (Assumption 1.3 of the
  paper, which the paper mechanism enforces anyway) and every method (ADMM, SGD, baselines)
  sees the same scaled blocks, so curves and baselines are comparable. The dense NIPS 2003
  sets are first standardised per column with training-set statistics; each party can do
  that on its own columns, nothing is shared.
* **Regularisation.** a9a: the paper's :math:`\lambda = 10^{-4}` (averaged objective
  :math:`\frac1N \sum_i \ell_i + \lambda \sum_m \tfrac12\|x_m\|^2`). arcene
  :math:`10^{-3}` and madelon :math:`3 \cdot 10^{-3}`: the best 5-fold cross-validated log
  loss of the centralised model on the training rows over
  :math:`\{10^{-1}, 3\cdot10^{-2}, \dots, 10^{-4}\}`. gisette (not available when this was
  written) :math:`10^{-3}`, untuned.
* **ADMM penalty.** a9a (two parties): the default :math:`\rho = 1/4` (the logistic
  loss's smoothness bound). Three parties: :math:`\rho = 1/2`; at :math:`1/4` the parallel
  x-updates of arcene drift apart after a few iterations (the primal residual grows again).
* **SGD.** Batch 64, the learning rate :math:`\eta_0` picked from a small grid by the lowest
  final *training* objective (never the test data); its noisy variant adds the same
  :math:`\sigma` to every shared prediction as the ADMM variant adds to every shared score.
* **Noise levels.** The paper does not state its levels. Under the paper mechanism the noise
  on the shared scores has standard deviation :math:`\sigma`; on a9a (32,561 rows)
  :math:`\sigma \le 1` barely moves the model, so its levels are larger than arcene's
  (100 rows).
* **Epsilon of the paper mechanism.** Theorem 1 read backwards gives the per-iteration
  epsilon of a level :math:`\sigma`; Corollary 1 composes it over the iterations (with
  :math:`\delta' = \delta/2`). For realistic levels that figure overflows floating point,
  so the JSON also carries its base-10 logarithm, and the PLD epsilon of the same Gaussian
  releases with Lemma 1's :math:`C` as the sensitivity. All of them are the paper's formulas
  (keys ``paper_*``), not guarantees: Lemma 1 needs the noisy models in the ball of radius
  :math:`b_1` (the noise is unbounded) and :math:`\lambda_{\min}(D_m^\top D_m) \ge d_m`
  (false on arcene, :math:`d_m > N`); each run's ``paper_epsilon_reason`` says why.

Execution: the runs of an experiment are independent (each has its own seed) and go to the
``executor`` of :func:`run_vertical_reproduction` at once, if one is given: figure 1 / 2's exact
and noisy ADMM with the SGD learning-rate grid, then its noisy SGD (at the rate the grid
picked); figure 3's levels; the frontier's epsilons and seeds. The experiments follow one
another, and the baselines are fitted in this process. The files are the same with or without
an executor, but for the wall-clock ``seconds``.

Failure semantics: every file is written atomically (a temporary file in the output folder,
then :func:`os.replace`), so a file that exists is complete. An experiment writes its JSON
and PNG only after all of its runs and its figure are done. If a run fails, the experiments
finished before it keep their complete files, no temporary or half-written file remains, and
``summary.md`` / ``summary.json`` are not written: they are written last and mark a complete
run. Files from an earlier run in the same folder are not deleted.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError
from dpfed.data import (
    load_dataset,
    normalize_rows,
    standardize_apply,
    standardize_fit,
    vertical_split,
)
from dpfed.estimators.baselines import fit_centralized, fit_local_only
from dpfed.experiments.plotting_vertical import (
    plot_frontier,
    plot_noise_levels,
    plot_training_curves,
)
from dpfed.experiments.report import ReportTemplate, fmt, summary_markdown
from dpfed.experiments.runner import (
    Reproduction,
    data_folder,
    stopwatch,
    subsample_rows,
    without_runs,
)
from dpfed.protocols.vertical.calibration import sound_defaults
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical
from dpfed.protocols.vertical_sgd import train_vertical_sgd

#: The prose of the report (summary.md and the notes).
REPORT = ReportTemplate("vertical.md")
#: What every output says of the paper mechanism's epsilon figures.
PAPER_EPSILON_NOTE = REPORT.paragraph("note-paper-epsilon")

#: Where the named sets come from, for the "skipped" notes.
_SOURCES = {
    "a9a": "LIBSVM binary data sets, https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/"
    "binary.html#a9a (files a9a/a9a and a9a/a9a.t)",
    "arcene": "NIPS 2003 feature selection challenge, UCI id 167 "
    "(files arcene/arcene_{train,valid}.{data,labels})",
    "madelon": "NIPS 2003 feature selection challenge, UCI id 171 "
    "(files madelon/madelon_{train,valid}.{data,labels})",
    "gisette": "NIPS 2003 feature selection challenge, UCI id 170 "
    "(files gisette/gisette_{train,valid}.{data,labels})",
}


@dataclass(frozen=True)
class DatasetPlan:
    """How one data set is split, scaled and regularised.

    Attributes
    ----------
    name : str
        Registry name (:func:`dpfed.data.load_dataset`).
    split : tuple of int
        Feature block widths, the label holder's first.
    lam : float
        Weight of :math:`\\tfrac12\\|x\\|^2` in the averaged objective.
    lam_choice : str
        How ``lam`` was chosen.
    standardize : bool
        Standardise the (dense) columns with training statistics before scaling rows.
    noise_sigma : float
        Noise level of the noisy variants in figures 1 and 2.
    noise_levels : tuple of float
        The paper mechanism's levels of figure 3.
    rho : float or None
        ADMM penalty (summed form); ``None``:
        :class:`~dpfed.protocols.vertical.driver.VerticalConfig`'s default (the loss's
        smoothness bound, 1/4 for logistic).
    unit_rows : bool
        Scale each party's rows to unit norm for every method. a9a keeps the LIBSVM features
        as they are (the paper's preprocessing; its baselines 0.3494 / 0.3238 are on them);
        the privacy mechanisms still normalise or clip rows themselves.
    """

    name: str
    split: tuple[int, ...]
    lam: float
    lam_choice: str
    standardize: bool
    noise_sigma: float
    noise_levels: tuple[float, ...]
    rho: float | None = None
    unit_rows: bool = True


_CV_NOTE = "best 5-fold CV log loss of the centralised model on the training rows"
# Three parties: with the default rho = 1/4 the parallel x-updates drift apart on arcene (the
# primal residual grows again after iteration 8 and the objective rises); rho = 1/2 converges.
_RHO_3 = 0.5
DATASETS: dict[str, DatasetPlan] = {
    "a9a": DatasetPlan(
        "a9a",
        (66, 57),
        1e-4,
        "the paper's value",
        False,
        10.0,
        (1.0, 10.0, 30.0, 100.0),
        unit_rows=False,
    ),
    "arcene": DatasetPlan(
        "arcene", (4000, 4000, 2000), 1e-3, _CV_NOTE, True, 0.5, (0.01, 0.1, 0.5, 1.0), rho=_RHO_3
    ),
    "madelon": DatasetPlan(
        "madelon", (200, 200, 100), 3e-3, _CV_NOTE, True, 0.5, (0.01, 0.1, 0.5, 1.0), rho=_RHO_3
    ),
    "gisette": DatasetPlan(
        "gisette",
        (2000, 2000, 1000),
        1e-3,
        "untuned (data absent when chosen)",
        True,
        0.5,
        (0.01, 0.1, 0.5, 1.0),
        rho=_RHO_3,
    ),
}


@dataclass(frozen=True)
class ReproductionPlan:
    """Sizes of one reproduction run (:func:`full_plan` or :func:`quick_plan`)."""

    quick: bool
    figure1: tuple[str, ...]
    figure2: tuple[str, ...]
    figure3: tuple[str, ...]
    frontier: tuple[str, ...]
    iterations: int
    sgd_epochs: int
    sgd_learning_rates: tuple[float, ...]
    sgd_batch_size: int
    noise_iterations: int
    frontier_epsilons: tuple[float, ...]
    frontier_seeds: tuple[int, ...]
    frontier_delta: float
    frontier_accountant: str
    paper_delta: float = 1e-5
    max_train_rows: int | None = None
    max_test_rows: int | None = None
    noise_levels: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    seed: int = 0

    def levels(self, name: str) -> tuple[float, ...]:
        """Figure 3's noise levels of a data set."""
        return tuple(self.noise_levels.get(name, DATASETS[name].noise_levels))


def full_plan() -> ReproductionPlan:
    """The configuration of ``dpfed reproduce vertical`` (about 5-10 minutes on 2 cores)."""
    return ReproductionPlan(
        quick=False,
        figure1=("a9a",),
        figure2=("gisette", "arcene", "madelon"),
        figure3=("a9a", "arcene"),
        frontier=("a9a",),
        iterations=25,
        sgd_epochs=25,
        sgd_learning_rates=(0.25, 1.0, 4.0, 16.0),
        sgd_batch_size=64,
        noise_iterations=20,
        frontier_epsilons=(0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0),
        frontier_seeds=(0, 1, 2),
        frontier_delta=1e-5,
        frontier_accountant="pld",
    )


def quick_plan() -> ReproductionPlan:
    """A small configuration for tests and smoke runs (well under 30 seconds).

    Rows are subsampled (3,000 train / 1,500 test at most), a few iterations, two noise
    levels, two epsilons and two seeds on the frontier, and the RDP accountant (the PLD
    accountant's calibration takes seconds per epsilon).
    """
    return ReproductionPlan(
        quick=True,
        figure1=("a9a",),
        figure2=("arcene",),
        figure3=("a9a",),
        frontier=("a9a",),
        iterations=5,
        sgd_epochs=5,
        sgd_learning_rates=(1.0,),
        sgd_batch_size=64,
        noise_iterations=5,
        frontier_epsilons=(2.0, 16.0),
        frontier_seeds=(0, 1),
        frontier_delta=1e-5,
        frontier_accountant="rdp",
        max_train_rows=3000,
        max_test_rows=1500,
        noise_levels={"a9a": (10.0, 100.0), "arcene": (0.1, 1.0)},
    )


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class PreparedData:
    """One data set, split among parties and scaled, ready for every method."""

    name: str
    blocks: list
    y: np.ndarray
    test_blocks: list
    y_test: np.ndarray
    plan: DatasetPlan
    preprocessing: str
    source: str

    def describe(self) -> dict:
        return {
            "name": self.name,
            "n_train": int(self.y.shape[0]),
            "n_test": int(self.y_test.shape[0]),
            "n_features": int(sum(self.plan.split)),
            "split": list(self.plan.split),
            "lam": self.plan.lam,
            "lam_choice": self.plan.lam_choice,
            "rho": self.plan.rho,
            "preprocessing": self.preprocessing,
            "source": self.source,
        }


def _unit_rows(blocks: list) -> list:
    return [normalize_rows(b) for b in blocks]


def prepare_dataset(name: str, base: Path, plan: ReproductionPlan) -> PreparedData:
    """Load, (subsample,) standardise, split and row-normalise one data set."""
    spec = DATASETS[name]
    ds = load_dataset(name, base)
    X, y, Xt, yt = ds.X_train, ds.y_train, ds.X_test, ds.y_test
    X, y, Xt, yt, subsampled = subsample_rows(
        X,
        y,
        Xt,
        yt,
        max_train_rows=plan.max_train_rows,
        max_test_rows=plan.max_test_rows,
        seed=plan.seed,
    )
    steps = [subsampled] if subsampled else []
    if spec.standardize:
        X = X.toarray() if sp.issparse(X) else X
        Xt = Xt.toarray() if sp.issparse(Xt) else Xt
        mean, scale = standardize_fit(X)
        X, Xt = standardize_apply(X, mean, scale), standardize_apply(Xt, mean, scale)
        steps.append(
            "columns standardised with training mean and standard deviation (constants "
            "computed from the private rows, as the paper's experiments do: no epsilon here "
            "covers them)"
        )
    blocks = vertical_split(X, list(spec.split))
    test_blocks = vertical_split(Xt, list(spec.split))
    if spec.unit_rows:
        blocks, test_blocks = _unit_rows(blocks), _unit_rows(test_blocks)
        steps.append("each party's rows scaled to unit l2 norm (Assumption 1.3)")
    else:
        steps.append("features as published (binary one-hot); mechanisms scale rows themselves")
    return PreparedData(
        name=name,
        blocks=blocks,
        y=np.asarray(y, float),
        test_blocks=test_blocks,
        y_test=np.asarray(yt, float),
        plan=spec,
        preprocessing="; ".join(steps),
        source=ds.source,
    )


class _DataCache:
    """Loads each data set once; a set whose folder is missing is skipped with a note."""

    def __init__(self, base: Path, plan: ReproductionPlan) -> None:
        self.base, self.plan = base, plan
        self._data: dict[str, PreparedData] = {}
        self.skipped: dict[str, str] = {}
        self._baselines: dict[str, dict] = {}

    def available(self, name: str) -> bool:
        if name in self.skipped:
            return False
        if name in self._data:
            return True
        folder = self.base / name
        if not folder.is_dir():
            self.skipped[name] = (
                f"folder {str(folder)!r} not found; {name} skipped. Get it from "
                f"{_SOURCES.get(name, 'its upstream source')}."
            )
            return False
        return True

    def get(self, name: str) -> PreparedData:
        if name not in self._data:
            self._data[name] = prepare_dataset(name, self.base, self.plan)
        return self._data[name]

    def loaded(self) -> dict[str, PreparedData]:
        return dict(self._data)

    def baselines(self, name: str) -> dict:
        """Local-only and centralised logistic regression on the same scaled blocks.

        Always computed here, never on an executor: the fits run with the process's BLAS
        threads, and their last digits on the dense sets depend on that count (an executor's
        worker may use one thread).
        """
        if name not in self._baselines:
            data = self.get(name)
            out = {}
            for key, fit, label in (
                ("local_only", fit_local_only, "local only (label holder's features)"),
                ("centralized", fit_centralized, "centralised (all features)"),
            ):
                res = fit(
                    data.blocks,
                    data.y,
                    lam=data.plan.lam,
                    test_blocks=data.test_blocks,
                    test_labels=data.y_test,
                )
                out[key] = {k: v for k, v in res.items() if k != "coef"} | {"label": label}
            self._baselines[name] = out
        return self._baselines[name]


# ---------------------------------------------------------------------------------------------
# Runs


def _admm(
    data: PreparedData,
    *,
    iterations: int,
    mechanism: str = "none",
    noise_sigma: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    accountant: str = "pld",
    seed: int = 0,
) -> dict:
    cfg = VerticalConfig(
        lam=data.plan.lam,
        rho=data.plan.rho,
        iterations=iterations,
        mechanism=mechanism,
        noise_sigma=noise_sigma,
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        seed=seed,
        fit_intercept=False,  # the paper's model has none
    )
    result = train_vertical(
        data.blocks, data.y, cfg, test_blocks=data.test_blocks, test_labels=data.y_test
    )
    out = result.to_json()
    if mechanism == "paper":
        out["paper_epsilon"] = _paper_epsilon_digest(result)
    return out


def _log10_advanced_composition(eps: Sequence[float], delta_prime: float) -> float:
    r""":math:`\log_{10}` of :math:`\sqrt{2\ln(1/\delta')\sum_t\varepsilon_t^2} +
    \sum_t \varepsilon_t (e^{\varepsilon_t} - 1)`, finite where the value itself overflows."""
    e = np.asarray([x for x in eps if x > 0], dtype=float)
    if e.size == 0:
        return -math.inf
    first = 0.5 * math.log(2.0 * math.log(1.0 / delta_prime)) + 0.5 * math.log(float(np.sum(e * e)))
    # log(e_t (e^{e_t} - 1)) = log e_t + e_t + log(1 - e^{-e_t})
    terms = np.log(e) + e + np.log(-np.expm1(-e))
    second = float(np.logaddexp.reduce(terms))
    return float(np.logaddexp(first, second)) / math.log(10.0)


def _paper_epsilon_digest(result) -> dict:
    """The paper's Theorem 1 / Corollary 1 epsilon of a paper-mechanism run (max over
    parties): the paper's formula, not a guarantee (``certified`` is False)."""
    privacy = result.privacy
    cfg = result.config
    delta_prime = cfg.delta / 2
    per_party = privacy.get("per_party", {})
    steps = [p.get("epsilon_step") for p in per_party.values() if p.get("epsilon_step")]
    log10 = max(
        _log10_advanced_composition(
            [float(e.epsilon) for e in result.ledger.events(name) if e.epsilon is not None],
            delta_prime,
        )
        for name in per_party
    )
    corollary = privacy.get("paper_epsilon")
    return {
        "noise_sigma": cfg.noise_sigma,
        "iterations": cfg.iterations,
        "delta_total": cfg.delta,
        "delta_step": cfg.delta / (2 * cfg.iterations),
        "delta_prime": delta_prime,
        "certified": False,
        "paper_epsilon_step_max": max(steps) if steps else None,
        "paper_epsilon_step_per_party": {n: p.get("epsilon_step") for n, p in per_party.items()},
        "paper_epsilon": corollary if corollary is not None and math.isfinite(corollary) else None,
        "log10_paper_epsilon": log10,
        "paper_epsilon_pld": privacy.get("paper_epsilon_pld"),
        "paper_epsilon_reason": list(privacy.get("paper_epsilon_reason", [])),
    }


def _sgd(
    data: PreparedData,
    *,
    epochs: int,
    learning_rate: float,
    batch_size: int,
    noise_sigma: float = 0.0,
    seed: int = 0,
) -> dict:
    res = train_vertical_sgd(
        data.blocks,
        data.y,
        lam=data.plan.lam,
        learning_rate=learning_rate,
        epochs=epochs,
        batch_size=batch_size,
        noise_sigma=noise_sigma,
        seed=seed,
        test_blocks=data.test_blocks,
        test_labels=data.y_test,
    )
    return {
        "history": res["history"],
        "final": res["final"],
        "learning_rate": learning_rate,
        "batch_size": batch_size,
        "noise_sigma": noise_sigma,
        "seed": seed,
    }


def _final_objective(run: Mapping[str, Any]) -> float:
    value = run["final"].get("train_objective")
    return float(value) if value is not None and math.isfinite(value) else math.inf


def _brief(run: Mapping[str, Any]) -> dict:
    final = run.get("final", {})
    return {
        k: final.get(k) for k in ("train_objective", "test_log_loss", "test_accuracy", "iteration")
    }


#: The functions a :class:`_Run` can name, each taking the data set first.
_RUNNERS: dict[str, Callable[..., dict]] = {"admm": _admm, "sgd": _sgd}


@dataclass(frozen=True)
class _Run:
    """One run of an experiment, independent of every other (it carries its own seed).

    Attributes
    ----------
    kind : str
        ``"admm"`` (:func:`_admm`) or ``"sgd"`` (:func:`_sgd`).
    description : str
        The progress bar's text once the run is done.
    options : mapping
        The keyword arguments of the run's function.
    """

    kind: str
    description: str
    options: Mapping[str, Any] = field(default_factory=dict)


def _perform(data: PreparedData, run: _Run) -> dict:
    """Train ``run`` on ``data``: a module-level function, so that
    ``functools.partial(_perform, data)`` can go to another process."""
    return _RUNNERS[run.kind](data, **run.options)


def _describe(run: _Run) -> str:
    return run.description


# ---------------------------------------------------------------------------------------------
# Experiments


@dataclass
class _Context:
    plan: ReproductionPlan
    data: _DataCache
    run: Reproduction
    notes: list[str] = field(default_factory=list)
    #: One ``partial(_perform, data)`` per data set, the same object for every experiment, so
    #: an executor that sends each object once (by ``id``) sends each data set once.
    _performers: dict[str, functools.partial[dict]] = field(
        default_factory=dict, init=False, repr=False
    )

    def step(self, description: str) -> None:
        self.run.step(description)

    def map(self, name: str, runs: Sequence[_Run]) -> list[dict]:
        """The results of ``runs`` on the data set ``name``, in order, through the
        reproduction's executor if it has one (:meth:`Reproduction.map`)."""
        if name not in self._performers:
            self._performers[name] = functools.partial(_perform, self.data.get(name))
        return self.run.map(self._performers[name], runs, describe=_describe)


def training_curves_experiment(ctx: _Context, figure: str, name: str) -> dict:
    """Figures 1 and 2: ADMM vs SGD per epoch, exact and with noise of one level."""
    elapsed = stopwatch()
    plan, data = ctx.plan, ctx.data.get(name)
    sigma = data.plan.noise_sigma
    head = f"figure {figure} {name}"
    sgd = {"epochs": plan.sgd_epochs, "batch_size": plan.sgd_batch_size, "seed": plan.seed}
    # first the runs that need nothing: exact ADMM, the SGD grid, noisy ADMM
    first = ctx.map(
        name,
        [
            _Run("admm", f"{head}: ADMM", {"iterations": plan.iterations}),
            *(
                _Run("sgd", f"{head}: SGD lr={lr:g}", {**sgd, "learning_rate": lr})
                for lr in plan.sgd_learning_rates
            ),
            _Run(
                "admm",
                f"{head}: ADMM σ={sigma:g}",
                {
                    "iterations": plan.iterations,
                    "mechanism": "paper",
                    "noise_sigma": sigma,
                    "delta": plan.paper_delta,
                    "seed": plan.seed,
                },
            ),
        ],
    )
    candidates = first[1:-1]
    best = min(candidates, key=_final_objective)
    # then noisy SGD at the learning rate the grid picked; the baselines here (see
    # _DataCache.baselines)
    (sgd_noisy,) = ctx.map(
        name,
        [
            _Run(
                "sgd",
                f"{head}: SGD σ={sigma:g}",
                {
                    **sgd,
                    "learning_rate": best["learning_rate"],
                    "noise_sigma": sigma,
                },
            )
        ],
    )
    baselines = ctx.data.baselines(name)
    ctx.step(f"{head}: baselines")
    runs: dict[str, dict] = {
        "admm": first[0] | {"label": "ADMM sharing"},
        "sgd": best | {"label": f"vertical SGD (FDML, lr {best['learning_rate']:g})"},
        "admm_noisy": first[-1] | {"label": f"ADMM sharing, paper mechanism σ={sigma:g}"},
        "sgd_noisy": sgd_noisy | {"label": f"vertical SGD, noise σ={sigma:g}"},
    }
    payload = {
        "figure": figure,
        "dataset": data.describe(),
        "epochs": plan.iterations,
        "noise_sigma": sigma,
        "sgd_learning_rate_grid": list(plan.sgd_learning_rates),
        "sgd_learning_rate_choice": "lowest final training objective over the grid",
        "sgd_grid": [{"learning_rate": c["learning_rate"], **_brief(c)} for c in candidates],
        "final": {key: _brief(run) for key, run in runs.items()},
        "baselines": baselines,
        "runs": runs,
        "seconds": elapsed(),
    }
    n = data.describe()
    title = (
        f"Figure {figure}: {name}, {n['n_train']} train / {n['n_test']} test rows, "
        f"{n['n_features']} features split {'|'.join(map(str, data.plan.split))}, "
        f"λ={data.plan.lam:g}"
    )
    return ctx.run.emit(
        f"figure{figure}_{name}",
        payload,
        lambda: plot_training_curves(runs, title=title, baselines=baselines),
    )


def noise_levels_experiment(ctx: _Context, name: str) -> dict:
    """Figure 3: test log loss per iteration at several paper-mechanism noise levels."""
    elapsed = stopwatch()
    plan, data = ctx.plan, ctx.data.get(name)
    sigmas = plan.levels(name)
    exact, *levels = ctx.map(
        name,
        [
            _Run("admm", f"figure 3 {name}: no noise", {"iterations": plan.noise_iterations}),
            *(
                _Run(
                    "admm",
                    f"figure 3 {name}: σ={sigma:g}",
                    {
                        "iterations": plan.noise_iterations,
                        "mechanism": "paper",
                        "noise_sigma": sigma,
                        "delta": plan.paper_delta,
                        "seed": plan.seed,
                    },
                )
                for sigma in sigmas
            ),
        ],
    )
    exact["label"] = "no noise"
    for sigma, run in zip(sigmas, levels, strict=True):
        digest = run["paper_epsilon"]
        run["label"] = (
            f"σ={sigma:g}  (paper's ε′ = {_format_log10(digest['log10_paper_epsilon'])}, "
            "not a guarantee)"
        )
    baselines = ctx.data.baselines(name)
    table = [
        {
            "noise_sigma": r["paper_epsilon"]["noise_sigma"],
            **_brief(r),
            **{k: v for k, v in r["paper_epsilon"].items() if k != "noise_sigma"},
        }
        for r in levels
    ]
    payload = {
        "figure": "3",
        "dataset": data.describe(),
        "iterations": plan.noise_iterations,
        "mechanism": "paper",
        "delta": plan.paper_delta,
        "no_noise": _brief(exact),
        "levels": table,
        "baselines": baselines,
        "privacy_notes": levels[0]["privacy"].get("notes", []) if levels else [],
        "paper_epsilon_note": PAPER_EPSILON_NOTE,
        "runs": {
            "no_noise": exact,
            **{f"sigma={r['paper_epsilon']['noise_sigma']:g}": r for r in levels},
        },
        "seconds": elapsed(),
    }
    title = (
        f"Figure 3: {name}, test log loss of DP ADMM sharing (paper mechanism, "
        f"T={plan.noise_iterations}, δ={plan.paper_delta:g});\n"
        "ε′ = the paper's Theorem 1 + Corollary 1 formula (not a privacy guarantee)"
    )
    return ctx.run.emit(
        f"figure3_{name}",
        payload,
        lambda: plot_noise_levels([exact, *levels], title=title, baselines=baselines),
    )


def _format_log10(log10: float | None) -> str:
    if log10 is None or not math.isfinite(log10):
        return "n/a"
    if log10 < 4:
        return f"{10**log10:.3g}"
    return f"1e{log10:.0f}" if log10 < 1e4 else f"10^{log10:.3g}"


def frontier_iterations(epsilon: float, n_samples: int) -> int:
    """Rounds of the sound mechanism at total ``epsilon``: the public rule
    :func:`dpfed.protocols.vertical.calibration.sound_defaults` (a function of epsilon and N
    only)."""
    return sound_defaults(epsilon, n_samples).iterations


def frontier_experiment(ctx: _Context, name: str) -> dict:
    """Sound mechanism: final test log loss against the total epsilon, over seeds."""
    elapsed = stopwatch()
    plan, data = ctx.plan, ctx.data.get(name)
    baselines = ctx.data.baselines(name)
    local = baselines["local_only"]["test_log_loss"]
    iterations = {eps: frontier_iterations(eps, data.y.shape[0]) for eps in plan.frontier_epsilons}
    results = iter(
        ctx.map(
            name,
            [
                _Run(
                    "admm",
                    f"frontier {name}: ε={eps:g} seed {seed}",
                    {
                        "iterations": iterations[eps],
                        "mechanism": "sound",
                        "epsilon": eps,
                        "delta": plan.frontier_delta,
                        "accountant": plan.frontier_accountant,
                        "seed": seed,
                    },
                )
                for eps in plan.frontier_epsilons
                for seed in plan.frontier_seeds
            ],
        )
    )
    rows, runs = [], {}
    for eps in plan.frontier_epsilons:
        iters = iterations[eps]
        finals, accs, spent = [], [], []
        for seed in plan.frontier_seeds:
            run = next(results)
            runs[f"epsilon={eps:g},seed={seed}"] = run
            finals.append(run["final"]["test_log_loss"])
            accs.append(run["final"]["test_accuracy"])
            spent.append(run["privacy"]["epsilon"])
        rows.append(
            {
                "epsilon": eps,
                "epsilon_spent_max": max(spent),
                "iterations": iters,
                "seeds": list(plan.frontier_seeds),
                "test_log_loss": finals,
                "median": float(np.median(finals)),
                "min": float(np.min(finals)),
                "max": float(np.max(finals)),
                "test_accuracy_median": float(np.median(accs)),
                "beats_local_only": bool(np.median(finals) < local),
            }
        )
    beating = [r["epsilon"] for r in rows if r["beats_local_only"]]
    first = next(iter(runs.values()), None)
    payload = {
        "experiment": "frontier",
        "dataset": data.describe(),
        "mechanism": "sound",
        "delta": plan.frontier_delta,
        "accountant": plan.frontier_accountant,
        "config": first["config"] if first else None,
        "privacy_notes": first["privacy"].get("notes", []) if first else [],
        "rows": rows,
        "baselines": baselines,
        "smallest_epsilon_beating_local_only": min(beating) if beating else None,
        "runs": runs,
        "seconds": elapsed(),
    }
    title = (
        f"Privacy-utility frontier on {name}: DP ADMM sharing, sound mechanism\n"
        f"(δ={plan.frontier_delta:g}, {len(plan.frontier_seeds)} seeds, "
        f"{plan.frontier_accountant.upper()} accountant)"
    )
    return ctx.run.emit(
        f"frontier_{name}", payload, lambda: plot_frontier(rows, title=title, baselines=baselines)
    )


# ---------------------------------------------------------------------------------------------
# Summary


def _summary_markdown(summary: dict) -> str:
    """The reproduction's summary in markdown: its data sets, then one section per figure."""
    mode = "quick (subsampled, few iterations)" if summary["quick"] else "full"
    sections = [REPORT.render("head", mode=mode, seconds=f"{summary['seconds']:.1f}")]
    sections.append(
        REPORT.render(
            "datasets",
            rows=[
                REPORT.render(
                    "dataset-row",
                    name=d["name"],
                    n_train=d["n_train"],
                    n_test=d["n_test"],
                    split=" \\| ".join(map(str, d["split"])),
                    lam=f"{d['lam']:g}",
                    lam_choice=d["lam_choice"],
                    rho=fmt(d["rho"]) if d["rho"] else "1/4",
                    preprocessing=d["preprocessing"],
                )
                for d in summary["datasets"].values()
            ],
        )
    )
    if summary["skipped"]:
        sections.append(
            REPORT.render(
                "skipped",
                items=[
                    REPORT.render("skipped-item", name=k, reason=v)
                    for k, v in summary["skipped"].items()
                ],
            )
        )
    sections += _curves_sections(summary) + _noise_sections(summary)
    sections += _frontier_sections(summary)
    return summary_markdown(sections, summary)


def _curves_sections(summary: dict) -> list[str]:
    """The training curves' section (none without that figure)."""
    sections: list[str] = []
    curves = summary["figures"].get("training_curves", [])
    if curves:
        rows = []
        for fig in curves:
            cells = {"figure": fig["figure"], "dataset": fig["dataset"]["name"]}
            for run in fig["runs"].values():
                f = run["final"]
                rows.append(
                    REPORT.render(
                        "curves-row",
                        method=run["label"],
                        epochs=fmt(f.get("iteration")),
                        objective=fmt(f.get("train_objective")),
                        log_loss=fmt(f.get("test_log_loss")),
                        accuracy=fmt(f.get("test_accuracy")),
                        **cells,
                    )
                )
            for base in fig["baselines"].values():
                rows.append(
                    REPORT.render(
                        "curves-baseline-row",
                        label=base["label"],
                        objective=fmt(base["train_objective"]),
                        log_loss=fmt(base["test_log_loss"]),
                        accuracy=fmt(base["test_accuracy"]),
                        **cells,
                    )
                )
        sections.append(REPORT.render("curves", rows=rows))
    return sections


def _noise_sections(summary: dict) -> list[str]:
    """The noise levels' section (none without that figure)."""
    sections: list[str] = []
    noise = summary["figures"].get("noise_levels", [])
    if noise:
        rows = []
        for fig in noise:
            ds = fig["dataset"]["name"]
            rows.append(
                REPORT.render(
                    "noise-exact-row",
                    dataset=ds,
                    iterations=fig["iterations"],
                    log_loss=fmt(fig["no_noise"]["test_log_loss"]),
                    accuracy=fmt(fig["no_noise"]["test_accuracy"]),
                )
            )
            for row in fig["levels"]:
                rows.append(
                    REPORT.render(
                        "noise-row",
                        dataset=ds,
                        sigma=f"{row['noise_sigma']:g}",
                        iterations=row["iterations"],
                        delta=f"{row['delta_total']:g}",
                        epsilon_step=fmt(row["paper_epsilon_step_max"]),
                        epsilon_total=_format_log10(row["log10_paper_epsilon"]),
                        epsilon_pld=fmt(row["paper_epsilon_pld"]),
                        log_loss=fmt(row["test_log_loss"]),
                        accuracy=fmt(row["test_accuracy"]),
                    )
                )
            for base in fig["baselines"].values():
                rows.append(
                    REPORT.render(
                        "noise-baseline-row",
                        dataset=ds,
                        label=base["label"],
                        log_loss=fmt(base["test_log_loss"]),
                        accuracy=fmt(base["test_accuracy"]),
                    )
                )
        sections.append(REPORT.render("noise", paper_epsilon_note=PAPER_EPSILON_NOTE, rows=rows))
    return sections


def _frontier_sections(summary: dict) -> list[str]:
    """One section per privacy frontier figure."""
    sections: list[str] = []
    for fig in summary["figures"].get("frontier", []):
        base = fig["baselines"]
        smallest = fig["smallest_epsilon_beating_local_only"]
        sections.append(
            REPORT.render(
                "frontier",
                dataset=fig["dataset"]["name"],
                delta=f"{fig['delta']:g}",
                accountant=fig["accountant"].upper(),
                seeds=str(fig["rows"][0]["seeds"] if fig["rows"] else []),
                local_only=fmt(base["local_only"]["test_log_loss"]),
                centralized=fmt(base["centralized"]["test_log_loss"]),
                rows=[
                    REPORT.render(
                        "frontier-row",
                        epsilon=f"{r['epsilon']:g}",
                        spent=fmt(r["epsilon_spent_max"]),
                        iterations=r["iterations"],
                        median=fmt(r["median"]),
                        min=fmt(r["min"]),
                        max=fmt(r["max"]),
                        accuracy=fmt(r["test_accuracy_median"]),
                        beats="yes" if r["beats_local_only"] else "no",
                    )
                    for r in fig["rows"]
                ],
                smallest=f"**{smallest:g}**" if smallest is not None else "**none** (null)",
            )
        )
    return sections


def _key_numbers(figures: Mapping[str, list[dict]]) -> dict:
    out: dict[str, Any] = {"final_test_log_loss": {}, "noise_to_paper_epsilon": {}, "frontier": {}}
    for fig in figures.get("training_curves", []):
        ds = fig["dataset"]["name"]
        out["final_test_log_loss"][ds] = {
            **{k: v["test_log_loss"] for k, v in fig["final"].items()},
            **{k: v["test_log_loss"] for k, v in fig["baselines"].items()},
        }
    for fig in figures.get("noise_levels", []):
        out["noise_to_paper_epsilon"][fig["dataset"]["name"]] = [
            {
                k: row[k]
                for k in (
                    "noise_sigma",
                    "certified",
                    "paper_epsilon_step_max",
                    "paper_epsilon",
                    "log10_paper_epsilon",
                    "paper_epsilon_pld",
                    "test_log_loss",
                )
            }
            for row in fig["levels"]
        ]
    for fig in figures.get("frontier", []):
        out["frontier"][fig["dataset"]["name"]] = {
            "rows": [{k: r[k] for k in ("epsilon", "median", "min", "max")} for r in fig["rows"]],
            "smallest_epsilon_beating_local_only": fig["smallest_epsilon_beating_local_only"],
            "local_only": fig["baselines"]["local_only"]["test_log_loss"],
            "centralized": fig["baselines"]["centralized"]["test_log_loss"],
        }
    return out


# ---------------------------------------------------------------------------------------------
# Entry point


def _count_runs(plan: ReproductionPlan, cache: _DataCache) -> int:
    total = 0
    for name in plan.figure1 + plan.figure2:
        if cache.available(name):
            total += 4 + len(plan.sgd_learning_rates)
    for name in plan.figure3:
        if cache.available(name):
            total += 1 + len(plan.levels(name))
    for name in plan.frontier:
        if cache.available(name):
            total += len(plan.frontier_epsilons) * len(plan.frontier_seeds)
    return total


def _dedupe(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def run_vertical_reproduction(
    out_dir: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    quick: bool = False,
    progress: bool = False,
    executor: Executor | None = None,
) -> dict:
    """Rerun the experiments of Hu et al. (AAAI 2020) and write figures, JSON and a summary.

    Parameters
    ----------
    out_dir : str or os.PathLike
        Output folder, created if missing. Receives ``figure1_a9a``, ``figure2_<set>``,
        ``figure3_<set>`` and ``frontier_a9a`` (each a ``.png`` and the ``.json`` behind it),
        then ``summary.md`` and ``summary.json``.
    data_dir : str or os.PathLike or None, default None
        Folder holding ``a9a/``, ``arcene/``, ``madelon/``, ``gisette/`` (``None``: the
        ``DPFED_DATA`` environment variable). A set whose folder is missing is skipped and
        listed in the summary.
    quick : bool, default False
        Small configuration (:func:`quick_plan`): subsampled rows, few iterations, finishes in
        well under 30 seconds. The full run (:func:`full_plan`) takes several minutes.
    progress : bool, default False
        Show a progress bar over the runs when standard error is a terminal.
    executor : concurrent.futures.Executor or None, default None
        Runs the independent runs of each experiment at once (e.g. a
        :class:`dpfed.engines.tasks.RayExecutor` over a cluster, or a process pool); the data
        set of the runs travels once per data set, in a :func:`functools.partial`. Default:
        one run after another in this process. Every run is seeded on its own, so the files
        are the same either way but for their wall-clock ``seconds``.

    Returns
    -------
    dict
        The content of ``summary.json``: ``out_dir``, ``quick``, ``files`` (names written,
        in order), ``figures`` (per experiment kind, the JSON payloads without their
        per-run histories), ``key_numbers``, ``datasets``, ``skipped`` (name -> reason),
        ``notes`` and ``seconds``.

    Raises
    ------
    DpfedInputError
        If matplotlib is missing (``pip install "dpfed[plot]"``), no data folder is given or
        it holds none of the data sets, or a present data set is malformed.

    Notes
    -----
    Every file is written atomically; if a run fails, the experiments finished before it keep
    their complete files, nothing half-written or temporary remains, and the summaries (written
    last) are absent. See the module docstring for the experimental decisions.
    """
    run = Reproduction("vertical", out_dir, progress=progress, executor=executor)
    plan = quick_plan() if quick else full_plan()
    base = data_folder(
        data_dir,
        command="vertical",
        reads="a9a, arcene, madelon and gisette",
        holding="a9a/a9a and a9a/a9a.t (and arcene/, madelon/, gisette/ for figure 2)",
    )
    cache = _DataCache(base, plan)
    wanted = _dedupe(plan.figure1 + plan.figure2 + plan.figure3 + plan.frontier)
    if not any(cache.available(name) for name in wanted):
        raise DpfedInputError(
            f"the data folder {str(base)!r} holds none of {', '.join(wanted)}. Expected e.g. "
            "a9a/a9a and a9a/a9a.t from " + _SOURCES["a9a"] + "."
        )
    ctx = _Context(plan=plan, data=cache, run=run)
    figures: dict[str, list[dict]] = {"training_curves": [], "noise_levels": [], "frontier": []}
    with run.running(_count_runs(plan, cache)):
        for figure, names in (("1", plan.figure1), ("2", plan.figure2)):
            for name in names:
                if cache.available(name):
                    figures["training_curves"].append(training_curves_experiment(ctx, figure, name))
        for name in plan.figure3:
            if cache.available(name):
                figures["noise_levels"].append(noise_levels_experiment(ctx, name))
        for name in plan.frontier:
            if cache.available(name):
                figures["frontier"].append(frontier_experiment(ctx, name))
    summary: dict[str, Any] = {
        "quick": plan.quick,
        "plan": {k: v for k, v in plan.__dict__.items() if k != "noise_levels"}
        | {"noise_levels": {n: list(plan.levels(n)) for n in _dedupe(plan.figure3)}},
        "datasets": {n: d.describe() for n, d in cache.loaded().items()},
        "skipped": dict(cache.skipped),
        "figures": {k: [without_runs(p) for p in v] for k, v in figures.items()},
        "key_numbers": _key_numbers(figures),
        "notes": _notes(figures, plan),
    }
    return run.finish(summary, lambda s: _summary_markdown({**s, "figures": figures}))


def _notes(figures: Mapping[str, list[dict]], plan: ReproductionPlan) -> list[str]:
    notes = [REPORT.paragraph(key) for key in ("note-blocks", "note-start", "note-noisy-sgd")]
    paper_notes = {
        n
        for fig in figures.get("noise_levels", [])
        for n in fig["privacy_notes"]
        if not n.startswith(("label:", "party"))
    }
    notes += sorted(paper_notes)
    if figures.get("noise_levels"):
        notes.append(PAPER_EPSILON_NOTE)
        notes.append(REPORT.paragraph("note-corollary1"))
    for fig in figures.get("frontier", []):
        notes += [n for n in fig["privacy_notes"] if n not in notes]
    if any(f["dataset"]["name"] == "madelon" for f in figures.get("training_curves", [])):
        notes.append(REPORT.paragraph("note-madelon"))
    if plan.quick:
        notes.append(REPORT.paragraph("note-quick"))
    return notes
