r"""The DCA secure sum as the networked runtime hosts it.

Parties with ``role = "compute"`` are the compute nodes (no data); every other party is a
client contributing the sum of its rows ``[first, end)`` of its data file (a ``.npy`` matrix, a
comma-separated text file, or a named data set's training features), so a client holding one
row contributes that row. Clients and compute nodes talk directly, over the runtime's mutual
TLS, and each share is additionally sealed for its compute node alone
(:mod:`dpfed.protocols.secure_sum`). The leader receives every node's sum of shares, which it
adds modulo :math:`2^{64}` and decodes: :math:`\sum_{i \in I}(z_i + \eta_i)`.

Secrets are kept in the party's work folder (``<workdir>/<job id>/``, owner-only files) so a
restarted party sends the very same envelopes again: a client's 32-byte secret (its masks,
ephemeral key, nonces and, outside a simulation, its noise: a ChaCha20 stream keyed from it,
:func:`dpfed.privacy.noise_source.secret_generator`) and a compute node's X25519 key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from dpfed._validation import DpfedInputError
from dpfed.dca.calibration import calibrate_dca, calibrate_dca_discrete
from dpfed.dca.discrete_noise import client_discrete_noise, ring_noise, ring_sigma2
from dpfed.dca.envelope import NodeKeyPair
from dpfed.dca.fixedpoint import DEFAULT_FRACTIONAL_BITS, check_fractional_bits, decode
from dpfed.dca.noise import client_noise
from dpfed.parameters import job_parameters, param
from dpfed.privacy.accounting import Release, releases_epsilon
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.privacy.noise_source import new_secret, secret_generator
from dpfed.protocols.base import BaseProtocol
from dpfed.protocols.secure_sum.messages import NodeKey, ReceivedReport, SealedShare
from dpfed.protocols.secure_sum.roles import ComputeNode, SecureSumClient
from dpfed.runtime.hosting import RoleDelegate
from dpfed.runtime.jobspec import JobSpec, PartySpec, describe
from dpfed.runtime.messages import Message
from dpfed.runtime.private_files import load_or_create_secret
from dpfed.runtime.registry import Dropouts, JobRecord
from dpfed.runtime.wire import register_message

#: The messages of a networked secure sum.
SECURE_SUM_MESSAGES = (NodeKey, SealedShare, ReceivedReport)
for _kind in SECURE_SUM_MESSAGES:
    register_message(_kind)


def _roles(spec: JobSpec) -> tuple[list[str], list[str]]:
    """The clients and the compute nodes, each in the job file's order."""
    clients = [p.name for p in spec.parties if p.role != "compute"]
    nodes = [p.name for p in spec.parties if p.role == "compute"]
    return clients, nodes


def checked_params(spec: JobSpec) -> tuple[int, int, int]:
    """``(fractional_bits, tolerated, dim)`` of a secure-sum job, each checked against the
    job's clients, and its ``deadline`` if it has one (what every process refuses when it
    reads the job file).

    Raises
    ------
    DpfedInputError
        Naming the value and the range it must lie in.
    """
    clients, _ = _roles(spec)
    p = spec.params
    bits = check_fractional_bits(p.get("fractional_bits", DEFAULT_FRACTIONAL_BITS))
    tolerated = int(p.get("tolerated", 0))
    if not 0 <= tolerated < len(clients):
        raise DpfedInputError(
            f"[params].tolerated must be in [0, {len(clients) - 1}] for {len(clients)} "
            f"clients. Found {tolerated}."
        )
    dim = int(p.get("dim", 0))
    if dim < 1:
        raise DpfedInputError(
            f"a secure_sum job needs [params].dim, the length D >= 1 of the summed vectors. "
            f"Found {p.get('dim')!r}."
        )
    if "deadline" in p and not 0 < float(p["deadline"]) < math.inf:
        raise DpfedInputError(
            f"[params].deadline must be a number of seconds > 0. Found {p['deadline']!r}."
        )
    return bits, tolerated, dim


