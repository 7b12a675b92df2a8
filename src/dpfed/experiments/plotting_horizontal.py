"""Figures of the horizontal and decentralized reproductions, rendered to PNG bytes.

The decentralized figures follow Zhang & Zhu (paper 001, section V): convergence of DVP and PVP
at several :math:`\\alpha` (figure 3), the privacy-accuracy trade-off with the fitted
:math:`L_{acc}` curves (figures 4 and 5), and the spread over seeds; the consensus figure shows
DP consensus ADMM (paper 002) at several total privacy budgets.

Each function takes plain data as written to the JSON files and returns the PNG file's bytes
(:mod:`dpfed.experiments.plotting`: the canvas, matplotlib imported lazily).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpfed.experiments.plotting import (
    finite,
    finite_xy,
    integer_xticks,
    log_ticks,
    new_figure,
    png_bytes,
    seed_band,
)

#: Colours of the methods, shared by every figure.
METHOD_COLOURS = {"dvp": "tab:blue", "pvp": "tab:orange", "none": "black"}
METHOD_LABELS = {
    "dvp": "DVP (dual variable perturbation)",
    "pvp": "PVP (primal variable perturbation)",
    "none": "non-private",
}
_GRAPH_STYLE = {
    "ring": {"color": "tab:blue", "marker": "o"},
    "erdos-renyi": {"color": "tab:green", "marker": "s"},
}
_REFERENCE_STYLE = {
    "none_dvp": {"color": "tab:blue", "linestyle": ":", "linewidth": 1.6},
    "none_pvp": {"color": "tab:orange", "linestyle": ":", "linewidth": 1.6},
    "none_paper": {"color": "black", "linestyle": "-.", "linewidth": 1.3},
}
_LEVEL_COLOURS = (
    "tab:red",
    "tab:orange",
    "tab:olive",
    "tab:green",
    "tab:blue",
    "tab:purple",
    "tab:brown",
    "tab:pink",
)


def plot_nonprivate(
    curves: Mapping[str, Mapping[str, Any]],
    *,
    title: str,
    centralized_mer: float | None = None,
    target_gap: float | None = None,
) -> bytes:
    """Non-private decentralized ADMM: relative objective gap and test MER per iteration.

    Parameters
    ----------
    curves : mapping
        Graph kind (``ring``, ``erdos-renyi``, ...) -> dict with ``label``, ``iterations``,
        ``relative_gap`` and ``misclassification_rate`` (lists, one value per iteration).
    title : str
    centralized_mer : float, optional
        Test MER of the centralised optimum (horizontal line).
    target_gap : float, optional
        Target relative gap (horizontal line on the gap panel).

    Returns
    -------
    bytes
        The PNG file.
    """
    fig = new_figure(11.0, 4.8)
    ax_gap, ax_mer = fig.subplots(1, 2)
    for kind, curve in curves.items():
        style = dict(_GRAPH_STYLE.get(kind, {"color": "tab:gray", "marker": "^"}))
        xs, ys = finite_xy(curve["iterations"], curve["relative_gap"])
        ys = [max(y, 1e-16) for y in ys]
        every = max(1, len(xs) // 10)
        ax_gap.plot(
            xs, ys, label=curve["label"], linewidth=1.6, markersize=4, markevery=every, **style
        )
        xs, ys = finite_xy(curve["iterations"], curve["misclassification_rate"])
        ax_mer.plot(
            xs, ys, label=curve["label"], linewidth=1.6, markersize=4, markevery=every, **style
        )
    if target_gap is not None:
        ax_gap.axhline(
            target_gap,
            color="tab:red",
            linestyle=":",
            linewidth=1.4,
            label=f"target {target_gap:g}",
        )
    if centralized_mer is not None:
        ax_mer.axhline(
            centralized_mer,
            color="black",
            linestyle="-.",
            linewidth=1.3,
            label="centralised optimum",
        )
    ax_gap.set_yscale("log")
    ax_gap.set_ylabel(r"relative objective gap $(J(\bar f(t)) - J^\star) / J^\star$")
    ax_gap.set_title("(a) objective gap to the centralised optimum", fontsize=10)
    ax_mer.set_ylabel("test misclassification error rate")
    ax_mer.set_title("(b) test MER of the nodes' average model", fontsize=10)
    for ax in (ax_gap, ax_mer):
        ax.set_xlabel("ADMM iteration")
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    return png_bytes(fig)


def plot_convergence(
    panels: Sequence[Mapping[str, Any]],
    *,
    references: Mapping[str, Mapping[str, Any]],
    title: str,
) -> bytes:
    """The paper's figure 3: empirical loss and MER per iteration, one column per alpha.

    Parameters
    ----------
    panels : sequence of dict
        One per alpha: ``alpha`` and ``runs``, a mapping ``dvp`` / ``pvp`` -> dict with
        ``label``, ``iterations``, ``train_objective`` and ``misclassification_rate``
        (``None`` for a run that failed).
    references : mapping
        Non-private runs drawn in every column (``none_dvp``, ``none_pvp``, ``none_paper``):
        dicts with ``label``, ``iterations``, ``train_objective``, ``misclassification_rate``.
    title : str

    Returns
    -------
    bytes
        The PNG file.
    """
    n = max(1, len(panels))
    fig = new_figure(3.3 * n + 1.0, 7.2)
    axes = fig.subplots(2, n, squeeze=False)
    for col, panel in enumerate(panels):
        for row, (key, ylabel) in enumerate(
            (
                ("train_objective", "empirical loss J (log scale)"),
                ("misclassification_rate", "test MER"),
            )
        ):
            ax = axes[row][col]
            for name, run in panel["runs"].items():
                if run is None:
                    continue
                xs, ys = finite_xy(run["iterations"], run[key])
                ax.plot(
                    xs,
                    ys,
                    color=METHOD_COLOURS.get(name, "tab:gray"),
                    linewidth=1.5,
                    label=run["label"],
                )
            for name, ref in references.items():
                xs, ys = finite_xy(ref["iterations"], ref[key])
                ax.plot(xs, ys, label=ref["label"], **_REFERENCE_STYLE.get(name, {}))
            if row == 0:
                ax.set_yscale("log")
                ax.set_title(rf"({chr(97 + col)}) $\alpha_p(t) = {panel['alpha']:g}$", fontsize=10)
            ax.set_xlabel("iteration t")
            if col == 0:
                ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3, which="both")
    handles, labels = axes[1][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    return png_bytes(fig)


def plot_tradeoff(
    methods: Mapping[str, Mapping[str, Any]],
    *,
    title: str,
    reference: Mapping[str, Any] | None = None,
) -> bytes:
    """The paper's figures 4-5: final loss and MER against alpha, fitted curves, chosen alpha.

    Parameters
    ----------
    methods : mapping
        ``dvp`` / ``pvp`` -> dict with ``alphas``, ``loss`` (the fitted quantity),
        ``misclassification_rate`` (lists; optionally ``misclassification_rate_before_stop``),
        ``fit`` (``c4``, ``c5``, ``c6``, ``describes_data``, or ``None``),
        ``choice`` (``alpha``, ``loss``, ``objective``, or ``None``) and ``net_utility``
        (``alpha`` / ``value`` lists of :math:`U_{priv} - L_{acc}` on a fine grid, or ``None``).
    title : str
    reference : mapping, optional
        ``loss`` and ``misclassification_rate`` of the non-private run (horizontal lines).

    Returns
    -------
    bytes
        The PNG file.
    """
    fig = new_figure(15.0, 4.9)
    ax_loss, ax_mer, ax_net = fig.subplots(1, 3)
    all_alphas: set[float] = set()
    for name, m in methods.items():
        colour = METHOD_COLOURS.get(name, "tab:gray")
        label = METHOD_LABELS.get(name, name)
        xs, ys = finite_xy(m["alphas"], m["loss"])
        all_alphas.update(xs)
        ax_loss.plot(xs, ys, "o", color=colour, label=f"{label}, measured")
        fit = m.get("fit")
        usable = fit is not None and fit.get("describes_data", True)
        if fit is not None and xs:
            grid = np.geomspace(min(xs), max(xs), 200)
            curve = fit["c4"] * np.exp(-fit["c5"] * grid) + fit["c6"]
            text = (
                rf"fit $L_{{acc}} = {fit['c4']:.3g}\,e^{{-{fit['c5']:.3g}\alpha}}"
                rf" {'+' if fit['c6'] >= 0 else '-'} {abs(fit['c6']):.3g}$"
            )
            if not usable:
                text += " (does not describe the data)"
            ax_loss.plot(
                grid, curve, "-" if usable else ":", color=colour, linewidth=1.3, label=text
            )
        choice = m.get("choice") if usable else None
        if choice is not None:
            ax_loss.plot(
                [choice["alpha"]],
                [choice["loss"]],
                "*",
                color=colour,
                markersize=14,
                markeredgecolor="black",
                label=rf"chosen $\alpha^\star$ = "
                rf"{choice['alpha']:.3g}",
            )
        xs, ys = finite_xy(m["alphas"], m["misclassification_rate"])
        ax_mer.plot(xs, ys, "o-", color=colour, label=f"{label}, final output")
        if m.get("misclassification_rate_before_stop") is not None:
            xs, ys = finite_xy(m["alphas"], m["misclassification_rate_before_stop"])
            ax_mer.plot(
                xs,
                ys,
                "^--",
                color=colour,
                alpha=0.7,
                markersize=4,
                label=f"{label.split(' ')[0]}, round before the stop step",
            )
        net = m.get("net_utility") if usable else None
        if net is not None:
            ax_net.plot(net["alpha"], net["value"], "-", color=colour, label=label)
            if choice is not None:
                ax_net.plot(
                    [choice["alpha"]],
                    [choice["objective"]],
                    "*",
                    color=colour,
                    markersize=14,
                    markeredgecolor="black",
                )
    if reference is not None:
        for ax, key in ((ax_loss, "loss"), (ax_mer, "misclassification_rate")):
            value = reference.get(key)
            if value is not None:
                ax.axhline(
                    float(value),
                    color="black",
                    linestyle="-.",
                    linewidth=1.2,
                    label=reference.get("label", "non-private"),
                )
    alphas = sorted(all_alphas)
    _loss_scale(ax_loss, methods, reference)
    for ax in (ax_loss, ax_mer, ax_net):
        if alphas:
            log_ticks(ax, sorted({*alphas, 0.01}) if ax is ax_net else alphas)
        ax.set_xlabel(r"$\alpha_p(t)$ (log scale)")
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=7.5)
    ax_loss.set_ylabel("final empirical loss (mean training log loss)")
    ax_loss.set_title(r"(a) empirical loss vs $\alpha$, fitted $L_{acc}$", fontsize=10)
    ax_mer.set_ylabel("final test MER")
    ax_mer.set_title(r"(b) misclassification error rate vs $\alpha$", fontsize=10)
    ax_net.set_ylabel(r"$U_{priv}(\alpha) - L_{acc}(\alpha)$")
    ax_net.set_title(r"(c) net utility, $w = (0.02, 6, 9, 1)$", fontsize=10)
    fig.suptitle(title, fontsize=11)
    return png_bytes(fig)


def _loss_scale(
    ax_loss: Any, methods: Mapping[str, Mapping[str, Any]], reference: Mapping[str, Any] | None
) -> None:
    """The loss axis: logarithmic when the losses span more than a factor 10, else linear
    with a margin."""
    losses = finite([v for m in methods.values() for v in m["loss"]])
    if reference is not None and reference.get("loss") is not None:
        losses.append(float(reference["loss"]))
    if losses and min(losses) > 0 and max(losses) > 10 * min(losses):
        ax_loss.set_yscale("log")
        ax_loss.set_ylim(min(losses) / 1.5, max(losses) * 1.5)
    elif losses:
        pad = 0.08 * (max(losses) - min(losses) or 1.0)
        ax_loss.set_ylim(min(losses) - pad, max(losses) + pad)


def plot_seeds(
    groups: Sequence[Mapping[str, Any]],
    *,
    title: str,
) -> bytes:
    """Spread of the final empirical loss and MER over seeds, DVP next to PVP.

    Parameters
    ----------
    groups : sequence of dict
        One per (alpha, method): ``alpha``, ``method`` (``dvp`` / ``pvp``), ``loss`` and
        ``misclassification_rate`` (one value per successful seed).
    title : str

    Returns
    -------
    bytes
        The PNG file.
    """
    fig = new_figure(11.0, 4.8)
    axes = fig.subplots(1, 2)
    labels = [
        rf"{METHOD_LABELS.get(g['method'], g['method']).split(' ')[0]}, $\alpha$="
        f"{g['alpha']:g}"
        for g in groups
    ]
    for ax, key, ylabel in (
        (axes[0], "loss", "final empirical loss (mean training log loss)"),
        (axes[1], "misclassification_rate", "final test MER"),
    ):
        data = [finite(g[key]) for g in groups]
        positions = list(range(1, len(groups) + 1))
        shown = [(p, d) for p, d in zip(positions, data, strict=True) if d]
        if shown:
            box = ax.boxplot(
                [d for _, d in shown],
                positions=[p for p, _ in shown],
                widths=0.5,
                patch_artist=True,
                showfliers=False,
            )
            for patch, (p, _) in zip(box["boxes"], shown, strict=True):
                patch.set_facecolor(METHOD_COLOURS.get(groups[p - 1]["method"], "tab:gray"))
                patch.set_alpha(0.35)
        for p, d in zip(positions, data, strict=True):
            colour = METHOD_COLOURS.get(groups[p - 1]["method"], "tab:gray")
            jitter = [p + 0.12 * ((k % 5) - 2) / 2 for k in range(len(d))]
            ax.plot(jitter, d, "o", color=colour, markersize=4, alpha=0.85)
        ax.set_xticks(positions)
        ax.set_xticklabels(labels, fontsize=8.5)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3, axis="y")
    axes[0].set_title("(a) empirical loss over seeds", fontsize=10)
    axes[1].set_title("(b) MER over seeds", fontsize=10)
    fig.suptitle(title, fontsize=11)
    return png_bytes(fig)


def plot_eta(
    methods: Mapping[str, Mapping[str, Any]],
    *,
    title: str,
    reference: Mapping[str, Any] | None = None,
) -> bytes:
    """Final empirical loss and MER against the ADMM penalty eta (one alpha).

    Parameters
    ----------
    methods : mapping
        ``dvp`` / ``pvp`` -> dict with ``eta``, ``loss`` and ``misclassification_rate``
        (lists; ``None`` where the run failed) and ``chosen_eta`` (or ``None``).
    title : str
    reference : mapping, optional
        ``loss`` / ``misclassification_rate`` of the non-private run (horizontal lines).

    Returns
    -------
    bytes
        The PNG file.
    """
    fig = new_figure(11.0, 4.8)
    axes = fig.subplots(1, 2)
    etas: set[float] = set()
    for ax, key, ylabel in (
        (axes[0], "loss", "final empirical loss (mean training log loss)"),
        (axes[1], "misclassification_rate", "final test MER"),
    ):
        for name, m in methods.items():
            xs, ys = finite_xy(m["eta"], m[key])
            etas.update(xs)
            colour = METHOD_COLOURS.get(name, "tab:gray")
            ax.plot(xs, ys, "o-", color=colour, label=METHOD_LABELS.get(name, name))
            chosen = m.get("chosen_eta")
            if chosen is not None and chosen in xs:
                ax.plot(
                    [chosen],
                    [ys[xs.index(chosen)]],
                    "*",
                    color=colour,
                    markersize=14,
                    markeredgecolor="black",
                )
        if reference is not None and reference.get(key) is not None:
            ax.axhline(
                float(reference[key]),
                color="black",
                linestyle="-.",
                linewidth=1.2,
                label=reference.get("label", "non-private"),
            )
        if etas:
            log_ticks(ax, sorted(etas))
        ax.set_xlabel(r"ADMM penalty $\eta$ (log scale)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=8)
    axes[0].set_title(
        r"(a) empirical loss vs $\eta$ (star: lowest training objective)", fontsize=10
    )
    axes[1].set_title(r"(b) test MER vs $\eta$", fontsize=10)
    fig.suptitle(title, fontsize=11)
    return png_bytes(fig)


def plot_consensus(
    levels: Sequence[Mapping[str, Any]],
    *,
    title: str,
    nonprivate: Mapping[str, Any] | None = None,
    centralized_accuracy: float | None = None,
    target_accuracy: float | None = None,
) -> bytes:
    """DP consensus ADMM: accuracy and epsilon per iteration, final accuracy vs epsilon.

    Parameters
    ----------
    levels : sequence of dict
        One per privacy level: ``epsilon`` (target total), ``label``, ``iterations``,
        ``test_accuracy_mean`` and ``epsilon_spent`` (per iteration), and ``final_mean``,
        ``final_min``, ``final_max`` (final accuracy over seeds).
    title : str
    nonprivate : mapping, optional
        ``iterations``, ``test_accuracy_mean`` and ``final_mean`` of the run without noise.
    centralized_accuracy : float, optional
        Test accuracy of the centralised scikit-learn model.
    target_accuracy : float, optional
        A target accuracy (dotted line on the final-accuracy panel).

    Returns
    -------
    bytes
        The PNG file.
    """
    fig = new_figure(15.0, 4.9)
    ax_acc, ax_eps, ax_final = fig.subplots(1, 3)
    for k, level in enumerate(levels):
        colour = _LEVEL_COLOURS[k % len(_LEVEL_COLOURS)]
        xs, ys = finite_xy(level["iterations"], level["test_accuracy_mean"])
        ax_acc.plot(xs, ys, color=colour, linewidth=1.5, label=level["label"])
        xs, ys = finite_xy(level["iterations"], level["epsilon_spent"])
        ax_eps.plot(
            xs, ys, color=colour, linewidth=1.5, marker="o", markersize=3, label=level["label"]
        )
    if nonprivate is not None:
        xs, ys = finite_xy(nonprivate["iterations"], nonprivate["test_accuracy_mean"])
        ax_acc.plot(xs, ys, color="black", linewidth=1.8, label="non-private")
    if centralized_accuracy is not None:
        ax_acc.axhline(
            centralized_accuracy,
            color="black",
            linestyle="-.",
            linewidth=1.2,
            label="centralised scikit-learn",
        )
    eps = [float(lv["epsilon"]) for lv in levels]
    if eps:
        mean = [lv["final_mean"] for lv in levels]
        lo = [lv["final_min"] for lv in levels]
        hi = [lv["final_max"] for lv in levels]
        seed_band(ax_final, eps, mean, lo, hi, label="DP consensus ADMM (mean)")
        log_ticks(ax_final, eps)
    if nonprivate is not None and nonprivate.get("final_mean") is not None:
        ax_final.axhline(
            float(nonprivate["final_mean"]),
            color="black",
            linewidth=1.4,
            label="non-private consensus ADMM",
        )
    if centralized_accuracy is not None:
        ax_final.axhline(
            centralized_accuracy,
            color="black",
            linestyle="-.",
            linewidth=1.2,
            label="centralised scikit-learn",
        )
    if target_accuracy is not None:
        ax_final.axhline(
            target_accuracy,
            color="tab:red",
            linestyle=":",
            linewidth=1.3,
            label=f"target {target_accuracy:g}",
        )

    integer_xticks(ax_acc)
    integer_xticks(ax_eps)
    ax_acc.set_xlabel("ADMM iteration")
    ax_acc.set_ylabel("test accuracy (mean over seeds)")
    ax_acc.set_title("(a) test accuracy per iteration", fontsize=10)
    ax_eps.set_xlabel("ADMM iteration")
    ax_eps.set_ylabel(r"$\varepsilon$ spent so far")
    ax_eps.set_title(r"(b) privacy spent per iteration ($\delta = 10^{-5}$)", fontsize=10)
    ax_final.set_xlabel(r"total $\varepsilon$ (log scale)")
    ax_final.set_ylabel("final test accuracy")
    ax_final.set_title(r"(c) final accuracy vs $\varepsilon$", fontsize=10)
    for ax in (ax_acc, ax_eps, ax_final):
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=7.5)
    fig.suptitle(title, fontsize=11)
    return png_bytes(fig)
