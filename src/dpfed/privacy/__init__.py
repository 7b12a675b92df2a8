"""Differential privacy: noise mechanisms, privacy accounting and the release ledger."""

from __future__ import annotations

from dpfed.privacy.accounting import (
    ACCOUNTANTS,
    advanced_composition,
    basic_composition,
    calibrate_noise_multiplier,
    check_accountant,
    check_classic_range,
    classic_gaussian_epsilon,
    classic_gaussian_sigma,
    corollary1_epsilon,
    gaussian_epsilon,
    gaussian_epsilon_heterogeneous,
    moments_accountant_epsilon,
)
from dpfed.privacy.ledger import PrivacyEvent, PrivacyLedger

__all__ = [
    "ACCOUNTANTS",
    "PrivacyEvent",
    "PrivacyLedger",
    "advanced_composition",
    "basic_composition",
    "calibrate_noise_multiplier",
    "check_accountant",
    "check_classic_range",
    "classic_gaussian_epsilon",
    "classic_gaussian_sigma",
    "corollary1_epsilon",
    "gaussian_epsilon",
    "gaussian_epsilon_heterogeneous",
    "moments_accountant_epsilon",
]
