r"""Noisy sums of per-client vectors: the four aggregation settings of the paper's experiments.

Every client :math:`i = 1..N` holds one data row and so one vector :math:`z_i \in
\mathbb{R}^D`; the learner needs :math:`\sum_i z_i` with Gaussian noise such that the noise
protecting any one row has standard deviation at least :math:`\sigma_{std}` (the Gaussian
mechanism's, :math:`\sigma_{std} = z \Delta_2`, see
:mod:`dpfed.protocols.bayes_linreg.calibration`):

``"nonprivate"``
    :math:`\sum_i z_i`, no noise.
``"trusted"``
    A trusted aggregator sees every :math:`z_i` and releases
    :math:`\sum_i z_i + \eta`, :math:`\eta \sim \mathcal N(0, \sigma_{std}^2 I)`.
``"distributed"``
    The paper's Algorithm 1 (DCA): each client adds
    :math:`\eta_i \sim \mathcal N(0, \sigma_{std}^2/(N - T - 1)\, I)` to its own vector and
    the noisy vectors are summed by the secure sum :func:`dpfed.dca.secure_sum` (secret
    shares to ``compute_nodes`` compute nodes; no single node sees a client's value). Any
    :math:`N - T - 1` honest clients' noise already has variance :math:`\sigma_{std}^2`
    (Theorem 1), so the release stays private if up to :math:`T` clients collude or drop
    out, and if one of the clients is the attacker; the total noise variance is
    :math:`\sigma_{std}^2 N / (N - T - 1)`.

    With the default secure sum, a sensitivity and one :math:`\sigma_{std}` for every
    coordinate, the noise is exact and lives in the secure sum's ring: each client rounds
    :math:`z_i 2^f` and adds :math:`\mathcal N_{\mathbb Z}(0, s^2)`,
    :math:`s = \sigma_c 2^f (1 + \sqrt D/(\Delta_2 2^f))` rounded up (:class:`RingRelease`;
    the factor pays for the rounding, which moves a neighbour's sum by up to
    :math:`\sqrt D` more ring units), so the :math:`N - T - 1` honest clients' noise has
    multiplier at least :math:`\sigma_{std}/\Delta_2` in ring units; the release is
    accounted by the distributed discrete Gaussian's RDP bound
    (:func:`dpfed.privacy.discrete_accounting.distributed_discrete_releases_epsilon`).
``"input"``
    Input perturbation, the paper's baseline (its section 4: each client "uses a trusted
    aggregator DP technique separately"): each client releases its own
    :math:`z_i + \eta_i`, :math:`\eta_i \sim \mathcal N(0, \sigma_{std}^2 I)`, private on its
    own without any secure sum; the sum then carries noise of variance :math:`N
    \sigma_{std}^2`.

All randomness comes from the ``rng`` argument.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_positive
from dpfed.dca import secure_sum
from dpfed.dca.calibration import dca_client_std
from dpfed.dca.discrete_noise import ring_sigma2
from dpfed.dca.fixedpoint import DEFAULT_FRACTIONAL_BITS
from dpfed.privacy.gaussian import GaussianRelease

__all__ = [
    "MODES",
    "NoisySum",
    "RingRelease",
    "distributed_client_std",
    "noisy_sum",
    "takes_ring_noise",
]


@dataclass(frozen=True)
class RingRelease:
    r"""The exact noise of a distributed release in the secure sum's ring, for its accounting.

    Attributes
    ----------
    client_std : float
        :math:`\sigma_c (1 + \sqrt D / (\Delta_2 2^f))`, each client's noise in real units
        (what the secure sum is given).
    sigma2 : int
        :math:`s^2 = \lceil (client\_std \cdot 2^f)^2 \rceil` in ring units.
    honest : int
        :math:`N - T - 1`, the clients whose noise the accounting counts.
    grid_sensitivity : float
        :math:`\Delta_2 2^f + \sqrt D`, the encoded sum's sensitivity in ring units.
    dim : int
        :math:`D`.
    fractional_bits : int
        :math:`f`.
    """

    client_std: float
    sigma2: int
    honest: int
    grid_sensitivity: float
    dim: int
    fractional_bits: int

    @classmethod
    def for_sum(
        cls,
        sigma_std: float,
        l2_sensitivity: float,
        n_clients: int,
        tolerated: int,
        dim: int,
        fractional_bits: int = DEFAULT_FRACTIONAL_BITS,
    ) -> RingRelease:
        r"""The ring noise whose honest part has multiplier at least
        :math:`\sigma_{std}/\Delta_2` in ring units."""
        honest = n_clients - tolerated - 1
        if honest < 1:
            raise DpfedInputError(
                f"the distributed mode needs N - T - 1 >= 1. Found N = {n_clients}, "
                f"T = {tolerated}."
            )
        scaled = math.ldexp(l2_sensitivity, fractional_bits)
        client = sigma_std / math.sqrt(honest) * (1.0 + math.sqrt(dim) / scaled)
        return cls(
            client,
            ring_sigma2(client, fractional_bits),
            honest,
            scaled + math.sqrt(dim),
            dim,
            fractional_bits,
        )

    def as_tuple(self) -> tuple[int, int, float, int]:
        """``(sigma2, honest, grid_sensitivity, dim)`` for the accountant."""
        return self.sigma2, self.honest, self.grid_sensitivity, self.dim


#: Aggregation settings, see the module docstring.
MODES = ("nonprivate", "trusted", "distributed", "input")

#: Signature of a secure-sum implementation: ``aggregate(values, *, noise_std, compute_nodes,
#: tolerated, rng)`` returning an object whose ``total`` is the (D,) noisy sum.
Aggregate = Callable[..., Any]


@dataclass(frozen=True, eq=False)
class NoisySum:
    """A released noisy sum.

    Attributes
    ----------
    total : numpy.ndarray, shape (D,)
        :math:`\\sum_i z_i` plus the mode's noise.
    mode : str
    sigma_std : numpy.ndarray or None, shape (D,)
        The Gaussian mechanism's standard deviation per coordinate (``None`` without noise).
    client_std : numpy.ndarray or None, shape (D,)
        Standard deviation each client adds (``distributed``, ``input``), else ``None``.
    total_std : numpy.ndarray, shape (D,)
        Standard deviation of the noise in ``total`` (zeros for ``nonprivate``).
    n_clients : int
    ring : RingRelease or None
        The exact ring noise of a ``distributed`` release through the default secure sum.
    """

    total: np.ndarray
    mode: str
    sigma_std: np.ndarray | None
    client_std: np.ndarray | None
    total_std: np.ndarray
    n_clients: int
    ring: RingRelease | None = None


def distributed_client_std(
    sigma_std: np.ndarray | float, n_clients: int, tolerated: int = 0
) -> np.ndarray:
    r"""Per-client noise standard deviation of the distributed Gaussian mechanism (Theorem 1).

    .. math:: \sigma_j = \sigma_{std,j} / \sqrt{N - T - 1}

    (:func:`dpfed.dca.calibration.dca_client_std`).

    Parameters
    ----------
    sigma_std : float or numpy.ndarray of shape (D,)
    n_clients : int
        :math:`N`.
    tolerated : int, default 0
        :math:`T`, the colluding or dropped clients tolerated; needs :math:`N - T - 1 \ge 1`.

    Returns
    -------
    numpy.ndarray, shape () or (D,)
    """

    return np.asarray(dca_client_std(sigma_std, n_clients, tolerated), dtype=np.float64)


def takes_ring_noise(aggregate: Aggregate | None) -> bool:
    """Whether a secure-sum implementation adds the exact ring noise: the default one does,
    and so does any that takes ``noise`` and ``fractional_bits`` keywords (as
    :func:`dpfed.dca.secure_sum` does); it is then called with ``noise="discrete"``."""
    if aggregate is None:
        return True
    try:
        params = inspect.signature(aggregate).parameters
    except (TypeError, ValueError):
        return False
    return "noise" in params and "fractional_bits" in params


def _default_secure_sum() -> Aggregate:

    return secure_sum


def _checked_sigma(sigma_std: float | np.ndarray | None, mode: str, dim: int) -> np.ndarray:
    """``sigma_std`` broadcast to shape (D,), checked finite and >= 0."""
    if sigma_std is None:
        raise DpfedInputError(f"sigma_std is needed for mode {mode!r}. Found None.")
    sigma = np.broadcast_to(np.asarray(sigma_std, dtype=np.float64), (dim,)).copy()
    if not np.all(np.isfinite(sigma)) or np.any(sigma < 0):
        raise DpfedInputError(f"sigma_std must be finite and >= 0. Found {sigma_std!r}.")
    return sigma


def _one_positive_sigma(sigma: np.ndarray) -> bool:
    """Whether ``sigma`` is one positive standard deviation for every coordinate."""
    return sigma[0] > 0 and bool(np.all(sigma == sigma[0]))


def _central_sum(
    z: np.ndarray,
    mode: str,
    sigma: np.ndarray,
    rng: np.random.Generator,
    l2_sensitivity: float | None,
) -> NoisySum:
    """The ``trusted`` or ``input`` release (exactly on a grid when it can be accounted)."""
    n, dim = z.shape
    release = None
    if l2_sensitivity is not None and _one_positive_sigma(sigma):
        sens = check_positive("l2_sensitivity", l2_sensitivity)
        release = GaussianRelease.from_multiplier("sum", sens, float(sigma[0]) / sens)
    if mode == "trusted":
        if release is not None:
            total = release.noisy(rng, z.sum(axis=0))
        else:
            total = z.sum(axis=0) + rng.normal(0.0, 1.0, dim) * sigma
        return NoisySum(total, mode, sigma, None, sigma, n)
    if release is not None:
        noisy = release.noisy(rng, z)
    else:
        noisy = z + rng.normal(0.0, 1.0, (n, dim)) * sigma
    return NoisySum(noisy.sum(axis=0), mode, sigma, sigma, sigma * np.sqrt(n), n)


def _distributed_sum(
    z: np.ndarray,
    sigma: np.ndarray,
    rng: np.random.Generator,
    compute_nodes: int,
    tolerated: int,
    aggregate: Aggregate | None,
    l2_sensitivity: float | None,
) -> NoisySum:
    """The ``distributed`` release through a secure sum (exact ring noise when it can)."""
    n, dim = z.shape
    mode = "distributed"
    client = distributed_client_std(sigma, n, tolerated)
    compute_nodes = check_int("compute_nodes", compute_nodes, minimum=1)
    if takes_ring_noise(aggregate) and l2_sensitivity is not None and _one_positive_sigma(sigma):
        sens = check_positive("l2_sensitivity", l2_sensitivity)
        ring = RingRelease.for_sum(float(sigma[0]), sens, n, int(tolerated), dim)
        result = (aggregate or _default_secure_sum())(
            z,
            noise_std=ring.client_std,
            compute_nodes=compute_nodes,
            tolerated=int(tolerated),
            rng=rng,
            noise="discrete",
            fractional_bits=ring.fractional_bits,
        )
        client = np.full(dim, ring.client_std)
        return NoisySum(
            np.asarray(result.total, dtype=np.float64),
            mode,
            sigma,
            client,
            client * np.sqrt(n),
            n,
            ring,
        )
    secure_sum = aggregate if aggregate is not None else _default_secure_sum()
    # per-coordinate (or unaccounted) noise: the continuous Gaussian its accounting assumes
    floats = {"noise": "gaussian"} if takes_ring_noise(aggregate) else {}
    result = secure_sum(
        z,
        noise_std=client,
        compute_nodes=compute_nodes,
        tolerated=int(tolerated),
        rng=rng,
        **floats,
    )
    total = np.asarray(result.total, dtype=np.float64)
    if total.shape != (dim,):
        raise DpfedInputError(
            f"the secure sum must return a total of shape ({dim},). Found {total.shape}."
        )
    return NoisySum(total, mode, sigma, client, client * np.sqrt(n), n)


def noisy_sum(
    values: np.ndarray,
    *,
    mode: str,
    sigma_std: float | np.ndarray | None,
    rng: np.random.Generator,
    compute_nodes: int = 10,
    tolerated: int = 0,
    aggregate: Aggregate | None = None,
    l2_sensitivity: float | None = None,
) -> NoisySum:
    r"""Sum the clients' vectors in one of the :data:`MODES`.

    With ``l2_sensitivity`` (:math:`\Delta_2`) and one ``sigma_std`` for every coordinate, the
    ``trusted`` and ``input`` modes draw their noise exactly on a power-of-two grid
    (:meth:`dpfed.privacy.gaussian.GaussianRelease.noisy` at multiplier
    :math:`\sigma_{std}/\Delta_2`: a standard deviation at least :math:`\sigma_{std}`),
    accounted with the coupling's delta of :mod:`dpfed.privacy.coupling`, and the
    ``distributed`` mode through the default secure sum (or one that
    :func:`takes_ring_noise`) draws it exactly in the ring (:class:`RingRelease`); otherwise
    (another ``aggregate``, per-coordinate ``sigma_std``) the noise is drawn in floating
    point.

    Parameters
    ----------
    values : numpy.ndarray, shape (N, D)
        Row :math:`i` is client :math:`i`'s vector :math:`z_i`.
    mode : {"nonprivate", "trusted", "distributed", "input"}
    sigma_std : float or numpy.ndarray of shape (D,) or None
        The Gaussian mechanism's standard deviation :math:`\sigma_{std}` (ignored and may be
        ``None`` for ``nonprivate``).
    rng : numpy.random.Generator
        Source of all noise (and of the secure sum's random shares).
    compute_nodes : int, default 10
        :math:`M`, compute nodes of the secure sum (``distributed``).
    tolerated : int, default 0
        :math:`T` (``distributed``).
    aggregate : callable or None
        Secure-sum implementation for ``distributed``, called as
        ``aggregate(values, noise_std=..., compute_nodes=..., tolerated=..., rng=...)`` and
        returning an object with a ``total`` of shape (D,). ``None``: :func:`dpfed.dca.secure_sum`.
    l2_sensitivity : float or None
        :math:`\Delta_2` of one client's vector, for the exact sampler (see above).

    Returns
    -------
    NoisySum
    """
    if mode not in MODES:
        raise DpfedInputError(f"mode must be one of {MODES}. Found {mode!r}.")
    if not isinstance(rng, np.random.Generator):
        raise DpfedInputError(f"rng must be a numpy.random.Generator. Found {rng!r}.")
    z = np.asarray(values, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] == 0:
        raise DpfedInputError(f"values must be (N, D) with N >= 1. Found shape {z.shape}.")
    n, dim = z.shape
    if mode == "nonprivate":
        return NoisySum(z.sum(axis=0), mode, None, None, np.zeros(dim), n)
    sigma = _checked_sigma(sigma_std, mode, dim)
    if mode == "distributed":
        return _distributed_sum(z, sigma, rng, compute_nodes, tolerated, aggregate, l2_sensitivity)
    return _central_sum(z, mode, sigma, rng, l2_sensitivity)
