"""The budget plan of each party: what the networked runtime reserves before the first round
must be exactly what the party then releases."""

from __future__ import annotations

import numpy as np
import pytest

from dpfed._validation import DpfedInputError, check_binary_labels
from dpfed.privacy.accounting import Release, as_release, releases_epsilon
from dpfed.privacy.gaussian import GaussianRelease
from dpfed.protocols.vertical.driver import (
    VerticalConfig,
    make_vertical_role,
    party_rng,
    planned_multipliers,
    train_vertical,
    vertical_setup,
)
from dpfed.protocols.vertical.mechanisms import NoPrivacy, PaperMechanism, SoundMechanism

from ...conftest import make_vertical_problem

NAMES = ["label", "bank", "shop"]


@pytest.fixture(scope="module")
def problem():
    return make_vertical_problem(n=100, split=(4, 3, 2), seed=5)


def _host_plan(config: VerticalConfig, blocks, y, index: int) -> list[float]:
    """Party ``index``'s plan, derived as dpfed.protocols.vertical.host.VerticalHost does: its own
    setup from the configuration and the shapes, its role built, then the plan."""
    cfg = config.validated()
    setup = vertical_setup(cfg, [b.shape[1] for b in blocks], blocks[index].shape[0])
    rng = party_rng(setup.config.seed, index, len(blocks))
    labels = check_binary_labels("labels", y) if index == 0 else None
    make_vertical_role(setup, index, NAMES, blocks[index], rng=rng, labels=labels)
    return planned_multipliers(setup, index, blocks[index].shape[1])


def _check_plans_match_releases(config, blocks, y) -> dict[str, list[float]]:
    result = train_vertical(blocks, y, config, names=NAMES)
    assert len(result.history) == result.config.iterations  # every round ran
    plans = {}
    for index, name in enumerate(NAMES):
        plan = _host_plan(config, blocks, y, index)
        # the same mechanism, multiplier and exact-grid coordinates, release for release
        released = sorted(
            Release(e.mechanism, e.noise_multiplier, e.coordinates)
            for e in result.ledger.events(name)
        )
        assert sorted(as_release(p) for p in plan) == released, name
        plans[name] = plan
    return plans


SOUND = dict(mechanism="sound", delta=1e-5, seed=2, iterations=3, accountant="rdp")


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(dict(epsilon=4.0), id="epsilon-rdp"),
        pytest.param(dict(noise_multiplier=1.5), id="multiplier"),
        pytest.param(dict(noise_multiplier=1.5, score_rounds=1), id="score-rounds-1"),
        pytest.param(dict(noise_multiplier=1.5, score_rounds=0), id="score-rounds-0"),
        pytest.param(dict(noise_multiplier=1.5, score_rounds=9), id="score-rounds-above-T"),
    ],
)
def test_sound_plan_is_what_each_party_releases(problem, options):
    blocks, y = problem
    config = VerticalConfig(**(SOUND | options))
    plans = _check_plans_match_releases(config, blocks, y)
    cfg = config.validated()
    score_rounds = (
        cfg.iterations - 1 if cfg.score_rounds is None else min(cfg.score_rounds, cfg.iterations)
    )
    assert plans["label"] == []  # unprotected label holder: its data leave it exactly
    for name in ("bank", "shop"):
        assert len(plans[name]) == cfg.iterations + score_rounds + int(cfg.passive_weighting)
        if cfg.epsilon is not None:
            spent = releases_epsilon(plans[name], cfg.delta, cfg.accountant)
            assert spent <= cfg.epsilon


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(dict(epsilon=4.0), id="epsilon"),
        pytest.param(dict(noise_multiplier=1.5), id="multiplier"),
        pytest.param(dict(noise_multiplier=1.5, score_rounds=1), id="score-rounds-1"),
    ],
)
def test_protected_label_holder_plan_is_what_it_releases(problem, options):
    blocks, y = problem
    config = VerticalConfig(**(SOUND | options), protect_label_holder=True)
    plans = _check_plans_match_releases(config, blocks, y)
    cfg = config.validated()
    steps = cfg.iterations
    scores = steps - 1 if cfg.score_rounds is None else min(cfg.score_rounds, steps)
    # the label holder: its local model once, a dual in rounds 0 .. T-1; passive parties as
    # without protection (no statistics: weighting is off)
    assert len(plans["label"]) == 1 + steps
    assert len(plans["bank"]) == len(plans["shop"]) == steps + scores
    if cfg.epsilon is not None:
        for plan in plans.values():
            assert releases_epsilon(plan, cfg.delta, cfg.accountant) <= cfg.epsilon


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(dict(epsilon=2.0), id="epsilon"),
        pytest.param(dict(noise_sigma=0.5), id="sigma"),
    ],
)
def test_paper_plan_is_what_each_party_releases(problem, options):
    blocks, y = problem
    config = VerticalConfig(mechanism="paper", delta=1e-5, seed=4, iterations=3, **options)
    plans = _check_plans_match_releases(config, blocks, y)
    assert all(len(plan) == 3 for plan in plans.values())
    assert all(np.isfinite(plan).all() and min(plan) > 0 for plan in plans.values())


# rho moves under residual balancing here (0.01, 0.02, 0.04, ...), which the plan ignores
PAPER_ADAPTIVE = VerticalConfig(
    mechanism="paper",
    noise_sigma=0.5,
    delta=1e-5,
    seed=1,
    iterations=6,
    lam=1.0,
    rho=0.01,
    adaptive_rho=True,
)


