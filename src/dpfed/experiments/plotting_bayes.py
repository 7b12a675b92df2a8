"""Figure of the DP Bayesian linear regression reproduction (Heikkilä et al. 2017, figure 2).

Like :mod:`dpfed.experiments.plotting`, the function takes plain data as written to the JSON
file, imports matplotlib lazily, never touches ``pyplot`` and returns the PNG file's bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from dpfed.experiments.plotting import new_figure, png_bytes

#: Line style per method key of :data:`dpfed.experiments.bayes_linreg.METHODS`.
METHOD_STYLE: dict[str, dict[str, Any]] = {
    "trusted": {"color": "tab:blue", "linestyle": "--", "marker": "o"},
    "distributed": {"color": "tab:orange", "linestyle": "--", "marker": "s"},
    "trusted_proj": {"color": "tab:blue", "linestyle": "-", "marker": "^"},
    "distributed_proj": {"color": "tab:orange", "linestyle": "-", "marker": "v"},
    "input": {"color": "tab:red", "linestyle": ":", "marker": "x"},
}


def plot_bayes_linreg(
    panels: Sequence[Mapping[str, Any]],
    *,
    epsilons: Sequence[float],
    labels: Mapping[str, str],
    title: str,
) -> bytes:
    """Median test MAE against epsilon with interquartile error bars, one panel per data set.

    Parameters
    ----------
    panels : sequence of mapping
        One per data set: ``title`` (str), ``nonprivate`` (dict with ``median``, ``q25``,
        ``q75``) and ``methods``: method key -> list of dicts (one per epsilon, in the order
        of ``epsilons``) with ``median``, ``q25`` and ``q75``.
    epsilons : sequence of float
    labels : mapping
        Method key -> legend label.
    title : str

    Returns
    -------
    bytes
        The PNG file.
    """
    fig = new_figure(5.0 * max(1, len(panels)), 4.8)
    axes = fig.subplots(1, max(1, len(panels)), squeeze=False)[0]
    eps = [float(e) for e in epsilons]
    for ax, panel in zip(axes, panels, strict=False):
        for key, stats in panel["methods"].items():
            xs, ys, lo, hi = [], [], [], []
            for e, s in zip(eps, stats, strict=True):
                if s is None or s.get("median") is None or not math.isfinite(s["median"]):
                    continue
                xs.append(e)
                ys.append(s["median"])
                lo.append(s["median"] - s["q25"])
                hi.append(s["q75"] - s["median"])
            style = METHOD_STYLE.get(key, {"color": "tab:gray", "marker": "."})
            ax.errorbar(
                xs,
                ys,
                yerr=[lo, hi],
                label=labels.get(key, key),
                capsize=3,
                linewidth=1.5,
                markersize=5,
                **style,
            )
        nonpriv = panel.get("nonprivate")
        if nonpriv and nonpriv.get("median") is not None:
            ax.axhline(
                nonpriv["median"],
                color="black",
                linestyle="-.",
                linewidth=1.3,
                label=labels.get("nonprivate", "non-private"),
            )
            ax.axhspan(nonpriv["q25"], nonpriv["q75"], color="black", alpha=0.08)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(eps)
        ax.set_xticklabels([f"{e:g}" for e in eps])
        ax.minorticks_off()
        ax.set_xlabel("ε")
        ax.set_ylabel("test MAE (scaled target), median and IQR")
        ax.set_title(panel["title"], fontsize=10)
        ax.grid(True, alpha=0.3, which="both")
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    return png_bytes(fig)
