"""scikit-learn style front end of DP Bayesian linear regression
(:mod:`dpfed.protocols.bayes_linreg`).

Every training row is one client's data. ``fit`` runs
:func:`dpfed.protocols.bayes_linreg.fit_dp_linreg`
(clipping to the assumed bounds, centring by DP column means, optional projection, the chosen
aggregation and calibration) and keeps the posterior mean as ``coef_``; ``predict`` is
:math:`(x - m_x)^\\top \\mu + m_y = x^\\top \\mu + b` with the DP means :math:`m` and the
intercept :math:`b = m_y - m_x^\\top \\mu` (:mod:`dpfed.protocols.bayes_linreg.centring`). With
``centre=False`` (the paper's algorithm) there is no intercept and the data must already be
zero-centred.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from dpfed._validation import DpfedInputError
from dpfed.estimators._base import (
    X_PARAMS,
    check_width,
    refuse_fit_params,
    validate_data,
    warn_if_scaled_on_private_rows,
)
from dpfed.protocols.bayes_linreg import fit_dp_linreg


class DPBayesianLinearRegression(RegressorMixin, BaseEstimator):
    """Bayesian linear regression with differentially private sufficient statistics.

    Parameters
    ----------
    epsilon : float, default 1.0
        Total epsilon (ignored with ``mode="nonprivate"``).
    delta : float, default 1e-4
        Total delta (ignored with ``mode="nonprivate"``).
    mode : {"trusted", "distributed", "input", "nonprivate"}, default "trusted"
        Aggregation setting (:mod:`dpfed.protocols.bayes_linreg.aggregation`).
    projection : bool, default False
        Algorithm 2: clip to fractions of private standard deviations.
    bound_x, bound_y : float, default 7.5
        Assumed bounds of every feature and of the target; values are clipped to them.
    calibration : {"tight", "paper"}, default "tight"
        Noise calibration (:mod:`dpfed.protocols.bayes_linreg.calibration`).
    std_share : float, default 0.3
        Share of the budget for the projection's standard deviations (and the column sums
        released with them when centring).
    centre : bool, default True
        Centre by DP column means released with part of the budget; ``False``: the paper's
        algorithm (no intercept).
    centre_share : float, default 0.3
        Share of the budget for the column sums when centring without projection.
    lam, lam0 : float, default 1.0
        Likelihood (noise) precision and prior precision.
    repair : {"abs", "floor"}, default "abs"
        Positive-definiteness repair of the noisy Gram matrix.
    compute_nodes : int, default 10
        Compute nodes of the secure sum (``distributed``).
    tolerated : int, default 0
        Colluding or dropped clients tolerated (``distributed``).
    threshold_repeats : int, default 10
        Repetitions of the projection's auxiliary-data search.
    random_state : int, numpy.random.Generator or None
        Source of the DP noise.
    aggregate : callable or None
        Secure-sum implementation for ``distributed`` (default :func:`dpfed.dca.secure_sum`).

    Attributes
    ----------
    coef_ : numpy.ndarray, shape (n_features,)
        Posterior mean of the weights.
    intercept_ : float
        :math:`m_y - m_x^\\top \\mu` with centring (the DP means), else 0.0.
    means_ : numpy.ndarray or None, shape (n_features + 1,)
        The means the rows were centred by (features, then target), ``None`` without
        centring.
    precision_ : numpy.ndarray, shape (n_features, n_features)
        Posterior precision.
    bounds_ : numpy.ndarray or None, shape (n_features + 1,)
        Clipping bounds of the released statistics (features, then target).
    privacy_ : dict
        Privacy report (epsilon, delta, calibration, releases, notes).
    fit_result_ : dpfed.protocols.bayes_linreg.LinRegFit
    n_features_in_ : int
        Columns of ``X`` in ``fit``.

    Notes
    -----
    ``X`` must be dense: the released statistics are dense moments of the rows. A private
    ``mode`` declares scikit-learn's ``poor_score`` tag: on the few rows of scikit-learn's
    checks the noise dominates the statistics (an R^2 far below 0.5 is expected there).
    """

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float = 1e-4,
        *,
        mode: str = "trusted",
        projection: bool = False,
        bound_x: float = 7.5,
        bound_y: float = 7.5,
        calibration: str = "tight",
        std_share: float = 0.3,
        centre: bool = True,
        centre_share: float = 0.3,
        lam: float = 1.0,
        lam0: float = 1.0,
        repair: str = "abs",
        compute_nodes: int = 10,
        tolerated: int = 0,
        threshold_repeats: int = 10,
        random_state: int | np.random.Generator | None = None,
        aggregate=None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.mode = mode
        self.projection = projection
        self.bound_x = bound_x
        self.bound_y = bound_y
        self.calibration = calibration
        self.std_share = std_share
        self.centre = centre
        self.centre_share = centre_share
        self.lam = lam
        self.lam0 = lam0
        self.repair = repair
        self.compute_nodes = compute_nodes
        self.tolerated = tolerated
        self.threshold_repeats = threshold_repeats
        self.random_state = random_state
        self.aggregate = aggregate

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # With noise, a few hundred rows give no reasonable R^2 (see Notes).
        tags.regressor_tags.poor_score = self.mode != "nonprivate"
        return tags

    def _check_rows(self, n: int) -> None:
        """Refuse fewer rows than the configuration needs before any release is computed."""
        needs = []
        tolerated = self.tolerated
        if (
            self.mode == "distributed"
            and isinstance(tolerated, int | np.integer)
            and not isinstance(tolerated, bool)
            and tolerated >= 0
        ):
            needs.append(
                (
                    int(tolerated) + 2,
                    f"the distributed mode needs N - T - 1 >= 1 (tolerated T = {tolerated})",
                )
            )
        if self.projection and self.mode != "nonprivate":
            needs.append((2, "the projection's threshold search needs N >= 2"))
        for least, why in needs:
            if n < least:
                raise DpfedInputError(
                    f"X has {n} sample(s) (one per client), but {why}: at least {least} rows "
                    "are needed."
                )

    def fit(self, X, y, **fit_params) -> DPBayesianLinearRegression:
        """Fit on the rows ``X`` and targets ``y``, one row per client.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
            Dense rows (the sufficient statistics are dense).
        y : array-like, shape (n_samples,)

        Returns
        -------
        DPBayesianLinearRegression
            ``self``, fitted.
        """
        refuse_fit_params(self, fit_params)
        X, y = validate_data(self, X, y, y_numeric=True, **X_PARAMS)
        self._check_rows(X.shape[0])
        private = self.mode != "nonprivate"
        if private:
            warn_if_scaled_on_private_rows(self, X)
        result = fit_dp_linreg(
            X,
            y,
            epsilon=self.epsilon if private else None,
            delta=self.delta if private else None,
            mode=self.mode,
            projection=self.projection,
            bound_x=self.bound_x,
            bound_y=self.bound_y,
            calibration=self.calibration,
            std_share=self.std_share,
            centre=self.centre,
            centre_share=self.centre_share,
            lam=self.lam,
            lam0=self.lam0,
            repair=self.repair,
            compute_nodes=self.compute_nodes,
            tolerated=self.tolerated,
            threshold_repeats=self.threshold_repeats,
            rng=self.random_state,
            aggregate=self.aggregate,
        )
        self.fit_result_ = result
        self.coef_ = result.coef.copy()
        self.intercept_ = result.intercept
        self.means_ = None if result.centring is None else result.centring.means.copy()
        self.precision_ = result.posterior.precision.copy()
        self.bounds_ = None if result.bounds is None else result.bounds.copy()
        self.privacy_ = result.privacy()
        return self

    def predict(self, X) -> np.ndarray:
        """Posterior predictive means ``X @ coef_ + intercept_``.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        ndarray, shape (n_samples,)
        """
        check_is_fitted(self, "coef_")
        check_width(self, X)
        X = validate_data(self, X, reset=False, **X_PARAMS)
        return X @ self.coef_ + self.intercept_
