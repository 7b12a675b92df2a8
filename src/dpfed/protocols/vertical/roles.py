r"""The two roles of ADMM sharing, as transport-free state machines.

Round ``t``: the label holder broadcasts :math:`(r^t, y^t, \rho^t)` with
:math:`r^t = \sum_k D_k \tilde x_k^t - z^t`; every party ``m`` (the label holder too, for its
own block) forms its target :math:`c_m = u_m - r^t - y^t/\rho` from its own last released
scores :math:`u_m`, solves its x-update and releases new scores; the label holder, once it
holds every party's scores, runs the z- and dual updates and broadcasts round ``t + 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.core.admm import ResidualBalancing, Residuals, dual_update, residuals, z_update
from dpfed.core.anderson import AndersonAcceleration
from dpfed.core.constraints import Ball
from dpfed.core.losses import Loss
from dpfed.core.regularizers import Regularizer
from dpfed.core.rows import Matrix
from dpfed.core.xupdate import make_local_solver
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.privacy.noise_source import generator_state, restore_generator_state
from dpfed.protocols.vertical.label_holder_start import (
    LOCAL_MODEL_TOLERANCE as LOCAL_MODEL_TOLERANCE,  # re-exported: its home before the split
)
from dpfed.protocols.vertical.label_holder_start import LabelHolderStart
from dpfed.protocols.vertical.label_holder_weighting import PassiveWeighting
from dpfed.protocols.vertical.mechanisms import DualRelease, PartyMechanism
from dpfed.protocols.vertical.messages import Broadcast, Scores
from dpfed.protocols.vertical.weighting import (
    STATISTICS,
    PassiveWeight,
    StatisticsRelease,
    WeightingRequest,
)
from dpfed.runtime.messages import Message, ProtocolError


class _BlockOwner:
    """What every party does with its own block: x-update and release."""

    def __init__(
        self,
        name: str,
        block: Matrix,
        *,
        regularizer: Regularizer,
        reg_weight: float,
        mechanism: PartyMechanism,
        rng: np.random.Generator,
        inner_iterations: int = 100,
    ) -> None:
        self.name = name
        self.mechanism = mechanism
        mechanism.check_regularizer(regularizer, reg_weight)
        self.block = mechanism.prepare_block(block)
        self.regularizer = regularizer
        self.reg_weight = reg_weight
        self.solver = make_local_solver(
            self.block,
            regularizer,
            reg_weight,
            mechanism.feasible_set(),
            inner_iterations=inner_iterations,
        )
        self.rng = rng
        self.n_samples, self.n_features = self.block.shape
        self.model = np.zeros(self.n_features)
        self.released_scores = np.zeros(self.n_samples)
        self.events: list[PrivacyEvent] = []
        # largest score the model predicts on a row (None: unclipped); a weighted job clips the
        # passive parties' predictions so their statistics bound what the model predicts
        self.score_bound: float | None = None

    def _x_update(
        self,
        residual: np.ndarray,
        dual: np.ndarray,
        rho: float,
        round: int,
        *,
        send_scores: bool = True,
    ) -> np.ndarray:
        target = self.mechanism.clip_target(self.released_scores - residual - dual / rho)
        x = self.solver.solve(
            target, rho, self.model, tau=self.mechanism.prox_weight, center=self.model
        )
        spectrum = self.solver.spectrum if self.mechanism.name == "paper" else None
        release = self.mechanism.release(
            x,
            block=self.block,
            spectrum=spectrum,
            rho=rho,
            round=round,
            party=self.name,
            rng=self.rng,
            send_scores=send_scores,
        )
        self.model = release.model
        if release.scores is not None:
            self.released_scores = release.scores
        self.events.extend(release.events)
        return self.released_scores

    def partial_scores(self, block: Matrix) -> np.ndarray:
        """Scores of this party's columns of new rows (the prediction protocol's share)."""
        return self.scores(self.mechanism.prepare_block(block))

    def scores(self, prepared_block: Matrix) -> np.ndarray:
        """The model's scores of prepared rows, clipped to ``score_bound`` when it is set."""
        return predicted_scores(prepared_block, self.model, self.score_bound)

    def regularization(self) -> float:
        return self.regularizer.value(self.model)

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The role's mutable state: arrays and JSON-able values (noise generator included).

        Restoring it with :meth:`load_state_dict` into a role built from the same data and
        configuration continues the protocol bit for bit.
        """
        arrays = {"model": self.model, "released_scores": self.released_scores}
        meta = {
            "rng": generator_state(self.rng),
            "events": [asdict(e) for e in self.events],
            "score_bound": self.score_bound,
        }
        return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.model = _restored(arrays, "model", (self.n_features,))
        self.released_scores = _restored(arrays, "released_scores", (self.n_samples,))
        restore_generator_state(self.rng, meta["rng"])
        self.events = [PrivacyEvent(**e) for e in meta["events"]]
        bound = meta.get("score_bound")
        self.score_bound = None if bound is None else float(bound)


def predicted_scores(prepared_block: Matrix, model: np.ndarray, bound: float | None) -> np.ndarray:
    """``prepared_block @ model``, shape ``(N,)``, clipped to ``[-bound, bound]`` unless None."""
    scores = np.asarray(prepared_block @ model).reshape(-1)
    return scores if bound is None else np.clip(scores, -bound, bound)


def _restored(arrays: dict[str, np.ndarray], key: str, shape: tuple[int, ...]) -> np.ndarray:
    value = np.array(arrays[key], dtype=float)
    if value.shape != shape:
        raise ProtocolError(f"checkpoint field {key} must have shape {shape}. Found {value.shape}.")
    return value


class PassiveParty(_BlockOwner):
    """A party holding features only. It receives broadcasts and answers with its scores."""

    def __init__(
        self,
        name: str,
        block: Matrix,
        *,
        label_holder: str,
        statistics_release: StatisticsRelease | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(name, block, **kwargs)
        self.label_holder = label_holder
        self.statistics_release = statistics_release
        if statistics_release is not None:
            self.score_bound = statistics_release.score_bound
        self.round = 0
        self.finished = False

    def handle(self, message: Message) -> list[Message]:
        if not isinstance(message, Broadcast) or message.sender != self.label_holder:
            raise ProtocolError(
                f"{self.name} accepts broadcasts from {self.label_holder} only. "
                f"Found {type(message).__name__} from {message.sender!r}."
            )
        if self.finished or message.round != self.round:
            raise ProtocolError(
                f"{self.name} expected round {self.round}. Found round {message.round}."
            )
        for field, values in message.arrays().items():
            if values.shape != (self.n_samples,):
                raise ProtocolError(
                    f"{field} must have shape ({self.n_samples},). Found {values.shape}."
                )
        if message.finished:
            self.finished = True
            if message.passive_weight is not None:
                self._scale_model(message.passive_weight)
            return []
        scores = self._x_update(message.residual, message.dual, message.rho, message.round + 1)
        self.round = message.round + 1
        statistics = None
        if any(v is not None for v in (message.gradient, message.curvature, message.change)):
            statistics = self._release_statistics(message)
        return [Scores(self.name, self.label_holder, self.round, scores, statistics)]

    def _release_statistics(self, message: Broadcast) -> np.ndarray:
        """The noisy statistics of this party's scores that the label holder asked for."""
        release = self.statistics_release
        if (
            release is None
            or message.gradient is None
            or message.curvature is None
            or message.change is None
            or (message.rising is None) != (message.falling is None)
        ):
            raise ProtocolError(
                f"{self.name} was asked for weighting statistics the job does not plan or "
                f"without all of gradient, curvature and change (or with one of rising and "
                f"falling; round {message.round} from {message.sender})."
            )
        request = WeightingRequest(
            message.gradient, message.curvature, message.change, message.rising, message.falling
        )
        try:
            released = release.apply(self.scores(self.block), request, self.rng)
        except DpfedInputError as exc:
            raise ProtocolError(f"{self.name}: {exc} (round {message.round})") from exc
        self.events.append(release.event(self.name, self.round))
        return released

    def _scale_model(self, weight: float) -> None:
        if not (np.isfinite(weight) and 0.0 <= weight <= 1.0):
            raise ProtocolError(
                f"{self.name} accepts a passive weight in [0, 1]. Found {weight!r}."
            )
        self.model = weight * self.model
        if self.score_bound is not None:
            self.score_bound = weight * self.score_bound

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays, meta = super().state_dict()
        return arrays, meta | {"round": self.round, "finished": self.finished}

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        super().load_state_dict(arrays, meta)
        self.round, self.finished = int(meta["round"]), bool(meta["finished"])


