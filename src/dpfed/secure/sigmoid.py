r"""A polynomial stand-in for the logistic sigmoid on a bounded score range.

Under additive or CKKS encryption a party can evaluate a polynomial of another party's
encrypted score, not the sigmoid itself. The secure vertical protocol therefore replaces the
logistic loss's derivative :math:`\sigma(z) = 1/(1 + e^{-z})` by a polynomial :math:`p` of
degree :math:`k` on the interval :math:`|z| \le Z`, where :math:`Z` bounds every score the
protocol can produce (row norms and model norms are projected, so the bound is enforced, not
assumed). The gradient the parties compute is that of the surrogate loss
:math:`\ell_p(z, y) = \int_0^z (p(s) - y)\,ds`; its residual :math:`p(z) - y` is what the
sensitivity depends on.

Fit (public: it depends only on :math:`k` and :math:`Z`). Least squares in the Chebyshev basis
of :math:`t = z/Z` on 4,001 equispaced points of :math:`[-1, 1]`, each weighted by
:math:`e^{-z^2/(2\cdot 6^2)} + 0.05`: the scores of a logistic model concentrate within a few
units of 0, where the fit is made tight; the floor keeps the tails from drifting. The
coefficients are then stored in the power basis of :math:`t`.

Certified bounds. :attr:`SigmoidPolynomial.residual_bound` is
:math:`r_{max} \ge \max_{|t| \le 1,\, y \in \{0, 1\}} |p(t) - y|`, from a grid of
:math:`M = 2^{16} + 1` points and Markov's inequality: for a polynomial :math:`q` of degree
:math:`k` with :math:`\max_{[-1, 1]}|q| = Q`, :math:`|q'| \le k^2 Q`, and every point is within
:math:`h/2` of the grid (:math:`h = 2/(M - 1)`), so :math:`Q \le G + k^2 Q h/2` with :math:`G`
the grid maximum, i.e. :math:`Q \le G/(1 - k^2 h/2)`. Applied to :math:`q = p` and
:math:`q = 1 - p` (0.12 % above the grid maximum at degree 9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpfed._validation import DpfedInputError, check_int, check_positive

#: Width (in score units) of the Gaussian weight that tightens the fit near 0.
FIT_WEIGHT_WIDTH = 6.0
#: Floor of the fit's weight, so the tails are fitted too.
FIT_WEIGHT_FLOOR = 0.05
#: Points of the fit and of the bound's grid.
FIT_POINTS = 4001
BOUND_POINTS = 2**16 + 1


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@dataclass(frozen=True)
class SigmoidPolynomial:
    r"""A polynomial :math:`p(z) = \sum_{m=0}^{k} a_m (z/Z)^m` close to the sigmoid on
    :math:`[-Z, Z]`.

    Attributes
    ----------
    degree : int
        :math:`k \ge 1`.
    half_width : float
        :math:`Z > 0`: the scores the protocol can reach lie in :math:`[-Z, Z]`.
    coefficients : tuple of float, length ``degree + 1``
        :math:`a_0, \dots, a_k` in the power basis of :math:`t = z/Z`.
    residual_bound : float
        :math:`r_{max}`: a certified bound on :math:`|p(z) - y|` over :math:`|z| \le Z` and
        :math:`y \in \{0, 1\}` (module docstring).
    max_error : float
        :math:`\max |p - \sigma|` on the bound's grid (informative, not certified).
    """

    degree: int
    half_width: float
    coefficients: tuple[float, ...]
    residual_bound: float
    max_error: float

    @classmethod
    def fit(cls, degree: int, half_width: float) -> SigmoidPolynomial:
        """Fit the polynomial of ``degree`` on ``[-half_width, half_width]`` (module
        docstring) and certify its residual bound.

        Raises
        ------
        DpfedInputError
            For a degree outside 1..15 or a half width that is not finite and > 0.
        """
        k = check_int("polynomial degree", degree, minimum=1)
        if k > 15:
            raise DpfedInputError(
                f"polynomial degree must be at most 15 (each degree is one more encrypted "
                f"power per round). Found {k}."
            )
        z_max = check_positive("score half width", half_width)
        t = np.linspace(-1.0, 1.0, FIT_POINTS)
        z = t * z_max
        weight = np.exp(-(z**2) / (2.0 * FIT_WEIGHT_WIDTH**2)) + FIT_WEIGHT_FLOOR
        cheb = np.polynomial.chebyshev.chebfit(t, _sigmoid(z), k, w=weight)
        power = np.polynomial.chebyshev.cheb2poly(cheb)
        coefficients = tuple(float(a) for a in np.pad(power, (0, k + 1 - len(power))))
        grid = np.linspace(-1.0, 1.0, BOUND_POINTS)
        values = np.polynomial.polynomial.polyval(grid, coefficients)
        slack = 1.0 - k * k * (1.0 / (BOUND_POINTS - 1))  # 1 - k^2 h / 2, h = 2/(M - 1)
        residual = float(max(np.max(np.abs(values)), np.max(np.abs(1.0 - values)))) / slack
        error = float(np.max(np.abs(values - _sigmoid(grid * z_max))))
        return cls(k, z_max, coefficients, residual, error)

    def __call__(self, z: np.ndarray) -> np.ndarray:
        """:math:`p(z)` (shape of ``z``)."""
        return np.polynomial.polynomial.polyval(np.asarray(z) / self.half_width, self.coefficients)

    def shifted(self, t_own: np.ndarray) -> list[np.ndarray]:
        r"""Coefficients of :math:`s \mapsto p(Z(t_{own} + s))` in powers of :math:`s`.

        .. math::

            p(Z(t + s)) = \sum_{m=0}^{k} s^m c_m(t), \qquad
            c_m(t) = \sum_{j=m}^{k} a_j \binom{j}{m} t^{j - m},

        so a party holding :math:`t` (its own scaled scores) evaluates the polynomial of the
        sum with another party's encrypted powers :math:`\mathrm{Enc}(s^m)` by plaintext
        products only.

        Parameters
        ----------
        t_own : numpy.ndarray, shape (n,)

        Returns
        -------
        list of numpy.ndarray, ``degree + 1`` arrays of shape (n,)
            :math:`c_0(t), \dots, c_k(t)`.
        """
        t = np.asarray(t_own, dtype=np.float64)
        k = self.degree
        powers = np.vander(t, k + 1, increasing=True).T  # row i: t^i
        # B[m, i] = a_{m+i} C(m+i, m), so c_m = sum_i B[m, i] t^i
        mix = np.array(
            [
                [
                    self.coefficients[m + i] * math.comb(m + i, m) if m + i <= k else 0.0
                    for i in range(k + 1)
                ]
                for m in range(k + 1)
            ]
        )
        return list(mix @ powers)
