r"""Noise calibration of the one or two Gaussian releases of DP Bayesian linear regression.

The last release is always the sufficient statistics. Before it, on the same data, comes at
most one more release with a share :math:`s` of the budget:

* with projection (Algorithm 2): the marginal moments for the standard deviations, which with
  centring also carry the column sums for the DP means
  (:mod:`dpfed.protocols.bayes_linreg.centring`), share
  ``std_share``;
* without projection but with centring: the column sums alone, share ``centre_share``;
* neither (the paper's algorithm without projection): no first release.

Each release :math:`t` adds Gaussian noise of standard deviation
:math:`\sigma_t = z_t \Delta_t` (its *noise multiplier* :math:`z_t` times its :math:`\ell_2`
sensitivity; for the distributed and input-perturbation modes this is the noise that protects
a row, see :mod:`dpfed.protocols.bayes_linreg.aggregation`). Two calibrations:

``"paper"``
    The classical Gaussian mechanism (Dwork & Roth, Thm 3.22; the paper's eq. 1) with basic
    composition: release :math:`t` gets :math:`(\varepsilon_t, \delta_t)`, with
    :math:`(\varepsilon_1, \delta_1) = s (\varepsilon, \delta)` and
    :math:`(\varepsilon_2, \delta_2) = (1-s)(\varepsilon, \delta)` (the split of the paper's
    released code, :math:`s = 0.3`), and

    .. math:: z_t = \sqrt{2 \ln(1.25/\delta_t)} / \varepsilon_t .

    The theorem is proved only for :math:`\varepsilon_t < 1`; for larger values the formula is
    not a guarantee (for one release at :math:`\delta = 10^{-4}` and
    :math:`\varepsilon = 31.6` the exact epsilon of that noise is about 53). A note says so,
    and ``epsilon_accounted`` reports the exact epsilon of the noise actually added.
``"tight"`` (default)
    The exact Gaussian mechanism: :math:`z` from
    :func:`dpfed.privacy.accounting.calibrate_noise_multiplier` (PLD accountant, one step),
    the smallest multiplier whose privacy loss distribution gives :math:`(\varepsilon,
    \delta)`. With two releases both are calibrated **jointly**: the adaptive
    composition of Gaussian mechanisms with multipliers :math:`z_1, z_2` is exactly a Gaussian
    mechanism with :math:`z^{-2} = z_1^{-2} + z_2^{-2}` (Gaussian differential privacy, Dong,
    Roth & Su 2019, Cor. 3.3), so the budget is split in :math:`z^{-2}`:

    .. math:: z_1 = z / \sqrt{s}, \qquad z_2 = z / \sqrt{1 - s},

    and the pair is :math:`(\varepsilon, \delta)`-DP exactly as one release with :math:`z`
    would be. ``epsilon_accounted`` recomputes it (:func:`exact_epsilon`).

Neighbouring data sets differ in one row (replace-one), matching the sensitivities of
:mod:`dpfed.protocols.bayes_linreg.sufficient_stats`; for a single Gaussian release the (epsilon,
delta) curve
as a function of :math:`\sigma/\Delta` is the same under either neighbouring relation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from dpfed._validation import DpfedInputError, check_int, check_open_unit, check_positive
from dpfed.privacy.accounting import (
    analytic_gaussian_epsilon,
    calibrate_noise_multiplier,
    gaussian_releases_epsilon,
)
from dpfed.privacy.coupling import calibration_delta, epsilon_with_coupling

__all__ = ["CALIBRATIONS", "ReleaseCalibration", "calibrate_releases", "exact_epsilon"]

#: Calibrations :func:`calibrate_releases` knows.
CALIBRATIONS = ("tight", "paper")


@dataclass(frozen=True)
class ReleaseCalibration:
    """Noise multipliers of the releases for a total budget ``(epsilon, delta)``.

    Attributes
    ----------
    calibration : str
        ``"tight"`` or ``"paper"``.
    epsilon, delta : float
        The total budget.
    first_share : float or None
        Share :math:`s` of the budget for the first release (``None``: one release).
    noise_multipliers : tuple of float
        :math:`z_t = \\sigma_t / \\Delta_t`, in release order (the first release, if any, then
        the sufficient statistics).
    release_budgets : tuple of (float, float) or None
        ``"paper"``: each release's :math:`(\\varepsilon_t, \\delta_t)`. ``"tight"``: ``None``
        (the releases are not given separate budgets; their composition is exact).
    composition : str
        How the releases compose to the total.
    epsilon_accounted : float
        Exact epsilon at the total delta of the noise added (:func:`exact_epsilon`).
    paper_epsilon : float or None
        ``"paper"``: the budget as the paper states it (the ``epsilon`` asked for). ``epsilon``
        is then the larger of it and ``epsilon_accounted``, so no figure dpfed prints as the
        guarantee is below the exact epsilon of the noise added. ``"tight"``: ``None``.
    notes : tuple of str
    first_release : str or None
        What the first release holds (``None``: one release).
    """

    calibration: str
    epsilon: float
    delta: float
    first_share: float | None
    noise_multipliers: tuple[float, ...]
    release_budgets: tuple[tuple[float, float], ...] | None
    composition: str
    epsilon_accounted: float
    notes: tuple[str, ...] = field(default=())
    first_release: str | None = None
    paper_epsilon: float | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        return {
            "calibration": self.calibration,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "first_release": self.first_release,
            "first_share": self.first_share,
            "noise_multipliers": list(self.noise_multipliers),
            "release_budgets": None
            if self.release_budgets is None
            else [list(b) for b in self.release_budgets],
            "composition": self.composition,
            "epsilon_accounted": self.epsilon_accounted,
            "paper_epsilon": self.paper_epsilon,
            "notes": list(self.notes),
        }


def calibrate_releases(
    epsilon: float,
    delta: float,
    *,
    projection: bool,
    std_share: float = 0.3,
    calibration: str = "tight",
    centre: bool = False,
    centre_share: float = 0.3,
    coordinates: int = 0,
    accountant: str = "pld",
) -> ReleaseCalibration:
    r"""Noise multipliers of the one or two Gaussian releases (see the module docstring).

    Parameters
    ----------
    epsilon : float
        Total epsilon > 0.
    delta : float
        Total delta in (0, 1).
    projection : bool
        Two releases (moments, then statistics) instead of one.
    std_share : float, default 0.3
        Share :math:`s \in (0, 1)` of the budget for the moments release (projection only).
    calibration : {"tight", "paper"}, default "tight"
        See the module docstring.
    centre : bool, default False
        Centre by DP means (:mod:`dpfed.protocols.bayes_linreg.centring`). With projection the sums
        ride in the
        moments release (no extra release); without, they are a first release of their own.
    centre_share : float, default 0.3
        Share :math:`s \in (0, 1)` of the budget for the sums (centring without projection).
    coordinates : int, default 0
        Coordinates the releases draw from the exact grid sampler, in all (the trusted and
        input modes): their coupling's delta (:mod:`dpfed.privacy.coupling`) is set aside
        before calibrating and included in ``epsilon_accounted``.
    accountant : {"pld", "rdp"}, default "pld"
        ``"rdp"`` for releases whose honest accounting is Rényi DP: the distributed mode's
        exact noise in the secure sum's ring (the distributed discrete Gaussian, whose privacy
        loss distribution is not the continuous one's). ``"tight"`` then calibrates the
        one-release multiplier by RDP (and a relative :math:`10^{-9}` more, for the bound's
        :math:`\tau` terms, below :math:`10^{-60}` at the ring's scale) and
        ``epsilon_accounted`` is the releases' RDP figure; the fit replaces it by the figure
        of the ring noise actually added.

    Returns
    -------
    ReleaseCalibration
        Results are cached by the arguments (the PLD calibration takes about a second).
    """
    eps = check_positive("epsilon", epsilon)
    dlt = check_open_unit("delta", delta)
    if calibration not in CALIBRATIONS:
        raise DpfedInputError(f"calibration must be one of {CALIBRATIONS}. Found {calibration!r}.")
    if projection:
        share: float | None = check_open_unit("std_share", std_share)
        first = (
            "marginal moments and column sums (projection and centring)"
            if centre
            else "marginal moments (projection)"
        )
    elif centre:
        share = check_open_unit("centre_share", centre_share)
        first = "column sums (centring)"
    else:
        share = first = None
    if accountant not in ("pld", "rdp"):
        raise DpfedInputError(f"accountant must be 'pld' or 'rdp'. Found {accountant!r}.")
    return _calibrate(
        eps,
        dlt,
        share,
        calibration,
        first,
        check_int("coordinates", coordinates, minimum=0),
        accountant,
    )


@lru_cache(maxsize=256)
def _tight_multiplier(eps: float, dlt: float, accountant: str = "pld") -> float:

    z = float(calibrate_noise_multiplier(eps, dlt, 1, accountant=accountant))
    return z if accountant == "pld" else z * (1.0 + 1e-9)


def exact_epsilon(noise_multipliers: tuple[float, ...], delta: float) -> float:
    r"""Exact epsilon at ``delta`` of Gaussian releases with these noise multipliers.

    Gaussian mechanisms compose exactly to one with :math:`z^{-2} = \sum_t z_t^{-2}`; its
    epsilon is the analytic Gaussian mechanism's (Balle & Wang 2018,
    ``dp_accounting.get_epsilon_gaussian``), which the PLD accountant approximates from above.

    Parameters
    ----------
    noise_multipliers : tuple of float
        :math:`z_t > 0`.
    delta : float
        In (0, 1).

    Returns
    -------
    float
    """
    z = 1.0 / math.sqrt(math.fsum(1.0 / (float(v) ** 2) for v in noise_multipliers))
    return analytic_gaussian_epsilon(z, delta)


@lru_cache(maxsize=256)
def _calibrate(
    eps: float,
    dlt: float,
    share: float | None,
    calibration: str,
    first: str | None,
    coordinates: int = 0,
    accountant: str = "pld",
) -> ReleaseCalibration:
    notes: list[str] = []
    if calibration == "tight":
        z = _tight_multiplier(eps, calibration_delta(dlt, coordinates, eps), accountant)
        if share is None:
            zs: tuple[float, ...] = (z,)
            composition = (
                "one Gaussian release calibrated exactly (PLD accountant)"
                if accountant == "pld"
                else "one release calibrated by Renyi DP (the distributed discrete "
                "Gaussian's bound)"
            )
        else:
            zs = (z / math.sqrt(share), z / math.sqrt(1.0 - share))
            composition = (
                f"two Gaussian releases ({first}, then the sufficient statistics) calibrated "
                "jointly: z1^-2 + z2^-2 = z^-2 with z the "
                + ("exact (PLD)" if accountant == "pld" else "Renyi-DP")
                + f" one-release multiplier for the total budget, split {share:g} : "
                f"{1 - share:g} in z^-2 (Gaussian composition is exact"
                + (")" if accountant == "pld" else " in Renyi DP too)")
            )
        budgets: tuple[tuple[float, float], ...] | None = None
    else:
        if share is None:
            budgets = ((eps, dlt),)  # one release
            composition = "one release, classical Gaussian mechanism"
        else:
            budgets = ((share * eps, share * dlt), ((1 - share) * eps, (1 - share) * dlt))
            composition = (
                f"two releases ({first}, then the sufficient statistics), classical Gaussian "
                f"mechanism each, basic composition of {share:g} and {1 - share:g} of both "
                "epsilon and delta"
            )
        zs = tuple(math.sqrt(2.0 * math.log(1.25 / d_t)) / e_t for e_t, d_t in budgets)
        big = [e_t for e_t, _ in budgets if e_t >= 1.0]
        if big:
            notes.append(
                "the paper's classical Gaussian calibration sqrt(2 ln(1.25/delta)) Delta / "
                "epsilon is a proven (epsilon, delta) guarantee only for epsilon < 1 per "
                f"release; here a release has epsilon = {', '.join(f'{e:.4g}' for e in big)}, "
                "so the stated budget is not guaranteed (see epsilon_accounted for the exact "
                "epsilon of the noise added)"
            )
    if accountant == "rdp":
        accounted = gaussian_releases_epsilon(list(zs), dlt, "rdp")
    else:
        accounted = epsilon_with_coupling(
            lambda dd: exact_epsilon(zs, dd),
            dlt,
            coordinates,
            fallback=lambda: gaussian_releases_epsilon(list(zs), dlt, "rdp"),
        )
    epsilon = eps
    if calibration == "tight" and accounted > eps:  # the coupling too large: RDP reported
        epsilon = float(accounted)
        notes.append(
            f"the exact sampler's coupling over {coordinates} coordinates is too large at "
            f"epsilon {eps:g}: the RDP figure {accounted:.4g} is privacy.epsilon"
        )
    if calibration == "paper" and accounted > eps * (1 + 1e-6):
        epsilon = float(accounted)
        notes.append(
            f"the exact epsilon of the noise added is {accounted:.4g} at delta = {dlt:g}, "
            f"more than the stated {eps:g}: privacy.epsilon is {accounted:.4g}, the stated "
            "budget is kept as privacy.paper_epsilon"
        )
    return ReleaseCalibration(
        calibration=calibration,
        epsilon=epsilon,
        paper_epsilon=eps if calibration == "paper" else None,
        delta=dlt,
        first_share=share,
        noise_multipliers=tuple(float(z) for z in zs),
        release_budgets=budgets,
        composition=composition,
        epsilon_accounted=float(accounted),
        notes=tuple(notes),
        first_release=first,
    )
