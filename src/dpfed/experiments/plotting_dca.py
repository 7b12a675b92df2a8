"""Figure of the DCA scaling run, rendered to PNG bytes (matplotlib imported lazily).

Like :mod:`dpfed.experiments.plotting` (whose ``new_figure`` and ``png_bytes`` are reused),
the function takes plain data as written to the JSON file, never touches ``pyplot`` and
returns the PNG file's bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpfed.experiments.plotting import new_figure, png_bytes

_DIM_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def plot_dca_scaling(cells: Sequence[Mapping[str, Any]], *, title: str) -> bytes:
    """Seconds of one secure sum against N, one line per d: dpfed and the paper; speed-up.

    Parameters
    ----------
    cells : sequence of mapping
        Dicts with ``n_clients``, ``dim``, ``median`` (dpfed seconds), ``paper_seconds``
        (or None) and ``ratio`` (or None), as :func:`dpfed.experiments.dca_scaling.
        time_secure_sum` returns.
    title : str

    Returns
    -------
    bytes
        The PNG file.
    """
    fig = new_figure(12.0, 5.0)
    left, right = fig.subplots(1, 2)
    dims = sorted({int(c["dim"]) for c in cells})
    for i, d in enumerate(dims):
        colour = _DIM_COLOURS[i % len(_DIM_COLOURS)]
        row = sorted((c for c in cells if int(c["dim"]) == d), key=lambda c: c["n_clients"])
        ns = [c["n_clients"] for c in row]
        left.plot(
            ns, [c["median"] for c in row], color=colour, marker="o", label=f"dpfed, d = {d:g}"
        )
        paper = [(c["n_clients"], c["paper_seconds"]) for c in row if c["paper_seconds"]]
        if paper:
            left.plot(
                *zip(*paper, strict=True),
                color=colour,
                marker="s",
                linestyle="--",
                alpha=0.7,
                label=f"paper (Spark), d = {d:g}",
            )
        ratios = [(c["n_clients"], c["ratio"]) for c in row if c["ratio"]]
        if ratios:
            right.plot(*zip(*ratios, strict=True), color=colour, marker="o", label=f"d = {d:g}")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("clients N")
        ax.grid(True, which="both", alpha=0.3)
    left.set_ylabel("seconds per secure sum")
    left.set_title("runtime (dashed: the paper's Table 1)")
    left.legend(fontsize=7, ncol=2)
    right.set_ylabel("paper seconds / dpfed seconds")
    right.set_title("speed-up of the in-process simulation")
    if right.lines:
        right.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return png_bytes(fig)