#: The clients' noise in a networked secure sum: exact discrete Gaussian noise in the ring
#: (default), or continuous noise drawn in floating point.
NOISES = ("discrete", "continuous")

#: The ring noise's ledger multiplier is shrunk by this relative amount so its Gaussian RDP
#: curve dominates the distributed discrete Gaussian's bound, whose tau terms (below 1e-60 at
#: the ring's scale) it leaves out; the calibration aims this much lower.
_TAU_MARGIN = 1e-9


def noise_plan(spec: JobSpec) -> dict[str, Any]:
    """Each client's noise and how it was chosen.

    ``mechanism = "none"`` adds none; ``"gaussian"`` takes ``noise_std`` as given or calibrates
    it from ``epsilon``, ``delta`` and ``l2_sensitivity`` for the job's number of clients and
    ``tolerated``. With ``noise = "discrete"`` (default) every client adds exact discrete
    Gaussian noise in the ring (:mod:`dpfed.dca.discrete_noise`), calibrated by the
    distributed discrete Gaussian's Rényi-DP bound
    (:func:`dpfed.dca.calibration.calibrate_dca_discrete`; ``calibration = "rdp"``, or
    ``"classic"`` for the classic formula's noise accounted the same way; ``"pld"`` does not
    hold for it and is refused); with ``noise = "continuous"``, float noise calibrated by
    :func:`dpfed.dca.calibration.calibrate_dca` (pld, rdp or classic).
    """

    p = spec.params
    clients, _ = _roles(spec)
    tolerated = int(p.get("tolerated", 0))
    mechanism = p.get("mechanism", "none")
    noise = p.get("noise", "discrete")
    out: dict[str, Any] = {
        "mechanism": mechanism,
        "tolerated": tolerated,
        "n_clients": len(clients),
        "noise": noise,
    }
    if noise not in NOISES:
        raise DpfedInputError(f"[params].noise must be one of {NOISES}. Found {noise!r}.")
    if mechanism == "none":
        extra = sorted({"noise_std", "epsilon", "delta", "l2_sensitivity"} & set(p))
        if extra:
            raise DpfedInputError(
                f'[params] {extra} need mechanism = "gaussian". Found mechanism "none".'
            )
        return out | {"client_std": 0.0}
    if mechanism != "gaussian":
        raise DpfedInputError(
            f'[params].mechanism must be "none" or "gaussian". Found {mechanism!r}.'
        )
    bits, _, dim = checked_params(spec)
    if "noise_std" in p:
        std = float(p["noise_std"])
        if not std > 0:
            raise DpfedInputError(f"[params].noise_std must be > 0. Found {std!r}.")
        plan = out | {"client_std": std, "calibration": None}
    else:
        missing = [k for k in ("epsilon", "delta", "l2_sensitivity") if k not in p]
        if missing:
            raise DpfedInputError(
                f"a gaussian secure sum needs [params].noise_std, or epsilon, delta and "
                f"l2_sensitivity. Missing {missing}."
            )
        eps, dlt, sens = float(p["epsilon"]), float(p["delta"]), float(p["l2_sensitivity"])
        method = p.get("calibration") or ("rdp" if noise == "discrete" else "pld")
        if noise == "discrete" and method == "pld":
            raise DpfedInputError(
                '[params].calibration = "pld" does not hold for noise = "discrete" (the '
                "exact ring noise's privacy loss distribution is not the continuous Gaussian's). "
                'Expected "rdp" (its default) or "classic", or noise = "continuous".'
            )
        if noise == "discrete" and method == "rdp":
            std = calibrate_dca_discrete(
                eps * (1 - 1e-7), dlt, sens, len(clients), tolerated, dim, bits
            )
            plan = out | {"client_std": std, "calibration": None}
        else:
            cal = calibrate_dca(eps, dlt, sens, len(clients), tolerated, method=method)
            plan = out | {"client_std": cal.client_std, "calibration": cal}
        plan["method"] = method
    if noise == "discrete":
        s2 = ring_sigma2(plan["client_std"], bits)
        plan["sigma2"] = s2
        if "l2_sensitivity" in p:
            honest = len(clients) - tolerated - 1
            grid = math.ldexp(float(p["l2_sensitivity"]), bits) + math.sqrt(dim)
            plan["ring_multiplier"] = math.sqrt(honest * s2) / grid * (1 - _TAU_MARGIN)
            if "delta" in p:
                plan["epsilon"] = releases_epsilon(
                    [("discrete_gaussian", plan["ring_multiplier"])], float(p["delta"])
                )
    return plan


