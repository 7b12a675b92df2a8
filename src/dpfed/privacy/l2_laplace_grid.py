r"""An l2-Laplace output release that floating point cannot betray: ``round_grid(value + e)``
with :math:`e` drawn from the continuous law exactly.

Output perturbation releases :math:`v + e`, :math:`e` with density :math:`\propto e^{-\zeta
\|e\|}` (:mod:`dpfed.privacy.l2_laplace`). Computed in floating point, :math:`v + \hat e` has
holes and a texture in its low bits that depend on :math:`v` (Mironov 2012 for the Laplace
mechanism), so the float release is not the mechanism the proof is about. This module releases
instead

.. math::

    Y = \gamma \cdot \mathrm{round}\big((v + e)/\gamma\big) \in \gamma \mathbb Z^d,

the grid point nearest :math:`v + e` for the **exact** continuous :math:`e`, on a power-of-two
grid :math:`\gamma` set from public quantities only (:func:`l2_laplace_grid_spacing`). :math:`Y`
is a function of :math:`v + e` alone, so it is post-processing of the continuous mechanism: its
pure :math:`\alpha`-DP proof holds as written, with no extra :math:`\delta` and no coupling.
The rounding moves each coordinate by at most :math:`\gamma/2 \approx 2^{-21}/\zeta`.

**The exact e.** :math:`e = R\, G/\|G\|` with :math:`R = \zeta^{-1}\sum_{i<d} E_i`
(:math:`\mathrm{Gamma}(d, 1/\zeta)`, :math:`E_i = -\ln U_i` exponential) and :math:`G` standard
normal by Box-Muller, :math:`G_{2k}, G_{2k+1} = \sqrt{-2 \ln A_k}\,(\cos, \sin)(2\pi B_k)`.
Each uniform :math:`U \in (0, 1)` is an infinite sequence of 64-bit words
:math:`U = \sum_{j \ge 1} w_j 2^{-64 j}` of which only the leading words are ever drawn: with
:math:`k` words known, :math:`U` lies in an interval of width :math:`2^{-64k}`, and so does every
coordinate of :math:`v + e` in an interval computed from those. When each coordinate's interval
lies inside one grid cell, :math:`Y` is decided, whatever the words not drawn; otherwise one
more word is drawn for each of the vector's uniforms and the intervals shrink. So :math:`Y` is
exactly the rounding of the continuous :math:`v + e(U)`.

**Two ways to decide.** First in float64, vectorised (:func:`_decide_in_float`): the value is
computed from the first words with a rigorous bound on its distance to the exact
:math:`v + e(U)` for every :math:`U` in the words' interval, propagated operation by operation
(uniform interval, ``log``/``log1p``, ``sqrt``, ``cos``/``sin``, sums, the norm, products; each
libm function taken as accurate to :math:`2^{-50}` relative and :math:`2^{-46}` absolute for
``cos``/``sin``, sixty-four times the few ulp that glibc documents), then doubled. A
coordinate whose float value is farther from its cell's edges than the bound is decided.
Otherwise (about :math:`2^{-25}` of coordinates at the default grid) the vector is decided in
rigorous interval arithmetic (``mpmath.iv``, outward-rounded at :math:`64k + 64` bits), with
more words until it is (:func:`_decide_exactly`). The float is a shortcut for a decision the
interval arithmetic would make the same way (``tests/privacy/test_l2_laplace_grid.py`` checks
that, and the law with a grid so fine that most vectors take the exact path).

**Randomness.** Uniform 64-bit words from the caller's generator, vector by vector in the
order :math:`U_{0..d-1}, A_{0..h-1}, B_{0..h-1}` (:math:`h = \lceil d/2 \rceil`); the extra
words of undecided vectors come after, in vector order. A seed reproduces every release bit
for bit.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np

from dpfed._validation import DpfedInputError, check_positive
from dpfed.privacy.bernoulli_exp import uniform_words

__all__ = ["GRID_BITS_BELOW_SCALE", "l2_laplace_grid_release", "l2_laplace_grid_spacing"]

#: The grid sits this many binary orders below the noise's per-coordinate scale ``1/zeta``.
GRID_BITS_BELOW_SCALE = 20
_WORD_BITS = 64
_TWO64 = float(2**64)
# Relative accuracy assumed of log, log1p, sqrt and float arithmetic, and the absolute accuracy
# of cos/sin on [0, 2 pi] (glibc documents at most a few ulp, 2^-52 each).
_REL = 2.0**-50
_TRIG_ABS = 2.0**-46
_MAX_WORDS = 40


def l2_laplace_grid_spacing(zeta: float) -> float:
    r"""The release grid :math:`\gamma = 2^{\lfloor \log_2(1/\zeta) \rfloor - 20}`: a power of two
    about a millionth of the noise's per-coordinate scale, from the public :math:`\zeta`
    alone.

    Raises
    ------
    DpfedInputError
        If ``zeta`` is not positive and finite, or the grid would leave float64's normal range.
    """
    z = check_positive("zeta", zeta)
    exponent = math.floor(math.log2(1.0 / z)) - GRID_BITS_BELOW_SCALE
    if not -1000 < exponent < 1000:
        raise DpfedInputError(
            f"zeta = {z!r} puts the release grid at 2^{exponent}, outside "
            "float64's range; expected zeta within 2^-900 .. 2^900."
        )
    return math.ldexp(1.0, exponent)


def l2_laplace_grid_release(
    value: np.ndarray,
    zeta: float,
    rng: np.random.Generator,
    *,
    grid: float | None = None,
    fast: bool = True,
) -> np.ndarray:
    r"""Release :math:`\gamma\,\mathrm{round}((v + e)/\gamma)`, :math:`e \propto e^{-\zeta\|e\|}`
    drawn exactly (module docstring).

    Parameters
    ----------
    value : numpy.ndarray
        Shape ``(d,)`` or ``(n, d)``: the value(s) :math:`v` released, each row with its own
        independent noise. Finite.
    zeta : float
        The noise's rate :math:`\zeta > 0`.
    rng : numpy.random.Generator
        Source of the uniform words.
    grid : float or None, default None
        The grid :math:`\gamma`, a power of two; ``None`` for :func:`l2_laplace_grid_spacing`.
    fast : bool, default True
        Decide in float64 first (the law is the same either way; ``False`` decides every vector
        in interval arithmetic, for tests).

    Returns
    -------
    numpy.ndarray
        Same shape as ``value``: points of :math:`\gamma \mathbb Z^d`.

    Raises
    ------
    DpfedInputError
        On a non-finite ``value``, a bad ``zeta`` or ``grid``, or a value too large to be
        rounded to the grid in float64 (:math:`|v|/\gamma \ge 2^{50}`).
    """
    z = check_positive("zeta", zeta)
    v = np.asarray(value, dtype=np.float64)
    if v.ndim not in (1, 2) or v.shape[-1] < 1 or not np.all(np.isfinite(v)):
        where = "" if np.all(np.isfinite(v)) else " with non-finite entries"
        raise DpfedInputError(
            "value must be a finite (d,) or (n, d) array with d >= 1; "
            f"found shape {v.shape}{where}."
        )
    gamma = l2_laplace_grid_spacing(z) if grid is None else check_positive("grid", grid)
    if math.frexp(gamma)[0] != 0.5:
        raise DpfedInputError(f"grid must be a power of two; found {gamma!r}.")
    rows = v.reshape(-1, v.shape[-1])
    if np.max(np.abs(rows)) / gamma >= 2.0**50:
        raise DpfedInputError(
            f"|value| up to {float(np.max(np.abs(rows)))!r} is too large for the release grid "
            f"{gamma!r} (at most 2^50 grid steps); rescale the model or raise zeta's scale."
        )
    n, d = rows.shape
    h = (d + 1) // 2
    words = uniform_words(rng, n * (d + 2 * h)).reshape(n, d + 2 * h)
    cells = np.zeros((n, d), dtype=np.int64)
    if fast:
        decided, float_cells = _decide_in_float(rows, z, gamma, words)
        cells[decided] = float_cells[decided]
    else:
        decided = np.zeros(n, dtype=bool)
    todo = np.flatnonzero(~decided)
    if todo.size:
        cells[todo] = _decide_exactly(rows[todo], z, gamma, words[todo], rng)
    out: np.ndarray = (cells.astype(np.float64) * gamma).reshape(v.shape)
    return out


def _exponentials(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`E = -\ln U` for :math:`U` in :math:`[w, w+1] 2^{-64}`: the float value and a bound
    on its distance to :math:`E(U)` for every such :math:`U`. ``log`` where :math:`U < 1/2`,
    ``log1p`` of the complement (computed exactly in integers) above."""
    low = words < np.uint64(2**63)
    u = words.astype(np.float64) / _TWO64
    complement = (~words + np.uint64(1)).astype(np.float64) / _TWO64  # 1 - w 2^-64, w >= 2^63
    with np.errstate(divide="ignore"):
        e = np.where(
            low, -np.log(np.where(low, u, 0.5)), -np.log1p(-np.where(low, 0.0, complement))
        )
        # |dE/dU| = 1/U: the word's width 2^-64 and the float conversion's 2^-53 relative.
        width = np.where(
            low, 1.0 / words.astype(np.float64), 2.0**-63 + 2.0 * 2.0**-53 * complement
        )
    err = width + 2.0**-52 + _REL * e
    err[words == 0] = np.inf
    return e, err


