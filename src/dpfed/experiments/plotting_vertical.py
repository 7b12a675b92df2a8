"""Figures of the vertical reproduction (Hu et al., AAAI 2020): training curves (figures 1
and 2), noise levels (figure 3) and the privacy-utility frontier.

Each function takes plain data as written to the JSON files and returns the PNG file's bytes
(:mod:`dpfed.experiments.plotting`: the canvas, matplotlib imported lazily).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpfed.experiments.plotting import (
    integer_xticks,
    log_ticks,
    new_figure,
    plain_log_labels,
    png_bytes,
    seed_band,
    series,
)

#: Colours and line styles of the methods, shared by every figure.
_STYLE: dict[str, dict[str, Any]] = {
    "admm": {"color": "tab:blue", "linestyle": "-", "marker": "o"},
    "sgd": {"color": "tab:orange", "linestyle": "-", "marker": "s"},
    "admm_noisy": {"color": "tab:blue", "linestyle": "--", "marker": "^"},
    "sgd_noisy": {"color": "tab:orange", "linestyle": "--", "marker": "v"},
}
_BASELINE_STYLE = {
    "local_only": {"color": "tab:red", "linestyle": ":", "linewidth": 1.8},
    "centralized": {"color": "black", "linestyle": "-.", "linewidth": 1.4},
}
_LEVEL_COLOURS = (
    "black",
    "tab:blue",
    "tab:green",
    "tab:orange",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:olive",
)


def _robust_top(curves: Sequence[Sequence[float]], floor: float) -> float:
    """Upper y-limit that shows the converged parts of every curve: a blow-up of one noisy
    curve must not flatten the others (it runs off the top instead)."""
    tails = [v for ys in curves for v in ys[1:]] or [v for ys in curves for v in ys]
    if not tails:
        return 1.0
    finals = [ys[-1] for ys in curves if ys]
    top = max(max(finals) * 1.15, min(max(tails), 3.0 * max(finals)))
    return max(top, floor)


def plot_training_curves(
    runs: Mapping[str, Mapping[str, Any]],
    *,
    title: str,
    baselines: Mapping[str, Mapping[str, Any]] | None = None,
) -> bytes:
    """Training objective and test log loss per epoch (the paper's figures 1 and 2).

    Parameters
    ----------
    runs : mapping
        Key (``admm``, ``sgd``, ``admm_noisy``, ``sgd_noisy`` or any other) -> dict with
        ``label`` (legend text) and ``history`` (list of dicts with ``iteration``,
        ``train_objective``, ``test_log_loss``).
    title : str
        Figure title.
    baselines : mapping, optional
        ``centralized`` / ``local_only`` -> dict with ``label``, ``train_objective`` and
        ``test_log_loss``, drawn as horizontal lines (the centralised training objective is
        the optimum of the objective every method minimises).

    Returns
    -------
    bytes
        The PNG file.
    """
    fig = new_figure(11.0, 5.0)
    axes = fig.subplots(1, 2)
    panels = (
        ("train_objective", "training objective (log loss + L2)", "(a) training objective"),
        ("test_log_loss", "test log loss", "(b) test log loss"),
    )
    for ax, (key, ylabel, subtitle) in zip(axes, panels, strict=True):
        drawn: list[list[float]] = []
        for name, run in runs.items():
            xs, ys = series(run["history"], key)
            if not xs:
                continue
            style = dict(_STYLE.get(name, {}))
            style["markevery"] = max(1, len(xs) // 10)
            ax.plot(xs, ys, label=run["label"], markersize=4, linewidth=1.6, **style)
            drawn.append(ys)
        lowest = min((min(ys) for ys in drawn), default=0.0)
        for name, base in (baselines or {}).items():
            value = base.get(key)
            if value is None or (name != "centralized" and key == "train_objective"):
                continue  # local-only minimises a different (smaller-model) objective
            ax.axhline(float(value), label=base["label"], **_BASELINE_STYLE.get(name, {}))
            lowest = min(lowest, float(value))
        ax.set_ylim(max(0.0, lowest - 0.05 * abs(lowest)) * 0.98, _robust_top(drawn, lowest * 1.1))
        integer_xticks(ax)
        ax.set_xlabel("epoch (ADMM iteration / SGD pass over the data)")
        ax.set_ylabel(ylabel)
        ax.set_title(subtitle, fontsize=10)
        ax.grid(True, alpha=0.3)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8.5, frameon=False)
    fig.suptitle(title, fontsize=11)
    return png_bytes(fig)


def plot_noise_levels(
    curves: Sequence[Mapping[str, Any]],
    *,
    title: str,
    baselines: Mapping[str, Mapping[str, Any]],
) -> bytes:
    """Test log loss per iteration at several noise levels (the paper's figure 3).

    Parameters
    ----------
    curves : sequence of dict
        Each with ``label`` and ``history`` (dicts with ``iteration`` and ``test_log_loss``).
    title : str
    baselines : mapping
        ``local_only`` / ``centralized`` -> dict with ``label`` and ``test_log_loss``.

    Returns
    -------
    bytes
        The PNG file.
    """
    fig = new_figure(7.6, 5.4)
    ax = fig.subplots()
    drawn: list[list[float]] = []
    for k, curve in enumerate(curves):
        xs, ys = series(curve["history"], "test_log_loss")
        if not xs:
            continue
        colour = _LEVEL_COLOURS[k % len(_LEVEL_COLOURS)]
        ax.plot(
            xs,
            ys,
            label=curve["label"],
            color=colour,
            linewidth=1.7,
            marker="o",
            markersize=3,
            markevery=max(1, len(xs) // 10),
        )
        drawn.append(ys)
    values = [v for ys in drawn for v in ys]
    for name, base in baselines.items():
        value = base.get("test_log_loss")
        if value is None:
            continue
        ax.axhline(float(value), label=base["label"], **_BASELINE_STYLE.get(name, {}))
        values.append(float(value))
    if values and min(values) > 0:
        # log scale: a level that ruins the model stays visible without flattening the rest
        ax.set_yscale("log")
        ax.set_ylim(min(values) * 0.93, max(values) * 1.15)
        plain_log_labels(ax.yaxis)
    integer_xticks(ax)
    ax.set_xlabel("ADMM iteration (epoch)")
    ax.set_ylabel("test log loss (log scale)" if ax.get_yscale() == "log" else "test log loss")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    fig.legend(loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    return png_bytes(fig)


def plot_frontier(
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str,
    baselines: Mapping[str, Mapping[str, Any]],
) -> bytes:
    """Final test log loss against the total epsilon: median and min-max over seeds.

    Parameters
    ----------
    rows : sequence of dict
        One per target epsilon, with ``epsilon``, ``median``, ``min`` and ``max`` (of the
        final test log loss over seeds).
    title : str
    baselines : mapping
        ``local_only`` / ``centralized`` -> dict with ``label`` and ``test_log_loss``.

    Returns
    -------
    bytes
        The PNG file.
    """
    fig = new_figure(7.6, 5.4)
    ax = fig.subplots()
    eps = [float(r["epsilon"]) for r in rows]
    med = [float(r["median"]) for r in rows]
    lo = [float(r["min"]) for r in rows]
    hi = [float(r["max"]) for r in rows]
    seed_band(
        ax, eps, med, lo, hi, label="DP ADMM sharing, sound mechanism (median)", linewidth=1.8
    )
    for name, base in baselines.items():
        value = base.get("test_log_loss")
        if value is not None:
            ax.axhline(float(value), label=base["label"], **_BASELINE_STYLE.get(name, {}))
    ax.set_xscale("log")
    if eps:
        log_ticks(ax, eps)
    ax.set_xlabel(r"total privacy budget $\varepsilon$ (log scale)")
    ax.set_ylabel("final test log loss")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    fig.legend(loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return png_bytes(fig)
