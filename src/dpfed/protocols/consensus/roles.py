r"""The server and the clients of (DP) consensus ADMM, as transport-free state machines.

Client :math:`i` holds rows :math:`X_i` (shape ``(m_i, d)``) and labels :math:`y_i`. With
:math:`n` clients, loss :math:`\ell`, regulariser :math:`R(w) = \|w\|^2/2`, weight
:math:`\lambda` and penalty :math:`\rho`, round :math:`k` is

.. math::

    \tilde w_i^k &= \arg\min_{w_i} \frac{1}{m_i}\sum_j \ell(x_{ij}^\top w_i; y_{ij})
        + \frac{\lambda}{n} R(w_i) - \gamma_i^{k-1\top}(w_i - w^{k-1})
        + \frac{\rho}{2}\|w_i - w^{k-1}\|^2 \;+\; \mathcal N(0, \sigma^2 I) \\
    \hat w_i^k &= \alpha \tilde w_i^k + (1 - \alpha) w^{k-1} \\
    w^k &= \frac1n \sum_i \hat w_i^k - \frac{1}{n\rho} \sum_i \gamma_i^{k-1} \\
    \gamma_i^k &= \gamma_i^{k-1} - \rho(\hat w_i^k - w^k)

(paper 002, eqs. 3, 5, 6, for the relaxation :math:`\alpha = 1`; :math:`\alpha \in (0, 2)`
is ADMM's over-relaxation, Boyd et al. 2011, section 3.4.3). The server broadcasts
:math:`w^k`; each client updates its own dual from its released model, the previous global
model and :math:`w^k` exactly as the server does, so duals never travel and every input of a
client's next update other than its own rows is public. The relaxation is a public constant
and touches only released values, so it changes neither the local problem's strong
convexity nor the sensitivity of its minimiser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np

from dpfed._validation import DpfedInputError, check_positive
from dpfed.core.local import LocalProblem, solve_local
from dpfed.core.losses import Loss
from dpfed.core.rows import Matrix
from dpfed.privacy.gaussian import GaussianRelease
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.privacy.noise_source import generator_state, restore_generator_state
from dpfed.protocols.consensus.messages import GlobalModel, LocalModel
from dpfed.runtime.messages import Message, ProtocolError


def check_relaxation(alpha: float) -> None:
    """Refuse an over-relaxation outside ``(0, 2)``, where ADMM is not known to converge."""
    check_positive("relaxation", alpha)
    if not alpha < 2.0:
        raise DpfedInputError(f"relaxation must be in (0, 2). Found {alpha}.")


def relaxed(alpha: float, released: np.ndarray, previous: np.ndarray) -> np.ndarray:
    r""":math:`\alpha \tilde w + (1 - \alpha) w^{k-1}`; the release itself for
    :math:`\alpha = 1` (bit for bit, as without relaxation)."""
    if alpha == 1.0:
        return released
    return alpha * released + (1.0 - alpha) * previous


def _check_vector(name: str, value: np.ndarray, d: int, sender: str) -> None:
    if value.shape != (d,) or not np.all(np.isfinite(value)):
        raise ProtocolError(
            f"{name} from {sender} must be {d} finite values. Found shape {value.shape}."
        )


class ConsensusClient:
    """A client: exact local update, Gaussian noise, upload.

    Parameters
    ----------
    name, server : str
    X : ndarray or sparse matrix, shape (m_i, d)
        Rows; with noise they must have norm at most 1 (the caller clips them).
    y : ndarray, shape (m_i,)
    loss : Loss
    lam : float
        Regularisation weight :math:`\\lambda` of the whole problem (each client carries
        :math:`\\lambda/n`).
    n_clients : int
    rho : float
    release : GaussianRelease or None
        The noise of every round's upload (None: no noise).
    rng : numpy.random.Generator
    relaxation : float
        Over-relaxation :math:`\\alpha \\in (0, 2)` of the dual update, the server's (1: none).
    """

    def __init__(
        self,
        name: str,
        X: Matrix,
        y: np.ndarray,
        *,
        server: str,
        loss: Loss,
        lam: float,
        n_clients: int,
        rho: float,
        release: GaussianRelease | None,
        rng: np.random.Generator,
        relaxation: float = 1.0,
    ) -> None:
        check_relaxation(relaxation)
        self.name, self.server = name, server
        self.relaxation = float(relaxation)
        self.X, self.y = X, np.asarray(y, dtype=float)
        self.n_samples, self.n_features = X.shape
        self.loss, self.lam, self.n_clients, self.rho = loss, lam, n_clients, rho
        self.release, self.rng = release, rng
        self.gamma = np.zeros(self.n_features)
        self.exact = np.zeros(self.n_features)
        self.released = np.zeros(self.n_features)
        self.center = np.zeros(self.n_features)  # the global model of the last update
        self.round = 0
        self.finished = False
        self.events: list[PrivacyEvent] = []

    def handle(self, message: Message) -> list[Message]:
        if not isinstance(message, GlobalModel) or message.sender != self.server:
            raise ProtocolError(
                f"{self.name} accepts the global model from {self.server} only. "
                f"Found {type(message).__name__} from {message.sender!r}."
            )
        if self.finished or message.round != self.round:
            raise ProtocolError(
                f"{self.name} expected round {self.round}. Found round {message.round}."
            )
        _check_vector("the global model", message.model, self.n_features, message.sender)
        gamma = self.gamma
        if message.round > 0:
            gamma = gamma - self.rho * (
                relaxed(self.relaxation, self.released, self.center) - message.model
            )
        if message.finished:
            self.gamma, self.finished = gamma, True
            return []
        problem = LocalProblem(
            loss_weight=1.0 / self.n_samples,
            l2=self.lam / self.n_clients,
            linear=-gamma,
            prox=self.rho,
            center=message.model,
        )
        # solve first: a failed solve leaves the client's state as it was
        self.exact = solve_local(self.X, self.y, self.loss, problem, x0=self.exact).x
        self.gamma, self.center = gamma, np.array(message.model, dtype=float)
        self.round = message.round + 1
        if self.release is None:
            self.released = self.exact.copy()
        else:
            self.released = self.release.noisy(self.rng, self.exact)
            r = self.release
            self.events.append(
                PrivacyEvent(
                    party=self.name,
                    round=self.round,
                    mechanism="gaussian",
                    noise_multiplier=r.noise_multiplier,
                    l2_sensitivity=r.l2_sensitivity,
                    sigma=r.sigma,
                    label="model",
                    coordinates=self.n_features,
                )
            )
        return [LocalModel(self.name, self.server, self.round, self.released)]

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {
            "gamma": self.gamma,
            "exact": self.exact,
            "released": self.released,
            "center": self.center,
        }
        meta = {
            "rng": generator_state(self.rng),
            "events": [asdict(e) for e in self.events],
            "round": self.round,
            "finished": self.finished,
        }
        return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.gamma = np.array(arrays["gamma"], dtype=float)
        self.exact = np.array(arrays["exact"], dtype=float)
        self.released = np.array(arrays["released"], dtype=float)
        self.center = np.array(arrays["center"], dtype=float)
        restore_generator_state(self.rng, meta["rng"])
        self.events = [PrivacyEvent(**e) for e in meta["events"]]
        self.round, self.finished = int(meta["round"]), bool(meta["finished"])


@dataclass(frozen=True)
class ServerRecord:
    """The server's view at the end of a round."""

    round: int
    model: np.ndarray
    primal_residual: float  # sqrt(sum_i ||w~_i - w||^2)
    dual_residual: float  # rho sqrt(n) ||w^k - w^{k-1}||
    finished: bool


