r"""One auditor per mechanism: neighbouring data sets, the attacker's view, a test statistic.

An auditor plays the strongest attacker the protocol's trust model allows: it knows both
neighbouring data sets :math:`D, D'` (they differ in one record of the audited party, chosen
to move the release as far as the mechanism's analysis allows), every value the protocol
releases to the other parties, and every public input. It does not know the audited party's
noise. One *run* executes the protocol's own code (the roles, the secure sum) on :math:`D` or
:math:`D'` with fresh noise and reduces the attacker's view to one number, high for
:math:`D'`; :func:`dpfed.audit.statistics.epsilon_lower_bound` turns many runs into a lower
bound on epsilon.

For a Gaussian release :math:`r = \mu + N(0, \sigma^2 I)` whose means :math:`\mu_0, \mu_1` under
:math:`D, D'` the attacker can compute, the most powerful statistic (Neyman-Pearson) is the
log-likelihood ratio :math:`\langle r - (\mu_0 + \mu_1)/2,\ \mu_1 - \mu_0\rangle / \sigma^2`,
summed over the rounds of an adaptive sequence (each round's means computed from the values
released before it). Its distribution is :math:`N(\mp m/2, m)` with
:math:`m = \sum_k \|\mu_1^k - \mu_0^k\|^2/\sigma^2`, i.e. the releases are exactly
:math:`\sqrt m`-Gaussian DP: :attr:`AuditRun.precision` records :math:`m`, and
:func:`realised_epsilon` the epsilon it means (the analytic epsilon at the realised
sensitivity).

A *broken* configuration shows the auditor catches violations: ``"known-noise"`` gives the
attacker the audited party's noise (as a seed shared through a job file would),
``"sensitivity"`` calibrates the noise to the claimed sensitivity divided by ``factor``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.losses import get_loss
from dpfed.dca.calibration import calibrate_dca
from dpfed.dca.noise import client_noise
from dpfed.dca.secure_sum import secure_sum
from dpfed.privacy.accounting import gaussian_epsilon_heterogeneous
from dpfed.privacy.gaussian import GaussianRelease
from dpfed.protocols.consensus.calibration import calibrate_consensus
from dpfed.protocols.consensus.driver import ConsensusConfig, client_release
from dpfed.protocols.consensus.roles import ConsensusClient, ConsensusServer
from dpfed.protocols.vertical.driver import (
    VerticalConfig,
    make_vertical_role,
    planned_multipliers,
    vertical_setup,
)
from dpfed.protocols.vertical.mechanisms import SoundMechanism
from dpfed.protocols.vertical.messages import Scores

#: The ways an auditor can be run against a deliberately broken mechanism.
BROKEN = ("known-noise", "sensitivity")


@dataclass
class AuditRun:
    """One run: the statistic and the precision :math:`m` of what the attacker saw."""

    statistic: float
    precision: float


@dataclass
class Auditor(ABC):
    """Audit one mechanism at ``epsilon``, ``delta`` (the claim the tool would print).

    Attributes
    ----------
    epsilon, delta : float
        The target the mechanism is calibrated to.
    broken : str or None
        None, or one of :data:`BROKEN`.
    factor : float
        How much ``"sensitivity"`` understates the sensitivity.
    """

    epsilon: float
    delta: float
    broken: str | None = None
    factor: float = 100.0
    name: str = field(default="", init=False)
    neighbours: str = field(default="", init=False)
    statistic: str = field(default="", init=False)

    def __post_init__(self) -> None:
        if self.broken not in (None, *BROKEN):
            raise DpfedInputError(f"broken must be one of {list(BROKEN)} or None. "
                                  f"Found {self.broken!r}.")
        if not self.factor > 1:
            raise DpfedInputError(f"factor must be > 1. Found {self.factor}.")
        self.setup()

    @abstractmethod
    def setup(self) -> None:
        """Build the neighbouring data sets and calibrate the mechanism."""

    @abstractmethod
    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        """One run of the protocol on ``D`` (``neighbour`` 0) or ``D'`` (1)."""

    @abstractmethod
    def claimed_epsilon(self) -> float:
        """The epsilon the tool prints for the audited configuration."""


def realised_epsilon(precision: float, delta: float) -> float:
    """Epsilon of :math:`\\sqrt{m}`-Gaussian DP at ``delta`` (0 for ``m = 0``)."""
    if precision <= 0:
        return 0.0
    return gaussian_epsilon_heterogeneous([1.0 / math.sqrt(precision)], delta)