@dataclass(frozen=True)
class RoundRecord:
    """What the central node saw at the end of a round (for logs and history)."""

    round: int
    rho: float
    residuals: Residuals
    finished: bool
    passive_weight: float | None = None  # the label holder's weight of the passive scores


class LabelHolder(PassiveWeighting, LabelHolderStart, _BlockOwner):
    """The party holding the labels; it also runs the central node (z- and dual updates).

    Parameters
    ----------
    parties : sequence of str
        Names of the passive parties it expects scores from.
    loss : Loss
    rho : float
        Initial penalty (of the summed-loss form).
    max_rounds : int
        Rounds to run (the privacy calibration assumes this many).
    stop_tol : tuple of (abs, rel) or None
        Stop early once primal and dual residuals fall below these tolerances.
    adaptive : ResidualBalancing or None
        Residual balancing of ``rho``.
    central_radius : float or None
        Project ``z`` and ``y`` onto this l2 ball (the paper mechanism's Assumption 1.1).
    dual_release : DualRelease or None
        Protects the label holder's rows and labels by perturbing the broadcast dual.
    warm_start_rounds : int
        Rounds of local-only ADMM on its own block before the first broadcast.
    relaxation : float
        Over-relaxation :math:`\\alpha \\in (0, 2)` of the z- and dual updates (1: none):
        they use :math:`\\hat s = \\alpha s + (1 - \\alpha) z^t` in place of ``s``.
    anderson_memory : int
        0: plain rounds. Otherwise safeguarded Anderson acceleration with this memory of the
        round map on :math:`w = (u_0, \\dots, u_M, z, y/\\rho)` (every party's released scores,
        the z-iterate and the scaled dual): the label holder extrapolates ``w`` and sends each
        party ``m`` the residual :math:`r_m = u_m - \\hat u_m + \\hat s - \\hat z` that makes its
        target :math:`u_m - r_m - \\hat y/\\rho` the target at the extrapolated point. A function
        of released scores and the label holder's own data only.
    statistics_release : StatisticsRelease or None
        Weigh the passive parties' final models (:mod:`dpfed.protocols.vertical.weighting`):
        the label holder fits its exact local-only model, asks every party for the released
        statistics of its last scores and scales the passive models by the weight that keeps
        the training loss below the local-only model's.
    observer : callable or None
        Called with a :class:`RoundRecord` after every round.
    """

    def __init__(
        self,
        name: str,
        block: Matrix,
        labels: np.ndarray,
        *,
        parties: Sequence[str],
        loss: Loss,
        rho: float,
        max_rounds: int,
        stop_tol: tuple[float, float] | None = None,
        adaptive: ResidualBalancing | None = None,
        central_radius: float | None = None,
        dual_release: DualRelease | None = None,
        warm_start_rounds: int = 0,
        relaxation: float = 1.0,
        anderson_memory: int = 0,
        statistics_release: StatisticsRelease | None = None,
        observer: Callable[[RoundRecord], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(name, block, **kwargs)
        if not 0.0 < relaxation < 2.0:
            raise DpfedInputError(f"relaxation must lie in (0, 2). Found {relaxation}.")
        if dual_release is not None and (relaxation != 1.0 or anderson_memory):
            raise DpfedInputError(
                "a protected label holder's noisy dual release is analysed for plain rounds; "
                "relaxation and Anderson acceleration cannot be used with it."
            )
        self.labels = np.asarray(labels, dtype=float)
        if self.labels.shape != (self.n_samples,):
            raise DpfedInputError(
                f"labels must have shape ({self.n_samples},). Found {self.labels.shape}."
            )
        self.parties = list(parties)
        self.loss = loss
        loss.check_rho(rho)
        self.rho = float(rho)
        self.max_rounds = int(max_rounds)
        self.stop_tol = stop_tol
        self.adaptive = adaptive
        self.central_ball = Ball(central_radius) if central_radius else None
        self.dual_release = dual_release
        self.observer = observer
        self.round = 0
        self.finished = False
        self.z = np.zeros(self.n_samples)
        self.dual = np.zeros(self.n_samples)
        self.residual = np.zeros(self.n_samples)
        self.inbox: dict[str, np.ndarray] = {}
        self.history: list[RoundRecord] = []
        self.warm_start_rounds = int(warm_start_rounds)
        self.relaxation = float(relaxation)
        self.anderson = AndersonAcceleration(anderson_memory) if anderson_memory else None
        # Anderson only: each party's residual (own block included) and the scores of the
        # point the next round evaluates
        self.party_residuals: dict[str, np.ndarray] = {}
        self.point_scores: dict[str, np.ndarray] = {}
        self.statistics_release = statistics_release
        self.local_model: np.ndarray | None = None
        self.statistics: dict[str, np.ndarray] = {}
        self.weighting: PassiveWeight | None = None
        if statistics_release is not None and dual_release is not None:
            raise DpfedInputError(
                "weighting the passive parties broadcasts exact derivatives of the label "
                "holder's loss; it cannot be used with a protected label holder."
            )

    # -- the protocol ---------------------------------------------------------------------
    def start(self) -> list[Message]:
        """Round 0: broadcast the initial residual and dual (zeros, or after a warm start)."""
        if self.warm_start_rounds:
            self._warm_start()
        if self.anderson is not None:  # the first point: the scores every party holds now
            self.point_scores = {p: np.zeros(self.n_samples) for p in self.parties}
            self.point_scores[self.name] = self.released_scores.copy()
        if self.statistics_release is not None:
            self._fit_local_model()
        if self.dual_release is not None and self.max_rounds > 0:
            self._released_start()
        return self._broadcast(finished=self.max_rounds == 0)

    def handle(self, message: Message) -> list[Message]:
        if not isinstance(message, Scores) or message.sender not in self.parties:
            raise ProtocolError(
                f"{self.name} accepts scores from {self.parties} only. "
                f"Found {type(message).__name__} from {message.sender!r}."
            )
        if self.finished or message.round != self.round + 1:
            raise ProtocolError(
                f"{self.name} expected scores of round {self.round + 1}. "
                f"Found round {message.round} from {message.sender}."
            )
        if message.sender in self.inbox:
            raise ProtocolError(
                f"{self.name} already holds round {message.round} scores from {message.sender}."
            )
        if (message.statistics is not None) != self._requests_statistics(self.round):
            expected = (
                f"weighting statistics with the scores of round {message.round}"
                if message.statistics is None
                else f"weighting statistics only with the scores of round {self.max_rounds}"
            )
            raise ProtocolError(
                f"{self.name} expected {expected} from {message.sender}. Found "
                f"{'none' if message.statistics is None else f'some in round {message.round}'}."
            )
        if message.statistics is not None:
            if message.statistics.shape != (len(STATISTICS),) or not np.all(
                np.isfinite(message.statistics)
            ):
                raise ProtocolError(
                    f"statistics from {message.sender} must be {len(STATISTICS)} finite values. "
                    f"Found shape {message.statistics.shape}."
                )
            self.statistics[message.sender] = message.statistics
        if message.scores.shape != (self.n_samples,) or not np.all(np.isfinite(message.scores)):
            raise ProtocolError(
                f"scores from {message.sender} must be {self.n_samples} finite values. "
                f"Found shape {message.scores.shape}."
            )
        self.inbox[message.sender] = message.scores
        if len(self.inbox) < len(self.parties):
            return []
        return self._central_round()

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays, meta = super().state_dict()
        arrays = arrays | {"z": self.z, "dual": self.dual, "residual": self.residual}
        arrays |= {f"inbox/{name}": scores for name, scores in self.inbox.items()}
        arrays |= {f"party_residual/{k}": v for k, v in self.party_residuals.items()}
        arrays |= {f"point_scores/{k}": v for k, v in self.point_scores.items()}
        arrays |= {f"statistics/{name}": v for name, v in self.statistics.items()}
        if self.local_model is not None:
            arrays["local_model"] = self.local_model
        meta = meta | {
            "round": self.round,
            "finished": self.finished,
            "rho": self.rho,
            "history": [asdict(r) for r in self.history],
            "weighting": None if self.weighting is None else asdict(self.weighting),
        }
        if self.anderson is not None:
            aa_arrays, aa_meta = self.anderson.state_dict()
            arrays |= {f"anderson/{k}": v for k, v in aa_arrays.items()}
            meta["anderson"] = aa_meta
        return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        super().load_state_dict(arrays, meta)
        n = (self.n_samples,)
        self.z = _restored(arrays, "z", n)
        self.dual = _restored(arrays, "dual", n)
        self.residual = _restored(arrays, "residual", n)
        self.inbox = {
            key.split("/", 1)[1]: _restored(arrays, key, n)
            for key in arrays
            if key.startswith("inbox/")
        }
        names = {self.name, *self.parties}
        for field in ("party_residual", "point_scores"):
            restored = {
                key.split("/", 1)[1]: _restored(arrays, key, n)
                for key in arrays
                if key.startswith(f"{field}/")
            }
            if not set(restored) <= names:
                raise ProtocolError(f"checkpoint field {field} names unknown parties.")
            setattr(self, "party_residuals" if field == "party_residual" else field, restored)
        if self.anderson is not None:
            if "anderson" not in meta:
                raise ProtocolError("checkpoint holds no Anderson state; the job accelerates.")
            memory = {
                key.split("/", 1)[1]: arrays[key] for key in arrays if key.startswith("anderson/")
            }
            try:
                self.anderson.load_state_dict(memory, meta["anderson"])
            except ValueError as error:
                raise ProtocolError(str(error)) from error
            width = (len(self.parties) + 3) * self.n_samples
            if self.anderson.points and self.anderson.points[0].shape != (width,):
                raise ProtocolError(
                    f"checkpoint field anderson must hold points of length {width}."
                )
        self.statistics = {
            key.split("/", 1)[1]: _restored(arrays, key, (len(STATISTICS),))
            for key in arrays
            if key.startswith("statistics/")
        }
        if "local_model" in arrays:
            self.local_model = _restored(arrays, "local_model", (self.n_features,))
        self.round, self.finished = int(meta["round"]), bool(meta["finished"])
        self.rho = float(meta["rho"])
        self.history = [
            RoundRecord(
                r["round"],
                r["rho"],
                Residuals(**r["residuals"]),
                r["finished"],
                r.get("passive_weight"),
            )
            for r in meta["history"]
        ]
        weighting = meta.get("weighting")
        self.weighting = None if weighting is None else PassiveWeight(**weighting)

    # -- internals ------------------------------------------------------------------------
    def _central_round(self) -> list[Message]:
        t = self.round + 1
        if self._requests_statistics(self.round) or self.dual_release is not None:
            # its block stays: as the statistics assumed, or as released in round 0
            own = self.released_scores
        else:
            own_residual = self.party_residuals.get(self.name, self.residual)
            own = self._x_update(own_residual, self.dual, self.rho, t, send_scores=False)
        scores = {self.name: own} | {p: self.inbox[p] for p in self.parties}
        s = sum(scores[p] for p in self.parties) + own
        self.inbox = {}
        z_old, dual_old = self.z, self.dual
        s_hat = s if self.relaxation == 1.0 else self.relaxation * s + (1 - self.relaxation) * z_old
        z = z_update(self.loss, s_hat, self.dual, self.labels, self.rho)
        dual = dual_update(self.dual, s_hat, z, self.rho)
        if self.central_ball is not None:
            z, dual = self.central_ball.project(z), self.central_ball.project(dual)
        last = t >= self.max_rounds
        if self.dual_release is not None and last:
            residual, dual = np.zeros(self.n_samples), self.dual  # nothing more goes out
        elif self.dual_release is not None:
            noisy, event = self.dual_release.apply(dual, party=self.name, round=t, rng=self.rng)
            self.events.append(event)
            residual = (noisy - self.dual) / self.rho
            dual = noisy
        else:
            residual = s - z
        res = residuals(
            s,
            z,
            z_old,
            dual,
            self.rho,
            abs_tol=self.stop_tol[0] if self.stop_tol else 0.0,
            rel_tol=self.stop_tol[1] if self.stop_tol else 0.0,
        )
        self.z, self.dual, self.residual, self.round = z, dual, residual, t
        finished = t >= self.max_rounds or (self.stop_tol is not None and res.converged)
        weight = None
        if finished and self.statistics:
            weight = self._weigh_passive_parties()
        record = RoundRecord(t, self.rho, res, finished, weight)
        self.history.append(record)
        rho_before = self.rho
        if self.adaptive is not None and not finished:
            self.rho = self.adaptive.next_rho(self.rho, res)
            self.loss.check_rho(self.rho)
        if self.anderson is not None and not finished:
            self._accelerate(scores, z_old, dual_old, rho_before)
        if self.observer is not None:
            self.observer(record)
        return self._broadcast(finished=finished)

    def _order(self) -> list[str]:
        return [self.name, *self.parties]

    def _accelerate(
        self, scores: dict[str, np.ndarray], z_old: np.ndarray, dual_old: np.ndarray, rho: float
    ) -> None:
        """Anderson step on the round map of ``w = (u_0..u_M, z, y/rho)``; sets the point the
        next round evaluates through each party's residual."""
        assert self.anderson is not None
        names = self._order()
        point_scores = [self.point_scores[p] for p in names]
        point = np.concatenate([*point_scores, z_old, dual_old / rho])
        value = np.concatenate([*(scores[p] for p in names), self.z, self.dual / rho])
        if self.rho != rho:  # the map changed with the penalty: start the memory afresh
            self.anderson.reset()
        nxt = self.anderson.step(point, value).reshape(len(names) + 2, self.n_samples)
        z_next, dual_next = nxt[-2], nxt[-1] * self.rho
        s_next = nxt[:-2].sum(axis=0)
        self.z, self.dual = z_next, dual_next
        self.residual = s_next - z_next
        self.point_scores = {p: nxt[i] for i, p in enumerate(names)}
        self.party_residuals = {p: scores[p] - nxt[i] + self.residual for i, p in enumerate(names)}

    def _broadcast(self, *, finished: bool) -> list[Message]:
        self.finished = finished
        request = (
            self._request()[0] if not finished and self._requests_statistics(self.round) else None
        )
        weight = self.weighting.weight if finished and self.weighting is not None else None
        messages: list[Message] = []
        for index, p in enumerate(self.parties):
            share = None
            if request is not None:
                share = request if index == 0 else request.without_change()
            messages.append(
                Broadcast(
                    self.name,
                    p,
                    self.round,
                    self.party_residuals.get(p, self.residual),
                    self.dual,
                    self.rho,
                    finished,
                    gradient=None if share is None else share.gradient,
                    curvature=None if share is None else share.curvature,
                    change=None if share is None else share.change,
                    rising=None if share is None else share.rising,
                    falling=None if share is None else share.falling,
                    passive_weight=weight,
                )
            )
        return messages
