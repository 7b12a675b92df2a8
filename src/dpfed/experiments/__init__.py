"""Reproductions of the source papers' experiments (``dpfed reproduce ...``).

One module per reproduction (:mod:`~dpfed.experiments.vertical`,
:mod:`~dpfed.experiments.decentralized`, :mod:`~dpfed.experiments.consensus`,
:mod:`~dpfed.experiments.bayes_linreg`, :mod:`~dpfed.experiments.dca_scaling`), each run by the
shared :mod:`~dpfed.experiments.runner` (output folder, progress, figures with their JSON,
the summary written last). The prose of the reports lives in ``templates/`` and is rendered
by :mod:`~dpfed.experiments.report`; the figures by the ``plotting*`` modules, with the
optional matplotlib (``pip install "dpfed[plot]"``) imported only when a figure is drawn.

:func:`run_vertical_reproduction` reruns the experiments of Hu et al. (AAAI 2020), DP ADMM
sharing for vertically partitioned data (figures 1-3), plus a privacy-utility frontier of the
sound mechanism.
"""

from __future__ import annotations

from dpfed.experiments.vertical import run_vertical_reproduction

__all__ = ["run_vertical_reproduction"]
