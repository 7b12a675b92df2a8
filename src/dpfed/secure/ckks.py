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


def tenseal() -> Any:
    """The ``tenseal`` module, or a clear error naming the extra to install."""
    try:
        return importlib.import_module("tenseal")
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise DpfedInputError(
            "the secure vertical mode needs TenSEAL: pip install \"dpfed[secure]\""
        ) from exc


def chunk_count(n: int) -> int:
    """Ciphertexts of a vector of ``n`` values."""
    return -(-int(n) // SLOTS)


def _chunks(values: np.ndarray) -> list[list[float]]:
    n = values.shape[0]
    padded = np.zeros(chunk_count(n) * SLOTS)
    padded[:n] = values
    return [padded[i * SLOTS:(i + 1) * SLOTS].tolist() for i in range(chunk_count(n))]


@dataclass
class PublicContext:
    """Another party's public CKKS context: encrypt for it, compute on its ciphertexts.

    Attributes
    ----------
    context : tenseal.Context
        Without a secret key.
    """

    context: Any

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
        """Encrypt a vector (shape ``(n,)``) as ``ceil(n / 4096)`` serialised ciphertexts."""
        ts = tenseal()
        vector = np.asarray(values, dtype=np.float64)
        if vector.ndim != 1 or not np.all(np.isfinite(vector)):
            raise DpfedInputError("only a finite one-dimensional vector can be encrypted")
        return [ts.ckks_vector(self.context, chunk).serialize() for chunk in _chunks(vector)]

    def load(self, ciphertexts: list[bytes]) -> list[Any]:
        """Deserialise ciphertexts encrypted under this context."""
        ts = tenseal()
        return [ts.ckks_vector_from(self.context, c) for c in ciphertexts]


class KeyHolder:
    """A party's own CKKS key pair (secret key kept in this object only, or in the file a
    networked party keeps it in, :meth:`secret_bytes`)."""

    def __init__(self, secret: bytes | None = None) -> None:
        ts = tenseal()
        if secret is not None:
            try:
                context = ts.context_from(secret)
            except Exception as exc:  # SEAL's errors for bytes that are not a context
                raise DpfedInputError(f"not a serialised CKKS key pair: {exc}") from None
            if not context.has_secret_key() or context.galois_keys() is None:
                raise DpfedInputError("the serialised CKKS context holds no secret key")
        else:
            context = ts.context(ts.SCHEME_TYPE.CKKS, poly_modulus_degree=POLY_MODULUS_DEGREE,
                                 coeff_mod_bit_sizes=list(COEFF_MODULUS_BITS))
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
        return bytes(self._context.serialize(save_public_key=True, save_secret_key=True,
                                             save_galois_keys=True, save_relin_keys=False))

    def public_bytes(self) -> bytes:
        """The public key and Galois keys, serialised (no secret key)."""
        public = self._context.copy()
        public.make_context_public()
        return bytes(public.serialize(save_public_key=True, save_secret_key=False,
                                      save_galois_keys=True, save_relin_keys=False))

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
    chunked = [_chunks(np.asarray(c, dtype=np.float64)) for c in coefficients]
    out = []
    for ci in range(len(powers[0])):
        acc = None
        for m, power in enumerate(powers, start=1):
            term = power[ci] * chunked[m][ci]
            acc = term if acc is None else acc + term
        out.append(acc + chunked[0][ci])
    return out


def transposed_product(
    chunks: list[Any], X: np.ndarray | sp.spmatrix, offset: np.ndarray | None = None,
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
    if len(chunks) != chunk_count(n):
        raise DpfedInputError(
            f"an encrypted vector of {n} rows has {chunk_count(n)} chunks; found {len(chunks)}."
        )
    dense = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    out = []
    for j in range(d):
        column = _chunks(dense[:, j])
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
