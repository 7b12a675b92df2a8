"""Shared plot helpers: finite series and the log axis (matplotlib only inside functions)."""

from __future__ import annotations

import math

import pytest

from dpfed.experiments.plotting import (
    finite,
    finite_xy,
    log_ticks,
    new_figure,
    png_bytes,
    series,
)


def test_finite_values_and_pairs():
    assert finite([1, None, math.inf, 2.5, math.nan]) == [1.0, 2.5]
    assert finite_xy([1, 2, 3, 4], [0.5, None, math.nan, 4]) == ([1.0, 4.0], [0.5, 4.0])
    with pytest.raises(ValueError):
        finite_xy([1, 2], [1.0])


def test_series_of_a_history():
    history = [
        {"iteration": 1, "loss": 0.7},
        {"iteration": 2, "loss": None},
        {"iteration": 3},
        {"iteration": 4, "loss": 0.5},
    ]
    assert series(history, "loss") == ([1.0, 4.0], [0.7, 0.5])


def test_log_ticks_label_only_the_given_values():
    pytest.importorskip("matplotlib")
    fig = new_figure(3.0, 2.0)
    ax = fig.subplots()
    ax.plot([0.01, 0.1, 1.0], [1, 2, 3])
    log_ticks(ax, [0.01, 0.1, 1.0])
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.01", "0.1", "1"]
    assert png_bytes(fig)[:8] == b"\x89PNG\r\n\x1a\n"
