"""The label holder's acceleration of the rounds (VerticalConfig.acceleration)."""

import dataclasses

import numpy as np
import pytest

from dpfed._validation import DpfedInputError
from dpfed.core import get_loss, get_regularizer
from dpfed.data import load_dataset, vertical_split
from dpfed.data.preprocessing import normalize_rows, standardize_apply, standardize_fit
from dpfed.estimators.baselines import fit_centralized
from dpfed.protocols.vertical import LabelHolder, NoPrivacy, PassiveParty
from dpfed.protocols.vertical.driver import VerticalConfig, train_vertical, vertical_setup
from dpfed.protocols.vertical.mechanisms import DualRelease

from ...conftest import make_vertical_problem

REFERENCE = {"acceleration": "none"}  # the protocol before acceleration


def _breast_cancer():
    ds = load_dataset("breast_cancer")
    mean, scale = standardize_fit(ds.X_train)
    x, xt = standardize_apply(ds.X_train, mean, scale), standardize_apply(ds.X_test, mean, scale)
    blocks = [normalize_rows(b) for b in vertical_split(x, [15, 15])]
    test_blocks = [normalize_rows(b) for b in vertical_split(xt, [15, 15])]
    return blocks, ds.y_train, test_blocks, ds.y_test


def _rounds_to(history, target):
    return next((i + 1 for i, h in enumerate(history) if h["test_log_loss"] <= target), None)


def test_the_default_reaches_the_central_model_in_fewer_rounds_than_the_reference():
    blocks, y, test_blocks, y_test = _breast_cancer()
    lam = 1e-3
    central = fit_centralized(blocks, y, lam=lam, test_blocks=test_blocks, test_labels=y_test)
    target = central["test_log_loss"] + 0.005
    rounds = {}
    for name, extra in {"reference": REFERENCE, "default": {}}.items():
        result = train_vertical(
            blocks,
            y,
            VerticalConfig(lam=lam, iterations=30, **extra),
            test_blocks=test_blocks,
            test_labels=y_test,
        )
        rounds[name] = _rounds_to(result.history, target)
    assert rounds["reference"] is not None and rounds["reference"] >= 20
    assert rounds["default"] is not None and rounds["default"] <= 10


@pytest.mark.parametrize("acceleration", ["relaxed", "anderson"])
def test_accelerated_rounds_converge_to_the_same_model(acceleration):
    blocks, y = make_vertical_problem(split=(3, 2, 2))
    cfg = VerticalConfig(lam=1e-2, iterations=150, acceleration=acceleration)
    reference = train_vertical(blocks, y, dataclasses.replace(cfg, acceleration="none"))
    accelerated = train_vertical(blocks, y, cfg)
    for name, model in reference.models.items():
        np.testing.assert_allclose(accelerated.models[name], model, atol=1e-5)


def test_defaults_resolve_per_mechanism():
    none = VerticalConfig().validated()
    assert none.acceleration == "anderson" and none.warm_start_rounds == 5
    reference = VerticalConfig(acceleration="none").validated()
    assert reference.warm_start_rounds == 0
    sound = VerticalConfig(mechanism="sound", epsilon=4.0, delta=1e-5).validated()
    assert sound.acceleration == "none" and sound.warm_start_rounds == 30


def test_sound_results_are_unchanged_by_default():
    blocks, y = make_vertical_problem(split=(3, 2))
    cfg = VerticalConfig(
        mechanism="sound", noise_multiplier=2.0, delta=1e-5, seed=3, iterations=4, accountant="rdp"
    )
    default = train_vertical(blocks, y, cfg)
    reference = train_vertical(blocks, y, dataclasses.replace(cfg, **REFERENCE))
    for name, model in reference.models.items():
        np.testing.assert_array_equal(default.models[name], model)
    for a, b in zip(default.history, reference.history, strict=True):
        assert {k: v for k, v in a.items() if k != "seconds"} == {
            k: v for k, v in b.items() if k != "seconds"
        }