def _decide_in_float(
    rows: np.ndarray, zeta: float, gamma: float, words: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Cells of ``rows + e`` from the first words, and which rows that decides rigorously."""
    d = rows.shape[1]
    h = (d + 1) // 2
    e, e_err = _exponentials(words[:, :d])
    s = e.sum(axis=1)
    s_err = e_err.sum(axis=1) + d * 2.0**-52 * s
    radius = s / zeta
    radius_err = s_err / zeta + 2.0**-52 * radius
    ea, ea_err = _exponentials(words[:, d : d + h])
    rho = np.sqrt(2.0 * ea)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho_err = np.minimum(np.sqrt(2.0 * ea_err), np.where(rho > 0, 2.0 * ea_err / rho, np.inf))
    rho_err = rho_err + _REL * rho
    theta = (2.0 * np.pi) * (words[:, d + h :].astype(np.float64) / _TWO64)
    g = np.concatenate([rho * np.cos(theta), rho * np.sin(theta)], axis=1)[:, :d]
    g_err = (
        np.concatenate([rho_err, rho_err], axis=1)[:, :d] * (1.0 + _TRIG_ABS)
        + np.concatenate([rho, rho], axis=1)[:, :d] * _TRIG_ABS
        + _REL * np.abs(g)
    )
    norm = np.sqrt(np.einsum("ij,ij->i", g, g))
    norm_err = np.sqrt(np.einsum("ij,ij->i", g_err, g_err)) + (d + 2) * 2.0**-52 * norm
    ok = np.isfinite(radius_err) & np.all(np.isfinite(g_err), axis=1)
    ok &= (radius_err < 0.5 * radius) & (norm_err < 0.5 * norm)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = radius / norm
        q_err = (radius + radius_err) / (norm - norm_err) - q + 4.0 * 2.0**-52 * q
        x = q[:, None] * g
        x_err = q_err[:, None] * (np.abs(g) + g_err) + q[:, None] * g_err + _REL * np.abs(x)
        y = rows + x
        y_err = 2.0 * (x_err + 2.0**-52 * np.abs(y))
        scaled = y / gamma
        cells = np.rint(scaled)
        margin = 0.5 - np.abs(scaled - cells)
        ok &= np.all(margin > y_err / gamma + 2.0**-40, axis=1)
    cells = np.where(ok[:, None], cells, 0.0).astype(np.int64)
    return ok, cells


def _decide_exactly(
    rows: np.ndarray, zeta: float, gamma: float, words: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Cells of ``rows + e`` in interval arithmetic, drawing further words until decided."""
    n, d = rows.shape
    numerators = [[int(w) for w in row] for row in words]
    cells = np.zeros((n, d), dtype=np.int64)
    pending = list(range(n))
    for k in range(1, _MAX_WORDS + 1):
        still = []
        for i in pending:
            decided = _cells_in_intervals(rows[i], zeta, gamma, numerators[i], k)
            if decided is None:
                still.append(i)
            else:
                cells[i] = decided
        pending = still
        if not pending:
            return cells
        more = uniform_words(rng, len(pending) * len(numerators[0])).reshape(len(pending), -1)
        for i, extra in zip(pending, more, strict=True):
            numerators[i] = [
                (u << _WORD_BITS) | int(w) for u, w in zip(numerators[i], extra, strict=True)
            ]
    raise RuntimeError(  # pragma: no cover - probability about 2^-2000
        f"the l2-Laplace release was not decided after {_MAX_WORDS} words per uniform"
    )


def _cells_in_intervals(
    row: np.ndarray, zeta: float, gamma: float, numerators: list[int], k: int
) -> np.ndarray | None:
    """The cells of ``row + e`` if the intervals from ``k`` words per uniform decide them."""
    iv = mpmath.iv
    d = row.size
    h = (d + 1) // 2
    if any(u == 0 for u in numerators):
        return None
    saved = iv.prec
    iv.prec = _WORD_BITS * k + 64
    try:
        scale = iv.mpf(2) ** (-_WORD_BITS * k)
        uniforms = [iv.mpf(u) * scale + iv.mpf([0, 1]) * scale for u in numerators]
        radius = -sum((iv.log(u) for u in uniforms[:d]), iv.mpf(0)) / iv.mpf(zeta)
        rho = [iv.sqrt(-2 * iv.log(a)) for a in uniforms[d : d + h]]
        angle = [2 * iv.pi * b for b in uniforms[d + h :]]
        # the float path's order: every cosine, then every sine
        g = (
            [r * iv.cos(t) for r, t in zip(rho, angle, strict=True)]
            + [r * iv.sin(t) for r, t in zip(rho, angle, strict=True)]
        )[:d]
        norm = iv.sqrt(sum((c**2 for c in g), iv.mpf(0)))
        if not norm.a > 0:
            return None
        out = np.zeros(d, dtype=np.int64)
        for j in range(d):
            y = iv.mpf(float(row[j])) + radius * g[j] / norm
            lo, hi = (_cell(end, gamma) for end in y._mpi_)
            if lo is None or lo != hi:
                return None
            out[j] = lo
        return out
    finally:
        iv.prec = saved


def _cell(end: tuple[int, int, int, int], gamma: float) -> int | None:
    """``round(end / gamma)`` exactly for an interval's end (mpmath's raw ``(sign, man, exp,
    bc)``); ``None`` for an infinite end. A tie (probability 0) rounds down, so an interval
    with an end on a cell's edge stays undecided."""
    sign, man, exp, _ = end
    if man == 0 and exp != 0:
        return None
    value = Fraction(-man if sign else man) * Fraction(2) ** exp
    shifted = value / Fraction(gamma) + Fraction(1, 2)
    cell = math.floor(shifted)
    return cell - 1 if cell == shifted else cell