def _llr(observed: np.ndarray, mean0: np.ndarray, mean1: np.ndarray,
         sigma: float) -> tuple[float, float]:
    """The Gaussian log-likelihood ratio of ``observed`` and the precision of the step."""
    diff = mean1 - mean0
    return (float(np.dot(observed - (mean0 + mean1) / 2.0, diff)) / sigma**2,
            float(np.dot(diff, diff)) / sigma**2)


def _unit_rows(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    X = rng.normal(size=(m, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


class ConsensusAuditor(Auditor):
    r"""Consensus ADMM's Gaussian mechanism (paper 002): client 0's uploads
    :math:`\tilde w_0^k = w_0^k + N(0, \sigma^2 I)`, every round, as the server receives them.

    Neighbours: client 0's last record has its label flipped (rows of norm 1, the clip), which
    moves the exact local minimiser along the record. The attacker follows the protocol with
    two shadow copies of client 0 (one per data set) fed the same global models and the same
    released uploads, so their exact minimisers are the release's two possible means in every
    round; the statistic is the summed log-likelihood ratio.
    """

    rounds: int = 3
    n_rows: int = 20
    n_features: int = 3

    def setup(self) -> None:
        self.name = "consensus-gaussian"
        self.neighbours = ("client 0's last record with its label flipped (rows of norm 1); "
                           f"{self.n_rows} records per client, 2 clients, {self.rounds} rounds")
        self.statistic = "log-likelihood ratio of client 0's uploads, summed over rounds"
        data = np.random.default_rng(2024)
        X = _unit_rows(data, self.n_rows, self.n_features)
        y = np.where(data.random(self.n_rows) < 0.5, -1.0, 1.0)
        y_flip = y.copy()
        y_flip[-1] = -y[-1]
        self.client_data = [(X, y), (X, y_flip)]
        self.other = (_unit_rows(data, self.n_rows, self.n_features),
                      np.where(data.random(self.n_rows) < 0.5, -1.0, 1.0))
        self.config = ConsensusConfig(mechanism="gaussian", epsilon=self.epsilon,
                                      delta=self.delta, iterations=self.rounds)
        z = calibrate_consensus(self.epsilon, self.delta, self.rounds).noise_multiplier
        self.release = client_release(self.config, z, 2, self.n_rows)
        if self.broken == "sensitivity":
            self.release = GaussianRelease.from_multiplier(
                "model", self.release.l2_sensitivity / self.factor, z)
        self.z = z

    def claimed_epsilon(self) -> float:
        return gaussian_epsilon_heterogeneous([self.z] * self.rounds, self.delta)

    def _client(self, name: str, data: tuple[np.ndarray, np.ndarray],
                release: GaussianRelease | None, rng: np.random.Generator) -> ConsensusClient:
        cfg = self.config
        return ConsensusClient(name, data[0], data[1], server="server",
                               loss=get_loss(cfg.loss), lam=cfg.lam, n_clients=2, rho=cfg.rho,
                               release=release, rng=rng)

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        seed = int(rng.integers(2**63))
        audited = self._client("c0", self.client_data[neighbour], self.release,
                               np.random.default_rng(seed))
        attacker_noise = np.random.default_rng(seed)  # used only when the noise is known
        other = self._client("c1", self.other, self.release, rng)
        shadows = [self._client("c0", data, None, rng) for data in self.client_data]
        server = ConsensusServer("server", ["c0", "c1"], n_features=self.n_features,
                                 rho=self.config.rho, max_rounds=self.rounds)
        statistic = precision = 0.0
        messages = server.start()
        while messages:
            uploads = []
            for message in messages:
                if message.recipient == "c1":
                    uploads += other.handle(message)
                    continue
                for shadow in shadows:
                    shadow.handle(message)
                sent = audited.handle(message)
                uploads += sent
                if not sent:
                    continue
                observed = sent[0].model
                if self.broken == "known-noise":
                    observed = observed - self.release.sample(attacker_noise, self.n_features)
                step, m = _llr(observed, shadows[0].exact, shadows[1].exact,
                               self.release.sigma)
                statistic = statistic + step
                precision = precision + (0.0 if self.broken == "known-noise" else m)
                for shadow in shadows:  # the dual update uses the released upload only
                    shadow.released = np.array(sent[0].model)
            messages = [out for upload in uploads for out in server.handle(upload)]
        return AuditRun(statistic, precision)


class SecureSumAuditor(Auditor):
    r"""The distributed Gaussian mechanism of the DCA secure sum (paper 004), as the leader
    sees it: the decoded sum :math:`\sum_i (z_i + \eta_i)`, computed by the secure sum itself
    (fixed-point encoding, shares, agreement).

    Neighbours: client 0 holds :math:`0` or a vector of norm ``l2_sensitivity`` (1). The
    attacker knows every other client's vector and, as the calibration allows, the noise of
    ``tolerated`` colluding clients; the statistic is the log-likelihood ratio of what is left.
    """

    n_clients: int = 10
    tolerated: int = 2
    dim: int = 4

    def setup(self) -> None:
        self.name = "secure-sum-gaussian"
        self.neighbours = (f"client 0's vector 0 or e_1 (l2 sensitivity 1); {self.n_clients} "
                           f"clients, {self.tolerated} colluding with the attacker, 3 compute "
                           "nodes")
        self.statistic = "log-likelihood ratio of the sum minus every known term"
        calibrated = calibrate_dca(self.epsilon, self.delta, 1.0, self.n_clients, self.tolerated)
        self.calibration = calibrated
        sensitivity = 1.0 / self.factor if self.broken == "sensitivity" else 1.0
        self.client_std = (calibrated.client_std * sensitivity)
        data = np.random.default_rng(2025)
        self.others = data.normal(size=(self.n_clients - 1, self.dim))
        self.targets = [np.zeros(self.dim), np.eye(self.dim)[0]]

    def claimed_epsilon(self) -> float:
        return float(self.calibration.epsilon)

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        seed = int(rng.integers(2**63))
        values = np.vstack([self.targets[neighbour], self.others])
        result = secure_sum(values, noise_std=self.client_std, rng=seed, compute_nodes=3,
                            tolerated=self.tolerated)
        # colluders' noise; with a shared seed, every client's (then the sum is exact)
        known_noise = range(self.n_clients) if self.broken == "known-noise" \
            else range(1, 1 + self.tolerated)
        known = self.others.sum(axis=0) + sum(
            client_noise(seed, i, self.dim, self.client_std) for i in known_noise)
        sigma = self.client_std * math.sqrt(self.n_clients - self.tolerated)
        observed = np.asarray(result.total) - known
        statistic, precision = _llr(observed, self.targets[0], self.targets[1], sigma)
        return AuditRun(statistic, 0.0 if self.broken == "known-noise" else precision)


class VerticalSoundAuditor(Auditor):
    r"""The vertical protocol's sound mechanism: a passive party's released scores
    :math:`\tilde u = \mathrm{clip}(D \tilde x) + N(0, \sigma_u^2 I)` as the label holder
    receives them, in a job of two rounds (round 1 releases model noise and scores; the last
    round releases no scores), passive weighting off.

    Neighbours: the passive party's last row is 0 or a row of the clip norm along the
    direction of its exact first x-update on :math:`D` (which the attacker computes from the
    public broadcast), so that row's score is as large as the model allows. Before clipping the
    released scores are Gaussian, :math:`N(D x,\ \sigma_x^2 D D^\top + \sigma_u^2 I)` with
    :math:`x` the exact x-update, and the attacker knows both :math:`D` and :math:`x` for
    either data set: the statistic is that Gaussian log-likelihood ratio (exact while no score
    reaches the clip). The claim also pays for the model releases, which the label holder
    does not see.
    """

    n_rows: int = 200
    n_features: int = 4

    def setup(self) -> None:
        self.name = "vertical-sound"
        self.neighbours = ("the passive party's last row: 0, or a row of the clip norm along "
                           f"its first exact x-update; {self.n_rows} rows, 2 parties")
        self.statistic = "the released score of the replaced row"
        data = np.random.default_rng(2026)
        self.holder_block = _unit_rows(data, self.n_rows, self.n_features)
        X = _unit_rows(data, self.n_rows, self.n_features)
        w = data.normal(size=self.n_features)
        margin = self.holder_block @ data.normal(size=self.n_features) + X @ w
        self.labels = np.where(margin + 0.3 * data.normal(size=self.n_rows) > 0, 1.0, -1.0)
        self._roles: dict[tuple[int, bytes], tuple[Any, Any, Any]] = {}
        self.config = VerticalConfig(mechanism="sound", epsilon=self.epsilon, delta=self.delta,
                                     iterations=2, passive_weighting=False).validated()
        self.setup_ = vertical_setup(self.config, [self.n_features] * 2, self.n_rows)
        X0 = X.copy()
        X0[-1] = 0.0
        exact = self._passive(X0, np.random.default_rng(0), noiseless=True)
        direction = exact / max(np.linalg.norm(exact), 1e-12)
        X1 = X0.copy()
        X1[-1] = direction * self.setup_.mechanisms[1].bounds.row_norm
        self.blocks = [X0, X1]
        self.claim = float(gaussian_epsilon_heterogeneous(planned_multipliers(self.setup_, 1),
                                                          self.delta))
        self.exact = [exact, self._passive(X1, np.random.default_rng(0), noiseless=True)]
        if self.broken == "sensitivity":  # the noise of a sensitivity `factor` times smaller
            sound = self.setup_.mechanisms[1]
            assert isinstance(sound, SoundMechanism)
            weaker = SoundMechanism(
                bounds=sound.bounds, reg_weight=sound.reg_weight,
                model_multiplier=sound.model_multiplier / self.factor,
                scores_multiplier=sound.scores_multiplier / self.factor,
                score_rounds=sound.score_rounds,
            )
            self.setup_ = replace(self.setup_, mechanisms=[self.setup_.mechanisms[0], weaker])
            self._passive(X0, np.random.default_rng(0), noiseless=True)  # readies `weaker`
        self.statistic = "Gaussian log-likelihood ratio of the released scores"
        sound = self.setup_.mechanisms[1]
        assert isinstance(sound, SoundMechanism)
        model_release, scores_release = sound.releases(self.setup_.config.rho)
        self.densities = []
        for block, x in zip(self.blocks, self.exact, strict=True):
            cov = model_release.sigma**2 * block @ block.T \
                + scores_release.sigma**2 * np.eye(self.n_rows)
            chol = np.linalg.cholesky(cov)
            whiten = np.linalg.inv(chol)  # once: a run is then a matrix-vector product
            self.densities.append((block @ x, whiten, 2.0 * np.sum(np.log(np.diag(chol)))))

    def _log_density(self, which: int, r: np.ndarray) -> float:
        mean, whiten, logdet = self.densities[which]
        z = whiten @ (r - mean)
        return -0.5 * float(z @ z) - 0.5 * logdet

    def claimed_epsilon(self) -> float:
        return self.claim

    def _passive(self, block: np.ndarray, rng: np.random.Generator, *,
                 noiseless: bool = False) -> np.ndarray:
        """Round 1 of the passive party on ``block``: its released scores (or, noiseless, its
        exact x-update). The roles are built once per block and reset to their initial state
        (the protocol's own checkpoint) for every run."""
        key = (id(self.setup_), block.tobytes())
        if key not in self._roles:
            holder = make_vertical_role(self.setup_, 0, ["label", "bank"], self.holder_block,
                                        rng=np.random.default_rng(1), labels=self.labels)
            broadcast = next(m for m in holder.start() if m.recipient == "bank")
            role = make_vertical_role(self.setup_, 1, ["label", "bank"], block,
                                      rng=np.random.default_rng(0))
            self._roles[key] = (broadcast, role, role.state_dict())
        broadcast, passive, (arrays, meta) = self._roles[key]
        passive.load_state_dict(arrays, meta)
        passive.rng = rng
        if noiseless:
            mech = passive.mechanism
            target = mech.clip_target(passive.released_scores - broadcast.residual
                                      - broadcast.dual / broadcast.rho)
            return passive.solver.solve(target, broadcast.rho, passive.model,
                                        tau=mech.prox_weight, center=passive.model)
        scores = passive.handle(broadcast)
        message = next(m for m in scores if isinstance(m, Scores))
        return np.asarray(message.scores)

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        seed = int(rng.integers(2**63))
        released = self._passive(self.blocks[neighbour], np.random.default_rng(seed))
        if self.broken == "known-noise":
            # the attacker holds the party's seed: it replays the release on both data sets
            # and says which one it matches
            replays = [self._passive(block, np.random.default_rng(seed))
                       for block in self.blocks]
            distance = [float(np.linalg.norm(released - r)) for r in replays]
            return AuditRun(distance[0] - distance[1], 0.0)
        return AuditRun(self._log_density(1, released) - self._log_density(0, released), 0.0)


#: Mechanism name -> its auditor class.
AUDITORS: dict[str, Callable[..., Auditor]] = {
    "consensus-gaussian": ConsensusAuditor,
    "secure-sum-gaussian": SecureSumAuditor,
    "vertical-sound": VerticalSoundAuditor,
}


def get_auditor(name: str, **kwargs: object) -> Auditor:
    """The auditor of mechanism ``name``."""
    if name not in AUDITORS:
        raise DpfedInputError(f"--mechanism must be one of {sorted(AUDITORS)}. Found {name!r}.")
    return AUDITORS[name](**kwargs)


__all__ = ["AUDITORS", "BROKEN", "AuditRun", "Auditor", "get_auditor", "realised_epsilon"]
