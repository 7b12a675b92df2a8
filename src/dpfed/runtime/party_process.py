"""What a party process (:mod:`dpfed.runtime.party`) shares with the collaborators of its node:
its exit statuses and its log (one logger, ``dpfed.runtime.party``, whichever part speaks)."""

from __future__ import annotations

import logging

from dpfed.runtime.logs import process_logger

__all__ = ["EXIT_ABORTED", "EXIT_FINISHED", "EXIT_IDLE", "PARTY_LOGGER", "party_log"]

#: Exit statuses of ``dpfed party``.
EXIT_FINISHED, EXIT_ABORTED, EXIT_IDLE = 0, 1, 3

#: The logger every part of a party process logs to.
PARTY_LOGGER = "dpfed.runtime.party"


def party_log(name: str, text: str, level: int = logging.INFO) -> None:
    """Log ``text`` at ``level`` as party ``name`` on :data:`PARTY_LOGGER`.

    Parameters
    ----------
    name : str
        The party speaking (shown with every line).
    text : str
    level : int, default logging.INFO
    """
    process_logger(PARTY_LOGGER, name).log(level, text)
