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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.losses import get_loss
from dpfed.dca.calibration import calibrate_dca, calibrate_dca_discrete
from dpfed.dca.discrete_noise import client_discrete_noise, ring_sigma2
from dpfed.dca.fixedpoint import DEFAULT_FRACTIONAL_BITS
from dpfed.dca.noise import client_noise
from dpfed.dca.secure_sum import secure_sum
from dpfed.privacy.accounting import Release, gaussian_epsilon_heterogeneous, releases_epsilon
from dpfed.privacy.gaussian import GaussianRelease
from dpfed.protocols.bayes_linreg.linreg import fit_dp_linreg
from dpfed.protocols.bayes_linreg.sufficient_stats import row_statistics
from dpfed.protocols.consensus.calibration import calibrate_consensus
from dpfed.protocols.consensus.driver import ConsensusConfig, client_release
from dpfed.protocols.consensus.messages import GlobalModel
from dpfed.protocols.consensus.roles import ConsensusClient, ConsensusServer
from dpfed.protocols.decentralized.calibration import decentralized_total, dvp_noise, pvp_zeta
from dpfed.protocols.decentralized.roles import DecentralizedNode
from dpfed.protocols.vertical.calibration import sound_defaults
from dpfed.protocols.vertical.driver import (
    VerticalConfig,
    make_vertical_role,
    planned_multipliers,
    vertical_setup,
)
from dpfed.protocols.vertical.mechanisms import DualRelease, SoundMechanism
from dpfed.protocols.vertical.messages import Scores
from dpfed.protocols.vertical.weighting import fit_local_model
from dpfed.protocols.vertical_secure.driver import open_parties
from dpfed.protocols.vertical_secure.party import SecureParty, block_update
from dpfed.protocols.vertical_secure.setup import SecureSetup
from dpfed.protocols.vertical_secure.weighting import plain_statistics, weighting_request

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
    loss: str | None = None
    name: str = field(default="", init=False)
    neighbours: str = field(default="", init=False)
    statistic: str = field(default="", init=False)

    def __post_init__(self) -> None:
        if self.broken not in (None, *BROKEN):
            raise DpfedInputError(
                f"broken must be one of {list(BROKEN)} or None. Found {self.broken!r}."
            )
        if not self.factor > 1:
            raise DpfedInputError(f"factor must be > 1. Found {self.factor}.")
        losses = type(self).losses
        if self.loss is not None and self.loss not in losses:
            raise DpfedInputError(
                f"--loss {self.loss!r} is not a loss the audited mechanism accepts. Its losses: "
                f"{list(losses) or 'none (it has no loss option)'}."
            )
        self.setup()

    #: The losses the audited mechanism accepts under its privacy analysis, first the default
    #: (empty: the mechanism has no loss). A test walks the configurations the protocols
    #: accept and fails for one missing here.
    losses: ClassVar[tuple[str, ...]] = ()

    @property
    def loss_name(self) -> str:
        """The audited loss: ``loss``, or the mechanism's default."""
        if self.loss is not None:
            return self.loss
        if not type(self).losses:
            raise DpfedInputError("the audited mechanism has no loss.")
        return type(self).losses[0]

    @abstractmethod
    def setup(self) -> None:
        """Build the neighbouring data sets and calibrate the mechanism."""

    @abstractmethod
    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        """One run of the protocol on ``D`` (``neighbour`` 0) or ``D'`` (1)."""

    @abstractmethod
    def claimed_epsilon(self) -> float:
        """The epsilon the tool prints for the audited configuration."""

    def claimed_delta(self) -> float:
        """The delta of the claim (and of the bound)."""
        return self.delta

    def one_run(self, canaries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One run with ``canaries`` records each included with probability 1/2: the
        attacker's score of every canary (high: included) and which were included."""
        raise DpfedInputError(
            f"{self.name} has no one-run audit; one-run audits: {sorted(ONE_RUN)}."
        )


def realised_epsilon(precision: float, delta: float) -> float:
    """Epsilon of :math:`\\sqrt{m}`-Gaussian DP at ``delta`` (0 for ``m = 0``)."""
    if precision <= 0:
        return 0.0
    return gaussian_epsilon_heterogeneous([1.0 / math.sqrt(precision)], delta)


def _llr(
    observed: np.ndarray, mean0: np.ndarray, mean1: np.ndarray, sigma: float
) -> tuple[float, float]:
    """The Gaussian log-likelihood ratio of ``observed`` and the precision of the step."""
    diff = mean1 - mean0
    return (
        float(np.dot(observed - (mean0 + mean1) / 2.0, diff)) / sigma**2,
        float(np.dot(diff, diff)) / sigma**2,
    )


def _random_labels(data: np.random.Generator, n: int) -> np.ndarray:
    """``n`` labels in {-1, 1}, each with probability 1/2."""
    return np.where(data.random(n) < 0.5, -1.0, 1.0)


def _last_flipped(y: np.ndarray) -> list[np.ndarray]:
    """``[y, y']``: the labels and their neighbour, the last label flipped."""
    flipped = y.copy()
    flipped[-1] = -y[-1]
    return [y, flipped]


def _weaker(sound: SoundMechanism, factor: float) -> SoundMechanism:
    """``sound`` with noise multipliers ``factor`` times smaller: the noise of a sensitivity
    understated by ``factor``."""
    return SoundMechanism(
        bounds=sound.bounds,
        reg_weight=sound.reg_weight,
        model_multiplier=sound.model_multiplier / factor,
        scores_multiplier=sound.scores_multiplier / factor,
        score_rounds=sound.score_rounds,
    )


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

    losses = ("logistic", "smoothed_hinge", "sigmoid")
    rounds: int = 3
    n_rows: int = 20
    n_features: int = 3
    #: A weakly convex loss's worst case: the record count, penalty and the global model the
    #: attacker (as the server) sends, where flipping one label moves the exact local
    #: minimiser furthest against its bound (a scan of the centre; 7.5 times the convex-only
    #: sensitivity).
    weak_rows: int = 300
    weak_rho: float = 0.1
    weak_center: tuple[float, float] = (3.0, 0.0)

    def setup(self) -> None:
        self.name = "consensus-gaussian"
        loss = get_loss(self.loss_name)
        self.statistic = "log-likelihood ratio of client 0's uploads, summed over rounds"
        data = np.random.default_rng(2024)
        self.center: np.ndarray | None = None
        rho = ConsensusConfig().rho
        if loss.weak_convexity > 0:
            # every record the unit row e_1 labelled -1; the server sends a fixed global model
            self.n_rows, self.n_features, rho = self.weak_rows, 2, self.weak_rho
            X = np.zeros((self.n_rows, 2))
            X[:, 0] = 1.0
            labels = _last_flipped(-np.ones(self.n_rows))
            self.center = np.array(self.weak_center)
            self.neighbours = (
                f"client 0's last record with its label flipped; {self.n_rows} records e_1 "
                f"labelled -1, rho {rho:g}, the attacker as the server sending the global "
                f"model {tuple(self.weak_center)} every round, {self.rounds} rounds "
                f"({loss.name} loss)"
            )
        else:
            X = _unit_rows(data, self.n_rows, self.n_features)
            labels = _last_flipped(_random_labels(data, self.n_rows))
            self.neighbours = (
                "client 0's last record with its label flipped (rows of norm 1); "
                f"{self.n_rows} records per client, 2 clients, {self.rounds} rounds"
                + ("" if loss.name == "logistic" else f" ({loss.name} loss)")
            )
        self.client_data = [(X, y) for y in labels]
        self.other = (
            _unit_rows(data, self.n_rows, self.n_features),
            _random_labels(data, self.n_rows),
        )
        self.config = ConsensusConfig(
            mechanism="gaussian",
            epsilon=self.epsilon,
            delta=self.delta,
            iterations=self.rounds,
            loss=loss.name,
            rho=rho,
        ).validated()
        z = calibrate_consensus(self.epsilon, self.delta, self.rounds).noise_multiplier
        self.release = client_release(self.config, z, 2, self.n_rows)
        if self.broken == "sensitivity":
            self.release = GaussianRelease.from_multiplier(
                "model", self.release.l2_sensitivity / self.factor, z
            )
        self.z = z

    def claimed_epsilon(self) -> float:
        return releases_epsilon(
            [Release("gaussian", self.z, self.n_features)] * self.rounds, self.delta
        )

    def _client(
        self,
        name: str,
        data: tuple[np.ndarray, np.ndarray],
        release: GaussianRelease | None,
        rng: np.random.Generator,
    ) -> ConsensusClient:
        cfg = self.config
        return ConsensusClient(
            name,
            data[0],
            data[1],
            server="server",
            loss=get_loss(cfg.loss),
            lam=cfg.lam,
            n_clients=2,
            rho=cfg.rho,
            release=release,
            rng=rng,
        )

    def one_run(self, canaries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Client 0 holds ``canaries`` records, canary ``i`` the unit row :math:`e_i` with label
        +1 (included) or -1 (its neighbour): on its own axis, so the local problem separates by
        coordinate and coordinate ``i`` of the exact update depends on canary ``i`` alone. Two
        shadow copies of client 0, every label -1 and every label +1, fed the same global
        models and the released uploads, give both candidate means of every coordinate each
        round; the score of canary ``i`` is its log-likelihood ratio summed over the rounds."""
        included = rng.random(canaries) < 0.5
        data = np.random.default_rng(2030)
        rows = np.eye(canaries)
        other_data = (_unit_rows(data, canaries, canaries), _random_labels(data, canaries))
        release = client_release(self.config, self.z, 2, canaries)
        if self.broken == "sensitivity":
            release = GaussianRelease.from_multiplier(
                "model", release.l2_sensitivity / self.factor, self.z
            )
        seed = int(rng.integers(2**63))
        audited = self._client(
            "c0", (rows, np.where(included, 1.0, -1.0)), release, np.random.default_rng(seed)
        )
        attacker_noise = np.random.default_rng(seed)
        other = self._client("c1", other_data, release, rng)
        shadows = [
            self._client("c0", (rows, np.full(canaries, label)), None, rng) for label in (-1.0, 1.0)
        ]
        total = np.zeros(canaries)
        for observed, minus, plus in self._uploads(audited, other, shadows, canaries):
            if self.broken == "known-noise":
                clean = observed - release.noisy(attacker_noise, np.zeros(canaries))
                total += np.abs(clean - minus) - np.abs(clean - plus)
            else:
                total += (observed - (minus + plus) / 2.0) * (plus - minus)
        return total, included

    def _uploads(
        self,
        audited: ConsensusClient,
        other: ConsensusClient,
        shadows: list[ConsensusClient],
        n_features: int,
        center: np.ndarray | None = None,
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Run the protocol with client 0 ``audited``; yield each of its uploads with the two
        shadows' exact updates of that round (the shadows then take the released upload, which
        client 0's dual update reads). With a ``center`` the attacker plays the server and
        sends it as the global model of every round."""
        if center is not None:
            for k in range(self.rounds):
                message = GlobalModel("server", "c0", k, model=center.copy())
                for shadow in shadows:
                    shadow.handle(message)
                observed = np.array(audited.handle(message)[0].model)
                yield observed, shadows[0].exact, shadows[1].exact
                for shadow in shadows:
                    shadow.released = observed
            return
        server = ConsensusServer(
            "server",
            ["c0", "c1"],
            n_features=n_features,
            rho=self.config.rho,
            max_rounds=self.rounds,
        )
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
                if sent:
                    observed = np.array(sent[0].model)
                    yield observed, shadows[0].exact, shadows[1].exact
                    for shadow in shadows:
                        shadow.released = observed
            messages = [out for upload in uploads for out in server.handle(upload)]

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        seed = int(rng.integers(2**63))
        audited = self._client(
            "c0", self.client_data[neighbour], self.release, np.random.default_rng(seed)
        )
        attacker_noise = np.random.default_rng(seed)  # used only when the noise is known
        other = self._client("c1", self.other, self.release, rng)
        shadows = [self._client("c0", data, None, rng) for data in self.client_data]
        statistic = precision = 0.0
        for observed, mean0, mean1 in self._uploads(
            audited, other, shadows, self.n_features, self.center
        ):
            if self.broken == "known-noise":
                observed = observed - self.release.noisy(attacker_noise, np.zeros(self.n_features))
            step, m = _llr(observed, mean0, mean1, self.release.sigma)
            statistic = statistic + step
            precision = precision + (0.0 if self.broken == "known-noise" else m)
        return AuditRun(statistic, precision)


class SecureSumAuditor(Auditor):
    r"""The distributed Gaussian mechanism of the DCA secure sum (paper 004), as the leader
    sees it: the decoded sum :math:`\sum_i (z_i + \eta_i)`, computed by the secure sum itself
    (fixed-point encoding, shares, agreement), with the clients' float noise.

    Neighbours: client 0 holds :math:`0` or a vector of norm ``l2_sensitivity`` (1). The
    attacker knows every other client's vector and, as the calibration allows, the noise of
    ``tolerated`` colluding clients; the statistic is the log-likelihood ratio of what is left.
    """

    n_clients: int = 10
    tolerated: int = 2
    dim: int = 4
    noise: str = "gaussian"

    def setup(self) -> None:
        self.name = f"secure-sum-{self.noise}"
        self.neighbours = (
            f"client 0's vector 0 or e_1 (l2 sensitivity 1); {self.n_clients} "
            f"clients, {self.tolerated} colluding with the attacker, 3 compute "
            "nodes"
        )
        self.statistic = "log-likelihood ratio of the sum minus every known term"
        self.client_std = self._client_std(self.n_clients, self.dim)
        data = np.random.default_rng(2025)
        self.others = data.normal(size=(self.n_clients - 1, self.dim))
        self.targets = [np.zeros(self.dim), np.eye(self.dim)[0]]

    def _calibrated_std(self, n_clients: int, dim: int) -> float:
        """Each client's noise std calibrated to the claim (before any break)."""
        return float(
            calibrate_dca(self.epsilon, self.delta, 1.0, n_clients, self.tolerated).client_std
        )

    def _client_std(self, n_clients: int, dim: int) -> float:
        scale = 1.0 / self.factor if self.broken == "sensitivity" else 1.0
        return self._calibrated_std(n_clients, dim) * scale

    def _known_noise(self, seed: int, client: int, dim: int, std: float) -> np.ndarray:
        """Client ``client``'s noise, in real units, as a colluder knows it."""
        return client_noise(seed, client, dim, std)

    def claimed_epsilon(self) -> float:
        return float(self.epsilon)  # calibrated to the target

    def one_run(self, canaries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``canaries`` more clients, canary ``i`` holding :math:`e_i` (included) or 0, in a sum
        of dimension ``canaries``; the score of canary ``i`` is coordinate ``i`` of the sum
        minus every known term."""
        included = rng.random(canaries) < 0.5
        others = np.random.default_rng(2025).normal(size=(self.n_clients, canaries))
        values = np.vstack([np.diag(included.astype(float)), others])
        n = values.shape[0]
        std = self._client_std(n, canaries)
        seed = int(rng.integers(2**63))
        result = secure_sum(
            values,
            noise_std=std,
            rng=seed,
            compute_nodes=3,
            tolerated=self.tolerated,
            noise=self.noise,
        )
        known_noise = (
            range(n) if self.broken == "known-noise" else range(canaries, canaries + self.tolerated)
        )
        known = others.sum(axis=0) + sum(
            self._known_noise(seed, i, canaries, std) for i in known_noise
        )
        return np.asarray(result.total) - known, included

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        seed = int(rng.integers(2**63))
        values = np.vstack([self.targets[neighbour], self.others])
        result = secure_sum(
            values,
            noise_std=self.client_std,
            rng=seed,
            compute_nodes=3,
            tolerated=self.tolerated,
            noise=self.noise,
        )
        # colluders' noise; with a shared seed, every client's (then the sum is exact)
        known_noise = (
            range(self.n_clients) if self.broken == "known-noise" else range(1, 1 + self.tolerated)
        )
        known = self.others.sum(axis=0) + sum(
            self._known_noise(seed, i, self.dim, self.client_std) for i in known_noise
        )
        sigma = self.client_std * math.sqrt(self.n_clients - self.tolerated)
        observed = np.asarray(result.total) - known
        statistic, precision = _llr(observed, self.targets[0], self.targets[1], sigma)
        return AuditRun(statistic, 0.0 if self.broken == "known-noise" else precision)


class SecureSumDiscreteAuditor(SecureSumAuditor):
    r""":class:`SecureSumAuditor` of the exact noise (the networked job's default): every
    client's :math:`\mathcal N_{\mathbb Z}(0, s^2)` in the ring, calibrated by the distributed
    discrete Gaussian's Rényi-DP bound (:func:`dpfed.dca.calibration.calibrate_dca_discrete`).
    """

    noise: str = "discrete"

    def _calibrated_std(self, n_clients: int, dim: int) -> float:
        return float(
            calibrate_dca_discrete(
                self.epsilon,
                self.delta,
                1.0,
                n_clients,
                self.tolerated,
                dim,
                DEFAULT_FRACTIONAL_BITS,
            )
        )

    def _known_noise(self, seed: int, client: int, dim: int, std: float) -> np.ndarray:
        s2 = ring_sigma2(std, DEFAULT_FRACTIONAL_BITS)
        ring = client_discrete_noise(seed, client, dim, s2)
        return np.ldexp(ring.astype(np.float64), -DEFAULT_FRACTIONAL_BITS)


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

    losses = ("logistic", "squared", "smoothed_hinge", "sigmoid")
    n_rows: int = 200
    n_features: int = 4

    def setup(self) -> None:
        self.name = "vertical-sound"
        self.neighbours = (
            "the passive party's last row: 0, or a row of the clip norm along "
            f"its first exact x-update; {self.n_rows} rows, 2 parties"
        )
        self.statistic = "the released score of the replaced row"
        X = self._data("sound")
        X0 = X.copy()
        X0[-1] = 0.0
        exact = self._passive(X0, np.random.default_rng(0), noiseless=True)
        direction = exact / max(np.linalg.norm(exact), 1e-12)
        X1 = X0.copy()
        X1[-1] = direction * self.setup_.mechanisms[1].bounds.row_norm
        self.blocks = [X0, X1]
        self.claim = float(
            releases_epsilon(planned_multipliers(self.setup_, 1, X.shape[1]), self.delta)
        )
        self.exact = [exact, self._passive(X1, np.random.default_rng(0), noiseless=True)]
        if self.broken == "sensitivity":  # the noise of a sensitivity `factor` times smaller
            sound = self.setup_.mechanisms[1]
            assert isinstance(sound, SoundMechanism)
            weaker = _weaker(sound, self.factor)
            self.setup_ = replace(self.setup_, mechanisms=[self.setup_.mechanisms[0], weaker])
            self._passive(X0, np.random.default_rng(0), noiseless=True)  # readies `weaker`
        self.statistic = "Gaussian log-likelihood ratio of the released scores"
        sound = self.setup_.mechanisms[1]
        assert isinstance(sound, SoundMechanism)
        model_release, scores_release = sound.releases(self.setup_.config.rho)
        self.densities = []
        for block, x in zip(self.blocks, self.exact, strict=True):
            cov = model_release.sigma**2 * block @ block.T + scores_release.sigma**2 * np.eye(
                self.n_rows
            )
            chol = np.linalg.cholesky(cov)
            whiten = np.linalg.inv(chol)  # once: a run is then a matrix-vector product
            self.densities.append((block @ x, whiten, 2.0 * np.sum(np.log(np.diag(chol)))))

    def one_run(self, canaries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The passive party's block with ``canaries`` more rows, canary ``i`` a row of the
        clip norm along the first exact x-update (included) or 0; the score of a canary is its
        released score (minus its noise when the noise is known)."""
        if type(self) is not VerticalSoundAuditor:
            return super().one_run(canaries, rng)
        included = rng.random(canaries) < 0.5
        base = self.blocks[0]
        n = base.shape[0] + canaries
        setup = vertical_setup(self.config, [self.n_features] * 2, n)
        holder_block = np.vstack(
            [self.holder_block, _unit_rows(np.random.default_rng(5), canaries, self.n_features)]
        )
        labels = np.concatenate([self.labels, np.where(np.arange(canaries) % 2, 1.0, -1.0)])
        sound = setup.mechanisms[1]
        assert isinstance(sound, SoundMechanism)
        direction = self.exact[0] / max(np.linalg.norm(self.exact[0]), 1e-12)
        canary_rows = np.outer(included, direction) * sound.bounds.row_norm
        block = np.vstack([base, canary_rows])
        if self.broken == "sensitivity":
            weaker = _weaker(sound, self.factor)
            setup = replace(setup, mechanisms=[setup.mechanisms[0], weaker])
        seed = int(rng.integers(2**63))
        holder = make_vertical_role(
            setup, 0, ["label", "bank"], holder_block, rng=np.random.default_rng(1), labels=labels
        )
        broadcast = next(m for m in holder.start() if m.recipient == "bank")
        passive = make_vertical_role(
            setup, 1, ["label", "bank"], block, rng=np.random.default_rng(seed)
        )
        scores = next(m for m in passive.handle(broadcast) if isinstance(m, Scores)).scores
        released = np.asarray(scores)[base.shape[0] :]
        if self.broken == "known-noise":  # the attacker regenerates the scores' noise
            replay = np.random.default_rng(seed)
            model_release, scores_release = passive.mechanism.releases(broadcast.rho)
            model_release.noisy(replay, np.zeros(self.n_features))
            clean = released - scores_release.noisy(replay, np.zeros(n))[base.shape[0] :]
            return np.abs(clean), included  # a canary's score is 0 exactly when it is absent
        return released, included

    def _data(self, mechanism: str) -> np.ndarray:
        """The label holder's block and labels, the job's setup; the passive party's rows."""
        data = np.random.default_rng(2026)
        self.holder_block = _unit_rows(data, self.n_rows, self.n_features)
        X = _unit_rows(data, self.n_rows, self.n_features)
        w = data.normal(size=self.n_features)
        margin = self.holder_block @ data.normal(size=self.n_features) + X @ w
        self.labels = np.where(margin + 0.3 * data.normal(size=self.n_rows) > 0, 1.0, -1.0)
        self._roles: dict[tuple[int, bytes], tuple[Any, Any, Any]] = {}
        self.config = VerticalConfig(
            mechanism=mechanism,
            epsilon=self.epsilon,
            delta=self.delta,
            iterations=2,
            loss=self.loss_name,
            passive_weighting=False,
        ).validated()
        if self.loss_name != type(self).losses[0]:
            self.neighbours += f" ({self.loss_name} loss at the label holder)"
        self.setup_ = vertical_setup(self.config, [self.n_features] * 2, self.n_rows)
        return X

    def _log_density(self, which: int, r: np.ndarray) -> float:
        mean, whiten, logdet = self.densities[which]
        z = whiten @ (r - mean)
        return -0.5 * float(z @ z) - 0.5 * logdet

    def claimed_epsilon(self) -> float:
        return self.claim

    def _passive(
        self, block: np.ndarray, rng: np.random.Generator, *, noiseless: bool = False
    ) -> np.ndarray:
        """Round 1 of the passive party on ``block``: its released scores (or, noiseless, its
        exact x-update). The roles are built once per block and reset to their initial state
        (the protocol's own checkpoint) for every run."""
        key = (id(self.setup_), block.tobytes())
        if key not in self._roles:
            holder = make_vertical_role(
                self.setup_,
                0,
                ["label", "bank"],
                self.holder_block,
                rng=np.random.default_rng(1),
                labels=self.labels,
            )
            broadcast = next(m for m in holder.start() if m.recipient == "bank")
            role = make_vertical_role(
                self.setup_, 1, ["label", "bank"], block, rng=np.random.default_rng(0)
            )
            self._roles[key] = (broadcast, role, role.state_dict())
        broadcast, passive, (arrays, meta) = self._roles[key]
        passive.load_state_dict(arrays, meta)
        passive.rng = rng
        if noiseless:
            mech = passive.mechanism
            target = mech.clip_target(
                passive.released_scores - broadcast.residual - broadcast.dual / broadcast.rho
            )
            return passive.solver.solve(
                target, broadcast.rho, passive.model, tau=mech.prox_weight, center=passive.model
            )
        scores = passive.handle(broadcast)
        message = next(m for m in scores if isinstance(m, Scores))
        return np.asarray(message.scores)

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        seed = int(rng.integers(2**63))
        released = self._passive(self.blocks[neighbour], np.random.default_rng(seed))
        if self.broken == "known-noise":
            # the attacker holds the party's seed: it replays the release on both data sets
            # and says which one it matches
            replays = [self._passive(block, np.random.default_rng(seed)) for block in self.blocks]
            distance = [float(np.linalg.norm(released - r)) for r in replays]
            return AuditRun(distance[0] - distance[1], 0.0)
        return AuditRun(self._log_density(1, released) - self._log_density(0, released), 0.0)


class VerticalPaperAuditor(VerticalSoundAuditor):
    r"""The vertical protocol's ``paper`` mechanism (Hu et al. 2020, eq. 10): the model noise
    :math:`\xi \sim N(0, \sigma^2 (D^\top D)^{+})` lives in the row space of the block, so
    the released scores :math:`D\tilde x = Dx + D\xi` lie in the column space of :math:`D`
    whatever the noise. Neighbours: the passive party's last (unit) row is replaced by
    another unit row. The
    statistic is the distance of the scores to the column space of :math:`D` minus that to
    the column space of :math:`D'`: under :math:`D` the first is 0 to rounding, so the two
    data sets are told apart on every run. The claim is the paper's Theorem 1 / Corollary 1
    figure, which dpfed prints as ``paper_epsilon`` and never as a guarantee.
    """

    def setup(self) -> None:
        if self.broken == "sensitivity":
            raise DpfedInputError(
                "the paper mechanism is audited as it is: --broken "
                "sensitivity applies to the sound mechanism."
            )
        self.name = "vertical-paper"
        self.neighbours = (
            f"the passive party's last unit row replaced by another; {self.n_rows} rows, 2 parties"
        )
        self.statistic = (
            "distance of the released scores to the column space of D minus "
            "that to the column space of D'"
        )
        X0 = self._data("paper")
        X1 = X0.copy()
        X1[-1] = np.ones(self.n_features) / math.sqrt(self.n_features)
        self.blocks = [X0, X1]
        self.claim = float(self.epsilon)  # the paper's formula, calibrated to the target
        self.bases = [np.linalg.qr(block)[0] for block in self.blocks]

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        if self.broken == "known-noise":
            return super().run(neighbour, rng)
        released = self._passive(self.blocks[neighbour], rng)
        residual = [float(np.linalg.norm(released - Q @ (Q.T @ released))) for Q in self.bases]
        return AuditRun(residual[0] - residual[1], 0.0)


class ProtectedLabelHolderAuditor(Auditor):
    r"""The vertical protocol's sound mechanism with the label holder protected
    (``protect_label_holder``): its round-0 releases, in a job of the rule's rounds (the last
    round releases nothing). The passive party receives the broadcast of round 0 (the noisy
    dual :math:`\tilde y` of the central step from the label holder's output-perturbed local
    model, and the residual :math:`\tilde y / \rho`); the attacker here also sees the
    output-perturbed local model :math:`\tilde x = x + N(0, \sigma_x^2 I)` itself (the label
    holder's final model, which the accounting charges as released).

    Neighbours: the label holder's last label flipped (rows of the clip norm). For a convex
    loss the rows are random; for a weakly convex one (the sigmoid) they are the worst case
    of its analysis: rows at 0, 120 and 240 degrees, every label +1, the ridge just above the
    loss's curvature floor :math:`wNR^2` (the smallest a job may have). The statistic sums
    the model's Gaussian log-likelihood ratio (the attacker computes the exact local models
    :math:`x_0, x_1` of both data sets) and the projection of the observed dual on the
    difference of its means (estimated by simulating the label holder on both data sets, 200
    runs of the attacker's own), scaled by :math:`1/\sigma_y^2`.
    """

    losses = ("logistic", "smoothed_hinge", "sigmoid")
    n_rows: int = 200
    n_features: int = 4
    simulations: int = 200
    #: rows of a weakly convex loss's worst case, and its ridge over the curvature floor
    weak_rows: int = 300
    weak_margin: float = 1.05

    def setup(self) -> None:
        self.name = "vertical-sound-label-holder"
        loss = get_loss(self.loss_name)
        data = np.random.default_rng(2029)
        bounds = None
        if loss.weak_convexity > 0:
            self.n_rows, self.n_features = self.weak_rows, 2
            angles = 2.0 * math.pi * np.arange(self.n_rows) / 3.0
            self.holder_block = np.column_stack([np.cos(angles), np.sin(angles)])
            y = np.ones(self.n_rows)
            rule = sound_defaults(
                self.epsilon,
                self.n_rows,
                protect_label_holder=True,
                loss_slope=float(loss.lipschitz),
            )
            floor = loss.weak_convexity * self.n_rows * rule.bounds.row_norm**2
            bounds = replace(rule.bounds, prox_weight=self.weak_margin * floor)
            self.neighbours = (
                f"the label holder's last label flipped; {self.n_rows} unit rows at 0, 120 "
                "and 240 degrees, every label +1, the ridge "
                f"{self.weak_margin:g} x the curvature floor wNR^2 ({loss.name} loss)"
            )
        else:
            self.holder_block = _unit_rows(data, self.n_rows, self.n_features)
            y = np.where(
                self.holder_block @ data.normal(size=self.n_features)
                + 0.3 * data.normal(size=self.n_rows)
                > 0,
                1.0,
                -1.0,
            )
            self.neighbours = (
                "the label holder's last label flipped (rows at the clip norm); "
                f"{self.n_rows} rows, 2 parties"
                + ("" if loss.name == type(self).losses[0] else f" ({loss.name} loss)")
            )
        self.statistic = (
            "log-likelihood ratio of the released local model plus the "
            "projection of the released dual on the difference of its means"
        )
        self.labels = _last_flipped(y)
        self.config = VerticalConfig(
            mechanism="sound",
            epsilon=self.epsilon,
            delta=self.delta,
            protect_label_holder=True,
            loss=loss.name,
            bounds=bounds,
        ).validated()
        self.setup_ = vertical_setup(self.config, [self.n_features] * 2, self.n_rows)
        self._released(0, np.random.default_rng(0))  # readies the mechanisms
        self.claim = float(
            releases_epsilon(planned_multipliers(self.setup_, 0, self.n_features), self.delta)
        )
        if self.broken == "sensitivity":
            self.setup_ = self._weakened(self.setup_)
        simulate = np.random.default_rng(7)
        runs = [[self._released(b, simulate) for _ in range(self.simulations)] for b in (0, 1)]
        self.means = [np.mean([dual for _, dual, _ in r], axis=0) for r in runs]
        self.sigmas = runs[0][0][2]  # the model's and the dual's noise, as released
        mechanism = self.setup_.mechanisms[0]
        assert isinstance(mechanism, SoundMechanism)
        ridge = self.setup_.config.bounds.prox_weight + self.setup_.mechanisms[0].reg_weight
        rows = mechanism.prepare_block(self.holder_block)  # bounded, with the intercept column
        self.models = [
            fit_local_model(rows, labels, loss, ridge, tolerance=1e-7) for labels in self.labels
        ]

    def claimed_epsilon(self) -> float:
        return self.claim

    def _weakened(self, setup: Any) -> Any:
        """``setup`` with the label holder's model and dual noise ``factor`` times smaller."""
        sound = setup.mechanisms[0]
        assert isinstance(sound, SoundMechanism) and setup.dual_release is not None
        dual = DualRelease(
            bounds=setup.dual_release.bounds,
            noise_multiplier=setup.dual_release.release.noise_multiplier / self.factor,
        )
        return replace(
            setup, mechanisms=[_weaker(sound, self.factor), setup.mechanisms[1]], dual_release=dual
        )

    @staticmethod
    def _round_zero(
        setup: Any, block: np.ndarray, labels: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
        """What a label holder with ``block`` and ``labels`` releases in round 0: its noisy
        local model, the dual it broadcasts, and the two releases' noise ``(sigma_x,
        sigma_y)``."""
        holder = make_vertical_role(setup, 0, ["label", "bank"], block, rng=rng, labels=labels)
        broadcast = next(m for m in holder.start() if m.recipient == "bank")
        model_event, dual_event = holder.events[:2]
        return (
            np.array(holder.model),
            np.asarray(broadcast.dual),
            (float(model_event.sigma), float(dual_event.sigma)),
        )

    @classmethod
    def _broadcast_dual(
        cls, setup: Any, block: np.ndarray, labels: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """The dual a label holder with ``block`` and ``labels`` broadcasts in round 0."""
        return cls._round_zero(setup, block, labels, rng)[1]

    def _released(
        self,
        neighbour: int,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
        """Round 0's model and dual on data set ``neighbour``, and their noise."""
        return self._round_zero(self.setup_, self.holder_block, self.labels[neighbour], rng)

    def one_run(self, canaries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``canaries`` more rows of the label holder (random unit rows), canary ``i`` labelled
        +1 (included) or -1 (its neighbour); the dual of a row is its own coordinate. The score
        of canary ``i`` is its dual coordinate's log-likelihood-ratio direction, the means
        under all +1 and all -1 estimated from 20 simulations of the attacker's own (with the
        noise known: which replay of the label holder's seed it is closer to)."""
        included = rng.random(canaries) < 0.5
        block = np.vstack(
            [self.holder_block, _unit_rows(np.random.default_rng(2032), canaries, self.n_features)]
        )
        setup = vertical_setup(self.config, [self.n_features] * 2, block.shape[0])
        if self.broken == "sensitivity":
            setup = self._weakened(setup)

        def dual(canary_labels: np.ndarray, gen: np.random.Generator) -> np.ndarray:
            labels = np.concatenate([self.labels[0], canary_labels])
            return self._broadcast_dual(setup, block, labels, gen)[self.n_rows :]

        seed = int(rng.integers(2**63))
        observed = dual(np.where(included, 1.0, -1.0), np.random.default_rng(seed))
        if self.broken == "known-noise":
            replays = [
                dual(np.full(canaries, label), np.random.default_rng(seed)) for label in (-1.0, 1.0)
            ]
            return np.abs(observed - replays[0]) - np.abs(observed - replays[1]), included
        simulate = np.random.default_rng(8)
        means = [
            np.mean([dual(np.full(canaries, label), simulate) for _ in range(20)], axis=0)
            for label in (-1.0, 1.0)
        ]
        return (observed - (means[0] + means[1]) / 2.0) * (means[1] - means[0]), included

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        seed = int(rng.integers(2**63))
        model, dual, _ = self._released(neighbour, np.random.default_rng(seed))
        if self.broken == "known-noise":  # the attacker replays the label holder's noise
            replays = [self._released(b, np.random.default_rng(seed))[1] for b in (0, 1)]
            return AuditRun(
                float(np.linalg.norm(dual - replays[0]) - np.linalg.norm(dual - replays[1])), 0.0
            )
        sigma_x, sigma_y = self.sigmas
        statistic, _ = _llr(model, self.models[0], self.models[1], sigma_x)
        diff = self.means[1] - self.means[0]
        statistic += float(np.dot(dual - (self.means[0] + self.means[1]) / 2, diff)) / sigma_y**2
        return AuditRun(statistic, 0.0)


class DecentralizedAuditor(Auditor):
    r"""Decentralized ADMM's DVP or PVP (paper 001): node 0's broadcasts, every round, as its
    neighbour receives them (two nodes, three rounds, a constant :math:`\alpha` per round; the
    claim is their pure-DP sum).

    Neighbours: node 0's last record has its label flipped (rows of norm 1). Shadow copies of
    node 0 (one per data set), fed the neighbour's broadcasts and node 0's own released ones,
    hold every public input of node 0's next step. For an output-perturbed broadcast
    :math:`V = f + e` (PVP) the statistic is the l2-Laplace log-likelihood ratio
    :math:`\zeta(\|V - f_0\| - \|V - f_1\|)`; for an objective-perturbed one (DVP, and PVP's
    last round) the attacker inverts the optimality condition, :math:`e_b = -\frac{B}{C^R}
    \nabla F_b(V)` without the noise term, and uses :math:`\zeta(\|e_0\| - \|e_1\|)` (the
    Jacobian factor of the change of variables, bounded by the analysis, is left out: the
    statistic is still valid, only not optimal).
    """

    losses = ("logistic",)
    rounds: int = 3
    n_rows: int = 20
    n_features: int = 3
    perturbation: str = "pvp"
    loss_scale: float = 1.0
    rho: float = 0.1
    eta: float = 1.0

    def setup(self) -> None:
        self.name = f"decentralized-{self.perturbation}"
        self.neighbours = (
            "node 0's last record with its label flipped (rows of norm 1); "
            f"{self.n_rows} records per node, 2 nodes, {self.rounds} rounds, "
            f"C^R {self.loss_scale:g}, rho {self.rho:g}, eta {self.eta:g}"
        )
        self.statistic = (
            "l2-Laplace log-likelihood ratio of node 0's broadcasts (noise "
            "recovered from the optimality condition for objective-perturbed ones)"
        )
        data = np.random.default_rng(2027)
        X = _unit_rows(data, self.n_rows, self.n_features)
        self.node_data = [(X, y) for y in _last_flipped(_random_labels(data, self.n_rows))]
        self.other = (
            _unit_rows(data, self.n_rows, self.n_features),
            _random_labels(data, self.n_rows),
        )
        self.alphas = np.full(self.rounds, self.epsilon / self.rounds)
        # broken sensitivity: every round's noise calibrated to factor x the privacy
        self.used_alphas = self.alphas * (self.factor if self.broken == "sensitivity" else 1.0)
        self.loss_fn = get_loss(self.loss_name)

    def claimed_epsilon(self) -> float:
        return float(decentralized_total(self.alphas)["epsilon"])

    def claimed_delta(self) -> float:
        return 0.0  # pure DP: the sum of the alphas

    def _node(
        self,
        name: str,
        neighbour: str,
        data: tuple[np.ndarray, np.ndarray],
        rng: np.random.Generator,
    ) -> DecentralizedNode:
        return DecentralizedNode(
            name,
            data[0],
            data[1],
            neighbours=[neighbour],
            loss=self.loss_fn,
            loss_scale=self.loss_scale,
            rho=self.rho,
            eta=self.eta,
            max_rounds=self.rounds,
            perturbation=self.perturbation,
            alphas=self.used_alphas,
            rng=rng,
        )

    def _gradient(
        self,
        data: tuple[np.ndarray, np.ndarray],
        f: np.ndarray,
        *,
        dual: np.ndarray,
        center: np.ndarray,
        phi: float,
    ) -> np.ndarray:
        """:math:`\nabla F(f)` of node 0's step on ``data``, without the noise term."""
        X, y = data
        a = self.loss_scale / self.n_rows
        data_term = a * X.T @ self.loss_fn.derivative(X @ f, y)
        return data_term + (self.rho + phi) * f + 2.0 * dual + 2.0 * self.eta * (f - center)

    def _coordinate_scores(
        self,
        observed: np.ndarray,
        shadows: list[DecentralizedNode],
        candidates: list[tuple[np.ndarray, np.ndarray]],
        round_: int,
        own_before: np.ndarray,
    ) -> np.ndarray:
        """Per coordinate, how much closer ``observed`` is to the +1 candidate than to the -1
        one: the output noise (PVP) or the recovered objective noise (DVP and PVP's last
        round), coordinate by coordinate."""
        last = round_ == self.rounds
        alpha = float(self.used_alphas[round_ - 1])
        if self.perturbation == "pvp" and not last:
            return np.abs(observed - shadows[0].exact) - np.abs(observed - shadows[1].exact)
        calib = dvp_noise(
            alpha,
            c1=0.25,
            CR=self.loss_scale,
            B=self.n_rows,
            rho=self.rho,
            eta=self.eta,
            n_neighbours=1,
        )
        center = 0.5 * (own_before + shadows[0].neighbour_last["n1"])
        noise = [
            -(self.n_rows / self.loss_scale)
            * self._gradient(data, observed, dual=shadows[0].dual, center=center, phi=calib.phi)
            for data in candidates
        ]
        return np.abs(noise[0]) - np.abs(noise[1])

    def _step_statistic(
        self,
        observed: np.ndarray,
        shadows: list[DecentralizedNode],
        round_: int,
        own_before: np.ndarray,
    ) -> float:
        last = round_ == self.rounds
        alpha = float(self.used_alphas[round_ - 1])
        if self.perturbation == "pvp" and not last:
            zeta = pvp_zeta(alpha, rho=self.rho, B=self.n_rows, CR=self.loss_scale)
            return zeta * (
                float(np.linalg.norm(observed - shadows[0].exact))
                - float(np.linalg.norm(observed - shadows[1].exact))
            )
        calib = dvp_noise(
            alpha,
            c1=0.25,
            CR=self.loss_scale,
            B=self.n_rows,
            rho=self.rho,
            eta=self.eta,
            n_neighbours=1,
        )
        shadow = shadows[0]
        center = 0.5 * (own_before + shadow.neighbour_last["n1"])
        noise = [
            -(self.n_rows / self.loss_scale)
            * self._gradient(data, observed, dual=shadow.dual, center=center, phi=calib.phi)
            for data in self.node_data
        ]
        return calib.zeta * (float(np.linalg.norm(noise[0])) - float(np.linalg.norm(noise[1])))

    def one_run(self, canaries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Node 0 holds ``canaries`` records, canary ``i`` the unit row :math:`e_i` with label
        +1 (included) or -1 (its neighbour); the score of canary ``i`` is coordinate ``i`` of
        node 0's broadcasts summed over the rounds (with the noise known: of the replayed
        difference between the two labels)."""
        included = rng.random(canaries) < 0.5
        data = np.random.default_rng(2031)
        audited_data = (np.eye(canaries), np.where(included, 1.0, -1.0))
        other_data = (_unit_rows(data, canaries, canaries), _random_labels(data, canaries))
        saved = self.n_rows, self.n_features
        self.n_rows = self.n_features = canaries
        try:
            seed = int(rng.integers(2**63))
            audited = self._node("n0", "n1", audited_data, np.random.default_rng(seed))
            other = self._node("n1", "n0", other_data, rng)
            # shadows of node 0, every label -1 and every label +1, fed the neighbour's
            # broadcasts and node 0's released ones: the records lie on separate axes, so
            # coordinate i of each is what canary i's broadcast would be under that label.
            # With the noise known they replay node 0's seed; otherwise the attacker compares
            # per coordinate as the log-likelihood ratio does over the whole vector
            candidates = [(audited_data[0], np.full(canaries, label)) for label in (-1.0, 1.0)]
            known = self.broken == "known-noise"
            shadows = [
                self._node("n0", "n1", data, np.random.default_rng(seed) if known else rng)
                for data in candidates
            ]
            sent, received = audited.start(), other.start()
            expected = [shadow.start() for shadow in shadows]
            own_before = np.zeros(canaries)
            total, round_ = np.zeros(canaries), 1
            while sent:
                observed = np.array(sent[0].model)
                if known:
                    total += np.abs(observed - expected[0][0].model) - np.abs(
                        observed - expected[1][0].model
                    )
                else:
                    total += self._coordinate_scores(
                        observed, shadows, candidates, round_, own_before
                    )
                for shadow in shadows:
                    shadow.broadcast = observed
                own_before = observed
                replies = other.handle(sent[0])
                expected = [shadow.handle(received[0]) for shadow in shadows]
                sent, received = audited.handle(received[0]), replies
                round_ += 1
        finally:
            self.n_rows, self.n_features = saved
        return total, included

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        seed = int(rng.integers(2**63))
        audited = self._node("n0", "n1", self.node_data[neighbour], np.random.default_rng(seed))
        other = self._node("n1", "n0", self.other, rng)
        shadows = [self._node("n0", "n1", data, rng) for data in self.node_data]
        # with the noise known, the attacker replays node 0 with its seed on both data sets
        replays = (
            [self._node("n0", "n1", data, np.random.default_rng(seed)) for data in self.node_data]
            if self.broken == "known-noise"
            else []
        )
        sent, received = audited.start(), other.start()
        expected = [replay.start() for replay in replays]
        for shadow in shadows:
            shadow.start()
        own_before = np.zeros(self.n_features)
        statistic, round_ = 0.0, 1
        while sent:
            observed = np.array(sent[0].model)
            if replays:
                statistic += float(
                    np.linalg.norm(observed - expected[0][0].model)
                    - np.linalg.norm(observed - expected[1][0].model)
                )
            else:
                statistic += self._step_statistic(observed, shadows, round_, own_before)
            for shadow in shadows:  # node 0's next step reads its released broadcast
                shadow.broadcast = observed
            own_before = observed
            replies = other.handle(sent[0])
            for shadow in shadows:
                shadow.handle(received[0])
            expected = [replay.handle(received[0]) for replay in replays]
            sent, received = audited.handle(received[0]), replies
            round_ += 1
        return AuditRun(statistic, 0.0)


class DvpAuditor(DecentralizedAuditor):
    """:class:`DecentralizedAuditor` of DVP: every broadcast objective-perturbed."""

    perturbation = "dvp"


class BayesLinRegAuditor(Auditor):
    r"""DP Bayesian linear regression (paper 004) with the distributed Gaussian mechanism (each
    client's exact discrete noise in the secure sum's ring, as the fit adds it): the
    noisy sufficient statistics :math:`\sum_i z_i + \eta` that the secure sum hands the
    leader (:func:`dpfed.protocols.bayes_linreg.linreg.fit_dp_linreg`, one row per client, no
    centring or
    projection: one release of the whole budget).

    Neighbours: the last client's row is :math:`(0, 0)` or every feature and the target at
    their bound (1). The attacker knows every other row; the statistic is the log-likelihood
    ratio of the sum.
    """

    n_rows: int = 30
    n_features: int = 2

    def setup(self) -> None:
        self.name = "bayes-linreg"
        self.neighbours = (
            "the last client's row: (0, 0), or every feature and the target at "
            f"the bound 1; {self.n_rows} clients, {self.n_features} features"
        )
        self.statistic = "log-likelihood ratio of the noisy sufficient statistics"
        data = np.random.default_rng(2028)
        X = data.uniform(-1.0, 1.0, size=(self.n_rows, self.n_features))
        y = data.uniform(-1.0, 1.0, size=self.n_rows)
        X0, y0 = X.copy(), y.copy()
        X0[-1], y0[-1] = 0.0, 0.0
        X1, y1 = X0.copy(), y0.copy()
        X1[-1], y1[-1] = 1.0, 1.0
        self.rows = [(X0, y0), (X1, y1)]
        self.means = [row_statistics(Xb, yb).sum(axis=0) for Xb, yb in self.rows]

    def claimed_epsilon(self) -> float:
        return float(self.epsilon)  # calibrated exactly to the target ("tight")

    def _released(
        self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, float]:
        """The noisy statistics the leader receives (the exact ones when the noise is known)
        and the mechanism's standard deviation."""
        seen: dict[str, Any] = {}
        scale = 1.0 / self.factor if self.broken == "sensitivity" else 1.0

        def aggregate(
            values: np.ndarray,
            *,
            noise_std: Any,
            compute_nodes: int,
            tolerated: int,
            rng: np.random.Generator,
            noise: str = "gaussian",
            fractional_bits: int = 24,
        ) -> Any:
            # dpfed.dca.secure_sum's keywords: the fit adds its exact ring noise, as by default
            result = secure_sum(
                values,
                noise_std=float(np.max(noise_std)) * scale,
                compute_nodes=compute_nodes,
                tolerated=tolerated,
                rng=rng,
                noise=noise,
                fractional_bits=fractional_bits,
            )
            seen["total"] = np.asarray(result.total)
            seen["exact"] = np.asarray(values).sum(axis=0)
            return result

        fit = fit_dp_linreg(
            X,
            y,
            epsilon=self.epsilon,
            delta=self.delta,
            mode="distributed",
            bound_x=1.0,
            bound_y=1.0,
            centre=False,
            compute_nodes=3,
            rng=np.random.default_rng(int(rng.integers(2**63))),
            aggregate=aggregate,
        )
        assert fit.sigma_std is not None
        observed = seen["exact"] if self.broken == "known-noise" else seen["total"]
        return observed, float(fit.sigma_std) * scale

    #: Canaries are features: the statistics have d(d+1)/2 + d coordinates.
    max_canaries: int = 300

    def one_run(self, canaries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        r"""``canaries`` clients, canary ``i`` the row :math:`x = e_i` with target +1
        (included) or -1 (its neighbour), in ``canaries`` features: canary ``i`` alone sets
        coordinate ``i`` of :math:`\sum_i x_i y_i`, which is its score."""
        if canaries > self.max_canaries:
            raise DpfedInputError(
                f"a bayes-linreg one-run audit takes at most {self.max_canaries} canaries (one "
                f"feature each, d(d+1)/2 + d statistics). Found {canaries}."
            )
        included = rng.random(canaries) < 0.5
        observed, _ = self._released(np.eye(canaries), np.where(included, 1.0, -1.0), rng)
        return observed[-canaries:], included

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        X, y = self.rows[neighbour]
        observed, sigma = self._released(X, y, rng)
        statistic, precision = _llr(observed, self.means[0], self.means[1], sigma)
        return AuditRun(statistic, 0.0 if self.broken == "known-noise" else precision)


#: Mechanism name -> its auditor class.
class _SecureAuditor(Auditor):
    """What both secure vertical auditors share: the set-up of the audited job, its claim,
    and the understated sensitivity of ``broken="sensitivity"``."""

    n_rows: int = 200
    n_features: int = 3
    losses = ("logistic",)

    def _calibrate(self, protect: str) -> None:
        self.secure = SecureSetup(
            self.n_rows, (self.n_features,) * 2, self.epsilon, self.delta, protect=protect
        )
        self.claim = float(self.secure.epsilon_spent())
        if self.broken == "sensitivity":  # the noise of a sensitivity `factor` times smaller
            object.__setattr__(
                self.secure, "noise_multiplier", self.secure.noise_multiplier / self.factor
            )

    def claimed_epsilon(self) -> float:
        return self.claim

    def _evidence(
        self, observed: np.ndarray, known: np.ndarray, means: list[np.ndarray], sigma: float
    ) -> tuple[float, float]:
        """The log-likelihood ratio of one observed vector and its precision; with
        ``broken="known-noise"`` the attacker first removes the noise it was given."""
        if self.broken == "known-noise":
            observed = observed - known
        return _llr(observed, means[0], means[1], sigma)

    def _result(self, statistic: float, precision: float) -> AuditRun:
        return AuditRun(statistic, 0.0 if self.broken == "known-noise" else precision)


class SecureVerticalAuditor(_SecureAuditor):
    r"""Secure vertical learning (``dpfed train vertical --secure --protect-label-holder``) as
    the passive party sees it, every round of the default rule run by the protocol's own
    code (``open_parties``, ``block_update``; the plaintext backend, whose decrypted and
    returned vectors are the CKKS run's up to its rounding).

    Neighbours: the label holder's last label flipped; both parties hold random unit rows.
    The attacker knows every row, every label but the last, its own noise and the label
    holder's Gram noise (which does not depend on the labels), so it follows both parties'
    models exactly and computes, before each block update, the gradient under either label.
    The statistic sums the Gaussian log-likelihood ratios of what it sees: as key holder, the
    label holder's block gradient plus the label holder's noise; as evaluator, its own block's
    gradient plus the label holder's grid noise (its own noise removed).
    """

    def setup(self) -> None:
        self.name = "vertical-secure"
        self.neighbours = (
            f"the label holder's last label flipped; {self.n_rows} unit rows "
            f"of {self.n_features} columns at each of 2 parties"
        )
        self.statistic = (
            "log-likelihood ratio of the decrypted label-holder gradients and "
            "the returned own-block gradients, every round"
        )
        data = np.random.default_rng(2031)
        self.blocks = [_unit_rows(data, self.n_rows, self.n_features) for _ in range(2)]
        joint = np.hstack(self.blocks)
        y = np.where(
            joint @ data.normal(size=2 * self.n_features) + 0.3 * data.normal(size=self.n_rows) > 0,
            1.0,
            -1.0,
        )
        self.labels = [(labels > 0).astype(float) for labels in _last_flipped(y)]
        self._calibrate("all")

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        rngs = [np.random.default_rng(int(rng.integers(2**63))) for _ in range(2)]
        opened = open_parties(self.blocks, self.labels[neighbour], self.secure, rngs, "plain")
        label, passive = opened.parties
        poly = self.secure.polynomial
        statistic = precision = 0.0
        for _ in range(self.secure.rounds):
            for evaluator, holder, inverse in (
                (label, passive, opened.inverses[0]),
                (passive, label, opened.inverses[1]),
            ):
                z = np.asarray(label.rows @ label.w) + np.asarray(passive.rows @ passive.w)
                means = [np.asarray(evaluator.rows.T @ (poly(z) - y)).ravel() for y in self.labels]
                exchange = block_update(evaluator, holder, inverse, None)
                sigma = evaluator.round_release.sigma
                if evaluator.index == 0:  # the attacker decrypts: gradient + the holder's noise
                    observed = exchange.decrypted
                    known = exchange.own_noise
                else:  # the attacker gets its gradient back with the label holder's noise
                    observed = exchange.returned - exchange.own_noise
                    known = exchange.returned - exchange.decrypted
                s, m = self._evidence(observed, known, means, sigma)
                statistic += s
                precision += m
        return self._result(statistic, precision)


class SecurePassiveAuditor(_SecureAuditor):
    r"""Secure vertical learning with the passive rows protected (``dpfed train vertical
    --secure``) as the label holder sees it, every round of the default rule.

    Neighbours: the passive party's last row, a random unit row or its negative. The
    attacker (the label holder) knows every other row, the labels, its own noise and the
    passive party's Gram noise. It follows the passive party's model under either
    hypothesis (the Gram matrix, hence the preconditioner, differs with the row), from the
    gradients it decrypts, and sums the Gaussian log-likelihood ratios of what it sees: its
    own block's gradient returned with the passive party's grid noise (its own noise
    removed), the passive party's block gradient plus the passive party's noise (what it
    decrypts), and at the end the three weighting statistics of the passive scores
    (:mod:`dpfed.protocols.vertical_secure.weighting`), whose means it computes from both
    shadow models.
    """

    def setup(self) -> None:
        self.name = "vertical-secure-passive"
        self.neighbours = (
            f"the passive party's last row, a unit row or its negative; "
            f"{self.n_rows} unit rows of {self.n_features} columns at each of "
            "2 parties, only the passive rows protected"
        )
        self.statistic = (
            "log-likelihood ratio of the returned label-holder gradients and "
            "the decrypted passive gradients, every round, the passive model "
            "followed under both hypotheses, and of the weighting statistics"
        )
        data = np.random.default_rng(2032)
        holder = _unit_rows(data, self.n_rows, self.n_features)
        passive = _unit_rows(data, self.n_rows, self.n_features)
        other = passive.copy()
        other[-1] = -passive[-1]
        self.passive_blocks = [passive, other]
        self.holder_block = holder
        joint = np.hstack([holder, passive])
        truth = data.normal(size=2 * self.n_features)
        y = np.where(joint @ truth + 0.3 * data.normal(size=self.n_rows) > 0, 1.0, 0.0)
        # the target row mislabelled against the model, so its residual stays near 1 and
        # its gradient term near the most a row can move
        y[-1] = 0.0 if joint[-1] @ truth > 0 else 1.0
        self.labels = y
        self._calibrate("passive")

    def run(self, neighbour: int, rng: np.random.Generator) -> AuditRun:
        seeds = [int(rng.integers(2**63)) for _ in range(2)]
        rngs = [np.random.default_rng(s) for s in seeds]
        blocks = [self.holder_block, self.passive_blocks[neighbour]]
        opened = open_parties(blocks, self.labels, self.secure, rngs, "plain")
        label, passive = opened.parties
        # the attacker's shadows of the passive party under either row, with the same Gram
        # noise (the passive party's generator replayed: the attacker is given that noise)
        shadows = []
        for b in (0, 1):
            shadow = SecureParty(
                1,
                self.passive_blocks[b],
                self.secure,
                np.random.default_rng(seeds[1]),
                backend="plain",
            )
            shadows.append((shadow, shadow.preconditioner(shadow.gram_release())))
        poly = self.secure.polynomial
        statistic = precision = 0.0
        for _ in range(self.secure.rounds):
            for evaluator, holder, inverse in (
                (label, passive, opened.inverses[0]),
                (passive, label, opened.inverses[1]),
            ):
                means = []
                for shadow, _ in shadows:
                    z = np.asarray(label.rows @ label.w) + np.asarray(shadow.rows @ shadow.w)
                    rows = label.rows if evaluator.index == 0 else shadow.rows
                    means.append(np.asarray(rows.T @ (poly(z) - self.labels)).ravel())
                exchange = block_update(evaluator, holder, inverse, None)
                sigma = evaluator.round_release.sigma
                if evaluator.index == 0:  # its gradient back, the passive party's noise in it
                    observed = exchange.returned - exchange.own_noise
                    known = exchange.returned - exchange.decrypted
                else:  # it decrypts the passive gradient plus the passive party's noise
                    observed = exchange.decrypted
                    known = exchange.own_noise
                    for shadow, shadow_inverse in shadows:  # follow both hypotheses
                        shadow.step(exchange.returned, shadow_inverse)
                s, m = self._evidence(observed, known, means, sigma)
                statistic += s
                precision += m
        # the last release: the weighting statistics of the passive scores, which it decrypts
        release = self.secure.statistics_release()
        assert label.own_model is not None
        request = weighting_request(
            np.asarray(label.rows @ label.own_model).ravel(),
            self.labels,
            self.secure.weighting_reach,
        )
        noise = release.noise(passive.rng)
        observed = plain_statistics(
            release, np.asarray(passive.rows @ passive.w).ravel(), request, noise
        )
        means = [
            plain_statistics(
                release, np.asarray(shadow.rows @ shadow.w).ravel(), request, np.zeros(3)
            )
            for shadow, _ in shadows
        ]
        s, m = self._evidence(observed, noise, means, release.release.sigma)
        return self._result(statistic + s, precision + m)


AUDITORS: dict[str, Callable[..., Auditor]] = {
    "bayes-linreg": BayesLinRegAuditor,
    "consensus-gaussian": ConsensusAuditor,
    "secure-sum-gaussian": SecureSumAuditor,
    "secure-sum-discrete": SecureSumDiscreteAuditor,
    "vertical-paper": VerticalPaperAuditor,
    "vertical-sound": VerticalSoundAuditor,
    "vertical-sound-label-holder": ProtectedLabelHolderAuditor,
    "vertical-secure": SecureVerticalAuditor,
    "vertical-secure-passive": SecurePassiveAuditor,
    "decentralized-pvp": DecentralizedAuditor,
    "decentralized-dvp": DvpAuditor,
}


#: The mechanisms with a one-run (canary) audit.
ONE_RUN = (
    "bayes-linreg",
    "consensus-gaussian",
    "decentralized-dvp",
    "decentralized-pvp",
    "secure-sum-discrete",
    "secure-sum-gaussian",
    "vertical-sound",
    "vertical-sound-label-holder",
)


def get_auditor(name: str, **kwargs: object) -> Auditor:
    """The auditor of mechanism ``name``."""
    if name not in AUDITORS:
        raise DpfedInputError(f"--mechanism must be one of {sorted(AUDITORS)}. Found {name!r}.")
    return AUDITORS[name](**kwargs)


__all__ = [
    "AUDITORS",
    "BROKEN",
    "ONE_RUN",
    "AuditRun",
    "Auditor",
    "get_auditor",
    "realised_epsilon",
]
