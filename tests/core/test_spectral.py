"""GramSpectrum's extreme eigenvalues of D^T D."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from dpfed.core.spectral import GramSpectrum


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_min_and_max_eigenvalue_of_a_full_rank_tall_block(sparse):
    block = np.random.default_rng(0).normal(size=(50, 4))
    expected = np.linalg.eigvalsh(block.T @ block)
    spectrum = GramSpectrum(sp.csr_matrix(block) if sparse else block)
    assert spectrum.mode == "primal"
    assert spectrum.min_eigenvalue == pytest.approx(expected.min(), rel=1e-10)
    assert spectrum.max_eigenvalue == pytest.approx(expected.max(), rel=1e-10)
    assert spectrum.min_eigenvalue > 0


def test_min_eigenvalue_is_zero_for_wide_or_rank_deficient_blocks():
    rng = np.random.default_rng(1)
    wide = rng.normal(size=(5, 9))
    assert GramSpectrum(wide).mode == "dual" and GramSpectrum(wide).min_eigenvalue == 0.0
    tall = rng.normal(size=(30, 3))
    deficient = np.column_stack([tall, tall[:, 0] + tall[:, 1]])
    assert GramSpectrum(deficient).min_eigenvalue == 0.0
