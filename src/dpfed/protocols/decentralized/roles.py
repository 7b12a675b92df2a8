r"""A node of decentralized ADMM, as a transport-free state machine (paper 001).

Node :math:`p` holds :math:`B_p` rows with :math:`\|x\| \le 1` and labels in {-1, 1}, and
neighbours :math:`\mathcal N_p`. With :math:`Z_p(f) = \frac{C^R}{B_p}\sum_i \mathcal L(y_i f^\top
x_i) + \rho R(f)`, :math:`R(f) = \|f\|^2/2`, and penalty :math:`\eta`, round :math:`t+1` is

* **none** (Algorithm 1):
  :math:`f_p(t+1) = \arg\min_f Z_p(f) + 2\lambda_p(t)^\top f + \eta \sum_{i \in \mathcal N_p}
  \|f - \tfrac12(f_p(t) + f_i(t))\|^2`, broadcast :math:`f_p(t+1)`,
  :math:`\lambda_p(t+1) = \lambda_p(t) + \tfrac\eta2 \sum_j (f_p(t+1) - f_j(t+1))`.
* **DVP** (Algorithm 2): the same with :math:`\lambda_p(t)` replaced by
  :math:`\mu_p = \lambda_p(t) + \frac{C^R}{2B_p}\epsilon_p` and the extra penalty
  :math:`\frac\Phi2\|f\|^2`, where :math:`\epsilon_p` has density
  :math:`\propto e^{-\zeta\|\epsilon\|}` and :math:`(\zeta, \Phi)` come from
  :func:`dpfed.protocols.decentralized.calibration.dvp_noise`; the dual update is unchanged.
* **PVP** (Algorithm 3): :math:`f_p(t+1) = \arg\min_f Z_p(f) + 2\lambda_p(t)^\top f + \eta
  \sum_i \|f - \tfrac12(V_p(t) + V_i(t))\|^2` with the node's own last *broadcast*
  :math:`V_p(t)`, broadcast :math:`V_p(t+1) = f_p(t+1) + \epsilon_p(t+1)` with :math:`\zeta`
  from :func:`dpfed.protocols.decentralized.calibration.pvp_zeta`, and :math:`\lambda_p(t+1) =
  \lambda_p(t)
  + \tfrac\eta2\sum_j (V_p(t+1) - V_j(t+1))`; the last round is one DVP step (eqs. 21-23),
  its centre :math:`\tfrac12(V_p(T-1) + V_i(T-1))` likewise, and broadcasts the exact
  minimiser.

**Departure from the paper's eq. 18.** Its centre is :math:`\tfrac12(f_p(t) + V_i(t) -
\epsilon_p(t))` and its final DVP step uses the exact :math:`f_p(T-1)`: both read the node's
unreleased iterate and noise, which are functions of the data even given every past
broadcast, so Theorem 2's per-round bound would hold only conditionally on them and the
rounds would not compose. Here every round reads, besides the node's rows and fresh noise,
only released values (its own and its neighbours' broadcasts and the dual, which is computed
from broadcasts only), and the solver is warm-started from :math:`V_p(t)`: each round is then
:math:`\alpha_p(t)`-DP given everything released before (output perturbation with sensitivity
:math:`2C^R/(\rho B_p)`; Theorem 1 for the last), and adaptive composition makes
:func:`dpfed.protocols.decentralized.calibration.decentralized_total` a bound for the run. The
unreleased
:math:`f_p(t)` is kept (``exact``, ``models``) for evaluation only.

Every node starts at :math:`f_p(0) = \lambda_p(0) = 0` and runs ``max_rounds`` rounds; each
broadcast of round :math:`t` is :math:`\alpha_p(t)`-DP (the schedule ``alphas``) and is recorded
as a :class:`~dpfed.privacy.ledger.PrivacyEvent` of mechanism ``"l2_laplace"`` with noise
multiplier :math:`1/\alpha_p(t)` (noise scale :math:`1/\zeta`, and the sensitivity
:math:`\alpha_p(t)/\zeta` at which that scale is :math:`\alpha_p(t)`-DP), so a budget ledger
composes it with the party's other releases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.local import LocalProblem, solve_local
from dpfed.core.losses import Loss
from dpfed.core.rows import Matrix
from dpfed.privacy.l2_laplace import sample_l2_laplace
from dpfed.privacy.l2_laplace_grid import l2_laplace_grid_release
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.privacy.noise_source import generator_state, restore_generator_state
from dpfed.protocols.decentralized.calibration import dvp_noise, pvp_zeta
from dpfed.protocols.decentralized.messages import NodeModel
from dpfed.runtime.messages import Message, ProtocolError

PERTURBATIONS = ("none", "dvp", "pvp")


class DecentralizedNode:
    """One node: its rows, its neighbours, its schedule of per-round privacy.

    Parameters
    ----------
    name : str
    X : ndarray or sparse matrix, shape (B_p, d)
        Rows of norm at most 1 (the caller clips them).
    y : ndarray, shape (B_p,)
    neighbours : sequence of str
    loss : Loss
    loss_scale : float
        :math:`C^R`.
    rho : float
        Weight of :math:`R(f) = \\|f\\|^2/2`.
    eta : float
        ADMM penalty.
    max_rounds : int
    perturbation : {"none", "dvp", "pvp"}
    alphas : ndarray of shape (max_rounds,) or None
        :math:`\\alpha_p(t)` of rounds 1..max_rounds (needed with a perturbation).
    c1 : float
        Bound on :math:`\\mathcal L''` (1/4 for the logistic loss).
    rng : numpy.random.Generator
    """

    def __init__(
        self,
        name: str,
        X: Matrix,
        y: np.ndarray,
        *,
        neighbours: Sequence[str],
        loss: Loss,
        loss_scale: float,
        rho: float,
        eta: float,
        max_rounds: int,
        perturbation: str = "none",
        alphas: np.ndarray | None = None,
        c1: float = 0.25,
        rng: np.random.Generator,
    ) -> None:
        if perturbation not in PERTURBATIONS:
            raise DpfedInputError(
                f"perturbation must be one of {PERTURBATIONS}. Found {perturbation!r}."
            )
        if not neighbours:
            raise DpfedInputError(f"node {name} needs at least one neighbour. Found none.")
        if perturbation != "none" and (alphas is None or len(alphas) != max_rounds):
            raise DpfedInputError(
                f"perturbation {perturbation!r} needs one alpha per round ({max_rounds}). "
                f"Found {None if alphas is None else len(alphas)}."
            )
        self.name = name
        self.X, self.y = X, np.asarray(y, dtype=float)
        self.n_samples, self.n_features = X.shape
        self.neighbours = list(neighbours)
        self.loss, self.loss_scale, self.rho, self.eta = loss, loss_scale, rho, eta
        self.max_rounds = int(max_rounds)
        self.perturbation = perturbation
        self.alphas = None if alphas is None else np.asarray(alphas, dtype=float)
        self.c1 = c1
        self.rng = rng
        d = self.n_features
        self.exact = np.zeros(d)  # f_p(t)
        self.noise = np.zeros(d)  # epsilon_p(t) of the last PVP broadcast (never read)
        self.broadcast = np.zeros(d)  # what it sent for round t
        self.dual = np.zeros(d)  # lambda_p(t)
        self.round = 0
        self.finished = False
        self.received: dict[int, dict[str, np.ndarray]] = {}
        self.neighbour_last = {j: np.zeros(d) for j in self.neighbours}  # their round-t values
        self.models: list[np.ndarray] = [self.exact.copy()]  # f_p(0..t), for evaluation
        self.released_models: list[np.ndarray] = []  # its broadcasts of rounds 1..t
        self.spent: list[float] = []  # alpha_p(t) of every broadcast made
        self.events: list[PrivacyEvent] = []  # one per private broadcast, before it leaves

    # -- the protocol ---------------------------------------------------------------------
    def start(self) -> list[Message]:
        """Round 1 from :math:`f(0) = \\lambda(0) = 0` (every node starts on its own)."""
        if self.round != 0 or self.max_rounds == 0:
            return []
        return self._step()

    def handle(self, message: Message) -> list[Message]:
        if not isinstance(message, NodeModel) or message.sender not in self.neighbours:
            raise ProtocolError(
                f"{self.name} accepts models from its neighbours {self.neighbours} only. "
                f"Found {type(message).__name__} from {message.sender!r}."
            )
        # a neighbour can be at most one round ahead of this node's current round
        if self.finished or message.round < 1 or message.round not in (self.round, self.round + 1):
            raise ProtocolError(
                f"{self.name} expected round {self.round} or {self.round + 1} from "
                f"{message.sender}. Found round {message.round}."
            )
        if message.sender in self.received.get(message.round, {}):
            raise ProtocolError(
                f"{self.name} already holds round {message.round} from {message.sender}."
            )
        if message.model.shape != (self.n_features,) or not np.all(np.isfinite(message.model)):
            raise ProtocolError(
                f"the model from {message.sender} must be {self.n_features} finite values. "
                f"Found shape {message.model.shape}."
            )
        self.received.setdefault(message.round, {})[message.sender] = message.model
        out: list[Message] = []
        while not self.finished and len(self.received.get(self.round, {})) == len(self.neighbours):
            out += self._complete_round()
        return out

    # -- internals ------------------------------------------------------------------------
    def _complete_round(self) -> list[Message]:
        """Every neighbour's round-t broadcast is in: dual update, then round t+1."""
        box = self.received.pop(self.round)
        values = [box[j] for j in self.neighbours]
        self.dual = self.dual + 0.5 * self.eta * sum(self.broadcast - v for v in values)
        self.neighbour_last = dict(zip(self.neighbours, values, strict=True))
        if self.round >= self.max_rounds:
            self.finished = True
            return []
        return self._step()

    def _step(self) -> list[Message]:
        """Compute and broadcast round t+1 from round-t values."""
        t = self.round  # computing f(t+1)
        last = t + 1 == self.max_rounds
        n_p = len(self.neighbours)
        # Only released values besides the rows: the node's own last broadcast (f_p(t) under
        # none/DVP, V_p(t) = f_p(t) + epsilon_p(t) under PVP, also in PVP's final DVP step; not
        # eq. 18's unreleased f_p(t) - epsilon_p(t)), the neighbours' broadcasts, the dual.
        own = self.broadcast
        center = cast(
            np.ndarray, sum(0.5 * (own + self.neighbour_last[j]) for j in self.neighbours) / n_p
        )
        linear, extra_l2 = 2.0 * self.dual, 0.0
        noise_out = None
        alpha = None if self.alphas is None else float(self.alphas[t])
        zeta = None
        if self.perturbation == "dvp" or (self.perturbation == "pvp" and last):
            calib = dvp_noise(
                cast(float, alpha),  # a perturbation has one alpha per round
                c1=self.c1,
                CR=self.loss_scale,
                B=self.n_samples,
                rho=self.rho,
                eta=self.eta,
                n_neighbours=n_p,
            )
            zeta = calib.zeta
            e = sample_l2_laplace(calib.zeta, self.n_features, self.rng)
            linear = 2.0 * (self.dual + self.loss_scale / (2.0 * self.n_samples) * e)
            extra_l2 = calib.phi
        problem = LocalProblem(
            loss_weight=self.loss_scale / self.n_samples,
            l2=self.rho + extra_l2,
            linear=linear,
            prox=2.0 * self.eta * n_p,
            center=center,
        )
        # warm start from the released value too, so the computed iterate (not only the exact
        # minimiser) is a function of the rows and released values alone
        self.exact = solve_local(self.X, self.y, self.loss, problem, x0=own).x
        broadcast = self.exact
        if self.perturbation == "pvp" and not last:
            zeta = pvp_zeta(cast(float, alpha), rho=self.rho, B=self.n_samples, CR=self.loss_scale)
            # the grid point nearest exact + e, e drawn exactly: no float texture to betray
            broadcast = l2_laplace_grid_release(self.exact, zeta, self.rng)
            noise_out = broadcast - self.exact
        self.noise = noise_out if noise_out is not None else np.zeros(self.n_features)
        self.broadcast = broadcast
        self.round = t + 1
        self.models.append(self.exact.copy())
        self.released_models.append(np.array(broadcast, copy=True))
        if alpha is not None and zeta is not None:
            self.spent.append(alpha)
            self.events.append(
                PrivacyEvent(
                    party=self.name,
                    round=self.round,
                    mechanism="l2_laplace",
                    noise_multiplier=1.0 / alpha,
                    l2_sensitivity=alpha / zeta,
                    sigma=1.0 / zeta,
                    label="model",
                )
            )
        return [NodeModel(self.name, j, self.round, broadcast) for j in self.neighbours]

    # -- checkpoints ----------------------------------------------------------------------
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {
            "exact": self.exact,
            "noise": self.noise,
            "broadcast": self.broadcast,
            "dual": self.dual,
            "models": np.array(self.models),
            "released_models": np.array(self.released_models).reshape(-1, self.n_features),
        }
        arrays |= {f"last/{j}": v for j, v in self.neighbour_last.items()}
        for rnd, box in self.received.items():
            arrays |= {f"received/{rnd}/{j}": v for j, v in box.items()}
        meta = {
            "rng": generator_state(self.rng),
            "round": self.round,
            "finished": self.finished,
            "spent": self.spent,
            "events": [e.to_dict() for e in self.events],
        }
        return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        for key in ("exact", "noise", "broadcast", "dual"):
            setattr(self, key, np.array(arrays[key], dtype=float))
        self.models = [np.array(m) for m in arrays["models"]]
        self.released_models = [np.array(m) for m in arrays["released_models"]]
        self.neighbour_last = {j: np.array(arrays[f"last/{j}"]) for j in self.neighbours}
        self.received = {}
        for key, value in arrays.items():
            if key.startswith("received/"):
                _, rnd, j = key.split("/", 2)
                self.received.setdefault(int(rnd), {})[j] = np.array(value)
        restore_generator_state(self.rng, meta["rng"])
        self.round, self.finished = int(meta["round"]), bool(meta["finished"])
        self.spent = [float(a) for a in meta["spent"]]
        self.events = [PrivacyEvent.from_dict(e) for e in meta.get("events", [])]
