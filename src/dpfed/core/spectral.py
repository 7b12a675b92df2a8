r"""Spectral factorisation of a party's Gram matrix, computed once per party.

For a block :math:`D` of shape ``(N, d)`` with thin SVD :math:`D = U S V^\top` (rank ``r``) it
keeps the squared singular values :math:`s^2` and, depending on the shape,

* ``primal`` (:math:`d \le N`): :math:`V` from the eigendecomposition of :math:`D^\top D`
  (``d x d``);
* ``dual`` (:math:`d > N`): :math:`U` from the eigendecomposition of :math:`D D^\top`
  (``N x N``), the cheaper form for wide blocks.

Both the exact L2 x-update (for every ``rho``, so an adaptive penalty costs no new
factorisation) and the noise :math:`\xi \sim N(0, \sigma^2 (D^\top D)^{+})` of the paper's
mechanism are read off this one factorisation.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import scipy.sparse as sp


class GramSpectrum:
    """Eigen-pairs of :math:`D^\\top D` (primal) or :math:`D D^\\top` (dual).

    Parameters
    ----------
    block : ndarray or sparse matrix, shape (N, d)
        The party's feature block.
    """

    def __init__(self, block: np.ndarray | sp.spmatrix) -> None:
        self.block = block
        n, d = block.shape
        self.mode = "primal" if d <= n else "dual"
        if self.mode == "primal":
            gram = block.T @ block
        else:
            gram = block @ block.T
        gram = gram.toarray() if sp.issparse(gram) else np.asarray(gram)
        eigvals, basis = np.linalg.eigh(gram)
        eigvals = np.maximum(eigvals, 0.0)
        self.s2 = eigvals
        self.basis = basis
        cutoff = max(eigvals.max(initial=0.0), 1.0) * max(n, d) * np.finfo(float).eps
        self.rank_mask = eigvals > cutoff
        self.rank = int(self.rank_mask.sum())

    @property
    def max_eigenvalue(self) -> float:
        """Largest eigenvalue of :math:`D^\\top D` (squared spectral norm of the block)."""
        return float(self.s2.max(initial=0.0))

    @property
    def min_eigenvalue(self) -> float:
        """Smallest eigenvalue of :math:`D^\\top D` (0 when ``d > N`` or rank deficient)."""
        if self.mode == "dual" or self.rank < self.block.shape[1]:
            return 0.0
        return float(self.s2.min())

    def pinv_sqrt_apply(self, standard_normal: np.ndarray) -> np.ndarray:
        r"""Map :math:`g \sim N(0, I_r)` to :math:`\xi` with covariance :math:`(D^\top D)^{+}`.

        Parameters
        ----------
        standard_normal : ndarray, shape (rank,)

        Returns
        -------
        ndarray, shape (d,)
            ``primal``: :math:`V_r S_r^{-1} g`; ``dual``: :math:`D^\top U_r S_r^{-2} g`. Then
            :math:`D\xi = U_r g` has identity covariance on the column space of ``D``.
        """
        keep = self.rank_mask
        if self.mode == "primal":
            return cast(
                np.ndarray, self.basis[:, keep] @ (standard_normal / np.sqrt(self.s2[keep]))
            )
        coeffs = self.basis[:, keep] @ (standard_normal / self.s2[keep])
        return np.asarray(self.block.T @ coeffs).reshape(-1)