class ConsensusServer:
    """The server: averages the uploads and runs every client's dual update.

    Parameters
    ----------
    name : str
    clients : sequence of str
    n_features : int
    rho : float
    max_rounds : int
    observer : callable or None
        Called with a :class:`ServerRecord` after every round.
    relaxation : float
        Over-relaxation :math:`\\alpha \\in (0, 2)` of the average (1: paper 002's).
    """

    def __init__(
        self,
        name: str,
        clients: Sequence[str],
        *,
        n_features: int,
        rho: float,
        max_rounds: int,
        observer: Callable[[ServerRecord], None] | None = None,
        relaxation: float = 1.0,
    ) -> None:
        check_relaxation(relaxation)
        self.relaxation = float(relaxation)
        if len(clients) < 1 or len(set(clients)) != len(clients):
            raise DpfedInputError(f"clients must be distinct names. Found {list(clients)}.")
        self.name = name
        self.clients = list(clients)
        self.n_features, self.rho, self.max_rounds = n_features, rho, int(max_rounds)
        self.observer = observer
        self.model = np.zeros(n_features)
        self.gammas = {c: np.zeros(n_features) for c in self.clients}
        self.inbox: dict[str, np.ndarray] = {}
        self.round = 0
        self.finished = False
        self.history: list[ServerRecord] = []

    def start(self) -> list[Message]:
        return self._broadcast(finished=self.max_rounds == 0)

    def handle(self, message: Message) -> list[Message]:
        if not isinstance(message, LocalModel) or message.sender not in self.clients:
            raise ProtocolError(
                f"{self.name} accepts local models from {self.clients} only. "
                f"Found {type(message).__name__} from {message.sender!r}."
            )
        if self.finished or message.round != self.round + 1:
            raise ProtocolError(
                f"{self.name} expected local models of round {self.round + 1}. "
                f"Found round {message.round} from {message.sender}."
            )
        if message.sender in self.inbox:
            raise ProtocolError(
                f"{self.name} already holds round {message.round}'s model from {message.sender}."
            )
        _check_vector("the local model", message.model, self.n_features, message.sender)
        self.inbox[message.sender] = message.model
        if len(self.inbox) < len(self.clients):
            return []
        return self._round()

    def _round(self) -> list[Message]:
        n = len(self.clients)
        uploads = [self.inbox[c] for c in self.clients]
        self.inbox = {}
        previous = self.model
        mixed = [relaxed(self.relaxation, w, previous) for w in uploads]
        model = cast(
            np.ndarray, sum(mixed) / n - sum(self.gammas[c] for c in self.clients) / (n * self.rho)
        )
        for c, w in zip(self.clients, mixed, strict=True):
            self.gammas[c] = self.gammas[c] - self.rho * (w - model)
        self.model = model
        self.round += 1
        finished = self.round >= self.max_rounds
        record = ServerRecord(
            self.round,
            model.copy(),
            float(np.sqrt(sum(float(np.sum((w - model) ** 2)) for w in uploads))),
            float(self.rho * np.sqrt(n) * np.linalg.norm(model - previous)),
            finished,
        )
        self.history.append(record)
        if self.observer is not None:
            self.observer(record)
        return self._broadcast(finished=finished)

    def _broadcast(self, *, finished: bool) -> list[Message]:
        self.finished = finished
        return [GlobalModel(self.name, c, self.round, self.model, finished) for c in self.clients]

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {"model": self.model}
        arrays |= {f"gamma/{c}": g for c, g in self.gammas.items()}
        arrays |= {f"inbox/{c}": w for c, w in self.inbox.items()}
        meta = {
            "round": self.round,
            "finished": self.finished,
            "history": [{**asdict(r), "model": r.model.tolist()} for r in self.history],
        }
        return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.model = np.array(arrays["model"], dtype=float)
        self.gammas = {c: np.array(arrays[f"gamma/{c}"], dtype=float) for c in self.clients}
        self.inbox = {
            k.split("/", 1)[1]: np.array(v, dtype=float)
            for k, v in arrays.items()
            if k.startswith("inbox/")
        }
        self.round, self.finished = int(meta["round"]), bool(meta["finished"])
        self.history = [
            ServerRecord(
                r["round"],
                np.array(r["model"]),
                r["primal_residual"],
                r["dual_residual"],
                r["finished"],
            )
            for r in meta["history"]
        ]
