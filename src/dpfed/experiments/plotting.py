"""What every figure of the reproductions shares: the canvas, the PNG bytes, axis helpers.

matplotlib is optional (``pip install "dpfed[plot]"``): it is imported inside the functions
that draw (the only function-level imports of the experiments), so ``import dpfed`` and
``import dpfed.experiments`` never need it. The figures are built on
:class:`matplotlib.figure.Figure` with an explicit Agg canvas, never through ``pyplot``, so no
global backend or figure state is touched (safe in servers and threads).

The figures themselves live with their reproduction, one module per concept
(:mod:`~dpfed.experiments.plotting_vertical`, :mod:`~dpfed.experiments.plotting_horizontal`,
:mod:`~dpfed.experiments.plotting_bayes`, :mod:`~dpfed.experiments.plotting_dca`): each takes
plain data (as written to the JSON files) and returns the PNG file's bytes; writing them is
the caller's business.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from dpfed._validation import DpfedInputError

__all__ = [
    "finite",
    "finite_xy",
    "integer_xticks",
    "log_ticks",
    "new_figure",
    "plain_log_labels",
    "png_bytes",
    "require_matplotlib",
    "seed_band",
    "series",
]

_DPI = 110


def require_matplotlib() -> None:
    """Raise :class:`~dpfed.DpfedInputError` unless matplotlib can be imported.

    Raises
    ------
    DpfedInputError
        With the command that installs the plotting extra.
    """
    try:
        # optional dependency (the plot extra): imported only to check that it is there
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as exc:
        raise DpfedInputError(
            "plotting needs matplotlib, which is not installed. Install the plotting extra "
            f'with: pip install "dpfed[plot]"  (import error: {exc})'
        ) from None


def new_figure(width: float, height: float):
    """A matplotlib figure of ``width`` x ``height`` inches on the Agg canvas (no display)."""
    require_matplotlib()
    # matplotlib is optional (the plot extra): imported when a figure is drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes at the reports' resolution."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()


def finite(values: Sequence[Any]) -> list[float]:
    """The values that are finite numbers (``None``, infinities and NaN left out)."""
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def finite_xy(xs: Sequence[Any], ys: Sequence[Any]) -> tuple[list[float], list[float]]:
    """The pairs of ``(xs, ys)`` whose ``y`` is a finite number, as two lists of floats."""
    out_x, out_y = [], []
    for x, y in zip(xs, ys, strict=True):
        if y is not None and math.isfinite(float(y)):
            out_x.append(float(x))
            out_y.append(float(y))
    return out_x, out_y


def series(history: Sequence[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """``(iterations, values)`` of the finite entries of ``key`` in a per-iteration history."""
    return finite_xy(
        [entry.get("iteration") for entry in history], [entry.get(key) for entry in history]
    )


def seed_band(
    ax,
    xs: Sequence[float],
    centre: Sequence[float],
    low: Sequence[float],
    high: Sequence[float],
    *,
    label: str,
    colour: str = "tab:blue",
    **line: Any,
) -> None:
    """A final value against the privacy budget: its min-max band over seeds and a line
    through its centre (median or mean) with a marker at each budget.

    Parameters
    ----------
    ax : matplotlib Axes
    xs, centre, low, high : sequence of float
        Budgets, and the centre, minimum and maximum over seeds at each.
    label : str
        Legend text of the line (the band's is ``"min-max over seeds"``).
    colour : str, default "tab:blue"
    **line
        More properties of the line (``linewidth``, ...).
    """
    ax.fill_between(xs, low, high, color=colour, alpha=0.2, label="min-max over seeds")
    ax.plot(xs, centre, color=colour, marker="o", label=label, **line)


def integer_xticks(ax) -> None:
    """Integer ticks only on the x axis (rounds)."""
    from matplotlib.ticker import MaxNLocator  # optional dependency, see the module docstring

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def log_ticks(ax, ticks: Sequence[float]) -> None:
    """A log-scale x axis with a labelled tick (``"%g"``) at each of ``ticks`` only."""
    from matplotlib.ticker import NullFormatter  # optional dependency, see the module docstring

    ax.set_xscale("log")
    ax.set_xticks(list(ticks))
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())


def plain_log_labels(axis) -> None:
    """Decimal tick labels on a log axis, on major and minor ticks alike."""
    # optional dependency, see the module docstring
    from matplotlib.ticker import FuncFormatter, LogLocator

    fmt = FuncFormatter(lambda v, _pos: f"{v:g}")
    axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 3.0, 5.0)))
    axis.set_major_formatter(fmt)
    axis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))
