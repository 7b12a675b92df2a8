"""Reproductions of the source papers' experiments (``dpfed reproduce ...``).

:func:`run_vertical_reproduction` reruns the experiments of Hu et al. (AAAI 2020), DP ADMM
sharing for vertically partitioned data (figures 1-3), plus a privacy-utility frontier of the
sound mechanism. Plotting needs the optional matplotlib (``pip install "dpfed[plot]"``) and
is imported only when a figure is drawn.
"""

from __future__ import annotations

from dpfed.experiments.vertical import run_vertical_reproduction

__all__ = ["run_vertical_reproduction"]
