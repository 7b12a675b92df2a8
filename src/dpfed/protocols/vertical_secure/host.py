"""The secure vertical mode as the networked runtime runs it: a vertical job file with
``[params] secure = true`` (protocol ``vertical_secure``).

A label holder first, then one to six passive parties, each on its column range of a data set
or its own aligned table (:func:`dpfed.protocols.vertical.host.party_rows`). The key holders
(the label holder and the first passive party) keep their CKKS key pairs in their job folders
(``ckks.key``, owner-only); every party keeps every ciphertext it encrypts or folds in
``outbox/`` (a restarted party sends the same bytes again); its noise comes from its secret
generator, as in every networked job. A protected party reserves the secure mode's
Gaussian releases in its budget ledger (:attr:`~.setup.SecureSetup.release_count`) and
records them as it makes them: its Gram matrix first (carrying every grid coordinate of the
job), then one per round, then (the passive party, when the label holder weighs its scores)
the weighting statistics.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np

from dpfed._validation import DpfedInputError, check_binary_labels
from dpfed.parameters import config_from_table, job_parameters, param
from dpfed.privacy.accounting import Release
from dpfed.privacy.ledger import PrivacyEvent
from dpfed.protocols.base import BaseProtocol
from dpfed.protocols.psi_align.messages import ALIGNMENT_MESSAGES
from dpfed.protocols.vertical.evaluation import RoundReport
from dpfed.protocols.vertical.host import ColumnPrediction, party_rows
from dpfed.protocols.vertical_secure.messages import (
    CipherPart,
    FinalScores,
    GradientRelease,
    WeightRelease,
)
from dpfed.protocols.vertical_secure.party import KEY_HOLDERS, SecureParty
from dpfed.protocols.vertical_secure.roles import Outbox, SecureRole
from dpfed.protocols.vertical_secure.setup import (
    DEFAULT_DEGREE,
    DEFAULT_INTERCEPT_SCALE,
    DEFAULT_RADIUS,
    DEFAULT_ROUNDS,
    MAX_PARTIES,
    NO_FALLBACK,
    ROW_SCALINGS,
    WEIGHTED_BOUND,
    SecureSetup,
    secure_protection,
)
from dpfed.runtime.hosting import RoleDelegate, noise_generator
from dpfed.runtime.jobspec import LEADER, JobSpec, PartySpec, describe
from dpfed.runtime.private_files import load_or_create_secret
from dpfed.runtime.registry import JobRecord
from dpfed.secure import ckks

#: The protocol's name in the registry (a vertical job file selects it by ``secure = true``).
SECURE_PROTOCOL = "vertical_secure"
#: The messages of a networked secure job (registered with the wire where they are defined).
SECURE_MESSAGES = (CipherPart, GradientRelease, WeightRelease, FinalScores, RoundReport)
#: The file in a party's job folder that holds its CKKS key pair.
KEY_FILE = "ckks.key"


@dataclass(frozen=True)
class SecureParams:
    """``[params]`` of a secure vertical job (the options of ``dpfed train vertical
    --secure``)."""

    secure: bool = param(True, help="the secure mode (true: this protocol)")
    mechanism: str = param(
        "sound", help="the secure mode is a sound mechanism of its own", choices=("sound",)
    )
    epsilon: float | None = param(None, help="the budget of every party's view")
    delta: float | None = param(None, help="delta of that budget")
    protect_label_holder: bool = param(
        False,
        help="protect the labels and the label holder's rows too (else the passive "
        "party's rows only)",
    )
    label_holder_keeps_model: bool = param(
        False,
        help="with protect_label_holder: protect them from the passive party only; the "
        "label holder keeps an exact model of its own, weighs the passive scores "
        "against it and receives every prediction",
    )
    iterations: int = param(DEFAULT_ROUNDS, help="Gauss-Seidel rounds T")
    loss: str = param("logistic", help="the loss (logistic only)", choices=("logistic",))
    regularizer: str = param("l2", help="the ridge (l2 only)", choices=("l2",))
    fit_intercept: bool = param(True, help="the label holder fits an intercept")
    row_scaling: str = param(
        "normalize", help="how each party bounds its rows", choices=ROW_SCALINGS
    )
    degree: int = param(DEFAULT_DEGREE, help="degree of the sigmoid polynomial")
    radius: float = param(DEFAULT_RADIUS, help="the model's norm bound R")
    intercept_scale: float = param(DEFAULT_INTERCEPT_SCALE, help="the intercept column's constant")
    ridge: float | None = param(None, help="the ridge lambda (default: 1e-5)")
    seed: int | None = param(None, help="a simulation's seed ([job].simulation = true)")


def secure_params(params: Mapping[str, Any]) -> SecureParams:
    """The validated ``[params]`` of a secure job.

    Raises
    ------
    DpfedInputError
        Naming a missing budget or ``secure = false``.
    """
    cfg: SecureParams = config_from_table(SecureParams, params)
    if not cfg.secure:
        raise DpfedInputError("protocol vertical_secure runs [params].secure = true jobs only.")
    for key, value, allowed, why in (
        ("mechanism", cfg.mechanism, "sound", "the secure mode is a sound mechanism of its own"),
        (
            "loss",
            cfg.loss,
            "logistic",
            "a polynomial of its derivative is what is evaluated under encryption",
        ),
        ("regularizer", cfg.regularizer, "l2", "the secure mode uses an l2 ridge"),
    ):
        if value != allowed:
            raise DpfedInputError(
                f"[params].{key} of a secure job must be {allowed!r} ({why}). Found {value!r}."
            )
    if cfg.epsilon is None or cfg.delta is None:
        raise DpfedInputError(
            "a secure vertical job needs [params].epsilon and [params].delta: "
            "it calibrates its own noise to them."
        )
    if cfg.label_holder_keeps_model and not cfg.protect_label_holder:
        raise DpfedInputError(
            "[params].label_holder_keeps_model = true needs protect_label_holder = true: it "
            "protects the label holder's data from the passive party while the label holder "
            "keeps its own model (without protect_label_holder it keeps it anyway)."
        )
    return cfg


def secure_setup(cfg: SecureParams, n_samples: int, widths: Sequence[int]) -> SecureSetup:
    """The public set-up every party derives from the job file and the shapes."""
    assert cfg.epsilon is not None and cfg.delta is not None
    return SecureSetup(
        n_samples,
        tuple(int(w) for w in widths),
        cfg.epsilon,
        cfg.delta,
        protect=secure_protection(cfg.protect_label_holder, cfg.label_holder_keeps_model),
        rounds=cfg.iterations,
        degree=cfg.degree,
        radius=cfg.radius,
        fit_intercept=cfg.fit_intercept,
        intercept_scale=cfg.intercept_scale,
        ridge=cfg.ridge,
        row_scaling=cfg.row_scaling,
    )


class SecureVerticalHost(ColumnPrediction, RoleDelegate):
    """One party of a networked secure vertical job; once it has finished, it scores new
    rows with its block (:class:`~dpfed.protocols.vertical.host.ColumnPrediction`)."""

    role: SecureRole
    ledger_support = True
    ledger_refusal = ""
    holds_data = True

    def __init__(self, spec: JobSpec, name: str) -> None:
        self.spec, self.name = spec, name
        self.index = spec.names.index(name)
        cfg = secure_params(spec.params)
        rows = party_rows(spec, name)
        self.alignment, self.total_features = rows.alignment, rows.total_features
        self.training_block, self._training_digests = rows.block, None
        self.n_samples, self.n_features = (int(v) for v in rows.block.shape)
        self.setup = secure_setup(cfg, self.n_samples, rows.widths)
        folder = spec.party(name).workdir / spec.id
        levels = self.setup.parties
        key_pair = None  # only the key holders keep a key pair (party.KEY_HOLDERS)
        if self.index in KEY_HOLDERS:
            key_pair = load_or_create_secret(
                folder, KEY_FILE, lambda: ckks.KeyHolder(levels=levels).secret_bytes()
            )
        labels = None
        if self.index == 0:
            own_labels = cast(np.ndarray, rows.labels)  # the label holder's rows have labels
            labels = (check_binary_labels("labels", own_labels) > 0).astype(np.float64)
        party = SecureParty(
            self.index,
            rows.block,
            self.setup,
            noise_generator(spec, name, index=self.index, n_parties=len(spec.names)),
            y=labels,
            key_pair=key_pair,
        )
        test_labels = None
        if self.index == 0 and rows.test_block is not None and rows.test_labels is not None:
            test_labels = check_binary_labels("test labels", rows.test_labels)
        self.role = SecureRole(
            party,
            tuple(spec.names),
            LEADER,
            outbox=Outbox(folder / "outbox"),
            max_bytes=spec.max_message_bytes,
            test_rows=rows.test_block,
            test_labels=test_labels,
        )
        self.plan = cast(list[float | Release], self.setup.party_releases(self.index))

    @property
    def exact_release(self) -> bool:
        """An unprotected label holder's data leave it without noise of their own."""
        return not self.role.party.protected

    @property
    def events(self) -> list[PrivacyEvent]:
        return self.role.events

    def model(self) -> np.ndarray:
        return self.role.party.w.copy()

    def describe(self) -> dict[str, Any]:
        return {"n_samples": self.n_samples, "n_features": self.n_features}

    def discard_replay_files(self) -> None:
        """Remove ``outbox/``: the ciphertexts it kept so that a replay sends the same bytes
        (hundreds of MB on a9a); the finished job's state is saved without them."""
        # a host's role keeps its ciphertexts in an Outbox (a MemoryOutbox is an engine's)
        shutil.rmtree(cast(Outbox, self.role.outbox).folder, ignore_errors=True)

    def model_details(self) -> dict[str, Any]:
        """The weight and clip of the passive party's shares: in the passive party's file
        when it was told the weight, in the label holder's when the weight stays with it."""
        role = self.role
        weight = role.weight
        if self.index == 0 and self.setup.protect == "parties" and role.weighting is not None:
            weight = role.weighting.beta
            share = "passive_weight * clip(passive share, -score_clip, score_clip)"
            return {
                "passive_weight": weight,
                "score_clip": self.setup.passive_score_bound,
                "passive_share": share,
                "guarantee": WEIGHTED_BOUND,
            }
        if self.setup.protect == "all":
            return {"guarantee": NO_FALLBACK}
        if weight is None:
            return {}
        return {
            "weight": weight,
            "score_clip": self.setup.passive_score_bound,
            "share": "weight * clip(rows @ coef, -score_clip, score_clip)",
            "guarantee": WEIGHTED_BOUND,
        }

    def peer_share(self, sender: str, scores: np.ndarray) -> np.ndarray:
        """A peer's prediction share as this recipient counts it (the label holder weighs the
        passive party's under ``protect="parties"``)."""
        return self.role.peer_share(scores)

    def final(self) -> dict[str, Any]:
        role = self.role
        out: dict[str, Any] = {
            "events": [asdict(e) for e in role.events],
            "n_features": self.n_features,
            "costs": {"bytes_sent": role.bytes_sent, "seconds": role.seconds},
        }
        if self.alignment is not None:
            out["alignment"] = {
                part: {"rows": len(v["ids"]), "digest": v["digest"]}
                for part, v in self.alignment["parts"].items()
            }
        if role.weighting is not None:  # under "parties" a function of its protected data
            out["passive_weighting"] = (
                role.weighting.as_dict() if self.setup.protect == "passive" else "kept"
            )
        return out

    @property
    def rows_digest(self) -> str | None:
        """The digest of its agreed training rows in an aligned job, else None."""
        return None if self.alignment is None else str(self.alignment["parts"]["train"]["digest"])

    def losses(self, models: list[list[float]]) -> list[float]:
        raise DpfedInputError("a secure vertical job is evaluated on test rows only.")

    def scores_of(self, block: Any) -> np.ndarray:
        """Its rows bounded as in training (the label holder's with the intercept column)
        times its final block."""
        party = self.role.party
        return self.role.share(
            np.asarray(party.prepared(block) @ party.w, dtype=np.float64).reshape(-1)
        )


