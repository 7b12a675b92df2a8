"""DP Bayesian linear regression by sufficient-statistics perturbation (Heikkilä et al. 2017).

One concept per module:

* :mod:`~dpfed.protocols.bayes_linreg.sufficient_stats` -- per-row statistics, clipping,
  sensitivity;
* :mod:`~dpfed.protocols.bayes_linreg.posterior` -- posterior from (noisy) statistics, definiteness
  repair;
* :mod:`~dpfed.protocols.bayes_linreg.calibration` -- noise multipliers of the releases ("tight" or
  "paper");
* :mod:`~dpfed.protocols.bayes_linreg.aggregation` -- non-private, trusted, distributed (secure
  sum) and
  input-perturbation sums;
* :mod:`~dpfed.protocols.bayes_linreg.projection` -- Algorithm 2: private standard deviations and
  thresholds;
* :mod:`~dpfed.protocols.bayes_linreg.centring` -- centring by DP column means;
* :mod:`~dpfed.protocols.bayes_linreg.linreg` -- the whole method, :func:`fit_dp_linreg`.
"""

from __future__ import annotations

from dpfed.protocols.bayes_linreg.aggregation import (
    MODES,
    NoisySum,
    distributed_client_std,
    noisy_sum,
)
from dpfed.protocols.bayes_linreg.calibration import (
    CALIBRATIONS,
    ReleaseCalibration,
    calibrate_releases,
)
from dpfed.protocols.bayes_linreg.centring import (
    PrivateMeans,
    centre_rows,
    estimate_means,
    exact_means,
    first_moment_scale,
    sum_sensitivity,
)
from dpfed.protocols.bayes_linreg.linreg import DEFAULT_BOUND, LinRegFit, fit_dp_linreg
from dpfed.protocols.bayes_linreg.posterior import (
    REPAIRS,
    Posterior,
    mean_absolute_error,
    posterior_from_statistics,
    posterior_means,
    predict,
    repair_gram,
)
from dpfed.protocols.bayes_linreg.projection import (
    FALLBACK_STD,
    THRESHOLD_GRID,
    MarginalStds,
    ThresholdCache,
    ThresholdChoice,
    estimate_marginal_stds,
    search_thresholds,
)
from dpfed.protocols.bayes_linreg.sufficient_stats import (
    clip_to_bounds,
    moment_pair_sensitivity_squared,
    moment_sensitivity,
    n_statistics,
    pack_statistics,
    row_moments,
    row_statistics,
    statistics_sensitivity,
    statistics_sensitivity_squared,
    unpack_statistics,
)

__all__ = [
    "CALIBRATIONS",
    "DEFAULT_BOUND",
    "FALLBACK_STD",
    "MODES",
    "REPAIRS",
    "THRESHOLD_GRID",
    "LinRegFit",
    "MarginalStds",
    "NoisySum",
    "Posterior",
    "PrivateMeans",
    "ReleaseCalibration",
    "ThresholdCache",
    "ThresholdChoice",
    "calibrate_releases",
    "centre_rows",
    "clip_to_bounds",
    "distributed_client_std",
    "estimate_marginal_stds",
    "estimate_means",
    "exact_means",
    "first_moment_scale",
    "fit_dp_linreg",
    "mean_absolute_error",
    "moment_pair_sensitivity_squared",
    "moment_sensitivity",
    "n_statistics",
    "noisy_sum",
    "pack_statistics",
    "posterior_from_statistics",
    "posterior_means",
    "predict",
    "repair_gram",
    "row_moments",
    "row_statistics",
    "search_thresholds",
    "statistics_sensitivity",
    "statistics_sensitivity_squared",
    "sum_sensitivity",
    "unpack_statistics",
]