def _read_rows(spec: JobSpec, name: str) -> np.ndarray:
    """The client's rows of its data file, dense float64 of shape (rows, D)."""
    party = spec.party(name)
    path = Path(party.data).expanduser()
    if not path.is_absolute() and (spec.path.parent / path).exists():
        path = spec.path.parent / path
    try:
        if path.suffix == ".npy":
            matrix = np.load(path, allow_pickle=False)
        elif path.suffix in (".csv", ".txt"):
            matrix = np.loadtxt(path, delimiter=",", ndmin=2)
        else:
            from dpfed.data import load_dataset  # scikit-learn: only for a named data set

            X = load_dataset(party.data, party.data_dir).X_train
            matrix = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    except (OSError, ValueError) as exc:
        raise DpfedInputError(f"party {name!r}: cannot read {party.data!r}: {exc}") from None
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim == 1:
        matrix = matrix.reshape(-1, 1)
    first, end = cast(tuple[int, int], party.rows)  # a client holds rows (its span)
    if matrix.ndim != 2 or end > matrix.shape[0]:
        raise DpfedInputError(
            f"party {name!r}: rows [{first}, {end}) lie outside {party.data!r}, a matrix of "
            f"shape {matrix.shape}."
        )
    rows: np.ndarray = matrix[first:end]
    if not np.all(np.isfinite(rows)):
        raise DpfedInputError(f"party {name!r}: its rows of {party.data!r} are not all finite.")
    return rows