def test_adaptive_rho_moves_rho_in_the_paper_case(problem):
    blocks, y = problem
    result = train_vertical(blocks, y, PAPER_ADAPTIVE, names=NAMES)
    assert len({h["rho"] for h in result.history}) > 1


def test_networked_host_refuses_paper_with_adaptive_rho(tmp_path):
    """The paper mechanism's multiplier follows rho, so its releases cannot be planned."""
    from dpfed._validation import DpfedInputError
    from dpfed.protocols.vertical.host import VerticalHost
    from dpfed.runtime.jobfile import load_job

    parties = "".join(
        f"""
[[party]]
name = "{name}"
address = "127.0.0.1:{port}"
data = "breast_cancer"
columns = [{a}, {b}]
certificate = "c.pem"
key = "c.key"
"""
        for name, port, a, b in (("label", 1, 0, 15), ("bank", 2, 15, 30))
    )
    (tmp_path / "job.toml").write_text(
        """[job]
id = "j"
protocol = "vertical"
[params]
mechanism = "paper"
noise_sigma = 0.5
delta = 1e-5
adaptive_rho = true
[tls]
ca = "ca.pem"
[leader]
address = "127.0.0.1:3"
certificate = "l.pem"
key = "l.key"
"""
        + parties
    )
    with pytest.raises(DpfedInputError, match="adaptive_rho = false"):
        VerticalHost(load_job(tmp_path / "job.toml"), "bank")


def test_no_mechanism_plans_nothing(problem):
    blocks, y = problem
    config = VerticalConfig(iterations=3, seed=0)
    result = train_vertical(blocks, y, config, names=NAMES)
    assert len(result.ledger) == 0
    for index, name in enumerate(NAMES):
        assert _host_plan(config, blocks, y, index) == []
        assert result.ledger.events(name) == []


@pytest.mark.parametrize(
    ("options", "kinds"),
    [
        (dict(), [NoPrivacy, NoPrivacy, NoPrivacy]),
        (dict(mechanism="paper", noise_sigma=0.5, delta=1e-5), [PaperMechanism] * 3),
        (
            dict(mechanism="sound", noise_multiplier=1.0, delta=1e-5),
            [NoPrivacy, *[SoundMechanism] * 2],
        ),
        (
            dict(mechanism="sound", noise_multiplier=1.0, delta=1e-5, protect_label_holder=True),
            [SoundMechanism] * 3,
        ),
    ],
)
def test_setup_builds_one_mechanism_per_party(options, kinds):
    setup = vertical_setup(VerticalConfig(iterations=3, **options).validated(), [4, 3, 2], 100)
    assert [type(m) for m in setup.mechanisms] == kinds
    assert setup.n_samples == 100
    assert (setup.dual_release is not None) == bool(options.get("protect_label_holder"))
    if options.get("mechanism") == "sound":
        assert setup.config.bounds is not None  # the public rule's bounds are recorded


def test_party_rng_streams_are_reproducible_and_distinct():
    draws = [party_rng(9, m, 3).standard_normal(4) for m in range(3)]
    again = [party_rng(9, m, 3).standard_normal(4) for m in range(3)]
    for a, b in zip(draws, again, strict=True):
        assert np.array_equal(a, b)
    assert not np.array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[1], draws[2])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(mechanism="sound", noise_sigma=1.0), "noise_sigma belongs to the other mechanism"),
        (
            dict(mechanism="paper", noise_multiplier=1.0),
            "noise_multiplier belongs to the other mechanism",
        ),
        (
            dict(mechanism="sound", epsilon=1.0, noise_multiplier=1.0),
            "exactly one of epsilon or noise_multiplier",
        ),
        (dict(mechanism="paper"), "exactly one of epsilon or noise_sigma"),
        (dict(noise_multiplier=1.0), "need a privacy mechanism"),
    ],
)
def test_each_mechanism_takes_its_own_noise_scale(options, message):
    # the sound mechanism's scale is a multiplier of its enforced sensitivity, the paper's an
    # absolute sigma: one option for both would let a user pass the one meaning the other
    with pytest.raises(DpfedInputError, match=message):
        VerticalConfig(delta=1e-5, **options).validated()


def test_sound_releases_lie_on_their_grid_and_record_their_coordinates(problem):
    blocks, y = problem
    config = VerticalConfig(**(SOUND | dict(epsilon=4.0)), protect_label_holder=True)
    result = train_vertical(blocks, y, config, names=NAMES)
    n = blocks[0].shape[0]
    widths = {name: b.shape[1] for name, b in zip(NAMES, blocks, strict=True)}
    widths[NAMES[0]] += 1  # the label holder's model holds its intercept's weight
    for name in NAMES:
        events = result.ledger.events(name)
        assert events
        for e in events:
            expected = widths[name] if e.label == "model" else (3 if e.label == "statistics" else n)
            assert e.coordinates == expected, (name, e.label)
        assert result.privacy["per_party"][name]["grid_coordinates"] == sum(
            e.coordinates for e in events
        )
    assert result.privacy["sampler"].startswith("exact discrete Gaussian")
    # the grid's noise is at least the recorded sigma
    holder = next(e for e in result.ledger.events("label") if e.label == "model")
    release = GaussianRelease.from_multiplier(
        "model", holder.l2_sensitivity, holder.noise_multiplier
    )
    assert release.grid(widths["label"]).sigma >= holder.sigma
