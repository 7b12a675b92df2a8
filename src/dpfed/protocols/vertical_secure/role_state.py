"""A networked secure role's checkpoint (:meth:`SecureRole.state_dict`): its block, its own
noise and model, and every ciphertext it holds (key holders' contexts, encrypted labels,
requests, statistics, powers waiting for their turn, parts of messages), so that a restarted
party continues where it was."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from dpfed.privacy.ledger import PrivacyEvent
from dpfed.privacy.noise_source import generator_state, restore_generator_state
from dpfed.protocols.vertical_secure.weighting import WeightedPassive

if TYPE_CHECKING:
    from dpfed.protocols.vertical_secure.roles import SecureRole

__all__ = ["cut", "load_role_state", "role_state"]


def cut(raw: bytes, lengths: list[int]) -> list[bytes]:
    """``raw`` cut into pieces of ``lengths``."""
    out, at = [], 0
    for v in lengths:
        out.append(raw[at:at + v])
        at += v
    return out


def role_state(role: SecureRole) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A secure role's state: arrays (its block, the ciphertexts it holds) and metadata."""
    arrays: dict[str, np.ndarray] = {"w": role.party.w.copy()}
    for name, value in (("inverse", role.inverse), ("own_noise", role.own_noise),
                        ("own_model", role.party.own_model)):
        if value is not None:
            arrays[name] = value.copy()
    lengths: dict[str, list[int]] = {}

    def keep(key: str, items: list[bytes]) -> None:
        arrays[key] = np.frombuffer(b"".join(items), dtype=np.uint8).copy()
        lengths[key] = [len(i) for i in items]

    for holder, public in role.publics.items():
        keep(f"public|{holder}", [public])
    for name, items in (("labels", role.labels), ("request", role.request)):
        if items is not None:
            keep(name, items)
    for key, items in role.waiting.items():
        keep(f"waiting|{key}", items)
    for passive, items in role.statistics.items():
        keep(f"statistics|{passive}", items)
    for key, got in role.parts.items():
        for k, items in got.items():
            keep(f"part|{key}|{k}", items)
    for passive, scores in role.final_scores.items():
        arrays[f"final|{passive}"] = scores.copy()
    meta = {
        "round": role.round, "finished": role.finished, "started": role.started,
        "rng": generator_state(role.party.rng), "bytes_sent": role.bytes_sent,
        "seconds": role.seconds, "events": [asdict(e) for e in role.events],
        "lengths": lengths, "peer_costs": role.peer_costs, "weight": role.weight,
        "weighting": None if role.weighting is None else role.weighting.as_dict(),
    }
    return arrays, meta

def load_role_state(role: SecureRole, arrays: dict[str, np.ndarray],
                meta: dict[str, Any]) -> None:
    """Restore what :func:`role_state` saved."""
    lengths: dict[str, list[int]] = meta["lengths"]

    def items(key: str) -> list[bytes]:
        return cut(arrays[key].tobytes(), lengths[key])

    role.party.w = np.asarray(arrays["w"], dtype=np.float64).copy()
    role.inverse = arrays.get("inverse")
    role.own_noise = arrays.get("own_noise")
    if "own_model" in arrays:
        role.party.own_model = np.asarray(arrays["own_model"], dtype=np.float64).copy()
    role.publics, role._contexts = {}, {}
    role.waiting, role.statistics, role.parts, role.final_scores = {}, {}, {}, {}
    role.labels = items("labels") if "labels" in lengths else None
    role.request = items("request") if "request" in lengths else None
    for key in lengths:
        kind, _, rest = key.partition("|")
        if kind == "public":
            role.publics[int(rest)] = items(key)[0]
        elif kind == "waiting":
            role.waiting[rest] = items(key)
        elif kind == "statistics":
            role.statistics[int(rest)] = items(key)
        elif kind == "part":
            part_key, _, k = rest.rpartition("|")
            role.parts.setdefault(part_key, {})[int(k)] = items(key)
    for key, scores in arrays.items():
        if key.startswith("final|"):
            role.final_scores[int(key.partition("|")[2])] = np.asarray(scores, np.float64)
    role.round, role.finished = int(meta["round"]), bool(meta["finished"])
    role.started = bool(meta["started"])
    restore_generator_state(role.party.rng, meta["rng"])
    role.bytes_sent, role.seconds = int(meta["bytes_sent"]), float(meta["seconds"])
    role.peer_costs = dict(meta.get("peer_costs", {}))
    role.events = [PrivacyEvent(**e) for e in meta["events"]]
    role.weight = meta.get("weight")
    chosen = meta.get("weighting")
    role.weighting = None if chosen is None else WeightedPassive.from_dict(chosen)