class SecureSumHost(RoleDelegate):
    """A client (its rows' sum) or a compute node of a secure-sum job."""

    plan: list[float | Release]
    holds_data = True  # a client; a compute node sets False
    ledger_support = True  # set per job in __init__
    ledger_refusal = (
        "its share is noise calibrated without [params].l2_sensitivity, so the budget ledger "
        "cannot say what it spends"
    )

    def losses(self, models: list[list[float]]) -> list[float]:
        """Refused: a secure sum trains no model."""
        raise DpfedInputError("a secure sum trains no model: there are no losses to evaluate.")

    def __init__(self, spec: JobSpec, name: str) -> None:
        self.spec, self.name = spec, name
        clients, nodes = _roles(spec)
        p = spec.params
        self.fractional_bits, tolerated, self.dim = checked_params(spec)
        self.noise = noise_plan(spec)
        self.plan = []
        self.release: PrivacyEvent | None = None
        # the ledger accounts a client's share as the Gaussian release it amounts to while at
        # most T clients drop or collude: sigma_std = sqrt(N - T - 1) * client_std over
        # l2_sensitivity; without a sensitivity there is nothing to account, and a client
        # with a budget refuses the job
        self.ledger_support = self.noise["client_std"] == 0.0 or "l2_sensitivity" in p
        party = spec.party(name)
        folder = party.workdir / spec.id
        if party.role == "compute":
            self.holds_data = False
            self.n_rows = 0
            raw = load_or_create_secret(
                folder, "dca-node.key", lambda: NodeKeyPair.generate().private_bytes()
            )
            self.role: Any = ComputeNode(
                name,
                clients=clients,
                nodes=nodes,
                dim=self.dim,
                job_id=spec.id,
                key=NodeKeyPair.from_private_bytes(raw),
                tolerated=tolerated,
            )
            return
        self.holds_data = True
        rows = _read_rows(spec, name)
        if rows.shape[1] != self.dim:
            raise DpfedInputError(
                f"party {name!r}: its rows of {party.data!r} have {rows.shape[1]} columns; the "
                f"job sums vectors of [params].dim = {self.dim}."
            )
        self.n_rows = rows.shape[0]
        secret = load_or_create_secret(folder, "dca-client.key", new_secret)
        index = clients.index(name)
        value = rows.sum(axis=0)
        value = self._noisy(value, index, secret)
        self._account(len(clients), tolerated)
        self.role = SecureSumClient(
            name,
            index,
            value,
            nodes=nodes,
            n_clients=len(clients),
            job_id=spec.id,
            secret=secret,
            fractional_bits=self.fractional_bits,
        )

    def _noisy(self, value: np.ndarray, index: int, secret: bytes) -> np.ndarray:
        """The client's sum with its share of the noise: exact integers in the ring, or
        Gaussian floats; from the declared seed in a simulation, else from its own secret."""
        p = self.spec.params
        std = self.noise["client_std"]
        discrete = self.noise["noise"] == "discrete"
        if std > 0 and discrete:
            # exact integers in the ring: rint(z 2^f) + K, K ~ N_Z(0, s^2), then back to the
            # value the encoding rounds to the very same integers (|.| < 2^53: exact)
            s2 = self.noise["sigma2"]
            ring = (
                client_discrete_noise(int(p["seed"]), index, self.dim, s2)
                if self.spec.simulation
                else ring_noise(s2, self.dim, secret_generator(secret, "dca noise"))
            )
            scale = math.ldexp(1.0, self.fractional_bits)
            value = (np.rint(value * scale) + ring) / scale
        elif std > 0:
            if self.spec.simulation:
                value = value + client_noise(int(p["seed"]), index, self.dim, std)
            else:
                value = value + std * secret_generator(secret, "dca noise").standard_normal(
                    self.dim
                )
        return value

    def _account(self, n_clients: int, tolerated: int) -> None:
        """The ledger entry and budget plan of the client's share (none without a sensitivity
        or without noise)."""
        p, name = self.spec.params, self.name
        std = self.noise["client_std"]
        discrete = self.noise["noise"] == "discrete"
        if std > 0 and discrete and "l2_sensitivity" in p:
            z_ring = self.noise["ring_multiplier"]
            sensitivity = float(p["l2_sensitivity"])
            self.release = PrivacyEvent(
                party=name,
                round=1,
                mechanism="discrete_gaussian",
                noise_multiplier=z_ring,
                l2_sensitivity=sensitivity,
                sigma=z_ring * sensitivity,
                label="secure sum share (distributed discrete Gaussian, exact in the ring)",
            )
            self.plan = [Release("discrete_gaussian", z_ring)]
        elif std > 0 and "l2_sensitivity" in p:
            cal = self.noise.get("calibration")
            sensitivity = float(p["l2_sensitivity"])
            sigma_std = (
                cal.sigma_std if cal is not None else std * math.sqrt(n_clients - tolerated - 1)
            )
            z = cal.noise_multiplier if cal is not None else sigma_std / sensitivity
            self.release = PrivacyEvent(
                party=name,
                round=1,
                mechanism="gaussian",
                noise_multiplier=z,
                l2_sensitivity=sensitivity,
                sigma=sigma_std,
                label="secure sum share (distributed Gaussian)",
            )
            self.plan = [self.release.noise_multiplier]

    @property
    def exact_release(self) -> bool:
        return self.holds_data and self.noise["client_std"] == 0.0

    @property
    def events(self) -> list[PrivacyEvent]:
        """The client's one release once its shares are out (none for a node)."""
        return [self.release] if self.release is not None and self.role.finished else []

    def close(self) -> list[Message]:
        """The submission deadline passed: a compute node declares the clients it holds final
        (:meth:`ComputeNode.close`); a client refuses."""
        if self.holds_data:
            raise DpfedInputError(
                f"{self.name} is a client of the secure sum: only a compute node closes the "
                "submissions."
            )
        messages: list[Message] = self.role.close()
        return messages

    def model(self) -> np.ndarray:
        """A compute node's sum of shares (uniformly random on its own); nothing for a
        client."""
        if self.holds_data or self.role.sum is None:
            return np.zeros(0)
        return cast(np.ndarray, self.role.sum)

    def describe(self) -> dict[str, Any]:
        return {"n_samples": self.n_rows, "dim": self.dim}

    def final(self) -> dict[str, Any]:
        if self.holds_data:
            return {"n_samples": self.n_rows}
        clients, _ = _roles(self.spec)
        return {
            "n_samples": 0,
            "sum": [int(v) for v in self.role.sum],
            "included": [c for c, ok in zip(clients, self.role.included, strict=True) if ok],
        }


