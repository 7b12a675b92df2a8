"""Tests for dpfed.privacy.accountants: the mechanism and accountant registries, the events
they read, and the one calibrator."""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpfed._validation import DpfedInputError
from dpfed.dca.calibration import DCA_METHODS
from dpfed.privacy import accountants
from dpfed.privacy.accountants import (
    ACCOUNTANT_REGISTRY,
    Accountant,
    accountant_names,
    calibrate,
    event_groups,
    gaussian_event,
    get_accountant,
    releases_event,
    smallest_certifying,
)
from dpfed.privacy.accounting import (
    ACCOUNTANTS,
    CLASSIC_ACCOUNTANTS,
    COUPLED_ACCOUNTANTS,
    NUMERICAL_ACCOUNTANTS,
    calibrate_noise_multiplier,
    gaussian_epsilon,
    releases_epsilon,
)
from dpfed.protocols.consensus.driver import CONSENSUS_ACCOUNTANTS
from dpfed.protocols.vertical.driver import VERTICAL_ACCOUNTANTS
from dpfed.runtime.budget import LEDGER_ACCOUNTANTS

DELTA = 1e-5


def test_every_list_of_accountants_is_a_query_of_the_registry():
    assert (
        ACCOUNTANTS == tuple(ACCOUNTANT_REGISTRY) == ("pld", "rdp", "advanced", "basic", "moments")
    )
    assert NUMERICAL_ACCOUNTANTS == VERTICAL_ACCOUNTANTS == LEDGER_ACCOUNTANTS == ("pld", "rdp")
    assert CLASSIC_ACCOUNTANTS == ("advanced", "basic")
    assert COUPLED_ACCOUNTANTS == ("pld", "advanced", "basic")
    assert CONSENSUS_ACCOUNTANTS == ("pld", "rdp", "moments")
    assert DCA_METHODS == ("pld", "rdp", "classic")
    with pytest.raises(DpfedInputError, match=r"accountant must be one of \('pld', 'rdp'"):
        get_accountant("zcdp")


def test_each_accountant_reads_the_mechanisms_it_can_bound():
    gaussian = releases_event([2.0, 3.0])
    pure = releases_event([2.0, ("l2_laplace", 4.0)])
    ring = releases_event([("discrete_gaussian", 3.0)])
    assert accountant_names(supporting=gaussian) == ACCOUNTANTS
    assert accountant_names(supporting=pure) == ("pld", "rdp")
    assert accountant_names(supporting=ring) == ("rdp",)
    foreign = dp_accounting.LaplaceDpEvent(1.0)  # coordinate-wise Laplace: not dpfed's
    assert accountant_names(supporting=foreign) == ()
    with pytest.raises(DpfedInputError, match="no mechanism of"):
        get_accountant("rdp").epsilon(foreign, DELTA)
    with pytest.raises(DpfedInputError, match=r"does not read releases of mechanisms \['l2_"):
        get_accountant("moments").epsilon(pure, DELTA)


def test_nested_compositions_are_read_as_their_releases():
    inner = dp_accounting.ComposedDpEvent(
        [gaussian_event(2.0, 3), dp_accounting.NoOpDpEvent(), gaussian_event(5.0)]
    )
    event = dp_accounting.ComposedDpEvent(
        [dp_accounting.SelfComposedDpEvent(inner, 2), releases_event([("l2_laplace", 4.0)])]
    )
    assert event_groups(event) == {"gaussian": [(2.0, 6), (5.0, 2)], "l2_laplace": [(4.0, 1)]}
    assert get_accountant("pld").epsilon(dp_accounting.NoOpDpEvent(), DELTA) == 0.0


@pytest.mark.parametrize("z", [0.8, 3.0, 20.0])
def test_the_numerical_accountants_agree_with_dp_accounting(z):
    event = dp_accounting.ComposedDpEvent([gaussian_event(z, 4), gaussian_event(2.0 * z, 3)])
    rdp = RdpAccountant()
    rdp.compose(event)
    assert get_accountant("rdp").epsilon(event, DELTA) == rdp.get_epsilon(DELTA)
    pld = PLDAccountant()
    pld.compose(event)
    exact = get_accountant("pld").epsilon(event, DELTA)
    # exact composition: at most dp-accounting's pessimistic discretisation, and close to it
    assert exact <= pld.get_epsilon(DELTA) <= exact * 1.01 + 1e-3


