"""Private set intersection of the parties' IDs as a networked job of its own, before an
aligned vertical job (:mod:`dpfed.runtime.alignment`)."""

from dpfed.protocols.psi_align.messages import PsiAnswer, PsiOrder, PsiRequest
from dpfed.protocols.psi_align.roles import AlignmentHolder, AlignmentSeeker

__all__ = ["AlignmentHolder", "AlignmentSeeker", "PsiAnswer", "PsiOrder", "PsiRequest"]
