"""What the label holder does before its first broadcast, as steps of its role
(:class:`~dpfed.protocols.vertical.roles.LabelHolder`): a warm start (local-only ADMM on its
own block, nothing released) or, when its rows and labels are protected, the released start
(its noisy local model and the noisy dual of the central step from its scores alone).
"""

from __future__ import annotations

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.admm import dual_update, z_update
from dpfed.core.losses import Loss
from dpfed.core.regularizers import Regularizer
from dpfed.core.rows import Matrix
from dpfed.core.xupdate import LocalSolver
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.protocols.vertical.mechanisms import (
    DualRelease,
    PartyMechanism,
    SoundMechanism,
    ledger_event,
)
from dpfed.protocols.vertical.weighting import fit_local_model
from dpfed.runtime.messages import ProtocolError

__all__ = ["LOCAL_MODEL_TOLERANCE", "LabelHolderStart"]

#: A protected label holder's local model is solved to a gradient norm of this times ``L R``
#: (the slack enters its sensitivity).
LOCAL_MODEL_TOLERANCE = 1e-3


class LabelHolderStart:
    """The label holder's steps before its first broadcast: the state below is the role's.

    Attributes
    ----------
    warm_start_rounds : int
        Rounds of local-only ADMM on its own block before the first broadcast.
    dual_release : DualRelease or None
        Protects its rows and labels by perturbing the broadcast dual (the released start).
    """

    name: str
    mechanism: PartyMechanism
    block: Matrix
    labels: np.ndarray
    loss: Loss
    regularizer: Regularizer
    reg_weight: float
    solver: LocalSolver
    rng: np.random.Generator
    n_samples: int
    model: np.ndarray
    released_scores: np.ndarray
    events: list[PrivacyEvent]
    rho: float
    z: np.ndarray
    dual: np.ndarray
    residual: np.ndarray
    warm_start_rounds: int
    dual_release: DualRelease | None

    def _released_start(self) -> None:
        """A protected label holder's round 0: it releases its regularised local model (output
        perturbation) and the noisy dual of the central step from its scores alone, so the
        first x-updates already fit what its own model leaves unexplained."""
        mechanism = self.mechanism
        if not isinstance(mechanism, SoundMechanism):
            raise ProtocolError(f"{self.name}: a protected label holder needs the sound mechanism.")
        slope = self.loss.lipschitz
        if slope is None or not np.isfinite(slope):
            raise DpfedInputError(
                f"a protected label holder's local model needs a loss of bounded slope. Found "
                f"{self.loss.name}."
            )
        mu = self.reg_weight * self.regularizer.strong_convexity + mechanism.prox_weight
        tolerance = LOCAL_MODEL_TOLERANCE * float(slope) * mechanism.bounds.row_norm
        # calibrated (and its premise checked) before the solve, which needs the same premise
        release = mechanism.local_model_release(self.loss, tolerance, self.n_samples)
        x = fit_local_model(self.block, self.labels, self.loss, mu, tolerance=tolerance)
        noisy = release.noisy(self.rng, x)
        self.events.append(ledger_event(self.name, 0, release, coordinates=x.size))
        self.model = noisy
        self.released_scores = np.asarray(self.block @ noisy).reshape(-1)
        zeros = np.zeros(self.n_samples)
        self.z = z_update(self.loss, self.released_scores, zeros, self.labels, self.rho)
        dual = dual_update(zeros, self.released_scores, self.z, self.rho)
        assert self.dual_release is not None
        released, event = self.dual_release.apply(dual, party=self.name, round=0, rng=self.rng)
        self.events.append(event)
        self.dual, self.residual = released, released / self.rho

    def _warm_start(self) -> None:
        """Local-only ADMM on the label holder's block: nothing leaves the label holder."""
        for _ in range(self.warm_start_rounds):
            target = self.released_scores - self.residual - self.dual / self.rho
            x = self.solver.solve(target, self.rho, self.model)
            s = np.asarray(self.block @ x).reshape(-1)
            self.model, self.released_scores = x, s
            self.z = z_update(self.loss, s, self.dual, self.labels, self.rho)
            self.dual = dual_update(self.dual, s, self.z, self.rho)
            self.residual = s - self.z
