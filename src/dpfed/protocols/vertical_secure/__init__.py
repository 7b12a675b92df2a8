"""Secure vertical logistic regression: the parties compute every product that mixes their
data under CKKS encryption, so only d-vectors, each with Gaussian noise of a central
curator's size, are ever decrypted. ``setup`` (public parameters and calibration),
``party`` (one party's state and the block update), ``driver`` (the job in one process)."""

from dpfed.protocols.vertical_secure.driver import SecureVerticalResult, train_secure_vertical
from dpfed.protocols.vertical_secure.setup import PROTECTIONS, SecureSetup

__all__ = ["PROTECTIONS", "SecureSetup", "SecureVerticalResult", "train_secure_vertical"]