@pytest.mark.parametrize("acceleration", ["relaxed", "anderson"])
def test_acceleration_is_refused_with_a_protected_label_holder_or_the_paper_mechanism(acceleration):
    with pytest.raises(DpfedInputError, match="acceleration"):
        VerticalConfig(
            mechanism="sound",
            epsilon=4.0,
            delta=1e-5,
            protect_label_holder=True,
            acceleration=acceleration,
        ).validated()
    with pytest.raises(DpfedInputError, match="acceleration"):
        VerticalConfig(
            mechanism="paper", epsilon=4.0, delta=1e-5, acceleration=acceleration
        ).validated()
    protected = VerticalConfig(
        mechanism="sound", epsilon=4.0, delta=1e-5, protect_label_holder=True
    ).validated()
    assert protected.acceleration == "none"


def test_the_label_holder_refuses_acceleration_with_a_noisy_dual():
    blocks, y = make_vertical_problem(split=(3, 2))
    cfg = VerticalConfig(mechanism="sound", epsilon=4.0, delta=1e-5, protect_label_holder=True)
    setup = vertical_setup(cfg.validated(), [3, 2], blocks[0].shape[0])
    assert isinstance(setup.dual_release, DualRelease)
    with pytest.raises(DpfedInputError, match="protected label holder"):
        LabelHolder(
            "label",
            blocks[0],
            y,
            parties=["bank"],
            loss=get_loss("logistic"),
            rho=0.25,
            max_rounds=3,
            dual_release=setup.dual_release,
            anderson_memory=5,
            regularizer=get_regularizer("l2"),
            reg_weight=1.0,
            mechanism=setup.mechanisms[0],
            rng=np.random.default_rng(0),
        )


def _roles(blocks, y, rounds):
    common = dict(regularizer=get_regularizer("l2"), reg_weight=1.0, mechanism=NoPrivacy())
    holder = LabelHolder(
        "label",
        blocks[0],
        y,
        parties=["bank", "shop"],
        loss=get_loss("logistic"),
        rho=0.25,
        max_rounds=rounds,
        relaxation=1.6,
        anderson_memory=3,
        warm_start_rounds=2,
        rng=np.random.default_rng(0),
        **common,
    )
    parties = [
        PassiveParty(name, b, label_holder="label", rng=np.random.default_rng(i), **common)
        for i, (name, b) in enumerate(zip(["bank", "shop"], blocks[1:], strict=True), 1)
    ]
    return [holder, *parties]


def _drive(roles, messages, stop=None):
    """Deliver FIFO; with ``stop``, return the undelivered messages after that many."""
    by_name = {r.name: r for r in roles}
    queue, delivered = list(messages), 0
    while queue:
        if stop is not None and delivered == stop:
            return queue
        msg = queue.pop(0)
        queue.extend(by_name[msg.recipient].handle(msg))
        delivered += 1
    return []


@pytest.mark.parametrize("stop", [13, 20])  # after a broadcast; mid-round
def test_a_checkpoint_holds_the_anderson_memory_and_resumes_bit_for_bit(stop):
    blocks, y = make_vertical_problem(split=(3, 2, 2))
    whole = _roles(blocks, y, 10)
    _drive(whole, whole[0].start())

    first = _roles(blocks, y, 10)
    in_flight = _drive(first, first[0].start(), stop)
    assert in_flight
    arrays, meta = first[0].state_dict()
    assert any(k.startswith("anderson/") for k in arrays) and "anderson" in meta
    assert any(k.startswith("party_residual/") for k in arrays)
    fresh = _roles(blocks, y, 10)
    for old, new in zip(first, fresh, strict=True):
        new.load_state_dict(*old.state_dict())
    _drive(fresh, in_flight)
    for a, b in zip(whole, fresh, strict=True):
        np.testing.assert_array_equal(a.model, b.model)
    assert whole[0].history == fresh[0].history


def test_without_the_anderson_state_a_resume_drifts_apart():
    blocks, y = make_vertical_problem(split=(3, 2, 2))
    whole = _roles(blocks, y, 10)
    _drive(whole, whole[0].start())
    first = _roles(blocks, y, 10)
    in_flight = _drive(first, first[0].start(), 13)
    fresh = _roles(blocks, y, 10)
    for old, new in zip(first, fresh, strict=True):
        arrays, meta = old.state_dict()
        new.load_state_dict(
            {k: v for k, v in arrays.items() if not k.startswith("anderson/")}, meta
        )
    _drive(fresh, in_flight)
    assert not np.array_equal(whole[0].model, fresh[0].model)
