r"""One party of secure vertical logistic regression: its rows, its model block, its key.

A round for block :math:`j` (the *evaluator*), with party :math:`k` as *key holder*
(:func:`exchange_order`: the first passive party for the label holder's block, the label
holder for every other):

1. :math:`k` sends :math:`\mathrm{Enc}_k(t_k^m)`, :math:`m = 1..K`, its scaled scores
   :math:`t_k = X_k w_k / Z` raised to every power (under its own CKKS key), and, once per job
   if it holds the labels, :math:`\mathrm{Enc}_k(y)`. With more than two parties, the
   ciphertexts pass through every other party :math:`f` on the way, each folding its own
   scores in (:func:`dpfed.secure.ckks.fold_powers`: :math:`\mathrm{Enc}_k((s + t_f)^m)` from
   :math:`\mathrm{Enc}_k(s^m)`), so that :math:`j` receives the powers of
   :math:`s = \sum_{f \ne j} t_f`, and no party but :math:`k` can decrypt them.
2. :math:`j` computes
   :math:`\mathrm{Enc}_k(r) = \sum_m \mathrm{Enc}_k(s^m) \odot c_m(t_j) + c_0(t_j) - y`
   (:meth:`~dpfed.secure.sigmoid.SigmoidPolynomial.shifted`; the labels in plaintext or
   encrypted, whoever holds them), then :math:`\mathrm{Enc}_k(X_j^\top r + \eta_j)` with its own
   Gaussian noise :math:`\eta_j` inside, and sends the :math:`d_j` ciphertexts.
3. :math:`k` decrypts :math:`v = X_j^\top r + \eta_j` (plus CKKS's rounding error), adds its
   exact grid noise (:meth:`dpfed.privacy.grid_release.GridGaussianRelease.sample_part`) and
   returns the :math:`d_j` numbers.
4. :math:`j` keeps its own noise if its own data is protected, or subtracts it, and takes a
   preconditioned step, projected onto its ball.

The key holder's noise protects its data (and every folder's) from the evaluator; the
evaluator's noise protects its data from the key holder and, kept, from whoever receives the
model, and from the other party through the scores its block then produces: a protected
block must be a function of releases only, so that every later round's model point is too.
A party whose data is not protected (the label holder under ``protect="passive"``) adds noise
only to hide its own gradient from the key holder, and removes it afterwards.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError
from dpfed.core.rows import clip_rows, normalize_rows
from dpfed.privacy.grid_release import GridGaussianRelease
from dpfed.protocols.vertical_secure.setup import SecureSetup
from dpfed.secure import ckks

#: The parties that hold CKKS keys (:func:`exchange_order`): the label holder and the first
#: passive party.
KEY_HOLDERS = (0, 1)
#: How a product is computed: under CKKS, or in the clear with the same noise (simulation).
BACKENDS = ("ckks", "plain")


def bounded_rows(X: np.ndarray | sp.spmatrix, row_scaling: str) -> np.ndarray | sp.csr_matrix:
    """A party's rows with norm at most 1, exactly: scaled to norm 1 (``"normalize"``) or
    clipped (``"clip"``), then clipped to 1 (float rounding can leave a norm of 1 + 1 ulp)."""
    rows = normalize_rows(X) if row_scaling == "normalize" else X
    return clip_rows(rows, 1.0)


@dataclass
class RoundCost:
    """Seconds and bytes of one block update."""

    block: int
    seconds: float
    bytes_sent: int


@dataclass
class BlockExchange:
    """What one block update showed each side (for audits) and what it cost.

    Attributes
    ----------
    cost : RoundCost
    decrypted : numpy.ndarray, shape (d_j,)
        What the key holder decrypted: the block's gradient plus the evaluator's noise.
    returned : numpy.ndarray, shape (d_j,)
        What the evaluator received back (the key holder's noise added, if any).
    own_noise : numpy.ndarray, shape (d_j,)
        The evaluator's own noise (known to the evaluator only).
    """

    cost: RoundCost
    decrypted: np.ndarray
    returned: np.ndarray
    own_noise: np.ndarray


@dataclass
class SecureParty:
    r"""A party of the secure vertical protocol.

    Attributes
    ----------
    index : int
        0 for the label holder, 1, 2, ... for the passive parties.
    X : numpy.ndarray or scipy.sparse.csr_matrix, shape (N, d_j)
        The party's rows as given; bounded to norm 1 (:func:`bounded_rows`) and, for the label
        holder, given the intercept column here.
    setup : SecureSetup
    rng : numpy.random.Generator
        The party's own noise generator (its secret in a deployment).
    y : numpy.ndarray or None, shape (N,)
        Labels in {0, 1} (the label holder only).
    backend : str
        ``"ckks"`` or ``"plain"``.
    key_pair : bytes or None
        Its kept CKKS key pair (:meth:`dpfed.secure.ckks.KeyHolder.secret_bytes`; a networked
        party's, kept in its folder); None: a fresh one.
    """

    index: int
    X: np.ndarray | sp.csr_matrix
    setup: SecureSetup
    rng: np.random.Generator
    y: np.ndarray | None = None
    backend: str = "ckks"
    key_pair: bytes | None = field(default=None, repr=False)
    w: np.ndarray = field(init=False)
    rows: np.ndarray | sp.csr_matrix = field(init=False)
    #: Its CKKS key pair (the key holders' only, :data:`KEY_HOLDERS`).
    keys: ckks.KeyHolder | None = field(init=False, default=None)
    #: The key holders' public contexts, by party index (:func:`exchange_order`).
    publics: dict[int, ckks.PublicContext] = field(init=False, default_factory=dict)
    own_model: np.ndarray | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise DpfedInputError(f"backend must be one of {BACKENDS}; found {self.backend!r}.")
        if (self.index == 0) != (self.y is not None):
            raise DpfedInputError("the labels belong to party 0, the label holder, only.")
        self.rows = self.prepared(self.X)
        self.w = np.zeros(self.rows.shape[1])
        if self.backend == "ckks" and self.index in KEY_HOLDERS:
            self.keys = ckks.KeyHolder(self.key_pair, levels=self.setup.parties)

    def prepared(self, X: np.ndarray | sp.spmatrix) -> np.ndarray | sp.csr_matrix:
        """Rows as its model takes them (training or test rows): bounded
        (:func:`bounded_rows`), and for the label holder with the intercept column."""
        rows = bounded_rows(X, self.setup.row_scaling)
        if self.index == 0 and self.setup.fit_intercept:
            constant = np.full((rows.shape[0], 1), self.setup.intercept_scale)
            rows = (
                sp.hstack([rows, constant], format="csr")
                if sp.issparse(rows)
                else np.hstack([rows, constant])
            )
        return rows

    @property
    def protected(self) -> bool:
        """Whether this party's data must be protected (its releases carry its noise, and its
        block is a function of releases only)."""
        return self.setup.protect != "passive" or self.index != 0

    @property
    def round_release(self) -> GridGaussianRelease:
        """The grid release of a round's gradient (all blocks: dimension sum of widths)."""
        s = self.setup
        return GridGaussianRelease.for_multiplier(
            "secure gradient", s.gradient_sensitivity, s.noise_multiplier, sum(s.block_widths)
        )

    def scaled_scores(self) -> np.ndarray:
        """:math:`t_j = X_j w_j / Z`, shape (N,)."""
        return np.asarray(self.rows @ self.w) / self.setup.polynomial.half_width

    def gram_release(self) -> np.ndarray:
        r"""This party's noisy Gram matrix :math:`X_j^\top X_j + E` (shape (d_j, d_j)), exact
        if its data is not protected.

        The upper triangle (diagonal included) gets exact grid noise of deviation
        :math:`\sigma_G` (:class:`SecureSetup`), mirrored below.
        """
        gram = np.asarray(
            (self.rows.T @ self.rows).toarray()
            if sp.issparse(self.rows)
            else self.rows.T @ self.rows
        )
        if not self.protected:
            return gram
        d = gram.shape[0]
        upper = np.triu_indices(d)
        s = self.setup
        release = GridGaussianRelease.for_multiplier(
            "secure Gram",
            s.gram_sensitivity,
            s.noise_multiplier,
            sum(w * (w + 1) // 2 for w in s.block_widths),
        )
        noisy = np.zeros_like(gram)
        noisy[upper] = release.sample_part(self.rng, gram[upper])
        return cast(np.ndarray, noisy + np.triu(noisy, 1).T)

    def preconditioner(self, gram: np.ndarray) -> np.ndarray:
        r""":math:`H_j^{-1}` with :math:`H_j = \frac{1}{4N}(G_j + \beta_j I) + \lambda I`, the
        noisy Gram's eigenvalues clipped at 0 first (shape (d_j, d_j)).

        :math:`\beta_j = 2\sqrt{d_j}\,(\sigma_G + \sigma)` (:math:`\sigma_G` only if the Gram
        carries noise). :math:`2\sigma_G\sqrt{d_j}` is about the spectral norm of the Gram's
        noise (a symmetric Gaussian matrix's), so :math:`H_j` still majorises the block's
        curvature :math:`\frac{1}{4N} X_j^\top X_j` and a noisy small eigenvalue does not
        become a long step; :math:`2\sigma\sqrt{d_j}`, the gradient noise's norm, damps the
        steps along directions the data hardly supports, where a step would carry mostly
        noise (chosen on a9a and Adult at epsilon 1 and 8 against 0, 1 and 4 times it)."""
        n = self.setup.n_samples
        values, vectors = np.linalg.eigh(0.5 * (gram + gram.T))
        noise = self.setup.gradient_sigma + (self.setup.gram_sigma if self.protected else 0.0)
        shift = 2.0 * np.sqrt(gram.shape[0]) * noise
        values = (np.maximum(values, 0.0) + shift) / (4.0 * n) + self.setup.ridge_strength
        inverse: np.ndarray = (vectors / values) @ vectors.T
        return inverse

    def fit_own_model(self) -> np.ndarray:
        r"""The label holder's own model, kept as :attr:`own_model` and returned:
        scikit-learn's ``LogisticRegression`` (C = 1, with an intercept) on its bounded rows
        (the intercept coordinate divided by the column's constant), not projected.

        It is computed from exact rows and labels: under ``protect="passive"`` (whose label
        holder's data nothing protects) it starts the rounds; under ``"parties"`` only after
        the last round, since a protected block must be a function of releases only, and it
        then reaches nobody but the label holder.
        """
        from sklearn.linear_model import LogisticRegression

        if self.index != 0 or self.y is None:
            raise DpfedInputError("only the label holder has a model of its own.")
        s = self.setup
        own = self.rows[:, :-1] if s.fit_intercept else self.rows
        model = LogisticRegression(C=1.0, max_iter=3000, fit_intercept=s.fit_intercept)
        model.fit(own, self.y)
        w: np.ndarray = model.coef_[0]
        if s.fit_intercept:
            w = np.append(w, model.intercept_[0] / s.intercept_scale)
        self.own_model = w.copy()
        return w

    def warm_start(self) -> None:
        r"""Start from the label holder's own model (:meth:`fit_own_model`), projected onto
        its ball.

        Only for a label holder whose data is not protected (``protect="passive"``): the model
        is computed from its exact rows and labels, which nothing then protects.

        Raises
        ------
        DpfedInputError
            For a party that is not an unprotected label holder.
        """
        if self.index != 0 or self.protected or self.y is None:
            raise DpfedInputError(
                "only an unprotected label holder (protect='passive') starts from its own "
                "model: it is computed from exact rows and labels."
            )
        w = self.fit_own_model()
        radius = self.setup.block_radii[0]
        norm = float(np.linalg.norm(w))
        self.w = w * (radius / norm) if norm > radius else w

    def ridge_mask(self) -> np.ndarray:
        """1 for regularised coordinates, 0 for the intercept."""
        mask = np.ones_like(self.w)
        if self.index == 0 and self.setup.fit_intercept:
            mask[-1] = 0.0
        return mask

    def step(self, gradient: np.ndarray, inverse: np.ndarray) -> None:
        r""":math:`w_j \leftarrow \Pi_{R_j}(w_j - H_j^{-1}(\hat g_j / N + \lambda w_j))`, the
        intercept unregularised."""
        s = self.setup
        direction = gradient / s.n_samples + s.ridge_strength * self.ridge_mask() * self.w
        w = self.w - inverse @ direction
        radius = s.block_radii[self.index]
        norm = float(np.linalg.norm(w))
        self.w = w * (radius / norm) if norm > radius else w


def exchange_order(evaluator: int, parties: int) -> tuple[int, tuple[int, ...]]:
    """The key holder of block ``evaluator``'s update and the parties that fold their scores
    into its powers on the way, in order: the first passive party holds the key for the label
    holder's block, the label holder for every other (its encrypted labels then enter the
    residual); every other party folds."""
    holder = KEY_HOLDERS[1] if evaluator == KEY_HOLDERS[0] else KEY_HOLDERS[0]
    return holder, tuple(k for k in range(parties) if k not in (evaluator, holder))


def needs_rotations(party: int, holder: int, parties: int) -> bool:
    """Whether ``party`` needs key holder ``holder``'s Galois keys: only to evaluate its own
    block's gradient under that key (a sum over slots); a folder multiplies by plaintexts
    only and gets the public key alone."""
    return exchange_order(party, parties)[0] == holder


def encrypted_powers(
    holder: SecureParty,
    folders: tuple[SecureParty, ...] | list[SecureParty],
) -> tuple[list[list[bytes]], int]:
    r"""Steps 1 and the folds: the chunks of :math:`\mathrm{Enc}_k(s^m)`, :math:`m = 1..K`,
    :math:`s` the scaled scores of the key holder and every folder, and the bytes sent (the
    key holder's powers and each folder's)."""
    s = holder.setup
    assert holder.keys is not None
    powers = [holder.keys.encrypt(holder.scaled_scores() ** m) for m in range(1, s.degree + 1)]
    sent = sum(len(c) for message in powers for c in message)
    for folder in folders:
        public = folder.publics[holder.index]
        folded = ckks.fold_powers([public.load(m) for m in powers], folder.scaled_scores())
        powers = [[bytes(c.serialize()) for c in chunks] for chunks in folded]
        sent += sum(len(c) for message in powers for c in message)
    return powers, sent


def encrypted_gradient(
    evaluator: SecureParty,
    public: ckks.PublicContext,
    powers: list[list[bytes]],
    encrypted_labels: list[bytes] | None,
    own_noise: np.ndarray,
) -> list[bytes]:
    r"""Step 2 (module docstring): :math:`\mathrm{Enc}_k(X_j^\top r + \eta_j)`, one
    serialised ciphertext per column of the evaluator's block.

    Parameters
    ----------
    evaluator : SecureParty
    public : ckks.PublicContext
        The key holder's public context.
    powers : list of lists of bytes
        ``powers[m - 1]``: the chunks of :math:`\mathrm{Enc}_k(t_k^m)`.
    encrypted_labels : list of bytes or None
        :math:`\mathrm{Enc}_k(y)` when the key holder holds the labels.
    own_noise : numpy.ndarray, shape (d_j,)
        :math:`\eta_j`.
    """
    coefficients = evaluator.setup.polynomial.shifted(evaluator.scaled_scores())
    if evaluator.y is not None:
        coefficients[0] = coefficients[0] - evaluator.y
    residual = ckks.combine_powers([public.load(m) for m in powers], coefficients)
    if encrypted_labels is not None:  # the key holder's labels, under its key
        labels = public.load(encrypted_labels)
        residual = [r - lab for r, lab in zip(residual, labels, strict=True)]
    return ckks.transposed_product(residual, evaluator.rows, offset=own_noise)


def released_gradient(
    holder: SecureParty, value: np.ndarray, others_protected: bool = False
) -> np.ndarray:
    """Step 3: what the key holder returns for the decrypted ``value``: its exact grid noise
    added when its data is protected, or when a folder's is (``others_protected``: with more
    than two parties the residual carries the folders' scores, so an unprotected label
    holder must still hide them from the evaluator)."""
    if holder.protected or others_protected:
        return holder.round_release.sample_part(holder.rng, value)
    return value


def take_gradient(
    evaluator: SecureParty, released: np.ndarray, own_noise: np.ndarray, inverse: np.ndarray
) -> None:
    """Step 4: keep its own noise (a protected block is a release) or remove it, and step."""
    gradient = released if evaluator.protected else released - own_noise
    evaluator.step(gradient, inverse)


def block_update(
    evaluator: SecureParty,
    holder: SecureParty,
    inverse: np.ndarray,
    encrypted_labels: list[bytes] | None,
    folders: tuple[SecureParty, ...] | list[SecureParty] = (),
) -> BlockExchange:
    r"""One block update of ``evaluator`` with ``holder`` as key holder and ``folders``
    folding their scores in (module docstring; :func:`exchange_order`).

    Returns
    -------
    BlockExchange
        What each side saw, the wall seconds of the whole exchange and the bytes every
        party sent.
    """
    start = time.perf_counter()
    poly = evaluator.setup.polynomial
    # numpy's stubs take the size (an int typed Any) for None: an array of shape (d_j,)
    own_noise = cast(
        np.ndarray, evaluator.rng.normal(0.0, evaluator.round_release.sigma, evaluator.w.shape[0])
    )
    if evaluator.backend == "ckks":
        assert holder.keys is not None
        powers, sent = encrypted_powers(holder, folders)
        products = encrypted_gradient(
            evaluator, evaluator.publics[holder.index], powers, encrypted_labels, own_noise
        )
        sent += sum(len(c) for c in products)
        value = holder.keys.decrypt_sums(products)
    else:
        sent = 0
        labels = evaluator.y if evaluator.y is not None else holder.y
        assert labels is not None
        t_holder = holder.scaled_scores()
        others = t_holder + sum((f.scaled_scores() for f in folders), np.zeros_like(t_holder))
        r = poly(poly.half_width * (others + evaluator.scaled_scores())) - labels
        value = np.asarray(evaluator.rows.T @ r).ravel() + own_noise
    released = released_gradient(holder, value, any(f.protected for f in folders))
    sent += 8 * released.shape[0]
    take_gradient(evaluator, released, own_noise, inverse)
    cost = RoundCost(evaluator.index, time.perf_counter() - start, sent)
    return BlockExchange(cost, value, released, own_noise)
