r"""Where a party's noise comes from: a simulation seed, or a secret of the party's own.

Every privacy guarantee in dpfed assumes that the noise a party adds is unknown to everyone who
sees its releases. Two sources exist, and they are kept apart on purpose:

* **Simulation** (:func:`simulation_generator`): party ``m`` of ``M`` draws from stream ``m`` of
  ``numpy.random.SeedSequence(seed).spawn(M)``. A seeded run is reproducible bit for bit,
  which is what tests and research need. Whoever knows the seed can regenerate every party's
  noise and subtract it, so a shared seed gives **no privacy** between parties. In one process
  that costs nothing (the process sees every party's data anyway); across organisations it is
  allowed only as an explicit simulation.
* **A party's secret** (:func:`secret_generator`): a 32-byte secret drawn from the operating
  system's CSPRNG (:func:`new_secret`) keys a ChaCha20 stream cipher (``randomgen.ChaCha``, 20
  rounds, 256-bit key derived with HKDF-SHA256), whose keystream feeds
  ``numpy.random.Generator``. The noise is then as unpredictable as the keystream to anyone
  without the secret, and a party that keeps the secret (its work folder, owner-only) draws
  exactly the same noise again after a crash, which is what lets a restarted party replay its
  releases instead of drawing new ones.

Generator states are saved in checkpoints as JSON (:func:`generator_state`,
:func:`restore_generator_state`); a ChaCha state holds its key, so a checkpoint is as secret as
the party's secret file.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from dpfed._validation import DpfedInputError, check_int

__all__ = [
    "SECRET_BYTES",
    "generator_state",
    "new_secret",
    "restore_generator_state",
    "secret_generator",
    "simulation_generator",
]

#: Length of a party's noise secret in bytes.
SECRET_BYTES = 32


def new_secret() -> bytes:
    """A fresh noise secret: :data:`SECRET_BYTES` bytes from the operating system's CSPRNG."""
    return os.urandom(SECRET_BYTES)


def simulation_generator(seed: int | None, index: int, n_parties: int) -> np.random.Generator:
    """Party ``index``'s noise generator in a simulation: stream ``index`` of
    ``SeedSequence(seed).spawn(n_parties)`` (fresh operating-system entropy when ``seed`` is
    None).

    Anyone who knows ``seed`` can regenerate this stream: use it only where one process, or a
    simulation that declares it has no privacy, runs every party.
    """
    check_int("n_parties", n_parties, minimum=1)
    check_int("index", index, minimum=0)
    if index >= n_parties:
        raise DpfedInputError(f"index must be below n_parties = {n_parties}. Found {index}.")
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(n_parties)[index])


def _chacha(key: int) -> np.random.BitGenerator:
    try:
        from randomgen import ChaCha
    except ImportError:  # pragma: no cover - randomgen comes with the net extra
        raise DpfedInputError(
            'noise from a party\'s secret needs the randomgen package: pip install "dpfed[net]".'
        ) from None
    bit_generator: np.random.BitGenerator = ChaCha(key=key, counter=0, rounds=20)
    return bit_generator


def secret_generator(secret: bytes, purpose: str = "noise") -> np.random.Generator:
    r"""A noise generator keyed by ``secret``: ChaCha20 under
    :math:`k = \mathrm{HKDF\text{-}SHA256}(\text{secret}, \text{info} = \text{purpose})`.

    Parameters
    ----------
    secret : bytes
        At least 16 bytes, normally :data:`SECRET_BYTES` from :func:`new_secret`.
    purpose : str
        Separates independent streams drawn from one secret.

    Returns
    -------
    numpy.random.Generator
        The same secret and purpose give the same stream, on any machine with the same numpy.
    """
    if not isinstance(secret, bytes | bytearray) or len(secret) < 16:
        raise DpfedInputError(
            f"a noise secret must be at least 16 bytes. Found {type(secret).__name__} of "
            f"length {len(secret) if isinstance(secret, bytes | bytearray) else 'n/a'}."
        )
    key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=b"dpfed noise", info=purpose.encode()
    ).derive(bytes(secret))
    return np.random.Generator(_chacha(int.from_bytes(key, "little")))


def _to_json(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {"__array__": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if "__array__" in value:
            return np.array(value["__array__"], dtype=np.dtype(value["dtype"]))
        return {k: _from_json(v) for k, v in value.items()}
    return value


def generator_state(rng: np.random.Generator) -> dict[str, Any]:
    """The JSON-able state of ``rng``'s bit generator (arrays tagged with their dtype)."""
    state: dict[str, Any] = _to_json(rng.bit_generator.state)
    return state


def restore_generator_state(rng: np.random.Generator, state: dict[str, Any]) -> None:
    """Set ``rng``'s bit generator to ``state`` from :func:`generator_state`.

    Raises
    ------
    DpfedInputError
        If the state belongs to another kind of bit generator (a checkpoint of a simulation
        restored into a party that draws from its secret, or the reverse).
    """
    kind = state.get("bit_generator") if isinstance(state, dict) else None
    mine = rng.bit_generator.state.get("bit_generator")
    if kind != mine:
        raise DpfedInputError(
            f"the saved noise generator is a {kind!r}, but this party draws from a {mine!r} "
            "(the job's noise source changed since the checkpoint)."
        )
    rng.bit_generator.state = _from_json(state)