@dataclass(frozen=True)
class SecureSumParams:
    """``[params]`` of a DCA secure sum: the length ``dim`` of the vectors, the per-client
    noise either as ``noise_std`` or calibrated from ``epsilon``, ``delta`` and
    ``l2_sensitivity`` (``calibration`` pld, rdp or classic), ``tolerated`` dropped or colluding
    clients, the submission ``deadline`` after which missing clients are dropped, the
    fixed-point ``fractional_bits`` and a simulation ``seed`` of the noise (without one every
    client draws its noise from its own secret). The host checks the values."""

    mechanism: str = param("none", help="per-client noise", choices=("none", "gaussian"))
    noise_std: float | None = param(help="instead of epsilon: each client's noise scale")
    epsilon: float | None = param(help="target epsilon of the sum")
    delta: float | None = param(help="target delta of the sum")
    l2_sensitivity: float | None = param(help="L2 sensitivity of one client's vector")
    noise: str = param(
        "discrete",
        help="the clients' noise: exact discrete Gaussian in the "
        "ring, or continuous (drawn in floating point)",
        choices=NOISES,
    )
    calibration: str | None = param(
        help="calibration of the noise: rdp (default) or classic "
        "with discrete noise; pld (default), rdp or classic with "
        "continuous noise",
        choices=("pld", "rdp", "classic"),
    )
    tolerated: int = param(0, help="dropped or colluding clients the noise still covers")
    deadline: float | None = param(
        help="seconds after the leader begins the job within which a client's shares must "
        "reach the compute nodes; clients not in by then are dropped (at most tolerated)"
    )
    fractional_bits: int = param(DEFAULT_FRACTIONAL_BITS, help="bits of the fixed-point fraction")
    seed: int | None = param(help="seed of every client's noise (a simulation only)", public=False)
    dim: int | None = param(help="length D >= 1 of the summed vectors")


#: Keys of ``[params]`` for the DCA secure sum (:class:`SecureSumParams`).
SECURE_SUM_PARAMS = job_parameters(SecureSumParams)


class SecureSumProtocol(BaseProtocol):
    """The DCA secure sum: clients hold row ranges, ``role = "compute"`` parties hold no data
    and sum the shares; the leader adds the nodes' sums."""

    name = "secure_sum"
    params = SECURE_SUM_PARAMS
    holds = "rows"
    dataless_role = "compute"
    same_rows = False
    messages = SECURE_SUM_MESSAGES
    report = None
    result_kind = "aggregate"

    def check_parties(self, parties: Sequence[PartySpec]) -> None:
        if not (any(p.role == "compute" for p in parties) and any(not p.role for p in parties)):
            raise DpfedInputError(
                'a secure_sum job needs at least one party with role = "compute" and at '
                f"least one client. Found roles {[p.role or 'client' for p in parties]}."
            )

    def private(self, params: Mapping[str, Any]) -> bool:
        return cast(bool, params.get("mechanism", "none") != "none")

    def check_job(self, spec: JobSpec) -> None:
        checked_params(spec)
        noise_plan(spec)

    def dropouts(self, spec: JobSpec) -> Dropouts | None:
        """The clients, droppable up to ``tolerated`` when ``[params].deadline`` is set."""
        if "deadline" not in spec.params:
            return None
        clients, _ = _roles(spec)
        _, tolerated, _ = checked_params(spec)
        return Dropouts(tuple(clients), tolerated, float(spec.params["deadline"]))

    def host(self, spec: JobSpec, name: str) -> SecureSumHost:
        return SecureSumHost(spec, name)

    def result(self, spec: JobSpec, record: JobRecord) -> dict[str, Any]:
        return secure_sum_result(
            spec, record.accounts, seconds=record.seconds, n_samples=record.n_samples
        )


