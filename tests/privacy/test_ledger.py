"""Tests for dpfed.privacy.ledger: recording, per-party accounting, JSON round trip."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from dpfed._validation import DpfedInputError
from dpfed.privacy import (
    PrivacyEvent,
    PrivacyLedger,
    advanced_composition,
    gaussian_epsilon,
    gaussian_epsilon_heterogeneous,
)
from dpfed.privacy.accounting import Release, releases_epsilon, releases_event


def _event(party: str = "a", rnd: int = 0, z: float = 4.0, c: float = 0.5, **kw) -> PrivacyEvent:
    return PrivacyEvent(
        party=party,
        round=rnd,
        mechanism=kw.pop("mechanism", "gaussian"),
        noise_multiplier=z,
        l2_sensitivity=c,
        sigma=z * c,
        **kw,
    )


@pytest.fixture
def ledger() -> PrivacyLedger:
    led = PrivacyLedger()
    for r in range(5):
        led.record(_event("a", r, 4.0, label="message", epsilon=0.2, delta=1e-6))
        led.record(_event("b", r, 6.0, c=2.0, label="model", epsilon=0.1, delta=1e-6))
    led.record(_event("a", 5, 8.0, label="dual", epsilon=0.3, delta=2e-6))
    return led


def test_record_and_query(ledger: PrivacyLedger) -> None:
    assert len(ledger) == 11
    assert ledger.parties() == ["a", "b"]
    assert [e.round for e in ledger.events("a")] == [0, 1, 2, 3, 4, 5]
    assert {e.party for e in ledger.events("b")} == {"b"}
    assert ledger.events("nobody") == []
    assert ledger.events()[-1].label == "dual"


def test_append_only(ledger: PrivacyLedger) -> None:
    got = ledger.events()
    got.clear()
    assert len(ledger) == 11
    for name in ("remove", "pop", "clear", "drop", "delete"):
        assert not hasattr(ledger, name)
    with pytest.raises(AttributeError):
        ledger.events()[0].noise_multiplier = 100.0  # frozen


def test_per_party_epsilon(ledger: PrivacyLedger) -> None:
    for acc in ("rdp", "moments"):
        assert ledger.epsilon("a", 1e-5, accountant=acc) == gaussian_epsilon_heterogeneous(
            [4.0] * 5 + [8.0], 1e-5, accountant=acc
        )
    # z = 4 lies outside the classical bound's range at these per-step deltas (per-step
    # epsilon 1.3): the classical accountants refuse party a and account for party b (z = 6)
    for acc in ("advanced", "basic"):
        with pytest.raises(DpfedInputError, match=r"proven only for a per-step epsilon <= 1"):
            ledger.epsilon("a", 1e-5, accountant=acc)
        assert ledger.epsilon("b", 1e-5, accountant=acc) == gaussian_epsilon_heterogeneous(
            [6.0] * 5, 1e-5, accountant=acc
        )
    # party b: five equal releases -> the homogeneous figure; unaffected by party a
    assert ledger.epsilon("b", 1e-5) == pytest.approx(gaussian_epsilon(6.0, 5, 1e-5), rel=1e-12)
    assert ledger.epsilon("a", 1e-5, accountant="rdp") > ledger.epsilon("b", 1e-5, accountant="rdp")


def test_epsilon_grows_with_each_release() -> None:
    led = PrivacyLedger()
    eps = []
    for r in range(4):
        led.record(_event("a", r, 5.0))
        eps.append(led.epsilon("a", 1e-5, accountant="rdp"))
    assert all(x < y for x, y in itertools.pairwise(eps))


def test_paper_epsilon(ledger: PrivacyLedger) -> None:
    eps_prime, delta_total = ledger.paper_epsilon("a", 1e-5)
    epsilons = [0.2] * 5 + [0.3]
    expected = math.sqrt(2 * math.log(1e5) * sum(e * e for e in epsilons)) + sum(
        e * math.expm1(e) for e in epsilons
    )
    assert eps_prime == pytest.approx(expected, rel=1e-12)
    assert delta_total == pytest.approx(5e-6 + 2e-6 + 1e-5, rel=1e-12)
    assert (eps_prime, delta_total) == advanced_composition(epsilons, [1e-6] * 5 + [2e-6], 1e-5)


def test_paper_epsilon_needs_stated_epsilons(ledger: PrivacyLedger) -> None:
    ledger.record(_event("a", 6, 4.0, label="model"))
    with pytest.raises(DpfedInputError, match="epsilon=None"):
        ledger.paper_epsilon("a", 1e-5)
    ledger.paper_epsilon("b", 1e-5)  # b is still fine


def test_summary(ledger: PrivacyLedger) -> None:
    s = ledger.summary(1e-5, "rdp")
    assert s["parties"]["a"]["releases"] == 6
    assert s["parties"]["b"]["releases"] == 5
    assert s["parties"]["a"]["epsilon"] == ledger.epsilon("a", 1e-5, accountant="rdp")
    assert s["max_epsilon"] == max(v["epsilon"] for v in s["parties"].values())
    assert s["max_epsilon"] == s["parties"]["a"]["epsilon"]
    assert PrivacyLedger().summary(1e-5, "rdp")["max_epsilon"] == 0.0
    json.dumps(s)


def test_json_round_trip(ledger: PrivacyLedger) -> None:
    text = json.dumps(ledger.to_json())
    for back in (PrivacyLedger.from_json(text), PrivacyLedger.from_json(json.loads(text))):
        assert back.events() == ledger.events()
        assert back.epsilon("a", 1e-5, accountant="rdp") == ledger.epsilon(
            "a", 1e-5, accountant="rdp"
        )
        assert back.paper_epsilon("b", 1e-6) == ledger.paper_epsilon("b", 1e-6)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([{"party": "a"}], "Missing"),
        ([{**_event().to_dict(), "extra": 1}], "extra"),
        ([{**_event().to_dict(), "noise_multiplier": -1.0, "sigma": -0.5}], "-1.0"),
        ({"party": "a"}, "list"),
        ("not json", "JSON"),
    ],
)
def test_from_json_rejects_bad_data(data, fragment: str) -> None:
    with pytest.raises(DpfedInputError, match=fragment):
        PrivacyLedger.from_json(data)


@pytest.mark.parametrize("z", [0.0, -1.0, math.inf, math.nan])
def test_refuses_bad_noise_multiplier(z: float) -> None:
    with pytest.raises(DpfedInputError, match="noise_multiplier") as info:
        PrivacyEvent(
            party="a",
            round=0,
            mechanism="gaussian",
            noise_multiplier=z,
            l2_sensitivity=1.0,
            sigma=1.0,
        )
    assert repr(z) in str(info.value)


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"sigma": 3.0}, "sigma / l2_sensitivity"),  # z = 4, C = 0.5 -> sigma must be 2
        ({"sigma": math.inf}, "sigma"),
        ({"l2_sensitivity": 0.0}, "l2_sensitivity"),
        ({"party": ""}, "party"),
        ({"round": -1}, "round"),
        ({"mechanism": 3}, "mechanism"),
        ({"epsilon": 0.1}, "together"),
        ({"epsilon": -0.1, "delta": 1e-6}, "-0.1"),
        ({"epsilon": 0.1, "delta": 1.0}, "delta"),
    ],
)
def test_refuses_bad_fields(changes: dict, fragment: str) -> None:
    fields = _event().to_dict() | changes
    with pytest.raises(DpfedInputError, match=fragment):
        PrivacyEvent(**fields)


def test_record_revalidates() -> None:
    led = PrivacyLedger()
    with pytest.raises(DpfedInputError, match="PrivacyEvent"):
        led.record({"party": "a"})  # type: ignore[arg-type]
    ev = _event()
    object.__setattr__(ev, "noise_multiplier", math.inf)  # tampered after construction
    with pytest.raises(DpfedInputError, match="inf"):
        led.record(ev)
    assert len(led) == 0


def test_epsilon_errors(ledger: PrivacyLedger) -> None:
    with pytest.raises(DpfedInputError, match="'zz'"):
        ledger.epsilon("zz", 1e-5)
    with pytest.raises(DpfedInputError, match="'gdp'"):
        ledger.epsilon("a", 1e-5, accountant="gdp")
    with pytest.raises(DpfedInputError, match=r"1\.5"):
        ledger.epsilon("a", 1.5)
    ledger.record(_event("c", 0, 4.0, mechanism="laplace"))
    with pytest.raises(DpfedInputError, match="laplace"):
        ledger.epsilon("c", 1e-5)


def test_pure_and_gaussian_releases_of_a_party_compose() -> None:
    led = PrivacyLedger()
    for r in range(3):
        led.record(_event("a", r, 4.0))
        led.record(_event("a", r, 10.0, mechanism="l2_laplace", label="model"))
    expected = releases_epsilon(
        [Release("gaussian", 4.0)] * 3 + [Release("l2_laplace", 10.0)] * 3, 1e-5
    )
    assert led.epsilon("a", 1e-5) == expected
    assert led.releases("a")[:2] == [Release("gaussian", 4.0), Release("l2_laplace", 10.0)]
    assert led.dp_event("a") == releases_event(led.releases("a"))
    with pytest.raises(DpfedInputError, match=r"one of \('pld', 'rdp'\)"):
        led.epsilon("a", 1e-5, accountant="advanced")
