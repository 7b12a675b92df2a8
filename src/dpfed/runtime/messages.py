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
