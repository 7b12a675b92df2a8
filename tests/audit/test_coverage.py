"""Every configuration the protocols accept under a privacy mechanism has an auditor.

The walk builds, for every private mechanism of every protocol and every registered loss, the
configuration a user could write (from the command line or a job file) and asks the protocol
whether it accepts it; then the mechanism's auditor must accept exactly the losses the
protocol does. A loss (or mechanism) added to a protocol without an audit fails here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from dpfed._validation import DpfedInputError
from dpfed.audit.auditors import AUDITORS, get_auditor
from dpfed.cli.vertical import secure_refusals
from dpfed.core.losses import LOSSES
from dpfed.parameters import parameters
from dpfed.protocols.consensus.driver import ConsensusConfig, client_release
from dpfed.protocols.decentralized.driver import DecentralizedConfig
from dpfed.protocols.vertical.driver import VerticalConfig, vertical_setup
from dpfed.protocols.vertical_secure import SecureSetup

N = 400  # rows of the walked jobs


def _choices(config: type, name: str) -> tuple[str, ...]:
    found = next(p for p in parameters(config) if p.name == name)
    assert found.info.choices is not None
    return found.info.choices


def _vertical(mechanism: str, protect: bool = False) -> Callable[[str], None]:
    def accept(loss: str) -> None:
        attempts = [{}]
        if protect:  # a ridge large enough for any curvature floor
            attempts.append({"lam": 10.0})
        errors = []
        for extra in attempts:
            try:
                cfg = VerticalConfig(
                    loss=loss,
                    mechanism=mechanism,
                    epsilon=1.0,
                    delta=1e-5,
                    protect_label_holder=protect,
                    **extra,
                ).validated()
                vertical_setup(cfg, [3, 3], N)
                return
            except DpfedInputError as exc:
                errors.append(exc)
        raise errors[-1]

    return accept


def _secure(protect: bool) -> Callable[[str], None]:
    def accept(loss: str) -> None:
        """The secure mode's refusals, as ``dpfed train vertical --secure`` makes them."""
        cfg = VerticalConfig(
            loss=loss, mechanism="sound", epsilon=1.0, delta=1e-5, protect_label_holder=protect
        ).validated()
        refusals = secure_refusals(argparse.Namespace(engine="inprocess"), cfg)
        if refusals:
            raise DpfedInputError("; ".join(refusals))
        SecureSetup(N, (3, 3), 1.0, 1e-5, protect="all" if protect else "passive")

    return accept


def _consensus(loss: str) -> None:
    cfg = ConsensusConfig(loss=loss, mechanism="gaussian", epsilon=1.0, delta=1e-5).validated()
    client_release(cfg, 1.0, 4, N)


def _decentralized(perturbation: str) -> Callable[[str], None]:
    def accept(loss: str) -> None:
        DecentralizedConfig(loss=loss, perturbation=perturbation, alpha=1.0).validated()

    return accept


#: (protocol, private mechanism) -> (its auditor, how the protocol accepts a loss)
WALK: dict[tuple[str, str], tuple[str, Callable[[str], None]]] = {
    ("vertical", "paper"): ("vertical-paper", _vertical("paper")),
    ("vertical", "sound"): ("vertical-sound", _vertical("sound")),
    ("vertical", "sound+protect_label_holder"): (
        "vertical-sound-label-holder",
        _vertical("sound", protect=True),
    ),
    ("vertical", "secure"): ("vertical-secure-passive", _secure(False)),
    ("vertical", "secure+protect_label_holder"): ("vertical-secure", _secure(True)),
    # the same rounds as protect_label_holder alone: the passive party's view of the labels
    # is that audit's (plus the label holder's request, under its own key); the passive
    # party's weighting statistics are audited by vertical-secure-passive
    ("vertical", "secure+label_holder_keeps_model"): ("vertical-secure", _secure(True)),
    ("consensus", "gaussian"): ("consensus-gaussian", _consensus),
    ("decentralized", "dvp"): ("decentralized-dvp", _decentralized("dvp")),
    ("decentralized", "pvp"): ("decentralized-pvp", _decentralized("pvp")),
}


def test_every_private_mechanism_of_every_protocol_is_walked():
    private = {("vertical", m) for m in _choices(VerticalConfig, "mechanism") if m != "none"}
    private.add(("vertical", "sound+protect_label_holder"))
    private |= {
        ("vertical", "secure"),
        ("vertical", "secure+protect_label_holder"),
        ("vertical", "secure+label_holder_keeps_model"),
    }
    private |= {("consensus", m) for m in _choices(ConsensusConfig, "mechanism") if m != "none"}
    private |= {
        ("decentralized", m) for m in _choices(DecentralizedConfig, "perturbation") if m != "none"
    }
    assert private == set(WALK)
    walked = {auditor for auditor, _ in WALK.values()}
    # the mechanisms without a loss: the secure sum and the Bayesian regression's statistics
    assert set(AUDITORS) - walked == {"secure-sum-gaussian", "secure-sum-discrete", "bayes-linreg"}
    for name in set(AUDITORS) - walked:
        assert AUDITORS[name].losses == ()


@pytest.mark.parametrize("where", sorted(WALK), ids=lambda w: "-".join(w))
def test_the_auditor_covers_exactly_the_losses_the_protocol_accepts(where):
    auditor, accept = WALK[where]
    accepted = []
    for loss in LOSSES:
        try:
            accept(loss)
        except DpfedInputError:
            continue
        accepted.append(loss)
    assert accepted, f"{where} accepts no loss"
    assert sorted(AUDITORS[auditor].losses) == sorted(accepted)
    for loss in accepted:  # and each of them builds its audit
        assert get_auditor(auditor, epsilon=1.0, delta=1e-5, loss=loss).loss_name == loss
