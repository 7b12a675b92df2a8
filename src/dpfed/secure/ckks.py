r"""CKKS encryption of long vectors and the product :math:`X^\top \mathrm{Enc}(v)`, over
TenSEAL (Microsoft SEAL; Apache-2.0; ``pip install "dpfed[secure]"``).

Parameters (:data:`POLY_MODULUS_DEGREE`, :data:`COEFF_MODULUS_BITS`, :data:`SCALE_BITS`):
ring degree :math:`N = 8192` (4,096 slots per ciphertext), coefficient modulus of
:math:`60 + 40 + 40 + 60 = 200` bits, scale :math:`2^{40}`. SEAL refuses parameters above
the HomomorphicEncryption.org standard's bound for 128-bit classical security (218 bits at
:math:`N = 8192`), so these are 128-bit parameters by construction (a test checks SEAL still
refuses 240 bits). Two multiplicative levels: one plaintext product by the evaluator's
coefficient vectors (:meth:`dpfed.secure.sigmoid.SigmoidPolynomial.shifted`), one by its
feature columns.

With more than two parties each further party folds its scores into the encrypted powers
(:func:`fold_powers`), one more level each: :func:`parameters` then takes
:math:`N = 16384` (8,192 slots) and a modulus of :math:`60 + 40 L + 60` bits for :math:`L`
levels, at most 438 bits (the standard's bound at :math:`N = 16384`), so up to
:data:`MAX_LEVELS` levels.

Keys and secrets: SEAL draws the secret key and every encryption's randomness from its own
CSPRNG (seeded from the operating system); dpfed never supplies randomness to it. A key
holder's :meth:`KeyHolder.public_bytes` carries the public key and the Galois (rotation)
keys the slot sums need, never the secret key.

A vector of :math:`n` values is :math:`\lceil n/4096\rceil` ciphertexts (the last one padded
with zeros). :func:`transposed_product` computes, for each column :math:`j` of a plaintext
matrix, :math:`\sum_c \mathrm{Enc}(v_c) \odot X_{c,j}` over the chunks :math:`c` and then one
rotate-and-sum, so every slot of ciphertext :math:`j` holds :math:`(X^\top v)_j`.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpfed._validation import DpfedInputError

POLY_MODULUS_DEGREE = 8192
COEFF_MODULUS_BITS = (60, 40, 40, 60)
SCALE_BITS = 40
#: Values per ciphertext.
SLOTS = POLY_MODULUS_DEGREE // 2
#: The ring degree and the 128-bit modulus bound (bits) of the contexts with more levels.
WIDE_POLY_MODULUS_DEGREE, WIDE_MODULUS_BOUND = 16384, 438
#: Multiplicative levels :func:`parameters` provides at most (60 + 40 * 7 + 60 = 400 bits).
MAX_LEVELS = 7


def parameters(levels: int = 2) -> tuple[int, tuple[int, ...]]:
    """The ring degree and coefficient modulus bit sizes of a context with ``levels``
    multiplicative levels (2: :data:`POLY_MODULUS_DEGREE`, :data:`COEFF_MODULUS_BITS`).

    Raises
    ------
    DpfedInputError
        For fewer than 2 levels or more than :data:`MAX_LEVELS`.
    """
    if isinstance(levels, bool) or not isinstance(levels, int) or not 2 <= levels <= MAX_LEVELS:
        raise DpfedInputError(
            f"a CKKS context here has 2 to {MAX_LEVELS} multiplicative levels (one per party "
            f"of a secure vertical job); found {levels!r}."
        )
    if levels == 2:
        return POLY_MODULUS_DEGREE, COEFF_MODULUS_BITS
    return WIDE_POLY_MODULUS_DEGREE, (60, *(SCALE_BITS,) * levels, 60)


def context_slots(context: Any) -> int:
    """Values per ciphertext of a TenSEAL context (half its ring degree)."""
    first = context.seal_context().data.first_context_data()
    return int(first.parms().poly_modulus_degree()) // 2


def tenseal() -> Any:
    """The ``tenseal`` module, or a clear error naming the extra to install."""
    try:
        return importlib.import_module("tenseal")
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise DpfedInputError(
            'the secure vertical mode needs TenSEAL: pip install "dpfed[secure]"'
        ) from exc


def chunk_count(n: int, slots: int = SLOTS) -> int:
    """Ciphertexts of a vector of ``n`` values (``slots`` values each)."""
    return -(-int(n) // slots)


def _chunks(values: np.ndarray, slots: int = SLOTS) -> list[list[float]]:
    n = values.shape[0]
    count = chunk_count(n, slots)
    padded = np.zeros(count * slots)
    padded[:n] = values
    return [padded[i * slots : (i + 1) * slots].tolist() for i in range(count)]


@dataclass
class PublicContext:
    """Another party's public CKKS context: encrypt for it, compute on its ciphertexts.

    Attributes
    ----------
    context : tenseal.Context
        Without a secret key.
    """

    context: Any

    @property
    def slots(self) -> int:
        """Values per ciphertext."""
        return context_slots(self.context)

    @classmethod
    def from_bytes(cls, data: bytes) -> PublicContext:
        """Load a context serialised by :meth:`KeyHolder.public_bytes`.

        Raises
        ------
        DpfedInputError
            If the bytes are not a public context or carry a secret key.
        """
        ts = tenseal()
        try:
            context = ts.context_from(data)
        except Exception as exc:
            raise DpfedInputError(f"not a CKKS public context: {exc}") from exc
        if context.is_private():
            raise DpfedInputError("a public context must not carry its owner's secret key")
        return cls(context)

    def encrypt(self, values: np.ndarray) -> list[bytes]:
        """Encrypt a vector (shape ``(n,)``) as ``ceil(n / slots)`` serialised ciphertexts."""
        ts = tenseal()
        vector = np.asarray(values, dtype=np.float64)
        if vector.ndim != 1 or not np.all(np.isfinite(vector)):
            raise DpfedInputError("only a finite one-dimensional vector can be encrypted")
        return [
            ts.ckks_vector(self.context, chunk).serialize() for chunk in _chunks(vector, self.slots)
        ]

    def load(self, ciphertexts: list[bytes]) -> list[Any]:
        """Deserialise ciphertexts encrypted under this context."""
        ts = tenseal()
        return [ts.ckks_vector_from(self.context, c) for c in ciphertexts]


class KeyHolder:
    """A party's own CKKS key pair (secret key kept in this object only, or in the file a
    networked party keeps it in, :meth:`secret_bytes`).

    Parameters
    ----------
    secret : bytes or None
        A kept key pair (:meth:`secret_bytes`); None: a fresh one.
    levels : int
        Multiplicative levels of a fresh key pair (:func:`parameters`; a kept one has its own).
    """

    def __init__(self, secret: bytes | None = None, levels: int = 2) -> None:
        ts = tenseal()
        if secret is not None:
            try:
                context = ts.context_from(secret)
            except Exception as exc:  # SEAL's errors for bytes that are not a context
                raise DpfedInputError(f"not a serialised CKKS key pair: {exc}") from None
            if not context.has_secret_key() or context.galois_keys() is None:
                raise DpfedInputError("the serialised CKKS context holds no secret key")
        else:
            ring, bits = parameters(levels)
            context = ts.context(
                ts.SCHEME_TYPE.CKKS, poly_modulus_degree=ring, coeff_mod_bit_sizes=list(bits)
            )
            context.global_scale = 2.0**SCALE_BITS
            context.generate_galois_keys()
        self._context = context

    def __reduce__(self) -> tuple[type[KeyHolder], tuple[bytes]]:
        """Pickled as its serialised key pair: the party's roles move whole to the process an
        engine runs them in (a Ray actor), secret key included, as its data do."""
        return (KeyHolder, (self.secret_bytes(),))

    def secret_bytes(self) -> bytes:
        """The whole key pair serialised, secret key included: for the owner's own
        owner-only file (a restarted party decrypts with the same key), never to be sent."""
        return bytes(
            self._context.serialize(
                save_public_key=True,
                save_secret_key=True,
                save_galois_keys=True,
                save_relin_keys=False,
            )
        )

    def public_bytes(self, rotations: bool = True) -> bytes:
        """The public key and Galois keys, serialised (no secret key: SEAL writes only what
        is asked for, and :meth:`PublicContext.from_bytes` refuses a context that has one).

        ``rotations=False`` leaves the Galois keys out: enough to encrypt, add and multiply by
        plaintexts (a fold of powers, :func:`fold_powers`), not to sum a vector's slots; 1 MB
        instead of 118 MB at ``N = 16384``."""
        return bytes(
            self._context.serialize(
                save_public_key=True,
                save_secret_key=False,
                save_galois_keys=rotations,
                save_relin_keys=False,
            )
        )

    @property
    def slots(self) -> int:
        """Values a ciphertext holds."""
        return context_slots(self._context)

    def encrypt(self, values: np.ndarray) -> list[bytes]:
        """Encrypt under the own key (shape ``(n,)`` -> serialised ciphertexts)."""
        return PublicContext(self._context).encrypt(values)

    def decrypt_sums(self, ciphertexts: list[bytes]) -> np.ndarray:
        """Slot 0 of each ciphertext (each holds one slot sum), shape ``(len(ciphertexts),)``.

        Only the first slot is read: the others hold the same sum with other rounding errors.
        """
        ts = tenseal()
        out = np.empty(len(ciphertexts))
        for i, data in enumerate(ciphertexts):
            vector = ts.ckks_vector_from(self._context, data)
            out[i] = vector.decrypt(self._context.secret_key())[0]
        return out


def combine_powers(powers: list[list[Any]], coefficients: list[np.ndarray]) -> list[Any]:
    r"""Chunks of :math:`\mathrm{Enc}(\sum_{m \ge 1} s^m \odot c_m + c_0)`.

    Parameters
    ----------
    powers : list of lists of ciphertexts
        ``powers[m - 1]`` holds the chunks of :math:`\mathrm{Enc}(s^m)`, :math:`m = 1..k`.
    coefficients : list of numpy.ndarray, ``k + 1`` arrays of shape (n,)
        :math:`c_0, \dots, c_k` (plaintext, the evaluator's own).

    Returns
    -------
    list of ciphertexts, one per chunk
    """
    if len(coefficients) != len(powers) + 1:
        raise DpfedInputError(
            f"{len(powers)} encrypted powers need {len(powers) + 1} coefficient vectors; "
            f"found {len(coefficients)}."
        )
    slots = int(powers[0][0].size())
    chunked = [_chunks(np.asarray(c, dtype=np.float64), slots) for c in coefficients]
    out = []
    for ci in range(len(powers[0])):
        acc = None
        for m, power in enumerate(powers, start=1):
            term = power[ci] * chunked[m][ci]
            acc = term if acc is None else acc + term
        out.append(acc + chunked[0][ci])
    return out


def fold_powers(powers: list[list[Any]], t: np.ndarray) -> list[list[Any]]:
    r"""Chunks of :math:`\mathrm{Enc}((s + t)^m)`, :math:`m = 1..k`, from those of
    :math:`\mathrm{Enc}(s^m)` and a party's own plaintext :math:`t`: by the binomial theorem,

    .. math::

        (s + t)^m = t^m + \sum_{a=1}^{m} \binom{m}{a}\, s^a \odot t^{m-a},

    plaintext products only, one multiplicative level. Every term is at most 1 in magnitude
    when :math:`|s| + |t| \le 1`, so the binomial factors do not magnify CKKS's error beyond
    that of a term.

    Parameters
    ----------
    powers : list of lists of ciphertexts
        ``powers[m - 1]`` holds the chunks of :math:`\mathrm{Enc}(s^m)`.
    t : numpy.ndarray, shape (n,)

    Returns
    -------
    list of lists of ciphertexts, shaped like ``powers``
    """
    degree = len(powers)
    slots = int(powers[0][0].size())
    t = np.asarray(t, dtype=np.float64)
    t_powers = [_chunks(t**e, slots) for e in range(degree + 1)]
    out: list[list[Any]] = []
    for m in range(1, degree + 1):
        folded = []
        for ci in range(len(powers[0])):
            acc = None
            for a in range(1, m + 1):
                factor = (np.asarray(t_powers[m - a][ci]) * math.comb(m, a)).tolist()
                term = powers[a - 1][ci] * factor
                acc = term if acc is None else acc + term
            assert acc is not None
            folded.append(acc + t_powers[m][ci])
        out.append(folded)
    return out


def transposed_product(
    chunks: list[Any],
    X: np.ndarray | sp.spmatrix,
    offset: np.ndarray | None = None,
) -> list[bytes]:
    r"""Serialised ciphertexts of :math:`(X^\top v)_j + o_j`, one per column (every slot
    holds it).

    Parameters
    ----------
    chunks : list of ciphertexts
        :math:`\mathrm{Enc}(v)`, :math:`v` of shape ``(n,)``, in :func:`chunk_count` chunks.
    X : numpy.ndarray or scipy.sparse matrix, shape (n, d)
        The evaluator's plaintext rows.
    offset : numpy.ndarray or None, shape (d,)
        Plaintext :math:`o` added inside the ciphertexts (the evaluator's own noise).

    Returns
    -------
    list of bytes, length d
    """
    n, d = X.shape
    slots = int(chunks[0].size()) if chunks else SLOTS
    if len(chunks) != chunk_count(n, slots):
        raise DpfedInputError(
            f"an encrypted vector of {n} rows has {chunk_count(n, slots)} chunks; found "
            f"{len(chunks)}."
        )
    dense = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    out = []
    for j in range(d):
        column = _chunks(dense[:, j], slots)
        acc = None
        for ci, chunk in enumerate(chunks):
            term = chunk * column[ci]
            acc = term if acc is None else acc + term
        assert acc is not None
        total = acc.sum()
        if offset is not None:
            total = total.add([float(offset[j])])
        out.append(bytes(total.serialize()))
    return out