#: The secure sum, as registered in :data:`dpfed.runtime.registry.PROTOCOL_REGISTRY`.
PROTOCOL = SecureSumProtocol()


def secure_sum_result(
    spec: JobSpec,
    accounts: dict[str, dict[str, Any]],
    *,
    seconds: float,
    n_samples: Mapping[str, int | None] | None = None,
) -> dict[str, Any]:
    """The leader's ``result.json`` from the parties' final accounts: the decoded sum, which
    clients it includes and which dropped out, and how private it is.

    Parameters
    ----------
    spec : JobSpec
    accounts : dict of str to dict
        The final account of every compute node (and of any client that has one).
    seconds : float
    n_samples : mapping of str to int, optional
        Each client's rows as it declared them when the job opened; a client never opened is
        absent (None in the result). Default: from ``accounts``.
    """
    from dataclasses import asdict

    clients, nodes = _roles(spec)
    included = {tuple(accounts[n]["included"]) for n in nodes}
    if len(included) != 1:
        raise DpfedInputError(
            f"the compute nodes summed different sets of clients: {sorted(included)}."
        )
    agreed = list(next(iter(included)))
    dropped = [c for c in clients if c not in agreed]
    if n_samples is None:
        n_samples = {c: accounts[c]["n_samples"] for c in clients if c in accounts}
    total = np.zeros(len(accounts[nodes[0]]["sum"]), dtype=np.uint64)
    for n in nodes:
        total += np.array(accounts[n]["sum"], dtype=np.uint64)
    fractional_bits = spec.params.get("fractional_bits", DEFAULT_FRACTIONAL_BITS)
    plan = noise_plan(spec)
    cal = plan.pop("calibration", None)
    privacy: dict[str, Any] = plan | {"notes": []}
    if cal is not None:
        privacy |= {"epsilon": cal.epsilon, "delta": cal.delta, "calibration": asdict(cal)}
        privacy["notes"] += list(cal.notes)
    if plan.get("epsilon") is not None:  # the exact ring noise, accounted by Renyi DP
        privacy |= {"epsilon": plan["epsilon"], "delta": float(spec.params["delta"])}
        privacy["notes"].append(
            "each client added exact discrete Gaussian noise in the ring; the epsilon is the "
            "distributed discrete Gaussian's Renyi-DP bound"
        )
    if plan["mechanism"] != "none":
        privacy["notes"].append(
            f"the guarantee holds while at most {plan['tolerated']} clients drop out or collude "
            "and at least one compute node is honest"
        )
    else:
        privacy["notes"].append("no noise: the sum is exact and protects no client")
    if dropped:
        privacy["notes"].append(
            f"{len(dropped)} of {len(clients)} clients dropped out and are not in the sum "
            f"({', '.join(dropped)})"
            + (
                f"; the noise calibration covers up to {plan['tolerated']} dropped or colluding "
                f"clients in all, so the guarantee now holds while at most "
                f"{plan['tolerated'] - len(dropped)} included clients collude"
                if plan["mechanism"] != "none"
                else ""
            )
        )
    return {
        "protocol": "secure_sum",
        "sum": decode(total, fractional_bits).tolist(),
        "sum_encoded": [int(v) for v in total],
        "fractional_bits": fractional_bits,
        "clients": clients,
        "included": agreed,
        "dropped": dropped,
        "compute_nodes": nodes,
        "n_samples": {c: n_samples.get(c) for c in clients},
        "privacy": privacy,
        "seconds": seconds,
        "job": describe(spec),
    }