class SecureVerticalProtocol(BaseProtocol):
    """A label holder and one to six passive parties training a logistic regression with the
    products under CKKS and Gaussian noise on d-vectors only."""

    name = SECURE_PROTOCOL
    params = job_parameters(SecureParams)
    holds = "columns"
    dataless_role = None
    same_rows = True
    messages = SECURE_MESSAGES
    prediction_messages = ALIGNMENT_MESSAGES
    report = RoundReport

    def check_parties(self, parties: Sequence[PartySpec]) -> None:
        if not 2 <= len(parties) <= MAX_PARTIES:
            raise DpfedInputError(
                f"a secure vertical job has a label holder and 1 to {MAX_PARTIES - 1} passive "
                f"parties (the CKKS parameters of 128-bit security hold {MAX_PARTIES - 1} "
                f"folds at most); found {len(parties)} parties."
            )

    def private(self, params: Mapping[str, Any]) -> bool:
        return True

    def check_job(self, spec: JobSpec) -> None:
        cfg = secure_params(spec.params)
        if cfg.label_holder_keeps_model and spec.allowed_recipients != (spec.names[0],):
            raise DpfedInputError(
                f"with [params].label_holder_keeps_model the label holder's block is its exact "
                f"model: predictions go to it ({spec.names[0]!r}) alone. Found "
                f"[job].prediction_recipients = {list(spec.allowed_recipients)}."
            )
        if spec.evaluate == "full":
            raise DpfedInputError(
                'a secure vertical job evaluates on test rows only: [job].evaluate = "full" '
                "would send exact training scores."
            )

    def host(self, spec: JobSpec, name: str) -> SecureVerticalHost:
        return SecureVerticalHost(spec, name)

    def prediction_output(self, spec: JobSpec, scores: np.ndarray) -> dict[str, Any]:
        """The summed scores (the intercept in the label holder's share) and the probability
        of the positive class."""
        return {"scores": scores.tolist(), "probability": (1.0 / (1.0 + np.exp(-scores))).tolist()}

    def result(self, spec: JobSpec, record: JobRecord) -> dict[str, Any]:
        """The ``result.json`` of a networked secure job (the keys of ``dpfed train vertical
        --secure``'s, the model blocks staying with the parties)."""
        cfg = secure_params(spec.params)
        accounts = record.accounts
        widths = [int(accounts[n]["n_features"]) for n in spec.names]
        n = next(iter(record.n_samples.values()))
        setup = secure_setup(cfg, n, widths)
        spent = {name: len(accounts[name]["events"]) for name in spec.names}
        costs = {name: accounts[name]["costs"] for name in spec.names}
        rounds = max(1, setup.rounds)
        final = dict(record.history[-1]) if record.history else {}
        data = {}
        if spec.align:
            agreed = {name: accounts[name].get("alignment") for name in spec.names}
            if len({repr(a) for a in agreed.values()}) != 1:
                raise DpfedInputError(f"the parties trained on different alignments: {agreed}.")
            data = {"data": {"alignment": {"align": spec.align, "parts": agreed[spec.names[0]]}}}
        return {
            "protocol": "vertical-secure",
            **data,
            "parties": [
                {"name": name, "n_features": w} for name, w in zip(spec.names, widths, strict=True)
            ],
            "history": record.history,
            "final": final,
            "privacy": {
                "mechanism": "secure vertical (CKKS products, Gaussian on d-vectors)",
                "protect": setup.protect,
                "epsilon": setup.epsilon_spent(),
                "accountant": "pld",
                "epsilon_target": setup.epsilon,
                "delta": setup.delta,
                "noise_multiplier": setup.noise_multiplier,
                "releases": setup.release_count,
                "rounds": setup.rounds,
                "recorded": spent,
                "sampler": "key holder: exact grid Gaussian; evaluator: float Gaussian inside CKKS",
                **(
                    {"passive_weighting": accounts[spec.names[0]]["passive_weighting"]}
                    if "passive_weighting" in accounts[spec.names[0]]
                    else {}
                ),
                # "kept": the weight stays with a label holder whose data are protected
            },
            "costs": {
                "bytes_per_round": sum(c["bytes_sent"] for c in costs.values()) / rounds,
                "seconds_per_round": record.seconds / rounds,
                "per_party": costs,
            },
            "seconds": record.seconds,
            "job": describe(spec),
        }


#: The secure vertical protocol, as registered in
#: :data:`dpfed.runtime.registry.PROTOCOL_REGISTRY`.
PROTOCOL = SecureVerticalProtocol()
