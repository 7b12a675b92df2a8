"""The three messages of an alignment job: request, answer, order (all in round 0)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpfed.runtime.messages import Message
from dpfed.runtime.wire import register_message


@register_message
@dataclass(frozen=True)
class PsiRequest(Message):
    """Label holder -> party: its IDs of one ``part`` (``"train"`` or ``"test"``) encrypted
    under its PSI key (:meth:`dpfed.data.psi.PsiSeeker.request`), ``size`` of them. ``blob``
    holds the serialised request padded with zeros to a multiple of 8, viewed as int64;
    ``nbytes`` is its length."""

    part: str
    size: int
    blob: np.ndarray
    nbytes: int


@register_message
@dataclass(frozen=True)
class PsiAnswer(Message):
    """Party -> label holder: its setup (its IDs under its key) and its response (the
    request re-encrypted under its key) for ``part``, and what the label holder needs to
    check and size the job: the party's encoded width and the SHA-256 of each column name
    its schema declares (``columns``, JSON, salted by the job id), so two parties declaring
    one column are refused without the names being sent (a name the label holder guesses it
    can still confirm by hashing it: column names are not treated as secret)."""

    part: str
    width: int
    columns: str
    setup: np.ndarray
    setup_nbytes: int
    response: np.ndarray
    response_nbytes: int


@register_message
@dataclass(frozen=True)
class PsiOrder(Message):
    """Label holder -> party: the rows every party holds of ``part``, as HMAC-SHA256 tags
    under a fresh order ``key`` (hex) in the agreed order (``tags``: 32 bytes each, viewed as
    int64, shape ``(4 n,)``), their ``digest`` (:func:`dpfed.data.psi.alignment_digest`) and
    every party's width in job-file order (``widths``, JSON). The party keeps its IDs whose
    tags are listed, in the tags' order: no ID travels. A non-empty ``refusal`` says why the
    label holder refuses the alignment (too few shared rows, a column declared twice); the
    job then ends with that reason."""

    part: str
    key: str
    tags: np.ndarray
    n: int
    digest: str
    widths: str
    refusal: str


#: The messages of an alignment job (and of a prediction by ID), registered with the wire.
ALIGNMENT_MESSAGES = (PsiRequest, PsiAnswer, PsiOrder)
