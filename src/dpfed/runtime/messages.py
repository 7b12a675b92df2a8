"""Typed messages shared by every protocol: who sent it, to whom, in which round."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


class ProtocolError(RuntimeError):
    """A message arrived that the protocol does not expect at this stage."""


@dataclass(frozen=True)
class Message:
    """Base of every protocol message.

    Attributes
    ----------
    sender, recipient : str
        Party names.
    round : int
        Protocol round the message belongs to.
    """

    sender: str
    recipient: str
    round: int

    def arrays(self) -> dict[str, np.ndarray]:
        """The array payloads of the message, by field name."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if isinstance(getattr(self, f.name), np.ndarray)
        }


def bytes_as_words(raw: bytes) -> np.ndarray:
    """Bytes as a message field: padded with zeros to a multiple of 8, viewed as int64 (the
    wire format carries arrays, not bytes); :func:`words_as_bytes` reverses it."""
    padded = raw + b"\x00" * (-len(raw) % 8)
    return np.frombuffer(padded, dtype="<i8").copy()


def words_as_bytes(words: np.ndarray, length: int) -> bytes:
    """The ``length`` bytes of :func:`bytes_as_words`.

    Raises
    ------
    ProtocolError
        If ``length`` does not fit the words or the padding is not zeros.
    """
    raw = np.ascontiguousarray(words, dtype="<i8").tobytes()
    if not 0 <= length <= len(raw) or any(raw[length:]):
        raise ProtocolError(f"{length} bytes do not fit {len(raw)} bytes of words")
    return raw[:length]
