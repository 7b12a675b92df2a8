r"""Synthetic client vectors for benchmarks: bounded uniform, generated block by block.

:class:`UniformClients` is a picklable block callable (see :mod:`dpfed.dca.source`): the
vectors of a block of consecutive clients ``start .. stop - 1`` are uniform on
:math:`[-c, c)`, drawn from one generator ``Generator(SFC64(SeedSequence(seed,
spawn_key=(start, stop))))`` (a generator per client would cost more to seed than the secure
sum of a short vector costs to compute). The values therefore depend on the block
boundaries, which is harmless for timing (the secure sum does the same work whatever the
values are) and reproducible for a given block size.

The secure sum times the calls to its block source (``timing["values"]`` of
:class:`dpfed.dca.secure_sum.SecureSumResult`), so the synthesis time is reported separately.
"""

from __future__ import annotations

import numpy as np

from dpfed._validation import check_int, check_positive

__all__ = ["UniformClients"]


class UniformClients:
    """Block callable giving bounded uniform client vectors (see the module docstring).

    Parameters
    ----------
    dim : int
        :math:`D`.
    bound : float, default 1.0
        :math:`c`: values are uniform on :math:`[-c, c)`.
    seed : int, default 0
        Seed of the values (not of any noise).
    """

    def __init__(self, dim: int, bound: float = 1.0, seed: int = 0) -> None:
        self.dim = check_int("dim", dim, minimum=1)
        self.bound = check_positive("bound", bound)
        self.seed = check_int("seed", seed, minimum=0)

    def __call__(self, start: int, stop: int) -> np.ndarray:
        """Vectors of clients ``start .. stop - 1``, shape (stop - start, D), float64."""
        gen = np.random.Generator(
            np.random.SFC64(np.random.SeedSequence(self.seed, spawn_key=(start, stop)))
        )
        out = gen.random((stop - start, self.dim))
        out *= 2.0 * self.bound
        out -= self.bound
        return out