@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_one_calibrator_gives_the_smallest_certified_multiplier_of_any_release_shape(accountant):
    # a vertical round's shape: model and score releases of different multipliers, plus one
    def event_of(z):
        return dp_accounting.ComposedDpEvent(
            [gaussian_event(z / 0.8, 20), gaussian_event(z / 0.6, 10), gaussian_event(3.0 * z)]
        )

    acc = get_accountant(accountant)
    z = calibrate(event_of, 2.0, DELTA, accountant)
    assert acc.epsilon(event_of(z), DELTA) <= 2.0
    assert acc.epsilon(event_of(z * (1.0 - 1e-9)), DELTA) > 2.0
    # from a start far off, the same multiplier
    assert calibrate(event_of, 2.0, DELTA, accountant, start=50.0 * z) == pytest.approx(
        z, rel=1e-11
    )


@pytest.mark.parametrize("accountant", ACCOUNTANTS)
def test_the_homogeneous_fast_paths_agree_with_the_generic_calibrator(accountant):
    steps = 30
    fast = calibrate_noise_multiplier(4.0, DELTA, steps, accountant=accountant)
    generic = calibrate(lambda z: gaussian_event(z, steps), 4.0, DELTA, accountant)
    assert gaussian_epsilon(fast, steps, DELTA, accountant=accountant) <= 4.0
    # dp-accounting's RDP calibration stops at a tolerance of 1e-4 of the multiplier
    assert fast == pytest.approx(generic, rel=2e-4 if accountant == "rdp" else 1e-9)
    assert fast >= generic * (1.0 - 1e-12)


def test_the_calibrator_refuses_releases_its_accountant_cannot_read():
    with pytest.raises(DpfedInputError, match=r"accountant must be one of \('pld', 'rdp'\)"):
        calibrate(lambda z: releases_event([("l2_laplace", z)]), 1.0, DELTA, "basic")


def test_smallest_certifying_widens_its_bracket_both_ways():
    for bracket in [(1.0, 1.0), (1e-3, 1e-3), (1e4, 2e4)]:
        x = smallest_certifying(lambda s: 10.0 / s, 0.37, bracket=bracket, rtol=1e-12)
        assert 10.0 / x <= 0.37 and x == pytest.approx(10.0 / 0.37, rel=1e-11)
    with pytest.raises(DpfedInputError, match="cannot be reached"):
        smallest_certifying(lambda s: 1.0, 0.5)


def test_an_accountant_is_one_registered_class(monkeypatch):
    """What adding an accountant takes: one subclass, registered; the accounting functions
    and the queries of the registry then offer it."""

    class ZeroConcentrated(Accountant):
        """zCDP of Gaussian releases, rho = sum 1/(2 z^2), converted by
        epsilon = rho + 2 sqrt(rho ln(1/delta)) (Bun and Steinke 2016)."""

        name = "zcdp"
        mechanisms = ("gaussian",)

        def _epsilon(self, groups, delta):
            rho = math.fsum(n / (2.0 * z * z) for z, n in groups["gaussian"])
            return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))

    monkeypatch.setitem(ACCOUNTANT_REGISTRY, "zcdp", ZeroConcentrated())
    assert accountant_names(numerical=False, classic=False) == ("moments", "zcdp")
    rho = 10 / (2.0 * 4.0**2)
    expected = rho + 2.0 * math.sqrt(rho * math.log(1.0 / DELTA))
    assert releases_epsilon([4.0] * 10, DELTA, "zcdp") == pytest.approx(expected, rel=1e-14)
    z = calibrate_noise_multiplier(expected, DELTA, 10, accountant="zcdp")
    assert z == pytest.approx(4.0, rel=1e-10)
    with pytest.raises(DpfedInputError, match=r"one of \('pld', 'rdp'\) for releases of mech"):
        releases_epsilon([4.0, ("l2_laplace", 2.0)], DELTA, "zcdp")


def test_our_events_are_built_only_when_dp_accounting_is_needed():
    assert issubclass(accountants.L2LaplaceDpEvent, dp_accounting.DpEvent)
    assert issubclass(accountants.DiscreteGaussianDpEvent, dp_accounting.DpEvent)
    with pytest.raises(AttributeError):
        accountants.NoSuchEvent  # noqa: B018
