r"""Each client's Gaussian noise, reproducible per client from the run's seed.

In the distributed Gaussian mechanism client :math:`i` adds
:math:`\eta_i \sim \mathcal N(0, \operatorname{diag}(\sigma_j^2))` to its vector before
secret sharing it. The simulation draws :math:`\eta_i` from a generator of its own, derived
from the run's noise seed :math:`s` (a 128-bit integer) and the client index :math:`i` only:

.. math::

    G_i = \texttt{Generator(SFC64(SeedSequence(}s\texttt{, spawn\_key=(}i\texttt{,))))},
    \qquad \eta_i = \sigma \odot G_i\texttt{.standard\_normal(}D\texttt{)} .

This is numpy's own stream splitting: ``SeedSequence(s, spawn_key=(i,))`` is the ``i``-th
child of ``SeedSequence(s).spawn(...)``, whose hashed states are designed to be independent;
SFC64 ("statistically high quality and very fast", numpy's documentation) needs no jumping
when every stream is seeded this way, and drew normals about 15% faster than PCG64 here.
Because :math:`G_i` depends on nothing else (not on the block of clients it was computed with,
not on the thread or process, not on the other clients), a networked run in which each client
is its own process draws exactly the same :math:`\eta_i` from the same :math:`s` and
:math:`i`, and so produces the same sum. Cost on the development machine: about 12 µs to
build :math:`G_i` and 13-14 ns per normal draw (numpy's ziggurat), i.e. 1.2 s for
:math:`10^5` clients plus about 14 s for :math:`10^9` draws.

**In a deployment the seed must be each client's secret.** Whoever knows :math:`s` and
:math:`i` can recompute :math:`\eta_i` and subtract it from the released sum; a shared seed is
a simulation and testing device only.
"""

from __future__ import annotations

import numpy as np

from dpfed._validation import DpfedInputError, check_int

__all__ = ["client_noise", "client_noise_generator", "noise_seed", "resolve_noise_std"]

_SEED_BITS = 128


def noise_seed(rng: int | np.random.Generator) -> int:
    r"""The run's noise seed :math:`s` from an integer seed or a numpy Generator.

    Parameters
    ----------
    rng : int or numpy.random.Generator
        A non-negative integer is used as :math:`s` itself; a Generator gives
        :math:`s` = 128 bits drawn from it (so the same Generator state gives the same run).

    Returns
    -------
    int
        :math:`s \ge 0`.

    Raises
    ------
    DpfedInputError
        If ``rng`` is neither.
    """
    if isinstance(rng, np.random.Generator):
        return int.from_bytes(rng.bytes(_SEED_BITS // 8), "little")
    if isinstance(rng, bool) or not isinstance(rng, int | np.integer) or int(rng) < 0:
        raise DpfedInputError(
            f"rng must be a numpy.random.Generator or an integer seed >= 0. Found {rng!r}."
        )
    return int(rng)


def client_noise_generator(seed: int, client: int) -> np.random.Generator:
    r"""Client ``client``'s noise generator :math:`G_i` (see the module docstring).

    Parameters
    ----------
    seed : int
        The run's noise seed :math:`s \ge 0` (:func:`noise_seed`).
    client : int
        Client index :math:`i \ge 0`.

    Returns
    -------
    numpy.random.Generator
        ``Generator(SFC64(SeedSequence(seed, spawn_key=(client,))))``.
    """
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed, spawn_key=(client,))))


def resolve_noise_std(noise_std: float | np.ndarray, dim: int) -> tuple[float | None, np.ndarray]:
    """Validate a scalar or per-dimension noise standard deviation.

    Returns
    -------
    scalar : float or None
        The common value if ``noise_std`` is a scalar, else ``None``.
    per_dim : numpy.ndarray, shape (dim,)
        The standard deviation of each dimension.

    Raises
    ------
    DpfedInputError
        If the shape is neither () nor (dim,), or a value is negative or not finite.
    """
    try:
        arr = np.asarray(noise_std, dtype=np.float64)
    except (TypeError, ValueError):
        raise DpfedInputError(
            f"noise_std must be a number or an array of shape ({dim},). Found {noise_std!r}."
        ) from None
    if arr.ndim == 0:
        v = float(arr)
        if not np.isfinite(v) or v < 0:
            raise DpfedInputError(f"noise_std must be finite and >= 0. Found {v!r}.")
        return v, np.full(dim, v)
    if arr.shape != (dim,):
        raise DpfedInputError(
            f"noise_std must be a scalar or have shape ({dim},). Found shape {arr.shape}."
        )
    bad = ~(np.isfinite(arr) & (arr >= 0))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise DpfedInputError(f"noise_std must be finite and >= 0. Found {arr[j]!r} at {j}.")
    return None, arr.copy()


def client_noise(
    seed: int,
    client: int,
    dim: int,
    noise_std: float | np.ndarray,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    r"""Client ``client``'s noise :math:`\eta_i = \sigma \odot G_i.\mathrm{standard\_normal}(D)`.

    This is the noise :func:`dpfed.dca.secure_sum.secure_sum` adds for client ``client`` when
    run with the same seed; a client process can call it on its own.

    Parameters
    ----------
    seed : int
        The run's noise seed :math:`s` (:func:`noise_seed`).
    client : int
        Client index :math:`i \ge 0`.
    dim : int
        :math:`D \ge 1`.
    noise_std : float or numpy.ndarray of shape (D,)
        :math:`\sigma` (scalar or per dimension).
    out : numpy.ndarray of float64, shape (D,), optional
        Receives the noise.

    Returns
    -------
    numpy.ndarray of float64, shape (D,)
    """
    i = check_int("client", client, minimum=0)
    d = check_int("dim", dim, minimum=1)
    scalar, per_dim = resolve_noise_std(noise_std, d)
    buf = np.empty(d) if out is None else out
    client_noise_generator(seed, i).standard_normal(out=buf)
    buf *= scalar if scalar is not None else per_dim
    return buf
