"""A networked secure role's checkpoint (:meth:`SecureRole.state_dict`): its block, its own
noise and model, and every ciphertext it holds (key holders' contexts, encrypted labels,
requests, statistics, powers waiting for their turn, parts of messages), so that a restarted
party continues where it was."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from dpfed.privacy.ledger import PrivacyEvent
from dpfed.privacy.noise_source import generator_state, restore_generator_state
from dpfed.protocols.vertical_secure.party import SecureParty
from dpfed.protocols.vertical_secure.weighting import WeightedPassive
from dpfed.secure import ckks

__all__ = ["CheckpointedRole", "cut"]


def cut(raw: bytes, lengths: list[int]) -> list[bytes]:
    """``raw`` cut into pieces of ``lengths``."""
    out, at = [], 0
    for v in lengths:
        out.append(raw[at : at + v])
        at += v
    return out


class CheckpointedRole:
    """A secure role's checkpoint: the state below is the role's
    (:class:`~dpfed.protocols.vertical_secure.roles.SecureRole`)."""

    party: SecureParty
    inverse: np.ndarray | None
    own_noise: np.ndarray | None
    publics: dict[int, bytes]
    _contexts: dict[int, ckks.PublicContext]
    labels: list[bytes] | None
    request: list[bytes] | None
    waiting: dict[str, list[bytes]]
    statistics: dict[int, list[bytes]]
    parts: dict[str, dict[int, list[bytes]]]
    final_scores: dict[int, np.ndarray]
    round: int
    finished: bool
    started: bool
    bytes_sent: int
    seconds: float
    events: list[PrivacyEvent]
    peer_costs: dict[str, float]
    weight: float | None
    weighting: WeightedPassive | None

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """A secure role's state: arrays (its block, the ciphertexts it holds) and metadata."""
        arrays: dict[str, np.ndarray] = {"w": self.party.w.copy()}
        for name, value in (
            ("inverse", self.inverse),
            ("own_noise", self.own_noise),
            ("own_model", self.party.own_model),
        ):
            if value is not None:
                arrays[name] = value.copy()
        lengths: dict[str, list[int]] = {}

        def keep(key: str, items: list[bytes]) -> None:
            arrays[key] = np.frombuffer(b"".join(items), dtype=np.uint8).copy()
            lengths[key] = [len(i) for i in items]

        for holder, public in self.publics.items():
            keep(f"public|{holder}", [public])
        for name, items in (("labels", self.labels), ("request", self.request)):
            if items is not None:
                keep(name, items)
        for key, items in self.waiting.items():
            keep(f"waiting|{key}", items)
        for passive, items in self.statistics.items():
            keep(f"statistics|{passive}", items)
        for key, got in self.parts.items():
            for k, items in got.items():
                keep(f"part|{key}|{k}", items)
        for passive, scores in self.final_scores.items():
            arrays[f"final|{passive}"] = scores.copy()
        meta = {
            "round": self.round,
            "finished": self.finished,
            "started": self.started,
            "rng": generator_state(self.party.rng),
            "bytes_sent": self.bytes_sent,
            "seconds": self.seconds,
            "events": [asdict(e) for e in self.events],
            "lengths": lengths,
            "peer_costs": self.peer_costs,
            "weight": self.weight,
            "weighting": None if self.weighting is None else self.weighting.as_dict(),
        }
        return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        lengths: dict[str, list[int]] = meta["lengths"]

        def items(key: str) -> list[bytes]:
            return cut(arrays[key].tobytes(), lengths[key])

        self.party.w = np.asarray(arrays["w"], dtype=np.float64).copy()
        self.inverse = arrays.get("inverse")
        self.own_noise = arrays.get("own_noise")
        if "own_model" in arrays:
            self.party.own_model = np.asarray(arrays["own_model"], dtype=np.float64).copy()
        self.publics, self._contexts = {}, {}
        self.waiting, self.statistics, self.parts, self.final_scores = {}, {}, {}, {}
        self.labels = items("labels") if "labels" in lengths else None
        self.request = items("request") if "request" in lengths else None
        for key in lengths:
            kind, _, rest = key.partition("|")
            if kind == "public":
                self.publics[int(rest)] = items(key)[0]
            elif kind == "waiting":
                self.waiting[rest] = items(key)
            elif kind == "statistics":
                self.statistics[int(rest)] = items(key)
            elif kind == "part":
                part_key, _, k = rest.rpartition("|")
                self.parts.setdefault(part_key, {})[int(k)] = items(key)
        for key, scores in arrays.items():
            if key.startswith("final|"):
                self.final_scores[int(key.partition("|")[2])] = np.asarray(scores, np.float64)
        self.round, self.finished = int(meta["round"]), bool(meta["finished"])
        self.started = bool(meta["started"])
        restore_generator_state(self.party.rng, meta["rng"])
        self.bytes_sent, self.seconds = int(meta["bytes_sent"]), float(meta["seconds"])
        self.peer_costs = dict(meta.get("peer_costs", {}))
        self.events = [PrivacyEvent(**e) for e in meta["events"]]
        self.weight = meta.get("weight")
        chosen = meta.get("weighting")
        self.weighting = None if chosen is None else WeightedPassive.from_dict(chosen)
